"""DeepSeek's EPLB (eplb_rebalance) and the GPU loads of current loads under its placement
(eplb_device_loads), against the golden example of the EPLB README, hand-checked cases, a literal
pure-Python transcription of the algorithm, the placement rules checked directly on small random instances
(exact fractions, brute force) and the two policies where they must agree."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from numtk._lib import Result
from numtk.moe import eplb_device_loads, eplb_rebalance
from numtk.moe._eplb import _balanced_packing

# deepseek-ai/EPLB README example (spec A4)
WEIGHT = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
          [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
PHY2LOG = [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
           [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]
GPU_LOADS = [[121.5, 86.5, 125, 113, 147.5, 131.5, 156, 152],
             [173, 179.5, 120.5, 172, 123, 152, 118.5, 117.5]]


# --------------------------------------------------------------------------------------------------
# a literal transcription of spec A2.5 in plain Python, one layer at a time
# --------------------------------------------------------------------------------------------------
def _ref_packing(w, num_packs):
    n = len(w)
    per = n // num_packs
    if per == 1:
        return list(range(n)), [0] * n
    order = sorted(range(n), key=lambda i: (-w[i], i))
    pack_w, pack_n = [0.0] * num_packs, [0] * num_packs
    pack, rank = [None] * n, [None] * n
    for i in order:
        best = None
        for p in range(num_packs):
            if pack_n[p] < per and (best is None or pack_w[p] < pack_w[best]):
                best = p
        pack[i], rank[i] = best, pack_n[best]
        pack_w[best] += w[i]
        pack_n[best] += 1
    return pack, rank


def _ref_replicate(w, num_phy):
    n = len(w)
    phy, rank, cnt = list(range(n)), [0] * n, [1] * n
    for _ in range(n, num_phy):
        best = 0
        for e in range(1, n):
            if w[e] / cnt[e] > w[best] / cnt[best]:
                best = e
        phy.append(best)
        rank.append(cnt[best])
        cnt[best] += 1
    return phy, rank, cnt


def _ref_layer(w, R, groups, nodes, gpus):
    """One layer: (phy2log, phyrank, logcnt) as lists."""
    if groups % nodes:
        groups, nodes = 1, 1
    E = len(w)
    gsize = E // groups
    per_node_groups = groups // nodes
    tg = [sum(w[g * gsize:(g + 1) * gsize]) for g in range(groups)]
    gpack, grank = _ref_packing(tg, nodes)
    position_of = [0] * E
    for e in range(E):
        g, off = divmod(e, gsize)
        position_of[e] = (gpack[g] * per_node_groups + grank[g]) * gsize + off
    expert_at = [0] * E
    for e, m in enumerate(position_of):
        expert_at[m] = e
    per_node = E // nodes
    slots_node = R // nodes
    per_gpu = R // gpus
    phy2log, phyrank = [None] * R, [None] * R
    count_at = [0] * E
    for node in range(nodes):
        wl = [w[expert_at[node * per_node + j]] for j in range(per_node)]
        phy, rank, cnt = _ref_replicate(wl, slots_node)
        for j in range(per_node):
            count_at[node * per_node + j] = cnt[j]
        pack, rip = _ref_packing([wl[phy[s]] / cnt[phy[s]] for s in range(slots_node)], gpus // nodes)
        for s in range(slots_node):
            out = node * slots_node + pack[s] * per_gpu + rip[s]
            phy2log[out] = expert_at[node * per_node + phy[s]]
            phyrank[out] = rank[s]
    logcnt = [count_at[position_of[e]] for e in range(E)]
    return phy2log, phyrank, logcnt


# --------------------------------------------------------------------------------------------------
# the golden example
# --------------------------------------------------------------------------------------------------
def test_readme_example_phy2log():
    res = eplb_rebalance(WEIGHT, num_replicas=16, num_groups=4, num_nodes=2, num_gpus=8)
    assert res.policy == "hierarchical"
    np.testing.assert_array_equal(res.phy2log, PHY2LOG)
    assert res.phy2log.dtype == np.int64 and res.logcnt.dtype == np.int64 and res.log2phy.dtype == np.int64


def test_readme_example_gpu_loads_with_even_splits():
    res = eplb_rebalance(np.array(WEIGHT, dtype=np.int32), 16, 4, 2, 8)
    # the spec's values, and the same from the expected phy2log by hand (each replica w_e / count_e)
    np.testing.assert_array_equal(res.device_loads, GPU_LOADS)
    for layer in range(2):
        phy = PHY2LOG[layer]
        count = np.bincount(phy, minlength=12)
        by_hand = [sum(WEIGHT[layer][e] / count[e] for e in phy[2 * q:2 * q + 2]) for q in range(8)]
        np.testing.assert_allclose(res.device_loads[layer], by_hand, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(res.max_load, [156.0, 179.5])
    ratio = res.max_load / res.device_loads.mean(axis=1)
    np.testing.assert_allclose(ratio, [1.208, 1.242], atol=5e-4)
    # ceil(T / P) of the spec, the floor of any placement of whole tokens
    assert [int(np.ceil(sum(w) / 8)) for w in WEIGHT] == [130, 145]


def test_readme_example_logcnt_and_log2phy():
    res = eplb_rebalance(WEIGHT, 16, 4, 2, 8)
    L, E, maxcnt = res.log2phy.shape
    assert (L, E) == (2, 12) and maxcnt == res.logcnt.max() == 2
    np.testing.assert_array_equal(res.logcnt.sum(axis=1), [16, 16])
    _check_log2phy(res)


def _check_log2phy(res):
    """log2phy lists exactly the slots of each expert (in creation order), -1 padded; logcnt counts them."""
    L, R = res.phy2log.shape
    for layer in range(L):
        np.testing.assert_array_equal(res.logcnt[layer], np.bincount(res.phy2log[layer],
                                                                     minlength=res.logcnt.shape[1]))
        seen = []
        for e, row in enumerate(res.log2phy[layer]):
            c = res.logcnt[layer, e]
            assert np.all(row[c:] == -1) and np.all(row[:c] >= 0)
            assert np.all(res.phy2log[layer, row[:c]] == e)
            seen += row[:c].tolist()
        assert sorted(seen) == list(range(R))


# --------------------------------------------------------------------------------------------------
# hand-checked cases
# --------------------------------------------------------------------------------------------------
def test_global_policy_by_hand():
    # 4 experts, 6 slots on 2 GPUs; num_groups % num_nodes != 0 -> global.
    # Replication: counts 1,1,1,1; +1 to expert 0 (100), then quotients 50,10,60,30: +1 to expert 2.
    # Slots [0,1,2,3,0,2] with replica loads [50,10,30,30,50,30]; packing by decreasing load
    # (ties to lower slot): s0 -> g0, s4 -> g1, s2 -> g0 (tie), s3 -> g1, s5 -> g0 (tie, then g0 full), s1 -> g1.
    res = eplb_rebalance([100, 10, 60, 30], num_replicas=6, num_groups=1, num_nodes=2, num_gpus=2)
    assert res.policy == "global"
    np.testing.assert_array_equal(res.phy2log, [[0, 2, 2, 0, 3, 1]])
    np.testing.assert_array_equal(res.logcnt, [[2, 1, 2, 1]])
    np.testing.assert_array_equal(res.log2phy, [[[0, 3], [5, -1], [1, 2], [4, -1]]])
    np.testing.assert_array_equal(res.device_loads, [[110.0, 90.0]])
    np.testing.assert_array_equal(res.max_load, [110.0])
    # the global policy is the hierarchical one with a single group and node
    one = eplb_rebalance([100, 10, 60, 30], num_replicas=6, num_groups=1, num_nodes=1, num_gpus=2)
    assert one.policy == "hierarchical"
    for f in ("phy2log", "log2phy", "logcnt", "device_loads"):
        np.testing.assert_array_equal(one[f], res[f])


def test_one_dimensional_weight_is_one_layer():
    w = np.array([5.0, 1.0, 7.0, 3.0, 2.0, 2.0])
    res = eplb_rebalance(w, 8, 2, 2, 4)
    res2 = eplb_rebalance(w[None, :], 8, 2, 2, 4)
    assert res.phy2log.shape == (1, 8) and res.device_loads.shape == (1, 4) and res.max_load.shape == (1,)
    for f in ("phy2log", "log2phy", "logcnt", "device_loads", "max_load"):
        np.testing.assert_array_equal(res[f], res2[f])


def test_no_redundancy_and_one_gpu():
    # R == E: every expert exactly once; one GPU: it holds everything
    w = np.array([[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]])
    res = eplb_rebalance(w, 8, 4, 2, 4)
    np.testing.assert_array_equal(res.logcnt, np.ones((1, 8)))
    assert sorted(res.phy2log[0]) == list(range(8))
    res = eplb_rebalance(w, 12, 1, 1, 1)
    np.testing.assert_allclose(res.device_loads, [[w.sum()]])


def test_ties_go_to_lower_ids():
    # all weights equal: replicas go to experts 0, 1, ... in order; packing fills GPUs by id
    res = eplb_rebalance(np.ones(4), 6, 1, 1, 2)
    np.testing.assert_array_equal(res.logcnt, [[2, 2, 1, 1]])
    # all zero: every extra replica goes to expert 0 (0/c ties, lowest id), output stays finite
    res = eplb_rebalance(np.zeros((2, 4)), 8, 1, 1, 2)
    np.testing.assert_array_equal(res.logcnt, [[5, 1, 1, 1]] * 2)
    assert np.all(res.device_loads == 0)


# --------------------------------------------------------------------------------------------------
# against the literal transcription
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_matches_literal_transcription(seed):
    rng = np.random.default_rng(seed)
    configs = [(12, 16, 4, 2, 8), (16, 24, 4, 2, 4), (16, 20, 8, 4, 4), (6, 9, 3, 3, 3), (8, 12, 4, 3, 3),
               (8, 12, 4, 1, 3), (24, 32, 6, 4, 8), (5, 10, 5, 5, 5), (4, 8, 1, 1, 8)]
    for E, R, groups, nodes, gpus in configs:
        # small integers: many ties, which the stable descending order must break by id
        w = rng.integers(0, 5 if seed % 2 else 1000, size=(3, E))
        res = eplb_rebalance(w, R, groups, nodes, gpus)
        assert res.policy == ("hierarchical" if groups % nodes == 0 else "global")
        for layer in range(3):
            phy, rank, cnt = _ref_layer([float(x) for x in w[layer]], R, groups, nodes, gpus)
            np.testing.assert_array_equal(res.phy2log[layer], phy)
            np.testing.assert_array_equal(res.logcnt[layer], cnt)
            maxcnt = res.log2phy.shape[2]
            for s in range(R):
                assert res.log2phy[layer, phy[s], rank[s]] == s
            loads = np.array([w[layer, phy[s]] / cnt[phy[s]] for s in range(R)]).reshape(gpus, -1).sum(1)
            np.testing.assert_allclose(res.device_loads[layer], loads, rtol=1e-12)
            assert maxcnt >= max(cnt)
        assert res.log2phy.shape[2] == res.logcnt.max()
        _check_log2phy(res)
        assert np.all(res.logcnt.sum(axis=1) == R)


# --------------------------------------------------------------------------------------------------
# balanced packing
# --------------------------------------------------------------------------------------------------
def _brute_force_max(w, num_packs):
    """The least possible heaviest pack over all partitions into packs of len(w) / num_packs items."""
    per = len(w) // num_packs
    best = np.inf
    for perm in itertools.permutations(range(len(w))):
        if any(perm[p * per] > perm[(p + 1) * per] for p in range(num_packs - 1)):  # symmetry: packs in order
            continue
        packs = [sum(w[i] for i in perm[p * per:(p + 1) * per]) for p in range(num_packs)]
        best = min(best, max(packs))
    return best


def test_balanced_packing_counts_and_brute_force():
    rng = np.random.default_rng(1)
    for trial in range(40):
        num_packs, per = [(2, 2), (3, 2), (2, 3), (4, 2)][trial % 4]
        w = rng.integers(0, 20, size=(1, num_packs * per)).astype(float)
        pack, rank = _balanced_packing(w, num_packs)
        # every pack gets exactly its count, with ranks 0 .. per - 1
        for p in range(num_packs):
            assert sorted(rank[0, pack[0] == p].tolist()) == list(range(per))
        # the same as the literal rule
        ref_pack, ref_rank = _ref_packing(w[0].tolist(), num_packs)
        np.testing.assert_array_equal(pack[0], ref_pack)
        np.testing.assert_array_equal(rank[0], ref_rank)
        heaviest = max(w[0, pack[0] == p].sum() for p in range(num_packs))
        opt = _brute_force_max(w[0].tolist(), num_packs)
        assert heaviest >= opt
        if per == 2:
            # with two items per pack the greedy pairs the i-th largest with the i-th smallest: optimal
            assert heaviest == opt


def test_balanced_packing_one_item_per_pack_is_identity():
    w = np.array([[1.0, 9.0, 3.0], [5.0, 5.0, 0.0]])
    pack, rank = _balanced_packing(w, 3)
    np.testing.assert_array_equal(pack, [[0, 1, 2], [0, 1, 2]])
    np.testing.assert_array_equal(rank, 0)


# --------------------------------------------------------------------------------------------------
# current loads under the placement
# --------------------------------------------------------------------------------------------------
def test_device_loads_even_splits_by_hand():
    res = eplb_rebalance([100, 10, 60, 30], 6, 1, 2, 2)      # phy2log [0, 2, 2, 0, 3, 1]
    now = eplb_device_loads(res, [41, 5, 91, 4])
    # expert 0: slots 0 (rank 0) and 3 (rank 1): 21 + 20; expert 2: slots 1 (rank 0), 2 (rank 1): 46 + 45
    np.testing.assert_array_equal(now.replica_loads, [21, 46, 45, 20, 4, 5])
    np.testing.assert_array_equal(now.device_loads, [112, 29])
    assert now.max_load == 112 and now.layer == 0
    np.testing.assert_array_equal(now.assignment, [[21, 20], [0, 5], [91, 0], [0, 4]])
    np.testing.assert_array_equal(now.hosted, [[1, 1], [0, 1], [2, 0], [0, 1]])


@pytest.mark.parametrize("layer", [0, 1, -1])
def test_device_loads_properties(layer):
    res = eplb_rebalance(WEIGHT, 16, 4, 2, 8)
    rng = np.random.default_rng(3)
    loads = rng.integers(0, 500, size=12)
    now = eplb_device_loads(res, loads, layer)
    lay = layer % 2
    assert now.layer == lay
    phy = res.phy2log[lay]
    # every expert's shares sum to its load and differ by at most one, the larger ones first-created
    for e in range(12):
        slots = res.log2phy[lay, e, :res.logcnt[lay, e]]
        shares = now.replica_loads[slots]
        assert shares.sum() == loads[e] and shares.max() - shares.min() <= 1
        assert np.all(np.diff(shares) <= 0)
    np.testing.assert_array_equal(now.assignment.sum(axis=1), loads)
    np.testing.assert_array_equal(now.assignment.sum(axis=0), now.device_loads)
    np.testing.assert_array_equal(now.hosted.sum(axis=0), 2)
    # within one slot per replica of the fractional even split
    frac = np.array([sum(loads[e] / res.logcnt[lay, e] for e in phy[2 * q:2 * q + 2]) for q in range(8)])
    assert np.all(np.abs(now.device_loads - frac) < 2)
    # with the historical loads themselves (whole numbers) the even split of the Result is recovered
    same = eplb_device_loads(res, WEIGHT[lay], lay)
    assert np.all(np.abs(same.device_loads - res.device_loads[lay]) <= 1)
    assert same.device_loads.sum() == sum(WEIGHT[lay])


def test_device_loads_refuse_two_dimensional_loads():
    res = eplb_rebalance(WEIGHT, 16, 4, 2, 8)
    with pytest.raises(ValueError, match="routing-slot totals of one layer"):
        eplb_device_loads(res, np.arange(36).reshape(12, 3))


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    (dict(num_replicas=15), ValueError, "num_replicas"),           # not a multiple of num_gpus
    (dict(num_replicas=8, num_gpus=8), ValueError, "num_replicas"),  # below E = 12
    (dict(num_nodes=4, num_gpus=6, num_replicas=18), ValueError, "num_gpus"),  # 6 GPUs on 4 nodes
    (dict(num_groups=5), ValueError, "num_groups"),                # 12 experts in 5 groups
    (dict(num_groups=0), ValueError, "num_groups"),
    (dict(num_nodes=1.5), TypeError, "num_nodes"),
    (dict(num_gpus=True), TypeError, "num_gpus"),
    (dict(num_replicas=2**40), ValueError, "num_replicas"),
    (dict(weight=[[1.0, -1.0] * 6]), ValueError, "weight"),
    (dict(weight=[[1.0, np.nan] * 6]), ValueError, "weight"),
    (dict(weight=np.ones((2, 3, 4))), ValueError, "weight"),
    (dict(weight=np.ones((0, 12))), ValueError, "weight"),
    (dict(weight=np.ones((2, 0))), ValueError, "weight"),
    (dict(weight=[["a"] * 12]), TypeError, "weight"),
    (dict(weight=np.full((1, 12), 1e308)), ValueError, "weight"),
])
def test_eplb_validation(kwargs, exc, name):
    args = dict(weight=WEIGHT, num_replicas=16, num_groups=4, num_nodes=2, num_gpus=8)
    args.update(kwargs)
    with pytest.raises(exc, match=f"`{name}`"):
        eplb_rebalance(**args)


def test_device_loads_validation():
    res = eplb_rebalance(WEIGHT, 16, 4, 2, 8)
    with pytest.raises(TypeError, match="`result`"):
        eplb_device_loads(Result(phy2log=res.phy2log), WEIGHT[0])
    with pytest.raises(TypeError, match="`result`"):
        eplb_device_loads("no", WEIGHT[0])
    bad = Result(**dict(res.items()))
    bad.logcnt = res.logcnt + 1
    with pytest.raises(ValueError, match="`result`"):
        eplb_device_loads(bad, WEIGHT[0])
    with pytest.raises(ValueError, match="`loads`"):
        eplb_device_loads(res, WEIGHT[0][:5])
    with pytest.raises(ValueError, match="`loads`"):
        eplb_device_loads(res, [1.5] * 12)
    with pytest.raises(ValueError, match="`loads`"):
        eplb_device_loads(res, [-1] * 12)
    with pytest.raises(ValueError, match="`layer`"):
        eplb_device_loads(res, WEIGHT[0], 2)
    with pytest.raises(ValueError, match="`layer`"):
        eplb_device_loads(res, WEIGHT[0], -3)
    with pytest.raises(TypeError, match="`layer`"):
        eplb_device_loads(res, WEIGHT[0], 1.0)


# --------------------------------------------------------------------------------------------------
# the rules checked directly on small random instances (brute force, exact fractions)
# --------------------------------------------------------------------------------------------------
def _compositions(total, parts):
    """Every way to write ``total`` as an ordered sum of ``parts`` integers >= 1."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        bounds = (0,) + cuts + (total,)
        yield [bounds[i + 1] - bounds[i] for i in range(parts)]


@pytest.mark.parametrize("seed", range(4))
def test_placement_rules_on_small_random_instances(seed):
    rng = np.random.default_rng(200 + seed)
    checked = 0
    for trial in range(30):
        nodes = int(rng.integers(1, 4))
        groups = nodes * int(rng.integers(1, 3))
        if trial % 5 == 4 and nodes > 1:
            groups += 1                                            # num_groups % num_nodes != 0: global
        group_size = int(rng.integers(1, 3))
        E = groups * group_size
        gpus = nodes * int(rng.integers(1, 3))
        per_gpu = -(-E // gpus) + int(rng.integers(0, 3))
        R = per_gpu * gpus
        w = rng.integers(0, 10, size=(2, E))                       # small integers: many ties
        res = eplb_rebalance(w, R, groups, nodes, gpus)
        hier = groups % nodes == 0
        assert res.policy == ("hierarchical" if hier else "global")
        eff_nodes = nodes if hier else 1
        node_slots = R // eff_nodes
        _check_log2phy(res)
        for layer in range(2):
            phy, cnt = res.phy2log[layer], res.logcnt[layer]
            # R / G replicas per GPU, every expert at least one, the counts are those of phy2log
            assert phy.shape == (R,) and R % gpus == 0 and np.all(cnt >= 1) and cnt.sum() == R
            np.testing.assert_array_equal(np.bincount(phy, minlength=E), cnt)
            # each expert's replicas on a single node (the node's slots are its GPUs' slots)
            node_of_expert = np.full(E, -1)
            for s, e in enumerate(phy):
                assert node_of_expert[e] in (-1, s // node_slots)
                node_of_expert[e] = s // node_slots
            if hier:
                # every group whole on one node, and every node gets exactly num_groups / num_nodes groups
                node_of_group = node_of_expert.reshape(groups, group_size)
                assert np.all(node_of_group == node_of_group[:, :1])
                np.testing.assert_array_equal(np.bincount(node_of_group[:, 0], minlength=nodes),
                                              groups // nodes)
            # replica counts on each node: the highest-averages rule
            for node in range(eff_nodes):
                mine = np.flatnonzero(node_of_expert == node)
                c = {e: int(cnt[e]) for e in mine}
                q = {e: Fraction(int(w[layer, e]), c[e]) for e in mine}
                assert sum(c.values()) == node_slots
                # no expert can hand a replica to another of its node and lower the larger of their loads
                for a in mine:
                    for b in mine:
                        if a != b and c[a] >= 2:
                            moved = max(Fraction(int(w[layer, a]), c[a] - 1), Fraction(int(w[layer, b]), c[b] + 1))
                            assert moved >= max(q[a], q[b])
                # and the largest load per replica is the least any counts >= 1 give (brute force, where
                # the counts to try are few; most nodes qualify)
                if math.comb(node_slots - 1, len(mine) - 1) > 3000:
                    continue
                checked += 1
                best = min(max(Fraction(int(w[layer, e]), k) for e, k in zip(mine, comp))
                           for comp in _compositions(node_slots, len(mine)))
                assert max(q.values()) == best
            # the GPU loads are the even shares of the weights
            shares = w[layer, phy] / cnt[phy]
            np.testing.assert_allclose(res.device_loads[layer], shares.reshape(gpus, -1).sum(axis=1),
                                       rtol=1e-12)
    assert checked >= 60


# --------------------------------------------------------------------------------------------------
# the two policies where they must agree
# --------------------------------------------------------------------------------------------------
def test_global_policy_equals_one_group_on_one_node():
    rng = np.random.default_rng(5)
    for E, R, groups, nodes, gpus in [(6, 8, 3, 2, 4), (12, 18, 4, 3, 6), (12, 18, 6, 4, 8), (10, 10, 5, 2, 2),
                                      (9, 12, 9, 2, 4), (8, 16, 4, 3, 3 * 4)]:
        if R % gpus:
            R = gpus * -(-R // gpus)
        for w in (rng.integers(0, 4, size=(3, E)), rng.random((3, E))):
            glob = eplb_rebalance(w, R, groups, nodes, gpus)
            one = eplb_rebalance(w, R, 1, 1, gpus)
            assert glob.policy == "global" and one.policy == "hierarchical"
            for f in ("phy2log", "log2phy", "logcnt", "device_loads", "max_load"):
                np.testing.assert_array_equal(glob[f], one[f])


def test_one_node_matches_global_policy_without_ties():
    # On one node the groups only change the order in which the node lists its experts, which decides
    # ties and nothing else: with continuous random weights (no ties) the placement is the global one.
    rng = np.random.default_rng(6)
    w = rng.random((4, 12))
    for groups in (2, 3, 4, 6, 12):
        for R, gpus in [(12, 4), (16, 4), (18, 6), (24, 2)]:
            hier = eplb_rebalance(w, R, groups, 1, gpus)
            flat = eplb_rebalance(w, R, 1, 1, gpus)
            for f in ("phy2log", "log2phy", "logcnt", "device_loads"):
                np.testing.assert_array_equal(hier[f], flat[f])


def test_equal_quotients_go_to_the_expert_listed_first_on_its_node():
    # groups (0, 1) and (2, 3) with loads 1 and 2 on one node: the node lists group 1 first, so the one
    # extra replica goes to expert 2 (quotient 1, tied with experts 0 and 3); the global policy lists the
    # experts by id and gives it to expert 0.
    w = [1, 0, 1, 1]
    np.testing.assert_array_equal(eplb_rebalance(w, 5, 2, 1, 1).logcnt, [[1, 1, 2, 1]])
    np.testing.assert_array_equal(eplb_rebalance(w, 5, 1, 1, 1).logcnt, [[2, 1, 1, 1]])
