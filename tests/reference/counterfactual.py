"""Independent references for numtk.counterfactual: the official (un-reduced) formulations in cvxpy,
KKT certificates, brute-force distance ratios. Nothing here imports numtk's solvers."""

import numpy as np

TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def logit(alpha):
    return float(np.log(alpha / (1 - alpha)))


def unreduced_affine(X, w, b, tau, family, K, *, immutable=(), bounds=None, weights=None):
    """min sum_i p_i |A x_i + c - x_i|^2 over A (diagonal or symmetric) and c, as the paper writes it."""
    import cvxpy as cp

    n, d = X.shape
    p = np.ones(n) if weights is None else np.asarray(weights, float)
    mut = np.ones(d, bool)
    mut[list(immutable)] = False
    c = cp.Variable(d)
    cons = []
    if family == "diagonal":
        a = cp.Variable(d)
        T = X @ cp.diag(a) + np.ones((n, 1)) @ cp.reshape(c, (1, d), order="C")
        cons += [a >= 1 / K, a <= K]
        imm = np.flatnonzero(~mut)
        if imm.size:
            cons += [a[imm] == 1, c[imm] == 0]
    elif family == "psd":
        A = cp.Variable((d, d), symmetric=True)
        T = X @ A + np.ones((n, 1)) @ cp.reshape(c, (1, d), order="C")
        cons += [A - (1 / K) * np.eye(d) >> 0, K * np.eye(d) - A >> 0]
        for k in np.flatnonzero(~mut):
            e = np.zeros(d)
            e[k] = 1
            cons += [A[:, k] == e, c[k] == 0]
    else:  # translation
        T = X + np.ones((n, 1)) @ cp.reshape(c, (1, d), order="C")
        cons += [c[np.flatnonzero(~mut)] == 0] if (~mut).any() else []
    cons.append(T @ w + b >= tau)
    if bounds is not None:
        lo, hi = (np.broadcast_to(np.asarray(v, float), (d,)) for v in bounds)
        for k in np.flatnonzero(mut):
            if np.isfinite(lo[k]):
                cons.append(T[:, k] >= lo[k])
            if np.isfinite(hi[k]):
                cons.append(T[:, k] <= hi[k])
    D = T - X
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(p[:, None], cp.square(D)))), cons)
    prob.solve(solver="CLARABEL", **TIGHT)
    return prob.value, prob.status


def diag_qp_kkt(X, scale, centre, tail, m, E, e, h, lo, hi, z, active, mult):
    """Residuals of the KKT conditions of the diagonal-Hessian QP at (z, active, mult).

    Returns (stationarity, primal violation, min multiplier, max |slack| of active rows)."""
    n, f = X.shape
    p = h.size
    ne = E.shape[0]

    def normal(i):
        if i < n:
            return np.concatenate([scale * (X[i] - centre), tail])
        if i < n + ne:
            return E[i - n]
        j, side = divmod(i - n - ne, 2)
        v = np.zeros(p)
        v[j] = 1.0 if side == 0 else -1.0
        return v

    def rhs(i):
        if i < n:
            return m[i]
        if i < n + ne:
            return e[i - n]
        j, side = divmod(i - n - ne, 2)
        return lo[j] if side == 0 else -hi[j]

    G = np.hstack([(X - centre) * scale, np.broadcast_to(tail, (n, tail.size))])
    viol = max(0.0, float(np.max(m - G @ z, initial=-np.inf)))
    if ne:
        viol = max(viol, float(np.max(e - E @ z)))
    viol = max(viol, float(np.max(lo - z)), float(np.max(z - hi)), 0.0)
    grad = 2 * h * z
    for i, u in zip(active, mult):
        grad = grad - u * normal(int(i))
    act_slack = max((abs(normal(int(i)) @ z - rhs(int(i))) for i in active), default=0.0)
    return float(np.max(np.abs(grad))), viol, float(np.min(mult, initial=0.0)), act_slack


def pair_ratios(X, Y):
    """All pairwise distance ratios |y_i - y_j| / |x_i - x_j| by a double loop."""
    out = []
    for i in range(len(X)):
        for j in range(i + 1, len(X)):
            dx = np.linalg.norm(X[i] - X[j])
            if dx > 1e-12:
                out.append(np.linalg.norm(Y[i] - Y[j]) / dx)
    return np.array(out)


def zscore_shuffle_split(X, y, seed, fraction):
    """The protocol's split written out: population z-scores (constant columns centred only), the
    permutation of numpy.random.default_rng(seed), the first int(fraction * n) rows for the groups."""
    X = np.asarray(X, dtype=float)
    Z = np.empty_like(X)
    for k in range(X.shape[1]):
        col = X[:, k]
        mu = sum(col) / len(col)
        sd = np.sqrt(sum((v - mu) ** 2 for v in col) / len(col))
        Z[:, k] = (col - mu) / sd if sd > 0 else col - mu
    perm = np.random.default_rng(seed).permutation(len(X))
    k = int(fraction * len(X))
    y = np.asarray(y)
    return Z[perm][:k], y[perm][:k], Z[perm][k:], y[perm][k:]
