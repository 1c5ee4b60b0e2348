"""Side-by-side runs of numtk.mixture for ``bench/compare.py --mixture``: the law fits, predictions, the optimal
mixture and the budget allocation against the time targets of the area's specification (mixture.md section 13)
and against plain SciPy fits of the same objectives, written here as the anchors.

The problems are the demo's planted world (:func:`numtk.mixture.planted_law` and
:func:`numtk.mixture.simulate_runs`: M = V = 5, proxy sizes 1.2e7 .. 1.5e8, target 1.2e9), the same world at
RegMix's size (M = 17 training domains, V = 13 validation sets, R = 1,000 runs), RegMix's released 1M and 60M
runs when :func:`numtk.datasets.load_regmix` is there, and 245 planted Chinchilla rows (the replication's fitted
law on sizes and compute budgets spanning its Figure 4, 0.5 % log-normal noise).

The anchors:

- **Chinchilla**: the replication's recipe (Besiroglu et al., arXiv 2404.10102): L-BFGS-B with SciPy's
  finite-difference gradient from each of the 4,500 grid starts, the best start among those reporting success
  (the best overall when none does), on the Huber loss (delta = 1e-3) of the log residuals of the log-sum-exp
  law.
- **MixtureLaw('camel')**: :func:`scipy.optimize.least_squares` (trust-region reflective, its built-in Huber
  loss with ``f_scale = delta``, which is exactly the Huber objective numtk minimises, and a two-point
  finite-difference Jacobian) on the same parameters (E, theta, log alpha) and bounds, one validation set at a
  time, from the same number of starts built by the specification's recipe (section 3.5: the best of a
  64-value profile over E, then E drawn uniformly with the log-linear least squares at that E and a jitter of
  0.3 on log alpha). numtk's own starts also include the fitted separable law; the anchor does without.
- **predict**: the law's formula as one NumPy expression; **optimal_mixture**: SLSQP with a finite-difference
  gradient on the simplex from the uniform mixture.

The targets are for one core: every contestant runs with BLAS held to one thread (threadpoolctl), and numtk is
timed once more as a user calls it ("as loaded"), since on busy shared cores BLAS threads alone can make a
numtk call 10x slower than its one-thread time.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
from scipy.optimize import least_squares, minimize

from benchmarks._timing import interleaved

__all__ = ["compare", "chinchilla_rows", "replication_grid", "chinchilla_objective", "scipy_chinchilla",
           "mixture_problem", "regmix_problem", "camel_objective", "scipy_camel_fit", "numtk_objective",
           "numpy_predict", "scipy_optimal_mixture", "allocation_problem", "CHINCHILLA_LAW", "FIT_SIZES",
           "TARGET_SIZE", "TARGETS"]

#: the demo's proxy sizes (activated parameters) and target size
FIT_SIZES = tuple(float(s) for s in np.geomspace(1.2e7, 1.5e8, 5))
TARGET_SIZE = 1.2e9
#: mixture.md section 13, seconds on one core, float64
TARGETS = {"chinchilla": 0.5, "chinchilla_grid": 60.0, "camel": 2.0, "regmix": 30.0, "predict": 0.2,
           "optimal5": 0.02, "optimal17": 0.2, "allocate": 0.5}
#: the replication's fitted law (spec section 9.7): the planted Chinchilla world
CHINCHILLA_LAW = {"E": 1.8172, "A": 477.8, "B": 2143.0, "alpha": 0.34731, "beta": 0.36717}
DELTA = 1e-3


# ------------------------------------------------------------------------------------------------------------
# Chinchilla
# ------------------------------------------------------------------------------------------------------------
def chinchilla_rows(n: int = 245, *, noise: float = 5e-3, rng: int = 0):
    """``n`` planted Chinchilla runs: sizes log-uniform in [4.4e7, 1.6e10] and compute log-uniform in
    [6e18, 3e21] (the span of Hoffmann et al.'s Figure 4), D = C / (6 N), losses of :data:`CHINCHILLA_LAW`
    times exp(noise z). Returns (N, D, L)."""
    g = np.random.default_rng(rng)
    N = np.exp(g.uniform(math.log(4.4e7), math.log(1.6e10), n))
    C = np.exp(g.uniform(math.log(6e18), math.log(3e21), n))
    D = C / (6.0 * N)
    p = CHINCHILLA_LAW
    L = p["E"] + p["A"] * N ** -p["alpha"] + p["B"] * D ** -p["beta"]
    return N, D, L * np.exp(noise * g.standard_normal(n))


def replication_grid() -> np.ndarray:
    """The replication's 4,500 starts (a, b, e, alpha, beta): alpha, beta in {0, 0.5, 1, 1.5, 2},
    e in {-1, -0.5, 0, 0.5, 1}, a, b in {0, 5, ..., 25}."""
    ab = np.arange(0.0, 30.0, 5.0)
    ex = np.arange(0.0, 2.5, 0.5)
    e = np.arange(-1.0, 1.5, 0.5)
    mesh = np.meshgrid(ab, ab, e, ex, ex, indexing="ij")
    return np.column_stack([m.ravel() for m in mesh])


def _huber(r: np.ndarray, delta: float) -> np.ndarray:
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def chinchilla_objective(x, logN, logD, logL, delta=DELTA) -> float:
    """sum Huber_delta(LSE(a - alpha log N, b - beta log D, e) - log L), x = (a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = x
    u, v = a - alpha * logN, b - beta * logD
    m = np.maximum(np.maximum(u, v), e)
    with np.errstate(all="ignore"):
        pred = m + np.log(np.exp(u - m) + np.exp(v - m) + np.exp(e - m))
        value = float(np.sum(_huber(pred - logL, delta)))
    return value if math.isfinite(value) else math.inf


def scipy_chinchilla(N, D, L, starts, delta=DELTA):
    """The replication's recipe: L-BFGS-B (finite-difference gradient, SciPy's default tolerances) from each
    start; the best start reporting success (the best overall when none does). Returns (x, objective,
    successes)."""
    logN, logD, logL = np.log(N), np.log(D), np.log(L)
    best_ok, best_any, n_ok = (None, math.inf), (None, math.inf), 0
    with np.errstate(all="ignore"):
        for x0 in starts:
            res = minimize(chinchilla_objective, x0, args=(logN, logD, logL, delta), method="L-BFGS-B")
            f = float(res.fun) if np.isfinite(res.fun) else math.inf
            if f < best_any[1]:
                best_any = (res.x, f)
            if res.success:
                n_ok += 1
                if f < best_ok[1]:
                    best_ok = (res.x, f)
    x, f = best_ok if best_ok[0] is not None else best_any
    return x, f, n_ok


# ------------------------------------------------------------------------------------------------------------
# mixture laws
# ------------------------------------------------------------------------------------------------------------
def mixture_problem(n_domains: int = 5, n_outputs: int = 5, n_sizes: int = 5, n_mixtures: int = 20, *,
                    noise: float = 1e-3, rng: int = 0):
    """The demo's planted world: ``planted_law(n_domains, n_outputs, rng=rng)`` and its runs, ``n_mixtures``
    Dirichlet(1) mixtures at ``n_sizes`` sizes from 1.2e7 to 1.5e8, log-normal noise. Returns (law, X, y)."""
    from numtk.mixture import planted_law, simulate_runs

    law = planted_law(n_domains, n_outputs, rng=rng)
    X, y = simulate_runs(law, np.geomspace(FIT_SIZES[0], FIT_SIZES[-1], n_sizes), n_mixtures, noise=noise,
                         rng=rng + 1)
    return law, X, y


def regmix_problem():
    """RegMix's runs at 1M (768) and 60M (256): (X, y) with M = 17, V = 13, or None without the data set."""
    try:
        from numtk.datasets import load_regmix
    except ImportError:
        return None
    from numtk.mixture import mixture_features

    data = load_regmix()
    rows = np.isin(data.size, ["1M", "60M"])
    return mixture_features(data.model_size[rows], data.mixtures[rows]), data.losses[rows]


def _split(X, y):
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(y, dtype=np.float64)
    return X[:, 0], X[:, 1:], Y.reshape(len(Y), -1)


def camel_objective(x, R, ell, logy, delta=DELTA) -> float:
    """The 'camel' objective of one validation set: sum Huber_delta(log(E + exp(R theta - ell R alpha)) - log y),
    x = (E, theta (M), log alpha (M))."""
    return float(np.sum(_huber(_camel_residuals(x, R, ell, logy), delta)))


def _camel_residuals(x, R, ell, logy):
    M = R.shape[1]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        pred = x[0] + np.exp(R @ x[1:M + 1] - ell * (R @ np.exp(x[M + 1:])))
        r = np.log(pred) - logy
    return np.where(np.isfinite(r), r, 1e10)


def _camel_starts(R, ell, y, n_starts, gen, *, jitter=0.3):
    """The specification's starts (section 3.5, without the separable one): the best E of a 64-value profile
    (uniform in log(min L - E)), then E ~ U(0, 0.99 min L); theta and alpha by least squares of log(L - E) on
    [R, -ell R] at that E, alpha floored at 1e-3, random starts with N(0, jitter^2) on log alpha."""
    M = R.shape[1]
    A = np.hstack([R, -ell[:, None] * R])
    m = float(y.min())

    def at(E):
        coef, *_ = np.linalg.lstsq(A, np.log(y[:, None] - np.atleast_1d(E)[None, :]), rcond=None)
        return coef

    t = np.linspace(math.log(1e-3 * m), math.log(m), 64)
    grid = m - np.exp(t)
    grid[-1] = 0.0
    coef = at(grid)
    sse = np.sum((np.log(y[:, None] - grid[None, :]) - A @ coef) ** 2, axis=0)
    E = [float(grid[np.argmin(sse)])] + list(gen.uniform(0.0, 0.99 * m, n_starts - 1))
    coef = at(np.array(E))
    hi = (1.0 - 1e-9) * m
    starts = []
    for k, e in enumerate(E):
        c = coef[:, k]
        g = np.log(np.maximum(c[M:], 1e-3))
        if k:
            g = g + gen.normal(0.0, jitter, M)
        starts.append(np.concatenate([[min(e, hi)], c[:M], np.clip(g, math.log(1e-4), math.log(5.0))]))
    return starts


def scipy_camel_fit(X, y, *, n_starts: int = 32, delta: float = DELTA, rng: int = 0, tol: float = 1e-10):
    """The anchor fit of ``MixtureLaw('camel')``: per validation set, ``least_squares`` (TRF, Huber loss with
    ``f_scale = delta``, two-point Jacobian, ``ftol = xtol = gtol = tol``) from the starts of
    :func:`_camel_starts`, under numtk's bounds 0 <= E <= (1 - 1e-9) min L, 1e-4 <= alpha <= 5. Returns
    (objective summed over validation sets, params dict E (V,), theta (V, M), alpha (V, M), N0)."""
    N, R, Y = _split(X, y)
    M, V = R.shape[1], Y.shape[1]
    N0 = float(np.exp(np.mean(np.log(np.unique(N)))))
    ell = np.log(N / N0)
    gen = np.random.default_rng(rng)
    total = 0.0
    P = {"E": np.empty(V), "theta": np.empty((V, M)), "alpha": np.empty((V, M))}
    lo = np.r_[0.0, np.full(M, -np.inf), np.full(M, math.log(1e-4))]
    for i in range(V):
        yi = Y[:, i]
        logy = np.log(yi)
        hi = np.r_[(1.0 - 1e-9) * yi.min(), np.full(M, np.inf), np.full(M, math.log(5.0))]
        best = (None, math.inf)
        for x0 in _camel_starts(R, ell, yi, n_starts, gen):
            res = least_squares(_camel_residuals, x0, jac="2-point", bounds=(lo, hi), method="trf", loss="huber",
                                f_scale=delta, ftol=tol, xtol=tol, gtol=tol, args=(R, ell, logy))
            f = camel_objective(res.x, R, ell, logy, delta)
            if f < best[1]:
                best = (res.x, f)
        x = best[0]
        total += best[1]
        P["E"][i], P["theta"][i], P["alpha"][i] = x[0], x[1:M + 1], np.exp(x[M + 1:])
    return total, P, N0


def numtk_objective(law, X, y, delta=DELTA) -> float:
    """A fitted camel law's objective recomputed here (sum over sets of Huber on log residuals)."""
    N, R, Y = _split(X, y)
    pred = numpy_predict(law.params_, law.reference_size_, N, R)
    return float(np.sum(_huber(np.log(pred) - np.log(Y), delta)))


def numpy_predict(params, N0, N, R):
    """The camel law as one NumPy expression: E + exp(R theta^T - log(N / N0) R alpha^T), shape (n, V)."""
    ell = np.log(np.asarray(N) / N0)[:, None]
    return params["E"] + np.exp(R @ params["theta"].T - ell * (R @ params["alpha"].T))


def scipy_optimal_mixture(params, N0, size, weights=None):
    """The anchor of ``optimal_mixture``: SLSQP with a finite-difference gradient on the simplex from the
    uniform mixture, minimising the weighted loss of the camel law at ``size``. Returns (mixture, value)."""
    E, theta, alpha = params["E"], params["theta"], params["alpha"]
    V, M = theta.shape
    w = np.full(V, 1.0 / V) if weights is None else np.asarray(weights, dtype=float)
    B = theta - math.log(size / N0) * alpha

    def F(r):
        return float(w @ (E + np.exp(B @ r)))

    res = minimize(F, np.full(M, 1.0 / M), method="SLSQP", bounds=[(0.0, 1.0)] * M,
                   constraints=[{"type": "eq", "fun": lambda r: r.sum() - 1.0}], options={"ftol": 1e-12,
                                                                                          "maxiter": 1000})
    return res.x, float(res.fun)


def allocation_problem(n_sizes: int = 10, n_mixtures: int = 50, *, reserve: float = 0.0, rng: int = 0):
    """allocate_budget's benchmark: the planted M = V = 5 law (p = 55 parameters), ``n_sizes`` candidate sizes
    from 1.2e7 to 1.5e8, ``n_mixtures`` candidate mixtures (S * m = 500 by default), a run costing
    6 N D with D = 20 N tokens, a budget of 40 runs at the largest size, target 1.2e9 at the law's optimal
    mixture (computed once, outside the timing). ``reserve = 0`` (the default here) is Elfving's LP alone;
    allocate_budget's own default 0.2 adds the Frank-Wolfe safeguard. Returns a dict of allocate_budget's
    arguments."""
    from numtk.mixture import optimal_mixture, planted_law

    law = planted_law(5, 5, rng=rng)
    sizes = np.geomspace(FIT_SIZES[0], FIT_SIZES[-1], n_sizes)
    cost = 6.0 * sizes * 20.0 * sizes
    target_mixture = optimal_mixture(law, TARGET_SIZE).mixture
    return dict(budget=40.0 * cost[-1], candidate_sizes=sizes, cost_fn=cost, law=law, target_size=TARGET_SIZE,
                target_mixture=target_mixture, n_mixtures=n_mixtures, noise=1e-3, reserve=reserve, rng=rng)


def sdp_allocation(kw: dict, mixtures: np.ndarray) -> float:
    """The anchor of allocate_budget (reserve 0): the same c-optimal design as a semidefinite program,

        min t  s.t.  [[M(pi), h], [h^T, t]] PSD,  pi >= 0,  sum pi = 1,  M(pi) = sum_k pi_k z_k z_k^T,

    on the same candidates (``kw``'s sizes x ``mixtures``), z_k the run's row f_k / (noise y_k sqrt(c_k))
    (f_k the gradient of the mean loss in the law's parameters), solved by cvxpy (Clarabel, SCS if that
    fails). The rows are first scaled to unit columns and taken to the coordinates of their SVD with the
    directions no candidate moves dropped (the Schur complement is ill-posed when M is singular; a single response of V losses identifies
    only their mean E). Returns the continuous design's standard deviation at the budget, comparable to
    allocate_budget's ``std_design``."""
    import cvxpy as cp

    from numtk.mixture import mixture_features

    law, sizes, costs = kw["law"], np.asarray(kw["candidate_sizes"]), np.asarray(kw["cost_fn"], dtype=float)
    m = mixtures.shape[0]
    X = mixture_features(np.repeat(sizes, m), np.tile(mixtures, (sizes.size, 1)))
    P = law.predict(X)
    J = law.jacobian(X)
    w = np.full(P.shape[1], 1.0 / P.shape[1])
    y = P @ w
    rows = np.einsum("kvp,v->kp", J, w) / (kw["noise"] * y * np.sqrt(np.repeat(costs, m)))[:, None]
    Jt = law.jacobian(mixture_features(kw["target_size"], np.asarray(kw["target_mixture"])[None, :]))[0]
    g = Jt.T @ w
    col = np.linalg.norm(rows, axis=0)          # unit columns first: the parameters' scales differ by decades
    col[col == 0] = 1.0
    rows, g = rows / col, g / col
    U, sv, Vt = np.linalg.svd(rows, full_matrices=False)
    keep = sv > 1e-9 * sv[0]                   # allocate_budget's rank tolerance: the same estimable subspace
    Z, h = U[:, keep], (Vt[keep] @ g) / sv[keep]
    if np.linalg.norm(g - Vt[keep].T @ (Vt[keep] @ g)) > 1e-6 * np.linalg.norm(g):
        raise ValueError("the target is not estimable from these candidates")
    scale = np.linalg.norm(h)
    h = h / scale
    K, r = Z.shape
    G = np.einsum("kp,kq->kpq", Z, Z).reshape(K, r * r)
    pi = cp.Variable(K, nonneg=True)
    t = cp.Variable()
    Mexp = cp.reshape(G.T @ pi, (r, r), order="C")
    Mexp = 0.5 * (Mexp + Mexp.T)
    lmi = cp.bmat([[Mexp, h[:, None]], [h[None, :], cp.reshape(t, (1, 1), order="C")]])
    prob = cp.Problem(cp.Minimize(t), [cp.sum(pi) == 1, lmi >> 0])
    try:
        prob.solve(solver="CLARABEL")
    except Exception:  # noqa: BLE001 - the anchor only: a failed interior point goes to SCS
        prob.solve(solver="SCS", eps=1e-9)
    return float(np.sqrt(max(prob.value, 0.0) / kw["budget"]) * scale)


# ------------------------------------------------------------------------------------------------------------
# the comparison
# ------------------------------------------------------------------------------------------------------------

def _one_thread(fn):
    """``fn`` run with BLAS on one thread: the targets are for one core, and the iterative SciPy solvers
    (L-BFGS-B, SLSQP, least_squares) make many tiny LAPACK calls that BLAS threads slow down 10-20x once other
    processes share the cores."""
    from numtk._lib import single_blas_thread

    def run():
        with single_blas_thread():
            return fn()
    return run


def _time(calls, repeat, *, loaded=True, **kw):
    """:func:`interleaved` on ``calls`` (name -> callable), each with BLAS on one thread; with ``loaded``, numtk
    once more as a user calls it (BLAS threads as loaded), under the name ``'loaded'``. ``repeat``: an int or
    a mapping; the loaded run gets numtk's count."""
    timed = {name: _one_thread(fn) for name, fn in calls.items()}
    reps = dict(repeat) if isinstance(repeat, dict) else dict.fromkeys(calls, repeat)
    if loaded:
        timed["loaded"] = calls["numtk"]
        reps["loaded"] = reps["numtk"]
    return interleaved(timed, reps, errors="record", **kw)


def _failed(table, label, t):
    """Record a numtk contestant that is not there yet (its module still a placeholder); re-raise real errors."""
    exc = t.errors.get("numtk")
    if exc is None:
        return False
    if not isinstance(exc, (NotImplementedError, ImportError, AttributeError)):
        raise exc
    table.missing(label, f"unavailable: {type(exc).__name__}: {str(exc)[:50]}")
    return True


class _Table:
    WIDTH = 66

    def __init__(self):
        self.rows = []

    def add(self, case, ours, other=None, kind="", *, loaded=None, note=""):
        """One row: ``kind`` 'target' or an anchor's name; ratio = other / ours (> 1: numtk faster, or within
        the target); ``loaded``: numtk's time with BLAS threads as loaded."""
        self.rows.append((case, ours, other, kind, loaded, note))

    def missing(self, case, why):
        self.rows.append((case, None, None, "", None, why))

    def print(self):
        w = self.WIDTH
        print(f"  {'case':<{w}} {'numtk':>9} {'target/anchor':>18} {'ratio':>8} {'as loaded':>10}  note")
        for case, ours, other, kind, loaded, note in self.rows:
            if ours is None:
                print(f"  {case:<{w}} {'-':>9} {'-':>18} {'-':>8} {'-':>10}  {note}")
                continue
            marks = []
            if kind == "target":
                marks.append("ok" if ours <= other else f"MISS by {ours / other:.2f}x")
                if loaded is not None and loaded > other:
                    marks.append(f"as loaded MISS by {loaded / other:.2f}x")
            label = f"{kind} {_fmt(other)}" if other is not None else "-"
            ratio = f"{other / ours:7.2f}x" if other is not None else "-"
            text = "; ".join(s for s in (*marks, note) if s)
            print(f"  {case:<{w}} {_fmt(ours):>9} {label:>18} {ratio:>8} {_fmt(loaded):>10}  {text}")


def _fmt(t):
    if t is None:
        return "-"
    if t >= 1.0:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.1f} ms"
    return f"{t * 1e6:.0f} us"


def _chinchilla(table, quick, repeat):
    from numtk.mixture import chinchilla_fit

    N, D, L = chinchilla_rows()
    grid = replication_grid()
    # quick: 100 of the 4,500 starts, drawn once (seeded), and the times scaled by 45
    sub = grid[np.sort(np.random.default_rng(0).choice(len(grid), 100, replace=False))] if quick else grid
    scale = len(grid) / len(sub)
    star = " *" if quick else ""
    what = "4,500 starts" if not quick else f"{len(sub)} of 4,500 starts, time x{scale:.0f}"
    label = "chinchilla_fit default (varpro), 245 planted rows"
    t = _time({"numtk": lambda: chinchilla_fit(N, D, L)}, repeat)
    if _failed(table, label, t):
        return
    ours = t.results["numtk"]
    t_v = t.medians["numtk"]
    table.add(label, t_v, TARGETS["chinchilla"], "target", loaded=t.medians.get("loaded"),
              note=f"objective {ours.value:.7e}")
    x = [ours.log_A, ours.log_B, ours.log_E, ours.alpha, ours.beta]
    same = chinchilla_objective(x, np.log(N), np.log(D), np.log(L))
    if not abs(same - ours.value) <= 1e-9 * max(1.0, ours.value):
        table.missing("  (check)", f"numtk's objective {ours.value!r} differs from the anchor's formula {same!r}")
    # the long runs: timed once each (one sample, interleaved order irrelevant)
    t = _time({"scipy": lambda: scipy_chinchilla(N, D, L, sub),
               "grid": lambda: chinchilla_fit(N, D, L, init="grid", grid=sub)}, 1, loaded=False, warmup=False)
    t_sc, t_g = t.medians["scipy"] * scale, t.medians["grid"] * scale
    _, f, n_ok = t.results["scipy"]
    g = t.results["grid"]
    table.add("  vs replication recipe (L-BFGS-B, FD gradient, grid)" + star, t_v, t_sc, "SciPy",
              note=f"{what}; objective {f:.7e} ({n_ok}/{len(sub)} success); the ratio mostly counts starts "
                   "(numtk's varpro runs 5, the recipe 4,500): the same-starts row below compares solvers")
    table.add("chinchilla_fit init='grid' (analytic gradient)" + star, t_g, TARGETS["chinchilla_grid"], "target",
              note=f"{what}; objective {g.value:.7e}")
    table.add("  vs replication recipe (same starts)" + star, t_g, t_sc, "SciPy",
              note=f"objective numtk - SciPy {g.value - f:+.1e}")


def _camel_case(table, label, target_key, X, y, *, n_starts, repeat, anchor=True, fixed=None, target=True,
                loaded=True):
    from numtk.mixture import MixtureLaw

    calls = {"numtk": lambda: MixtureLaw("camel", n_starts=n_starts, rng=0, fixed=fixed).fit(X, y)}
    if anchor:
        calls["scipy"] = lambda: scipy_camel_fit(X, y, n_starts=n_starts)
    t = _time(calls, {"numtk": repeat, "scipy": max(1, repeat // 3)}, loaded=loaded, max_single=20.0,
              warmup=repeat > 1)
    if _failed(table, label, t):
        return
    law = t.results["numtk"]
    f_ours = numtk_objective(law, X, y) if fixed is None else float(law.loss_)
    note = f"objective {f_ours:.6e}"
    if target:
        table.add(label, t.medians["numtk"], TARGETS[target_key], "target", loaded=t.medians.get("loaded"),
                  note=note)
    else:
        table.add(label, t.medians["numtk"], loaded=t.medians.get("loaded"), note=note + " (no target at this size)")
    if "scipy" in t.medians:
        f_sc = t.results["scipy"][0]
        table.add("  vs SciPy least_squares (Huber, FD Jacobian), same # starts", t.medians["numtk"],
                  t.medians["scipy"], "SciPy", note=f"objective {f_sc:.6e} (numtk - SciPy {f_ours - f_sc:+.1e})")
    elif "scipy" in t.errors:
        exc = t.errors["scipy"]
        table.missing("  vs SciPy least_squares", f"failed: {type(exc).__name__}: {str(exc)[:50]}")


def _predict(table, quick, repeat):
    from numtk.mixture import mixture_features

    law, _, _ = mixture_problem()
    n = 10**6
    g = np.random.default_rng(3)
    N = np.exp(g.uniform(math.log(1e7), math.log(1e10), n))
    R = g.dirichlet(np.ones(5), n)
    X = mixture_features(N, R)
    label = "predict, 1e6 (N, r) pairs, M = V = 5"
    t = _time({"numtk": lambda: law.predict(X),
               "numpy": lambda: numpy_predict(law.params_, law.reference_size_, N, R)}, repeat)
    if _failed(table, label, t):
        return
    diff = float(np.max(np.abs(t.results["numtk"] / t.results["numpy"] - 1.0)))
    table.add(label, t.medians["numtk"], TARGETS["predict"], "target", loaded=t.medians.get("loaded"))
    table.add("  vs NumPy expression of the law (no input checks)", t.medians["numtk"], t.medians["numpy"], "NumPy",
              note=f"max rel. diff {diff:.0e}")


def _optimal(table, quick, repeat):
    from numtk.mixture import optimal_mixture, planted_law

    for M, V, key in ((5, 5, "optimal5"), (17, 13, "optimal17")):
        law = planted_law(M, V, rng=0)
        label = f"optimal_mixture, M = {M}, V = {V}, N = 1.2e9"
        t = _time({"numtk": lambda: optimal_mixture(law, TARGET_SIZE),
                   "scipy": lambda: scipy_optimal_mixture(law.params_, law.reference_size_, TARGET_SIZE)},
                  repeat, min_time=0.05)
        if _failed(table, label, t):
            continue
        res = t.results["numtk"]
        table.add(label, t.medians["numtk"], TARGETS[key], "target", loaded=t.medians.get("loaded"),
                  note=f"value {res.value:.10f}, KKT residual {res.kkt_residual:.0e}")
        if "scipy" in t.medians:
            _, v = t.results["scipy"]
            table.add("  vs SciPy SLSQP (FD gradient, uniform start)", t.medians["numtk"], t.medians["scipy"],
                      "SciPy", note=f"value numtk - SciPy {res.value - v:+.1e}")


def _allocate(table, quick, repeat):
    from numtk.mixture import allocate_budget

    label = "allocate_budget, S * m = 10 * 50 = 500, p = 55, reserve=0 (LP path)"
    try:
        kw = allocation_problem()
    except (NotImplementedError, ImportError, AttributeError) as exc:
        table.missing(label, f"unavailable (optimal_mixture): {type(exc).__name__}: {str(exc)[:40]}")
        return
    t = _time({"numtk": lambda: allocate_budget(**kw)}, repeat)
    if _failed(table, label, t):
        return
    res = t.results["numtk"]
    t_lp = t.medians["numtk"]
    table.add(label, t_lp, TARGETS["allocate"], "target", loaded=t.medians.get("loaded"),
              note=f"{int(res.runs.sum())} runs, {len(res.support)} support points, std {res.std:.2e}, "
                   f"continuous {res.std_design:.6e}")
    if not quick:
        # the same c-optimal design as cvxpy's SDP on the same candidates (seconds: the full run only)
        try:
            import cvxpy  # noqa: F401
        except ImportError:
            table.missing("  vs cvxpy SDP (same candidates)", "cvxpy is not installed")
        else:
            mix = res.mixtures
            t = _time({"sdp": lambda: sdp_allocation(kw, mix)}, 1, loaded=False, warmup=False)
            if not _failed(table, "  vs cvxpy SDP (same candidates)", t):
                s_sdp = t.results["sdp"]
                table.add("  vs cvxpy SDP (same candidates)", t_lp, t.medians["sdp"], "cvxpy",
                          note=f"continuous std numtk {res.std_design:.6e}, SDP {s_sdp:.6e} "
                               f"(rel. diff {res.std_design / s_sdp - 1:+.1e})")
    kw_r = dict(kw, reserve=0.2)
    label = "allocate_budget, same problem, default reserve=0.2 (Frank-Wolfe)"
    t = _time({"numtk": lambda: allocate_budget(**kw_r)}, repeat)
    if _failed(table, label, t):
        return
    res = t.results["numtk"]
    table.add(label, t.medians["numtk"], TARGETS["allocate"], "target", loaded=t.medians.get("loaded"),
              note=f"{int(res.runs.sum())} runs over {int(np.count_nonzero(res.runs_per_size))} sizes, "
                   f"std {res.std:.2e}")


def compare(quick: bool = False, options=None) -> None:
    """Print one table: each case's numtk median beside its target (mixture.md section 13) or its SciPy
    anchor, and the ratio target-or-anchor / numtk (> 1: numtk within the target, or faster)."""
    from numtk._lib._workers import available_cores

    repeat = 3 if quick else 5
    if options is not None and getattr(options, "repeat", None):
        repeat = min(options.repeat, repeat)
    print("== mixture ==")
    from numtk._lib._optional import has_module

    held = has_module("threadpoolctl")
    print(f"Targets: mixture.md section 13, for one core, float64. Here: {available_cores()} of {os.cpu_count()} "
          f"cores usable, load average {os.getloadavg()[0]:.1f}. Every contestant runs with BLAS held to one "
          f"thread{'' if held else ' (NOT held: threadpoolctl is missing)'} and numtk with workers=1; "
          "'as loaded' is numtk once more as a user calls it (BLAS threads as loaded). Medians of interleaved "
          "repetitions; ratio = target or anchor time / numtk time (> 1: within the target, or faster).")
    if quick:
        print("Quick: 100 of the replication's 4,500 grid starts (times scaled by 45, marked *); the "
              "RegMix-size problem at R = 200 (5 sizes x 40 mixtures) with 8 starts, without a target; "
              f"{repeat} repetitions.")
    table = _Table()
    _chinchilla(table, quick, repeat)
    _, X, y = mixture_problem()
    _camel_case(table, "MixtureLaw('camel').fit, R = 5 x 20, M = V = 5, 32 starts", "camel", X, y, n_starts=32,
                repeat=repeat)
    if quick:
        _, X, y = mixture_problem(17, 13, 5, 40)
        _camel_case(table, "MixtureLaw('camel').fit, R = 5 x 40, M = 17, V = 13, 8 starts", "regmix", X, y,
                    n_starts=8, repeat=1, target=False, loaded=False)
    else:
        _, X, y = mixture_problem(17, 13, 5, 200)
        _camel_case(table, "MixtureLaw('camel').fit, R = 5 x 200, M = 17, V = 13, 32 starts", "regmix", X, y,
                    n_starts=32, repeat=1, loaded=False)
        real = regmix_problem()
        if real is not None:
            _camel_case(table, "  RegMix's 1M + 60M runs (R = 1,024), E fixed at 0", "regmix", *real,
                        n_starts=32, repeat=1, fixed={"E": 0.0}, anchor=False, loaded=False)
    _predict(table, quick, repeat)
    _optimal(table, quick, repeat)
    _allocate(table, quick, repeat)
    table.print()
