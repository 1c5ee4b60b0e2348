"""The Hirsch demonstration, run by ``python -m numtk demo hirsch`` and the tour: the options agent against flat RL
and greedy search on n = 7 variables and degree d = 3.

Each method gets the same budget of environment steps on :class:`~numtk.torch.hirsch.HirschEnv` (shaped reward,
field Q, C(7, 3) + 5 = 40 steps per episode):

- ``options``: :class:`~numtk.torch.hirsch.OptionsAgent` (spine, then completion to a linear ideal; PPO on both
  GNN policies, REINFORCE on the spine length);
- ``flat``: :class:`~numtk.torch.hirsch.FlatAgent` (the same GNN, PPO on the primitive add/remove/stop actions);
- ``greedy``: :func:`~numtk.torch.hirsch.greedy_search` (linear-quotient extensions maximising the diameter, each
  candidate scored counting as a step).

Reported per method: the best diameter among the linear ideals reached, the environment steps it took, how many
distinct linear ideals were found and their diameters. No counterexample is expected (the conjecture is open, but
small cases are known to satisfy it): every linear ideal found must have diameter <= d.
"""

from __future__ import annotations

import math
import time
from typing import Any

from numtk._lib._constraints import constraints
from numtk.torch._common import numpy_rng
from numtk.torch._hirsch import EquivariantGNNPolicy, FlatAgent, HirschEnv, OptionsAgent, greedy_search

__all__ = ["demo", "run", "plot_search", "METHODS"]

#: the methods of the demonstration
METHODS = ("options", "flat", "greedy")
N, D, FIELD = 7, 3, "Q"
HIDDEN, LAYERS = 32, 2
DEFAULT_STEPS, QUICK_STEPS = 16000, 4000
_LABELS = {"options": "options agent (spine + complete, PPO)", "flat": "flat RL (same GNN, PPO on add/remove/stop)",
           "greedy": "greedy (linear-quotient extensions, max diameter)"}


@constraints(steps="count", rng="rng", progress="bool", n="int>=2", d="int>=1", field="option", methods="option")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, n: int = N, d: int = D,
         field: str = FIELD, methods: tuple[str, ...] = METHODS) -> Any:
    """The options agent, flat RL and greedy search at the same budget of environment steps.

    Parameters
    ----------
    steps : int, optional
        Environment steps per method (default 16000; the tour runs 4000).
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Seeds the policies' weights, the episodes and the greedy search.
    progress : bool, default False
        Show a progress bar over the methods.
    n : int, default 7
        Number of variables.
    d : int, default 3
        Degree of the generators.
    field : {"Q", "GF2"}, default "Q"
        Field of the linearity check.
    methods : tuple of str
        Among 'options', 'flat', 'greedy' (default: all three).

    Returns
    -------
    Result
        metrics : dict
            ``n``, ``d``, ``field``, ``steps``, ``methods``, ``max_linear_diameter`` (over every method's linear
            ideals), ``hirsch_holds`` (that maximum is <= d), ``counterexamples`` (their number, expected 0) and
            per method a dict: ``best_diameter``, ``steps_to_best``, ``n_linear``, ``linear_diameters`` (diameter
            -> distinct linear ideals), ``linear_at_bound`` (distinct linear ideals of diameter d), ``env_steps``,
            ``wall_time``, ``best_generators``; the options agent's also ``spine_length_probs`` (the high-level
            policy's final distribution over target spine lengths) and ``mean_spine`` (the spines' mean length
            in the last update).
        history : dict of lists
            Per method ``<method>/env_steps``, ``<method>/best_diameter`` and ``<method>/linear_at_bound`` (the
            search curves).
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.hirsch import demo
    >>> res = demo(steps=300, n=5, d=2, methods=("options", "greedy"))
    >>> res.metrics["hirsch_holds"], res.metrics["field"]
    (True, 'Q')
    >>> res.metrics["greedy"]["best_diameter"]              # Froeberg: linear edge ideals have diameter <= 2
    2.0
    """
    from numtk._lib import Result, progress_bar
    from numtk._lib._validation import check_bool, check_int, check_option

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=1, maximum=10**7)
    progress = check_bool(progress, "progress")
    field = check_option(field, "field", ("Q", "GF2"))
    if (not isinstance(methods, (tuple, list)) or not methods
            or not all(isinstance(m, str) and m in METHODS for m in methods)):
        raise ValueError(f"`methods` must be a non-empty tuple of names among {', '.join(map(repr, METHODS))}; "
                         f"got {methods!r}")
    methods = [m for m in METHODS if m in methods]
    env0 = HirschEnv(n, d, field=field)                     # checks n and d
    max_steps = env0.n_candidates + 5
    np_rng = numpy_rng(rng)
    seeds = [int(s) for s in np_rng.integers(0, 2**31 - 1, size=4)]
    t0 = time.perf_counter()
    metrics: dict[str, Any] = {"n": n, "d": d, "field": field, "steps": steps, "methods": methods}
    history: dict[str, list] = {}
    for m in progress_bar(methods, progress=progress, desc="hirsch demo"):
        env = HirschEnv(n, d, max_steps=max_steps, field=field, reward="shaped")
        if m == "options":
            agent = OptionsAgent(EquivariantGNNPolicy(HIDDEN, LAYERS, rng=seeds[0]),
                                 EquivariantGNNPolicy(HIDDEN, LAYERS, rng=seeds[1]))
            res = agent.train(env, steps=steps, rng=seeds[2])
        elif m == "flat":
            res = FlatAgent(EquivariantGNNPolicy(HIDDEN, LAYERS, rng=seeds[0])).train(env, steps=steps, rng=seeds[2])
        else:
            res = greedy_search(env, steps=steps, rng=seeds[3])
        metrics[m] = {"best_diameter": res.best_diameter, "steps_to_best": res.steps_to_best,
                      "n_linear": res.n_linear, "linear_diameters": res.linear_diameters,
                      "linear_at_bound": sum(v for k, v in res.linear_diameters.items() if k >= d),
                      "env_steps": res.env_steps, "wall_time": res.wall_time,
                      "best_generators": res.best_generators, "counterexamples": len(res.counterexamples)}
        if m == "options":
            probs = res.history["high_level_probs"][-1]
            metrics[m]["spine_length_probs"] = {L: round(p, 3) for L, p in zip(res.history["spine_lengths"], probs)}
            metrics[m]["mean_spine"] = res.history["mean_spine"][-1]
        history[f"{m}/env_steps"] = res.history["env_steps"]
        history[f"{m}/best_diameter"] = res.history["best_diameter"]
        history[f"{m}/linear_at_bound"] = res.history["linear_at_bound"]
    found = [k for m in methods for k in metrics[m]["linear_diameters"]]
    metrics["max_linear_diameter"] = max(found) if found else None
    metrics["hirsch_holds"] = bool(found) and max(found) <= d
    metrics["counterexamples"] = sum(metrics[m]["counterexamples"] for m in methods)
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t0)


def plot_search(res: Any, path: str) -> None:
    """The search curves of a :func:`demo` Result: best diameter among linear ideals against environment steps."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    h, m = res.history, res.metrics
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.0))
    for i, name in enumerate(m["methods"]):
        xs = [1] + [max(1, x) for x in h[f"{name}/env_steps"]]
        ys = [math.nan] + [math.nan if v is None else v for v in h[f"{name}/best_diameter"]]
        ax.step(xs, ys, where="post", color=f"C{i}", lw=1.8,
                label=f"{name}: {_d(m[name]['best_diameter'])} at step {m[name]['steps_to_best']}")
        ax2.step(xs, [0] + h[f"{name}/linear_at_bound"], where="post", color=f"C{i}", lw=1.8,
                 label=f"{_LABELS[name]}: {m[name]['linear_at_bound']}")
    ax.axhline(m["d"], color="grey", ls="--", lw=0.8)
    ax.text(0.99, m["d"] + 0.08, f"Hirsch bound d = {m['d']}", transform=ax.get_yaxis_transform(), ha="right",
            fontsize=8, color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("best diameter among linear ideals")
    ax.set_ylim(-0.2, m["d"] + 1.2)
    ax.set_title(f"n = {m['n']}, d = {m['d']}, field {m['field']}: max diameter of a linear ideal found "
                 f"{m['max_linear_diameter']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax2.set_xlabel("environment steps")
    ax2.set_ylabel(f"distinct linear ideals of diameter {m['d']}")
    ax2.set_title("linear ideals at the Hirsch bound found so far", fontsize=9)
    ax2.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _d(v: Any) -> str:
    return "-" if v is None else f"{v:.0f}"


def _hist(h: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in h.items()) or "-"


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """The three searches on n = 7, d = 3 (quick: 4000 steps each, the tour; else 16000); print the table."""
    res = demo(steps=QUICK_STEPS if quick else None)
    m = res.metrics
    out(f"algebraic Hirsch search: n = {m['n']} variables, degree d = {m['d']}, linearity over {m['field']}; "
        f"{m['steps']} environment steps per method, {res.wall_time:.1f} s")
    out(f"  {'method':<50} {'best diam':>9} {'at step':>8} {'linear ideals':>13} {'of diam d':>9}  "
        "diameters (diam: count)")
    for name in m["methods"]:
        r = m[name]
        out(f"  {_LABELS[name]:<50} {_d(r['best_diameter']):>9} {r['steps_to_best']:>8} {r['n_linear']:>13} "
            f"{r['linear_at_bound']:>9}  {_hist(r['linear_diameters'])}")
    verdict = ("all have diameter <= d: no counterexample, as expected" if m["hirsch_holds"] else
               "COUNTEREXAMPLE FOUND (diameter > d)" if m["counterexamples"] else "no linear ideal found")
    out(f"  every linear ideal found (over {m['field']}) has diameter <= {m['max_linear_diameter']}; {verdict}")
    out("  (linear ideals: distinct generator sets with a linear resolution that an episode ended in (agents) or a "
        "greedy order passed through; greedy counts each candidate it scores as a step)")
    if plot:
        plot_search(res, plot)
        out(f"figure saved to {plot}")
    o = m.get("options", {})
    others = ", ".join(f"{k} {_d(m[k]['best_diameter'])} at step {m[k]['steps_to_best']}"
                       for k in m["methods"] if k != "options")
    return [{"area": "torch", "method": f"Hirsch search, options agent (n = {m['n']}, d = {m['d']}, {m['field']})",
             "n": m["steps"],
             "result": (f"best linear diameter {_d(o['best_diameter'])} at step {o['steps_to_best']}, "
                        f"{o['n_linear']} linear ideals" if o else "-"),
             "vs anchor": others or "-",
             "speed": f"{res.wall_time:.1f} s; max diameter {m['max_linear_diameter']} <= d = {m['d']}"}]
