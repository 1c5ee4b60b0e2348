"""The PSRO demonstration (``python -m numtk demo psro``): every variant on Kuhn and Leduc poker.

Prints the Population Exploitability (exact, by LP) and the exploitability of each variant's
reported meta-strategy against population size, and the exact values of the games. With
``--plot FILE`` saves PE curves against population size (needs matplotlib).
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["run", "run_variants"]

_VARIANTS = (("psro", "nash"), ("psro", "uniform"), ("psro_rn", "nash"), ("anytime", "nash"), ("global", "nash"))


def run_variants(game, max_policies: int, *, n_candidates: int = 8, rng: int = 0, progress: bool = False):
    """Run each PSRO variant to ``max_policies`` members; returns {label: (Result, seconds)}."""
    from numtk.games import psro

    runs = {}
    for variant, meta in _VARIANTS:
        label = variant if meta == "nash" else f"{variant}-{meta}"
        t0 = time.perf_counter()
        res = psro(game, variant=variant, meta_solver=meta, iterations=4 * max_policies, n_candidates=n_candidates,
                   rng=rng, progress=progress, options={"max_policies": max_policies})
        runs[label] = (res, time.perf_counter() - t0)
    return runs


def _at(res, size: int) -> tuple[float, float]:
    sizes = res.history["population_size"]
    idx = np.flatnonzero(sizes <= size)
    j = idx[-1] if idx.size else 0
    return float(res.history["pe"][j]), float(res.history["exploitability"][j])


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """PSRO, PSRO-uniform, PSRO-rN, anytime PSRO and Global PSRO on Kuhn and Leduc.

    Returns one table row per (game, variant) with the PE at the final population size and the time.
    """
    from numtk.games import KuhnPoker, LeducPoker, exploitability, nash_equilibrium

    rows, curves = [], {}
    budgets = {"Kuhn": 12, "Leduc": 12 if quick else 30}
    for name, game in (("Kuhn", KuhnPoker()), ("Leduc", LeducPoker())):
        t0 = time.perf_counter()
        ne = nash_equilibrium(game)
        out(f"{name} poker: value {ne.value:.12f} (LP, {time.perf_counter() - t0:.2f} s); "
            f"uniform policy exploitability {exploitability(game, game.uniform_policy()):.12f}")
        budget = budgets[name]
        runs = run_variants(game, budget)
        sizes = [s for s in (2, 4, 6, 8, 10, 12, 20, 30) if s <= budget]
        out(f"  PE (NashConv/2) by population size: {'  '.join(f'n={s:<3d}' for s in sizes)}")
        for label, (res, secs) in runs.items():
            pes = [_at(res, s)[0] for s in sizes]
            out(f"  {label:<14} " + "  ".join(f"{p:.4f}" for p in pes) + f"   ({secs:.1f} s, {res.status})")
            curves[(name, label)] = res
            final = res.history["pe"][-1]
            rows.append({"area": "games", "method": f"{label} on {name}", "n": int(res.history['population_size'][-1]),
                         "result": f"PE={final:.4f}", "vs anchor": "exact LP", "speed": f"{secs:.1f} s"})
    if plot:
        _plot(curves, plot)
        out(f"figure saved to {plot}")
    return rows


def _plot(curves: dict, path: str) -> None:
    from numtk._lib._optional import pyplot

    plt = pyplot()

    games = sorted({g for g, _ in curves})
    fig, axes = plt.subplots(1, len(games), figsize=(5 * len(games), 3.6), squeeze=False)
    for ax, g in zip(axes[0], games):
        for (gg, label), res in curves.items():
            if gg == g:
                ax.plot(res.history["population_size"], res.history["pe"], marker=".", label=label)
        lowest = min(float(res.history["pe"].min()) for (gg, _), res in curves.items() if gg == g)
        if lowest > 0:
            ax.set_yscale("log")
        else:
            ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_xlabel("population size")
        ax.set_ylabel("population exploitability")
        ax.set_title(f"{g} poker")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
