"""Independent references for numtk.sampling's metrics, in plain NumPy: brute-force O(n^2) kernel sums
and MMD^2, a dense log-domain Sinkhorn (alternating and symmetric), exact W2 in 1-D by sorting and in
any dimension by enumerating permutations, and a port of sde_sampler's Sinkhorn loop written from its
definition (for the reproduction check). Nothing here imports numtk or SciPy."""

import itertools

import numpy as np


def sq_dists(X, Y):
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    return ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)


def cost_matrix(X, Y, cost="sqeuclidean"):
    D2 = sq_dists(X, Y)
    return D2 if cost == "sqeuclidean" else np.sqrt(D2)


def kernel_matrix(X, Y, kernel, h):
    D2 = sq_dists(X, Y)
    if kernel == "rbf":
        return np.exp(-D2 / (2.0 * h * h))
    return 1.0 / np.sqrt(1.0 + D2 / (h * h))


def median_pooled_distance(X, Y):
    Z = np.concatenate([np.asarray(X, float), np.asarray(Y, float)])
    D = np.sqrt(sq_dists(Z, Z))
    iu = np.triu_indices(len(Z), 1)
    return float(np.median(D[iu]))


def mmd2(X, Y, kernel="rbf", h=1.0, unbiased=True):
    """MMD^2 by explicit double sums over the kernel matrices."""
    n, m = len(X), len(Y)
    Kxx = kernel_matrix(X, X, kernel, h)
    Kyy = kernel_matrix(Y, Y, kernel, h)
    Kxy = kernel_matrix(X, Y, kernel, h)
    if unbiased:
        sxx = Kxx.sum() - np.trace(Kxx)
        syy = Kyy.sum() - np.trace(Kyy)
        return sxx / (n * (n - 1)) + syy / (m * (m - 1)) - 2.0 * Kxy.sum() / (n * m)
    return Kxx.sum() / n**2 + Kyy.sum() / m**2 - 2.0 * Kxy.sum() / (n * m)


def _lse(A, axis):
    mx = A.max(axis=axis, keepdims=True)
    return (mx + np.log(np.exp(A - mx).sum(axis=axis, keepdims=True))).squeeze(axis)


def sinkhorn(C, a, b, eps, max_iter, tol):
    """Alternating log-domain Sinkhorn on a dense cost (same iterates and stopping rule as numtk's kernel).

    Returns dict(f, g, transport, objective, marginal_error, iterations)."""
    C = np.asarray(C, float)
    la, lb = np.log(a), np.log(b)
    u = np.zeros(len(a))
    v = np.zeros(len(b))
    iters = 0
    for it in range(max_iter):
        t = _lse(lb[None, :] + v[None, :] - C / eps, axis=1)
        if np.sum(a * np.abs(np.expm1(u + t))) < tol:
            break
        u = -t
        v = -_lse(la[:, None] + u[:, None] - C / eps, axis=0)
        iters = it + 1
    P = np.exp(la[:, None] + u[:, None] + lb[None, :] + v[None, :] - C / eps)
    return dict(f=eps * u, g=eps * v, transport=float((P * C).sum()),
                objective=float(eps * (a @ u + b @ v)),
                marginal_error=float(np.abs(P.sum(1) - a).sum()), iterations=iters, plan=P)


def sinkhorn_symmetric(C, a, eps, max_iter, tol):
    """Averaged symmetric iteration for OT_eps(a, a) (Feydy et al. 2019); objective = 2 eps <a, u>."""
    C = np.asarray(C, float)
    la = np.log(a)
    u = np.zeros(len(a))
    for _ in range(max_iter):
        t = _lse(la[None, :] + u[None, :] - C / eps, axis=1)
        if np.sum(a * np.abs(np.expm1(u + t))) < tol:
            break
        u = 0.5 * (u - t)
    P = np.exp(la[:, None] + u[:, None] + la[None, :] + u[None, :] - C / eps)
    return dict(f=eps * u, transport=float((P * C).sum()), objective=float(2 * eps * (a @ u)))


def entropic_objective(P, C, a, b, eps):
    """Primal value <P, C> + eps KL(P | a x b) of a plan (zero entries contribute 0)."""
    ab = a[:, None] * b[None, :]
    mask = P > 0
    return float((P * C).sum() + eps * (P[mask] * np.log(P[mask] / ab[mask])).sum())


def w2_1d(x, y):
    """W2 between equal-size 1-D uniform samples: the sorted values are matched."""
    x = np.sort(np.ravel(x))
    y = np.sort(np.ravel(y))
    return float(np.sqrt(np.mean((x - y) ** 2)))


def w2_permutations(X, Y):
    """W2 by enumerating every matching (n <= 7)."""
    C = sq_dists(X, Y)
    n = len(C)
    best = min(sum(C[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
    return float(np.sqrt(best / n))


def sde_sampler_sinkhorn(X, Y, eps=1e-3, max_iters=100, stop_thresh=1e-5):
    """The Sinkhorn metric of sde_sampler (euclidean cost, uniform weights) re-derived in NumPy:
    u_i <- eps (log a_i - LSE_j((v_j - M_ij)/eps)), v_j <- eps (log b_j - LSE_i((u_i - M_ij)/eps)),
    from u = 0, v = eps log b; stops when both potentials move less than stop_thresh; returns
    sum_ij P_ij M_ij with P = exp((u_i + v_j - M_ij)/eps)."""
    M = cost_matrix(X, Y, "euclidean")
    a = np.full(len(X), 1.0 / len(X))
    b = np.full(len(Y), 1.0 / len(Y))
    u = np.zeros(len(X))
    v = eps * np.log(b)
    iters = 0
    for _ in range(max_iters):
        u_prev, v_prev = u, v
        u = eps * (np.log(a) - _lse((v[None, :] - M) / eps, axis=1))
        v = eps * (np.log(b) - _lse((u[:, None] - M) / eps, axis=0))
        iters += 1
        if np.max(np.abs(u_prev - u)) < stop_thresh and np.max(np.abs(v_prev - v)) < stop_thresh:
            break
    P = np.exp((u[:, None] + v[None, :] - M) / eps)
    return float((P * M).sum()), iters
