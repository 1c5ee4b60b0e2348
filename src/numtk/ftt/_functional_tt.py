"""FunctionalTT: functions of d variables in the functional tensor-train format (spec §2.7, §3.1)."""

from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

import numpy as np

from numtk._lib import n_threads, normalize_rng, single_blas_thread
from numtk._lib._constraints import constraints
from numtk._lib._estimator import Estimator, check_is_fitted
from numtk._lib._validation import (as_array, as_regression_target, check_bool, check_callback, check_finite,
                                     check_int, check_option, check_real, per_coordinate)
from numtk.ftt import _basis
from numtk.ftt._basis import Basis1D

__all__ = ["FunctionalTT"]

_BASES = ("legendre", "hermite", "bspline")
_EXTRAPOLATE = ("linear", "clip", "raise")
_INITS = ("additive", "random")
_MAX_N = 512
_MAX_RANK = 256      # initial ranks and rank caps
_MAX_SWEEPS = 10_000
# the additive start's normal equations: formed (P x P) up to this many unknowns (sum of the n_k), in
# row chunks of at most this many design entries; above it LSQR works on the design's chunks instead
_ADDITIVE_DENSE_MAX = 2048
_ADDITIVE_CHUNK_ENTRIES = 1 << 22


@constraints(basis="option", degree="int>=0", ranks="int>=1", domain="array2d", loc="real", scale="real>0",
             extrapolate="option", init="option", sweeps="count", tol="real>=0",
             regularization=("real>=0", "mapping"), rank_adaptive="bool", max_rank="int>=1", rank_tol="real>=0",
             callback="callable", progress="bool", rng="rng", workers="workers")
class FunctionalTT(Estimator):
    r"""A function of d variables as a functional tensor train, fitted by ALS with rank adaptation.

    The model is :math:`f(x) = G_1(x_1) G_2(x_2) \cdots G_d(x_d)` with matrix-valued univariate
    factors :math:`G_k(x) = \sum_i C_k[:, i, :] \phi^{(k)}_i(x)` expanded in a basis per coordinate.
    Values, gradients and Laplacians cost :math:`O(M d n r^2)` for M points (one compiled
    prefix/suffix pass).

    A scikit-learn regressor: every parameter below is stored unchanged by the constructor and checked
    by :meth:`fit`, so :func:`sklearn.base.clone`, pipelines and grid searches work.

    Parameters
    ----------
    basis : {'legendre', 'hermite', 'bspline'} or sequence of these, default 'legendre'
        Basis per coordinate: orthonormal Legendre polynomials on a box, orthonormal probabilists'
        Hermite polynomials for N(loc, scale^2), or cubic B-splines on a uniform open knot vector.
    degree : int or sequence of int, default 8
        ``n_k = degree + 1`` basis functions per coordinate (``'bspline'`` needs ``degree >= 3``).
    ranks : int or sequence of int, default 2
        Initial internal ranks (all bonds, or a length-(d-1) sequence); the additive start has at least 2.
    domain : None or array of shape (d, 2), optional
        The box of the bounded bases. ``None`` infers ``[min, max]`` of the training data per
        coordinate, padded by 5% of its width. Rows of ``'hermite'`` coordinates are ignored; with only
        Hermite coordinates ``domain`` must be ``None``.
    loc, scale : float or sequence of float, default 0.0 and 1.0
        Centre and width of the Hermite bases (ignored for bounded bases); ``scale > 0``.
    extrapolate : {'linear', 'clip', 'raise'}, default 'linear'
        Outside the box the bounded bases continue linearly from the edge, stay at the edge value,
        or evaluating raises ValueError.
    init : {'additive', 'random'} or fitted FunctionalTT, default 'additive'
        The cores ALS starts from. ``'additive'``: the weighted least-squares additive model
        ``c + f_1(x_1) + ... + f_d(x_d)`` (in the same bases) written as its exact rank-2 train (padded to
        ``ranks``); every linear model is in its span. ``'random'``: the constant ``mean(y)`` plus small
        random rank padding (see Notes for why this is not the default). A fitted FunctionalTT: a warm
        start from its cores and bases (its domain is used; the kinds and degrees must be this
        estimator's), as a sequence of related fits (the time steps of a BSDE solver) does. Like KMeans'
        ``init`` array, a fitted train given here is data: :func:`sklearn.base.clone` keeps it as it is.
    sweeps : int, default 10
        Maximum number of full (left-to-right and back) sweeps.
    tol : float, default 1e-6
        Stop when the relative change of the validation RMSE between sweeps is below ``tol``.
    regularization : float or dict, default 1e-8
        Ridge weight, or ``{'ridge': lam, 'h2': lam2}`` adding ``lam2`` times the integral of the
        squared second derivative of each core's univariate functions.
    rank_adaptive : bool, default True
        Truncate negligible singular values (below ``rank_tol`` times the largest) and, when the
        validation RMSE improves by less than 5% over a sweep, enrich every bond by one direction
        fitted to the current residual (a correction core between the left interface and a random
        sketch of the sites to the right; a random direction for ``directional`` fits). No
        enrichment once the validation error is within ``10 * rank_tol`` of the data's scale.
    max_rank : int, default 10
        Largest rank any bond may reach (at most 64).
    rank_tol : float, default 1e-8
        Relative singular-value threshold of the truncation.
    callback : callable, optional
        ``callback(intermediate_result)`` after each sweep, with a :class:`~numtk._lib.Result` of fields
        ``n_iter`` (sweeps done), ``train_rmse``, ``val_rmse`` (the current model's errors), ``ranks`` and
        ``cores`` (copies of the current cores). Raising ``StopIteration`` in it ends the fit normally
        (``status_ == 'callback'``); its return value is ignored.
    progress : bool, default False
        Show a tqdm bar over the sweeps.
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of the validation split, the initial padding and the enrichment directions. An int
        makes every :meth:`fit` reproducible; a Generator is drawn from (successive fits differ).
    workers : int, default 1
        Threads of the evaluation kernel (:meth:`predict`, :meth:`gradient`, :meth:`laplacian`,
        :meth:`evaluate`) and of the assembly of the normal equations in :meth:`fit` (rows split
        between threads); ``-1`` uses every available core.

    Attributes
    ----------
    cores_ : list of ndarray
        Core k has shape ``(r_{k-1}, n_k, r_k)``, float64.
    ranks_ : tuple of int
        ``(1, r_1, ..., r_{d-1}, 1)``.
    domain_ : ndarray of shape (d, 2)
        The box per coordinate (``[-inf, inf]`` for Hermite coordinates).
    bases_ : tuple of Basis1D
        The fitted basis of each coordinate, read-only: ``kind`` (``'legendre'``, ``'bspline'`` or
        ``'hermite'``), ``n`` (functions, degree + 1), ``p0, p1`` (the box for bounded bases, ``loc, scale``
        for Hermite) and ``bounded``.
    n_features_in_ : int
        d.
    n_iter_ : int
        Number of ALS sweeps run (0 for :meth:`from_cores` and arithmetic results).
    history_ : list of dict
        Per half-sweep: ``sweep``, ``direction``, ``train_rmse``, ``val_rmse``, ``ranks``.
    status_ : str or None
        Why the fit stopped: ``'converged'`` (the relative change of the validation RMSE fell below
        ``tol``, or the fit is exact to round-off), ``'stalled'`` (no sweep validated better for several
        sweeps), ``'max_iterations'`` (``sweeps`` spent) or ``'callback'`` (the callback raised
        ``StopIteration``). In every case the model kept is the one that validated best. None for trains
        made by :meth:`from_cores`, :meth:`round`, :meth:`additive` and arithmetic.
    message_ : str
        ``status_`` in words.

    See Also
    --------
    tt_cross : a FunctionalTT from function evaluations instead of data.

    Notes
    -----
    10% of the rows (chosen by ``rng``; none when fewer than 20 rows) are held out to measure the
    validation RMSE, which decides convergence, rank enrichment and the model kept (the best one, the
    starting model included).

    The start matters because ALS fits the cores one at a time, each through the interfaces the others
    leave. From a near-constant start (``init='random'``), the first cores are fitted to a target they
    cannot explain: when ``y`` has mean close to zero their least-squares fit has almost no constant
    part, and the orthonormalised left interface no longer contains the constant function, so a term
    that depends only on a later coordinate (``y = x_10`` in ten dimensions) cannot be represented; ALS
    then fits products of noise, the validation error grows while the training error falls, and the
    constant start is the model kept (on scikit-learn's regression check data, 200 points in ten
    dimensions with one informative feature: R^2 = 0 at degree 2, where the linear model has 0.81; an
    exactly linear ``y = x_10`` also gave R^2 = 0). The additive start carries the constant function in
    every interface and is itself the best additive model, so ALS adds interactions to it and falls back
    to it when they do not validate better. Its normal equations have ``sum_k n_k`` unknowns (LSQR
    beyond 2048).

    References
    ----------
    .. [1] "Leveraging Low-Rank Structures for High-Dimensional Score-Based Sampling", ICML 2026.
    .. [2] I. V. Oseledets, "Tensor-train decomposition", SIAM J. Sci. Comput. 33 (2011).
    .. [3] L. Richter, L. Sallandt, N. Nüsken, "Solving high-dimensional parabolic PDEs using the
       tensor train format", ICML 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.ftt import FunctionalTT
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 4))
    >>> y = np.sin(X[:, 0]) + X[:, 1] ** 2 + np.cos(X[:, 2]) * X[:, 3]
    >>> f = FunctionalTT(degree=10, ranks=1, sweeps=20, rng=0).fit(X, y)
    >>> f.ranks_
    (1, 2, 2, 2, 1)
    >>> bool(np.max(np.abs(f.predict(X) - y)) < 1e-5)
    True
    """

    _estimator_kind = "regressor"

    def __init__(self, basis: str | Sequence[str] = "legendre", degree: int | Sequence[int] = 8,
                 ranks: int | Sequence[int] = 2, domain: Any = None, *, loc: float | Sequence[float] = 0.0,
                 scale: float | Sequence[float] = 1.0, extrapolate: str = "linear",
                 init: "str | FunctionalTT" = "additive", sweeps: int = 10, tol: float = 1e-6,
                 regularization: float | dict = 1e-8, rank_adaptive: bool = True, max_rank: int = 10,
                 rank_tol: float = 1e-8, callback: Callable | None = None, progress: bool = False,
                 rng: Any = None, workers: Any = 1) -> None:
        self.basis = basis
        self.degree = degree
        self.ranks = ranks
        self.domain = domain
        self.loc = loc
        self.scale = scale
        self.extrapolate = extrapolate
        self.init = init
        self.sweeps = sweeps
        self.tol = tol
        self.regularization = regularization
        self.rank_adaptive = rank_adaptive
        self.max_rank = max_rank
        self.rank_tol = rank_tol
        self.callback = callback
        self.progress = progress
        self.rng = rng
        self.workers = workers

    def __sklearn_clone__(self) -> "FunctionalTT":
        """scikit-learn's :func:`~sklearn.base.clone`: an unfitted estimator with the same parameters.

        Parameters are cloned as scikit-learn does, except a fitted FunctionalTT given as ``init``: it is
        the starting point (data, as KMeans' ``init`` array), so it is kept fitted instead of being
        replaced by an unfitted copy.
        """
        from sklearn.base import clone

        params = {name: value if name == "init" and isinstance(value, FunctionalTT) else clone(value, safe=False)
                  for name, value in self.get_params(deep=False).items()}
        return type(self)(**params)

    # ------------------------------------------------------------------------------------------------
    # parameters

    def _resolve_bases(self, d: int, X: np.ndarray | None) -> list[Basis1D]:
        kinds = per_coordinate(self.basis, d, "basis", real=False)
        for kind in kinds:
            if not isinstance(kind, str) or kind not in _BASES:
                raise ValueError(f"`basis` entries must be one of 'legendre', 'hermite', 'bspline'; got {kind!r}")
        degrees = [check_int(v, "degree", minimum=0, maximum=_MAX_N - 1)
                   for v in per_coordinate(self.degree, d, "degree", real=False)]
        for kind, deg in zip(kinds, degrees):
            if kind == "bspline" and deg < 3:
                raise ValueError(f"`degree` must be >= 3 for the cubic 'bspline' basis; got {deg}")
        locs = [float(v) for v in per_coordinate(self.loc, d, "loc")]
        scales = [check_real(float(v), "scale", low=0.0, low_open=True) for v in per_coordinate(self.scale, d, "scale")]
        check_option(self.extrapolate, "extrapolate", _EXTRAPOLATE)
        bounded = [k != "hermite" for k in kinds]
        if self.domain is not None:
            if not any(bounded):
                raise ValueError("`domain` must be None for the 'hermite' basis (use `loc` and `scale`)")
            dom = as_array(self.domain, "domain", ndim=2).astype(float)
            if dom.shape != (d, 2):
                raise ValueError(f"`domain` must have shape ({d}, 2); got {dom.shape}")
            dom_b = dom[np.array(bounded)]
            if not np.all(np.isfinite(dom_b)):
                raise ValueError("`domain` must be finite")
            if not np.all(dom_b[:, 0] < dom_b[:, 1]):
                raise ValueError("`domain` rows must satisfy lo < hi")
        elif any(bounded):
            if X is None:
                raise ValueError("`domain` is required for bounded bases ('legendre', 'bspline') here")
            lo, hi = X.min(axis=0).astype(float), X.max(axis=0).astype(float)
            width = hi - lo
            pad = np.where(width > 0, 0.05 * width, np.maximum(0.05 * np.abs(lo), 0.5))
            dom = np.column_stack([lo - pad, hi + pad])
        else:
            dom = np.zeros((d, 2))
        out = []
        for k in range(d):
            n = degrees[k] + 1
            if bounded[k]:
                out.append(Basis1D(kinds[k], n, float(dom[k, 0]), float(dom[k, 1])))
            else:
                out.append(Basis1D("hermite", n, locs[k], scales[k]))
        return out

    @staticmethod
    def _domain_of(bases: list[Basis1D]) -> np.ndarray:
        return np.array([[b.p0, b.p1] if b.bounded else [-np.inf, np.inf] for b in bases])

    def _set_fitted(self, bases, cores, n_iter=0, history=None, status=None, message="built from cores (no fit)"):
        self._bases = list(bases)
        self.bases_ = tuple(bases)
        self.cores_ = [np.ascontiguousarray(c, dtype=np.float64) for c in cores]
        self.ranks_ = (1,) + tuple(int(c.shape[2]) for c in self.cores_)
        self.domain_ = self._domain_of(bases)
        self.n_features_in_ = len(bases)
        self.n_iter_ = n_iter
        self.history_ = [] if history is None else history
        self.status_ = status
        self.message_ = message
        return self

    # ------------------------------------------------------------------------------------------------
    # fitting

    def _check_y_weight(self, y: Any, sample_weight: Any, M: int) -> tuple[np.ndarray, np.ndarray]:
        """``y`` (M,) and the weights (M,) (ones when None), validated. A column vector ``y`` is accepted with
        scikit-learn's DataConversionWarning, as its regressors do."""
        y = as_regression_target(y, "FunctionalTT", stacklevel=4)
        if len(y) != M:
            raise ValueError(f"`X` and `y` must have the same length; `X` has {M} rows and `y` has {len(y)}")
        if sample_weight is None:
            return y, np.ones(M)
        w = as_array(sample_weight, "sample_weight", ndim=1).astype(np.float64)
        check_finite(w, "sample_weight")
        if len(w) != M:
            raise ValueError(f"`sample_weight` must have length {M}; got {len(w)}")
        if np.any(w < 0) or not np.any(w > 0):
            raise ValueError("`sample_weight` must be non-negative and not all zero")
        return y, w

    def _check_init(self, d: int, X: np.ndarray) -> "FunctionalTT | str":
        init = self.init
        if isinstance(init, FunctionalTT):
            if not hasattr(init, "cores_"):
                raise ValueError("`init` must be 'additive', 'random' or a fitted FunctionalTT; this FunctionalTT "
                                 "is not fitted")
            if init.n_features_in_ != d:
                raise ValueError(f"`init` has {init.n_features_in_} features; X has {d}")
            own = self._resolve_bases(d, X)
            for k, (a, b) in enumerate(zip(own, init._bases)):
                if a.kind != b.kind or a.n != b.n or (a.kind == "hermite" and not a.same_as(b)):
                    raise ValueError(f"`init` has an incompatible basis at coordinate {k}: "
                                     f"{b.kind}/{b.n - 1} vs {a.kind}/{a.n - 1}")
            return init
        if not isinstance(init, str):
            raise TypeError(f"`init` must be 'additive', 'random' or a fitted FunctionalTT; got {type(init).__name__}")
        return check_option(init, "init", _INITS)

    @constraints(X="array2d", y="array1d", sample_weight="array1d", directional="array2d")
    def fit(self, X: Any, y: Any, *, sample_weight: Any = None, directional: Any = None) -> "FunctionalTT":
        """Fit the cores to samples ``(X, y)`` by alternating least squares with rank adaptation.

        Every hyperparameter is a constructor parameter (see the class); ``fit`` takes data only.

        Parameters
        ----------
        X : array_like of shape (M, d)
            Sample points (finite).
        y : array_like of shape (M,)
            Function values (finite).
        sample_weight : array_like of shape (M,), optional
            Non-negative weights, not all zero.
        directional : array_like of shape (M, d), optional
            Vectors ``v_m``, one per row (data, like ``sample_weight``): fit
            ``f(x_m) + v_m . grad f(x_m) = y_m`` instead of ``f(x_m) = y_m`` (a first-order differential
            operator in the rows; the linearised implicit BSDE step of :mod:`numtk.sampling` is this
            problem). The rows are then formed explicitly in chunks.

        Returns
        -------
        self : FunctionalTT
            The fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> X = np.random.default_rng(1).normal(size=(1000, 3))
        >>> y = (1 + X[:, 0]) * X[:, 1] ** 2 * (X[:, 2] - 2)   # a product: rank 1
        >>> f = FunctionalTT("hermite", degree=3, ranks=1, rng=0).fit(X, y)
        >>> f.ranks_
        (1, 1, 1, 1)
        >>> bool(np.allclose(f.predict([[1.0, 2.0, 3.0]]), 8.0))
        True
        """
        from numtk.ftt._als import als, product_bases

        X = self._check_X(X, fitting=True)
        M, d = X.shape
        y, w = self._check_y_weight(y, sample_weight, M)
        if M < 1:
            raise ValueError("`X` must have at least one row")
        if directional is not None:
            directional = as_array(directional, "directional", ndim=2).astype(np.float64)
            check_finite(directional, "directional")
            if directional.shape != (M, d):
                raise ValueError(f"`directional` must have the shape of `X`, {(M, d)}; got {directional.shape}")
        threads = n_threads(self.workers)
        sweeps = check_int(self.sweeps, "sweeps", minimum=1, maximum=_MAX_SWEEPS)
        tol = check_real(self.tol, "tol", low=0.0)
        regularization = self.regularization
        if isinstance(regularization, dict):
            unknown = set(regularization) - {"ridge", "h2"}
            if unknown:
                raise ValueError(f"`regularization` keys must be 'ridge' and 'h2'; got {sorted(unknown, key=str)}")
            ridge = check_real(regularization.get("ridge", 0.0), "regularization['ridge']", low=0.0)
            h2 = check_real(regularization.get("h2", 0.0), "regularization['h2']", low=0.0)
        else:
            ridge = check_real(regularization, "regularization", low=0.0)
            h2 = 0.0
        rank_adaptive = check_bool(self.rank_adaptive, "rank_adaptive")
        max_rank = check_int(self.max_rank, "max_rank", minimum=1, maximum=64)
        rank_tol = check_real(self.rank_tol, "rank_tol", low=0.0)
        progress = check_bool(self.progress, "progress")
        check_callback(self.callback)
        rng = normalize_rng(self.rng)
        init = self._check_init(d, X)

        if isinstance(init, FunctionalTT):
            bases = list(init._bases)
            cores = [c.copy() for c in init.cores_]
        else:
            bases = self._resolve_bases(d, X)
            ranks = self._initial_ranks(bases)
            cores = self._initial_cores(bases, ranks, float(np.average(y, weights=w)), rng)
        if self.extrapolate == "raise":
            self._check_inside(X, bases)

        # validation split: train rows first, then the held-out rows
        n_val = M // 10 if M >= 20 else 0
        order = rng.permutation(M) if n_val else np.arange(M)
        order = np.concatenate([order[n_val:], order[:n_val]])
        Xo, yo, wo = X[order], np.ascontiguousarray(y[order]), np.ascontiguousarray(w[order])
        ext = "linear" if self.extrapolate == "raise" else self.extrapolate
        order_needed = 0 if directional is None else 1
        evals = [_basis.evaluate(b, Xo[:, k].astype(np.float64), order_needed, ext) for k, b in enumerate(bases)]
        phis = [np.ascontiguousarray(e[0]) for e in evals]
        dphis = None if directional is None else [np.ascontiguousarray(e[1]) for e in evals]
        D = None if directional is None else np.ascontiguousarray(directional[order])
        if isinstance(init, str) and init == "additive" and d > 1:
            ranks = self._initial_ranks(bases)
            # the largest rank each bond may have: max_rank while the ranks adapt, else the given ranks
            caps = [max_rank] * (d - 1) if rank_adaptive else ranks[1:-1]
            cores = self._additive_cores(bases, phis, yo, wo, M - n_val, ranks, rng, dphis, D, caps)
        U = [_basis.gram_factor(b) for b in bases]
        P2 = [_basis.h2_penalty(b) for b in bases] if h2 > 0 else None
        with single_blas_thread():
            best, history, n_iter, status, message = als(
                phis, yo, wo, M - n_val, cores, U, P2, sweeps=sweeps, tol=tol, ridge=ridge, h2=h2,
                rank_adaptive=rank_adaptive, max_rank=max_rank, rank_tol=rank_tol, rng=rng, progress=progress,
                callback=self.callback, dphis=dphis, D=D, threads=threads,
                products=product_bases(bases, Xo[:M - n_val], ext))
        return self._set_fitted(bases, best, n_iter, history, status, message)

    def _initial_ranks(self, bases):
        d = len(bases)
        if isinstance(self.ranks, (str, bytes)):
            raise TypeError(f"`ranks` must be an int or a sequence of ints; got {self.ranks!r}")
        if np.ndim(self.ranks) == 0:
            r = check_int(self.ranks, "ranks", minimum=1, maximum=_MAX_RANK)
            inner = [r] * (d - 1)
        else:
            inner = [check_int(v, "ranks", minimum=1, maximum=_MAX_RANK) for v in self.ranks]
            if len(inner) != d - 1:
                raise ValueError(f"`ranks` must be an int or have d - 1 = {d - 1} entries; got {len(inner)}")
        # cap by what the bond can carry
        ns = [b.n for b in bases]
        out = [1]
        for k in range(1, d):
            left = float(np.prod(ns[:k], dtype=float))
            right = float(np.prod(ns[k:], dtype=float))
            out.append(int(min(inner[k - 1], left, right)))
        out.append(1)
        return out

    @staticmethod
    def _additive_cores(bases, phis, y, w, n_train, ranks, rng, dphis=None, D=None, caps=None):
        """The weighted least-squares additive model sum_k f_k(x_k) as an exact rank-2 train, padded to
        ``ranks`` (at least 2) with small random entries, and no larger than ``caps`` (one per bond): a bond
        capped at 1 gets the train's best rank-1 truncation there (TT-SVD), a bond capped at 2 no padding.

        With ``D`` (directional rows, ``f(x) + D . grad f(x) = y``) the additive model of that operator:
        coordinate k's columns are ``phi_k + D_k phi_k'``. The normal equations are accumulated over chunks
        of rows (no copy of the whole design); beyond ``_ADDITIVE_DENSE_MAX`` unknowns they are solved by
        LSQR on the design instead of being formed.
        """
        from numtk.ftt._als import solve_spd

        d = len(bases)
        P = sum(b.n for b in bases)
        sw = np.sqrt(w[:n_train])

        def block(m0, m1):
            cols = [p[m0:m1] if D is None else p[m0:m1] + D[m0:m1, k:k + 1] * dphis[k][m0:m1]
                    for k, p in enumerate(phis)]
            return np.concatenate(cols, axis=1) * sw[m0:m1, None]

        # each block spans the constants: the d - 1 redundant directions are fixed by a tiny ridge
        if P <= _ADDITIVE_DENSE_MAX:
            rows = max(1, min(n_train, _ADDITIVE_CHUNK_ENTRIES // P))
            G = np.zeros((P, P))
            rhs = np.zeros(P)
            for m0 in range(0, n_train, rows):
                m1 = min(m0 + rows, n_train)
                A = block(m0, m1)
                G += A.T @ A
                rhs += A.T @ (y[m0:m1] * sw[m0:m1])
            G[np.diag_indices_from(G)] += 1e-10 * (np.trace(G) / len(G) or 1.0)
            coef = solve_spd(G, rhs)
        else:
            coef = _additive_lsqr(block, phis, y[:n_train] * sw, n_train, P)
        splits = np.cumsum([b.n for b in bases])[:-1]
        fs = np.split(coef, splits)
        es = [_basis.constant_coefficients(b) for b in bases]
        caps = [None] * (d - 1) if caps is None else list(caps)
        width = [1] + [max(2, r) if c is None else max(2, min(r, c)) for r, c in zip(ranks[1:-1], caps)] + [1]
        cores = []
        for k, b in enumerate(bases):
            ra, rb = width[k], width[k + 1]
            core = 1e-3 * rng.standard_normal((ra, b.n, rb))
            if k == 0:
                core[0, :, 0], core[0, :, 1] = fs[0], es[0]
            elif k == d - 1:
                core[0, :, 0], core[1, :, 0] = es[k], fs[k]
            else:
                core[:2, :, :2] = 0.0
                core[0, :, 0], core[1, :, 0], core[1, :, 1] = es[k], fs[k], es[k]
            cores.append(core)
        if any(c is not None and c < 2 for c in caps):
            cores = _round_cores(cores, bases, 0.0, [2 if c is None else c for c in caps])
        return cores

    @staticmethod
    def _initial_cores(bases, ranks, mean, rng):
        cores = []
        for k, b in enumerate(bases):
            core = 1e-3 * rng.standard_normal((ranks[k], b.n, ranks[k + 1]))
            core[0, :, 0] += _basis.constant_coefficients(b) * (mean if k == 0 else 1.0)
            cores.append(core)
        return cores

    # ------------------------------------------------------------------------------------------------
    # evaluation

    def _check_X(self, X: Any, fitting: bool = False) -> np.ndarray:
        if not fitting:
            _check_fitted(self)
        X = as_array(X, "X")
        if X.ndim != 2:
            hint = (" Reshape your data: X.reshape(-1, 1) if it has one feature, X.reshape(1, -1) if it is one "
                    "sample") if X.ndim == 1 else ""
            raise ValueError(f"`X` must be 2-D; got an array of shape {X.shape}.{hint}")
        if X.dtype.kind != "f" or X.dtype.itemsize > 8:
            X = X.astype(np.float64)
        check_finite(X, "X")
        if X.shape[1] < 1:
            raise ValueError(f"`X` has 0 feature(s) (shape={X.shape}) while a minimum of 1 is required: it must have "
                             "at least one column")
        if not fitting:
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but FunctionalTT is expecting {self.n_features_in_} "
                                 "features as input (`X` needs one column per coordinate of the train)")
        return X

    def _check_inside(self, X, bases):
        for k, b in enumerate(bases):
            if b.bounded and X.shape[0] and (X[:, k].min() < b.p0 or X[:, k].max() > b.p1):
                raise ValueError(f"`X` has points outside the domain [{b.p0}, {b.p1}] of coordinate {k} "
                                 "(extrapolate='raise')")

    def _eval(self, X, grad, lap, finite=True):
        from numtk.ftt import _ftt_ext

        X = self._check_X(X)
        if self.extrapolate == "raise":
            self._check_inside(X, self._bases)
        bs = self._bases
        ext = _basis.EXTRAPOLATE[check_option(self.extrapolate, "extrapolate", _EXTRAPOLATE)]
        threads = n_threads(self.workers)
        out = _ftt_ext.evaluate(X, [_basis.KINDS[b.kind] for b in bs], [b.n for b in bs], [b.p0 for b in bs],
                                [b.p1 for b in bs], ext, list(self.cores_), grad, lap, threads)
        if finite:
            for part in out:
                if part is not None and isinstance(part, np.ndarray) and part.size and \
                        not np.isfinite(np.sum(part, dtype=np.float64)) and not np.all(np.isfinite(part)):
                    raise ValueError("`X` has points so far out that the train's value or derivatives overflow "
                                     "in floating point (polynomial growth of the basis)")
        return out

    @constraints(X="array2d")
    def predict(self, X: Any) -> np.ndarray:
        """Values f(x) at the rows of X.

        Parameters
        ----------
        X : array_like of shape (M, d)
            Points; float32 input gives float32 output, anything else float64.

        Returns
        -------
        f : ndarray of shape (M,)
            The values.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> core = np.zeros((1, 2, 1)); core[0, 1, 0] = 1.0 / np.sqrt(3)   # x on [-1, 1]
        >>> f = FunctionalTT.from_cores([core, core], basis="legendre", degree=1, domain=[[-1, 1], [-1, 1]])
        >>> f.predict([[0.5, 4.0]])   # x0 * x1, extended linearly outside the box
        array([2.])
        """
        return self._eval(X, False, False)[0]

    @constraints(X="array2d")
    def gradient(self, X: Any) -> np.ndarray:
        """Gradient of f at the rows of X.

        Parameters
        ----------
        X : array_like of shape (M, d)
            Points.

        Returns
        -------
        grad : ndarray of shape (M, d)
            Partial derivatives.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> c0 = np.zeros((1, 3, 1)); c0[0, 2, 0] = 1.0 / np.sqrt(2)   # He_2 / sqrt(2) = (x^2 - 1) / 2
        >>> c1 = np.zeros((1, 3, 1)); c1[0, 0, 0] = 1.0
        >>> f = FunctionalTT.from_cores([c0, c1], basis="hermite", degree=2)
        >>> f.gradient([[3.0, 0.0]])
        array([[3., 0.]])
        """
        return self._eval(X, True, False)[1]

    @constraints(X="array2d")
    def laplacian(self, X: Any) -> np.ndarray:
        """Laplacian (sum of the second derivatives) of f at the rows of X.

        Parameters
        ----------
        X : array_like of shape (M, d)
            Points.

        Returns
        -------
        lap : ndarray of shape (M,)
            The Laplacian.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> c0 = np.zeros((1, 3, 1)); c0[0, 2, 0] = 1.0 / np.sqrt(2)   # (x0^2 - 1) / 2
        >>> c1 = np.zeros((1, 3, 1)); c1[0, 0, 0] = 1.0
        >>> FunctionalTT.from_cores([c0, c1], basis="hermite", degree=2).laplacian([[0.3, -2.0]])
        array([1.])
        """
        return self._eval(X, False, True)[2]

    @constraints(X="array2d", gradient="bool", laplacian="bool", overflow="option")
    def evaluate(self, X: Any, *, gradient: bool = False, laplacian: bool = False,
                 overflow: str = "raise") -> tuple:
        """Values and, on request, gradient and Laplacian, from one shared prefix/suffix pass.

        Parameters
        ----------
        X : array_like of shape (M, d)
            Points.
        gradient, laplacian : bool, default False
            Also return the gradient ``(M, d)`` / the Laplacian ``(M,)``.
        overflow : {'raise', 'keep'}, default 'raise'
            Points so far out that a value or derivative overflows (the bases grow polynomially): a
            ValueError (``'raise'``), or those entries returned as inf/NaN for the caller to handle
            (``'keep'``; a sampler replaces such rows by a fallback).

        Returns
        -------
        out : tuple
            ``(f,)``, ``(f, grad)``, ``(f, lap)`` or ``(f, grad, lap)``.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> c = np.zeros((1, 3, 1)); c[0, 2, 0] = 1.0 / np.sqrt(2)   # (x^2 - 1) / 2
        >>> f, g, lap = FunctionalTT.from_cores([c], "hermite", 2).evaluate([[2.0]], gradient=True, laplacian=True)
        >>> f, g, lap
        (array([1.5]), array([[2.]]), array([1.]))
        """
        gradient = check_bool(gradient, "gradient")
        laplacian = check_bool(laplacian, "laplacian")
        overflow = check_option(overflow, "overflow", ("raise", "keep"))
        f, g, lap = self._eval(X, gradient, laplacian, finite=overflow == "raise")
        out = (f,)
        if gradient:
            out += (g,)
        if laplacian:
            out += (lap,)
        return out

    @constraints(X="array2d", y="array1d", sample_weight="array1d")
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        r"""The coefficient of determination :math:`R^2` of the predictions on ``(X, y)``.

        :math:`R^2 = 1 - \sum_m w_m (y_m - f(x_m))^2 / \sum_m w_m (y_m - \bar y)^2` (weighted mean
        :math:`\bar y`), as scikit-learn's regressors score (:func:`sklearn.metrics.r2_score`): 1 for a
        perfect fit, 0 for the constant mean, negative for worse.

        Parameters
        ----------
        X : array_like of shape (M, d)
            Points.
        y : array_like of shape (M,)
            True values.
        sample_weight : array_like of shape (M,), optional
            Non-negative weights, not all zero.

        Returns
        -------
        score : float
            :math:`R^2`.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> core = np.zeros((1, 2, 1)); core[0, 1, 0] = 1.0 / np.sqrt(3)   # x on [-1, 1]
        >>> f = FunctionalTT.from_cores([core], basis="legendre", degree=1, domain=[[-1, 1]])
        >>> X = np.array([[-0.5], [0.0], [0.5]])
        >>> f.score(X, [-0.5, 0.0, 0.5]), f.score(X, [-0.5, 0.5, 0.5])   # 1 - 0.25 / (2 / 3)
        (1.0, 0.625)
        """
        from sklearn.metrics import r2_score

        pred = self.predict(X)
        y, w = self._check_y_weight(y, sample_weight, len(pred))
        if len(y) < 2:
            raise ValueError("`y` must have at least two rows for R^2 (the score of one point is undefined)")
        return float(r2_score(y, pred, sample_weight=None if sample_weight is None else w))

    # ------------------------------------------------------------------------------------------------
    # rounding, integration, arithmetic

    @constraints(tol="real>=0", max_rank="cap")
    def round(self, tol: float | None = None, max_rank: int | None = None) -> "FunctionalTT":
        """A copy with reduced ranks by TT-SVD rounding in orthonormal-basis coordinates.

        Right-to-left QR, then left-to-right truncated SVDs, each discarding singular values whose
        tail is below ``tol * ||f|| / sqrt(d - 1)`` (the L2 norm under the bases' natural measure) and
        keeping at most ``max_rank``. B-spline coordinates are rounded in the coordinates of their
        Gram matrix's Cholesky factor.

        Parameters
        ----------
        tol : float, optional
            Relative accuracy in the L2 norm (``>= 0``).
        max_rank : int, optional
            Rank cap. At least one of ``tol`` and ``max_rank`` is required.

        Returns
        -------
        rounded : FunctionalTT
            A new fitted estimator.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> rng = np.random.default_rng(0)
        >>> cores = [rng.normal(size=s) for s in [(1, 5, 2), (2, 5, 3), (3, 5, 1)]]
        >>> f = FunctionalTT.from_cores(cores, "hermite", 4)
        >>> (f + f).ranks_, (f + f).round(tol=1e-12).ranks_
        ((1, 4, 6, 1), (1, 2, 3, 1))
        """
        _check_fitted(self)
        if tol is None and max_rank is None:
            raise ValueError("`round` needs `tol`, `max_rank` or both")
        tol = 0.0 if tol is None else check_real(tol, "tol", low=0.0)
        cap = None if max_rank is None else check_int(max_rank, "max_rank", minimum=1)
        caps = None if cap is None else [cap] * (len(self.cores_) - 1)
        return self._like(_round_cores(self.cores_, self._bases, tol, caps))

    @constraints(weight="option")
    def integrate(self, weight: Any = None) -> float:
        r"""The integral :math:`\int f(x) \prod_k w_k(x_k)\, dx`.

        Each core is contracted with the moments :math:`m_k[i] = \int \phi_i w_k` (``O(d n r^2)``).

        Parameters
        ----------
        weight : None, 'uniform', 'gaussian' or sequence of callables, optional
            ``None``: Lebesgue measure on the box for bounded bases and N(loc, scale^2) for Hermite
            coordinates. ``'uniform'``: the uniform probability on the box. ``'gaussian'``: the standard
            normal per coordinate over the real line (bounded bases extended as set by
            ``extrapolate``; only the box with ``'raise'``). A length-d sequence of vectorised
            callables ``w_k``: Gauss-Legendre quadrature with ``2n + 2`` nodes on the box
            (on every knot interval for B-splines; Gauss-Hermite around ``loc`` for Hermite
            coordinates), exact when ``w_k`` is a polynomial of degree up to ``n + 1``.

        Returns
        -------
        value : float
            The integral.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> c = np.zeros((1, 2, 1)); c[0, 0, 0] = 1.0; c[0, 1, 0] = np.sqrt(3)   # 1 + x on [0, 1]
        >>> f = FunctionalTT.from_cores([c, c], "legendre", 1, domain=[[-1, 1], [-1, 1]])
        >>> round(f.integrate(), 12), round(f.integrate("uniform"), 12)   # (1 + x)(1 + y) on [-1, 1]^2
        (4.0, 1.0)
        """
        _check_fitted(self)
        d = self.n_features_in_
        if weight is None or isinstance(weight, str):
            if weight is not None:
                check_option(weight, "weight", ("uniform", "gaussian"))
            weights = [weight] * d
        else:
            try:
                weights = list(weight)
            except TypeError:
                raise TypeError("`weight` must be None, 'uniform', 'gaussian' or a length-d sequence of "
                                "callables") from None
            if len(weights) != d or not all(callable(w) for w in weights):
                raise ValueError(f"`weight` must be a sequence of {d} callables")
        v = np.ones(1)
        for core, b, w in zip(self.cores_, self._bases, weights):
            m = _basis.moments(b, w, self.extrapolate)
            v = v @ np.einsum("aic,i->ac", core, m)
        return float(v[0])

    @constraints(functions="option", constant="real")
    def additive(self, functions: Sequence[Any], constant: float = 0.0) -> "FunctionalTT":
        """The train ``constant + sum_k f_k(x_k)`` in this train's bases (rank 2; rank 1 when d = 1).

        Each ``f_k`` (a vectorised callable of one coordinate) is projected onto coordinate k's basis by
        least squares at the basis' natural quadrature nodes: exact for functions in its span (e.g.
        polynomials up to the degree for Legendre and Hermite bases). Useful to add a known separable
        part to a fitted train (``f + f.additive(...)``).

        Parameters
        ----------
        functions : sequence of d callables
            ``f_k(x) -> array`` on 1-D float arrays.
        constant : float, optional
            The constant term.

        Returns
        -------
        FunctionalTT
            A fitted train with this one's parameters and bases.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> f = FunctionalTT.from_cores([np.zeros((1, 5, 1))] * 3, degree=4, domain=[(-1, 1)] * 3)
        >>> q = f.additive([lambda x: x ** 2] * 3, constant=1.0)
        >>> x = np.array([[0.5, -0.2, 1.0]])
        >>> round(float(q.predict(x)[0]), 12), q.ranks_
        (2.29, (1, 2, 2, 1))
        """
        _check_fitted(self)
        bases = self._bases
        d = len(bases)
        if (callable(functions) or not isinstance(functions, Sequence) or len(functions) != d
                or not all(callable(g) for g in functions)):
            raise TypeError(f"`functions` must be a sequence of {d} callables (one per coordinate)")
        constant = check_real(constant, "constant")
        coef = []
        for k, (b, g) in enumerate(zip(bases, functions)):
            x, wq = _basis.natural_quadrature(b, extra=3)
            values = np.asarray(g(x), dtype=np.float64)
            if values.shape != x.shape or not np.all(np.isfinite(values)):
                raise ValueError(f"`functions[{k}]` must return one finite value per point")
            sw = np.sqrt(wq)
            phi = _basis.evaluate(b, x)[0]
            coef.append(np.linalg.lstsq(phi * sw[:, None], values * sw, rcond=None)[0])
        ones = [_basis.constant_coefficients(b) for b in bases]
        coef[0] = coef[0] + constant * ones[0]
        if d == 1:
            return self._like([coef[0][None, :, None]])
        cores = [np.stack([coef[0], ones[0]], axis=1)[None]]  # [f_1, 1] [[1, 0], [f_k, 1]] ... [1; f_d]
        for k in range(1, d - 1):
            c = np.zeros((2, bases[k].n, 2))
            c[0, :, 0] = ones[k]
            c[1, :, 0] = coef[k]
            c[1, :, 1] = ones[k]
            cores.append(c)
        cores.append(np.stack([ones[-1], coef[-1]], axis=0)[:, :, None])
        return self._like(cores)

    def _like(self, cores: list[np.ndarray]) -> "FunctionalTT":
        new = type(self)(**self.get_params())
        return new._set_fitted(self._bases, cores)

    def _compatible(self, other: Any) -> bool:
        if not isinstance(other, FunctionalTT):
            return False
        _check_fitted(self)
        _check_fitted(other)
        if other.n_features_in_ != self.n_features_in_ or other.extrapolate != self.extrapolate or not all(
                a.same_as(b) for a, b in zip(self._bases, other._bases)):
            raise ValueError("FunctionalTT arithmetic needs the same bases, degrees, domains and extrapolation")
        return True

    def __add__(self, other: Any) -> "FunctionalTT":
        if not self._compatible(other):
            return NotImplemented
        a, b = self.cores_, other.cores_
        d = len(a)
        if d == 1:
            return self._like([a[0] + b[0]])
        out = [np.concatenate([a[0], b[0]], axis=2)]
        for k in range(1, d - 1):
            ra, n, rb = a[k].shape
            sa, _, sb = b[k].shape
            c = np.zeros((ra + sa, n, rb + sb))
            c[:ra, :, :rb] = a[k]
            c[ra:, :, rb:] = b[k]
            out.append(c)
        out.append(np.concatenate([a[-1], b[-1]], axis=0))
        return self._like(out)

    def __mul__(self, other: Any) -> "FunctionalTT":
        if isinstance(other, (bool, np.bool_)) or not isinstance(other, numbers.Real):
            return NotImplemented
        _check_fitted(self)
        cores = [c.copy() for c in self.cores_]
        cores[0] = cores[0] * float(other)
        return self._like(cores)

    __rmul__ = __mul__

    def __neg__(self) -> "FunctionalTT":
        return self * -1.0

    def __sub__(self, other: Any) -> "FunctionalTT":
        if not self._compatible(other):
            return NotImplemented
        return self + (-other)

    @classmethod
    @constraints(cores="array2d", basis="option", degree="int>=0", domain="array2d", loc="real", scale="real>0",
                 extrapolate="option", workers="workers")
    def from_cores(cls, cores: Sequence[Any], basis: str | Sequence[str] = "legendre",
                   degree: int | Sequence[int] | None = None, domain: Any = None, loc: float | Sequence[float] = 0.0,
                   scale: float | Sequence[float] = 1.0, extrapolate: str = "linear",
                   workers: Any = 1) -> "FunctionalTT":
        """A fitted FunctionalTT from given coefficient cores.

        Parameters
        ----------
        cores : sequence of array_like
            Core k of shape ``(r_{k-1}, n_k, r_k)`` with ``r_0 = r_d = 1``.
        basis, domain, loc, scale, extrapolate, workers
            As in the constructor; ``domain`` is required for bounded bases.
        degree : int or sequence of int, optional
            ``n_k - 1``; inferred from the cores when omitted, checked against them otherwise.

        Returns
        -------
        f : FunctionalTT
            A fitted estimator (``n_iter_ = 0``).

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.ftt import FunctionalTT
        >>> f = FunctionalTT.from_cores([np.ones((1, 3, 2)), np.ones((2, 3, 1))], "hermite")
        >>> f.ranks_, f.n_features_in_
        ((1, 2, 1), 2)
        """
        if isinstance(cores, np.ndarray) or not isinstance(cores, (list, tuple)):
            raise TypeError("`cores` must be a list or tuple of 3-D arrays")
        cs = []
        for k, c in enumerate(cores):
            arr = as_array(c, f"cores[{k}]", ndim=3).astype(np.float64)
            check_finite(arr, f"cores[{k}]")
            cs.append(np.ascontiguousarray(arr))
        if not cs:
            raise ValueError("`cores` must not be empty")
        d = len(cs)
        if cs[0].shape[0] != 1 or cs[-1].shape[2] != 1:
            raise ValueError("`cores` must start with left rank 1 and end with right rank 1")
        for k in range(1, d):
            if cs[k].shape[0] != cs[k - 1].shape[2]:
                raise ValueError(f"`cores[{k}]` has left rank {cs[k].shape[0]}; `cores[{k - 1}]` has right rank "
                                 f"{cs[k - 1].shape[2]}")
        ns = [c.shape[1] for c in cs]
        if degree is None:
            degree = [n - 1 for n in ns]
        else:
            degs = [check_int(v, "degree", minimum=0) for v in per_coordinate(degree, d, "degree", real=False)]
            if [g + 1 for g in degs] != ns:
                raise ValueError(f"`degree` {degs} does not match the cores' basis sizes {ns}")
        ranks = [c.shape[2] for c in cs[:-1]] or 1
        n_threads(workers)  # validated here: from_cores makes a fitted estimator that evaluates at once
        est = cls(basis, degree, ranks, domain, loc=loc, scale=scale, extrapolate=extrapolate, workers=workers)
        bases = est._resolve_bases(d, None)
        return est._set_fitted(bases, cs)


def _check_fitted(est: FunctionalTT) -> None:
    """Raise NotFittedError (numtk's, also scikit-learn's) unless ``est`` is fitted."""
    check_is_fitted(est, "cores_", "call fit or from_cores first")


def _round_cores(cores, bases, tol, caps):
    """TT-SVD rounding of ``cores`` (see :meth:`FunctionalTT.round`); ``caps`` is None or one rank cap per
    bond."""
    from numtk.ftt._als import absorb_left, absorb_right, from_orth, right_qr, to_orth

    U = [_basis.gram_factor(b) for b in bases]
    cores = [to_orth(c, u) for c, u in zip(cores, U)]
    d = len(cores)
    for k in range(d - 1, 0, -1):
        q, rt = right_qr(cores[k], None)
        cores[k] = q
        cores[k - 1] = absorb_left(cores[k - 1], rt)
    norm = float(np.linalg.norm(cores[0]))
    delta = tol * norm / np.sqrt(max(d - 1, 1))
    for k in range(d - 1):
        ra, n, rb = cores[k].shape
        u, s, vt = _svd(cores[k].reshape(ra * n, rb))
        tail = np.sqrt(np.cumsum((s ** 2)[::-1]))[::-1]  # tail[j] = ||s[j:]||
        r = int(np.sum(tail > delta)) if delta > 0 else int(np.sum(s > 0))
        r = max(1, r if caps is None else min(r, caps[k]))
        cores[k] = u[:, :r].reshape(ra, n, r)
        cores[k + 1] = absorb_right(s[:r, None] * vt[:r], cores[k + 1])
    return [from_orth(c, u) for c, u in zip(cores, U)]


def _additive_lsqr(block, phis, rhs, n_train, P):
    """Least squares ``min |A c - rhs|`` of the additive design by LSQR (scipy), the design applied chunk by
    chunk through ``block(m0, m1)`` (its rows ``m0:m1``); a small damping fixes the redundant constants."""
    from scipy.sparse.linalg import LinearOperator, lsqr

    rows = max(1, _ADDITIVE_CHUNK_ENTRIES // P)
    chunks = [(m0, min(m0 + rows, n_train)) for m0 in range(0, n_train, rows)]

    def matvec(c):
        return np.concatenate([block(m0, m1) @ np.ravel(c) for m0, m1 in chunks])

    def rmatvec(r):
        r = np.ravel(r)
        return sum(block(m0, m1).T @ r[m0:m1] for m0, m1 in chunks)

    A = LinearOperator((n_train, P), matvec=matvec, rmatvec=rmatvec, dtype=np.float64)
    scale = float(np.sqrt(np.mean([np.mean(p[:n_train] ** 2) for p in phis]))) or 1.0
    return lsqr(A, rhs, damp=1e-5 * scale * np.sqrt(n_train), atol=1e-10, btol=1e-10, iter_lim=10 * P)[0]


def _svd(a: np.ndarray):
    import scipy.linalg

    try:
        return scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesdd")
    except np.linalg.LinAlgError:
        return scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesvd")
