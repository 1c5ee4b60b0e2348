"""Counterfactual benchmark problems and the side-by-side run shared by asv and ``bench/compare.py``.

Every contestant solves the identical problem: the diagonal-affine (or translation) group
counterfactual map of a Gaussian group for a fixed linear score, confidence 0.8. The contestants:

- ``numtk``: :class:`numtk.counterfactual.GroupCounterfactualMap` with its native solver;
- ``cvxpy-<SOLVER>/full``: the paper's formulation (variables a, c; objective
  sum_i |a * x_i + c - x_i|^2), canonicalised and solved by cvxpy end to end;
- ``cvxpy-<SOLVER>``: numtk's reduced QP (diagonal Hessian, n dense rows) through cvxpy;
- ``daqp``: the reduced QP through DAQP (a dual active-set solver, the closest design).
"""

import math

import numpy as np

from benchmarks._timing import interleaved

TAU = math.log(4.0)


#: (family, n, d, K) cases of ``bench/compare.py --counterfactual`` (spec targets at n = 1e4, d = 100).
CASES = (("translation", 10_000, 100, 1.0), ("diagonal", 200, 20, 2.0), ("diagonal", 2_000, 50, 2.0),
         ("diagonal", 10_000, 100, 1.01), ("diagonal", 10_000, 100, 1.5), ("diagonal", 10_000, 100, 2.0),
         ("diagonal", 10_000, 100, 5.0))
QUICK_CASES = (("translation", 10_000, 100, 1.0), ("diagonal", 200, 20, 2.0), ("diagonal", 2_000, 50, 2.0))


def make_group(n, d, seed=20261129):
    """A Gaussian group with anisotropic features and a linear score that rejects every member."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0, d)
    w = rng.normal(size=d)
    b = -1.0 - float(np.max(X @ w))
    return X, w, b


def numtk_map(family, X, w, b, K):
    from numtk.counterfactual import GroupCounterfactualMap

    return GroupCounterfactualMap(family, distortion=K).fit(X, (w, b)).cost_


def reduced_qp(X, w, b, K):
    """The reduced diagonal QP (see GroupCounterfactualMap's Notes): (h, G, m, lo, hi)."""
    n, d = X.shape
    xbar = X.mean(0)
    Xt = X - xbar
    h = np.r_[(Xt * Xt).sum(0), n / (w @ w)]
    G = np.hstack([Xt * w, np.ones((n, 1))])
    m = TAU - (X @ w + b)
    lo = np.r_[np.full(d, 1 / K - 1), -np.inf]
    hi = np.r_[np.full(d, K - 1), np.inf]
    return h, G, m, lo, hi


def cvxpy_reduced(X, w, b, K, solver):
    import cvxpy as cp

    h, G, m, lo, hi = reduced_qp(X, w, b, K)
    d = X.shape[1]
    z = cp.Variable(d + 1)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(h, cp.square(z)))),
                      [G @ z >= m, z[:d] >= lo[:d], z[:d] <= hi[:d]])
    prob.solve(solver=solver)
    return prob.value


def cvxpy_full(X, w, b, K, solver, family="diagonal"):
    import cvxpy as cp

    n, d = X.shape
    c = cp.Variable(d)
    if family == "diagonal":
        a = cp.Variable(d)
        D = cp.multiply(X, np.ones((n, 1)) @ cp.reshape(a - 1, (1, d), order="C")) + np.ones((n, 1)) @ cp.reshape(c, (1, d), order="C")
        cons = [a >= 1 / K, a <= K, (X + D) @ w + b >= TAU]
        obj = cp.sum_squares(D)
    else:
        cons = [X @ w + b + w @ c >= TAU]
        obj = n * cp.sum_squares(c)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver=solver)
    return prob.value


def daqp_reduced(X, w, b, K):
    import daqp

    h, G, m, lo, hi = reduced_qp(X, w, b, K)
    d = X.shape[1]
    H = np.diag(2 * h)
    f = np.zeros(d + 1)
    A = np.ascontiguousarray(G)
    bupper = np.r_[hi[:d], np.full(len(m), 1e30)]
    blower = np.r_[lo[:d], m]
    sense = np.zeros(len(bupper), dtype=np.int32)
    x, fval, exitflag, info = daqp.solve(H, f, A, bupper, blower, sense)
    if exitflag < 1:
        raise RuntimeError(f"daqp exit flag {exitflag}")
    return fval  # 0.5 x'Hx with H = 2 diag(h) is sum_j h_j z_j^2, the same objective


def contestants(family, X, w, b, K):
    out = {"numtk": lambda: numtk_map(family, X, w, b, K)}
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        return out
    if family == "diagonal":
        try:
            import daqp  # noqa: F401
            out["daqp"] = lambda: daqp_reduced(X, w, b, K)
        except ImportError:
            pass
        for s in ("CLARABEL", "OSQP", "SCS"):
            out[f"cvxpy-{s}"] = (lambda s=s: cvxpy_reduced(X, w, b, K, s))
        out["cvxpy-CLARABEL/full"] = lambda: cvxpy_full(X, w, b, K, "CLARABEL")
    else:
        for s in ("CLARABEL", "OSQP", "SCS"):
            out[f"cvxpy-{s}/full"] = (lambda s=s: cvxpy_full(X, w, b, K, s, family="translation"))
    return out


def compare(cases, out=print, repeat=9, budget=20.0):
    """Print, per case (family, n, d, K), median seconds and optimum of every contestant."""
    out("\n== counterfactual group maps: median seconds (repetitions) and optimum; ratio = contestant/numtk")
    for family, n, d, K in cases:
        X, w, b = make_group(n, d)
        numtk_map(family, X, w, b, K)  # warm-up (imports)
        out(f"-- {family}, n = {n}, d = {d}, K = {K}")
        t_ref = ref = None
        fns = contestants(family, X, w, b, K)
        # interleaved rounds; a solver that fails is reported, not fatal
        timing = interleaved(fns, {name: repeat if name in ("numtk", "daqp") or n * d <= 10**4 else 1 for name in fns},
                             warmup=False, budget=budget, errors="record")
        for name in fns:
            if name in timing.errors:
                exc = timing.errors[name]
                out(f"   {name:<22} failed: {type(exc).__name__}: {str(exc)[:80]}")
                continue
            t, value, k = timing.medians[name], timing.results[name], timing.counts[name]
            if name == "numtk":
                t_ref, ref = t, value
                out(f"   {name:<22} {t * 1e3:10.2f} ms  ({k})  optimum {value:.10g}")
            else:
                rel = abs(value - ref) / max(abs(ref), 1e-300)
                out(f"   {name:<22} {t * 1e3:10.2f} ms  ({k})  optimum rel. diff {rel:.1e}  ratio {t / t_ref:8.1f}x")


def compare_section(quick=False, out=print):
    """``bench/compare.py --counterfactual``: :func:`compare` on ``QUICK_CASES`` (``quick``) or ``CASES``."""
    return compare(QUICK_CASES if quick else CASES, out=out)
