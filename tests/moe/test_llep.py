"""LLEP planner and standard EP (spec A2.3-A2.5, A3, A4), against independent oracles: the hand cases and
the benchmark-configuration table of spec A4, a pure-Python sort-and-scan transcription of A2.3/A2.4
(tests/moe/_llep_reference.py) chunk for chunk, closed forms (ceil(T/P), column sums, the transfer-count
bound) and invariants under hypothesis."""

import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from numtk.moe import llep_plan, standard_ep_plan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _llep_reference import capacity as ref_capacity  # noqa: E402
from _llep_reference import llep_reference  # noqa: E402

FIELDS = ("assignment", "chunks", "weight_transfers", "device_loads", "max_load", "lower_bound", "capacity",
          "method", "imbalance_ratio", "forced", "peak_memory", "feasible", "placement", "message")


def unconstrained(loads, placement, **kw):
    return llep_plan(loads, placement, min_chunk=1, capacity_factor=1.0, imbalance_threshold=None, **kw)


def assert_same_result(a, b, fields=FIELDS):
    for name in fields:
        x, y = a[name], b[name]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert_array_equal(x, y, err_msg=name)
        else:
            assert x == y, name


def check_plan(res, loads, pi, P):
    """The invariants every plan of one layer satisfies (spec A4), from the chunks alone."""
    loads = np.asarray(loads, dtype=np.int64)
    N = len(loads)
    ch = res.chunks
    assert ch.shape[1] == 4 and ch.dtype == np.int64
    assert np.all(ch[:, 3] > ch[:, 2])
    for e in range(N):  # the chunks of each expert tile [0, l_e)
        mine = ch[ch[:, 0] == e]
        mine = mine[np.argsort(mine[:, 2])]
        if loads[e] == 0:
            assert len(mine) == 0
            continue
        assert mine[0, 2] == 0 and mine[-1, 3] == loads[e]
        assert_array_equal(mine[1:, 2], mine[:-1, 3])
    dense = np.zeros((N, P), dtype=np.int64)
    for e, d, a, b in ch:
        dense[e, d] += b - a
    assert_array_equal(res.assignment, dense)
    assert_array_equal(res.assignment.sum(axis=1), loads)
    assert_array_equal(res.device_loads, res.assignment.sum(axis=0))
    assert res.max_load == res.device_loads.max()
    assert res.max_load >= res.lower_bound >= -(-int(loads.sum()) // P)
    expected = sorted({(e, int(pi[e]), d) for e, d in zip(*np.nonzero(dense)) if d != pi[e]})
    got = [tuple(t) for t in res.weight_transfers.tolist()]
    assert sorted(got) == expected and len(set(got)) == len(got)
    # transfers in plan order: the order in which their first chunk appears
    first = []
    for e, d, _, _ in ch.tolist():
        if d != pi[e] and (e, int(pi[e]), d) not in first:
            first.append((e, int(pi[e]), d))
    assert got == first


# --------------------------------------------------------------------------------------------------
# spec A4: hand-checkable cases
# --------------------------------------------------------------------------------------------------
def test_one_hot_expert_on_two_devices():
    # loads [10, 0, 1, 1] on [0, 0, 1, 1]: LB = 6, optimum 6 with one transfer (4 slots of expert 0)
    res = unconstrained([10, 0, 1, 1], [0, 0, 1, 1])
    assert (res.max_load, res.lower_bound, res.capacity, res.forced) == (6, 6, 6, 0)
    assert_array_equal(res.chunks, [[0, 0, 0, 6], [0, 1, 6, 10], [2, 1, 0, 1], [3, 1, 0, 1]])
    assert_array_equal(res.weight_transfers, [[0, 0, 1]])
    std = standard_ep_plan([10, 0, 1, 1], [0, 0, 1, 1])
    assert std.max_load == 10 and len(std.weight_transfers) == 0
    check_plan(res, [10, 0, 1, 1], np.array([0, 0, 1, 1]), 2)


def test_one_hot_expert_with_no_foreign_slot_stays_standard():
    # F = 0 (each device holds exactly its two native experts): optimum = standard EP = 10. No device may
    # receive expert 0, so its overflow stays native (a forced chunk); with no activation bytes device 0 still
    # holds it, so the plan fits the limit: it is the optimum, feasible, and nothing is warned.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = unconstrained([10, 0, 1, 1], [0, 0, 1, 1], memory_limit=2.0, expert_bytes=1.0)
    assert res.max_load == 10 and len(res.weight_transfers) == 0 and res.feasible and res.message == ""
    assert res.forced == 1
    assert res.lower_bound == 10  # LB2: no foreign host at all
    assert_array_equal(res.peak_memory, [2.0, 2.0])
    # one foreign slot on device 1 is enough for the optimum
    res = unconstrained([10, 0, 1, 1], [0, 0, 1, 1], memory_limit=[2.0, 3.0], expert_bytes=1.0)
    assert res.max_load == 6 and res.feasible and res.lower_bound == 6


def test_two_equal_experts_one_transfer():
    # loads [9, 9, 0, 0] on [0, 0, 1, 1]: optimum 9 with exactly one transfer (a whole expert moves)
    res = unconstrained([9, 9, 0, 0], [0, 0, 1, 1])
    assert res.max_load == 9 and len(res.weight_transfers) == 1
    assert_array_equal(res.chunks, [[0, 1, 0, 9], [1, 0, 0, 9]])


def test_four_experts_on_one_device():
    # P = 4, every expert native on device 0, loads 8 each: F = 1 -> 8 with 3 transfers; F = 0 -> 32
    loads, pi = [8, 8, 8, 8], [0, 0, 0, 0]
    res = unconstrained(loads, pi, num_devices=4)
    assert res.max_load == 8 and len(res.weight_transfers) == 3 and res.lower_bound == 8
    res1 = unconstrained(loads, pi, num_devices=4, memory_limit=[5, 1, 1, 1], expert_bytes=1)
    assert res1.max_load == 8 and len(res1.weight_transfers) == 3 and res1.feasible
    res0 = unconstrained(loads, pi, num_devices=4, memory_limit=[4, 0, 0, 0], expert_bytes=1)
    assert res0.max_load == 32 and len(res0.weight_transfers) == 0 and res0.feasible  # = the optimum (spec A4)
    assert res0.lower_bound == 8  # LB2 does not bind here: lower_bound = LB1


def test_lb2_binds_and_the_greedy_stays_above_it():
    # P = 4, placement [0, 1, 2, 3], loads [40, 0, 0, 0], one foreign slot on device 1 only: LB1 = 10,
    # LB2 = 20 (the optimum, one transfer). The greedy fills device 1 to capacity (10), then, with no device
    # left that may host expert 0, forces the remaining 20 onto it: 30 >= 20 (spec A2.4: poor with F = 1).
    res = unconstrained([40, 0, 0, 0], [0, 1, 2, 3], memory_limit=[1, 2, 1, 1], expert_bytes=1)
    assert res.lower_bound == 20
    assert res.max_load == 30 and res.max_load >= 20
    assert_array_equal(res.chunks, [[0, 0, 0, 10], [0, 1, 10, 40]])
    assert res.forced == 1 and res.feasible
    assert_array_equal(res.weight_transfers, [[0, 0, 1]])


def test_only_the_native_cap_makes_the_plan_fit():
    # device 0 may hold 5 slots (1 byte each, weights free), device 1 plenty. Capacity 6 would keep 6 slots of
    # expert 0 on device 0 (loads [6, 6], over device 0's limit); the native memory room caps that share at
    # 5, the rest spills (4 slots within capacity, 1 forced), and [5, 7] fits. The two cold experts on
    # device 1, now beyond capacity, find no room on device 0 and stay native (forced), within device 1's
    # memory.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = llep_plan([10, 0, 1, 1], [0, 0, 1, 1], min_chunk=1, memory_limit=[5, 100], expert_bytes=0,
                        token_bytes=1)
    assert_array_equal(res.device_loads, [5, 7])
    assert res.feasible and res.message == "" and res.forced == 3
    assert_array_equal(res.chunks, [[0, 0, 0, 5], [0, 1, 5, 10], [2, 1, 0, 1], [3, 1, 0, 1]])
    assert_array_equal(res.peak_memory, [5.0, 7.0])
    # the reference transcription agrees, and without the cap the share kept would be the capacity's
    chunks, forced, stranded = llep_reference([10, 0, 1, 1], [0, 0, 1, 1], 2, 6, 1, [5, 100], 0.0, 1.0)
    assert chunks == [tuple(c) for c in res.chunks.tolist()] and forced == 3 and stranded == [2, 3]
    free = llep_plan([10, 0, 1, 1], [0, 0, 1, 1], min_chunk=1)
    assert_array_equal(free.device_loads, [6, 6])
    # weights count too: 2 bytes of weights leave room for 3 slots
    res = llep_plan([10, 0, 1, 1], [0, 0, 1, 1], min_chunk=1, memory_limit=[5, 100], expert_bytes=1,
                    token_bytes=1)
    assert res.device_loads[0] == 3 and res.feasible


def test_an_infeasible_plan_warns_and_says_why():
    # the overflow of expert 0 has nowhere to go (device 1 holds 2 slots at most, it has 2): it stays on
    # device 0, over device 0's limit
    with pytest.warns(RuntimeWarning, match="does not fit `memory_limit`.*expert 0.*device 0"):
        res = llep_plan([10, 0, 1, 1], [0, 0, 1, 1], min_chunk=1, memory_limit=[5, 2], expert_bytes=0,
                        token_bytes=1)
    assert not res.feasible and "expert 0" in res.message and "device 0 exceeds" in res.message
    assert_array_equal(res.device_loads, [10, 2])
    # a device whose native experts' weights alone exceed its limit: no plan fits it
    with pytest.warns(RuntimeWarning, match="alone"):
        res = unconstrained([10, 0, 1, 1], [0, 0, 1, 1], memory_limit=[10.0, 1.0], expert_bytes=1.0)
    assert not res.feasible and "device 1 alone" in res.message and "device 0" not in res.message


def test_the_standard_plan_of_the_gate_may_not_fit_the_limit():
    # a balanced layer (ratio 1.0 < 1.3): the gate returns the standard plan, whose device 1 needs
    # 2 experts + 8 slots = 10 bytes against a limit of 9
    loads = [4, 4, 5, 3]
    with pytest.warns(RuntimeWarning, match="standard plan"):
        res = llep_plan(loads, 2, memory_limit=[10, 9], expert_bytes=1, token_bytes=1)
    assert res.method == "standard" and not res.feasible
    assert_array_equal(res.peak_memory, [10.0, 10.0])
    assert "gate" in res.message and "device 1" in res.message and "device 0" not in res.message
    # with the limit met the gated plan is feasible and says nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = llep_plan(loads, 2, memory_limit=10, expert_bytes=1, token_bytes=1)
    assert ok.method == "standard" and ok.feasible and ok.message == ""
    # standard_ep_plan knows no limit: always feasible, an empty message
    std = standard_ep_plan(loads, 2, expert_bytes=1, token_bytes=1)
    assert std.feasible and std.message == ""
    batch = standard_ep_plan(np.array([loads, loads]), 2)
    assert batch.message.tolist() == ["", ""] and batch.feasible.tolist() == [True, True]


def test_messages_of_a_batch():
    batch = np.array([[10, 0, 1, 1], [4, 4, 5, 3], [1, 1, 1, 1]])
    with pytest.warns(RuntimeWarning, match="2 of 3 layers") as caught:
        res = llep_plan(batch, 2, min_chunk=1, memory_limit=[5, 2], expert_bytes=0, token_bytes=1)
    assert len(caught) == 1
    assert res.feasible.tolist() == [False, False, True]
    assert "expert 0" in res.message[0] and "standard plan" in res.message[1] and res.message[2] == ""
    for i in range(3):  # each layer's message is the one it gets alone
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            one = llep_plan(batch[i], 2, min_chunk=1, memory_limit=[5, 2], expert_bytes=0, token_bytes=1)
        assert one.message == res.message[i] and one.feasible == res.feasible[i]


def test_standard_ep_fields():
    res = standard_ep_plan([10, 0, 1, 1], [0, 0, 1, 1], expert_bytes=3.0, token_bytes=0.5)
    assert_array_equal(res.chunks, [[0, 0, 0, 10], [2, 1, 0, 1], [3, 1, 0, 1]])
    assert res.weight_transfers.shape == (0, 3)
    assert_array_equal(res.device_loads, [10, 2])
    assert (res.max_load, res.lower_bound, res.capacity, res.method, res.forced) == (10, 6, 6, "standard", 0)
    assert res.imbalance_ratio == pytest.approx(10 / 6)
    assert_array_equal(res.peak_memory, [2 * 3.0 + 10 * 0.5, 2 * 3.0 + 2 * 0.5])
    assert res.feasible is True
    assert_array_equal(res.placement, [0, 0, 1, 1])


# --------------------------------------------------------------------------------------------------
# spec A4: the paper's benchmark configuration (8 devices, N = 128, top-4, 32768 tokens per device)
# --------------------------------------------------------------------------------------------------
def anchor_style_loads(num_experts, tokens, top_k, num_hot, hot_share, sources):
    """The rule of spec A3 (``style="anchor"``), counted directly: token i < floor(r n) sends its j-th slot
    to hot expert j mod h, any other token to cold expert h + (i + j) mod (N - h); each of the `sources`
    ranks routes the same n tokens."""
    i = np.arange(tokens)[:, None]
    j = np.arange(top_k)[None, :]
    hot = i < int(np.floor(hot_share * tokens))
    expert = np.where(hot, j % num_hot, num_hot + (i + j) % (num_experts - num_hot))
    return np.bincount(expert.ravel(), minlength=num_experts).astype(np.int64) * sources


@pytest.mark.parametrize(("share", "device_ratio", "expert_ratio"),
                         [(0.30, 2.942, 9.60), (0.50, 4.387, 16.00), (0.80, 6.555, 25.60), (0.95, 7.639, 30.40)])
def test_benchmark_configuration_table(share, device_ratio, expert_ratio):
    loads = anchor_style_loads(128, 32768, 4, 4, share, 8)
    assert loads.sum() == 1_048_576
    std = standard_ep_plan(loads, 8)
    assert std.max_load / (loads.sum() / 8) == pytest.approx(device_ratio, abs=5e-4)
    assert std.imbalance_ratio == pytest.approx(device_ratio, abs=5e-4)
    assert loads.max() / loads.mean() == pytest.approx(expert_ratio, abs=5e-3)
    res = llep_plan(loads, 8)  # the README command: alpha = 1, m = 1024, lambda = 1.3 (device metric)
    assert res.method == "llep" and res.capacity == 131072
    assert res.max_load == 131072 and len(res.weight_transfers) == 10 and res.forced == 0
    gated = llep_plan(loads, 8, imbalance_metric="expert")
    assert gated.imbalance_ratio == pytest.approx(expert_ratio, abs=5e-3) and gated.method == "llep"
    check_plan(res, loads, np.arange(128) // 16, 8)


def _draw(family, N, total, rng):
    if family == "zipf":
        p = np.arange(1, N + 1, dtype=float) ** -1.2
        p = rng.permutation(p / p.sum())
    elif family == "dirichlet":
        p = rng.dirichlet(np.full(N, 0.5))
    else:  # a few hot experts take 30-95 % of the slots
        h = int(rng.integers(1, 5))
        share = rng.uniform(0.3, 0.95)
        p = np.full(N, (1 - share) / N)
        p[:h] += share / h
    return rng.multinomial(total, p).astype(np.int64)


@pytest.mark.parametrize(("P", "most_transfers"), [(8, 13), (16, 22), (32, 38), (64, 71)])
def test_paper_scale_reaches_the_bound(P, most_transfers):
    # spec A2.3: m = 1024, T/P = 131072, N in {128, 256}: max load = ceil(T/P), unique transfers at most
    # 13 / 22 / 38 / 71. (At P = 64 with N = 128, two experts a device, Dirichlet draws occasionally leave
    # only sub-m rooms and force a chunk, so that cell uses the other two families.)
    rng = np.random.default_rng(P)
    families = ("zipf", "hot") if P == 64 else ("zipf", "dirichlet", "hot")
    for N in (128, 256):
        T = 131072 * P
        batch = np.stack([_draw(f, N, T, rng) for f in families for _ in range(3)])
        res = llep_plan(batch, P, imbalance_threshold=None)
        assert_array_equal(res.max_load, T // P)
        for i in range(len(batch)):
            transfers = res.weight_transfers[res.weight_transfers[:, 0] == i]
            assert len(transfers) <= most_transfers
            # the transfer-count bound when no chunk is forced: every expert needs ceil(l_e / cap) hosts
            if res.forced[i] == 0:
                assert len(transfers) >= np.maximum(-(-batch[i] // res.capacity[i]) - 1, 0).sum()


def test_small_batches_force_chunks():
    # spec A2.3: when T/P is small against m the forced branch fires and the max exceeds ceil(T/P)
    rng = np.random.default_rng(3)
    loads = _draw("zipf", 64, 400, rng)
    res = llep_plan(loads, 8, imbalance_threshold=None)
    assert res.forced > 0 and res.max_load > -(-400 // 8)
    assert unconstrained(loads, 8).max_load == 50


# --------------------------------------------------------------------------------------------------
# the compiled planner == the pure-Python reference, chunk for chunk
# --------------------------------------------------------------------------------------------------
def _family(kind, N, rng):
    if kind == 0:
        return rng.integers(0, 60, N)
    if kind == 1:
        return (rng.pareto(0.8, N) * 10).astype(np.int64)
    if kind == 2:
        return rng.multinomial(int(rng.integers(0, 800)), rng.dirichlet(np.full(N, 0.3)))
    if kind == 3:
        return rng.integers(0, 4, N)  # many ties
    loads = rng.integers(0, 10, N)  # one or two hot experts
    loads[rng.integers(0, N, 2)] += rng.integers(50, 500, 2)
    return loads


def test_compiled_plan_equals_the_reference_on_10000_instances():
    rng = np.random.default_rng(20260117)
    instances = stranded_cases = 0
    for group in range(200):  # 200 settings x ~50 layers, each layer checked against the reference
        P = int(rng.integers(1, 8))
        N = int(rng.integers(1, 16)) if group < 190 else int(rng.integers(256, 400))  # radix sort path
        pi = rng.integers(0, P, N)
        P_total = P + int(rng.integers(0, 2))  # sometimes a device with no expert
        alpha = float(rng.choice([0.5, 1.0, 1.1, 1.3, 1 / 3]))
        m = int(rng.choice([1, 2, 5, 16, 64, 1024]))
        memory = None
        eb = tb = 0.0
        if group % 3 == 0:  # memory-aware; whole numbers of bytes keep the test exact in floating point
            eb, tb = float(rng.integers(1, 5)), float(rng.integers(0, 2))
            memory = rng.integers(0, 60 if tb == 0 else 400, P_total).astype(float)
        layers = 53 if N < 256 else 5
        batch = np.stack([_family((group + k) % 5, N, rng) for k in range(layers)]).astype(np.int64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = llep_plan(batch, pi, capacity_factor=alpha, min_chunk=m, imbalance_threshold=None,
                            memory_limit=memory, expert_bytes=eb if memory is not None else None, token_bytes=tb,
                            num_devices=P_total)
        for i in range(layers):
            cap = ref_capacity(int(batch[i].sum()), P_total, alpha)
            chunks, forced, stranded = llep_reference(batch[i], pi, P_total, cap, m, memory, eb, tb)
            mine = res.chunks[res.chunks[:, 0] == i, 1:]
            assert [tuple(c) for c in mine.tolist()] == chunks, (group, i)
            assert res.capacity[i] == cap and res.forced[i] == forced
            assert res.method[i] == "llep"
            if memory is not None:  # feasible: the reference plan's bytes within the limit, device by device
                load = np.zeros(P_total)
                hosts = {(e, int(pi[e])) for e in range(N)}
                for e, d, a, b in chunks:
                    load[d] += b - a
                    hosts.add((e, d))
                held = np.bincount([d for _, d in hosts], minlength=P_total) * eb + load * tb
                fits = bool(np.all(held <= memory))
                assert res.feasible[i] == fits and (res.message[i] == "") == fits, (group, i)
                stranded_cases += bool(stranded)
                # a remainder kept native makes the plan infeasible only where its device cannot hold it
                over = {d for d in range(P_total) if held[d] > memory[d]}
                if not fits and over & {int(pi[e]) for e in stranded} - {d for d in over if
                                                                         (pi == d).sum() * eb > memory[d]}:
                    assert "no other device had the memory" in res.message[i]
            instances += 1
    assert instances >= 10_000 and stranded_cases > 100


def test_capacity_reads_alpha_as_the_decimal_written():
    # ceil(alpha * T / P) in integers, alpha = 1.1 read as 11/10: the binary double 0x1.199999999999ap0 is
    # slightly above 11/10, and its exact product would round 110 / 2 and 1.1e16 up by one
    res = llep_plan(np.array([60, 40]), [0, 1], capacity_factor=1.1, imbalance_threshold=None)
    assert res.capacity == 55 == ref_capacity(100, 2, 1.1)
    T, P = 10**16, 1
    loads = np.array([T], dtype=np.int64)
    res = llep_plan(loads, P, capacity_factor=1.1, imbalance_threshold=None)
    assert res.capacity == ref_capacity(T, P, 1.1) == 11 * 10**15
    # decimals below their double are read as written too: 0.7 (binary just below 7/10), 1/3 as 0.3333333333333333
    assert llep_plan(np.array([600, 400]), 2, capacity_factor=0.7, imbalance_threshold=None).capacity == 350
    third = llep_plan(np.array([3 * 10**16]), 1, capacity_factor=1 / 3, imbalance_threshold=None)
    assert third.capacity == 3333333333333333 * 3 == ref_capacity(3 * 10**16, 1, 1 / 3)
    assert llep_plan(np.array([10, 0]), 2, capacity_factor=np.float32(1.1), imbalance_threshold=None).capacity == \
        ref_capacity(10, 2, float(np.float32(1.1)))
    res = llep_plan(np.array([7, 0, 0]), [0, 1, 2], capacity_factor=1.0, imbalance_threshold=None)
    assert res.capacity == 3  # ceil(7 / 3)
    huge = llep_plan(np.array([7, 0, 0]), [0, 1, 2], capacity_factor=1e308, imbalance_threshold=None)
    assert huge.capacity == 2**62 and huge.max_load == 7 and len(huge.weight_transfers) == 0


# --------------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------------
@st.composite
def instances(draw, max_n=12, max_p=6):
    P = draw(st.integers(1, max_p))
    N = draw(st.integers(1, max_n))
    pi = np.array(draw(st.lists(st.integers(0, P - 1), min_size=N, max_size=N)), dtype=np.int64)
    kind = draw(st.sampled_from(["small", "wide", "hot"]))
    if kind == "small":
        loads = draw(st.lists(st.integers(0, 12), min_size=N, max_size=N))
    elif kind == "wide":
        loads = draw(st.lists(st.integers(0, 10**6), min_size=N, max_size=N))
    else:
        loads = draw(st.lists(st.integers(0, 30), min_size=N, max_size=N))
        loads[draw(st.integers(0, N - 1))] += draw(st.integers(100, 5000))
    return np.array(loads, dtype=np.int64), pi, P


@given(inst=instances(), alpha=st.sampled_from([1.0, 1.05, 1.3, 2.0]), m=st.integers(1, 300),
       threshold=st.sampled_from([None, 1.1, 1.3]))
@settings(max_examples=150)
def test_invariants(inst, alpha, m, threshold):
    loads, pi, P = inst
    res = llep_plan(loads, pi, capacity_factor=alpha, min_chunk=m, imbalance_threshold=threshold, num_devices=P)
    check_plan(res, loads, pi, P)
    std = standard_ep_plan(loads, pi, num_devices=P)
    check_plan(std, loads, pi, P)
    assert std.max_load == np.bincount(pi, weights=loads, minlength=P).max()
    # with alpha >= 1 the plan is never worse than standard EP (spec A4; alpha < 1 can be, see below)
    assert res.max_load <= std.max_load


def test_a_capacity_below_the_mean_can_be_worse_than_standard_ep():
    # alpha = 0.5: capacities hold half the slots, so forced chunks pile onto the least-loaded device
    res = llep_plan([5, 5, 9], [0, 0, 1], capacity_factor=0.5, min_chunk=100, imbalance_threshold=None)
    assert_array_equal(res.device_loads, [5, 14])
    assert res.max_load > standard_ep_plan([5, 5, 9], [0, 0, 1]).max_load == 10


@given(inst=instances())
@settings(max_examples=150)
def test_unconstrained_plan_reaches_ceil_T_over_P(inst):
    loads, pi, P = inst
    res = unconstrained(loads, pi, num_devices=P)
    assert res.max_load == -(-int(loads.sum()) // P) == res.lower_bound
    assert res.forced == 0
    # the transfer-count bound (spec A2.6) holds whenever nothing is forced
    if loads.sum():
        assert len(res.weight_transfers) >= np.maximum(-(-loads // res.capacity) - 1, 0).sum()


@given(inst=instances(), threshold=st.floats(1.0, 4.0))
@settings(max_examples=100)
def test_gate_returns_standard_ep(inst, threshold):
    loads, pi, P = inst
    res = llep_plan(loads, pi, min_chunk=1, imbalance_threshold=threshold, num_devices=P)
    std = standard_ep_plan(loads, pi, num_devices=P)
    native = np.bincount(pi, weights=loads, minlength=P)
    rho = native.max() / native.mean() if native.sum() else 1.0
    assert res.imbalance_ratio == pytest.approx(rho, rel=1e-12)
    if rho < threshold:
        assert_same_result(res, std)  # every field, method 'standard' included
    else:
        assert res.method == "llep"


def test_gate_fields_of_other_arguments():
    loads = [4, 4, 5, 3]
    std = standard_ep_plan(loads, 2)
    res = llep_plan(loads, 2, capacity_factor=1.5)  # ratio 1.0 < 1.3
    assert res.method == "standard" and res.capacity == 12 and std.capacity == 8
    assert_same_result(res, std, [f for f in FIELDS if f != "capacity"])
    res = llep_plan(loads, 2, imbalance_metric="expert", imbalance_threshold=1.3)
    assert res.method == "standard" and res.imbalance_ratio == pytest.approx(5 / 4)
    assert llep_plan(loads, 2, imbalance_metric="expert", imbalance_threshold=1.2).method == "llep"
    assert llep_plan(loads, 2, imbalance_threshold=None).method == "llep"
    assert llep_plan(loads, 2, imbalance_threshold=0.0).method == "llep"  # rho >= 1 > 0


@given(inst=instances(max_n=10), m=st.integers(1, 50), data=st.data())
@settings(max_examples=100)
def test_permuting_experts_permutes_the_plan(inst, m, data):
    loads, pi, P = inst
    positive = loads[loads > 0]
    if len(np.unique(positive)) != len(positive):
        return  # ties are broken by expert id: only tie-free instances permute exactly
    perm = np.array(data.draw(st.permutations(range(len(loads)))))  # new expert k is old expert perm[k]
    a = llep_plan(loads, pi, min_chunk=m, imbalance_threshold=None, num_devices=P)
    b = llep_plan(loads[perm], pi[perm], min_chunk=m, imbalance_threshold=None, num_devices=P)
    assert_array_equal(b.assignment, a.assignment[perm])
    mapped = b.chunks.copy()
    mapped[:, 0] = perm[b.chunks[:, 0]]
    assert_array_equal(mapped, a.chunks)
    assert_array_equal(b.device_loads, a.device_loads)


@given(inst=instances(), eb=st.integers(1, 4), tb=st.integers(0, 2), slack=st.lists(st.integers(0, 12), min_size=6,
                                                                                       max_size=6))
@settings(max_examples=150)
def test_memory_aware_plan_stays_within_the_limit(inst, eb, tb, slack):
    # a limit that the standard plan meets stays met: the test uses the device's effective load
    loads, pi, P = inst
    native = np.bincount(pi, minlength=P) * eb + np.bincount(pi, weights=loads, minlength=P) * tb
    limit = native + np.array(slack[:P]) * (eb + tb)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = llep_plan(loads, pi, min_chunk=1, imbalance_threshold=None, memory_limit=limit, expert_bytes=eb,
                        token_bytes=tb, num_devices=P)
    check_plan(res, loads, pi, P)
    assert np.all(res.peak_memory <= limit)
    # a remainder with nowhere to go stays native, where the limit (met by the standard plan) still holds it
    assert res.feasible and res.message == ""
    assert not any(issubclass(w.category, RuntimeWarning) for w in caught)
    if tb == 0:  # the cardinality form: at most F_p = slack_p foreign experts on device p
        hosted = np.bincount(res.weight_transfers[:, 2], minlength=P)
        assert np.all(hosted <= np.array(slack[:P]))


# --------------------------------------------------------------------------------------------------
# dtypes, edges, batches, workers
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16, np.float64])
def test_count_dtypes_agree(dtype):
    rng = np.random.default_rng(7)
    loads = rng.integers(0, 5000, (6, 24))
    ref = llep_plan(loads.astype(np.int64), 4, min_chunk=64)
    res = llep_plan(loads.astype(dtype), 4, min_chunk=64)
    assert_same_result(res, ref)
    one = llep_plan(loads[2].astype(dtype), 4, min_chunk=64)
    assert_array_equal(one.chunks, ref.chunks[ref.chunks[:, 0] == 2, 1:])


def test_int32_loads_reach_the_kernel_without_a_copy():
    from numtk.moe import _llep

    loads = np.arange(24, dtype=np.int32).reshape(2, 12)
    assert _llep._counts(loads) is loads
    row = loads[1]
    assert _llep._counts(row) is row and np.shares_memory(row, loads)
    assert _llep._counts(loads.astype(np.int64)).dtype == np.int64


def test_all_zero_loads():
    res = llep_plan(np.zeros(8, dtype=np.int64), 4)
    assert res.method == "standard" and res.max_load == 0 and res.chunks.shape == (0, 4)
    res = llep_plan(np.zeros(8, dtype=np.int64), 4, imbalance_threshold=None)
    assert res.method == "llep" and res.max_load == 0 and res.capacity == 0 and res.lower_bound == 0
    assert res.imbalance_ratio == 1.0 and res.weight_transfers.shape == (0, 3)


def test_one_expert_and_one_device():
    res = unconstrained([30], [0], num_devices=3)  # P > N: the devices without experts take the overflow
    assert_array_equal(res.device_loads, [10, 10, 10])
    assert_array_equal(res.chunks, [[0, 0, 0, 10], [0, 1, 10, 20], [0, 2, 20, 30]])
    one = unconstrained([30, 5], 1)
    assert_array_equal(one.device_loads, [35]) and one.forced == 0
    # one device and a capacity below the total: nowhere to spill, the rest stays native and is forced
    low = llep_plan([30, 5], 1, capacity_factor=0.5, min_chunk=1, imbalance_threshold=None)
    # (capacity 18: expert 0 keeps 13 and its other 17 stay, expert 1 finds no room at all: two forced pieces)
    assert_array_equal(low.chunks, [[0, 0, 0, 30], [1, 0, 0, 5]])
    assert low.forced == 2 and low.feasible
    # more devices than experts
    res = unconstrained([7, 5], [0, 1], num_devices=4)
    assert res.max_load == 3 and res.device_loads.sum() == 12


def test_batch_equals_per_layer_loop():
    rng = np.random.default_rng(11)
    batch = rng.integers(0, 3000, (7, 16))
    batch[2] = 1000  # balanced: the gate returns standard EP for this layer
    batch[4] = 0
    kw = dict(min_chunk=128, memory_limit=60.0, expert_bytes=5.0, token_bytes=0.001)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = llep_plan(batch, 4, **kw)
        layers = [llep_plan(row, 4, **kw) for row in batch]
    assert res.assignment.shape == (7, 16, 4) and res.device_loads.shape == (7, 4)
    assert res.chunks.shape[1] == 5 and res.weight_transfers.shape[1] == 4
    assert res.peak_memory.shape == (7, 4) and res.feasible.dtype == bool
    assert list(res.method) == [r.method for r in layers] and res.method[2] == "standard"
    for name in ("assignment", "device_loads", "max_load", "lower_bound", "capacity", "imbalance_ratio", "forced",
                 "peak_memory", "feasible"):
        assert_array_equal(res[name], np.stack([np.asarray(r[name]) for r in layers]), err_msg=name)
    for i, r in enumerate(layers):
        assert_array_equal(res.chunks[res.chunks[:, 0] == i, 1:], r.chunks)
        assert_array_equal(res.weight_transfers[res.weight_transfers[:, 0] == i, 1:], r.weight_transfers)
    # per-source loads (L, N, S) are summed over sources
    split = np.stack([batch // 3, batch - batch // 3], axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_same_result(llep_plan(split, 4, **kw), res)
    std = standard_ep_plan(batch, 4)
    assert_array_equal(std.max_load, [standard_ep_plan(row, 4).max_load for row in batch])
    assert std.chunks.shape[1] == 5 and list(std.method) == ["standard"] * 7 and std.peak_memory is None


@pytest.mark.parametrize("workers", [2, -1, map, "threadpool"])
@pytest.mark.parametrize("memory", [False, True])
def test_workers_do_not_change_the_plans(workers, memory):
    rng = np.random.default_rng(5)
    batch = rng.integers(0, 10**5, (9, 32)).astype(np.int64)
    batch[:, 3] *= 20
    batch[4] = 10**5  # balanced: gated
    # a limit that some layers' overflow cannot meet: remainders kept native, on several threads
    kw = dict(memory_limit=np.full(8, 4 * 10**5 + 5.0), expert_bytes=1.0, token_bytes=1.0) if memory else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        serial = llep_plan(batch, 8, min_chunk=256, **kw)
        if workers == "threadpool":
            with ThreadPoolExecutor(3) as pool:
                res = llep_plan(batch, 8, min_chunk=256, workers=pool.map, **kw)
        else:
            res = llep_plan(batch, 8, min_chunk=256, workers=workers, **kw)
    assert_same_result(res, serial)
    if memory:
        assert 0 < np.count_nonzero(~serial.feasible) < 9 and len(caught) == 2
        assert all((m == "") == f for m, f in zip(serial.message, serial.feasible))


# --------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "error", "name"), [
    (dict(loads=[1, -2, 3, 4]), ValueError, "loads"),
    (dict(loads=[1.5, 2, 3, 4]), ValueError, "loads"),
    (dict(loads=[np.nan, 2, 3, 4]), ValueError, "loads"),
    (dict(loads=[True, False, True, True]), TypeError, "loads"),
    (dict(loads=np.ones((2, 2, 2, 2))), ValueError, "loads"),
    (dict(loads=np.zeros((0, 4))), ValueError, "loads"),
    (dict(loads=np.array([2**62, 2**62, 0, 0], dtype=np.int64)), ValueError, "loads"),
    (dict(loads=[1, 2, 3]), ValueError, "placement"),
    (dict(placement=[0, 1, -1, 0]), ValueError, "placement"),
    (dict(placement=[0, 1, 2, 0], num_devices=2), ValueError, "num_devices"),
    (dict(placement=3), ValueError, "placement"),
    (dict(placement=2.0), TypeError, "placement"),
    (dict(placement=[0.0, 1.0, 0.0, 1.0]), TypeError, "placement"),
    (dict(num_devices=0), ValueError, "num_devices"),
    (dict(capacity_factor=0.0), ValueError, "capacity_factor"),
    (dict(capacity_factor=np.inf), ValueError, "capacity_factor"),
    (dict(min_chunk=0), ValueError, "min_chunk"),
    (dict(min_chunk=2.5), TypeError, "min_chunk"),
    (dict(imbalance_threshold=-1.0), ValueError, "imbalance_threshold"),
    (dict(imbalance_threshold="high"), TypeError, "imbalance_threshold"),
    (dict(imbalance_metric="token"), ValueError, "imbalance_metric"),
    (dict(memory_limit=10.0), ValueError, "expert_bytes"),
    (dict(memory_limit=[1.0, 2.0, 3.0], expert_bytes=1.0), ValueError, "memory_limit"),
    (dict(memory_limit=-1.0, expert_bytes=1.0), ValueError, "memory_limit"),
    (dict(expert_bytes=-1.0), ValueError, "expert_bytes"),
    (dict(token_bytes=np.nan), ValueError, "token_bytes"),
    (dict(workers=0), ValueError, "workers"),
    (dict(workers=1.5), TypeError, "workers"),
])
def test_bad_input_names_the_parameter(kwargs, error, name):
    call = {"loads": [8, 1, 2, 3], "placement": [0, 0, 1, 1], **kwargs}
    loads, placement = call.pop("loads"), call.pop("placement")
    with pytest.raises(error, match=f"`{name}`"):
        llep_plan(loads, placement, **call)
    if set(call) <= {"num_devices", "expert_bytes", "token_bytes"}:
        with pytest.raises(error, match=f"`{name}`"):
            standard_ep_plan(loads, placement, **call)


def test_the_binding_rechecks_what_could_corrupt_memory():
    from numtk.moe import _moe_ext

    loads = np.ones((2, 4), dtype=np.int64)
    pi = np.array([0, 0, 1, 1], dtype=np.int64)
    cap = np.array([2, 2], dtype=np.int64)
    bad = [
        (dict(placement=pi[:3]), "placement"),
        (dict(placement=np.array([0, 0, 1, 2], dtype=np.int64)), "placement"),
        (dict(capacity=cap[:1]), "capacity"),
        (dict(capacity=np.array([2, -1], dtype=np.int64)), "capacity"),
        (dict(loads=-loads), "loads"),
        (dict(loads=np.full((1, 4), 2**61, dtype=np.int64), capacity=cap[:1]), "loads"),
        (dict(min_chunk=0), "min_chunk"),
        (dict(num_devices=0), "num_devices"),
        (dict(memory_limit=np.ones(3)), "memory_limit"),
        (dict(memory_limit=np.ones(2), expert_bytes=np.nan), "expert_bytes"),
        (dict(threads=0), "threads"),
    ]
    for change, name in bad:
        call = dict(loads=loads, placement=pi, capacity=cap, min_chunk=1, num_devices=2, **{})
        call.update(change)
        with pytest.raises(ValueError, match=f"`{name}`"):
            _moe_ext.llep_plan_layers(**call)
    with pytest.raises(TypeError):  # loads are never converted (no hidden copy)
        _moe_ext.llep_plan_layers(loads.astype(np.float64), pi, cap, 1, 2)


def test_a_map_like_callable_must_return_one_result_per_layer():
    with pytest.raises(ValueError, match=r"`workers` returned 0 result\(s\) for 3 item\(s\), one per layer;"):
        llep_plan(np.ones((3, 4), dtype=np.int64), 2, imbalance_threshold=None, workers=lambda f, xs: [])
    # a gated layer is not planned: the count says which layers the items were
    with pytest.raises(ValueError, match=r"0 result\(s\) for 1 item\(s\).*1 of the 2 layer\(s\)"):
        llep_plan(np.array([[10, 0, 1, 1], [3, 3, 3, 3]]), 2, workers=lambda f, xs: [])


def test_the_dense_assignment_is_checked_when_read_not_when_planning():
    # 1e5 experts on 1e5 devices: the plan is 1e5 chunks, its dense (N, P) form 80 GB
    N = 10**5
    res = llep_plan(np.ones(N, dtype=np.int64), N)
    assert res.method == "standard" and res.max_load == 1 and res.chunks.shape == (N, 4)
    with pytest.raises(MemoryError, match="`assignment`.*`chunks`"):
        res.assignment
    batch = standard_ep_plan(np.ones((2, N), dtype=np.int64), N)
    with pytest.raises(MemoryError, match=r"shape \(2, 100000, 100000\).*\(layer, expert, device, start, stop\)"):
        batch["assignment"]
    assert batch.max_load.tolist() == [1, 1]
    # what planning itself allocates is still checked, naming the argument that sizes it
    with pytest.raises(ValueError, match="`num_devices`"):
        llep_plan([5, 1], [0, 1], num_devices=2**31 - 1)
