"""The STAGE demonstration used by ``python -m numtk tour`` and ``python -m numtk demo stage``."""

from __future__ import annotations

import time

__all__ = ["run"]


def run(*, quick: bool = True, out=print) -> list[dict]:
    """STAGE against the spectral and Recanati baselines on noisy synthetic curves and krumsiek11.

    Returns one table row per (data, method): |Kendall tau| with the true order and the time.
    """
    import numpy as np

    from numtk.datasets import load_krumsiek11
    from numtk.seriation import make_curve, order_agreement, recanati_seriation, spectral_seriation, stage

    n = 2000 if quick else 10_000
    cases = [
        ("helix, d=50, noise 0.05", *make_curve("helix", n, 50, noise=0.05, rng=0)),
        ("random_fourier, d=100, noise 0.02", *make_curve("random_fourier", n, 100, noise=0.02, rng=1)),
    ]
    methods = {"stage": stage, "spectral_seriation": spectral_seriation, "recanati_seriation": recanati_seriation}
    rows = []
    for name, X, t in cases:
        for label, method in methods.items():
            t0 = time.perf_counter()
            res = method(X)
            elapsed = time.perf_counter() - t0
            tau = order_agreement(res.order, t)
            out(f"{label:<20} on {name:<34} n={n}: |tau| = {tau:.5f}  ({elapsed:.2f} s)")
            rows.append({"area": "seriation", "method": f"{label}, {name}", "n": n, "result": f"|tau|={tau:.4f}",
                         "vs anchor": "truth t", "speed": f"{elapsed:.2f} s"})
    # krumsiek11: progenitors plus one lineage form a path; the simulation step is the truth
    data = load_krumsiek11()
    for lineage in ("Mo", "Ery", "Mk", "Neu"):
        keep = data.fate == lineage
        X, step = data.X[keep], data.step[keep]
        line = []
        for label, method in methods.items():
            res = method(X, n_neighbors=10)
            line.append(f"{label} {order_agreement(res.order, step):.3f}")
        out(f"krumsiek11 lineage {lineage:<4} (n={int(keep.sum())}): |tau| " + ", ".join(line))
    return rows
