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


def _test_module(name: str):
    """A reference module of the tests, ``tests/moe/<name>.py``, loaded from its file (tests/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "moe" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference():
    """The tests' pure-Python transcription of the least-loaded assignment (tests/moe/_llep_reference.py)."""
    return _test_module("_llep_reference")


def zipf_layer(N: int, P: int, *, rng: int = 0):
    """A Zipf (s = 1.2) layer with T / P = 131072 routing slots per device, top-4, and its contiguous
    placement (experts round-robin when N is not a multiple of P)."""
    from numtk.moe import zipf_loads

    loads = zipf_loads(N, 131072 * P // 4, s=1.2, top_k=4, rng=rng)
    placement = np.arange(N, dtype=np.int64) * P // N
    return loads, placement


def compare_planner(quick: bool = False) -> None:
    """The compiled planner (``llep_plan`` and its core) against the tests' pure-Python transcription and,
    when importable, the paper's own planner.

    The paper's planner is ``compute_llep_lpt_plan`` of the LeastLoadedEP repository
    (SalesforceAIResearch/LeastLoadedEP, ``llep/gpt_oss_llep.py``), found by ``from llep.gpt_oss_llep
    import compute_llep_lpt_plan`` when that repository is on ``PYTHONPATH``; its module also imports
    ``transformers``. It is timed on the same layers, given as CPU torch tensors, with the same capacity
    factor (1) and minimum chunk (1024); its chunks, in its visit order with consecutive pieces of one
    expert on one device merged, are compared with ``llep_plan``'s (these layers have T divisible by P, so
    its capacity ``int(alpha * (T // P))`` equals numtk's ``ceil(alpha * T / P)``).
    """
    from numtk.moe import _moe_ext, llep_plan

    def anchor_planner():
        """(compute_llep_lpt_plan or None, why it is missing)."""
        try:
            from llep.gpt_oss_llep import compute_llep_lpt_plan
        except ModuleNotFoundError as exc:
            if exc.name in ("llep", "llep.gpt_oss_llep"):
                return None, ("anchor column off: put the LeastLoadedEP repository (github.com/"
                              "SalesforceAIResearch/LeastLoadedEP) on PYTHONPATH to time its "
                              "compute_llep_lpt_plan beside llep_plan")
            return None, (f"anchor column off: llep.gpt_oss_llep is on the path but needs `{exc.name}`, "
                          f"which is not installed (install it to time compute_llep_lpt_plan)")
        except Exception as exc:  # an incompatible version of the repository, or a failing dependency
            return None, f"anchor column off: importing compute_llep_lpt_plan failed: {type(exc).__name__}: {exc}"
        return compute_llep_lpt_plan, ""

    def anchor_chunks(plan) -> np.ndarray:
        """The anchor plan's ``lpt_plan`` (expert -> [(device, start, stop), ...], in visit order) as rows
        (expert, device, start, stop), consecutive contiguous pieces of one expert on one device merged."""
        rows: list[list[int]] = []
        for e, pieces in plan.lpt_plan.items():
            for d, lo, hi in pieces:
                if rows and rows[-1][0] == e and rows[-1][1] == d and rows[-1][3] == lo:
                    rows[-1][3] = int(hi)
                else:
                    rows.append([int(e), int(d), int(lo), int(hi)])
        return np.asarray(rows, dtype=np.int64).reshape(-1, 4)

    anchor, why = anchor_planner()
    if anchor is not None:
        import torch
    ref = _reference()
    print("LLEP planner, Zipf layers (T/P = 131072, min_chunk 1024, gate off):")
    head = (f"  {'N':>6} {'P':>5} {'llep_plan':>12} {'compiled core':>14} {'Python ref.':>12} {'ref./call':>10} "
            f"{'ref./core':>10}  same chunks")
    if anchor is not None:
        head += f"  {'anchor':>10} {'anchor/call':>11}  same as anchor"
    print(head)
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
        # the anchor's layout is contiguous blocks of N / P experts: only such layers go to it
        with_anchor = anchor is not None and N % P == 0
        if with_anchor:
            counts = torch.from_numpy(loads.astype(np.int64))
            calls["anchor"] = lambda: anchor(counts, P, 0, N // P, max_tokens_factor=1.0, min_tokens_per_gemm=1024)
            reps["anchor"] = 51 if small else 5
        if quick:
            reps = {k: max(3, v // 5) for k, v in reps.items()}
        t = interleaved(calls, reps, errors="record")
        for name, exc in t.errors.items():
            if name != "anchor":
                raise exc
        plan = t.results["llep_plan"]
        same = np.array_equal(plan.chunks, np.asarray(t.results["python"][0], dtype=np.int64).reshape(-1, 4))
        m = t.medians
        line = (f"  {N:>6} {P:>5} {m['llep_plan'] * 1e6:>10.1f}us {m['core'] * 1e6:>12.1f}us "
                f"{m['python'] * 1e3:>10.2f}ms {t.ratio('python', 'llep_plan'):>9.1f}x "
                f"{t.ratio('python', 'core'):>9.1f}x  {str(same):>11}")
        if anchor is not None:
            if "anchor" in t.errors:
                exc = t.errors["anchor"]
                line += f"  anchor failed: {type(exc).__name__}: {exc}"
            elif not with_anchor:
                line += f"  {'-':>10} {'-':>11}  (N not a multiple of P)"
            else:
                a_same = np.array_equal(plan.chunks, anchor_chunks(t.results["anchor"]))
                line += f"  {m['anchor'] * 1e3:>8.2f}ms {t.ratio('anchor', 'llep_plan'):>10.1f}x  {a_same}"
        print(line)
    if anchor is None:
        print("  " + why)


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
    """LLEP against standard EP carried out under torch.distributed (gloo, 2 processes, 95 % of the tokens to 4
    hot experts), with the simulator's prediction for the same loads beside it and for more devices."""
    from numtk.moe import hot_expert_loads, llep_plan, simulate_ep, standard_ep_plan

    try:
        from numtk.torch.llep import benchmark_llep
    except ImportError as exc:
        print(f"torch.distributed executor: {exc}")
        return
    D, H, N = 256, 512, 16
    cost = {"hidden_size": D, "intermediate_size": H, "num_matrices": 3, "dtype_bytes": 4}
    print(f"LLEP under torch.distributed (gloo, 2 processes, 4096 tokens per rank, N = {N}, D = {D}, H = {H}, "
          "top-4, 95 % to 4 hot experts, float32):")
    print(f"  {'step':<18} {'EP s':>7} {'LLEP s':>7} {'wall':>6} {'busiest-rank CPU':>17} {'max loads EP/LLEP':>18} "
          f"{'sim. unit':>9} {'sim. roofline':>13}")
    for backward in (False, True):
        res = benchmark_llep(world_size=2, tokens=4096, hidden_size=D, intermediate_size=H, num_experts=N,
                             repeats=3 if quick else 7, backward=backward)
        source = np.asarray(res.source_loads)            # (N, 2): each expert's slots per source rank
        ep, ll = standard_ep_plan(res.loads, 2), llep_plan(res.loads, 2, min_chunk=64, imbalance_threshold=None)
        sim = {name: simulate_ep(ep, m, source_loads=source).step_time
               / simulate_ep(ll, m, source_loads=source).step_time
               for name, m in (("unit", "unit"), ("model", cost))}
        print(f"  {'forward + backward' if backward else 'forward':<18} {res.ep_time:>7.3f} {res.llep_time:>7.3f} "
              f"{res.speedup:>5.2f}x {res.cpu_speedup:>16.2f}x {res.ep_max_load:>9}/{res.llep_max_load:<8} "
              f"{sim['unit']:>8.2f}x {sim['model']:>8.2f}x")
    print("  (sim. roofline: the 'h200' rates with this layer's D, H and float32; wall-clock needs a free core per "
          "rank, the busiest rank's CPU time shows the balance on a shared machine)")
    print("  simulated speed-up on more devices (same routing, 4096 tokens per device, 'unit' / 'h200' with "
          f"D = {D}, H = {H}):")
    for P in (2, 4, 8, 16):
        loads = hot_expert_loads(N, 4096, top_k=4, hot_fraction=0.95, num_hot=4, num_sources=P, style="anchor")
        ep, ll = standard_ep_plan(loads, P), llep_plan(loads, P, min_chunk=64, imbalance_threshold=None)
        unit = simulate_ep(ep).step_time / simulate_ep(ll).step_time
        h200 = simulate_ep(ep, "h200").step_time / simulate_ep(ll, "h200").step_time
        small = simulate_ep(ep, cost).step_time / simulate_ep(ll, cost).step_time
        print(f"    P = {P:>2}: {unit:5.2f}x unit, {h200:5.2f}x h200 (gpt-oss expert shape), {small:5.2f}x h200 rates "
              f"with this layer's D, H")


#: Mixtral-8x7B expert matrices (hidden 4096, intermediate 14336): the up/gate and the down projection
BF16_SHAPES = ((14336, 4096), (4096, 14336))


def _bf16_reference():
    """The tests' NumPy transcription of the bf16 packing formulas (tests/moe/_bf16_reference.py)."""
    return _test_module("_bf16_reference")


def bf16_layer(d_out: int, d_in: int, *, rng: int = 0):
    """A packed pair of (d_out, d_in) Gaussian experts (sigma 0.02) merged as PuzzleMoE does without
    activation norms (tau = 0.4): (packed words, the plain bf16 words of expert i's decoded weights)."""
    from numtk.moe import pack_bf16, unpack_bf16

    g = np.random.default_rng(rng)
    a = np.abs(g.normal(0, 0.02, (d_out, d_in))).astype(np.float32)
    b = np.abs(g.normal(0, 0.02, (d_out, d_in))).astype(np.float32)
    similar = np.abs(a - b) <= 0.4 * (a + b)
    magnitude = np.where(similar, (a + b) / 2, np.maximum(a, b))
    packed = pack_bf16(magnitude, similar | (a >= b), similar | (b > a), g.random((d_out, d_in)) < 0.5,
                       g.random((d_out, d_in)) < 0.5)
    return packed, unpack_bf16(packed, 0)


def compare_bf16(quick: bool = False) -> None:
    """PuzzleMoE's bf16 packing: ``packed_matvec`` against the same compiled loop over plain bf16 words
    (``_bf16_matvec``, the denominator of the spec's 1.3x target), NumPy's float32 product with the decoded
    matrix (4 bytes per weight, decoded beforehand and not timed) and torch's CPU bf16 product, at the Mixtral
    expert shapes; then ``pack_bf16`` / ``unpack_bf16`` against the NumPy transcription of the formulas."""
    import os

    from numtk._lib._workers import available_cores
    from numtk.moe import pack_bf16, packed_matvec, unpack_bf16
    from numtk.moe._bf16 import _bf16_matvec

    try:
        import torch
    except ImportError:
        torch = None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    cores = available_cores()
    reps = 5 if quick else 15
    print(f"Decode-fused mat-vec (packed_matvec) vs the same loop over plain bf16 words (_bf16_matvec), "
          f"Mixtral expert shapes, {cores} cores available:")
    print(f"  {'d_out x d_in':>13} {'b':>2} {'threads':>7} {'packed e0':>10} {'packed e1':>10} {'plain bf16':>10} "
          f"{'e0/plain':>8} {'e1/plain':>8} {'NumPy f32':>10} {'torch bf16':>10} {'GB/s e1':>8}")
    for d_out, d_in in BF16_SHAPES:
        packed, plain = bf16_layer(d_out, d_in)
        decoded = (plain.astype(np.uint32) << 16).view(np.float32)  # expert i as float32, for NumPy
        w_torch = None if torch is None else torch.from_numpy(plain.view(np.int16)).view(torch.bfloat16)
        for b in (1, 8):
            x = np.random.default_rng(1).normal(size=(b, d_in)).astype(np.float32)
            xv = x[0] if b == 1 else x
            out = np.empty((d_out,) if b == 1 else (b, d_out), np.float32)
            for threads in sorted({1, cores}):
                ours = {"e0": lambda: packed_matvec(packed, xv, 0, out=out, workers=threads),
                        "e1": lambda: packed_matvec(packed, xv, 1, out=out, workers=threads),
                        "plain": lambda: _bf16_matvec(plain, xv, out=out, workers=threads)}
                # the outside anchors are timed in rounds of their own: their thread pools keep spinning for a
                # while after a call and would slow down whichever contestant follows them
                calls = {}
                if threadpool_limits is not None:
                    def numpy_product():
                        with threadpool_limits(threads):
                            return xv @ decoded.T
                    calls["numpy"] = numpy_product
                if torch is not None:
                    xt = torch.from_numpy(xv).to(torch.bfloat16)

                    def torch_product():
                        before = torch.get_num_threads()
                        torch.set_num_threads(threads)
                        try:
                            return torch.mv(w_torch, xt) if b == 1 else xt @ w_torch.T
                        finally:
                            torch.set_num_threads(before)
                    calls["torch"] = torch_product
                t = interleaved(ours, reps, min_time=0.05)
                m = dict(t.medians)
                if calls:
                    m.update(interleaved(calls, reps, min_time=0.05).medians)
                # packed_matvec agrees with NumPy on expert i (the plain words hold the same values)
                ok = np.allclose(packed_matvec(packed, xv, 0), xv @ decoded.T, rtol=1e-4, atol=1e-5)
                numpy_t = f"{m['numpy'] * 1e3:>8.2f}ms" if "numpy" in m else f"{'-':>10}"
                torch_t = f"{m['torch'] * 1e3:>8.2f}ms" if "torch" in m else f"{'-':>10}"
                print(f"  {f'{d_out}x{d_in}':>13} {b:>2} {threads:>7} {m['e0'] * 1e3:>8.2f}ms {m['e1'] * 1e3:>8.2f}ms "
                      f"{m['plain'] * 1e3:>8.2f}ms {t.ratio('e0', 'plain'):>7.3f}x {t.ratio('e1', 'plain'):>7.3f}x "
                      f"{numpy_t} {torch_t} {packed.nbytes / m['e1'] / 1e9:>8.1f}{'' if ok else '  MISMATCH'}")
        del decoded, w_torch
    if threadpool_limits is None:
        print("  (NumPy column off: threadpoolctl is needed to run its product on one thread)")
    if torch is None:
        print("  (torch column off: torch is not installed)")
    print("  (NumPy: float32 matrix decoded beforehand, 4 bytes per weight; torch: torch.mv / matmul on bf16 "
          "tensors sharing the plain words)")

    # pack / unpack against the NumPy transcription of the formulas
    ref = _bf16_reference()
    n = 20_000_000 if quick else int(os.environ.get("NUMTK_BENCH_BF16_N", 100_000_000))
    g = np.random.default_rng(2)
    magnitude = np.abs(g.normal(0, 0.02, n)).astype(np.float32)
    flags = [g.random(n) < 0.5 for _ in range(4)]
    reps = 3
    print(f"pack_bf16 / unpack_bf16 on {n:.0e} elements (float32 magnitudes of N(0, 0.02), random masks and "
          "signs) vs the NumPy transcription of the formulas (tests/moe/_bf16_reference.py):")
    print(f"  {'operation':<28} {'threads':>7} {'numtk':>9} {'NumPy':>9} {'NumPy/numtk':>11}  same")
    packed = pack_bf16(magnitude, *flags)
    for threads in sorted({1, cores}):
        cases = {
            "pack (round + pack)": (lambda: pack_bf16(magnitude, *flags, workers=threads),
                                    lambda: ref.pack(ref.round_bf16(magnitude), *flags)[0]),
            "unpack (components)": (lambda: unpack_bf16(packed, workers=threads),
                                    lambda: ref.unpack(packed)),
            "unpack expert j as float": (lambda: unpack_bf16(packed, 1, as_float=True, workers=threads),
                                         lambda: ref.to_float(ref.decode(packed, 1))),
        }
        for name, (ours, theirs) in cases.items():
            t = interleaved({"numtk": ours, "numpy": theirs}, reps)
            a, r = t.results["numtk"], t.results["numpy"]
            if name.startswith("unpack (c"):
                same = all(np.array_equal(a[k], v) for k, v in zip(("magnitude", "mask_i", "mask_j", "sign_i",
                                                                   "sign_j"), r))
            else:
                same = np.array_equal(a, r)
            t.results.clear()
            print(f"  {name:<28} {threads:>7} {t.medians['numtk']:>8.3f}s {t.medians['numpy']:>8.3f}s "
                  f"{t.ratio('numpy', 'numtk'):>10.1f}x  {same}")


def compare_merge(quick: bool = False) -> None:
    """PuzzleMoE merge throughput (elements per second) of one pair and of a whole layer, and the packed
    layer's memory against its bf16 experts, beside the average merge."""
    from numtk.moe import average_merge, merge_experts, puzzle_merge, reconstruction_error

    rng = np.random.default_rng(0)
    print("PuzzleMoE merging (Gaussian experts, sigma 0.02):")
    shapes = ((4096, 4096),) if quick else ((4096, 4096), (14336, 4096))
    for d_out, d_in in shapes:
        A, B = rng.normal(0.0, 0.02, (2, d_out, d_in)).astype(np.float32)
        norms = rng.uniform(0.5, 2.0, (2, 1, d_in)).astype(np.float32)
        t = interleaved({"puzzle": lambda: puzzle_merge(A, B),
                         "puzzle+norms": lambda: puzzle_merge(A, B, activation_norms=(norms[0], norms[1])),
                         "average": lambda: average_merge([A, B])}, 3)
        res = t.results["puzzle"]
        err = reconstruction_error(res.reconstruction[0], A)
        avg = reconstruction_error(t.results["average"], A)
        print(f"  {d_out}x{d_in} pair: {A.size / t.medians['puzzle'] / 1e6:.0f} M elements/s "
              f"({A.size / t.medians['puzzle+norms'] / 1e6:.0f} with activation norms; average merge "
              f"{A.size / t.medians['average'] / 1e6:.0f}), relative error {err:.4f} (average {avg:.4f})")
    N, d_out, d_in = (8, 512, 256) if quick else (16, 1024, 512)
    experts = rng.normal(0.0, 0.02, (N, d_out, d_in)).astype(np.float32)
    t = interleaved({"layer": lambda: merge_experts(experts)}, 3)
    res = t.results["layer"]
    print(f"  merge_experts, {N} experts of {d_out}x{d_in} (pairing by MILP, merge, pack): "
          f"{t.medians['layer'] * 1e3:.0f} ms, {experts.size / t.medians['layer'] / 1e6:.0f} M elements/s; packed "
          f"{res.packed_bytes} bytes against {res.bf16_bytes} for the bf16 experts (ratio {res.memory_ratio})")


def compare(quick: bool = False) -> None:
    print("== moe ==")
    compare_planner(quick)
    compare_milp(quick)
    compare_simulated(quick)
    compare_eplb(quick)
    compare_bf16(quick)
    compare_merge(quick)
    compare_distributed(quick)
