"""Alternating least squares with rank adaptation for :class:`numtk.ftt.FunctionalTT` (spec §2.7).

The cores are kept in the mixed-canonical gauge: every core left of the one being solved is
left-orthonormal and every core right of it right-orthonormal, in the orthonormal coordinates of the
bases (B-spline coefficients are mapped through the upper Cholesky factor of their Gram matrix). The
normal equations of one core are assembled in row chunks by the compiled kernel, which writes only the
distinct products of the Kronecker factors L (x) phi (x) R; one BLAS GEMM per chunk finishes them. For
polynomial bases the n(n + 1)/2 products of two basis functions span only 2n - 1 functions, and a second
compiled kernel contracts the Kronecker pairs with those 2n - 1 (:func:`product_basis`): 3.4x fewer flops
for n = 12. The full design matrix is never formed. The interfaces are updated incrementally, one GEMM
with the new core per update.
"""

from __future__ import annotations

import contextlib
from functools import lru_cache

import numpy as np
import scipy.linalg

from numtk._lib import Result, progress_bar
from numtk._lib._workers import blas_threads

CHUNK = 4096
# below this reciprocal condition estimate of the (Jacobi-scaled) normal equations, a core is solved by QR
RCOND_QR = 1e-11
# rank enrichment (see als.enrichment): when a sweep improves the validation error by less than
# ENRICH_BELOW, every bond that may grow gets one residual-driven direction. Growing a bond of rank r
# by r // 2 at once took a rotated Gaussian's terminal fit in d = 4 from ranks (3, 3, 3) to the cap
# (8, 8, 8) for a smaller residual (0.052 -> 0.007) that did not change the sampler's ESS (0.97) but
# made every BSDE step 10x slower.
ENRICH_BELOW = 0.05
# largest core size (unknowns) assembled by the sparse kernel (its P x P accumulator: 32 MB at 2048)
SPARSE_MAX_P = 2048


# ---------------------------------------------------------------------------------------------------------
# gauge helpers (orthonormal coordinates: c_tilde = U c for B-splines, identity otherwise)

def to_orth(core: np.ndarray, U: np.ndarray | None) -> np.ndarray:
    return core if U is None else np.einsum("ij,ajc->aic", U, core)


def from_orth(core: np.ndarray, U: np.ndarray | None) -> np.ndarray:
    if U is None:
        return core
    ra, n, rb = core.shape
    flat = np.moveaxis(core, 1, 0).reshape(n, ra * rb)
    sol = scipy.linalg.solve_triangular(U, flat, lower=False)
    return np.moveaxis(sol.reshape(n, ra, rb), 0, 1).copy()


def left_qr(core: np.ndarray, U: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Left-orthonormalise: core = Q R with Q (ra, n, r') left-orthonormal; returns (Q, R)."""
    ra, n, rb = core.shape
    q, r = np.linalg.qr(to_orth(core, U).reshape(ra * n, rb))
    return from_orth(q.reshape(ra, n, q.shape[1]), U), r


def right_qr(core: np.ndarray, U: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Right-orthonormalise: core = R^T Q with Q (r', n, rb) right-orthonormal; returns (Q, R^T)."""
    ra, n, rb = core.shape
    q, r = np.linalg.qr(to_orth(core, U).reshape(ra, n * rb).T)
    return from_orth(q.T.reshape(q.shape[1], n, rb), U), r.T


def absorb_right(rmat: np.ndarray, core: np.ndarray) -> np.ndarray:
    """rmat (r', ra) times core (ra, n, rb) along the left rank."""
    return np.einsum("ij,jnc->inc", rmat, core)


def absorb_left(core: np.ndarray, rmat: np.ndarray) -> np.ndarray:
    """core (ra, n, rb) times rmat (rb, r') along the right rank."""
    return np.einsum("anj,jc->anc", core, rmat)


# ---------------------------------------------------------------------------------------------------------
# interfaces

def dense_rows(Phi: np.ndarray) -> bool:
    """Whether the basis rows are dense (Legendre, Hermite) rather than sparse (B-splines of n >= 8)."""
    if len(Phi) == 0:
        return True
    return 2 * int(np.count_nonzero(Phi[:256], axis=1).max()) > Phi.shape[1]


def _over_rows(fn, M, threads, min_rows=4096):
    """``fn(lo, hi)`` on ``threads`` contiguous slices of ``[0, M)`` in Python threads (NumPy's GEMM and
    einsum release the GIL)."""
    threads = max(1, min(int(threads), M // min_rows))
    if threads == 1:
        fn(0, M)
        return
    from concurrent.futures import ThreadPoolExecutor

    bounds = [M * t // threads for t in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fn, bounds[:-1], bounds[1:]))


def _dense_interface(V, Phi, C, threads, left):
    """The dense-row interfaces: the core's (ra, rb) matrix at every row by one GEMM ``Phi @ C``, then
    ``V @ G`` (left, V of width ra) or ``G @ V`` (right, V of width rb), row by row."""
    ra, n, rb = C.shape
    Cm = np.ascontiguousarray(C.transpose(1, 0, 2)).reshape(n, ra * rb)
    out = np.empty((len(V), rb if left else ra))

    def part(lo, hi):
        G = (Phi[lo:hi] @ Cm).reshape(hi - lo, ra, rb)
        if left:
            np.einsum("ma,mab->mb", V[lo:hi], G, out=out[lo:hi])
        else:
            np.einsum("mab,mb->ma", G, V[lo:hi], out=out[lo:hi])

    _over_rows(part, len(V), threads)
    return out


def interface_left(L, Phi, C, threads=1, dense=True):
    """``out[m, c] = sum_{a, i} L[m, a] Phi[m, i] C[a, i, c]``: the left interface of the next core.

    Dense rows: one GEMM ``Phi @ C`` (the core's matrices at every row) and a batched row-vector product,
    O(M n ra rb) at BLAS speed (6x faster than the compiled loop, which skips the zeros of sparse rows and
    serves those)."""
    if not dense:
        from numtk.ftt import _ftt_ext

        return _ftt_ext.interface_left(L, Phi, C, threads)
    return _dense_interface(L, Phi, C, threads, left=True)


def interface_right(R, Phi, C, threads=1, dense=True):
    """``out[m, a] = sum_{i, c} C[a, i, c] Phi[m, i] R[m, c]``: the right interface of the previous core
    (see :func:`interface_left`)."""
    if not dense:
        from numtk.ftt import _ftt_ext

        return _ftt_ext.interface_right(R, Phi, C, threads)
    return _dense_interface(R, Phi, C, threads, left=False)


# ---------------------------------------------------------------------------------------------------------
# normal equations

@lru_cache(maxsize=256)
def _gather_index(ra: int, n: int, rb: int) -> np.ndarray:
    """Flat indices into S (pairs(ra) * pairs(rb), pairs(n)) giving the P x P normal matrix."""

    def pair(r):
        i, j = np.meshgrid(np.arange(r), np.arange(r), indexing="ij")
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        return lo * r - lo * (lo - 1) // 2 + (hi - lo)

    pa, pn, pc = pair(ra), pair(n), pair(rb)
    nb, nn = rb * (rb + 1) // 2, n * (n + 1) // 2
    # G[(a,i,c),(a2,i2,c2)]
    idx = ((pa[:, None, None, :, None, None] * nb + pc[None, None, :, None, None, :]) * nn
           + pn[None, :, None, None, :, None])
    P = ra * n * rb
    return idx.reshape(P, P)


def _sum_over_rows(fn, n_train, threads, min_rows=2048):
    """``fn(m0, m1)`` (a pair of arrays) on ``threads`` contiguous slices of the rows ``[0, n_train)``, in
    Python threads (the compiled kernels and BLAS release the GIL), summed. Slices have at least
    ``min_rows`` rows."""
    threads = max(1, min(int(threads), n_train // min_rows))
    if threads == 1:
        return fn(0, n_train)
    from concurrent.futures import ThreadPoolExecutor

    bounds = [n_train * t // threads for t in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(fn, bounds[:-1], bounds[1:]))
    first, second = parts[0]
    for a, b in parts[1:]:
        first += a
        second += b
    return first, second


@lru_cache(maxsize=64)
def product_basis(basis) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(I, J, C)`` with ``phi_i phi_i' = sum_l phi_I[l] phi_J[l] C[l, (i, i')]`` for every pair ``i <= i'``.

    The products of two polynomials of degree below n span the polynomials of degree at most 2n - 2: 2n - 1
    functions instead of the n(n + 1)/2 pairs. The 2n - 1 products ``phi_{l // 2} phi_{(l + 1) // 2}`` (one of
    each degree, the best conditioned choice of those tried) are such a basis, so the Kronecker assembly of
    :func:`normal_equations` multiplies by them only (23 instead of 78 columns for n = 12) and maps the result to every pair by C. C is fitted once by weighted least squares on Gauss nodes of the
    basis' measure (exact up to round-off); ``None`` where the products are ill-conditioned (condition
    number over 1e5: Hermite beyond n = 12), for B-splines (piecewise: no such identity; their rows are
    sparse anyway) and for n < 3 (no saving). The identity holds inside the box only: bounded
    bases extend linearly outside it, and the caller checks that the rows lie inside.
    """
    from numtk.ftt import _basis

    n = basis.n
    if basis.kind == "bspline" or n < 3:
        return None
    I = np.arange(2 * n - 1) // 2
    J = (np.arange(2 * n - 1) + 1) // 2
    x, wq = _basis.natural_quadrature(type(basis)(basis.kind, 2 * n + 2, basis.p0, basis.p1))
    phi = _basis.evaluate(basis, x)[0]
    iu, ju = np.triu_indices(n)
    sw = np.sqrt(wq)[:, None]  # weighted rows: Hermite values grow fast away from the centre
    pairs = sw * phi[:, iu] * phi[:, ju]
    sub = sw * phi[:, I] * phi[:, J]
    C, _, _, sv = np.linalg.lstsq(sub, pairs, rcond=None)
    # C is as accurate as the products are well conditioned: Legendre's stay below 20 up to n = 64, Hermite's
    # grow from 1e3 (n = 8) past 1e5 at n = 13 (G would lose digits to it there)
    if sv[-1] <= 1e-5 * sv[0] or np.max(np.abs(sub @ C - pairs)) > 1e-12 * max(1.0, float(np.max(np.abs(pairs)))):
        return None
    return I, J, np.ascontiguousarray(C)


def product_bases(bases, X, extrapolate) -> list:
    """:func:`product_basis` of every coordinate whose rows of ``X`` give the identity: Hermite, clipped
    bounded bases, or linear extrapolation with every row inside the box; ``None`` elsewhere."""
    out = []
    for k, b in enumerate(bases):
        ok = (b.kind == "hermite" or extrapolate == "clip"
              or (len(X) > 0 and X[:, k].min() >= b.p0 and X[:, k].max() <= b.p1))
        out.append(product_basis(b) if ok else None)
    return out


def _normal_equations_products(L, Phi, R, w, y, n_train, penalty, threads, products):
    """:func:`normal_equations` through the 2n - 1 products of :func:`product_basis`.

    The compiled kernel accumulates ``S = sum_m Z_m Ys_m^T``, where ``Z_m = w_m (L L) (x) (R R)`` holds the
    Kronecker pairs (a <= a', c <= c') and ``Ys_m`` the 2n - 1 basis products, with a 4 x 12 register tile
    of S and the rows of Z formed on the fly (never stored), and the right-hand side ``B = sum_m w_m y_m
    (L (x) R)_m Phi_m^T`` the same way. S is mapped to all n(n + 1)/2 basis pairs once, by C, and gathered
    into the P x P matrix as in the Kronecker assembly."""
    from numtk.ftt import _ftt_ext

    I, J, Cmap = products
    ra, n, rb = L.shape[1], Phi.shape[1], R.shape[1]
    S, B = _ftt_ext.normal_products(L, Phi, R, w, y, I, J, 0, n_train, threads)
    wsum = float(np.sum(w[:n_train]))
    G = (S @ Cmap).ravel()[_gather_index(ra, n, rb)] / wsum
    G += penalty
    b = B.reshape(ra, rb, n).transpose(0, 2, 1).ravel() / wsum
    return G, b


def normal_equations(L, Phi, R, w, y, n_train, penalty, threads=1, products=None):
    """G = A^T W A / sum(w) + penalty and b = A^T W y / sum(w) over the first n_train rows.

    ``products``: the coordinate's :func:`product_basis` (or None), for the reduced assembly."""
    from numtk.ftt import _ftt_ext

    ra, n, rb = L.shape[1], Phi.shape[1], R.shape[1]
    if sparse_rows(Phi, ra, rb, directional=False):
        return _normal_equations_sparse(L, None, Phi, None, R, None, w, y, n_train, penalty, threads)
    if products is not None:
        return _normal_equations_products(L, Phi, R, w, y, n_train, penalty, threads, products)
    pa, pn, pb = ra * (ra + 1) // 2, n * (n + 1) // 2, rb * (rb + 1) // 2

    def part(lo, hi):
        rows = min(CHUNK, hi - lo)
        Z = np.empty((rows, pa * pb))
        Y = np.empty((rows, pn))
        S = np.zeros((pa * pb, pn))
        b = np.zeros(ra * n * rb)
        for m0 in range(lo, hi, CHUNK):
            m1 = min(m0 + CHUNK, hi)
            _ftt_ext.assemble_chunk(L, Phi, R, w, y, m0, m1, Z, Y, b)
            k = m1 - m0
            S += Z[:k].T @ Y[:k]
        return S, b

    S, b = _sum_over_rows(part, n_train, threads)
    wsum = float(np.sum(w[:n_train]))
    G = S.ravel()[_gather_index(ra, n, rb)] / wsum
    G += penalty
    return G, b / wsum


def design_rows(L, DL, Phi, DPhi, R, DR, s):
    """Rows ``s`` of the design matrix of one core: ``L (x) phi (x) R``, plus the directional-derivative
    terms when ``DL`` is given (see :func:`normal_equations_rows`)."""
    P = L.shape[1] * Phi.shape[1] * R.shape[1]
    LP = L[s, :, None] * Phi[s, None, :]
    if DL is None:
        return (LP[:, :, :, None] * R[s, None, None, :]).reshape(-1, P)
    T = LP + DL[s, :, None] * Phi[s, None, :] + L[s, :, None] * DPhi[s, None, :]
    return (T[:, :, :, None] * R[s, None, None, :] + LP[:, :, :, None] * DR[s, None, None, :]).reshape(-1, P)


def solve_qr(L, DL, Phi, DPhi, R, DR, w, y, n_train, penalty):
    """The same least-squares problem solved by QR of the explicit design stacked on the penalty's
    Cholesky factor: conditioning cond(A) instead of cond(A)^2. Used when the normal equations are
    numerically singular (basis functions where the design has almost no points)."""
    P = L.shape[1] * Phi.shape[1] * R.shape[1]
    wsum = float(np.sum(w[:n_train]))
    sw = np.sqrt(w[:n_train] / wsum)
    A = design_rows(L, DL, Phi, DPhi, R, DR, slice(0, n_train)) * sw[:, None]
    try:
        C = np.linalg.cholesky(penalty).T
    except np.linalg.LinAlgError:
        C = np.sqrt(max(float(np.max(np.diag(penalty))), 1e-300)) * np.eye(P)
    A = np.vstack([A, C])
    rhs = np.concatenate([y[:n_train] * sw, np.zeros(P)])
    return scipy.linalg.lstsq(A, rhs, lapack_driver="gelsy", check_finite=False)[0]


def normal_equations_rows(L, DL, Phi, DPhi, R, DR, w, y, n_train, penalty, threads=1):
    """The normal equations when each row also carries a directional derivative ``v_m . grad f(x_m)``.

    The design row of point m is ``L (x) phi (x) R + DL (x) phi (x) R + L (x) v_k phi' (x) R + L (x) phi (x) DR``
    (``DL``, ``DR``: the directional derivatives of the interfaces; ``DPhi = v_k phi'``). It is a sum of
    Kronecker products, so the rows are formed explicitly in chunks of a few MB and reduced by one GEMM each.
    """
    ra, n, rb = L.shape[1], Phi.shape[1], R.shape[1]
    P = ra * n * rb
    if sparse_rows(Phi):
        return _normal_equations_sparse(L, DL, Phi, DPhi, R, DR, w, y, n_train, penalty, threads)
    rows = max(256, min(CHUNK, 1_000_000 // P))

    def part(lo, hi):
        G = np.zeros((P, P), order="F")
        b = np.zeros(P)
        for m0 in range(lo, hi, rows):
            s = slice(m0, min(m0 + rows, hi))
            A = design_rows(L, DL, Phi, DPhi, R, DR, s)
            b += A.T @ (w[s] * y[s])
            A *= np.sqrt(w[s])[:, None]
            # symmetric rank-k update: half the flops of A^T A (upper triangle, Fortran order)
            G = _syrk(A, G)
        return G, b

    G, b = _sum_over_rows(part, n_train, threads)
    return _from_upper(G, b, w, n_train, penalty)


def sparse_rows(Phi: np.ndarray, ra: int = 1, rb: int = 1, directional: bool = True) -> bool:
    """Whether :func:`_normal_equations_sparse` is the cheaper assembly for these basis rows.

    B-spline rows have at most 4 non-zeros of n; Legendre/Hermite rows are dense and go to BLAS. The sparse
    kernel costs ``(ra * nnz * rb)**2 / 2`` scalar operations per row; the Kronecker assembly of
    :func:`normal_equations` costs about ``pairs(ra) * pairs(rb) * pairs(n)`` at BLAS speed (measured at
    M = 2e4: equal for n = 12, r = 4; the sparse kernel 65x faster for n = 32, r = 2 and 2.6x slower for
    n = 32, r = 8, where G no longer fits in cache; a GMM-40 terminal fit, n = 128 and ranks (1, 16, 1),
    took 14.5 s instead of 76 s with it). The directional rows have no Kronecker shortcut and always prefer
    the sparse kernel when the rows are sparse.
    """
    n = Phi.shape[1]
    if n < 8 or len(Phi) == 0:
        return False
    nnz = int(np.count_nonzero(Phi[:256], axis=1).max())
    if 2 * nnz > n:
        return False
    if directional:
        return True
    pairs = lambda r: r * (r + 1) // 2  # noqa: E731
    P = ra * n * rb
    # beyond P = 1024 the accumulator leaves the cache: the scattered updates cost about 8x more
    # (n = 32, r = 8: predicted 2.6x faster than the Kronecker assembly, measured 2.6x slower)
    cost = 4 * (ra * nnz * rb) ** 2 * (8 if P > 1024 else 1)
    return cost < pairs(ra) * pairs(rb) * pairs(n) and P <= SPARSE_MAX_P


def _normal_equations_sparse(L, DL, Phi, DPhi, R, DR, w, y, n_train, penalty, threads=1):
    """:func:`normal_equations_rows` from the non-zero columns of each row only (compiled): a row costs
    ``(ra * 4 * rb)**2`` instead of ``P**2``; the explicit design matrix is never formed."""
    from numtk.ftt import _ftt_ext

    P = L.shape[1] * Phi.shape[1] * R.shape[1]
    G = np.zeros((P, P))
    b = np.zeros(P)
    _ftt_ext.assemble_sparse(L, DL, Phi, DPhi, R, DR, w, y, 0, n_train, G, b, threads)
    return _from_upper(G, b, w, n_train, penalty)


def _from_upper(G, b, w, n_train, penalty):
    """The normal equations from the accumulated upper triangle (the strict lower triangle is zero): symmetrise
    in place, divide by sum(w), add the penalty."""
    wsum = float(np.sum(w[:n_train]))
    _mirror_upper(G)
    G /= wsum
    G += penalty
    return G, b / wsum


def _mirror_upper(G: np.ndarray, block: int = 64) -> None:
    """Copy the strict upper triangle of the square ``G`` into its (zero) lower triangle, in place.

    Block by block: ``G += G.T`` reads the transpose with a stride of a whole row per element and took
    0.07 s for P = 2048 (20 s of a GMM-40 round); 64 x 64 tiles fit in cache (0.026 s)."""
    n = G.shape[0]
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        for j0 in range(i1, n, block):
            j1 = min(j0 + block, n)
            G[j0:j1, i0:i1] = G[i0:i1, j0:j1].T
        tile = G[i0:i1, i0:i1]
        tile += np.triu(tile, 1).T


def _syrk(A: np.ndarray, C: np.ndarray) -> np.ndarray:
    """C += A^T A on the upper triangle (BLAS dsyrk; C Fortran-ordered, updated in place)."""
    from scipy.linalg.blas import dsyrk

    return dsyrk(1.0, A, beta=1.0, c=C, trans=1, lower=0, overwrite_c=1)


def solve_spd(G: np.ndarray, b: np.ndarray, rcond_min: float = 0.0, threads: int = 1) -> np.ndarray | None:
    """Cholesky solve, falling back to least squares when G is not numerically positive definite.

    The system is Jacobi-scaled first: B-spline functions at the edge of a Gaussian design carry few
    points, so their diagonal entries are tiny and the unscaled normal equations lose most digits (a
    sum of quartic wells fitted exactly by an additive start drifted to 1e-2 error within one sweep).
    ``G`` is scaled in place (it is overwritten). Systems of 1024 unknowns or more are factorised with
    ``threads`` BLAS threads (the fits otherwise keep BLAS on one thread: small solves lose to the
    synchronisation; a 2048 x 2048 Cholesky took 0.26 s on one thread and 0.19 s on two).
    """
    diag = np.diag(G).copy()
    scale = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
    Gs = G
    Gs *= scale[:, None]
    Gs *= scale[None, :]
    bs = b * scale
    pool = blas_threads(threads) if threads > 1 and len(G) >= 1024 else contextlib.nullcontext()
    try:
        with pool:
            c, low = scipy.linalg.cho_factor(Gs, lower=False, check_finite=False)
        dc = np.abs(np.diag(c))
        if rcond_min and (dc.min() / dc.max()) ** 2 < rcond_min:
            return None  # numerically singular: the caller solves by QR instead
        x = scipy.linalg.cho_solve((c, low), bs, check_finite=False) * scale
        if np.all(np.isfinite(x)):
            return x
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError, ValueError):
        if rcond_min:
            return None
    return scipy.linalg.lstsq(Gs, bs, check_finite=False)[0] * scale


def penalty_matrix(ra, n, rb, ridge, h2, P2):
    """``ridge * I + h2 * (I_ra (x) P2 (x) I_rb)``, written block by block (the Kronecker products of the
    identities cost several P x P temporaries: 15 s of a 200 s GMM-40 solve with P = 2048)."""
    P = ra * n * rb
    pen = np.zeros((P, P))
    pen.flat[::P + 1] = ridge
    if h2 and P2 is not None:
        blocks = pen.reshape(ra, n, rb, ra, n, rb)
        for a in range(ra):
            for c in range(rb):
                blocks[a, :, c, a, :, c] += h2 * P2
    return pen


# ---------------------------------------------------------------------------------------------------------

def _rmse(pred, y, w):
    s = float(np.sum(w))
    if s <= 0:
        return float("nan")
    return float(np.sqrt(np.sum(w * (pred - y) ** 2) / s))


def als(phis, y, w, n_train, cores, U, P2, *, sweeps, tol, ridge, h2, rank_adaptive, max_rank, rank_tol, rng,
        progress=False, callback=None, dphis=None, D=None, threads=1, products=None):
    """Fit the cores in place by ALS. Returns (best_cores, history, n_sweeps, status, message).

    ``callback(intermediate_result)`` is called after each sweep (a Result: ``n_iter``, ``train_rmse``,
    ``val_rmse``, ``ranks``, ``cores``); ``StopIteration`` raised in it ends the iteration (status
    ``'callback'``).

    ``phis[k]`` is the (M, n_k) basis matrix of coordinate k over all rows (the first ``n_train`` rows
    are the training rows, the others the validation rows); ``w`` the sample weights. With ``D`` (M, d)
    and the first-derivative bases ``dphis``, the model fitted to ``y`` is ``f(x) + D . grad f(x)``.
    ``products[k]``: coordinate k's :func:`product_basis` where its rows allow the reduced assembly.
    """
    from numtk.ftt import _ftt_ext

    d = len(cores)
    M = len(y)
    has_val = n_train < M
    tr, va = slice(0, n_train), slice(n_train, M) if has_val else slice(0, n_train)
    y_scale = np.sqrt(np.sum(w[tr] * y[tr] ** 2) / np.sum(w[tr])) or 1.0
    floor = 1e-12 * y_scale
    cores = [np.ascontiguousarray(c, dtype=float) for c in cores]
    ones = np.ones((M, 1))
    products = [None] * d if products is None else list(products)
    dense = [dense_rows(p) for p in phis]

    # right-orthogonalise cores d-1..1 and build the right interfaces
    for k in range(d - 1, 0, -1):
        q, rt = right_qr(cores[k], U[k])
        cores[k] = q
        cores[k - 1] = absorb_left(cores[k - 1], rt)
    Lint = [None] * d
    Rint = [None] * d
    Lint[0] = ones
    Rint[d - 1] = ones
    directional = D is not None
    if directional:
        # v_k phi_k' per coordinate, and the interfaces' directional derivatives (zero at the ends)
        vphis = [np.ascontiguousarray(dphis[k] * D[:, k:k + 1]) for k in range(d)]
        DLint = [None] * d
        DRint = [None] * d
        DLint[0] = np.zeros((M, 1))
        DRint[d - 1] = np.zeros((M, 1))

    def update_left(k):
        Lint[k + 1] = interface_left(Lint[k], phis[k], cores[k], threads, dense[k])
        if directional:
            DLint[k + 1] = (interface_left(DLint[k], phis[k], cores[k], threads, dense[k])
                            + _ftt_ext.interface_left(Lint[k], vphis[k], cores[k], threads))

    def update_right(k):
        Rint[k - 1] = interface_right(Rint[k], phis[k], cores[k], threads, dense[k])
        if directional:
            DRint[k - 1] = (interface_right(DRint[k], phis[k], cores[k], threads, dense[k])
                            + _ftt_ext.interface_right(Rint[k], vphis[k], cores[k], threads))

    for k in range(d - 1, 0, -1):
        update_right(k)

    def solve(k):
        ra, n, rb = cores[k].shape
        pen = penalty_matrix(ra, n, rb, ridge, h2, P2[k] if P2 is not None else None)
        args = ((Lint[k], DLint[k], phis[k], vphis[k], Rint[k], DRint[k]) if directional
                else (Lint[k], None, phis[k], None, Rint[k], None))
        if directional:
            G, b = normal_equations_rows(*args, w, y, n_train, pen, threads)
        else:
            G, b = normal_equations(Lint[k], phis[k], Rint[k], w, y, n_train, pen, threads, products[k])
        x = solve_spd(G, b, rcond_min=RCOND_QR, threads=threads)
        if x is None:
            x = solve_qr(*args, w, y, n_train, pen)
        cores[k] = np.ascontiguousarray(x.reshape(ra, n, rb))

    def enrichment(k, rho):
        """Directions (ra * n, rho) in core k's orthonormal coordinates along which the residual is largest.

        The residual of the current model is fitted by a correction core ``(ra, n, rho)`` between the left
        interface of site k and a random rank-rho sketch of the sites to its right (basis values of
        site k + 1 times random mixtures of its right interface): the columns are what the next core
        can use at once. Random directions (the fallback for directional fits) need many sweeps before
        ALS finds the ones that matter: about one useful rank per two sweeps was measured.
        """
        ra, n, rb = cores[k].shape
        if directional:
            return rng.standard_normal((ra * n, rho))
        z = y - _ftt_ext.site_values(Lint[k], phis[k], Rint[k], cores[k])
        sketch = ((phis[k + 1] @ rng.standard_normal((phis[k + 1].shape[1], rho)))
                  * (Rint[k + 1] @ rng.standard_normal((Rint[k + 1].shape[1], rho))))
        pen = penalty_matrix(ra, n, rho, ridge, h2, P2[k] if P2 is not None else None)
        G, b = normal_equations(Lint[k], phis[k], np.ascontiguousarray(sketch), w, z, n_train, pen, threads,
                                products[k])
        x = solve_spd(G, b, rcond_min=RCOND_QR)
        if x is None:
            return rng.standard_normal((ra * n, rho))
        return to_orth(x.reshape(ra, n, rho), U[k]).reshape(ra * n, rho)

    def errors(k):
        pred = _ftt_ext.site_values(Lint[k], phis[k], Rint[k], cores[k])
        if directional:
            pred = (pred + _ftt_ext.site_values(DLint[k], phis[k], Rint[k], cores[k])
                    + _ftt_ext.site_values(Lint[k], vphis[k], Rint[k], cores[k])
                    + _ftt_ext.site_values(Lint[k], phis[k], DRint[k], cores[k]))
        return _rmse(pred[tr], y[tr], w[tr]), _rmse(pred[va], y[va], w[va])

    def ranks():
        return (1,) + tuple(c.shape[2] for c in cores)

    def size(cs):
        return sum(c.size for c in cs)

    def better(val):
        """A model replaces the best one if it validates better; a larger one must be 1% better."""
        if not np.isfinite(best[1]):
            return True
        margin = 0.99 if size(cores) > size(best[0]) else 1.0 - 1e-12
        return max(val, floor) < max(best[1], floor) * margin

    history = []
    # the starting model's validation error: the reference for the first sweep's improvement, and the
    # model kept if no sweep validates better (a good warm or additive start is never made worse)
    prev_val = errors(0)[1]
    best = ([c.copy() for c in cores], prev_val if np.isfinite(prev_val) else np.inf)
    stale = 0
    enrich = False
    n_done = 0
    status, message = "max_iterations", "the sweep budget is spent"
    bar = progress_bar(range(sweeps), progress=progress, desc="FunctionalTT ALS")
    try:
        for sweep in range(sweeps):
            truncated_any = False
            # ---- left -> right
            for k in range(d - 1):
                solve(k)
                q, r = left_qr(cores[k], U[k])
                if rank_adaptive:
                    u, s, vt = np.linalg.svd(r, full_matrices=False)
                    keep = max(1, int(np.sum(s > rank_tol * s[0]))) if s[0] > 0 else 1
                    keep = min(keep, max_rank)
                    truncated = keep < len(s)
                    truncated_any |= truncated
                    q = absorb_left(q, u[:, :keep])
                    r = s[:keep, None] * vt[:keep]
                    ra, n, rk = q.shape
                    room = min(max_rank, ra * n, cores[k + 1].shape[1] * cores[k + 1].shape[2]) - rk
                    if enrich and not truncated and room > 0:
                        qo = to_orth(q, U[k]).reshape(ra * n, rk)
                        V = enrichment(k, 1)
                        size0 = float(np.linalg.norm(V))
                        for _ in range(2):
                            V -= qo @ (qo.T @ V)
                        qv, sv, _ = np.linalg.svd(V, full_matrices=False)
                        new = qv[:, sv > 1e-8 * size0]  # directions already in the span are dropped
                        if new.shape[1]:
                            qo = np.column_stack([qo, new])
                            q = from_orth(qo.reshape(ra, n, rk + new.shape[1]), U[k])
                            r = np.vstack([r, np.zeros((new.shape[1], r.shape[1]))])
                cores[k] = np.ascontiguousarray(q)
                cores[k + 1] = np.ascontiguousarray(absorb_right(r, cores[k + 1]))
                update_left(k)
            if d == 1:
                solve(0)
            err = errors(d - 1)
            history.append({"sweep": sweep + 1, "direction": "left-to-right", "train_rmse": err[0],
                            "val_rmse": err[1], "ranks": ranks()})
            if better(err[1]):
                best = ([c.copy() for c in cores], err[1])
            # ---- right -> left
            for k in range(d - 1, 0, -1):
                solve(k)
                q, rt = right_qr(cores[k], U[k])
                cores[k] = np.ascontiguousarray(q)
                cores[k - 1] = np.ascontiguousarray(absorb_left(cores[k - 1], rt))
                update_right(k)
            if d > 1:
                solve(0)
            err = errors(0)
            history.append({"sweep": sweep + 1, "direction": "right-to-left", "train_rmse": err[0],
                            "val_rmse": err[1], "ranks": ranks()})
            if better(err[1]):
                best = ([c.copy() for c in cores], err[1])
                stale = 0
            else:
                stale += 1
            n_done = sweep + 1
            bar.update(1)
            bar.set_postfix(val_rmse=f"{err[1]:.3e}", ranks=max(ranks()))
            if callback is not None:
                try:
                    callback(Result(n_iter=n_done, train_rmse=err[0], val_rmse=err[1], ranks=ranks(),
                                    cores=[c.copy() for c in cores]))
                except StopIteration:
                    status, message = "callback", "stopped by the callback"
                    break
            cur = err[1]
            if cur <= floor:
                status, message = "converged", "the validation error is at round-off: the fit is exact"
                break
            change = (prev_val - cur) / prev_val if prev_val > 0 else 0.0
            prev_val = cur
            if rank_adaptive and d > 1:
                can_grow = any(c.shape[2] < max_rank for c in cores[:-1])
                # patience: an enriched direction needs a sweep or two before ALS exploits it
                if stale >= 4 or (stale >= 2 and not can_grow):
                    status, message = "stalled", f"no sweep validated better for {stale} sweeps"
                    break
                if abs(change) < tol and not can_grow:
                    status, message = "converged", "the relative change of the validation error is below tol"
                    break
                # enrich when progress stalls, unless the model already overfits (validation error over
                # twice the training error: in d = 50 with 3600 rows, 0.36 against 0.12, enriching grew the
                # ranks 2 -> 7 over 8 sweeps for a worse model in 14x the time) or the fit is at the
                # truncation threshold (new directions would only fit round-off)
                resolved = cur <= 10.0 * rank_tol * y_scale
                overfit = has_val and cur > 2.0 * err[0]
                enrich = change < ENRICH_BELOW and can_grow and not truncated_any and not resolved and not overfit
            elif abs(change) < tol:
                status, message = "converged", "the relative change of the validation error is below tol"
                break
    finally:
        bar.close()
    return best[0], history, n_done, status, message
