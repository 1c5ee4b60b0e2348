"""The RL-oracle PSRO demonstration, run by ``python -m numtk demo psro-rl`` and the tour (Kuhn poker).

Four runs of :func:`numtk.games.psro` from the uniform policy: PSRO with the Nash meta-solver and Global PSRO, each
with the exact best-response oracle and with the deep-RL oracles of :mod:`numtk.torch.psro_oracle`
(:class:`RLBestResponseOracle` for PSRO-Nash, :class:`ConditionalBROracle` for Global PSRO's exploration and rollout
responses). Every oracle call of the RL runs trains for the same number of environment steps, so a member of either
RL run costs the same budget (Global PSRO adds two members an iteration from two calls). The Population
Exploitability of each population is computed exactly by numtk.games (an LP) in the exploitability convention
(NashConv / 2, as OpenSpiel's ``exploitability``), and read against the population size.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import numpy_rng, torch_threads

__all__ = ["demo", "run", "plot_pe", "RUNS"]

#: the runs: name -> (variant, oracle kind)
RUNS = {"psro_exact": ("psro", "exact"), "global_exact": ("global", "exact"), "psro_rl": ("psro", "rl"),
        "global_rl": ("global", "conditional")}
_LABELS = {"psro_exact": "PSRO-Nash, exact BR", "global_exact": "Global PSRO, exact BR",
           "psro_rl": "PSRO-Nash, RL oracle (PPO)", "global_rl": "Global PSRO, conditional RL oracle"}
DEFAULT_STEPS, QUICK_STEPS = 20000, 8000
DEFAULT_MEMBERS, QUICK_MEMBERS = 9, 7
LR = 1e-3


def _games(name: str):
    from numtk.games import KuhnPoker, LeducPoker

    return {"kuhn": KuhnPoker, "leduc": LeducPoker}[name]()


@constraints(steps="count", rng="rng", progress="bool", members="int>=2", game="option", hidden="any")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, members: int = DEFAULT_MEMBERS,
         game: str = "kuhn", hidden: Any = (128, 128, 128)) -> Any:
    """PSRO-Nash and Global PSRO with exact and with RL oracles: the exact PE of every population.

    Parameters
    ----------
    steps : int, optional
        Environment steps per RL oracle call (default 20000; the tour runs 8000).
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Seeds the four runs (each gets the same seed: the same Dirichlet draws where they coincide).
    progress : bool, default False
        Print nothing; reserved for a progress bar over the runs (one line per finished run when True).
    members : int, default 9
        Population size to reach (odd: Global PSRO adds two members an iteration).
    game : {'kuhn', 'leduc'}, default 'kuhn'
        The game.
    hidden : sequence of int, default (128, 128, 128)
        The RL oracles' layer widths.

    Returns
    -------
    Result
        metrics : dict
            ``steps``, ``members``, ``game``, ``convention`` ('exploitability': NashConv / 2) and per run a dict:
            ``final_pe``, ``final_size``, ``env_steps`` (RL runs: all calls together; 0 for exact ones) and
            ``seconds``; ``sizes`` (population sizes both RL runs reached) and
            ``global_lower`` (those sizes at which Global PSRO's PE is below PSRO-Nash's, RL oracles).
        history : dict of lists
            Per run ``<run>/size``, ``<run>/pe`` (one entry per population, the initial one first) and, for the
            RL runs, ``<run>/env_steps`` (cumulative steps when that population was reached).
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch._demo_psro_oracle import demo
    >>> res = demo(steps=2000, members=3, hidden=(32,))
    >>> res.history["psro_exact/size"], [round(v, 4) for v in res.history["psro_exact/pe"]]
    ([1, 2, 3], [0.4583, 0.3056, 0.1667])
    >>> res.history["psro_rl/pe"][0] == res.history["global_rl/pe"][0] == 11 / 24   # the uniform policy
    True
    """
    from numtk._lib import Result
    from numtk._lib._validation import check_bool, check_int, check_option
    from numtk.games import psro
    from numtk.torch._psro_oracle import ConditionalBROracle, RLBestResponseOracle, _check_hidden

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=1, maximum=10**8)
    members = check_int(members, "members", minimum=2, maximum=200)
    progress = check_bool(progress, "progress")
    game_name = check_option(game, "game", ("kuhn", "leduc"))
    hidden = _check_hidden(hidden)
    seed = int(numpy_rng(rng).integers(2**31 - 1))
    g = _games(game_name)
    t0 = time.perf_counter()
    metrics: dict = {"steps": steps, "members": members, "game": game_name, "convention": "exploitability"}
    history: dict = {}
    with torch_threads(1):
        for name, (variant, kind) in RUNS.items():
            iterations = members - 1 if variant == "psro" else (members - 1 + 1) // 2
            oracle: Any = "exact"
            if kind == "rl":
                oracle = RLBestResponseOracle(hidden=hidden, steps=steps, lr=LR)
            elif kind == "conditional":
                oracle = ConditionalBROracle(latent_size=members + 1, hidden=hidden, steps=steps, lr=LR)
            log = [0]

            def callback(res, oracle=oracle, log=log):   # called once per population after the initial one
                log.append(0 if oracle == "exact" else oracle.env_steps_)

            t1 = time.perf_counter()
            res = psro(g, variant=variant, oracle=oracle, iterations=iterations, rng=seed, callback=callback,
                       options={"max_policies": members})
            seconds = time.perf_counter() - t1
            size = res.history["population_size"].tolist()
            pe = [float(v) for v in res.history["pe"]]
            history[f"{name}/size"] = size
            history[f"{name}/pe"] = pe
            if oracle != "exact":
                history[f"{name}/env_steps"] = log
            metrics[name] = {"final_pe": pe[-1], "final_size": size[-1],
                             "env_steps": 0 if oracle == "exact" else int(oracle.env_steps_),
                             "seconds": seconds}
            if progress:
                print(f"{name}: PE {pe[-1]:.4f} at {size[-1]} members, {seconds:.1f} s")
    a = dict(zip(history["psro_rl/size"], history["psro_rl/pe"]))
    b = dict(zip(history["global_rl/size"], history["global_rl/pe"]))
    sizes = sorted(set(a) & set(b) - {1})
    metrics["sizes"] = sizes
    metrics["global_lower"] = [s for s in sizes if b[s] < a[s]]
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t0)


def plot_pe(res: Any, path: str) -> None:
    """PE against the population size, the four runs (log scale, zeros drawn at the axis floor)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    styles = {"psro_exact": ("C0", "--"), "global_exact": ("C3", "--"), "psro_rl": ("C0", "-"),
              "global_rl": ("C3", "-")}
    floor = 1e-3
    for name in RUNS:
        c, ls = styles[name]
        pe = np.maximum(np.asarray(res.history[f"{name}/pe"]), floor)
        ax.plot(res.history[f"{name}/size"], pe, color=c, ls=ls, marker="o", ms=3, label=_LABELS[name])
    ax.set_yscale("log")
    ax.set_xlabel("population size (oracle responses)")
    ax.set_ylabel("population exploitability (NashConv / 2)")
    m = res.metrics
    ax.set_title(f"{m['game'].capitalize()} poker, {m['steps']} environment steps per RL oracle call", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Print the demonstration's table (quick: 8000 steps a call, 7 members; else 20000 and 9).

    Returns one row for ``python -m numtk demo``'s summary: Global PSRO's PE with the conditional oracle at the
    largest population size, beside PSRO-Nash's with the RL oracle (and both runs' exact-oracle values).
    """
    steps, members = (QUICK_STEPS, QUICK_MEMBERS) if quick else (DEFAULT_STEPS, DEFAULT_MEMBERS)
    res = demo(steps=steps, members=members)
    h, m = res.history, res.metrics
    out(f"Kuhn poker, PSRO from the uniform policy to {members} members; RL oracles: PPO, {steps} environment steps "
        f"a call; PE exact (numtk.games LP), exploitability = NashConv / 2")
    sizes = sorted(set(h["psro_exact/size"]) | set(h["global_exact/size"]) | set(h["psro_rl/size"])
                   | set(h["global_rl/size"]))
    out(f"  {'members':>7} " + " ".join(f"{_LABELS[n]:>36}" for n in RUNS))
    for s in sizes:
        cells = []
        for n in RUNS:
            d = dict(zip(h[f"{n}/size"], h[f"{n}/pe"]))
            cells.append(f"{d[s]:>36.4f}" if s in d else f"{'-':>36}")
        out(f"  {s:>7} " + " ".join(cells))
    out(f"  RL runs: PSRO-Nash {m['psro_rl']['env_steps']} steps in {m['psro_rl']['seconds']:.1f} s, Global PSRO "
        f"{m['global_rl']['env_steps']} steps in {m['global_rl']['seconds']:.1f} s; Global PSRO (RL) lower at "
        f"{m['global_lower']} of the sizes {m['sizes']}")
    if plot:
        plot_pe(res, plot)
        out(f"figure saved to {plot}")
    k = m["members"] if m["members"] in m["sizes"] else max(m["sizes"])
    pe = {n: dict(zip(h[f"{n}/size"], h[f"{n}/pe"])) for n in RUNS}
    return [{"area": "torch", "method": f"Global PSRO, conditional RL oracle (Kuhn, {steps} steps a call)",
             "n": k, "result": f"PE {pe['global_rl'][k]:.4f} at {k} members (exact: {pe['global_exact'][k]:.4f})",
             "vs anchor": f"PSRO-Nash, RL oracle: PE {pe['psro_rl'][k]:.4f} (exact: {pe['psro_exact'][k]:.4f})",
             "speed": f"{m['global_rl']['env_steps'] + m['psro_rl']['env_steps']} env steps, "
                      f"{m['global_rl']['seconds'] + m['psro_rl']['seconds']:.1f} s"}]
