"""The Kendall demonstration used by ``python -m numtk tour`` and ``python -m numtk demo kendall``."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["run"]


def _best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(*, quick: bool = True, out=print) -> list[dict]:
    """Compare numtk.stats.kendall_tau with scipy.stats.kendalltau on seeded data.

    Returns one row per dataset: the largest relative difference of statistic and p-value, and the
    speed ratios SciPy time / numtk time (best of three runs; one thread, then all cores).
    """
    import scipy.stats

    from numtk.stats import kendall_tau

    n = 1_000_000 if quick else 10_000_000
    rng = np.random.default_rng(20261129)
    x = rng.standard_normal(n)
    datasets = {
        "continuous": (x, 0.5 * x + rng.standard_normal(n)),
        "ties (ints 0..99)": (rng.integers(0, 100, n), rng.integers(0, 100, n)),
    }
    rows = []
    for name, (a, b) in datasets.items():
        ours = kendall_tau(a, b)
        ref = scipy.stats.kendalltau(a, b)
        diff = max(abs(float(ours.statistic) - float(ref.statistic)) / max(abs(float(ref.statistic)), 1e-300),
                   abs(float(ours.pvalue) - float(ref.pvalue)) / max(abs(float(ref.pvalue)), 1e-300))
        repeat = 3
        t_ours = _best_of(lambda: kendall_tau(a, b), repeat)
        t_all = _best_of(lambda: kendall_tau(a, b, workers=-1), repeat)
        t_ref = _best_of(lambda: scipy.stats.kendalltau(a, b), repeat)
        rows.append({
            "area": "stats",
            "method": f"kendall_tau, {name}",
            "n": n,
            "result": f"tau={float(ours.statistic):.6f}",
            "vs anchor": f"rel.diff {diff:.1e} (SciPy)",
            "speed": f"{t_ref / t_ours:.1f}x SciPy ({t_ref / t_all:.1f}x, all cores)",
        })
        out(f"kendall_tau on {name}, n={n}: tau={float(ours.statistic):.12f} p={float(ours.pvalue):.6g}; "
            f"SciPy tau={float(ref.statistic):.12f} p={float(ref.pvalue):.6g}; "
            f"numtk {t_ours * 1e3:.1f} ms ({t_all * 1e3:.1f} ms with workers=-1), SciPy {t_ref * 1e3:.1f} ms")
    return rows
