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
