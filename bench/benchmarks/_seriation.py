"""Seriation benchmark inputs and the side-by-side run shared by asv and ``bench/compare.py``."""

import sys

from benchmarks._timing import interleaved

#: Curves of the seriation benchmarks: (kind, noise) in d = 100.
CURVES = {"helix": ("helix", 0.05), "random_fourier": ("random_fourier", 0.02)}
DIM = 100
#: A method whose first call takes longer than this many seconds is not repeated.
SLOW = 60.0
#: Largest n at which each baseline runs in ``compare`` (brute-force k-NN in d = 100 and, for Recanati, a
#: second graph): beyond, a cell shows "-".
MAX_N = {"recanati": 10**4}


#: The issue's hard cases: close spiral arms, a high-noise helix, uneven sampling density (the density
#: along the curve rises linearly from 0.1 to 1.9 times the mean): (kind, noise, params, uneven).
HARD_CURVES = {
    "close_spiral": ("spiral", 0.01, {"turns": 4.0, "gap": 0.3}, False),
    "noisy_helix": ("helix", 0.15, None, False),
    "uneven_helix": ("helix", 0.05, None, True),
}


def make_points(n, curve, seed=20261129):
    import numpy as np

    from numtk.seriation import make_curve

    if curve in CURVES:
        kind, noise = CURVES[curve]
        return make_curve(kind, n, DIM, noise=noise, rng=seed)
    kind, noise, params, uneven = HARD_CURVES[curve]
    if not uneven:
        return make_curve(kind, n, DIM, noise=noise, params=params, rng=seed)
    # thin a 2n-point uniform sample with keep-probability (0.1 + 1.8 t) / 1.9 (t in [0, 1]), keep n of them
    X, t = make_curve(kind, 2 * n + 200, DIM, noise=noise, params=params, rng=seed)
    rng = np.random.default_rng(seed + 1)
    s = (t - t.min()) / (t.max() - t.min())
    keep = np.flatnonzero(rng.random(len(t)) < (0.1 + 1.8 * s) / 1.9)[:n]
    return X[keep], t[keep]


def _spectral_on_projection(X):
    """Spectral seriation of the same principal projection that ``stage`` makes by default ('auto')."""
    from numtk.seriation import spectral_seriation
    from numtk.seriation._stage import _principal_basis

    basis = _principal_basis(X, "auto", False)
    P = X if basis is None else (X - X.mean(axis=0)) @ basis
    return spectral_seriation(P)


def methods(extra=False):
    """name -> callable(X) -> Result. ``stage`` with its defaults and a fixed ``rng`` (reproducible |tau|).

    ``extra`` adds ``stage w-1`` (all cores) and ``spectral pca`` (spectral seriation of the principal
    projection that stage makes, to show what the projection alone buys the baseline).
    """
    from numtk.seriation import recanati_seriation, spectral_seriation, stage

    out = {"stage": lambda X: stage(X, rng=0), "spectral": spectral_seriation, "recanati": recanati_seriation}
    if extra:
        out["stage w-1"] = lambda X: stage(X, rng=0, workers=-1)
        out["spectral pca"] = _spectral_on_projection
    return out


def compare(sizes, curves=tuple(CURVES), out=print, repeat=3, extra=False):
    """Median time and |tau| of every method per (curve, n), interleaved.

    Each of ``repeat`` rounds calls every method once, starting with a different one each round, so that
    changes of machine load hit all methods alike; a method whose first call took more than ``SLOW``
    seconds runs once. Returns the rows as dicts.
    """
    from numtk.seriation import order_agreement

    fns = methods(extra)
    names = list(fns)
    out(f"\n== seriation (d = {DIM}): median seconds of {repeat} interleaved rounds and |tau| against the "
        "true order")
    X0, _ = make_points(300, curves[0])
    for fn in fns.values():  # warm-up: imports and first-call costs are not timed
        fn(X0)
    out(f"{'curve':<16}{'n':>8}  " + "  ".join(f"{m + ' s':>15}{m + ' tau':>17}" for m in names)
        + "  stage/spectral time")
    rows = []
    for curve in curves:
        for n in sizes:
            X, t = make_points(n, curve)
            active = [m for m in names if n <= MAX_N.get(m, n)]
            timing = interleaved({m: (lambda m=m: fns[m](X)) for m in active}, repeat, warmup=False, max_single=SLOW)
            times = timing.medians
            tau = {m: order_agreement(res.order, t) for m, res in timing.results.items()}
            cells = [f"{times[m]:>15.3f}{tau[m]:>17.5f}" if m in times else f"{'-':>15}{'-':>17}" for m in names]
            ratio = times["stage"] / times["spectral"] if "spectral" in times else float("nan")
            out(f"{curve:<16}{n:>8}  " + "  ".join(cells) + f"  {ratio:>10.2f}x")
            sys.stdout.flush()
            rows.append(dict(curve=curve, n=n, times=times, tau=tau))
    return rows


def compare_hard(sizes, out=print, repeat=3):
    """``bench/compare.py --seriation-hard``: :func:`compare` on the hard curves."""
    return compare(sizes, curves=tuple(HARD_CURVES), out=out, repeat=repeat)


# --------------------------------------------------------------------------------------------------
# Scaling in n: ``bench/compare.py --seriation-scaling``
# --------------------------------------------------------------------------------------------------

#: The scaling table's curves: make_curve's defaults in d = 100 with noise 0.05 per coordinate.
SCALING_CURVES = ("helix", "spiral")
SCALING_NOISE = 0.05
SCALING_SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000)
SCALING_QUICK = (10_000, 30_000, 100_000)
#: A baseline whose run took longer than this many seconds is not run at larger n.
SCALING_SLOW = 60.0


def noise_floor(kind, n=10_000, noise=SCALING_NOISE, dim=DIM):
    """|tau| of the order by position plus the along-tangent noise, in closed form (specification B1.5):
    1 - (4 r / sqrt(pi) - 2 r^2), r = noise / curve length."""
    import math

    from numtk.seriation import make_curve

    info = make_curve(kind, 10, dim, noise=noise, return_info=True, rng=0)[2]
    r = noise / info.length
    return 1.0 - (4.0 * r / math.sqrt(math.pi) - 2.0 * r * r)


def scaling_run(method, kind, n):
    """One cell of the scaling table, run in a fresh process by :func:`compare_scaling`: prints a JSON line with
    the seconds of the call (data generation and imports excluded), its CPU seconds (all threads; on a machine
    shared with other jobs the better measure of the work), |tau| and the solver's iterations."""
    import json
    import time

    from numtk.seriation import make_curve, order_agreement

    X, t = make_curve(kind, n, DIM, noise=SCALING_NOISE, rng=20261203)
    if method.startswith("stage"):
        from numtk.seriation import stage

        workers = 1 if method == "stage w1" else -1
        stage(X[:500], rng=0, workers=workers)  # warm-up: imports
        start, cpu = time.perf_counter(), time.process_time()
        res = stage(X, rng=0, workers=workers)
        extra = dict(nit=int(res.n_iter), kp=int(res.tangent_neighbors))
    elif method == "spectral":
        from numtk.seriation import spectral_seriation

        spectral_seriation(X[:500])
        start, cpu = time.perf_counter(), time.process_time()
        res = spectral_seriation(X)
        extra = {}
    else:  # umap
        from numtk.seriation import umap_seriation

        umap_seriation(X[:5000], rng=0)  # numba compilation (from 4096 points UMAP searches by NN-descent)
        start, cpu = time.perf_counter(), time.process_time()
        res = umap_seriation(X, rng=0)
        extra = {}
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps(dict(seconds=seconds, cpu=cpu, tau=float(order_agreement(res.order, t)), **extra)))


def _peak_rss_cell(method, kind, n):
    """(result of :func:`scaling_run` in a child process, that process's peak resident set size in GiB), or
    (None, None) when it failed."""
    import json
    import os
    import subprocess

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import json, resource\n"
            "from benchmarks._seriation import scaling_run\n"
            f"scaling_run({method!r}, {kind!r}, {n})\n"
            "print(json.dumps(dict(rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True)
    lines = [line for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(lines) < 2:
        return None, None
    cell = json.loads(lines[-2])
    return cell, json.loads(lines[-1])["rss"] / 2**20  # ru_maxrss is in KiB on Linux


def _slope(ns, secs):
    """Least-squares slope of log(seconds) against log(n)."""
    import numpy as np

    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log(secs), 1)[0])


def compare_scaling(quick=False, out=print, sizes=None):
    """``bench/compare.py --seriation-scaling``: seconds, |tau|, CG iterations and peak memory of ``stage`` (all
    cores) against n, each run in a fresh process, beside spectral seriation and 1-D UMAP (when umap-learn is
    installed) while they finish within ``SCALING_SLOW`` seconds; then the fitted exponent of each method's time
    (log-log slope). ``quick``: n up to 1e5; otherwise up to 1e6 (minutes)."""
    from numtk._lib._optional import has_module

    sizes = sizes or (SCALING_QUICK if quick else SCALING_SIZES)
    names = ["stage", "spectral"] + (["umap"] if has_module("umap") else [])
    out(f"\n== seriation scaling (d = {DIM}, noise {SCALING_NOISE}, make_curve defaults; stage with workers=-1): "
        "one run per cell in a fresh process; peak RSS of that process")
    out(f"{'curve':<8}{'n':>9}{'floor':>9}  {'stage s':>9}{'cpu s':>9}{'tau':>9}{'CG it':>7}{'k_p':>7}{'GiB':>6}  "
        + "".join(f"{m + ' s':>13}{'tau':>9}{'GiB':>6}" for m in names[1:]))
    rows = []
    for kind in SCALING_CURVES:
        floor = noise_floor(kind)
        done = {m: [] for m in names}
        cpu = {m: [] for m in names}
        skip = set()
        for n in sizes:
            cells = {}
            for m in names:
                if m in skip:
                    continue
                cell, rss = _peak_rss_cell(m, kind, n)
                if cell is None:
                    skip.add(m)
                    continue
                cell["rss"] = rss
                cells[m] = cell
                done[m].append((n, cell["seconds"]))
                cpu[m].append((n, cell["cpu"]))
                if cell["seconds"] > SCALING_SLOW:
                    skip.add(m)
            st = cells.get("stage")
            line = f"{kind:<8}{n:>9}{floor:>9.5f}  "
            line += (f"{st['seconds']:>9.2f}{st['cpu']:>9.2f}{st['tau']:>9.5f}{st['nit']:>7}{st['kp']:>7}"
                     f"{st['rss']:>6.2f}  " if st else f"{'-':>9}{'-':>9}{'-':>9}{'-':>7}{'-':>7}{'-':>6}  ")
            for m in names[1:]:
                c = cells.get(m)
                line += f"{c['seconds']:>13.2f}{c['tau']:>9.5f}{c['rss']:>6.2f}" if c else f"{'-':>13}{'-':>9}{'-':>6}"
            out(line)
            sys.stdout.flush()
            rows.append(dict(curve=kind, n=n, floor=floor, cells=cells))
        slopes = "  ".join(f"{m} {_slope(*zip(*done[m])):.2f} (n {done[m][0][0]:.0e}-{done[m][-1][0]:.0e})"
                           for m in names if len(done[m]) >= 2)
        out(f"{kind:<8} fitted exponent of time in n: {slopes}")
        slopes = "  ".join(f"{m} {_slope(*zip(*cpu[m])):.2f}" for m in names if len(cpu[m]) >= 2)
        out(f"{kind:<8} fitted exponent of CPU time in n: {slopes}")
    return rows
