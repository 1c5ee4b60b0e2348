"""Seriation benchmark inputs and the side-by-side run shared by asv and ``bench/compare.py``."""

import time

#: Curves of the seriation benchmarks: (kind, noise) in d = 100.
CURVES = {"helix": ("helix", 0.05), "random_fourier": ("random_fourier", 0.02)}
DIM = 100


def make_points(n, curve, seed=20261129):
    from numtk.seriation import make_curve

    kind, noise = CURVES[curve]
    return make_curve(kind, n, DIM, noise=noise, rng=seed)


def methods():
    from numtk.seriation import recanati_seriation, spectral_seriation, stage

    return {"stage": stage, "spectral": spectral_seriation, "recanati": recanati_seriation}


def compare(sizes, curves=tuple(CURVES), out=print):
    """Time and |tau| of every method per (curve, n), one call each (they are seconds long)."""
    from numtk.seriation import order_agreement

    out(f"\n== seriation (d = {DIM}): seconds and |tau| against the true order, one run each")
    names = list(methods())
    X0, _ = make_points(300, curves[0])
    for fn in methods().values():  # warm-up: imports and first-call costs are not timed
        fn(X0)
    out(f"{'curve':<16}{'n':>8}  " + "  ".join(f"{m + ' s':>11}{m + ' tau':>14}" for m in names)
        + "  stage/spectral time")
    for curve in curves:
        for n in sizes:
            X, t = make_points(n, curve)
            cells, times = [], {}
            for name, fn in methods().items():
                t0 = time.perf_counter()
                res = fn(X)
                times[name] = time.perf_counter() - t0
                cells.append(f"{times[name]:>11.2f}{order_agreement(res.order, t):>14.5f}")
            out(f"{curve:<16}{n:>8}  " + "  ".join(cells) + f"  {times['stage'] / times['spectral']:>10.2f}x")
    return None
