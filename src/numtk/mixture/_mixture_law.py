"""MixtureLaw: validation losses from model size and data mixture (CAMEL, separable and additive reconstructed;
the Data Mixing Law and the capacity-KKT law as published)."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

from numtk._lib import Result, as_map, normalize_rng, progress_bar, single_blas_thread, spawn_rngs
from numtk._lib._constraints import constraints
from numtk._lib._estimator import Estimator, check_is_fitted
from numtk._lib._validation import (as_array, as_points, check_bool, check_finite, check_int, check_option,
                                     check_real)
from numtk._lib._warnings import NumtkWarning

__all__ = ["MixtureLaw", "mixture_features"]

_FORMS = ("camel", "separable", "additive", "data_mixing", "capacity_kkt")
_DATA_TERM_FORMS = ("camel", "separable", "additive")
_LOSSES = ("huber", "l2")
_SPACES = ("log", "linear")
_METHODS = ("delta", "bootstrap")
_SIMPLEX_TOL = 1e-6
_ALPHA_MIN, _ALPHA_MAX = 1e-4, 5.0          # bounds of every size (and token) exponent
_N_PROFILE = 64                             # E values of the profile start
_E_SHRINK = 1.0 - 1e-9                      # E < min L by this factor in the refinement
_LBFGS = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000}
# Starts are first screened at a looser tolerance; the best _N_POLISH of each problem are then refined with
# _LBFGS from where screening left them. On data a law does not fit well (RegMix's real runs), L-BFGS-B at
# ftol 1e-15 crawls for thousands of iterations per start; screening spends that only where it can matter.
_SCREEN = {"ftol": 1e-10, "gtol": 1e-7, "maxiter": 10_000}
_N_POLISH = 4
# Starts are screened in fixed chunks of _CHUNK, the unit that `workers` spreads (with the polishing of each
# problem): fixed, so that the fit does not depend on `workers`.
_CHUNK = 16
_MAX_STARTS = 10_000                        # starts of one problem are held at once (16 KB each for L-BFGS-B)
_KKT_KEYS = ("b", "c", "A", "a", "E")
_SIZE_TOL = 1e-9                            # relative tolerance matching a size to a training size


# ------------------------------------------------------------------------------------------------------------
# parameter layouts
# ------------------------------------------------------------------------------------------------------------
def _param_shapes(form: str, V: int, M: int, data_term: bool, S: int = 0) -> dict[str, tuple[int, ...]]:
    """The arrays of ``params_`` (in ``coef_`` order) and their shapes."""
    if form == "camel":
        shapes = {"E": (V,), "theta": (V, M), "alpha": (V, M)}
    elif form == "separable":
        shapes = {"E": (V,), "theta": (V, M), "alpha": (V,)}
    elif form == "additive":
        shapes = {"E": (V,), "kappa": (V,), "alpha": (V,), "theta": (V, M)}
    elif form == "data_mixing":
        return {"E": (S, V), "theta": (S, V, M)}
    else:  # capacity_kkt
        return {**{k: (M,) for k in _KKT_KEYS}, "H": ()}
    if data_term:
        shapes.update({"zeta": (V,), "beta": (V,)})
    return shapes


def _positive_keys(form: str) -> tuple[str, ...]:
    if form == "capacity_kkt":
        return ("b", "c", "A", "a", "H")
    return ("alpha", "beta")


def _names(shapes: dict[str, tuple[int, ...]]) -> list[str]:
    out = []
    for key, shape in shapes.items():
        if shape == ():
            out.append(key)
        else:
            out.extend(f"{key}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape))
    return out


def _flatten(params: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> np.ndarray:
    return np.concatenate([np.asarray(params[k], dtype=float).reshape(-1) for k in shapes])


def _offsets(shapes: dict[str, tuple[int, ...]]) -> dict[str, int]:
    out, at = {}, 0
    for key, shape in shapes.items():
        out[key] = at
        at += int(np.prod(shape, dtype=int))
    return out


# ------------------------------------------------------------------------------------------------------------
# features
# ------------------------------------------------------------------------------------------------------------
def _check_mixtures(R: np.ndarray, name: str) -> np.ndarray:
    """Rows >= 0 summing to 1 within 1e-6, renormalised (``R`` itself when already normalised to round-off)."""
    if R.size and R.min() < 0:
        raise ValueError(f"`{name}` mixture weights must be >= 0; got a minimum of {R.min():.3g}")
    sums = R @ np.ones(R.shape[1])  # a BLAS pass: R.sum(axis=1) is slow on a column slice of X
    dev = np.max(np.abs(sums - 1.0)) if R.shape[0] else 0.0
    if dev > _SIMPLEX_TOL:
        bad = int(np.argmax(np.abs(sums - 1.0)))
        raise ValueError(f"`{name}` rows must sum to 1 (within {_SIMPLEX_TOL:g}); row {bad} sums to "
                         f"{sums[bad]:.9g}")
    if dev <= 1e-14:  # already normalised to round-off: dividing would change nothing that matters
        return R
    return R / sums[:, None]


def _as_mixtures(R: Any, name: str, M: int, *, ndim: int = 2) -> np.ndarray:
    """Mixtures given by a user: an array of ``ndim`` dimensions, M weights per row, finite, then
    :func:`_check_mixtures`; returned 2-D (one row for a 1-D input)."""
    R = as_array(R, name, ndim=ndim).astype(np.float64)
    R2 = R if R.ndim == 2 else R[None, :]
    if R2.shape[0] == 0:
        raise ValueError(f"`{name}` must hold at least one mixture")
    if R2.shape[1] != M:
        raise ValueError(f"`{name}` must have one column (weight) per training domain of the law ({M}); "
                         f"got shape {R.shape}")
    if not np.all(np.isfinite(R2)) or np.any(R2 < 0):
        raise ValueError(f"`{name}` must be finite and >= 0")
    return _check_mixtures(R2, name)


@constraints(model_sizes=("real>0", "array1d"), mixtures=("array1d", "array2d"), tokens=("real>0", "array1d"))
def mixture_features(model_sizes: Any, mixtures: Any, *, tokens: Any = None) -> np.ndarray:
    """The design matrix ``X`` a :class:`MixtureLaw` reads: sizes, optional tokens, then mixture weights.

    Broadcasts like NumPy over runs: a scalar size with many mixtures, one mixture (a 1-D array of M
    weights) with many sizes, or one of each per run.

    Parameters
    ----------
    model_sizes : float or array_like of shape (n,)
        Model sizes N > 0 (for example activated non-embedding parameters), one per run or one for all.
    mixtures : array_like of shape (M,) or (n, M)
        Mixture weights, >= 0, each row summing to 1 within 1e-6 (rows are renormalised).
    tokens : float or array_like of shape (n,), optional
        Training tokens D > 0; when given they form column 1 (laws that use tokens: ``'capacity_kkt'`` or
        ``data_term=True``).

    Returns
    -------
    X : ndarray of shape (n, 1 + M) or (n, 2 + M)
        Column 0 the size, then (with ``tokens``) the tokens, then the M weights; float64.

    Raises
    ------
    ValueError
        Non-positive or non-finite sizes or tokens, negative weights, rows not on the simplex, lengths that
        do not broadcast.

    Examples
    --------
    >>> from numtk.mixture import mixture_features
    >>> mixture_features([1e7, 1e8], [0.25, 0.75])
    array([[1.0e+07, 2.5e-01, 7.5e-01],
           [1.0e+08, 2.5e-01, 7.5e-01]])
    >>> mixture_features(1e8, [[1.0, 0.0], [0.5, 0.5]], tokens=2e9).shape
    (2, 4)
    """
    sizes = _positive_vector(model_sizes, "model_sizes")
    R = as_array(mixtures, "mixtures")
    if R.ndim not in (1, 2):
        raise ValueError(f"`mixtures` must be 1-D (one mixture) or 2-D (one row per run); got shape {R.shape}")
    R = np.atleast_2d(R).astype(np.float64)
    check_finite(R, "mixtures")
    if R.shape[1] == 0:
        raise ValueError("`mixtures` must have at least one domain (column)")
    cols = [("model_sizes", sizes)]
    if tokens is not None:
        cols.append(("tokens", _positive_vector(tokens, "tokens")))
    n = max(len(v) for _, v in cols + [("mixtures", R)])
    for name, v in cols + [("mixtures", R)]:
        if len(v) not in (1, n):
            lengths = ", ".join(f"`{k}` has {len(x)}" for k, x in cols + [("mixtures", R)])
            raise ValueError(f"`{name}` does not broadcast with the other arguments: {lengths} (each must have "
                             f"one entry or the same number n)")
    R = _check_mixtures(R, "mixtures")
    X = np.empty((n, len(cols) + R.shape[1]))
    for k, (_, v) in enumerate(cols):
        X[:, k] = v
    X[:, len(cols):] = R
    return X


def _on_simplex(W: np.ndarray) -> bool:
    return W.shape[1] > 0 and W.shape[0] > 0 and bool(W.min() >= 0) and \
        bool(np.max(np.abs(W @ np.ones(W.shape[1]) - 1.0)) <= _SIMPLEX_TOL)


def _check_token_column(X: np.ndarray, uses_tokens: bool, name: str) -> None:
    """Say so when ``X`` lacks the tokens column a law needs, or carries one it does not use (the mixture check
    would otherwise report a row sum that means nothing to the caller)."""
    first = 2 if uses_tokens else 1
    if _on_simplex(X[:, first:]):
        return
    if uses_tokens and X.shape[1] >= 2 and _on_simplex(X[:, 1:]):
        raise ValueError(f"`{name}` has no tokens column: this law uses tokens (form 'capacity_kkt' or "
                         f"`data_term` = True), so column 1 must hold the training tokens before the mixture weights; "
                         f"build it with mixture_features(..., tokens=...)")
    if not uses_tokens and X.shape[1] >= 3 and _on_simplex(X[:, 2:]):
        raise ValueError(f"`{name}` has a tokens column this law does not use: columns 2 onwards are the mixture "
                         f"weights, so column 1 looks like tokens; build it with mixture_features(...) without "
                         f"`tokens` (or use `data_term` = True)")


def _param_array(params: dict, key: str, name: str) -> np.ndarray:
    if key not in params:
        raise ValueError(f"`{name}` must hold {key!r}")
    value = params[key]
    if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
        raise TypeError(f"`{name}['{key}']` must be a number or an array of numbers; got {type(value).__name__}")
    arr = as_array(value, f"{name}['{key}']").astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}['{key}']` must be finite")
    return arr


def _positive_vector(x: Any, name: str) -> np.ndarray:
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise TypeError(f"`{name}` must be a positive number or a 1-D array of them; got {type(x).__name__}")
    arr = as_array(x, name)
    if arr.ndim > 1:
        raise ValueError(f"`{name}` must be a scalar or 1-D; got shape {arr.shape}")
    with np.errstate(over="ignore"):
        arr = np.atleast_1d(arr).astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite")
    if arr.size == 0:
        raise ValueError(f"`{name}` must not be empty")
    if arr.min() <= 0:
        raise ValueError(f"`{name}` must be > 0; got a minimum of {arr.min():.3g}")
    return arr


# ------------------------------------------------------------------------------------------------------------
# the forms' values, Jacobians and mixture gradients (closed-form forms)
# ------------------------------------------------------------------------------------------------------------
def _eval_exp_forms(form, P, N, D, R, N0, D0, *, jac=False, grad_r=False):
    """Value (n, V) of camel/separable/additive (with the optional data term); optionally the Jacobian
    w.r.t. ``coef_`` (n, V, p) and the gradient w.r.t. the mixture weights (n, V, M)."""
    n, M = R.shape
    E = P["E"]
    V = E.shape[0]
    ell = np.log(N) - math.log(N0)  # not log(N / N0): the ratio can overflow
    # products with R as (W R^T)^T: BLAS reads a column slice of X in place (R @ W would copy it), and the
    # elementwise work runs on contiguous (V, n) rows
    if form == "camel":
        both = np.vstack([P["theta"], P["alpha"]]) @ R.T      # one pass over R: (2V, n)
        phi = both[:V]
        phi -= ell[None, :] * both[V:]
        eT = np.exp(phi, out=phi)
        valueT = E[:, None] + eT
    elif form == "separable":
        phi = P["theta"] @ R.T
        phi -= P["alpha"][:, None] * ell[None, :]
        eT = np.exp(phi, out=phi)
        valueT = E[:, None] + eT
    else:  # additive
        e_sizeT = np.exp(P["kappa"][:, None] - P["alpha"][:, None] * ell[None, :])
        eT = np.exp(P["theta"] @ R.T)
        valueT = E[:, None] + e_sizeT + eT
        e_size = e_sizeT.T
    e = eT.T
    value = valueT.T
    data = "zeta" in P
    if data:
        lD = np.log(D) - math.log(D0)
        e_data = np.exp(P["zeta"] - lD[:, None] * P["beta"])
        value = value + e_data
    out = [value]
    if jac:
        shapes = _param_shapes(form, V, M, data)
        off = _offsets(shapes)
        p = sum(int(np.prod(s)) for s in shapes.values())
        J = np.zeros((n, V, p))
        iv = np.arange(V)
        J[:, iv, off["E"] + iv] = 1.0
        th = off["theta"] + iv[:, None] * M + np.arange(M)[None, :]      # (V, M) columns
        J[:, iv[:, None], th] = e[:, :, None] * R[:, None, :]
        if form == "camel":
            al = off["alpha"] + iv[:, None] * M + np.arange(M)[None, :]
            J[:, iv[:, None], al] = -(e * ell[:, None])[:, :, None] * R[:, None, :]
        elif form == "separable":
            J[:, iv, off["alpha"] + iv] = -e * ell[:, None]
        else:
            J[:, iv, off["kappa"] + iv] = e_size
            J[:, iv, off["alpha"] + iv] = -e_size * ell[:, None]
        if data:
            J[:, iv, off["zeta"] + iv] = e_data
            J[:, iv, off["beta"] + iv] = -e_data * lD[:, None]
        out.append(J)
    if grad_r:
        if form == "camel":
            slope = P["theta"][None, :, :] - ell[:, None, None] * P["alpha"][None, :, :]
        else:
            slope = np.broadcast_to(P["theta"][None, :, :], (n, V, M))
        out.append(e[:, :, None] * slope)
    return out[0] if len(out) == 1 else tuple(out)


def _eval_dml_size(E, theta, R, *, jac=False, grad_r=False):
    """The Data Mixing Law at one size: E (V,), theta (V, M) -> value (n, V) [, dvalue/d(E, theta) parts,
    d value / d r (n, V, M)]."""
    e = np.exp(R @ theta.T)
    out = [E + e]
    if jac:
        out.append(e)
    if grad_r:
        out.append(e[:, :, None] * theta[None, :, :])
    return out[0] if len(out) == 1 else tuple(out)


# ------------------------------------------------------------------------------------------------------------
# the estimator
# ------------------------------------------------------------------------------------------------------------
@constraints(form="option", reference_size="real>0", reference_tokens="real>0", data_term="bool", loss="option",
             delta="real>0", space="option", n_starts="count", fixed="mapping", rng="rng", workers="workers",
             progress="bool")
class MixtureLaw(Estimator):
    r"""Validation loss as a function of model size and data mixture: CAMEL's capacity-aware law and its priors.

    One row of ``X`` is one training run: model size N, (only for laws that use tokens) training tokens D,
    then the mixture weights :math:`r \in \Delta^{M-1}` (build it with :func:`mixture_features`). ``y`` holds
    the run's losses on V validation sets, shape (R,) or (R, V). With :math:`\ell = \log(N/N_0)` and
    :math:`N_0` the reference size, the forms are, per validation set i:

    ``'camel'`` (default; **reconstructed**, see Notes)
        :math:`L_i = E_i + \exp(\sum_j r_j\theta_{ij} - \ell\sum_j r_j\alpha_{ij})`, :math:`\alpha_{ij} > 0`:
        the log-coefficient and the size exponent are both linear in the mixture, so the best mixture moves
        with N. 2M + 1 parameters per set.
    ``'separable'`` (numtk's own form)
        :math:`L_i = E_i + \exp(\sum_j r_j\theta_{ij} - \alpha_i\ell)` (camel with
        :math:`\alpha_{ij} = \alpha_i`). M + 2 parameters.
    ``'additive'`` (numtk's form, **reconstructed**; not Shukor et al.'s law)
        :math:`L_i = E_i + \exp(\kappa_i - \alpha_i\ell) + \exp(\sum_j r_j\theta_{ij})`: a size term plus
        a mixture term, in the spirit of the additive law of Shukor et al., whose published form
        :math:`E + 1/\sum_j C_j h_j^{\gamma_j} + A N^{-\alpha} + B D^{-\beta}` differs. M + 3 parameters.
    ``'data_mixing'``
        The Data Mixing Law of Ye et al. fitted separately at each training size s:
        :math:`L_i = E^{(s)}_i + \exp(\sum_j r_j\theta^{(s)}_{ij})` (:math:`k e^{t_j}` written as
        :math:`e^{\theta_j}`). At an unseen size the losses of the mixtures run at >= 3 sizes are
        extrapolated with :math:`E + \exp(\kappa - \alpha\ell)` per mixture and set (one :math:`\alpha`
        shared by all, as in Ye et al.'s size law), and the per-size law is fitted to those predictions.
    ``'capacity_kkt'``
        Dai and Zheng's law (needs tokens and V = M):
        :math:`L_i = c_i x_i^*(h)^{-b_i} + A_i (D h_i)^{-a_i} + E_i` with :math:`x^*` the capacity split
        solving :math:`\min_x \sum_i h_i c_i x_i^{-b_i}` s.t. :math:`\sum_i x_i = N + (K-1)H`,
        :math:`x_i \ge H` (N in millions of parameters, D in billions of tokens: ``X`` holds raw counts and
        the law rescales them; H, the least capacity of a domain, is in millions of parameters, and a fixed H
        must lie below the smallest training size in millions).

    With ``data_term=True`` (camel, separable, additive) a token term
    :math:`\exp(\zeta_i - \beta_i\log(D/D_0))` is added and column 1 of ``X`` holds the tokens.

    A scikit-learn regressor: every parameter is stored unchanged by the constructor and checked by
    :meth:`fit`.

    Parameters
    ----------
    form : {'camel', 'separable', 'additive', 'data_mixing', 'capacity_kkt'}, default 'camel'
        The law (above).
    reference_size : float, optional
        :math:`N_0`; default the geometric mean of the distinct training sizes. Changes the
        parametrisation (:math:`\theta`, :math:`\kappa`), not the fitted law.
    reference_tokens : float, optional
        :math:`D_0` of the data term; default the geometric mean of the distinct training token counts.
    data_term : bool, default False
        Add the token term (camel, separable, additive); ``X`` then carries tokens in column 1.
    loss : {'huber', 'l2'}, default 'huber'
        Per-residual loss: Huber with threshold ``delta``, or half the squared residual.
    delta : float, default 1e-3
        Huber threshold (in the units of the residual: log loss for ``space='log'``).
    space : {'log', 'linear'}, default 'log'
        Residuals :math:`\log\hat L - \log L` (Chinchilla's convention) or :math:`\hat L - L` (Data Mixing
        Laws' convention, where a typical ``delta`` is 0.01).
    n_starts : int, default 32
        Starts per validation set (and per size for ``'data_mixing'``), at most 10,000: the profile start, for
        camel the fitted separable law, then random starts (camel with ``n_starts=1`` keeps only the separable
        start and drops its own profile start; the separable law it starts from is fitted with ``n_starts``
        starts of its own).
    fixed : dict, optional
        Parameters held constant, by name (keys of ``params_``), each a scalar or an array broadcast to the
        parameter's shape: ``{'E': 0.0}`` (needed with two training sizes) or ``{'E': (V,) array}``.
        ``'data_mixing'`` accepts ``'E'`` only.
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of the random starts (one independent stream per validation set and start, so the fit
        does not depend on ``workers``).
    workers : int or map-like callable, default 1
        Processes (or a ``map``-like callable) over the starts, in fixed chunks of 16 per validation set (per
        size and set for ``'data_mixing'``), then over the polishing of each set's best starts, and over the
        bootstrap resamples; ``'capacity_kkt'`` maps its starts one by one. Results do not depend on it: the
        chunks are fixed, whatever the number of workers.
    progress : bool, default False
        Show a tqdm bar over the refinements.

    Attributes
    ----------
    params_ : dict of ndarray
        The fitted parameters: ``'E'`` (V,), ``'theta'`` (V, M), ``'alpha'`` ((V, M) for camel, (V,) for
        separable and additive), ``'kappa'`` (V,) (additive), ``'zeta'``, ``'beta'`` (V,) (data term);
        ``'data_mixing'``: ``'sizes'`` (S,), ``'E'`` (S, V), ``'theta'`` (S, V, M); ``'capacity_kkt'``:
        ``'b'``, ``'c'``, ``'A'``, ``'a'``, ``'E'`` (K,) and ``'H'`` (float).
    coef_ : ndarray of shape (``n_params_``,)
        The parameters flattened in the order of ``param_names_`` (the arrays of ``params_`` in turn, row-major;
        ``'sizes'`` is not a coefficient).
    param_names_ : list of str
        ``'E[0]'``, ``'theta[0,2]'``, ...
    n_params_ : int
        Length of ``coef_``.
    reference_size_, reference_tokens_ : float or None
        :math:`N_0` and :math:`D_0` used (None where not used).
    n_domains_ : int
        M, the number of mixture weights.
    n_outputs_ : int
        V, the number of validation sets.
    n_features_in_ : int
        Columns of ``X``: 1 + M, or 2 + M when the law uses tokens.
    uses_tokens_ : bool
        Whether ``X`` carries tokens in column 1.
    loss_ : float
        The fit's objective (sum over validation sets, and sizes for ``'data_mixing'``); NaN for
        :meth:`from_params` laws.
    residual_std_ : float
        Robust standard deviation of the log residuals on the training runs,
        :math:`1.4826\,\mathrm{MAD}`, pooled over validation sets; NaN for :meth:`from_params` laws.
    success_ : bool
        Whether the kept start of every validation set (and size) reported convergence.
    starts_ : list of Result
        Every refined start: ``output`` (validation set), ``size`` (the training size for ``'data_mixing'``,
        else None), ``kind`` (``'profile'``, ``'separable'``, ``'random'``, ...), ``objective``, ``x``
        (the optimiser's variables), ``success``, ``n_iter``, ``message``.
    n_iter_ : int
        L-BFGS-B iterations of the kept starts, summed.

    See Also
    --------
    mixture_features : builds ``X``.
    optimal_mixture : the mixture a fitted law prefers at a size.
    allocate_budget : where to spend proxy runs so the law predicts the target best.

    Notes
    -----
    **What is reconstructed.** Only the abstract and introduction of the CAMEL paper were available: it models
    validation loss as a function of model size and mixture with a non-linear size x mixture interplay,
    fitted on small MoE models and extrapolated about 8x in activated parameters. The ``'camel'`` form is
    numtk's reconstruction from that description and prior work, not the paper's published formula: at a
    fixed size it reduces exactly to the Data Mixing Law (with :math:`t_i(N) = \theta_i - \ell\alpha_i`), and
    it nests ``'separable'``, so it can never fit worse (one of its starts is the fitted separable law). The
    open choices are parameters: the size variable (any positive scalar used consistently; activated
    parameters for MoE), the residual (``loss``, ``delta``, ``space``), the reference size, the token term
    (``data_term``). The vertex parametrisation (one :math:`\theta_{ij}`, :math:`\alpha_{ij}` per pure domain)
    has none of the gauge redundancy of the :math:`(k, t)` form, and keeps every exponent positive on the
    whole simplex. ``'separable'`` (camel with one size exponent per set) and ``'additive'`` (a size term plus
    a mixture term) are numtk's forms too, built as baselines for the nesting; ``'additive'`` is not the
    additive law of Shukor et al. [4]_, whose form (an inverse sum of powers of the weights, and a token
    term) differs. Only ``'data_mixing'`` (Ye et al. [2]_, per size; the extrapolation to unseen sizes through
    their size law is numtk's assembly of their pipeline) and ``'capacity_kkt'`` (Dai and Zheng [3]_) are
    published forms.

    **Fit.** Validation sets are independent. Per set, the profile start solves the (weighted) least squares
    of :math:`\log(L - E)` on the law's log-linear regressors for 64 values of E (uniform in
    :math:`\log(\min L - E)`) and polishes the best with bounded Brent; random starts draw
    :math:`E \sim U(0, 0.99\min L)` from ``rng``, solve the same least squares and jitter the exponents by
    :math:`e^{N(0, 0.3^2)}`; ``'additive'`` starts from the fitted separable law (its size factor becomes
    the size term). Every start is refined by L-BFGS-B (SciPy's routine) on
    :math:`(E, \theta, \log\alpha)` with analytic gradients, :math:`0 \le E \le (1 - 10^{-9})\min L`,
    :math:`10^{-4} \le \alpha \le 5`, minimising :math:`\sum_n s_n \rho(\log\hat L_n - \log L_n)`;
    every start is first run to ftol 1e-10, gtol 1e-7 (screening), and the four lowest are then refined to
    ftol 1e-15, gtol 1e-10; the lowest objective is kept (``starts_`` says which starts were screened only).
    Where SciPy's L-BFGS-B routine has the interface numtk drives (probed once;
    SciPy >= 1.15), the starts of a set advance together, so that one vectorised evaluation serves all of them;
    otherwise (or should that path raise) each start runs through ``scipy.optimize.minimize`` in turn, the
    same algorithm. Exponent fits need three distinct sizes unless E is fixed.

    **Unseen sizes of 'data_mixing'.** The mixtures run at three or more training sizes (at least M + 1 of
    them) are extrapolated with Ye et al.'s size law, :math:`E_{mi} + \exp(\kappa_{mi} - \alpha\ell)`
    with one :math:`\alpha` for every mixture and set (same residual loss), and the per-size law is fitted to
    the extrapolated losses; the result is memoised per size. Its prediction depends on the training losses,
    not on ``coef_``, so :meth:`jacobian` and delta intervals are NaN there.

    **Uncertainty.** :meth:`predict_interval` gives delta-method intervals (the M-estimator covariance of the
    fit in Huber's homoscedastic form; NaN, with a warning, where the runs do not identify the law) or
    bootstrap percentile intervals (:meth:`bootstrap`: runs resampled within each size).

    References
    ----------
    .. [1] J. Li, X. Gu, J. Zhang, "Capacity-Aware Mixture Law Enables Efficient LLM Data Optimization",
       ICML 2026, arXiv:2603.08022.
    .. [2] J. Ye, P. Liu, T. Sun, Y. Zhou, J. Zhan, X. Qiu, "Data Mixing Laws: Optimizing Data Mixtures by
       Predicting Language Modeling Performance", ICLR 2025, arXiv:2403.16952.
    .. [3] Dai and Zheng, "Explaining Data Mixing Scaling Laws", ICML 2026, arXiv:2606.08167.
    .. [4] M. Shukor et al., "Scaling Laws for Optimal Data Mixtures", arXiv:2507.09404.
    .. [5] J. Hoffmann et al., "Training Compute-Optimal Large Language Models", NeurIPS 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.mixture import MixtureLaw, mixture_features
    >>> law = MixtureLaw.from_params("camel", {"E": [1.5], "theta": [[0.5, 0.2]], "alpha": [[0.1, 0.3]]},
    ...                              reference_size=1e8)
    >>> X = mixture_features([1e8, 1e9], [0.5, 0.5])
    >>> law.predict(X).round(4)
    array([[2.9191],
           [2.3954]])
    >>> values, grad = law.mixture_gradient(1e9, [0.5, 0.5])
    >>> grad.round(4)
    array([[ 0.2415, -0.4394]])
    """

    _estimator_kind = "regressor"

    def __init__(self, form: str = "camel", *, reference_size: float | None = None,
                 reference_tokens: float | None = None, data_term: bool = False, loss: str = "huber",
                 delta: float = 1e-3, space: str = "log", n_starts: int = 32, fixed: dict | None = None,
                 rng: Any = None, workers: Any = 1, progress: bool = False) -> None:
        self.form = form
        self.reference_size = reference_size
        self.reference_tokens = reference_tokens
        self.data_term = data_term
        self.loss = loss
        self.delta = delta
        self.space = space
        self.n_starts = n_starts
        self.fixed = fixed
        self.rng = rng
        self.workers = workers
        self.progress = progress

    # --------------------------------------------------------------------------------------------------------
    # planted laws
    # --------------------------------------------------------------------------------------------------------
    @classmethod
    @constraints(form="option", params="mapping", reference_size="real>0", reference_tokens="real>0")
    def from_params(cls, form: str, params: dict, *, reference_size: float | None = None,
                    reference_tokens: float | None = None) -> "MixtureLaw":
        """A fitted law from its parameters (planted laws, laws from a paper).

        Parameters
        ----------
        form : {'camel', 'separable', 'additive', 'data_mixing', 'capacity_kkt'}
            The law.
        params : dict
            As ``params_``. ``'camel'``: ``'E'`` (V,), ``'theta'`` (V, M), ``'alpha'`` (V, M) (> 0);
            ``'separable'``: ``'E'``, ``'theta'``, ``'alpha'`` (V,); ``'additive'``: ``'E'``, ``'kappa'``,
            ``'alpha'`` (V,), ``'theta'`` (V, M); these three take the token term with ``'zeta'`` and
            ``'beta'`` (V,) (then the law uses tokens). A scalar ``'E'`` with 1-D ``'theta'`` (and so on) gives
            a single-output law whose :meth:`predict` returns shape (n,). ``'data_mixing'``: ``'sizes'`` (S,)
            the sizes the per-size laws hold at, ``'E'`` (S, V), ``'theta'`` (S, V, M) (or (S,), (S, M) for one
            output), and optionally ``'anchors'`` (m, M): the mixtures whose losses are extrapolated to unseen
            sizes (default: the M pure domains, the uniform mixture and the M(M-1)/2 two-domain halves).
            ``'capacity_kkt'``: ``'b'``, ``'c'``, ``'A'``, ``'a'``, ``'E'`` (K,), ``'H'`` (float), N in
            raw parameters and D in raw tokens (the law rescales them).
        reference_size : float
            :math:`N_0` (required by camel, separable and additive).
        reference_tokens : float, optional
            :math:`D_0` (required with the token term).

        Returns
        -------
        MixtureLaw
            A law with every fitted attribute set (``loss_`` and ``residual_std_`` NaN, ``starts_`` empty).
        """
        check_option(form, "form", _FORMS)
        if reference_size is not None:
            check_real(reference_size, "reference_size", low=0, low_open=True)
        if reference_tokens is not None:
            check_real(reference_tokens, "reference_tokens", low=0, low_open=True)
        if not isinstance(params, dict):
            raise TypeError(f"`params` must be a dict of arrays; got {type(params).__name__}")
        params = dict(params)
        law = cls(form=form)
        single = False
        anchors = None
        if form == "capacity_kkt":
            P = {}
            for k in _KKT_KEYS:
                P[k] = _param_array(params, k, "params")
            K = P["b"].shape[0] if P["b"].ndim == 1 else 0
            for k in _KKT_KEYS:
                if P[k].shape != (K,) or K == 0:
                    raise ValueError(f"`params` entries b, c, A, a, E must be 1-D of one common length K >= 1; "
                                     f"`{k}` has shape {P[k].shape}")
            P["H"] = _param_array(params, "H", "params")
            if P["H"].ndim != 0:
                raise ValueError(f"`params['H']` must be a scalar; got shape {P['H'].shape}")
            P["H"] = float(P["H"])
            for k in ("b", "c", "A", "a"):
                if (P[k] <= 0).any():
                    raise ValueError(f"`params['{k}']` must be > 0")
            if P["H"] < 0:
                raise ValueError("`params['H']` must be >= 0")
            V = M = K
            data_term = False
            uses_tokens = True
            N0 = D0 = None
            extra = set(params) - set(_KKT_KEYS) - {"H"}
        elif form == "data_mixing":
            sizes = _param_array(params, "sizes", "params")
            if sizes.ndim != 1 or sizes.size == 0 or (sizes <= 0).any():
                raise ValueError("`params['sizes']` must be a 1-D array of sizes > 0")
            S = sizes.size
            E = _param_array(params, "E", "params")
            theta = _param_array(params, "theta", "params")
            if E.ndim == 1 and theta.ndim == 2:
                single = True
                E, theta = E[:, None], theta[:, None, :]
            if E.ndim != 2 or theta.ndim != 3 or E.shape[0] != S or theta.shape[:2] != E.shape:
                raise ValueError(f"`params` of 'data_mixing' must hold 'E' (S, V) and 'theta' (S, V, M) with "
                                 f"S = {S} sizes; got shapes {E.shape} and {theta.shape}")
            order = np.argsort(sizes)
            P = {"sizes": sizes[order], "E": E[order], "theta": theta[order]}
            V, M = theta.shape[1], theta.shape[2]
            if "anchors" in params and params["anchors"] is not None:
                anchors = _param_array(params, "anchors", "params")
                if anchors.ndim != 2 or anchors.shape[1] != M:
                    raise ValueError(f"`params['anchors']` must have shape (m, {M}); got {anchors.shape}")
                anchors = _check_mixtures(anchors.astype(float), "params['anchors']")
            data_term = False
            uses_tokens = False
            N0 = D0 = None
            extra = set(params) - {"sizes", "E", "theta", "anchors"}
        else:
            data_term = "zeta" in params or "beta" in params
            theta = _param_array(params, "theta", "params")
            single = theta.ndim == 1
            if single:
                theta = theta[None, :]
            if theta.ndim != 2 or theta.shape[1] == 0:
                raise ValueError(f"`params['theta']` must have shape (V, M); got {theta.shape}")
            V, M = theta.shape
            shapes = _param_shapes(form, V, M, data_term)
            P = {}
            for k, shape in shapes.items():
                arr = theta if k == "theta" else _param_array(params, k, "params")
                if single and k != "theta":
                    arr = arr.reshape((1,) + arr.shape)
                if arr.shape != shape:
                    raise ValueError(f"`params['{k}']` must have shape {shape if not single else shape[1:]}; "
                                     f"got {arr.shape if not single else arr.shape[1:]}")
                P[k] = arr.astype(float)
            for k in _positive_keys(form):
                if k in P and (P[k] <= 0).any():
                    raise ValueError(f"`params['{k}']` must be > 0")
            if reference_size is None:
                raise ValueError(f"`reference_size` is required for form {form!r}")
            N0 = check_real(reference_size, "reference_size", low=0, low_open=True)
            D0 = None
            if data_term:
                if reference_tokens is None:
                    raise ValueError("`reference_tokens` is required with the token term ('zeta', 'beta')")
                D0 = check_real(reference_tokens, "reference_tokens", low=0, low_open=True)
            uses_tokens = data_term
            extra = set(params) - set(shapes)
        if extra:
            raise ValueError(f"`params` has unknown keys {sorted(extra)} for form {form!r}")
        law.data_term = data_term
        law.reference_size = N0 if form in _DATA_TERM_FORMS else reference_size
        law.reference_tokens = D0 if data_term else reference_tokens
        law._set_fitted(P, V=V, M=M, N0=N0, D0=D0, uses_tokens=uses_tokens, single=single)
        if form == "data_mixing":
            law._dml_anchors = anchors
            law._dml_anchor_losses = None
        law.loss_ = float("nan")
        law.residual_std_ = float("nan")
        law.success_ = True
        law.starts_ = []
        law.n_iter_ = 0
        return law

    def _set_fitted(self, P, *, V, M, N0, D0, uses_tokens, single, S=None) -> None:
        form = self.form
        if form == "data_mixing":
            S = P["sizes"].shape[0]
        # the law's own form and token term: what the methods read after the fit, whatever set_params changes
        self._law_form = form
        self._law_data_term = bool(self.data_term) and form in _DATA_TERM_FORMS
        shapes = _param_shapes(form, V, M, self._law_data_term, S or 0)
        params = {}
        if form == "data_mixing":
            params["sizes"] = np.array(P["sizes"], dtype=float)
        for k, shape in shapes.items():
            params[k] = float(P[k]) if shape == () else np.array(P[k], dtype=float).reshape(shape)
        self.params_ = params
        self.coef_ = _flatten(params, shapes)
        self.param_names_ = _names(shapes)
        self.n_params_ = self.coef_.size
        self.reference_size_ = N0
        self.reference_tokens_ = D0
        self.n_domains_ = M
        self.n_outputs_ = V
        self.uses_tokens_ = bool(uses_tokens)
        self.n_features_in_ = 1 + int(uses_tokens) + M
        self._single_output = bool(single)
        self._dml_cache = {}
        self._cov = None

    # --------------------------------------------------------------------------------------------------------
    # prediction
    # --------------------------------------------------------------------------------------------------------
    def _split_X(self, X: Any, name: str = "X"):
        check_is_fitted(self, "coef_")
        X = as_points(X, name)
        if X.shape[1] != self.n_features_in_:
            tok = " (size, tokens, then the weights)" if self.uses_tokens_ else " (size, then the weights)"
            hint = ""
            if self.uses_tokens_ and X.shape[1] == self.n_features_in_ - 1:
                hint = ": the tokens column looks missing (build X with mixture_features(..., tokens=...))"
            elif not self.uses_tokens_ and X.shape[1] == self.n_features_in_ + 1:
                hint = ": it looks like it carries a tokens column this law does not use (build X with " \
                       "mixture_features(...) without `tokens`)"
            raise ValueError(f"`{name}` must have {self.n_features_in_} columns{tok}; got {X.shape[1]}{hint}")
        N = X[:, 0]
        if N.min() <= 0:
            raise ValueError(f"`{name}` column 0 (model sizes) must be > 0; got a minimum of {N.min():.3g}")
        D = None
        k = 1
        if self.uses_tokens_:
            D = X[:, 1]
            if D.min() <= 0:
                raise ValueError(f"`{name}` column 1 (tokens) must be > 0; got a minimum of {D.min():.3g}")
            k = 2
        R = _check_mixtures(X[:, k:], name)
        return N, D, R

    def _values(self, N, D, R, *, jac=False, grad_r=False):
        """(n, V) values [, (n, V, p) Jacobian] [, (n, V, M) mixture gradient]."""
        form = self._law_form
        P = self.params_
        if form in _DATA_TERM_FORMS:
            return _eval_exp_forms(form, P, N, D, R, self.reference_size_, self.reference_tokens_,
                                   jac=jac, grad_r=grad_r)
        if form == "capacity_kkt":
            return self._kkt_values(N, D, R, jac=jac, grad_r=grad_r)
        return self._dml_values(N, R, jac=jac, grad_r=grad_r)

    def _kkt_values(self, N, D, R, *, jac, grad_r):
        from numtk.mixture._capacity_kkt import kkt_jacobian, kkt_mixture_gradient, kkt_predict

        P = {k: np.asarray(self.params_[k]) for k in _KKT_KEYS}
        P["H"] = float(self.params_["H"])
        value = np.asarray(kkt_predict(P, N, D, R), dtype=float)
        out = [value]
        if jac:
            out.append(np.asarray(kkt_jacobian(P, N, D, R), dtype=float))
        if grad_r:
            G = np.empty(value.shape + (R.shape[1],))
            for n in range(len(N)):
                _, G[n] = kkt_mixture_gradient(P, float(N[n]), float(D[n]), R[n])
            out.append(G)
        return out[0] if len(out) == 1 else tuple(out)

    def _dml_values(self, N, R, *, jac, grad_r):
        P = self.params_
        sizes = P["sizes"]
        S, V, M = P["theta"].shape
        n = len(N)
        value = np.empty((n, V))
        J = np.zeros((n, V, self.n_params_)) if jac else None
        G = np.empty((n, V, M)) if grad_r else None
        iv = np.arange(V)
        keys = np.unique(N, return_inverse=True)
        for u, size in enumerate(keys[0]):
            rows = np.flatnonzero(keys[1] == u)
            match = np.flatnonzero(np.abs(sizes - size) <= _SIZE_TOL * size)
            if match.size:
                s = int(match[0])
                E, theta = P["E"][s], P["theta"][s]
            else:
                E, theta = self._dml_unseen(float(size))
            res = _eval_dml_size(E, theta, R[rows], jac=jac, grad_r=grad_r)
            if not isinstance(res, tuple):
                res = (res,)
            value[rows] = res[0]
            k = 1
            if jac:
                if match.size:
                    e = res[k]
                    for i in range(V):
                        J[rows, i, s * V + i] = 1.0
                        J[rows, i, S * V + (s * V + i) * M:S * V + (s * V + i + 1) * M] = e[:, i:i + 1] * R[rows]
                else:  # the extrapolated law depends on the anchor losses, not on coef_
                    J[rows] = np.nan
                k += 1
            if grad_r:
                G[rows] = res[k]
        out = [value] + ([J] if jac else []) + ([G] if grad_r else [])
        return out[0] if len(out) == 1 else tuple(out)

    def _shape_out(self, A: np.ndarray) -> np.ndarray:
        return A[:, 0] if self._single_output else A

    @constraints(X="array2d")
    def predict(self, X: Any) -> np.ndarray:
        """Predicted losses.

        Parameters
        ----------
        X : array_like of shape (n, n_features_in_)
            Runs as built by :func:`mixture_features`.

        Returns
        -------
        ndarray of shape (n,) or (n, V)
            (n,) when the law was fitted on 1-D ``y`` (or made from 1-D parameters).
        """
        N, D, R = self._split_X(X)
        return self._shape_out(self._values(N, D, R))

    @constraints(X="array2d")
    def jacobian(self, X: Any) -> np.ndarray:
        """Derivatives of the predictions with respect to ``coef_``.

        Parameters
        ----------
        X : array_like of shape (n, n_features_in_)

        Returns
        -------
        ndarray of shape (n, V, ``n_params_``)
            Always 3-D. For ``'data_mixing'`` at sizes other than the training sizes the extrapolated law
            depends on the training losses rather than on ``coef_``: those rows are NaN (use bootstrap
            intervals there).

        Examples
        --------
        >>> from numtk.mixture import MixtureLaw, mixture_features
        >>> law = MixtureLaw.from_params("separable", {"E": [1.5], "theta": [[0.5, 0.2]], "alpha": [0.3]},
        ...                              reference_size=1e8)
        >>> law.param_names_
        ['E[0]', 'theta[0,0]', 'theta[0,1]', 'alpha[0]']
        >>> law.jacobian(mixture_features([1e8, 1e9], [0.5, 0.5])).round(4)
        array([[[ 1.    ,  0.7095,  0.7095, -0.    ]],
        <BLANKLINE>
               [[ 1.    ,  0.3556,  0.3556, -1.6376]]])
        """
        N, D, R = self._split_X(X)
        return self._values(N, D, R, jac=True)[1]

    @constraints(model_size="real>0", mixture="array1d", tokens="real>0")
    def mixture_gradient(self, model_size: float, mixture: Any, *, tokens: float | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """The law at one size and one mixture, and its gradient with respect to the mixture weights.

        Parameters
        ----------
        model_size : float
            N > 0.
        mixture : array_like of shape (M,)
            Weights >= 0 summing to 1 (within 1e-6; renormalised).
        tokens : float, optional
            D > 0, required by laws that use tokens.

        Returns
        -------
        values : ndarray of shape (V,)
        grad : ndarray of shape (V, M)
            :math:`\\partial L_i / \\partial r_j`, the weights treated as free coordinates (the caller projects
            onto the simplex).
        """
        check_is_fitted(self, "coef_")
        N = check_real(model_size, "model_size", low=0, low_open=True)
        r = as_array(mixture, "mixture", ndim=1).astype(float)
        check_finite(r, "mixture")
        if r.shape != (self.n_domains_,):
            raise ValueError(f"`mixture` must have {self.n_domains_} weights; got shape {r.shape}")
        r = _check_mixtures(r[None, :], "mixture")
        D = None
        if self.uses_tokens_:
            if tokens is None:
                raise ValueError("`tokens` is required: this law uses tokens")
            D = np.array([check_real(tokens, "tokens", low=0, low_open=True)])
        elif tokens is not None:
            check_real(tokens, "tokens", low=0, low_open=True)
            raise ValueError("`tokens` must be None: this law does not use tokens")
        value, G = self._values(np.array([N]), D, r, grad_r=True)
        return value[0], G[0]


    # --------------------------------------------------------------------------------------------------------
    # fitting
    # --------------------------------------------------------------------------------------------------------
    def _check_hyper(self) -> dict:
        form = check_option(self.form, "form", _FORMS)
        data_term = check_bool(self.data_term, "data_term")
        if data_term and form not in _DATA_TERM_FORMS:
            raise ValueError(f"`data_term` applies to forms {', '.join(map(repr, _DATA_TERM_FORMS))}; "
                             f"got form {form!r}")
        loss = check_option(self.loss, "loss", _LOSSES)
        delta = check_real(self.delta, "delta", low=0, low_open=True)
        space = check_option(self.space, "space", _SPACES)
        n_starts = check_int(self.n_starts, "n_starts", minimum=1, maximum=_MAX_STARTS)
        check_bool(self.progress, "progress")
        N0 = None if self.reference_size is None else check_real(self.reference_size, "reference_size", low=0,
                                                                 low_open=True)
        D0 = None if self.reference_tokens is None else check_real(self.reference_tokens, "reference_tokens",
                                                                   low=0, low_open=True)
        if self.fixed is not None and not isinstance(self.fixed, dict):
            raise TypeError(f"`fixed` must be a dict of parameter values or None; got {type(self.fixed).__name__}")
        if self.fixed is not None:
            bad = [k for k in self.fixed if not isinstance(k, str)]
            if bad:
                raise TypeError(f"`fixed` keys must be parameter names (str); got {bad[0]!r}")
        normalize_rng(self.rng)  # type check only (a Generator passes through unchanged)
        return dict(form=form, data_term=data_term, delta=None if loss == "l2" else delta, space=space,
                    n_starts=n_starts, N0=N0, D0=D0, huber_delta=delta, loss=loss)

    def _check_data(self, X: Any, y: Any, sample_weight: Any, hp: dict):
        form = hp["form"]
        uses_tokens = form == "capacity_kkt" or hp["data_term"]
        X = as_points(X, "X")
        first = 2 if uses_tokens else 1
        if X.shape[1] < first + 1:
            what = "size, tokens, then at least one mixture weight" if uses_tokens else \
                "size, then at least one mixture weight"
            raise ValueError(f"`X` must have at least {first + 1} columns ({what}); got {X.shape[1]}")
        N = X[:, 0].copy()
        if N.min() <= 0:
            raise ValueError(f"`X` column 0 (model sizes) must be > 0; got a minimum of {N.min():.3g}")
        D = None
        if uses_tokens:
            D = X[:, 1].copy()
            if D.min() <= 0:
                raise ValueError(f"`X` column 1 (tokens) must be > 0; got a minimum of {D.min():.3g}")
        _check_token_column(X, uses_tokens, "X")
        R = np.array(_check_mixtures(X[:, first:], "X"))  # a copy: the training runs are kept
        Y = as_array(y, "y")
        if Y.ndim not in (1, 2):
            raise ValueError(f"`y` must be 1-D (one validation set) or 2-D (runs x validation sets); got shape "
                             f"{Y.shape}")
        single = Y.ndim == 1
        with np.errstate(over="ignore"):
            Y = np.array(Y, dtype=np.float64).reshape(len(Y), -1)
        if Y.shape[0] != X.shape[0]:
            raise ValueError(f"`X` and `y` must have the same number of runs; `X` has {X.shape[0]}, `y` has "
                             f"{Y.shape[0]}")
        if Y.shape[1] == 0:
            raise ValueError("`y` must have at least one validation set (column)")
        if not np.isfinite(Y).all():
            raise ValueError("`y` must be finite")
        if Y.min() <= 0:
            raise ValueError(f"`y` losses must be > 0; got a minimum of {Y.min():.3g}")
        if sample_weight is None:
            s = np.ones(len(Y))
        else:
            s = as_array(sample_weight, "sample_weight", ndim=1)
            with np.errstate(over="ignore"):
                s = s.astype(np.float64)
            if s.shape[0] != len(Y):
                raise ValueError(f"`sample_weight` must have one weight per run ({len(Y)}); got {s.shape[0]}")
            if not np.isfinite(s).all():
                raise ValueError("`sample_weight` must be finite")
            if s.min() < 0:
                raise ValueError("`sample_weight` must be >= 0")
            if not s.sum() > 0:
                raise ValueError("`sample_weight` must have a positive entry")
        M, V = R.shape[1], Y.shape[1]
        if form == "capacity_kkt" and V != M:
            raise ValueError(f"`y` must have one validation set per training domain for form 'capacity_kkt' "
                             f"(V = M = {M}); got {V} columns")
        keep = s > 0
        sizes = np.unique(N[keep])
        fixed = self._check_fixed(hp, V, M, sizes.size, Y, keep)
        if form in ("camel", "separable", "additive") and sizes.size < 3 and not \
                ("E" in fixed and sizes.size == 2):
            raise ValueError(f"`X` must hold at least 3 distinct model sizes for form {form!r} (2 suffice with "
                             f"`fixed` = {{'E': ...}}); got {sizes.size}")
        if form == "capacity_kkt" and "H" in fixed and not float(fixed["H"]) < N[keep].min() / 1e6:
            raise ValueError(f"`fixed['H']` = {float(fixed['H']):.6g} must be below the smallest model size in "
                             f"millions of parameters ({N[keep].min() / 1e6:.6g}): H is the least capacity "
                             "of a domain, in millions of parameters, and K domains share N + (K - 1) H")
        if hp["data_term"] and np.unique(D[keep]).size < 2:
            raise ValueError("`X` must hold at least 2 distinct token counts (column 1) with `data_term` = True")
        return N, D, R, Y, s, single, fixed

    def _check_fixed(self, hp, V, M, S, Y, keep) -> dict:
        form = hp["form"]
        if not self.fixed:
            return {}
        if form == "capacity_kkt":
            allowed = {k: (M,) for k in _KKT_KEYS} | {"H": ()}
        elif form == "data_mixing":
            allowed = {"E": (V,)}
        else:
            allowed = _param_shapes(form, V, M, hp["data_term"])
        out = {}
        for key, value in self.fixed.items():
            if key not in allowed:
                raise ValueError(f"`fixed` has unknown parameter {key!r} for form {form!r}; known: "
                                 f"{sorted(allowed)}")
            if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
                raise TypeError(f"`fixed['{key}']` must be a number or an array; got {type(value).__name__}")
            arr = as_array(value, f"fixed['{key}']").astype(np.float64)
            try:
                arr = np.array(np.broadcast_to(arr, allowed[key]))
            except ValueError:
                raise ValueError(f"`fixed['{key}']` must broadcast to shape {allowed[key]}; got shape "
                                 f"{arr.shape}") from None
            if not np.isfinite(arr).all():
                raise ValueError(f"`fixed['{key}']` must be finite")
            if key in _positive_keys(form) and (arr <= 0).any():
                raise ValueError(f"`fixed['{key}']` must be > 0")
            if key == "E" and form != "capacity_kkt":
                low = Y[keep].min(axis=0)
                if (arr < 0).any() or (arr >= low).any():
                    raise ValueError("`fixed['E']` must lie in [0, min loss) for every validation set")
            out[key] = arr
        return out

    @constraints(X="array2d", y=("array1d", "array2d"), sample_weight="array1d")
    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> "MixtureLaw":
        """Fit the law to training runs.

        Parameters
        ----------
        X : array_like of shape (R, n_features)
            One row per run: size, (tokens,) mixture weights (see :func:`mixture_features`).
        y : array_like of shape (R,) or (R, V)
            Validation losses > 0.
        sample_weight : array_like of shape (R,), optional
            Non-negative run weights multiplying each run's residual loss.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Invalid hyperparameters or data (the message names them): mixtures off the simplex, non-positive
            sizes or losses, fewer than 3 distinct sizes for a law with a size exponent and free E, V != M for
            ``'capacity_kkt'``, a tokens column missing or extra.

        Examples
        --------
        Noise-free runs of a planted law (3 sizes x 4 mixtures) give its parameters back:

        >>> import numpy as np
        >>> from numtk.mixture import MixtureLaw, mixture_features
        >>> truth = MixtureLaw.from_params("separable", {"E": [1.5], "theta": [[0.5, 0.2]], "alpha": [0.3]},
        ...                                reference_size=1e8)
        >>> X = mixture_features(np.repeat([3e7, 1e8, 3e8], 4),
        ...                      np.tile([[1, 0], [0.7, 0.3], [0.4, 0.6], [0, 1]], (3, 1)))
        >>> law = MixtureLaw("separable", reference_size=1e8, n_starts=2, rng=0).fit(X, truth.predict(X))
        >>> law.params_["theta"].round(6), law.params_["alpha"].round(6)
        (array([[0.5, 0.2]]), array([0.3]))
        """
        hp = self._check_hyper()
        N, D, R, Y, s, single, fixed = self._check_data(X, y, sample_weight, hp)
        # the hyperparameters of this fit, kept apart from the live ones (set_params may change those later)
        params = self.get_params(deep=False)
        params["fixed"] = None if self.fixed is None else {k: np.array(v, dtype=float) for k, v in
                                                            self.fixed.items()}
        with single_blas_thread():  # many tiny L-BFGS-B steps: BLAS threads only cost here
            self._fit_arrays(hp, N, D, R, Y, s, single, fixed, rng=self.rng, workers=self.workers,
                             progress=self.progress)
        self._train = (N, D, R, Y, s, single)
        self._fit_hp, self._fit_fixed, self._fit_params = hp, fixed, params
        return self

    def _fit_arrays(self, hp, N, D, R, Y, s, single, fixed, *, rng, workers, progress, init=None) -> None:
        form = hp["form"]
        M, V = R.shape[1], Y.shape[1]
        keep = s > 0
        p_set = {"camel": 2 * M + 1, "separable": M + 2, "additive": M + 3, "data_mixing": M + 1,
                 "capacity_kkt": 5}[form] + (2 if hp["data_term"] else 0)
        if init is None and keep.sum() < p_set + 2:
            warnings.warn(f"only {int(keep.sum())} runs for {p_set} parameters per validation set: the fit is "
                          "poorly determined", NumtkWarning, stacklevel=3)
        gen = normalize_rng(rng)
        if form == "capacity_kkt":
            self._fit_kkt(hp, N, D, R, Y, s, fixed, gen, workers, progress, init, single)
            self._finish(N, D, R, Y, s, single, V, M, hp)
            return
        distinct = np.unique(N[keep])
        N0 = hp["N0"] if hp["N0"] is not None else float(np.exp(np.mean(np.log(distinct))))
        D0 = None
        if hp["data_term"]:
            D0 = hp["D0"] if hp["D0"] is not None else float(np.exp(np.mean(np.log(np.unique(D[keep])))))
        self.reference_size_ = N0 if form != "data_mixing" else None
        self.reference_tokens_ = D0
        with as_map(workers) as mapper:
            if form == "data_mixing":
                P, starts, total, success, n_iter = _fit_dml(N, R, Y, s, fixed, hp, gen, mapper, progress, init)
            else:
                P, starts, total, success, n_iter = _fit_exp(form, N, D, R, Y, s, fixed, hp, N0, D0, gen, mapper,
                                                             progress, init)[:5]
        self._set_fitted(P, V=V, M=M, N0=self.reference_size_, D0=D0, uses_tokens=hp["data_term"],
                         single=single)
        self.loss_ = float(total)
        self.success_ = bool(success)
        self.starts_ = starts
        self.n_iter_ = int(n_iter)
        if form == "data_mixing":
            self._dml_setup_anchors(N, R, Y, s)
            self._dml_seed = int(gen.integers(2**63 - 1))
            self._dml_hp = hp
        self._finish(N, D, R, Y, s, single, V, M, hp)

    def _finish(self, N, D, R, Y, s, single, V, M, hp) -> None:
        pred = self._values(N, D, R)
        keep = s > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            res = (np.log(pred) - np.log(Y))[keep].ravel()
        res = res[np.isfinite(res)]
        self.residual_std_ = float(1.4826 * np.median(np.abs(res - np.median(res)))) if res.size else float("nan")

    def _fit_kkt(self, hp, N, D, R, Y, s, fixed, gen, workers, progress, init, single=False) -> None:
        from numtk.mixture._capacity_kkt import kkt_fit

        M = R.shape[1]
        rngs = spawn_rngs(gen, hp["n_starts"])
        with as_map(workers) as mapper:
            P, objective, starts, success, n_iter = kkt_fit(
                N, D, R, Y, loss=hp["loss"], delta=hp["huber_delta"], space=hp["space"], n_starts=hp["n_starts"],
                fixed=fixed or None, sample_weight=s, rngs=rngs, map_fn=mapper, progress=progress)
        self.reference_size_ = None
        self.reference_tokens_ = None
        self._set_fitted(P, V=M, M=M, N0=None, D0=None, uses_tokens=True, single=single)
        self.loss_ = float(objective)
        self.success_ = bool(success)
        self.starts_ = list(starts)
        self.n_iter_ = int(n_iter)

    # --------------------------------------------------------------------------------------------------------
    # uncertainty
    # --------------------------------------------------------------------------------------------------------
    def _training(self, name: str):
        check_is_fitted(self, "coef_")
        train = getattr(self, "_train", None)
        if train is None:
            raise ValueError(f"`{name}` needs the training runs: this law was made by from_params, not fitted")
        return train

    def _free_mask(self) -> np.ndarray:
        """Coefficients not held by ``fixed`` (the ones the covariance is over)."""
        free = np.ones(self.n_params_, dtype=bool)
        fixed = getattr(self, "_fit_fixed", None) or {}
        if not fixed:
            return free
        form = self._law_form
        shapes = _param_shapes(form, self.n_outputs_, self.n_domains_, self._law_data_term,
                               self.params_["sizes"].size if form == "data_mixing" else 0)
        off = _offsets(shapes)
        for key in fixed:
            if key in shapes:
                free[off[key]:off[key] + int(np.prod(shapes[key], dtype=int))] = False
        return free

    def _covariance(self):
        """Delta-method covariance of ``coef_`` and the identification of each unit of the fit.

        A unit is a validation set (a (size, set) pair for ``'data_mixing'``, whose per-size laws are separate
        fits). Per unit u with n_u runs and p_u coefficients its predictions depend on, the M-estimator's
        covariance in Huber's homoscedastic form is

            c_u (J_u^T S J_u)^{-1},   c_u = [sum_n s_n psi(r_n)^2 / (n_u - p_u)] / [sum_n s_n psi'(r_n) / sum_n s_n]^2

        (psi = rho', J in the fit space; for the squared loss c_u is the residual variance and this is the
        Gauss-Newton covariance). A unit is not identified when n_u <= p_u, when no residual lies where
        psi' > 0, or when the information of the units sharing its coefficients is rank deficient (column
        scaled, relative threshold 1e-10 on the singular values); its predictions get NaN intervals.
        Returns (cov, units) with units a list of dicts (output, size index, dof, ok, reason)."""
        from scipy.linalg import pinvh

        from numtk.mixture._huber import residual_loss

        if getattr(self, "_cov", None) is not None:
            return self._cov
        N, D, R, Y, s, _ = self._training("method")
        hp = self._fit_hp
        pred, J = self._values(N, D, R, jac=True)
        if hp["space"] == "log":
            res = np.log(pred) - np.log(Y)
            Jf = J / pred[:, :, None]
        else:
            res = pred - Y
            Jf = J
        free = self._free_mask()
        Jf = Jf[:, :, free]
        pf = int(free.sum())
        keep = s > 0
        V = self.n_outputs_
        if self._law_form == "data_mixing":
            sizes = self.params_["sizes"]
            rows_of = [(i, k, keep & (np.abs(N - size) <= _SIZE_TOL * size)) for k, size in enumerate(sizes)
                       for i in range(V)]
        else:
            rows_of = [(i, None, keep) for i in range(V)]
        _, psi = residual_loss(res, hp["delta"])
        dpsi = np.ones_like(res) if hp["delta"] is None else (np.abs(res) <= hp["delta"]).astype(float)
        units, blocks = [], []
        for i, k, rows in rows_of:
            Ju = Jf[rows, i]
            su = s[rows]
            cols = np.flatnonzero((np.abs(Ju) > 0).any(axis=0))
            n_u, p_u = int(rows.sum()), int(cols.size)
            unit = {"output": i, "size": k, "n": n_u, "p": p_u, "dof": n_u - p_u, "ok": True, "reason": "",
                    "cols": cols}
            m1 = float(su @ dpsi[rows, i]) / float(su.sum()) if n_u else 0.0
            if n_u <= p_u:
                unit.update(ok=False, reason=f"{n_u} runs for {p_u} parameters")
                scale = 1.0
            elif not m1 > 0:
                unit.update(ok=False, reason=f"no residual within the Huber threshold {hp['delta']:g}")
                scale = 1.0
            else:
                scale = float(su @ psi[rows, i] ** 2) / (n_u - p_u) / m1 ** 2
                scale = scale if scale > 0 else np.finfo(float).tiny
            units.append(unit)
            blocks.append((Ju, su / scale, np.sqrt(su)))
        # units sharing coefficients (capacity_kkt's H and b, c) are checked for rank together
        parent = list(range(len(units)))

        def root(a):
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        owner = {}
        for u, unit in enumerate(units):
            for c in unit["cols"]:
                if c in owner:
                    parent[root(u)] = root(owner[c])
                else:
                    owner[c] = u
        comps: dict = {}
        for u in range(len(units)):
            comps.setdefault(root(u), []).append(u)
        for members in comps.values():
            cols = np.unique(np.concatenate([units[u]["cols"] for u in members]))
            if cols.size == 0:
                continue
            W = np.vstack([blocks[u][2][:, None] * blocks[u][0][:, cols] for u in members])
            norms = np.linalg.norm(W, axis=0)
            W = W / np.where(norms > 0, norms, 1.0)
            sv = np.linalg.svd(W, compute_uv=False) if W.shape[0] else np.zeros(0)
            rank = int(np.sum(sv > 1e-10 * sv[0])) if sv.size else 0
            bad = rank < cols.size or any(not units[u]["ok"] for u in members)
            if bad:
                why = f"information of rank {rank} for {cols.size} parameters" if rank < cols.size else \
                    "a validation set sharing its parameters is not identified"
                for u in members:
                    if units[u]["ok"]:
                        units[u].update(ok=False, reason=why)
        A = np.zeros((pf, pf))
        for Ju, w, _ in blocks:
            A += Ju.T @ (w[:, None] * Ju)
        cov = np.zeros((self.n_params_, self.n_params_))
        cov[np.ix_(free, free)] = pinvh(A, rtol=1e-12)
        self._cov = (cov, units)
        return self._cov

    def _units_at(self, N, units):
        """The unit index of every (row, set) of a prediction at sizes N: (n, V) ints, -1 where none (a size of
        'data_mixing' outside its training sizes)."""
        V = self.n_outputs_
        out = np.full((len(N), V), -1, dtype=int)
        index = {(u["output"], u["size"]): k for k, u in enumerate(units)}
        if self._law_form == "data_mixing":
            sizes = self.params_["sizes"]
            for k, size in enumerate(sizes):
                at = np.abs(N - size) <= _SIZE_TOL * size
                for i in range(V):
                    out[at, i] = index[(i, k)]
        else:
            out[:] = [index[(i, None)] for i in range(V)]
        return out

    @constraints(X="array2d", level="prob_open", method="option", n_resamples="count", rng="rng")
    def predict_interval(self, X: Any, *, level: float = 0.95, method: str = "delta", n_resamples: int = 200,
                         rng: Any = None) -> Result:
        """Point predictions with confidence intervals for the law (not for a new run's noise).

        Parameters
        ----------
        X : array_like of shape (n, n_features_in_)
        level : float, default 0.95
            Confidence level, in (0, 1).
        method : {'delta', 'bootstrap'}, default 'delta'
            ``'delta'``: the M-estimator covariance of ``coef_`` in Huber's homoscedastic form,
            :math:`c\\,(J^T S J)^{-1}` with :math:`J` the residual Jacobian of the fit (in its space, log or
            linear) and, per validation set (per size and set for ``'data_mixing'``),
            :math:`c = [\\sum_n s_n\\psi(r_n)^2/(n - p)] / [\\sum_n s_n\\psi'(r_n)/\\sum_n s_n]^2`,
            :math:`\\psi = \\rho'` (for ``loss='l2'`` the residual variance, the Gauss-Newton covariance);
            the interval is the prediction :math:`\\pm t_{n-p}` standard errors in the fit space
            (multiplicative for ``space='log'``). Where the runs do not identify the law (n <= p, a rank
            deficient information, no residual within the Huber threshold) the std and limits are NaN, with a
            ``NumtkWarning``.
            ``'bootstrap'``: percentile intervals of the predictions of :meth:`bootstrap` refits.
        n_resamples : int, default 200
            Bootstrap refits (``'bootstrap'`` only).
        rng : {None, int, numpy.random.Generator}, optional
            Randomness of the resampling (``'bootstrap'`` only).

        Returns
        -------
        Result
            prediction : ndarray
                :meth:`predict` (shape (n,) or (n, V)).
            lower, upper : ndarray
                Interval bounds, same shape.
            std : ndarray
                Standard error of the prediction (delta method, in loss units; or the bootstrap standard
                deviation), same shape.
            level : float
            method : str

        Notes
        -----
        Delta intervals need the Jacobian: for ``'data_mixing'`` at sizes other than its training sizes they
        are NaN (the bootstrap covers them). Huber's form assumes residuals of one distribution per set
        (homoscedastic); it is an asymptotic approximation, and with few residuals inside ``delta`` its
        denominator is noisy. Laws made by :meth:`from_params` have no training runs and refuse
        both methods.

        Examples
        --------
        Runs with 1% noise, a 90% interval for the law at a size 3x beyond the largest run:

        >>> import numpy as np
        >>> from numtk.mixture import MixtureLaw, mixture_features
        >>> truth = MixtureLaw.from_params("separable", {"E": [1.5], "theta": [[0.5, 0.2]], "alpha": [0.3]},
        ...                                reference_size=1e8)
        >>> X = mixture_features(np.repeat([3e7, 1e8, 3e8], 4),
        ...                      np.tile([[1, 0], [0.7, 0.3], [0.4, 0.6], [0, 1]], (3, 1)))
        >>> y = truth.predict(X) * np.exp(0.01 * np.random.default_rng(0).standard_normal((12, 1)))
        >>> law = MixtureLaw("separable", loss="l2", n_starts=2, rng=0).fit(X, y)
        >>> res = law.predict_interval(mixture_features(1e9, [0.5, 0.5]), level=0.9)
        >>> res.prediction.round(3), res.lower.round(3), res.upper.round(3)
        (array([[2.183]]), array([[2.142]]), array([[2.224]]))
        >>> truth.predict(mixture_features(1e9, [0.5, 0.5])).round(3)  # the truth, inside
        array([[2.211]])
        """
        N, D, R = self._split_X(X)
        level = check_real(level, "level", low=0, high=1, low_open=True, high_open=True)
        method = check_option(method, "method", _METHODS)
        n_resamples = check_int(n_resamples, "n_resamples", minimum=2, maximum=1_000_000)
        normalize_rng(rng)  # checked whatever the method (a Generator passes through unchanged)
        pred = self._values(N, D, R)
        if method == "delta":
            from scipy.stats import t as student_t

            cov, units = self._covariance()
            J = self._values(N, D, R, jac=True)[1]
            var = np.einsum("nip,pq,niq->ni", J, cov, J)
            std = np.sqrt(np.maximum(var, 0.0))
            at = self._units_at(N, units)
            ok = np.array([u["ok"] for u in units] + [False])[at]
            dof = np.array([max(u["dof"], 1) for u in units] + [1])[at]
            std[~ok] = np.nan
            bad = sorted({k for k in at[(at >= 0) & ~ok].tolist()})
            if bad:
                what = "; ".join(
                    f"validation set {units[k]['output']}"
                    + ("" if units[k]["size"] is None else f" at size {self.params_['sizes'][units[k]['size']]:.6g}")
                    + f" ({units[k]['reason']})" for k in bad[:5]) + ("; ..." if len(bad) > 5 else "")
                warnings.warn(f"the law is not identified by its training runs for {what}: its delta intervals are "
                              "NaN (add runs, hold parameters with `fixed`, or use a simpler form)", NumtkWarning,
                              stacklevel=2)
            q = student_t.ppf(0.5 + level / 2, dof)
            if self._fit_hp["space"] == "log":
                rel = std / pred
                lower, upper = pred * np.exp(-q * rel), pred * np.exp(q * rel)
            else:
                lower, upper = pred - q * std, pred + q * std
        else:
            laws = self.bootstrap(n_resamples, rng=rng)
            boot = np.stack([law._values(N, D, R) for law in laws])
            lower = np.quantile(boot, 0.5 - level / 2, axis=0)
            upper = np.quantile(boot, 0.5 + level / 2, axis=0)
            std = boot.std(axis=0, ddof=1)
        return Result(prediction=self._shape_out(pred), lower=self._shape_out(lower), upper=self._shape_out(upper),
                      std=self._shape_out(std), level=level, method=method)

    @constraints(n_resamples="count", rng="rng")
    def bootstrap(self, n_resamples: int = 200, *, rng: Any = None) -> list["MixtureLaw"]:
        """Refits on resampled training runs (cases), stratified by model size.

        Each resample draws, for every training size, as many runs of that size as it had, with replacement;
        for ``'data_mixing'`` it draws whole mixtures instead (every run of a mixture, at all its sizes, so that
        the mixtures shared across sizes that carry the extrapolation to unseen sizes stay whole), within groups
        of mixtures run at the same sizes. A resample with fewer than M + 1 distinct shared mixtures extrapolates
        through the original law's shared mixtures, evaluated by its own per-size laws.
        Each refit starts from this law's parameters and from the profile start (not from ``n_starts`` random
        starts: the bootstrap measures the sampling variability around this fit's optimum), with the
        hyperparameters of this law's fit; ``'capacity_kkt'`` is the exception: its refits run the full
        multi-start fit (``n_starts`` starts). The refits are spread over ``workers``; the result does not
        depend on it.

        Parameters
        ----------
        n_resamples : int, default 200
        rng : {None, int, numpy.random.Generator}, optional
            One independent stream per resample.

        Returns
        -------
        list of MixtureLaw
            Fitted laws (usable as ``theta_samples`` of :func:`allocate_budget`).

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.mixture import MixtureLaw, mixture_features
        >>> truth = MixtureLaw.from_params("separable", {"E": [1.5], "theta": [[0.5, 0.2]], "alpha": [0.3]},
        ...                                reference_size=1e8)
        >>> X = mixture_features(np.repeat([3e7, 1e8, 3e8], 4),
        ...                      np.tile([[1, 0], [0.7, 0.3], [0.4, 0.6], [0, 1]], (3, 1)))
        >>> y = truth.predict(X) * np.exp(0.01 * np.random.default_rng(0).standard_normal((12, 1)))
        >>> law = MixtureLaw("separable", loss="l2", n_starts=2, rng=0).fit(X, y)
        >>> laws = law.bootstrap(5, rng=0)
        >>> len(laws), all(b.n_params_ == law.n_params_ for b in laws)
        (5, True)
        >>> alphas = np.array([b.params_["alpha"][0] for b in laws])  # the sampling spread of the exponent
        >>> bool(0.2 < alphas.min() <= alphas.max() < 0.4)
        True
        """
        n_resamples = check_int(n_resamples, "n_resamples", minimum=1, maximum=1_000_000)
        gen = normalize_rng(rng)
        N, D, R, Y, s, single = self._training("bootstrap")
        gens = spawn_rngs(gen, n_resamples)
        hp = self._fit_hp
        form = self._law_form
        init = self.params_ if form != "capacity_kkt" else None
        fallback = None
        if form == "data_mixing":
            # clusters: every run of one mixture (across sizes), stratified by the sizes the mixture was run at
            _, cluster = np.unique(np.round(R, 12), axis=0, return_inverse=True)
            cluster = cluster.reshape(-1)
            members = [np.flatnonzero(cluster == c) for c in range(cluster.max() + 1)]
            groups: dict = {}
            for c, rows in enumerate(members):
                groups.setdefault(tuple(np.unique(N[rows])), []).append(c)
            strata = [np.array(g) for g in groups.values()]
            anchors, losses = self._dml_anchor_data()
            fallback = anchors[np.isfinite(losses[:, :, 0]).sum(axis=0) >= 3]
        else:
            strata = [np.flatnonzero(N == size) for size in np.unique(N)]
        tasks = []
        for g in gens:
            if form == "data_mixing":
                picked = np.concatenate([g.choice(c, size=c.size, replace=True) for c in strata])
                idx = np.concatenate([members[c] for c in picked])
            else:
                idx = np.concatenate([g.choice(rows, size=rows.size, replace=True) for rows in strata])
            tasks.append((self._fit_params, hp, (N[idx], None if D is None else D[idx], R[idx], Y[idx], s[idx],
                                                 single), init, int(g.integers(2**63 - 1)), fallback))
        with as_map(self.workers) as mapper:
            bar = progress_bar(progress=self.progress, total=n_resamples, desc="MixtureLaw.bootstrap")
            laws = []
            try:
                for law in mapper(_bootstrap_refit, tasks):
                    laws.append(law)
                    bar.update(1)
            finally:
                bar.close()
        return laws

    @constraints(X="array2d", y=("array1d", "array2d"), sample_weight="array1d")
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Coefficient of determination R^2 of :meth:`predict` (scikit-learn's regressor score; several
        validation sets are averaged uniformly).

        Parameters
        ----------
        X : array_like of shape (n, n_features_in_)
        y : array_like of shape (n,) or (n, V)
        sample_weight : array_like of shape (n,), optional

        Returns
        -------
        float
        """
        from sklearn.metrics import r2_score

        pred = self.predict(X)
        Y = as_array(y, "y")
        if Y.shape != pred.shape:
            raise ValueError(f"`y` must have the shape of the predictions, {pred.shape} (one row per run of `X`); "
                             f"got {Y.shape}")
        Y = Y.astype(np.float64)
        check_finite(Y, "y")
        w = None
        if sample_weight is not None:
            w = as_array(sample_weight, "sample_weight", ndim=1).astype(np.float64)
            if w.shape[0] != pred.shape[0]:
                raise ValueError(f"`sample_weight` must have one weight per run ({pred.shape[0]}); got {w.shape[0]}")
            check_finite(w, "sample_weight")
            if w.size and (w.min() < 0 or not w.sum() > 0):
                raise ValueError("`sample_weight` must be >= 0 with a positive entry")
        return float(r2_score(Y, pred, sample_weight=w, multioutput="uniform_average"))

    # --------------------------------------------------------------------------------------------------------
    # 'data_mixing' at unseen sizes
    # --------------------------------------------------------------------------------------------------------
    def _dml_setup_anchors(self, N, R, Y, s) -> None:
        """Mixtures run at several training sizes and their (weighted mean) losses there."""
        keep = s > 0
        sizes = self.params_["sizes"]
        keys, inverse = np.unique(np.round(R[keep], 12), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        size_idx = np.searchsorted(sizes, N[keep])
        m, S, V = keys.shape[0], sizes.size, Y.shape[1]
        total = np.zeros((S, m, V))
        weight = np.zeros((S, m))
        np.add.at(total, (size_idx, inverse), s[keep, None] * Y[keep])
        np.add.at(weight, (size_idx, inverse), s[keep])
        with np.errstate(invalid="ignore", divide="ignore"):
            losses = total / weight[:, :, None]
        losses[weight == 0] = np.nan
        self._dml_anchors = keys / keys.sum(axis=1, keepdims=True)
        self._dml_anchor_losses = losses

    def _dml_anchor_data(self):
        anchors = getattr(self, "_dml_anchors", None)
        losses = getattr(self, "_dml_anchor_losses", None)
        M = self.n_domains_
        if anchors is None:
            pairs = [(a, b) for a in range(M) for b in range(a + 1, M)]
            anchors = np.vstack([np.eye(M), np.full((1, M), 1.0 / M)]
                                + [np.eye(M)[[a]] * 0.5 + np.eye(M)[[b]] * 0.5 for a, b in pairs])
        if losses is None:
            P = self.params_
            losses = np.stack([_eval_dml_size(P["E"][k], P["theta"][k], anchors) for k in range(len(P["sizes"]))])
        return anchors, losses

    def _dml_unseen(self, size: float):
        cache = self._dml_cache
        if size in cache:
            return cache[size]
        sizes = self.params_["sizes"]
        if sizes.size < 3:
            raise ValueError(f"`X` holds the size {size:.6g}, not a training size: 'data_mixing' extrapolates to "
                             f"other sizes only from at least 3 training sizes; this law has {sizes.size}")
        with single_blas_thread():
            return self._dml_unseen_fit(size)

    def _dml_unseen_fit(self, size: float):
        cache = self._dml_cache
        sizes = self.params_["sizes"]
        if "size_law" not in cache:
            anchors, losses = self._dml_anchor_data()
            shared = np.isfinite(losses[:, :, 0]).sum(axis=0) >= 3
            M = self.n_domains_
            if shared.sum() < M + 1:
                raise ValueError(f"`X` holds the size {size:.6g}, not a training size: 'data_mixing' extrapolates "
                                 f"from the mixtures run at >= 3 training sizes, and needs at least M + 1 = "
                                 f"{M + 1} such shared mixtures; the training runs share {int(shared.sum())}")
            hp = getattr(self, "_dml_hp", None) or {"delta": 1e-3, "space": "log", "n_starts": 8}
            cache["size_law"] = (anchors[shared],) + _fit_size_law(sizes, losses[:, shared], hp)
        anchors, Ninv, alpha, E, kappa = cache["size_law"]
        hp = getattr(self, "_dml_hp", None) or {"delta": 1e-3, "space": "log", "n_starts": 8}
        target = E + np.exp(kappa - alpha * math.log(size / Ninv))
        seed = getattr(self, "_dml_seed", 0)
        gen = np.random.default_rng([seed, int(np.float64(size).view(np.uint64))])  # per size, not per call order
        V = target.shape[1]
        Eout, theta = np.empty(V), np.empty((V, self.n_domains_))
        fixed_E = (getattr(self, "_fit_fixed", None) or {}).get("E")
        for i in range(V):
            E_i = None if fixed_E is None else float(fixed_E[i])
            if E_i is not None and not E_i < target[:, i].min():
                raise ValueError(f"`fixed['E']` = {E_i:.6g} of validation set {i} is not below the losses "
                                 f"extrapolated to the size {size:.6g} (minimum {target[:, i].min():.6g}): the law "
                                 "cannot hold it there")
            best = _fit_dml_set(anchors, target[:, i], np.ones(len(anchors)), E_i, hp, gen.spawn(1)[0])
            Eout[i], theta[i] = best
        cache[size] = (Eout, theta)
        return cache[size]


def _bootstrap_refit(task):
    """One bootstrap refit (module level, so that a process pool can carry it)."""
    params, hp, (N, D, R, Y, s, single), init, seed, fallback = task
    law = MixtureLaw(**{**params, "workers": 1, "progress": False, "rng": seed})
    fixed = law._check_fixed(hp, Y.shape[1], R.shape[1], 0, Y, s > 0)
    with single_blas_thread():
        law._fit_arrays(hp, N, D, R, Y, s, single, fixed, rng=seed, workers=1, progress=False, init=init)
    law._train = (N, D, R, Y, s, single)
    law._fit_hp, law._fit_fixed, law._fit_params = hp, fixed, {**params, "rng": seed}
    if fallback is not None and law._dml_anchor_losses is not None and \
            (np.isfinite(law._dml_anchor_losses[:, :, 0]).sum(axis=0) >= 3).sum() < R.shape[1] + 1:
        # a resample drawing fewer than M + 1 distinct shared mixtures: extrapolate through the original shared
        # mixtures, their losses given by this refit's per-size laws
        law._dml_anchors, law._dml_anchor_losses = fallback, None
    return law


# ------------------------------------------------------------------------------------------------------------
# the least-residual problems and their starts
# ------------------------------------------------------------------------------------------------------------
class _Problem:
    """One validation set's (one size's for 'data_mixing') fit: pred = E + sum_t exp(G_t u_t), the entries
    of u marked ``pos`` held as logs; the optimiser's x maps to the full vector z = [E, u] by z = z0 + T x."""

    def __init__(self, G, slices, pos, keys, y, s, delta, log_space, T, z0, lo, hi, ls_term, group_keys):
        self.G, self.slices, self.pos, self.keys = G, slices, pos, keys
        self.y, self.s, self.delta, self.log_space = y, s, delta, log_space
        self.logy = np.log(y)
        self.T, self.z0, self.lo, self.hi = T, z0, lo, hi
        self.ls_term, self.group_keys = ls_term, group_keys
        first = [int(np.flatnonzero(T[:, g])[0]) for g in range(T.shape[1])]
        self.first = np.array(first, dtype=int)
        self.bounds = [(None if not np.isfinite(lo[k]) else lo[k], None if not np.isfinite(hi[k]) else hi[k])
                       for k in first]
        self.fixed = ~T.any(axis=1)
        self.lo_free = np.array([lo[k] for k in first], dtype=float)
        self.hi_free = np.array([hi[k] for k in first], dtype=float)

    def full(self, x):
        return self.z0 + self.T @ x

    def natural(self, z):
        u = z[1:].copy()
        u[self.pos] = np.exp(u[self.pos])
        return z[0], u

    def terms(self, u):
        return [np.exp(G @ u[sl]) for G, sl in zip(self.G, self.slices)]

    def x_of(self, z):
        return np.clip(z[self.first], [b[0] if b[0] is not None else -np.inf for b in self.bounds],
                       [b[1] if b[1] is not None else np.inf for b in self.bounds])


def _objective(x, prob):
    from numtk.mixture._huber import residual_loss

    z = prob.z0 + prob.T @ x
    E = z[0]
    u = z[1:].copy()
    pos = prob.pos
    u[pos] = np.exp(u[pos])
    pred = np.full(prob.y.shape, E)
    es = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for G, sl in zip(prob.G, prob.slices):
            e = np.exp(G @ u[sl])
            pred += e
            es.append(e)
        if prob.log_space:
            res = np.log(pred) - prob.logy
        else:
            res = pred - prob.y
    if not np.isfinite(res).all():
        return 1e300, np.zeros_like(x)
    rho, psi = residual_loss(res, prob.delta)
    f = float(prob.s @ rho)
    w = prob.s * psi
    if prob.log_space:
        w = w / pred
    g = np.empty(z.shape[0])
    g[0] = w.sum()
    for G, sl, e in zip(prob.G, prob.slices, es):
        g[1 + sl.start:1 + sl.stop] = (w * e) @ G
    g[1:][pos] *= u[pos]
    return f, g @ prob.T


def _objective_batch(X, prob):
    """:func:`_objective` for the rows of X (B, p_free) at once: values (B,), gradients (B, p_free)."""
    from numtk.mixture._huber import residual_loss

    Z = prob.z0[None, :] + X @ prob.T.T
    E = Z[:, 0]
    U = Z[:, 1:].copy()
    pos = prob.pos
    U[:, pos] = np.exp(U[:, pos])
    pred = np.repeat(E[None, :], prob.y.shape[0], axis=0)
    es = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for G, sl in zip(prob.G, prob.slices):
            e = np.exp(G @ U[:, sl].T)
            pred += e
            es.append(e)
        if prob.log_space:
            res = np.log(pred) - prob.logy[:, None]
        else:
            res = pred - prob.y[:, None]
    bad = ~np.isfinite(res).all(axis=0)
    if bad.any():
        res[:, bad] = 0.0
        pred[:, bad] = 1.0
        for e in es:
            e[:, bad] = 0.0
    rho, psi = residual_loss(res, prob.delta)
    f = prob.s @ rho
    W = prob.s[:, None] * psi
    if prob.log_space:
        W = W / pred
    g = np.empty(Z.shape)
    g[:, 0] = W.sum(axis=0)
    for G, sl, e in zip(prob.G, prob.slices, es):
        g[:, 1 + sl.start:1 + sl.stop] = (W * e).T @ G
    g[:, 1:][:, pos] *= U[:, pos]
    g = g @ prob.T
    f[bad] = 1e300
    g[bad] = 0.0
    return f, g


_LOCKSTEP: list = []


def _lockstep_available() -> bool:
    """Whether SciPy's L-BFGS-B reverse-communication routine has the interface driven below (SciPy >= 1.15);
    probed once on a quadratic and compared with scipy.optimize.minimize."""
    if not _LOCKSTEP:
        ok = False
        try:
            from scipy.optimize import minimize

            def quad(X):
                return 0.5 * np.sum((X - 1.5) ** 2, axis=1), X - 1.5

            x, f, _, _, _ = _lbfgsb_lockstep(quad, np.zeros((1, 2)), np.array([0.0, -np.inf]),
                                             np.array([1.0, np.inf]))[0]
            ref = minimize(lambda v: (0.5 * np.sum((v - 1.5) ** 2), v - 1.5), np.zeros(2), jac=True,
                           method="L-BFGS-B", bounds=[(0.0, 1.0), (None, None)], options=_LBFGS)
            ok = bool(np.allclose(x, ref.x, atol=1e-12))
        except Exception:  # an older SciPy: its Fortran routine has another signature
            ok = False
        _LOCKSTEP.append(ok)
    return _LOCKSTEP[0]


def _lbfgsb_lockstep(fun_batch, X0, lo, hi, *, maxcor=10, maxls=20, maxfun=15000, options=None):
    """Run one L-BFGS-B per row of X0 with SciPy's own routine (the loop of ``scipy.optimize.minimize``),
    advancing them together so that each round evaluates every pending point in one call of
    ``fun_batch(X) -> (f (B,), g (B, p))``. Returns [(x, f, success, n_iter, message)] per row."""
    from scipy.optimize import _lbfgsb
    from scipy.optimize._lbfgsb_py import status_messages, task_messages

    B, n = X0.shape
    m = maxcor
    options = _LBFGS if options is None else options
    factr = options["ftol"] / np.finfo(float).eps
    pgtol = options["gtol"]
    maxiter = options["maxiter"]
    nbd = np.zeros(n, np.int32)
    low = np.where(np.isfinite(lo), lo, 0.0).astype(np.float64)
    up = np.where(np.isfinite(hi), hi, 0.0).astype(np.float64)
    fl, fu = np.isfinite(lo), np.isfinite(hi)
    nbd[fl & ~fu] = 1
    nbd[fl & fu] = 2
    nbd[~fl & fu] = 3
    state = []
    for b in range(B):
        x = np.array(np.clip(X0[b], np.where(fl, lo, -np.inf), np.where(fu, hi, np.inf)), dtype=np.float64)
        state.append({"x": x, "f": np.array(0.0), "g": np.zeros(n), "wa": np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m),
                      "iwa": np.zeros(3 * n, np.int32), "task": np.zeros(2, np.int32),
                      "ln_task": np.zeros(2, np.int32), "lsave": np.zeros(4, np.int32),
                      "isave": np.zeros(44, np.int32), "dsave": np.zeros(29), "nit": 0, "nfev": 0, "done": False})
    active = list(range(B))
    while active:
        need = []
        for b in active:
            st = state[b]
            while True:
                _lbfgsb.setulb(m, st["x"], low, up, nbd, st["f"], st["g"], factr, pgtol, st["wa"], st["iwa"],
                               st["task"], st["lsave"], st["isave"], st["dsave"], maxls, st["ln_task"])
                task = st["task"]
                if task[0] == 3:
                    need.append(b)
                    break
                if task[0] == 1:
                    st["nit"] += 1
                    if st["nit"] >= maxiter:
                        task[0], task[1] = 5, 504
                    elif st["nfev"] > maxfun:
                        task[0], task[1] = 5, 502
                    continue
                st["done"] = True
                break
        if need:
            F, Gr = fun_batch(np.array([state[b]["x"] for b in need]))
            for k, b in enumerate(need):
                state[b]["f"] = np.array(float(F[k]))
                state[b]["g"] = np.array(Gr[k], dtype=np.float64)
                state[b]["nfev"] += 1
        active = need
    out = []
    for st in state:
        task = st["task"]
        success = task[0] == 4
        msg = status_messages[task[0]] + ": " + task_messages[task[1]]
        out.append((st["x"], float(st["f"]), bool(success), st["nit"], msg))
    return out


def _screen(task):
    """Screening runs (``_SCREEN`` tolerances) from the rows of X0 of one problem."""
    prob, X0 = task
    with single_blas_thread():
        return _lbfgsb_runs(prob, X0, _SCREEN)


def _polish(task):
    """Full-tolerance runs (``_LBFGS``) from the rows of X0 of one problem."""
    prob, X0 = task
    with single_blas_thread():
        return _lbfgsb_runs(prob, X0, _LBFGS)


def _polish_rows(screened):
    """The screened starts to polish: the ``_N_POLISH`` lowest (ties by position)."""
    return np.argsort([r[1] for r in screened], kind="stable")[:_N_POLISH]


def _finish(prob, X0, runs, polished=None, rows=None):
    """Per start (x, f, success, n_iter, message): the polished runs replace their screened ones (iterations
    added), the others say they were screened only, and a start lower than its refined point is kept."""
    runs = list(runs)
    if polished is not None:
        for k, (x, f, ok, nit, msg) in zip(rows, polished):
            runs[k] = (x, f, ok, runs[k][3] + nit, msg)
        for k in sorted(set(range(len(runs))) - set(np.asarray(rows).tolist())):
            x, f, ok, nit, msg = runs[k]
            runs[k] = (x, f, ok, nit, f"screened only (ftol {_SCREEN['ftol']:g}): {msg}")
    out = []
    with single_blas_thread():
        for x0, (x, _, ok, nit, msg) in zip(X0, runs):
            x0 = np.clip(x0, prob.lo_free, prob.hi_free)
            f0 = _objective(x0, prob)[0]
            f = _objective(x, prob)[0]
            if f0 < f:
                out.append((x0, f0, ok, nit, "the start is lower than the refined point: kept"))
            else:
                out.append((x, f, ok, nit, msg))
    return out


def _chunks(X0):
    """Fixed chunks of ``_CHUNK`` starts: the unit ``workers`` spreads, independent of ``workers`` (lock-step
    runs evaluate a chunk's points together, so the chunking must not depend on the number of workers for
    the fit to stay the same)."""
    return [X0[c:c + _CHUNK] for c in range(0, len(X0), _CHUNK)]


def _refine_set(task):
    """Refine every start of one problem (rows of X0) with L-BFGS-B, serially; each result is (x, f, success,
    n_iter, message), f evaluated by :func:`_objective` (the start itself is kept when it is lower). Every
    start is screened (in the chunks :func:`_run_tasks` maps) and the lowest few are polished."""
    prob, X0 = task
    if X0.shape[1] == 0:
        return [(x0, _objective(x0, prob)[0], True, 0, "nothing to fit") for x0 in X0]
    if len(X0) <= _N_POLISH:
        return _finish(prob, X0, _polish(task))
    screened = [r for chunk in _chunks(X0) for r in _screen((prob, chunk))]
    rows = _polish_rows(screened)
    return _finish(prob, X0, screened, _polish((prob, X0[rows])), rows)


def _lbfgsb_runs(prob, X0, options):
    """L-BFGS-B from every row of X0 with ``options``: [(x, f, success, n_iter, message)].

    The lock-step driver calls SciPy's private L-BFGS-B routine; should a SciPy release change it in a way the
    probe of :func:`_lockstep_available` does not catch, any exception it raises sends these starts through
    ``scipy.optimize.minimize`` one by one instead (the same algorithm, without the shared evaluations)."""
    if _lockstep_available():
        try:
            return _lbfgsb_lockstep(lambda X: _objective_batch(X, prob), X0, prob.lo_free, prob.hi_free,
                                    options=options)
        except Exception:  # noqa: BLE001 - a private interface: never let it crash a fit
            pass
    from scipy.optimize import minimize

    runs = []
    for x0 in X0:
        r = minimize(_objective, x0, args=(prob,), jac=True, method="L-BFGS-B", bounds=prob.bounds,
                     options=options)
        runs.append((np.asarray(r.x, dtype=float), r.fun, bool(r.success), int(r.nit), str(r.message)))
    return runs


def _build_problem(form, R, ell, lD, y, s, fixed_i, hp, data_term):
    """The problem of one validation set (one size's for 'data_mixing')."""
    n, M = R.shape
    G, slices, pos, keys = [], [], [], []
    ones = np.ones(n)
    if form in ("camel", "separable"):
        G.append(np.hstack([R, -ell[:, None] * R]))
        slices.append(slice(0, 2 * M))
        pos += [False] * M + [True] * M
        keys += [("theta", j) for j in range(M)] + [("alpha", j) for j in range(M)]
        ls_term = 0
    elif form == "additive":
        G.append(np.column_stack([ones, -ell]))
        slices.append(slice(0, 2))
        pos += [False, True]
        keys += [("kappa", None), ("alpha", None)]
        G.append(R)
        slices.append(slice(2, 2 + M))
        pos += [False] * M
        keys += [("theta", j) for j in range(M)]
        ls_term = 1
    else:
        G.append(R)
        slices.append(slice(0, M))
        pos += [False] * M
        keys += [("theta", j) for j in range(M)]
        ls_term = 0
    if data_term:
        k = len(pos)
        G.append(np.column_stack([ones, -lD]))
        slices.append(slice(k, k + 2))
        pos += [False, True]
        keys += [("zeta", None), ("beta", None)]
    full_keys = [("E", None)] + keys
    posfull = np.array([False] + pos)
    p = len(full_keys)
    z0 = np.zeros(p)
    groups: dict = {}
    for idx, (name, j) in enumerate(full_keys):
        if name in fixed_i:
            val = fixed_i[name]
            val = float(val) if np.ndim(val) == 0 else float(val[j])
            z0[idx] = math.log(val) if posfull[idx] else val
        else:
            gkey = (name, None) if (form == "separable" and name == "alpha") else (name, j)
            groups.setdefault(gkey, []).append(idx)
    T = np.zeros((p, len(groups)))
    for g, idxs in enumerate(groups.values()):
        T[idxs, g] = 1.0
    lo = np.full(p, -np.inf)
    hi = np.full(p, np.inf)
    ymin = float(y[s > 0].min())
    lo[0], hi[0] = 0.0, _E_SHRINK * ymin
    lo[posfull], hi[posfull] = math.log(_ALPHA_MIN), math.log(_ALPHA_MAX)
    return _Problem(G, slices, np.array(pos), full_keys, y, s, hp["delta"], hp["space"] == "log", T, z0, lo, hi,
                    ls_term, list(groups))


def _ls_starts(prob, z_base, E_values):
    """Least squares of log(L - E - other terms) on the LS term's free regressors, for each E: the full
    vectors (len(E), p) and the weighted sums of squares."""
    E_values = np.atleast_1d(np.asarray(E_values, dtype=float))
    _, u_base = prob.natural(z_base)
    other = np.zeros_like(prob.y)
    for t, (G, sl) in enumerate(zip(prob.G, prob.slices)):
        if t != prob.ls_term:
            other += np.exp(G @ u_base[sl])
    sl = prob.slices[prob.ls_term]
    idx = np.arange(1 + sl.start, 1 + sl.stop)
    gsel = [g for g in range(prob.T.shape[1]) if prob.T[idx, g].any()]
    fixed_nat = np.where(prob.fixed[idx], np.where(prob.pos[sl], np.exp(prob.z0[idx]), prob.z0[idx]), 0.0)
    G = prob.G[prob.ls_term]
    target = prob.y[:, None] - other[:, None] - E_values[None, :]
    rows = (prob.s > 0) & (target > 0).all(axis=1)
    Z = np.repeat(z_base[None, :], E_values.size, axis=0)
    Z[:, 0] = np.where(prob.fixed[0], prob.z0[0], E_values)
    if rows.sum() == 0:
        return Z, np.full(E_values.size, np.inf)
    w = np.sqrt(prob.s[rows])[:, None]
    Yt = (np.log(target[rows]) - (G[rows] @ fixed_nat)[:, None]) * w
    A = (G[rows] @ prob.T[idx][:, gsel]) * w
    if A.shape[1]:
        try:
            sol, *_ = np.linalg.lstsq(A, Yt, rcond=None)
        except np.linalg.LinAlgError:  # regressors far beyond float range (an absurd reference size)
            return Z, np.full(E_values.size, np.inf)
        sse = np.sum((Yt - A @ sol) ** 2, axis=0)
        for k, g in enumerate(gsel):
            cols = np.flatnonzero(prob.T[:, g])
            v = sol[k]
            if prob.pos[cols[0] - 1]:
                v = np.log(np.maximum(v, 1e-3))
            Z[:, cols] = v[:, None]
    else:
        sse = np.sum(Yt ** 2, axis=0)
    return Z, sse


def _profile_start(prob, z_base):
    """Best E of a 64-value grid (uniform in log(min L - E)) polished by bounded Brent."""
    from scipy.optimize import minimize_scalar

    if prob.fixed[0]:
        return _ls_starts(prob, z_base, [prob.z0[0]])[0][0]
    _, u_base = prob.natural(z_base)
    other = np.zeros_like(prob.y)
    for t, (G, sl) in enumerate(zip(prob.G, prob.slices)):
        if t != prob.ls_term:
            other += np.exp(G @ u_base[sl])
    m = float((prob.y - other)[prob.s > 0].min())
    if not m > 0:
        return _ls_starts(prob, z_base, [0.0])[0][0]
    t = np.linspace(math.log(1e-3 * m), math.log(m), _N_PROFILE)
    E = m - np.exp(t)
    E[-1] = 0.0
    Z, sse = _ls_starts(prob, z_base, E)
    k = int(np.argmin(sse))
    lo, hi = t[max(k - 1, 0)], t[min(k + 1, t.size - 1)]
    if hi > lo:
        fun = lambda tt: float(_ls_starts(prob, z_base, [max(m - math.exp(tt), 0.0)])[1][0])  # noqa: E731
        r = minimize_scalar(fun, bounds=(lo, hi), method="bounded", options={"xatol": 1e-8})
        if r.fun < sse[k]:
            return _ls_starts(prob, z_base, [max(m - math.exp(r.x), 0.0)])[0][0]
    return Z[k]


def _random_start(prob, z_base, gen, jitter=0.3):
    if prob.fixed[0]:
        E = prob.z0[0]
    else:
        _, u_base = prob.natural(z_base)
        other = np.zeros_like(prob.y)
        for t, (G, sl) in enumerate(zip(prob.G, prob.slices)):
            if t != prob.ls_term:
                other += np.exp(G @ u_base[sl])
        m = max(float((prob.y - other)[prob.s > 0].min()), 0.0)
        E = gen.uniform(0.0, 0.99 * m)
    z = _ls_starts(prob, z_base, [E])[0][0]
    sl = prob.slices[prob.ls_term]
    for g, key in enumerate(prob.group_keys):
        cols = np.flatnonzero(prob.T[:, g])
        if cols[0] > 0 and prob.pos[cols[0] - 1] and sl.start <= cols[0] - 1 < sl.stop:
            z[cols] += gen.normal(0.0, jitter)
    return z


def _base_vector(prob):
    """Default values of the terms the least squares does not set (the token term)."""
    z = prob.z0.copy()
    for idx, (name, _) in enumerate(prob.keys):
        if prob.fixed[idx]:
            continue
        if name == "zeta":
            z[idx] = math.log(0.05 * float(prob.y[prob.s > 0].min()))
        elif name == "beta":
            z[idx] = math.log(0.3)
    return z


def _run_tasks(tasks, mapper, progress, desc):
    """Refine the starts of each problem (:func:`_refine_set`, the same result), with ``mapper`` spreading the
    screening chunks of every problem and then the polishing of each problem; flat results."""
    bar = progress_bar(progress=progress, total=sum(len(t[1]) for t in tasks), desc=desc)
    try:
        trivial = [t[1].shape[1] == 0 for t in tasks]
        small = [not z and len(t[1]) <= _N_POLISH for t, z in zip(tasks, trivial)]
        jobs, owner = [], []
        for k, (prob, X0) in enumerate(tasks):
            if not trivial[k] and not small[k]:
                for chunk in _chunks(X0):
                    jobs.append((prob, chunk))
                    owner.append(k)
        screened: dict = {k: [] for k in range(len(tasks))}
        for k, job, runs in zip(owner, jobs, mapper(_screen, jobs)):
            screened[k].extend(runs)
            bar.update(len(job[1]))
        rows = {k: (_polish_rows(screened[k]) if not small[k] else np.arange(len(tasks[k][1])))
                for k in range(len(tasks)) if not trivial[k]}
        pjobs = [(tasks[k][0], tasks[k][1][rows[k]] if small[k] else
                  np.array([screened[k][r][0] for r in rows[k]])) for k in sorted(rows)]
        polished = dict(zip(sorted(rows), mapper(_polish, pjobs)))
        out = []
        for k, (prob, X0) in enumerate(tasks):
            if trivial[k]:
                out.extend(_refine_set((prob, X0)))
            elif small[k]:
                out.extend(_finish(prob, X0, polished[k]))
                bar.update(len(X0))
            else:
                out.extend(_finish(prob, X0, screened[k], polished[k], rows[k]))
    finally:
        bar.close()
    return out


def _set_fixed(fixed, i):
    return {k: v[i] for k, v in fixed.items()}


def _fit_exp(form, N, D, R, Y, s, fixed, hp, N0, D0, gen, mapper, progress, init):
    """camel / separable / additive: per validation set, starts, then L-BFGS-B over (set, start) pairs."""
    V, M = Y.shape[1], R.shape[1]
    ell = np.log(N) - math.log(N0)  # not log(N / N0): the ratio can overflow
    lD = np.log(D) - math.log(D0) if hp["data_term"] else None
    n_starts = hp["n_starts"]
    sep = None
    if form in ("camel", "additive") and init is None:
        sep_fixed = {k: v for k, v in fixed.items() if k in ("E", "zeta", "beta")}
        sep = _fit_exp("separable", N, D, R, Y, s, sep_fixed, hp, N0, D0, gen, mapper, progress, None)
    set_rngs = spawn_rngs(gen, V)
    probs, tasks, meta = [], [], []
    for i in range(V):
        prob = _build_problem(form, R, ell, lD, Y[:, i], s, _set_fixed(fixed, i), hp, hp["data_term"])
        probs.append(prob)
        base = _base_vector(prob)
        starts = []
        if form == "additive":
            base = _additive_base(prob, base, sep, i, M) if sep is not None else base
            if init is not None:
                base = _additive_base_from_params(prob, base, init, i)
            starts.append(("separable" if sep is not None else "profile", _ls_starts(prob, base, [base[0]])[0][0]))
        else:
            starts.append(("profile", _profile_start(prob, base)))
        if init is not None:
            starts.append(("init", _full_from_params(form, prob, init, i)))
        else:
            if form == "camel":
                starts.append(("separable", sep[5][i]))
                if n_starts == 1:
                    starts = starts[1:]
                n_random = max(n_starts - 2, 0)
            else:
                n_random = n_starts - 1
            for k, g in enumerate(spawn_rngs(set_rngs[i], n_random)):
                if form == "additive":
                    b = base.copy()
                    for idx, (name, _) in enumerate(prob.keys):
                        if not prob.fixed[idx] and name == "kappa":
                            b[idx] += g.normal(0.0, 0.5)
                        elif not prob.fixed[idx] and name == "alpha":
                            b[idx] += g.normal(0.0, 0.3)
                    starts.append(("random", _random_start(prob, b, g)))
                else:
                    starts.append(("random", _random_start(prob, base, g)))
        tasks.append((prob, np.array([prob.x_of(z) for _, z in starts])))
        meta.extend((i, kind) for kind, _ in starts)
    results = _run_tasks(tasks, mapper, progress, f"MixtureLaw({form!r})")
    return _collect(form, probs, results, meta, V, M, hp)


def _collect(form, probs, results, meta, V, M, hp, sizes=None):
    best: dict = {}
    starts = []
    for (key, kind), (x, f, ok, nit, msg) in zip(meta, results):
        i = key if sizes is None else key[1]
        starts.append(Result(output=i, size=None if sizes is None else float(sizes[key[0]]), kind=kind,
                             objective=float(f), x=x, success=ok, n_iter=nit, message=msg))
        if key not in best or f < best[key][1]:
            best[key] = (x, f, ok, nit)
    total = sum(b[1] for b in best.values())
    success = all(b[2] for b in best.values())
    n_iter = sum(b[3] for b in best.values())
    zs = {key: probs[k].full(best[key][0]) for k, key in enumerate(sorted(best))} if sizes is not None else \
        {i: probs[i].full(best[i][0]) for i in range(V)}
    if sizes is not None:
        return zs, starts, total, success, n_iter
    P = _params_from_full(form, [probs[i] for i in range(V)], [zs[i] for i in range(V)], M, hp["data_term"])
    return P, starts, total, success, n_iter, [zs[i] for i in range(V)]


def _params_from_full(form, probs, zs, M, data_term):
    V = len(zs)
    shapes = _param_shapes(form, V, M, data_term)
    P = {k: np.zeros(shape) for k, shape in shapes.items()}
    for i, (prob, z) in enumerate(zip(probs, zs)):
        E, u = prob.natural(z)
        P["E"][i] = E
        for idx, (name, j) in enumerate(prob.keys[1:]):
            if name not in P:
                continue
            if P[name].ndim == 2:
                P[name][i, j] = u[idx]
            else:
                P[name][i] = u[idx]
    return P


def _full_from_params(form, prob, P, i):
    """The full vector of set i from a params dict (a warm start)."""
    z = prob.z0.copy()
    for idx, (name, j) in enumerate(prob.keys):
        if prob.fixed[idx]:
            continue
        arr = np.asarray(P[name])
        v = float(arr[i]) if arr.ndim == 1 else float(arr[i, j] if j is not None else arr[i])
        if form == "separable" and name == "alpha":
            v = float(arr[i])
        z[idx] = math.log(v) if idx > 0 and prob.pos[idx - 1] else v
    return z


def _additive_base(prob, base, sep, i, M):
    """The additive start from the fitted separable law: its size factor becomes the size term, at half its
    typical weight, and theta is refitted by least squares where the remainder is positive."""
    Psep = sep[0]
    z = base.copy()
    R = prob.G[1]
    for idx, (name, _) in enumerate(prob.keys):
        if prob.fixed[idx]:
            continue
        if name == "E":
            z[idx] = min(Psep["E"][i], prob.hi[0])
        elif name == "kappa":
            z[idx] = math.log(0.5) + float(np.median(R @ Psep["theta"][i]))
        elif name == "alpha":
            z[idx] = math.log(min(max(Psep["alpha"][i], _ALPHA_MIN), _ALPHA_MAX))
        elif name == "theta":
            pass
    return z


def _additive_base_from_params(prob, base, P, i):
    z = base.copy()
    for idx, (name, _) in enumerate(prob.keys):
        if prob.fixed[idx] or name not in ("E", "kappa", "alpha"):
            continue
        v = float(np.asarray(P[name])[i])
        z[idx] = math.log(v) if name == "alpha" else v
    return z


# ------------------------------------------------------------------------------------------------------------
# 'data_mixing'
# ------------------------------------------------------------------------------------------------------------
def _dml_tasks(R, y, s, fixed_E, hp, gen, n_starts, init_z=None):
    prob = _build_problem("data_mixing", R, None, None, y, s, {} if fixed_E is None else {"E": fixed_E}, hp,
                          False)
    base = _base_vector(prob)
    starts = [("profile", _profile_start(prob, base))]
    if init_z is not None:
        starts.append(("init", init_z(prob)))
    else:
        for g in spawn_rngs(gen, n_starts - 1):
            starts.append(("random", _random_start(prob, base, g)))
    return prob, starts


def _fit_dml_set(R, y, s, fixed_E, hp, gen):
    """One per-size law fitted serially: (E, theta)."""
    prob, starts = _dml_tasks(R, y, s, fixed_E, hp, gen, hp["n_starts"])
    best = None
    for x, f, *_ in _refine_set((prob, np.array([prob.x_of(z) for _, z in starts]))):
        if best is None or f < best[1]:
            best = (x, f)
    E, u = prob.natural(prob.full(best[0]))
    return E, u


def _fit_dml(N, R, Y, s, fixed, hp, gen, mapper, progress, init):
    keep = s > 0
    sizes = np.unique(N[keep])
    S, V, M = sizes.size, Y.shape[1], R.shape[1]
    size_rngs = spawn_rngs(gen, S)
    probs, tasks, meta = [], [], []
    for k, size in enumerate(sizes):
        rows = N == size
        set_rngs = spawn_rngs(size_rngs[k], V)
        for i in range(V):
            fixed_E = None if "E" not in fixed else float(fixed["E"][i])
            init_z = None
            if init is not None:
                def init_z(prob, k=k, i=i):
                    z = prob.z0.copy()
                    if not prob.fixed[0]:
                        z[0] = init["E"][k, i]
                    z[1:] = init["theta"][k, i]
                    return z
            prob, starts = _dml_tasks(R[rows], Y[rows, i], s[rows], fixed_E, hp, set_rngs[i], hp["n_starts"],
                                      init_z)
            probs.append(prob)
            tasks.append((prob, np.array([prob.x_of(z) for _, z in starts])))
            meta.extend(((k, i), kind) for kind, _ in starts)
    results = _run_tasks(tasks, mapper, progress, "MixtureLaw('data_mixing')")
    zs, starts, total, success, n_iter = _collect("data_mixing", probs, results, meta, V, M, hp, sizes=sizes)
    P = {"sizes": sizes, "E": np.zeros((S, V)), "theta": np.zeros((S, V, M))}
    for n, (k, i) in enumerate(sorted(zs)):
        E, u = probs[n].natural(zs[(k, i)])
        P["E"][k, i], P["theta"][k, i] = E, u
    return P, starts, total, success, n_iter


def _fit_size_law(sizes, L, hp):
    """Ye et al.'s size law per (mixture, set): L(N) = E + exp(kappa - alpha log(N / N0)), one alpha shared;
    ``L`` (S, m, V) with NaN where a mixture was not run. Returns (N0, alpha, E (m, V), kappa (m, V))."""
    from scipy.optimize import minimize

    from numtk.mixture._huber import residual_loss

    N0 = float(np.exp(np.mean(np.log(sizes))))
    ell = np.log(sizes / N0)[:, None, None]
    mask = np.isfinite(L)
    Lz = np.where(mask, L, 1.0)
    Lmin = np.where(mask, L, np.inf).min(axis=0)
    w = mask / Lz ** 2
    best = None
    for alpha in np.geomspace(1e-2, 2.0, 24):
        x = np.where(mask, np.exp(-alpha * ell) * np.ones_like(L), 0.0)
        # weighted least squares of L on [1, x] per (mixture, set), relative residuals
        s0, s1, s2 = w.sum(0), (w * x).sum(0), (w * x * x).sum(0)
        t0, t1 = (w * Lz).sum(0), (w * x * Lz).sum(0)
        det = s0 * s2 - s1 * s1
        with np.errstate(divide="ignore", invalid="ignore"):
            E = np.where(det > 0, (s2 * t0 - s1 * t1) / det, 0.0)
            E = np.clip(E, 0.0, 0.9 * Lmin)
            A = np.maximum((t1 - E * s1) / s2, 1e-12)
        sse = float(np.sum(w * (E + A * x - Lz) ** 2 * mask))
        if best is None or sse < best[0]:
            best = (sse, alpha, E, np.log(A))
    _, alpha0, E0, kappa0 = best
    m, V = E0.shape
    delta, log_space = hp["delta"], hp["space"] == "log"

    def fun(z):
        gamma, E, kappa = z[0], z[1:1 + m * V].reshape(m, V), z[1 + m * V:].reshape(m, V)
        a = math.exp(gamma)
        e = np.exp(kappa - a * ell)
        pred = E + e
        res = np.where(mask, np.log(pred) - np.log(Lz) if log_space else pred - Lz, 0.0)
        rho, psi = residual_loss(res, delta)
        ww = np.where(mask, psi / pred if log_space else psi, 0.0)
        g_E = ww.sum(0)
        g_k = (ww * e).sum(0)
        g_g = float(np.sum(ww * e * -ell) * a)
        return float(np.sum(rho * mask)), np.concatenate([[g_g], g_E.ravel(), g_k.ravel()])

    z0 = np.concatenate([[math.log(alpha0)], E0.ravel(), kappa0.ravel()])
    bounds = [(math.log(_ALPHA_MIN), math.log(_ALPHA_MAX))] + [(0.0, _E_SHRINK * v) for v in Lmin.ravel()] + \
        [(None, None)] * (m * V)
    r = minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=bounds, options=_LBFGS)
    z = r.x
    return N0, math.exp(z[0]), z[1:1 + m * V].reshape(m, V), z[1 + m * V:].reshape(m, V)
