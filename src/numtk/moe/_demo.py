"""The LLEP demonstration used by ``python -m numtk tour`` and ``python -m numtk demo llep``."""

from __future__ import annotations

import time

__all__ = ["run", "hot_share_table", "plot_speedups"]

#: The paper's benchmark configuration (the LeastLoadedEP README command): 8 devices, 128 experts, top-4,
#: 32768 tokens per device, 4 hot experts, capacity factor 1, min chunk 1024, gate 1.3.
CONFIG = dict(num_devices=8, num_experts=128, top_k=4, tokens_per_device=32768, num_hot=4)


def hot_share_table(shares, *, cost_model="h200") -> list[dict]:
    """Standard EP against LLEP on the paper's benchmark configuration, one dict per hot share.

    Each dict: ``share``, ``ep_imbalance`` (device max/mean of standard EP), ``ep_max_load``,
    ``llep_max_load``, ``lower_bound`` (ceil(T/P)), ``transfers`` (unique weight copies), ``method`` of the
    LLEP plan (``'standard'`` when the gate kept standard EP), ``speedup_unit`` and ``speedup_model``
    (simulated step-time ratios, standard EP over LLEP, under the ``'unit'`` model and ``cost_model``),
    ``memory_ratio`` (standard EP's peak memory over LLEP's under ``cost_model``) and ``plan_seconds`` (the
    best of five calls of :func:`~numtk.moe.llep_plan`).
    """
    from numtk.moe import hot_expert_loads, llep_plan, simulate_ep, standard_ep_plan

    c = CONFIG
    rows = []
    for share in shares:
        loads = hot_expert_loads(c["num_experts"], c["tokens_per_device"], top_k=c["top_k"], hot_fraction=share,
                                 num_hot=c["num_hot"], num_sources=c["num_devices"], style="anchor")
        ep = standard_ep_plan(loads, c["num_devices"])
        seconds = float("inf")
        for _ in range(5):  # the best of five calls: a warm call, as a plan per layer per step is
            t0 = time.perf_counter()
            ll = llep_plan(loads, c["num_devices"])
            seconds = min(seconds, time.perf_counter() - t0)
        sims = {name: (simulate_ep(ep, name), simulate_ep(ll, name)) for name in ("unit", cost_model)}
        rows.append(dict(share=float(share), ep_imbalance=float(ll.imbalance_ratio), ep_max_load=int(ep.max_load),
                         llep_max_load=int(ll.max_load), lower_bound=int(ll.lower_bound),
                         transfers=len(ll.weight_transfers), method=str(ll.method),
                         speedup_unit=sims["unit"][0].step_time / sims["unit"][1].step_time,
                         speedup_model=sims[cost_model][0].step_time / sims[cost_model][1].step_time,
                         memory_ratio=float(sims[cost_model][0].peak_memory.max()
                                            / sims[cost_model][1].peak_memory.max()),
                         plan_seconds=seconds))
    return rows


def _milp_gap(out) -> dict:
    """LLEP against the exact MILP on a small skewed layer, without a memory limit and with room for 3, 2, 1
    foreign experts per device: the greedy is optimal when memory leaves room, and falls behind when it is
    tight (``optimal_plan`` is the tool there)."""
    import warnings

    from numtk.moe import dirichlet_loads, llep_plan, optimal_plan, standard_ep_plan

    loads = dirichlet_loads(16, 200, alpha=0.3, top_k=2, rng=5)
    optimal_plan(loads, 4)  # warm up the solver
    out(f"  standard EP max load {standard_ep_plan(loads, 4).max_load}")
    gaps = {}
    for foreign in (None, 3, 2, 1):
        # 16 experts on 4 devices: 4 native experts each (1 byte each here), and room for `foreign` more
        kw = {} if foreign is None else dict(memory_limit=4.0 + foreign, expert_bytes=1.0)
        label = "no memory limit" if foreign is None else f"{foreign} foreign expert{'s' * (foreign > 1)} per device"
        t0 = time.perf_counter()
        opt = optimal_plan(loads, 4, **kw)
        secs = time.perf_counter() - t0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a stranded remainder: reported below instead
            ll = llep_plan(loads, 4, min_chunk=1, imbalance_threshold=None, **kw)
        gaps[label] = (int(ll.max_load), int(opt.max_load), secs)
        out(f"  {label:<31} LLEP {ll.max_load:>4} ({len(ll.weight_transfers)} transfers"
            f"{', ' + str(ll.forced) + ' forced' if ll.forced else ''}{', over the memory limit' if not ll.feasible else ''}), MILP optimum {opt.max_load:>4} "
            f"({len(opt.weight_transfers)} transfers, {secs * 1e3:.0f} ms), lower bound {opt.lower_bound}")
    return gaps


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """LLEP on the paper's benchmark configuration across hot shares, its exact-optimum gap and planner speed.

    Returns the tour's table rows. With ``plot``, saves the simulated speed-up against the hot share to that
    file (needs matplotlib).
    """
    import numpy as np

    from numtk.moe import llep_plan, zipf_loads

    c = CONFIG
    shares = (0.0, 0.3, 0.5, 0.8, 0.95)
    out(f"LLEP on {c['num_experts']} experts, {c['num_devices']} devices, top-{c['top_k']}, "
        f"{c['tokens_per_device']} tokens per device, {c['num_hot']} hot experts (the paper's benchmark):")
    out("  hot share  EP max/mean  EP max load  LLEP max load  ceil(T/P)  transfers  "
        "speed-up unit / h200 model  peak memory EP/LLEP")
    table = hot_share_table(shares)
    for r in table:
        out(f"  {r['share']:>9.2f}  {r['ep_imbalance']:>11.3f}  {r['ep_max_load']:>11}  {r['llep_max_load']:>13}  "
            f"{r['lower_bound']:>9}  {r['transfers']:>9}  {r['speedup_unit']:>10.2f}x / {r['speedup_model']:>5.2f}x"
            f"       {r['memory_ratio']:>6.2f}x" + ("   (gate: standard EP)" if r["method"] == "standard" else ""))
    out("  (simulated: the 'unit' model counts routing slots; 'h200' is a datasheet roofline, not a measurement)")
    rows = [{"area": "moe", "method": f"LLEP, {r['share']:.0%} of slots to 4 hot experts", "n": c["num_experts"],
             "result": f"max load {r['llep_max_load']} = ceil(T/P), {r['speedup_unit']:.2f}x sim.",
             "vs anchor": f"EP {r['ep_max_load']}", "speed": f"{r['plan_seconds'] * 1e3:.2f} ms"}
            for r in table if r["share"] in (0.3, 0.95)]

    out("LLEP against the exact optimum (MILP, HiGHS) on 16 experts, 4 devices, 400 Dirichlet(0.3) routing slots:")
    gaps = _milp_gap(out)
    for label in ("2 foreign experts per device", "1 foreign expert per device"):
        ll, opt, secs = gaps[label]
        rows.append({"area": "moe", "method": f"LLEP vs MILP, {label.replace(' per device', '/device')}", "n": 16,
                     "result": f"max load {ll} vs optimum {opt}", "vs anchor": "exact MILP",
                     "speed": f"{secs * 1e3:.0f} ms"})

    N, P = (10_000, 1_000)
    loads = zipf_loads(N, 131072 * P // 4, s=1.2, top_k=4, rng=0)
    llep_plan(loads, np.arange(N) % P)  # warm up
    reps = 5 if quick else 20
    t0 = time.perf_counter()
    for _ in range(reps):
        plan = llep_plan(loads, np.arange(N) % P)
    secs = (time.perf_counter() - t0) / reps
    out(f"planner: N = {N} experts, P = {P} devices, Zipf loads: {secs * 1e3:.2f} ms per plan "
        f"({len(plan.chunks)} chunks, max load {plan.max_load}, ceil(T/P) = {plan.lower_bound})")
    rows.append({"area": "moe", "method": "LLEP planner (compiled)", "n": N, "result": f"P={P}",
                 "vs anchor": "", "speed": f"{secs * 1e3:.2f} ms"})
    if plot:
        fine = np.round(np.linspace(0.0, 0.95, 20), 3)
        plot_speedups(hot_share_table(fine), plot)
        out(f"figure saved to {plot}")
    return rows


def plot_speedups(table: list[dict], path: str) -> None:
    """Simulated LLEP speed-up over standard EP against the hot share (rows of :func:`hot_share_table`)."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    share = [r["share"] for r in table]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(share, [r["speedup_unit"] for r in table], "o-", label="'unit' model (= EP max/mean load)")
    ax.plot(share, [r["speedup_model"] for r in table], "s-", label="'h200' roofline model")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("share of routing slots sent to the 4 hot experts")
    ax.set_ylabel("simulated speed-up of LLEP over standard EP")
    ax.set_title("LLEP, 128 experts on 8 devices, top-4, 32768 tokens per device", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
