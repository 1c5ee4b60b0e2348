"""simulate_ep: the unit model, the roofline on hand-computed cases, the weights, all-to-all and memory terms,
the orderings of the spec (A2.7, A4), EPLB placements, batched plans and the errors."""

import numpy as np
import pytest

from numtk.moe import (eplb_device_loads, eplb_rebalance, hot_expert_loads, llep_plan, moe_forward,
                       routing_loads, simulate_ep, standard_ep_plan)
from numtk.moe._plan import plan_result, standard_chunks
from numtk.moe._simulate import COST_PRESETS


def _plan(loads, pi, P, chunks):
    loads, pi = np.asarray(loads, dtype=np.int64), np.asarray(pi, dtype=np.int64)
    total = int(loads.sum())
    return plan_result(loads, pi, P, np.asarray(chunks, dtype=np.int64).reshape(-1, 4), method="test",
                       capacity=-(-total // P), imbalance=1.0, forced=0, lower=-(-total // P),
                       expert_bytes=None, token_bytes=0.0, memory_limit=None)


def _standard(loads, pi, P):
    return _plan(loads, pi, P, standard_chunks(np.asarray(loads, dtype=np.int64), np.asarray(pi, dtype=np.int64)))


def _random_chunking(loads, pi, P, rng):
    """Every expert's slots cut at random points, each piece on a random device."""
    chunks = []
    for e, load in enumerate(loads):
        if load == 0:
            continue
        cuts = np.unique(np.r_[0, rng.integers(0, load + 1, size=rng.integers(0, 4)), load])
        for a, b in zip(cuts[:-1], cuts[1:]):
            chunks.append([e, rng.integers(P), a, b])
    return _plan(loads, pi, P, chunks)


# a hand case: P = 2, experts 0, 1 native on device 0 and 2 on device 1; device 1 takes 3 slots of expert 0
HAND_LOADS, HAND_PI = [10, 2, 3], [0, 0, 1]
HAND_CHUNKS = [[0, 0, 0, 7], [0, 1, 7, 10], [1, 0, 0, 2], [2, 1, 0, 3]]
# D = 2, H = 3, k_m = 1, b = 1: flop time 2*6*x/2 = 6x, memory time (6 + 5x)/1, crossing at x = 6
HAND_COST = {"hidden_size": 2, "intermediate_size": 3, "num_matrices": 1, "dtype_bytes": 1, "peak_flops": 2.0,
             "mem_bandwidth": 1.0, "link_bandwidth": 3.0, "a2a_bandwidth": 4.0, "gemm_overhead": 0.5}


def test_unit_latency_is_the_device_loads():
    rng = np.random.default_rng(0)
    for _ in range(20):
        P = int(rng.integers(1, 6))
        N = int(rng.integers(1, 9))
        loads = rng.integers(0, 30, size=N)
        pi = rng.integers(0, P, size=N)
        for plan in (_standard(loads, pi, P), _random_chunking(loads, pi, P, rng)):
            res = simulate_ep(plan)
            L = plan.assignment.sum(axis=0)
            np.testing.assert_array_equal(res.latency, L)
            np.testing.assert_array_equal(res.compute, L)
            np.testing.assert_array_equal(res.device_loads, L)
            np.testing.assert_array_equal(res.peak_memory, L)
            assert not res.weights.any() and not res.a2a.any()
            assert res.step_time == L.max() and res.cost_model == "unit" and res.overlap is False
            np.testing.assert_array_equal(simulate_ep(plan, overlap=True).latency, L)


def test_roofline_hand_case():
    plan = _plan(HAND_LOADS, HAND_PI, 2, HAND_CHUNKS)
    res = simulate_ep(plan, HAND_COST)
    # device 0: expert 0 with 7 slots is flop-bound (42 > 41), expert 1 with 2 memory-bound (16 > 12);
    # device 1: experts 0 and 2 with 3 slots each are memory-bound (21 > 18); + 0.5 per expert group
    np.testing.assert_allclose(res.compute, [42.5 + 16.5, 21.5 + 21.5], rtol=1e-15)
    # one transfer of 1*2*3*1 = 6 bytes over 3 B/s, device 0 sends and device 1 receives
    np.testing.assert_allclose(res.weights, [2.0, 2.0], rtol=1e-15)
    # uniform origin: remote slots L (P - 1) / P = [4.5, 3]; a2a = 2 r D b / 4
    np.testing.assert_allclose(res.remote_slots, [4.5, 3.0])
    np.testing.assert_allclose(res.a2a, [4.5, 3.0], rtol=1e-15)
    np.testing.assert_allclose(res.latency, [4.5 + 59 + 2, 3 + 43 + 2], rtol=1e-15)
    assert res.step_time == pytest.approx(65.5, rel=1e-15)
    # peak memory: 2 experts of 6 bytes held on each device, activations L (D + H) b = [45, 30]
    np.testing.assert_allclose(res.peak_memory, [12 + 45, 12 + 30], rtol=1e-15)
    np.testing.assert_array_equal(res.device_loads, [9, 6])
    assert res.cost_model == HAND_COST


def test_overlap_takes_the_larger_of_compute_and_weights():
    plan = _plan(HAND_LOADS, HAND_PI, 2, HAND_CHUNKS)
    slow = {**HAND_COST, "link_bandwidth": 0.1}          # weights 60 per device
    serial, parallel = simulate_ep(plan, slow), simulate_ep(plan, slow, overlap=True)
    np.testing.assert_allclose(serial.weights, [60.0, 60.0])
    np.testing.assert_allclose(parallel.latency, [4.5 + 60, 3 + 60])      # weights dominate both devices
    np.testing.assert_allclose(serial.latency, [4.5 + 59 + 60, 3 + 43 + 60])
    fast = simulate_ep(plan, HAND_COST, overlap=True)
    np.testing.assert_allclose(fast.latency, [4.5 + 59, 3 + 43])          # compute dominates
    for res in (serial, parallel, fast):
        np.testing.assert_allclose(res.latency, res.a2a + (np.maximum(res.compute, res.weights) if res.overlap
                                                            else res.compute + res.weights))


def test_weights_term_counts_unique_transfers_sent_and_received():
    # P = 3: expert 0 (device 0) also on device 1 in two separate chunks (one transfer); expert 1 (device 1)
    # also on devices 0 and 2; expert 2 (device 1) at home; expert 3 (device 2) at home
    chunks = [[0, 1, 0, 2], [0, 0, 2, 5], [0, 1, 5, 6], [1, 0, 0, 1], [1, 1, 1, 3], [1, 2, 3, 4],
              [2, 1, 0, 2], [3, 2, 0, 1]]
    plan = _plan([6, 4, 2, 1], [0, 1, 1, 2], 3, chunks)
    assert len(plan.weight_transfers) == 3
    cost = {"hidden_size": 4, "intermediate_size": 5, "num_matrices": 3, "dtype_bytes": 2, "link_bandwidth": 10.0}
    res = simulate_ep(plan, cost)
    expert_bytes = 3 * 4 * 5 * 2
    # sent [1, 2, 0], received [1, 1, 1]
    np.testing.assert_allclose(res.weights, np.array([1, 2, 1]) * expert_bytes / 10.0, rtol=1e-15)
    hosted = np.array([1 + 1, 2 + 1, 1 + 1])
    L = np.array([3 + 1, 3 + 2 + 2, 1 + 1])
    np.testing.assert_allclose(res.peak_memory, hosted * expert_bytes + L * (4 + 5) * 2, rtol=1e-15)


def test_compute_matches_a_loop_over_expert_groups():
    rng = np.random.default_rng(1)
    cost = dict(COST_PRESETS["h200"])
    D, H, km, b = 2880, 2880, 3, 2
    for _ in range(10):
        P, N = int(rng.integers(2, 6)), int(rng.integers(2, 10))
        loads = rng.integers(0, 5000, size=N)
        plan = _random_chunking(loads, rng.integers(0, P, size=N), P, rng)
        res = simulate_ep(plan, "h200")
        expected = np.zeros(P)
        for e in range(N):
            for p in range(P):
                x = plan.assignment[e, p]
                if x:
                    expected[p] += cost["gemm_overhead"] + max(2 * km * D * H * x / cost["peak_flops"],
                                                               (km * D * H + x * (D + H)) * b / cost["mem_bandwidth"])
        np.testing.assert_allclose(res.compute, expected, rtol=1e-13)


def test_per_token_time_falls_with_the_batch():
    # the roofline of one expert: time per slot decreases as the group grows (paper section 3.2)
    times = [simulate_ep(_standard([x], [0], 1), "h200").compute[0] / x for x in (1, 16, 256, 4096, 65536)]
    assert all(a > b for a, b in zip(times, times[1:]))


def test_a2a_uniform_origin_is_p_minus_one_over_p():
    rng = np.random.default_rng(2)
    for P in (1, 2, 3, 8):
        loads = rng.integers(0, 50, size=2 * P)
        plan = _random_chunking(loads, np.arange(2 * P) % P, P, rng)
        res = simulate_ep(plan, {"hidden_size": 7, "dtype_bytes": 2, "a2a_bandwidth": 1.0})
        L = plan.assignment.sum(axis=0)
        np.testing.assert_allclose(res.remote_slots, L * (P - 1) / P)
        np.testing.assert_allclose(res.a2a, 2 * L * (P - 1) / P * 7 * 2, rtol=1e-15)
        # per-source loads spread exactly evenly over the sources give the same for a standard plan
        even = np.repeat(loads[:, None] * P, P, axis=1)
        std = _standard(loads * P * P, np.arange(2 * P) % P, P)
        np.testing.assert_allclose(simulate_ep(std, source_loads=even).remote_slots,
                                   std.assignment.sum(axis=0) * (P - 1) / P)


def test_a2a_per_source_hand_case():
    per_source = np.array([[3, 1], [2, 4]])           # expert 0: 3 slots from device 0, 1 from device 1
    std = _standard([4, 6], [0, 1], 2)
    np.testing.assert_array_equal(simulate_ep(std, source_loads=per_source).remote_slots, [1, 2])
    # expert 0's slots [0, 3) come from device 0, [3, 4) from device 1; [0, 2) on device 1 is all remote,
    # [2, 4) on device 0 has one local slot
    split = _plan([4, 6], [0, 1], 2, [[0, 1, 0, 2], [0, 0, 2, 4], [1, 1, 0, 6]])
    res = simulate_ep(split, {"hidden_size": 8, "dtype_bytes": 2, "a2a_bandwidth": 16.0}, source_loads=per_source)
    np.testing.assert_array_equal(res.remote_slots, [1, 2 + 2])
    np.testing.assert_allclose(res.a2a, 2 * np.array([1, 4]) * 8 * 2 / 16.0)


def test_a2a_per_source_matches_the_executed_slots():
    # the simulator's source-major order is the executor's token-major order with tokens in contiguous blocks
    rng = np.random.default_rng(3)
    T, N, D, H, P, k = 37, 6, 3, 2, 3, 2
    x, logits = rng.normal(size=(T, D)), rng.normal(size=(T, N))
    experts = tuple(rng.normal(size=s) for s in [(N, H, D), (N, H, D), (N, D, H)])
    per_source = routing_loads(logits, k, num_sources=P)
    for _ in range(5):
        plan = _random_chunking(per_source.sum(axis=1), np.arange(N) % P, P, rng)
        run = moe_forward(x, logits, experts, plan, top_k=k)
        source = np.arange(T) * P // T
        executed = [int(np.sum(source[slots[:, 0]] != p)) for p, slots in enumerate(run.device_slots)]
        np.testing.assert_array_equal(simulate_ep(plan, source_loads=per_source).remote_slots, executed)


def test_peak_memory_equals_the_plans_own_memory_model():
    rng = np.random.default_rng(4)
    D = H = 2880
    expert_bytes, token_bytes = 3 * D * H * 2, (D + H) * 2
    loads = rng.integers(0, 3000, size=16)
    pi = np.arange(16) // 4
    for plan in (llep_plan(loads, 4, min_chunk=64, imbalance_threshold=None, expert_bytes=expert_bytes,
                           token_bytes=token_bytes),
                 standard_ep_plan(loads, 4, expert_bytes=expert_bytes, token_bytes=token_bytes)):
        assert np.array_equal(plan.placement, pi)
        np.testing.assert_allclose(simulate_ep(plan, "h200").peak_memory, plan.peak_memory, rtol=1e-15)


@pytest.mark.parametrize("share, expected", [(0.3, 2.942), (0.5, 4.387), (0.8, 6.555), (0.95, 7.639)])
def test_llep_speedup_on_the_papers_configuration(share, expected):
    # spec A4: 8 devices, 128 experts, top-4, 32768 tokens per device, 4 hot experts; under 'unit' the LLEP
    # speed-up is the EP device max/mean; under 'h200' it is >= 1 and below that idealisation
    loads = hot_expert_loads(128, 32768, top_k=4, hot_fraction=share, num_hot=4, num_sources=8, style="anchor")
    llep, std = llep_plan(loads, 8), standard_ep_plan(loads, 8)
    unit = simulate_ep(std).step_time / simulate_ep(llep).step_time
    assert round(unit, 3) == expected
    h200 = simulate_ep(std, "h200").step_time / simulate_ep(llep, "h200").step_time
    assert 1.0 <= h200 <= unit
    overlapped = simulate_ep(std, "h200").step_time / simulate_ep(llep, "h200", overlap=True).step_time
    assert h200 <= overlapped


def test_llep_speedup_is_at_least_one_on_random_imbalanced_loads():
    rng = np.random.default_rng(5)
    for _ in range(10):
        P, N = 8, 64
        weights = rng.dirichlet(np.full(N, 0.3))
        loads = rng.multinomial(8 * 16384, weights)
        std, llep = standard_ep_plan(loads, P), llep_plan(loads, P)
        ratio = simulate_ep(std, "h200").step_time / simulate_ep(llep, "h200").step_time
        assert ratio >= 1.0
        if llep.weight_transfers.size == 0:      # the gate fell back to standard EP
            assert ratio == 1.0


def test_balanced_loads_fall_back_to_standard():
    loads = np.full(32, 1000)
    llep, std = llep_plan(loads, 8), standard_ep_plan(loads, 8)
    assert simulate_ep(std, "h200").step_time == simulate_ep(llep, "h200").step_time


def test_eplb_placement_with_current_loads():
    weight = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
              [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
    eplb = eplb_rebalance(weight, 16, 4, 2, 8)
    rng = np.random.default_rng(6)
    for layer in (0, 1, -1):
        now = rng.integers(0, 200, size=12)
        res = simulate_ep(eplb, loads=now, layer=layer)
        ref = eplb_device_loads(eplb, now, layer=layer)
        np.testing.assert_array_equal(res.latency, ref.device_loads)
        cost = {"hidden_size": 16, "intermediate_size": 8, "num_matrices": 3, "dtype_bytes": 2}
        res = simulate_ep(eplb, cost, loads=now, layer=layer)
        assert not res.weights.any()                              # static replicas: no copies per step
        np.testing.assert_allclose(res.peak_memory, 2 * 3 * 16 * 8 * 2 + ref.device_loads * 24 * 2)
    # per-source counts: the same GPU loads (their sums are the loads), an exact all-to-all
    per_source = rng.integers(0, 30, size=(12, 8))
    res = simulate_ep(eplb, source_loads=per_source)
    np.testing.assert_array_equal(res.latency, eplb_device_loads(eplb, per_source.sum(axis=1)).device_loads)
    assert np.all(res.remote_slots <= res.device_loads)
    both = simulate_ep(eplb, loads=per_source.sum(axis=1), source_loads=per_source)
    np.testing.assert_array_equal(both.remote_slots, res.remote_slots)
    with pytest.raises(ValueError, match="`source_loads` summed over the sources must equal"):
        simulate_ep(eplb, loads=per_source.sum(axis=1) + 1, source_loads=per_source)
    # (L, N, S) for the placement's two layers: row `layer` is used
    stack = np.stack([per_source, per_source[::-1]])
    np.testing.assert_array_equal(simulate_ep(eplb, source_loads=stack, layer=1).latency,
                                  eplb_device_loads(eplb, per_source[::-1].sum(axis=1), layer=1).device_loads)


def test_batched_plan_layers():
    rng = np.random.default_rng(7)
    loads = rng.integers(0, 500, size=(3, 16))
    batch = llep_plan(loads, 4, min_chunk=8)
    for layer in range(3):
        one = llep_plan(loads[layer], 4, min_chunk=8)
        for cost in ("unit", "h200"):
            a, b = simulate_ep(batch, cost, layer=layer), simulate_ep(one, cost)
            np.testing.assert_array_equal(a.latency, b.latency)
            np.testing.assert_array_equal(a.peak_memory, b.peak_memory)
    np.testing.assert_array_equal(simulate_ep(batch, layer=-1).latency, simulate_ep(batch, layer=2).latency)


def test_errors():
    plan = _plan(HAND_LOADS, HAND_PI, 2, HAND_CHUNKS)
    with pytest.raises(ValueError, match="unknown keys.*'hiden_size'"):
        simulate_ep(plan, {"hiden_size": 3})
    with pytest.raises(ValueError, match="`cost_model`"):
        simulate_ep(plan, "a100")
    with pytest.raises(TypeError, match="`cost_model`"):
        simulate_ep(plan, 3)
    with pytest.raises(ValueError, match=r"cost_model\['peak_flops'\]"):
        simulate_ep(plan, {"peak_flops": 0.0})
    with pytest.raises(ValueError, match=r"cost_model\['gemm_overhead'\]"):
        simulate_ep(plan, {"gemm_overhead": -1.0})
    with pytest.raises(TypeError, match=r"cost_model\['hidden_size'\]"):
        simulate_ep(plan, {"hidden_size": 2.5})
    with pytest.raises(TypeError, match="`plan`"):
        simulate_ep(np.ones((3, 2)))
    with pytest.raises(TypeError, match="`plan`"):
        simulate_ep({"a": 1})
    with pytest.raises(TypeError, match="`overlap`"):
        simulate_ep(plan, overlap="yes")
    with pytest.raises(ValueError, match="`loads`"):
        simulate_ep(plan, loads=[10, 2, 4])
    with pytest.raises(ValueError, match="`loads` must be the routing-slot totals.*`source_loads`"):
        simulate_ep(plan, loads=[[4, 3, 3], [1, 1, 0], [1, 1, 1]])
    with pytest.raises(ValueError, match="`source_loads` must have one column per device"):
        simulate_ep(plan, source_loads=[[4, 3, 3], [1, 1, 0], [1, 1, 1]])
    with pytest.raises(ValueError, match="`source_loads` summed over the sources"):
        simulate_ep(plan, source_loads=[[4, 6], [1, 1], [1, 1]])
    with pytest.raises(ValueError, match="`source_loads` must have shape"):
        simulate_ep(plan, source_loads=[10, 2, 3])
    with pytest.raises(ValueError, match=r"`source_loads` of shape \(L, N, S\) must hold one matrix per layer"):
        simulate_ep(plan, source_loads=np.ones((2, 3, 2)))
    with pytest.raises(ValueError, match="`source_loads` must be non-negative"):
        simulate_ep(plan, source_loads=[[11, -1], [1, 1], [1, 2]])
    with pytest.raises(ValueError, match="`layer`"):
        simulate_ep(plan, layer=1)
    eplb = eplb_rebalance([5, 3, 2, 1], 4, 1, 1, 2)
    with pytest.raises(ValueError, match="`loads` is needed"):
        simulate_ep(eplb)
    with pytest.raises(ValueError, match="`loads`"):
        simulate_ep(eplb, loads=[1, 2, 3])
    with pytest.raises(ValueError, match="`layer`"):
        simulate_ep(eplb, loads=[1, 2, 3, 4], layer=1)


def test_inconsistent_plans_are_refused():
    plan = _plan(HAND_LOADS, HAND_PI, 2, HAND_CHUNKS)
    gap = dict(plan.items())
    gap["chunks"] = plan.chunks[[0, 2, 3]]              # expert 0's slots [7, 10) computed nowhere
    with pytest.raises(ValueError, match="tile|match"):
        simulate_ep(gap)
    overlap = dict(plan.items())
    overlap["chunks"] = np.array([[0, 0, 0, 7], [0, 1, 6, 9], [1, 0, 0, 2], [2, 1, 0, 3]])
    with pytest.raises(ValueError, match="tile"):
        simulate_ep(overlap)
    reversed_chunk = dict(plan.items())
    reversed_chunk["chunks"] = np.array([[0, 0, 7, 0], [0, 1, 7, 10], [1, 0, 0, 2], [2, 1, 0, 3]])
    with pytest.raises(ValueError, match="stop < start"):
        simulate_ep(reversed_chunk)
    no_copy = dict(plan.items())
    no_copy["weight_transfers"] = np.zeros((0, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="expert 0 on device 1 without a weight transfer"):
        simulate_ep(no_copy)
    no_placement = {k: v for k, v in plan.items() if k != "placement"}
    with pytest.raises(ValueError, match="placement"):
        simulate_ep(no_placement)


def test_loads_are_totals_and_source_loads_the_per_source_counts():
    # one meaning of `loads` in numtk.moe: routing-slot totals per expert, (N,) or (L, N) for the planners'
    # batches; per-source counts (N, S) go to simulate_ep as `source_loads`
    rng = np.random.default_rng(8)
    logits = rng.normal(size=(64, 8))
    logits[:, 0] += 3.0
    source = routing_loads(logits, 2, num_sources=4)
    totals = source.sum(axis=1)
    np.testing.assert_array_equal(totals, routing_loads(logits, 2))
    plan = llep_plan(totals, 4, min_chunk=1)
    exact = simulate_ep(plan, "h200", source_loads=source)
    np.testing.assert_array_equal(simulate_ep(plan, "h200", loads=totals, source_loads=source).latency, exact.latency)
    assert not np.array_equal(exact.remote_slots, simulate_ep(plan, "h200").remote_slots)   # the origin matters
    with pytest.raises(ValueError, match="`source_loads`"):
        simulate_ep(plan, loads=source)                      # the (N, S) counts are not `loads`
    # a plan of two layers and its (L, N, S) counts: row `layer` is the one-layer case
    batch_source = np.stack([source, source[::-1]])
    batch = llep_plan(batch_source.sum(axis=2), 4, min_chunk=1)
    np.testing.assert_array_equal(llep_plan(batch_source, 4, min_chunk=1).chunks, batch.chunks)  # summed over S
    for layer in (0, 1, -1):
        one = llep_plan(batch_source[layer].sum(axis=1), 4, min_chunk=1)
        for kw in ({"source_loads": batch_source}, {"source_loads": batch_source[layer]}):
            got = simulate_ep(batch, "h200", layer=layer, **kw)
            ref = simulate_ep(one, "h200", source_loads=batch_source[layer])
            np.testing.assert_array_equal(got.latency, ref.latency)
            np.testing.assert_array_equal(got.remote_slots, ref.remote_slots)
    with pytest.raises(ValueError, match="`source_loads` summed over the sources"):
        simulate_ep(batch, source_loads=batch_source[1], layer=0)      # layer 1's counts for layer 0


def test_plans_are_read_from_their_chunks_not_their_dense_assignment():
    rng = np.random.default_rng(9)
    loads = rng.integers(0, 400, size=24)
    loads[:3] *= 20
    source = np.stack([rng.multinomial(int(l), np.full(6, 1 / 6)) for l in loads])
    plan = llep_plan(loads, 6, min_chunk=8)
    res = simulate_ep(plan, "h200", source_loads=source)
    assert "assignment" not in plan.__dict__                   # not built by the simulator
    # the same plan as a plain mapping with its dense assignment: cross-checked, the same result
    as_dict = dict(plan.items())
    assert "assignment" in plan.__dict__
    ref = simulate_ep(as_dict, "h200", source_loads=source)
    for key in ("latency", "compute", "weights", "a2a", "peak_memory", "remote_slots"):
        np.testing.assert_array_equal(res[key], ref[key])
    # a mapping without chunks: the assignment's rows are cut in device order
    dense = {k: as_dict[k] for k in ("assignment", "weight_transfers", "placement")}
    unit = simulate_ep(dense)
    np.testing.assert_array_equal(unit.latency, plan.device_loads)
    np.testing.assert_array_equal(simulate_ep(dense, "h200").compute, res.compute)
    # a built assignment or device loads that disagree with the chunks are refused
    plan.__dict__["assignment"] = plan.assignment.copy()
    plan.__dict__["assignment"][0, 0] += 1
    with pytest.raises(ValueError, match=r"`plan.assignment` does not match its chunks"):
        simulate_ep(plan)
    wrong = dict(as_dict, device_loads=as_dict["device_loads"] + np.eye(6, dtype=np.int64)[0])
    with pytest.raises(ValueError, match=r"`plan.device_loads` does not match its chunks"):
        simulate_ep(wrong)


def test_simulating_a_large_plan_allocates_no_dense_assignment():
    # N = 4000 experts on P = 500 devices: the dense (N, P) int64 array would be 16 MB
    import tracemalloc

    rng = np.random.default_rng(10)
    N, P = 4000, 500
    loads = rng.zipf(1.5, size=N).clip(max=10**6) * 64
    plan = llep_plan(loads, np.arange(N) % P, min_chunk=16)
    tracemalloc.start()
    try:
        res = simulate_ep(plan, "h200")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "assignment" not in plan.__dict__
    assert peak < 4 * 2**20, peak
    np.testing.assert_array_equal(res.device_loads, plan.device_loads)
