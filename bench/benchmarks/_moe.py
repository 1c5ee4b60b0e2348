"""Side-by-side runs of numtk.moe for ``bench/compare.py --moe``: the compiled LLEP planner against the
pure-Python transcription of the algorithm (the tests' reference), the exact MILP's solve time, EPLB, the
simulator's view of the paper's benchmark configuration and, when torch is installed, LLEP against standard
expert parallelism carried out under ``torch.distributed`` (gloo, two processes).

The problem catalogue is the demo's (:data:`numtk.moe._demo.CONFIG`) plus Zipf layers of the paper's
planner sizes.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np

from benchmarks._timing import interleaved

ROOT = Path(__file__).resolve().parents[2]

#: (N experts, P devices) of the planner comparison: the spec's production size and the paper's layer
PLANNER_SIZES = ((128, 8), (10_000, 1_000))


def _reference():
    """The tests' pure-Python transcription of the least-loaded assignment (tests/moe/_llep_reference.py)."""
    path = ROOT / "tests" / "moe" / "_llep_reference.py"
    spec = importlib.util.spec_from_file_location("_llep_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def zipf_layer(N: int, P: int, *, rng: int = 0):
    """A Zipf (s = 1.2) layer with T / P = 131072 routing slots per device, top-4, and its contiguous
    placement (experts round-robin when N is not a multiple of P)."""
    from numtk.moe import zipf_loads

    loads = zipf_loads(N, 131072 * P // 4, s=1.2, top_k=4, rng=rng)
    placement = np.arange(N, dtype=np.int64) * P // N
    return loads, placement


def compare_planner(quick: bool = False) -> None:
    from numtk.moe import _moe_ext, llep_plan

    ref = _reference()
    print("LLEP planner, Zipf layers (T/P = 131072, min_chunk 1024, gate off):")
    print(f"  {'N':>6} {'P':>5} {'llep_plan':>12} {'compiled core':>14} {'Python ref.':>12} {'ref./call':>10} "
          f"{'ref./core':>10}  same chunks")
    for N, P in PLANNER_SIZES:
        loads, placement = zipf_layer(N, P)
        cap = ref.capacity(int(loads.sum()), P)
        caps = np.array([cap], dtype=np.int64)
        batch = np.ascontiguousarray(loads[None])
        calls = {"llep_plan": lambda: llep_plan(loads, placement, imbalance_threshold=None),
                 "core": lambda: _moe_ext.llep_plan_layers(batch, placement, caps, 1024, P, None, 0.0, 0.0, 1),
                 "python": lambda: ref.llep_reference(loads, placement, P, cap, 1024)}
        small = N * P < 10_000
        reps = {"llep_plan": 201 if small else 21, "core": 2001 if small else 41, "python": 51 if small else 3}
        if quick:
            reps = {k: max(3, v // 5) for k, v in reps.items()}
        t = interleaved(calls, reps)
        plan = t.results["llep_plan"]
        same = np.array_equal(plan.chunks, np.asarray(t.results["python"][0], dtype=np.int64).reshape(-1, 4))
        m = t.medians
        print(f"  {N:>6} {P:>5} {m['llep_plan'] * 1e6:>10.1f}us {m['core'] * 1e6:>12.1f}us "
              f"{m['python'] * 1e3:>10.2f}ms {t.ratio('python', 'llep_plan'):>9.1f}x {t.ratio('python', 'core'):>9.1f}x"
              f"  {same}")


def compare_milp(quick: bool = False) -> None:
    from numtk.moe import dirichlet_loads, llep_plan, optimal_plan

    print("Exact MILP (optimal_plan, HiGHS), Dirichlet(0.5) layers, 400 slots per device:")
    print(f"  {'N':>3} {'P':>2} {'foreign slots':>13} {'median s':>9} {'max s':>7}  LLEP / optimum (mean, max)")
    layers = 4 if quick else 12
    for N, P in ((12, 3), (24, 4), (24, 6)):
        for foreign in (None, 3, 1):
            times, ratios = [], []
            for seed in range(layers):
                loads = dirichlet_loads(N, 400 * P // 2, alpha=0.5, top_k=2, rng=seed)
                kw = {} if foreign is None else dict(memory_limit=(N // P + foreign) * 1.0, expert_bytes=1.0)
                t0 = time.perf_counter()
                opt = optimal_plan(loads, P, **kw)
                times.append(time.perf_counter() - t0)
                ll = llep_plan(loads, P, min_chunk=1, imbalance_threshold=None, **kw)
                ratios.append(ll.max_load / opt.max_load if opt.max_load else 1.0)
            label = "any" if foreign is None else str(foreign)
            print(f"  {N:>3} {P:>2} {label:>13} {np.median(times):>9.3f} {max(times):>7.3f}  "
                  f"{np.mean(ratios):.3f}, {max(ratios):.3f}")


def compare_simulated(quick: bool = False) -> None:
    from numtk.moe._demo import hot_share_table

    print("Paper's benchmark configuration (128 experts, 8 devices, top-4, 32768 tokens/device, 4 hot experts),"
          " simulated:")
    print(f"  {'hot share':>9} {'EP max/mean':>11} {'LLEP max':>9} {'transfers':>9} {'unit':>7} {'h200':>7} "
          f"{'memory':>7}")
    for r in hot_share_table((0.0, 0.3, 0.5, 0.8, 0.95)):
        print(f"  {r['share']:>9.2f} {r['ep_imbalance']:>11.3f} {r['llep_max_load']:>9} {r['transfers']:>9} "
              f"{r['speedup_unit']:>6.2f}x {r['speedup_model']:>6.2f}x {r['memory_ratio']:>6.2f}x")


def compare_eplb(quick: bool = False) -> None:
    from numtk.moe import eplb_rebalance

    rng = np.random.default_rng(0)
    weight = rng.integers(1, 1000, size=(61, 256))
    t = interleaved({"eplb": lambda: eplb_rebalance(weight, 288, 8, 4, 32)}, 5 if quick else 21)
    print(f"EPLB (61 layers, 256 experts, 288 replicas, 8 groups, 4 nodes, 32 GPUs): "
          f"{t.medians['eplb'] * 1e3:.2f} ms")


def compare_distributed(quick: bool = False) -> None:
    """LLEP against standard EP carried out under torch.distributed (gloo, 2 processes), with the simulator's
    prediction for the same layer beside it."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch.distributed executor: torch is not installed (pip install \"numtk[torch]\")")
        return
    from numtk.torch import llep as tllep

    bench = getattr(tllep, "benchmark_executor", None)
    if bench is None:
        print("torch.distributed executor: numtk.torch.llep has no benchmark_executor")
        return
    res = bench(quick=quick)
    print(res if isinstance(res, str) else getattr(res, "report", res))


def compare(quick: bool = False) -> None:
    print("== moe ==")
    compare_planner(quick)
    compare_milp(quick)
    compare_simulated(quick)
    compare_eplb(quick)
    compare_distributed(quick)
