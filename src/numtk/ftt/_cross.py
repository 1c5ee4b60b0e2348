"""Functional tensor trains by cross interpolation (``tt_cross``).

The function is sampled on the tensor grid of interpolation nodes (Chebyshev-Lobatto points for
Legendre, Gauss-Hermite points for Hermite, Greville abscissae for cubic B-splines). Alternating
left-to-right and right-to-left sweeps choose, core by core, the rows of a fiber matrix with maximal
volume (maxvol, Goreinov et al. 2010) as the next interpolation index set (Oseledets & Tyrtyshnikov
2010); each sweep adds a few random indices to the fixed side so that the ranks can grow, and a
truncated SVD of every fiber matrix sets the rank. The nodal cores are converted to coefficient cores
by the inverse of each coordinate's collocation matrix, so the result interpolates ``f`` at the
sampled nodes and is a :class:`FunctionalTT` like any fitted one.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable

import numpy as np
import scipy.linalg

from numtk._lib import Result, normalize_rng, progress_bar
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_bool, check_callback, check_int, check_real
from numtk._lib._workers import as_map, map_rows
from numtk.ftt._basis import Basis1D, evaluate
from numtk.ftt._functional_tt import FunctionalTT

__all__ = ["tt_cross", "interpolation_nodes"]

_MAX_D = 10_000        # variables (each index set and the 1000-point test set are O(d))
_MAX_RANK = 256        # fiber matrices are r x n x (r + kick)
_MAX_SWEEPS = 10_000


@constraints(basis="option", degree="int>=0", domain="array1d", loc="real", scale="real>0")
def interpolation_nodes(basis: str = "legendre", degree: int = 16, domain: Any = None, *, loc: float = 0.0,
                        scale: float = 1.0) -> np.ndarray:
    """The ``degree + 1`` nodes at which :func:`tt_cross` samples one coordinate.

    Chebyshev-Lobatto points on the interval (``'legendre'``), probabilists' Gauss-Hermite points mapped by
    ``loc + scale * t`` (``'hermite'``) and the Greville abscissae of the uniform cubic knot vector
    (``'bspline'``). Each gives a nonsingular collocation matrix, so values at the nodes determine the
    coefficients.

    Parameters
    ----------
    basis : {'legendre', 'hermite', 'bspline'}, default 'legendre'
        Univariate basis, as in :class:`FunctionalTT`.
    degree : int, default 16
        Basis degree (>= 3 for ``'bspline'``).
    domain : (lo, hi), optional
        Interval of the bounded bases; required for ``'legendre'`` and ``'bspline'``.
    loc, scale : float, default 0.0 and 1.0
        Centre and width of the Hermite basis.

    Returns
    -------
    ndarray of shape (degree + 1,)
        Increasing nodes.

    Raises
    ------
    ValueError
        Invalid ``basis``, ``degree``, ``domain`` or ``scale``.

    Examples
    --------
    >>> from numtk.ftt import interpolation_nodes
    >>> interpolation_nodes("legendre", 4, (-1, 1)).round(4).tolist()
    [-1.0, -0.7071, 0.0, 0.7071, 1.0]
    >>> interpolation_nodes("bspline", 3, (0, 3)).round(4).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    dom = None
    if domain is not None:
        arr = as_array(domain, "domain").astype(np.float64).reshape(-1)
        if len(arr) != 2:
            raise ValueError(f"`domain` must be a pair (lo, hi); got {domain!r}")
        dom = [list(arr)]
    b = FunctionalTT(basis, degree, 1, dom, loc=loc, scale=scale)._resolve_bases(1, None)[0]
    return _checked_nodes(b, 0)


def _checked_nodes(basis: Basis1D, k: int) -> np.ndarray:
    """The nodes of coordinate k, refused when they overflow or coincide in floating point."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = _nodes(basis)
    if not (np.all(np.isfinite(x)) and np.all(np.diff(x) > 0)):
        which = "`loc` and `scale`" if basis.kind == "hermite" else "`domain`"
        raise ValueError(f"{which} of coordinate {k} put the interpolation nodes beyond the floating-point range "
                         "or onto coinciding values")
    return x


class _RealValued:
    """``f`` with its values checked to be real (no complex value silently cast); picklable if ``f`` is."""

    def __init__(self, f):
        self.f = f

    def __call__(self, X):
        out = np.asarray(self.f(X))
        if out.dtype.kind not in "biuf":
            raise TypeError(f"`f` must return real numbers; got dtype {out.dtype}")
        return out


def _nodes(basis: Basis1D) -> np.ndarray:
    """The ``basis.n`` interpolation nodes of one coordinate's basis (see :func:`interpolation_nodes`)."""
    n = basis.n
    if basis.kind == "hermite":
        t = np.polynomial.hermite_e.hermegauss(n)[0] if n > 1 else np.zeros(1)
        return basis.p0 + basis.p1 * t
    lo, hi = basis.p0, basis.p1
    if basis.kind == "legendre":
        if n == 1:
            return np.array([(lo + hi) / 2.0])
        # -cos(pi j / (n - 1)) written as a sine: exactly antisymmetric, with an exact 0 in the middle
        t = np.sin(np.pi * (np.arange(n) - (n - 1) / 2.0) / (n - 1))
        return lo + (t + 1.0) * (hi - lo) / 2.0
    knots = basis.knots()
    return (knots[1:n + 1] + knots[2:n + 2] + knots[3:n + 3]) / 3.0


def _maxvol(A: np.ndarray, tol: float = 1.05, max_iter: int = 200) -> np.ndarray:
    """Row indices of an ``r x r`` submatrix of the tall ``A`` (n x r) of locally maximal volume.

    Start from the pivots of a column-pivoted QR of ``A^T`` and swap rows while some coefficient of
    ``A`` in the basis of the chosen rows exceeds ``tol`` in modulus.
    """
    n, r = A.shape
    if n <= r:
        return np.arange(n)
    _, _, piv = scipy.linalg.qr(A.T, mode="economic", pivoting=True)
    idx = np.array(piv[:r])
    for _ in range(max_iter):
        try:
            B = scipy.linalg.solve(A[idx].T, A.T).T  # A = B A[idx]
        except (np.linalg.LinAlgError, ValueError):
            break
        i, j = np.unravel_index(np.argmax(np.abs(B)), B.shape)
        if abs(B[i, j]) <= tol:
            break
        idx[j] = i
    return idx


def _rank_from_svd(s: np.ndarray, tol: float, max_rank: int) -> int:
    """The smallest rank whose discarded singular values have relative Frobenius norm below ``tol``."""
    if s.size == 0 or s[0] == 0.0:
        return 1
    tail = np.sqrt(np.cumsum((s ** 2)[::-1]))[::-1]  # tail[k] = ||s[k:]||
    ok = np.nonzero(tail <= tol * tail[0])[0]
    r = int(ok[0]) if ok.size else s.size
    return max(1, min(r, max_rank))


@constraints(f="callable", d="int>=1", basis="option", degree="int>=0", domain="array2d", loc="real",
             scale="real>0", max_rank="int>=1", tol="real>=0", sweeps="count", kick="int>=0", rng="rng",
             workers="workers", progress="bool", callback="callable")
def tt_cross(f: Callable, d: int, *, basis: str = "legendre", degree: Any = 16, domain: Any = None,
             loc: Any = 0.0, scale: Any = 1.0, max_rank: int = 10, tol: float = 1e-8, sweeps: int = 10,
             kick: int = 2, rng: Any = None, workers: Any = 1, progress: bool = False,
             callback: Callable | None = None) -> Result:
    """Approximate ``f`` by a functional tensor train through cross interpolation on a node grid.

    ``f`` is evaluated only at points of the tensor grid of each coordinate's interpolation nodes
    (Chebyshev-Lobatto for ``'legendre'``, Gauss-Hermite for ``'hermite'``, Greville abscissae for
    ``'bspline'``), a few fibers per core and sweep, never on the whole grid. The result interpolates
    ``f`` at the sampled nodes; how well it approximates ``f`` between nodes is the univariate bases'
    interpolation error.

    Parameters
    ----------
    f : callable
        Vectorised function mapping an array of shape (K, d) to K finite values.
    d : int
        Number of variables (1 to 10000).
    basis : {'legendre', 'hermite', 'bspline'} or sequence of str, default 'legendre'
        Univariate basis per coordinate, as in :class:`FunctionalTT`.
    degree : int or sequence of int, default 16
        Basis degree per coordinate (``degree + 1`` nodes; >= 3 for ``'bspline'``).
    domain : array_like of shape (d, 2), optional
        Box of the bounded bases; required unless every basis is ``'hermite'``.
    loc, scale : float or array_like of shape (d,), default 0.0 and 1.0
        Centre and width of the Hermite bases.
    max_rank : int, default 10
        Largest rank of any bond (at most 256).
    tol : float, default 1e-8
        Relative accuracy: the truncation threshold of each fiber's SVD, and the stopping criterion (the
        relative RMS change of the interpolant, measured on 1000 random grid points, between two
        sweeps).
    sweeps : int, default 10
        Maximum number of sweeps (a left-to-right and a right-to-left pass each; at most 10000).
    kick : int, default 2
        Random indices added to the fixed side of every fiber in each pass; 0 keeps the initial
        ranks (2) fixed; at most 256.
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of the initial and added index sets.
    workers : int or map-like callable, default 1
        Spreads the evaluations of ``f`` over chunks of 8192 points: ``1`` (default) calls ``f``
        once per fiber batch, ``-1`` uses a process per available core, ``k > 1`` k processes (``f`` must
        then be picklable), and a map-like callable ``workers(f, chunks)`` (``map``, ``Pool.map``) is used
        as given.
    progress : bool, default False
        Show a progress bar over the sweeps.
    callback : callable, optional
        ``callback(intermediate_result)`` after each sweep, with a Result of fields ``n_iter``, ``ranks``,
        ``error``, ``change``, ``n_evals`` (as in the returned Result) and ``tt`` (the current interpolant,
        a FunctionalTT). Raising ``StopIteration`` in it ends the iteration: the current interpolant is
        returned with ``status == 'callback'``. Its return value is ignored.

    Returns
    -------
    res : Result
        With the fields:

        tt : FunctionalTT
            The interpolant (a train as :meth:`FunctionalTT.from_cores` makes it, with the given bases).
        n_iter : int
            Sweeps run.
        success : bool
            Whether the iteration converged (``status == 'converged'``).
        status : str
            ``'converged'`` (the test error or the change between two sweeps fell to ``tol``),
            ``'max_iterations'`` (``sweeps`` spent) or ``'callback'`` (stopped by the callback).
        message : str
            ``status`` in words.
        ranks : tuple of int
            ``tt.ranks_``.
        error : float
            Relative RMS error of the interpolant at 1000 random grid points (drawn once, before the
            first sweep).
        n_evals : int
            Evaluations of ``f`` in all (the test points included).
        history : list of dict
            Per sweep: ``sweep``, ``ranks``, ``test_error``, ``change`` (relative RMS change of the
            interpolant at the test points since the previous sweep; None after the first) and
            ``n_evals`` (cumulative).

    Raises
    ------
    TypeError
        ``f`` is not callable.
    ValueError
        Invalid ``d``, ``degree``, ``domain``, ``max_rank``, ``tol``, ``sweeps`` or ``kick``, or ``f``
        returns the wrong shape or a non-finite value.

    See Also
    --------
    FunctionalTT.fit : regression from scattered data.

    Notes
    -----
    Each pass costs about ``sum_k r_{k-1} n_k (r_k + kick)`` evaluations. Cross interpolation is exact
    (to rounding) for functions of TT rank at most ``max_rank`` that lie in the span of the bases, and
    needs no data; unlike least squares it does not control ``f`` away from the nodes, so use it for
    smooth functions on a box or for functions known at every point, not for noisy data.

    References
    ----------
    .. [1] I. Oseledets and E. Tyrtyshnikov, "TT-cross approximation for multidimensional arrays",
       Linear Algebra Appl. 432 (2010).
    .. [2] S. Goreinov et al., "How to find a good submatrix", in Matrix Methods: Theory, Algorithms and
       Applications (2010).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.ftt import tt_cross
    >>> f = lambda x: np.sin(x[:, 0]) + x[:, 1] * x[:, 2] ** 2 + np.cos(x[:, 3])
    >>> res = tt_cross(f, 4, degree=20, domain=[[-1, 1]] * 4, rng=0)
    >>> res.ranks  # the middle bond separates {1, x1, sin x0} from {x2^2, cos x3, 1}
    (1, 2, 3, 2, 1)
    >>> res.status, res.n_iter
    ('converged', 1)
    >>> X = np.random.default_rng(1).uniform(-1, 1, (5, 4))
    >>> bool(np.allclose(res.tt.predict(X), f(X), atol=1e-10))
    True
    """
    if not callable(f):
        raise TypeError(f"`f` must be callable; got {type(f).__name__}")
    d = check_int(d, "d", minimum=1, maximum=_MAX_D)
    max_rank = check_int(max_rank, "max_rank", minimum=1, maximum=_MAX_RANK)
    tol = check_real(tol, "tol", low=0.0)
    sweeps = check_int(sweeps, "sweeps", minimum=1, maximum=_MAX_SWEEPS)
    kick = check_int(kick, "kick", minimum=0, maximum=_MAX_RANK)
    progress = check_bool(progress, "progress")
    check_callback(callback)
    rng = normalize_rng(rng)
    if not callable(workers):
        from numtk._lib._workers import n_threads

        n_threads(workers)  # an int `workers` is validated (bounded) before any pool is opened
    est = FunctionalTT(basis, degree, 1, domain, loc=loc, scale=scale)
    bases = est._resolve_bases(d, None)
    nodes = [_checked_nodes(b, k) for k, b in enumerate(bases)]
    ns = [b.n for b in bases]
    # nodal values -> coefficients: V c = g with V[j, i] = phi_i(node_j)
    inv_colloc = []
    for k, (b, x) in enumerate(zip(bases, nodes)):
        V = evaluate(b, x)[0]
        try:
            inv = np.linalg.inv(V)
        except np.linalg.LinAlgError:
            inv = None
        if inv is None or not np.all(np.isfinite(inv)):
            which = "`loc` and `scale`" if b.kind == "hermite" else "`domain`"
            raise ValueError(f"the collocation matrix of coordinate {k} is singular in floating point: check "
                             f"{which} and `degree`")
        inv_colloc.append(inv)
    n_evals = [0]
    f = _RealValued(f)

    pool = contextlib.nullcontext(None) if workers == 1 and not callable(workers) else as_map(workers)
    with pool as mapper:
        def call(idx: np.ndarray) -> np.ndarray:
            """``f`` at the grid points with node indices ``idx`` (K, d)."""
            X = np.empty(idx.shape, dtype=np.float64)
            for k in range(d):
                X[:, k] = nodes[k][idx[:, k]]
            vals = map_rows(f, X, mapper)
            if vals.size != len(X):
                raise ValueError(f"`f` must map an array of shape (K, {d}) to shape (K,); got {vals.size} values "
                                 f"for K = {len(X)}")
            if not np.all(np.isfinite(vals)):
                raise ValueError("`f` returned a non-finite value on the interpolation grid")
            n_evals[0] += len(X)
            return vals

        def fiber(left: np.ndarray, k: int, right: np.ndarray) -> np.ndarray:
            """Values ``f(left[a], node_i, right[b])``: shape (len(left), n_k, len(right))."""
            ra, rb, n = len(left), len(right), ns[k]
            idx = np.empty((ra, n, rb, d), dtype=np.int64)
            idx[..., :k] = left[:, None, None, :]
            idx[..., k] = np.arange(n)[None, :, None]
            idx[..., k + 1:] = right[None, None, :, :]
            return call(idx.reshape(-1, d)).reshape(ra, n, rb)

        def random_indices(m: int, sites: range) -> np.ndarray:
            return np.column_stack([rng.integers(0, ns[j], m) for j in sites]) if len(sites) else \
                np.zeros((m, 0), dtype=np.int64)

        # index sets: left[k] (r, k) over sites 0..k-1, right[k] (r, d-k) over sites k..d-1
        left = [np.zeros((1, 0), dtype=np.int64)] + [None] * d
        right = [None] * d + [np.zeros((1, 0), dtype=np.int64)]
        r0 = min(2, max_rank)
        for k in range(d - 1, 0, -1):
            right[k] = np.unique(random_indices(r0, range(k, d)), axis=0)
        test = random_indices(1000, range(d))
        f_test = call(test)
        cores: list[np.ndarray] = [None] * d  # type: ignore[list-item]
        history: list[dict] = []
        prev = None
        step_tol = tol / math.sqrt(max(d - 1, 1))
        bar = progress_bar(range(sweeps), progress=progress, desc="tt_cross sweeps")
        n_done = 0
        status, message = "max_iterations", "the sweep budget is spent"

        def interpolant() -> FunctionalTT:
            """The current nodal cores as a FunctionalTT (coefficients by the inverse collocation matrices)."""
            coef = [np.ascontiguousarray(np.einsum("ij,ajb->aib", inv_colloc[k], cores[k])) for k in range(d)]
            return FunctionalTT.from_cores(coef, basis, degree=[n - 1 for n in ns], domain=domain, loc=loc,
                                           scale=scale)

        try:
            for sweep in range(sweeps):
                # left to right: cores 0..d-2 interpolative in their right index, core d-1 full fibers
                for k in range(d - 1):
                    cols = right[k + 1]
                    if kick:
                        cols = np.unique(np.concatenate([cols, random_indices(kick, range(k + 1, d))]), axis=0)
                    C = fiber(left[k], k, cols)
                    ra, n, _ = C.shape
                    U, s, _ = np.linalg.svd(C.reshape(ra * n, -1), full_matrices=False)
                    r = _rank_from_svd(s, step_tol, max_rank)
                    Q = U[:, :r]
                    rows = _maxvol(Q)
                    cores[k] = scipy.linalg.solve(Q[rows].T, Q.T).T.reshape(ra, n, r)
                    left[k + 1] = np.column_stack([left[k][rows // n], rows % n])
                cores[d - 1] = fiber(left[d - 1], d - 1, right[d])
                # right to left: cores d-1..1 interpolative in their left index, core 0 full fibers
                for k in range(d - 1, 0, -1):
                    rows_in = left[k]
                    if kick:
                        rows_in = np.unique(np.concatenate([rows_in, random_indices(kick, range(k))]), axis=0)
                    C = fiber(rows_in, k, right[k + 1])
                    _, n, rb = C.shape
                    U, s, _ = np.linalg.svd(C.reshape(len(rows_in), n * rb).T, full_matrices=False)
                    r = _rank_from_svd(s, step_tol, max_rank)
                    Q = U[:, :r]
                    cols = _maxvol(Q)
                    cores[k] = scipy.linalg.solve(Q[cols].T, Q.T).reshape(r, n, rb)
                    right[k] = np.column_stack([cols // rb, right[k + 1][cols % rb]])
                cores[0] = fiber(left[0], 0, right[1])
                n_done = sweep + 1
                approx = _nodal_values(cores, test)
                err = float(np.sqrt(np.mean((approx - f_test) ** 2)) / max(np.sqrt(np.mean(f_test ** 2)), 1e-300))
                change = None if prev is None else float(
                    np.sqrt(np.mean((approx - prev) ** 2)) / max(np.sqrt(np.mean(approx ** 2)), 1e-300))
                prev = approx
                ranks = (1,) + tuple(c.shape[2] for c in cores)
                history.append({"sweep": n_done, "ranks": ranks, "test_error": err, "change": change,
                                "n_evals": n_evals[0]})
                bar.update(1)
                if callback is not None:
                    try:
                        callback(Result(n_iter=n_done, ranks=ranks, error=err, change=change, n_evals=n_evals[0],
                                        tt=interpolant()))
                    except StopIteration:
                        status, message = "callback", "stopped by the callback"
                        break
                if err <= tol or (change is not None and change <= tol):
                    which = "test error" if err <= tol else "change between two sweeps"
                    status, message = "converged", f"the {which} is at most tol"
                    break
        finally:
            bar.close()

    tt = interpolant()
    return Result(tt=tt, n_iter=n_done, success=status == "converged", status=status, message=message,
                  ranks=tt.ranks_, error=history[-1]["test_error"], n_evals=n_evals[0], history=history)


def _nodal_values(cores: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    """Values of the nodal train at the grid points with node indices ``idx`` (K, d)."""
    v = cores[0][0, idx[:, 0], :]
    for k in range(1, len(cores)):
        v = np.einsum("ka,akb->kb", v, cores[k][:, idx[:, k], :])
    return v[:, 0]
