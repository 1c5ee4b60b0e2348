"""FTT benchmark problems and the side-by-side run shared by asv and ``bench/compare.py``.

Contestants on the identical random functional tensor train (orthonormal Legendre on [-1, 1]^d):

- ``numtk``: :meth:`numtk.ftt.FunctionalTT.evaluate` (one compiled prefix/suffix pass for values,
  gradient and Laplacian), on one thread and with ``workers=-1`` (all cores, as BLAS uses them in the
  reference);
- ``numpy-einsum``: the dense NumPy reference (Legendre recurrences vectorised over the points, the
  ``G_k = Phi_k C_k`` products as BLAS GEMMs, prefix/suffix products and contractions by einsum).

Cross interpolation (``CROSS_CASE``): :func:`numtk.ftt.tt_cross` against ``teneva.cross`` (maxvol cross on
the same Chebyshev-Lobatto grid) for a ridge function plus a product (TT rank <= 3): time, number of
function evaluations, ranks and the error on random grid points.

ALS against ``teneva.als`` (:func:`compare_teneva_als`): one sweep and ten on the same grid rows from the same
constant-mean start, with the relative error of both on held-out grid points.

Spec targets (sampling.md §7): evaluation at M = 1e5, d = 32, n = 16, r = 4 at least 5x faster than the
reference; one ALS sweep at M = 2e4, d = 32, n = 12, r <= 4 within 2 s.
"""

import numpy as np

from benchmarks._timing import interleaved

#: (M, d, n, r) of the evaluation comparison; (M, d, n, r) of the ALS sweep.
EVAL_CASE = (100_000, 32, 16, 4)
ALS_CASE = (20_000, 32, 12, 4)
#: (d, n) of the cross comparison.
CROSS_CASE = (10, 16)


def cross_function(X):
    """A ridge function (rank 2) plus a product (rank 1): TT rank <= 3 at every bond."""
    return np.sin(X @ np.linspace(1.0, 0.4, X.shape[1])) + 0.3 * np.prod(1 + 0.2 * X, axis=1)


def numtk_cross(d, n):
    from numtk.ftt import tt_cross

    return tt_cross(cross_function, d, degree=n - 1, domain=[[-1.0, 1.0]] * d, tol=1e-10, rng=0)


def teneva_cross(d, n):
    import teneva

    from numtk.ftt import interpolation_nodes

    nodes = interpolation_nodes("legendre", n - 1, (-1.0, 1.0))
    info = {}
    Y = teneva.cross(lambda I: cross_function(nodes[I]), teneva.rand([n] * d, 1, seed=0), m=200_000, e=1e-10,
                     nswp=20, dr_max=2, info=info)
    return Y, info, nodes


def make_tt(d, n, r, seed=20261130):
    """Random cores (scaled so values stay O(1)) of a rank-r FTT with n Legendre functions per coordinate."""
    rng = np.random.default_rng(seed)
    ranks = [1] + [r] * (d - 1) + [1]
    cores = []
    for k in range(d):
        c = rng.normal(size=(ranks[k], n, ranks[k + 1])) * 0.3 / np.sqrt(n * ranks[k])
        c[:, 0, :] += np.eye(ranks[k], ranks[k + 1])
        cores.append(c)
    return cores


def numtk_tt(cores, workers=1):
    from numtk.ftt import FunctionalTT

    d = len(cores)
    return FunctionalTT.from_cores(cores, "legendre", cores[0].shape[1] - 1, domain=[[-1.0, 1.0]] * d,
                                   workers=workers)


def _legendre_numpy(x, n):
    """Orthonormal Legendre values and derivatives on [-1, 1] by the three-term recurrences (NumPy)."""
    M = len(x)
    P = np.empty((n, M))
    D = np.empty((n, M))
    D2 = np.empty((n, M))
    P[0], D[0], D2[0] = 1.0, 0.0, 0.0
    if n > 1:
        P[1], D[1], D2[1] = x, 1.0, 0.0
    for k in range(1, n - 1):
        P[k + 1] = ((2 * k + 1) * x * P[k] - k * P[k - 1]) / (k + 1)
        D[k + 1] = D[k - 1] + (2 * k + 1) * P[k]
        D2[k + 1] = D2[k - 1] + (2 * k + 1) * D[k]
    c = np.sqrt(2 * np.arange(n) + 1.0)[:, None]
    return (c * P).T, (c * D).T, (c * D2).T


def numpy_evaluate(X, cores):
    """Values, gradient and Laplacian by dense NumPy (the reference contestant)."""
    M, d = X.shape
    G, G1, G2 = [], [], []
    for k, c in enumerate(cores):
        ra, n, rb = c.shape
        p, p1, p2 = _legendre_numpy(X[:, k], n)
        flat = np.moveaxis(c, 1, 0).reshape(n, ra * rb)
        G.append((p @ flat).reshape(M, ra, rb))
        G1.append((p1 @ flat).reshape(M, ra, rb))
        G2.append((p2 @ flat).reshape(M, ra, rb))
    left = [np.ones((M, 1))]
    for k in range(d):
        left.append(np.einsum("ma,mab->mb", left[-1], G[k]))
    right = [np.ones((M, 1))] * (d + 1)
    for k in range(d - 1, -1, -1):
        right[k] = np.einsum("mab,mb->ma", G[k], right[k + 1])
    grad = np.empty((M, d))
    lap = np.zeros(M)
    for k in range(d):
        grad[:, k] = np.einsum("ma,mab,mb->m", left[k], G1[k], right[k + 1])
        lap += np.einsum("ma,mab,mb->m", left[k], G2[k], right[k + 1])
    return left[d][:, 0], grad, lap


def numtk_evaluate(f, X):
    return f.evaluate(X, gradient=True, laplacian=True)


def als_problem(M, d, n, r, seed=7):
    """Samples of a rank-2 function (a sum of univariate terms) for the ALS sweep timing."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (M, d))
    y = np.sum(np.sin(X + 0.1 * np.arange(d)), axis=1)
    return X, y


def numtk_als_sweep(X, y, n, r, basis="legendre", workers=1):
    """One ALS sweep from the near-constant start (``init='random'``): the default additive start would add
    its own least-squares solve to the time (and fit this additive ``y`` before the sweep begins)."""
    from numtk.ftt import FunctionalTT

    return FunctionalTT(basis, degree=n - 1, ranks=r, domain=[[-1.0, 1.0]] * X.shape[1], workers=workers, sweeps=1,
                        rank_adaptive=False, init="random", rng=0).fit(X, y)


def als_grid_problem(M, d, n, seed=11):
    """The ALS sweep problem on the grid of n Chebyshev-Lobatto nodes per coordinate, for the comparison with
    ``teneva.als``: multi-indices ``I`` (teneva's data), points ``X = nodes[I]`` (numtk's: the same rows),
    values of the same sum of sines as :func:`als_problem`, and 2000 held-out grid points for the error.

    On n nodes, Legendre polynomials of degree n - 1 interpolate any nodal values, so a rank-r FunctionalTT
    restricted to the grid *is* a rank-r tensor train on it: both libraries fit the same model class to the
    same rows. teneva's one-hot basis makes each core's normal equations n independent r^2 x r^2 blocks;
    numtk's dense basis couples them into one (r n r) x (r n r) system."""
    from numtk.ftt import interpolation_nodes

    rng = np.random.default_rng(seed)
    nodes = interpolation_nodes("legendre", n - 1, (-1.0, 1.0))
    I, It = rng.integers(0, n, (M, d)), rng.integers(0, n, (2000, d))

    def f(X):
        return np.sum(np.sin(X + 0.1 * np.arange(X.shape[1])), axis=1)

    return nodes, I, f(nodes[I]), It, f(nodes[It])


def constant_start(d, n, r, mean, seed=0):
    """The constant-mean start of ``init='random'`` (rank-r cores: the constant function times ``mean`` plus
    1e-3 random padding) as Legendre coefficient cores, fixed by ``seed`` so both libraries get it."""
    rng = np.random.default_rng(seed)
    ranks = [1] + [r] * (d - 1) + [1]
    cores = []
    for k in range(d):
        c = 1e-3 * rng.standard_normal((ranks[k], n, ranks[k + 1]))
        c[0, 0, 0] += mean if k == 0 else 1.0
        cores.append(c)
    return cores


def numtk_als_grid(X, y, cores0, sweeps, workers=1):
    """``sweeps`` ALS sweeps of a fixed rank from ``cores0`` (tol = 0: no early stop)."""
    from numtk.ftt import FunctionalTT

    d, n = X.shape[1], cores0[0].shape[1]
    dom = [[-1.0, 1.0]] * d
    start = FunctionalTT.from_cores(cores0, "legendre", n - 1, domain=dom)
    return FunctionalTT("legendre", degree=n - 1, ranks=max(c.shape[2] for c in cores0), domain=dom,
                        sweeps=sweeps, tol=0.0, rank_adaptive=False, init=start, rng=0, workers=workers).fit(X, y)


def teneva_als_grid(nodes, I, y, cores0, sweeps):
    """``teneva.als`` from the same start: the Legendre cores' values at the nodes (its TT on the grid)."""
    import teneva

    from numtk.ftt import _basis

    n = len(nodes)
    V = _basis.evaluate(_basis.Basis1D("legendre", n, -1.0, 1.0), nodes)[0]  # (node, function)
    Y0 = [np.einsum("ji,aic->ajc", V, c) for c in cores0]
    from numtk._lib._workers import single_blas_thread

    with single_blas_thread():  # as numtk's sweeps: small solves on one BLAS thread
        return teneva.als(I, y, Y0, nswp=sweeps, e=-1.0, lamb=1e-10)


def compare_teneva_als(out=print, repeat=3, quick=False):
    """numtk's ALS against ``teneva.als`` on the same grid rows, from the same start: one sweep and ten."""
    M, d, n, r = ALS_CASE
    if quick:
        M = 5_000
    try:
        import teneva
    except ImportError:
        out("   teneva not installed: no ALS comparison")
        return {}
    nodes, I, y, It, yt = als_grid_problem(M, d, n)
    X, Xt = nodes[I], nodes[It]
    cores0 = constant_start(d, n, r, float(np.mean(y)))
    numtk_als_grid(X[:500, :3], y[:500], [c[:, :, :] for c in cores0[:2]] + [cores0[-1][:, :, :]], 1)  # warm-up
    out(f"-- ALS vs teneva.als, M = {M}, d = {d}, n = {n}, r = {r}: the same grid rows (n Chebyshev-Lobatto nodes "
        "per coordinate), the same constant-mean start")
    res = {}
    for sweeps in (1, 10):
        timing = interleaved({"numtk": lambda: numtk_als_grid(X, y, cores0, sweeps),
                              "teneva": lambda: teneva_als_grid(nodes, I, y, cores0, sweeps)},
                             repeat if sweeps == 1 else max(1, repeat // 2 + 1), warmup=False)
        t_n, t_t = timing.medians["numtk"], timing.medians["teneva"]
        scale = float(np.sqrt(np.mean(yt ** 2)))
        e_n = float(np.sqrt(np.mean((timing.results["numtk"].predict(Xt) - yt) ** 2))) / scale
        e_t = float(np.sqrt(np.mean((teneva.get_many(timing.results["teneva"], It) - yt) ** 2))) / scale
        out(f"   {sweeps:>2} sweep{'s' if sweeps > 1 else ' '}  numtk {t_n:6.2f} s  teneva {t_t:6.2f} s  "
            f"ratio teneva/numtk {t_t / t_n:5.2f}   rel. test error numtk {e_n:.2e}  teneva {e_t:.2e}")
        res.update({f"als{sweeps}_numtk_s": t_n, f"als{sweeps}_teneva_s": t_t, f"als{sweeps}_numtk_error": e_n,
                    f"als{sweeps}_teneva_error": e_t})
    return res


def compare(out=print, repeat=5, quick=False):
    """Print the evaluation speed-up over the NumPy reference and the ALS sweep time."""
    M, d, n, r = EVAL_CASE
    if quick:
        M = 20_000
    out("\n== ftt: FunctionalTT evaluation (values + gradient + Laplacian) and one ALS sweep")
    cores = make_tt(d, n, r)
    f = numtk_tt(cores)
    X = np.random.default_rng(1).uniform(-1, 1, (M, d))
    numtk_evaluate(f, X[:100])  # warm-up (imports)
    f_all = numtk_tt(cores, workers=-1)
    timing = interleaved({"numtk": lambda: numtk_evaluate(f, X), "numtk-all": lambda: numtk_evaluate(f_all, X),
                          "numpy": lambda: numpy_evaluate(X, cores)},
                         {"numtk": repeat, "numtk-all": repeat, "numpy": max(1, repeat // 2)}, warmup=False)
    t_n, t_all, t_r = (timing.medians[k] for k in ("numtk", "numtk-all", "numpy"))
    (v, g, lap), (vr, gr, lr) = timing.results["numtk"], timing.results["numpy"]
    err = max(np.max(np.abs(v - vr)) / np.max(np.abs(vr)), np.max(np.abs(g - gr)) / np.max(np.abs(gr)),
              np.max(np.abs(lap - lr)) / np.max(np.abs(lr)))
    from numtk.ftt import _ftt_ext

    isa = "AVX2 + FMA" if _ftt_ext.cpu_has_avx2_fma() else "baseline"
    out(f"-- evaluate, M = {M}, d = {d}, n = {n}, r = {r} (the reference's BLAS uses every core; numtk kernel: {isa})")
    out(f"   {'numtk (1 thread)':<22} {t_n * 1e3:10.1f} ms  ratio {t_r / t_n:6.1f}x")
    out(f"   {'numtk (workers=-1)':<22} {t_all * 1e3:10.1f} ms  ratio {t_r / t_all:6.1f}x (target >= 5x)")
    out(f"   {'numpy-einsum':<22} {t_r * 1e3:10.1f} ms  max rel. diff {err:.1e}")
    M, d, n, r = ALS_CASE
    if quick:
        M = 5_000
    Xa, ya = als_problem(M, d, n, r)
    numtk_als_sweep(Xa[:200, :3], ya[:200], n, r)  # warm-up
    out(f"-- ALS sweep, M = {M}, d = {d}, n = {n}, r = {r}")
    variants = [(basis, workers) for basis in ("legendre", "bspline") for workers in (1, -1)]
    timing = interleaved({v: (lambda v=v: numtk_als_sweep(Xa, ya, n, r, *v)) for v in variants},
                         max(1, repeat // 2), warmup=False)
    rows = timing.medians
    for basis in ("legendre", "bspline"):  # cubic B-splines: 4 non-zeros per basis row, assembled sparsely
        for workers in (1, -1):
            t, model = rows[basis, workers], timing.results[basis, workers]
            label = f"numtk ({basis}, {'1 thread' if workers == 1 else 'workers=-1'})"
            out(f"   {label:<32} {t:6.2f} s  val. RMSE {model.history_[-1]['val_rmse']:.2e}"
                + ("   (one sweep incl. basis set-up; target <= 2 s)" if (basis, workers) == ("legendre", 1) else ""))
    t_a, t_b = rows["legendre", 1], rows["bspline", 1]
    versus = compare_teneva_als(out, repeat=max(3, repeat // 2), quick=quick)
    d, n = CROSS_CASE
    out(f"-- cross interpolation, d = {d}, n = {n}: sin(a . x) + 0.3 prod(1 + 0.2 x) (TT rank <= 3)")
    It = np.random.default_rng(3).integers(0, n, (2000, d))
    try:
        import teneva
    except ImportError:
        teneva = None
    calls = {"numtk": lambda: numtk_cross(d, n)}
    if teneva is not None:
        calls["teneva"] = lambda: teneva_cross(d, n)
    timing = interleaved(calls, {"numtk": repeat, "teneva": max(1, repeat // 2)}, warmup=False)
    t_c, res = timing.medians["numtk"], timing.results["numtk"]
    tt = res.tt
    from numtk.ftt import interpolation_nodes

    grid = interpolation_nodes("legendre", n - 1, (-1.0, 1.0))
    exact = cross_function(grid[It])
    err_c = float(np.linalg.norm(tt.predict(grid[It]) - exact) / np.linalg.norm(exact))
    out(f"   {'numtk tt_cross':<22} {t_c * 1e3:10.1f} ms  {res.n_evals:>7} evaluations  "
        f"max rank {max(tt.ranks_)}  rel. error {err_c:.1e}")
    cross = {"cross_numtk_s": t_c, "cross_numtk_evals": res.n_evals, "cross_numtk_error": err_c}
    if teneva is None:
        out("   teneva not installed: no comparison")
    else:
        t_t, (Y, info, _) = timing.medians["teneva"], timing.results["teneva"]
        err_t = float(np.linalg.norm(teneva.get_many(Y, It) - exact) / np.linalg.norm(exact))
        out(f"   {'teneva.cross':<22} {t_t * 1e3:10.1f} ms  {info['m']:>7} evaluations  "
            f"max rank {max(teneva.ranks(Y))}  rel. error {err_t:.1e}  (time ratio {t_t / t_c:.1f}x)")
        cross.update(cross_teneva_s=t_t, cross_teneva_evals=info["m"], cross_teneva_error=err_t)
    return {**cross, **versus, "evaluate_numtk_s": t_n, "evaluate_numtk_all_cores_s": t_all, "evaluate_numpy_s": t_r,
            "evaluate_ratio": t_r / t_n, "evaluate_ratio_all_cores": t_r / t_all, "als_sweep_s": t_a,
            "als_sweep_bspline_s": t_b, "als_sweep_all_cores_s": rows["legendre", -1],
            "als_sweep_bspline_all_cores_s": rows["bspline", -1], "max_rel_diff": err}


if __name__ == "__main__":
    compare()
