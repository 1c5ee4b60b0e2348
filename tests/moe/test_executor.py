"""moe_forward and routing_loads: the dense forward against an independent reference, plans of every kind
bit-identical to it, the per-device records, edge cases, dtypes and errors."""

import numpy as np
import pytest

from numtk.moe import eplb_rebalance, llep_plan, moe_forward, optimal_plan, routing_loads, standard_ep_plan
from numtk.moe._plan import plan_result


def _layer(T, N, D, H, *, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(T, D)).astype(dtype)
    logits = rng.normal(size=(T, N))
    experts = tuple((rng.normal(size=s) / np.sqrt(s[-1])).astype(dtype)
                    for s in [(N, H, D), (N, H, D), (N, D, H)])
    return x, logits, experts


def _reference(x, logits, experts, top_k, normalize=True):
    """Plain loops in float64: sort each token's experts by (-logit, id), softmax gates, SwiGLU experts."""
    wg, wu, wd = (np.asarray(w, dtype=np.float64) for w in experts)
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    for t in range(len(x)):
        row = [float(v) for v in logits[t]]
        ranked = sorted(range(len(row)), key=lambda e: (-row[e], e))[:top_k]
        pool = ranked if normalize else range(len(row))
        top = max(row[e] for e in pool)
        denom = sum(np.exp(row[e] - top) for e in pool)
        for e in ranked:
            g = np.exp(row[e] - top) / denom
            h = np.einsum("hd,d->h", wg[e], x[t])
            u = np.einsum("hd,d->h", wu[e], x[t])
            out[t] += g * np.einsum("dh,h->d", wd[e], h / (1 + np.exp(-h)) * u)
    return out


def _plan(loads, pi, P, chunks):
    loads, pi = np.asarray(loads, dtype=np.int64), np.asarray(pi, dtype=np.int64)
    return plan_result(loads, pi, P, np.asarray(chunks, dtype=np.int64).reshape(-1, 4), method="test",
                       capacity=0, imbalance=1.0, forced=0, lower=0, expert_bytes=None, token_bytes=0.0,
                       memory_limit=None)


def _random_chunking(loads, pi, P, rng):
    chunks = []
    for e, load in enumerate(loads):
        if load == 0:
            continue
        cuts = np.unique(np.r_[0, rng.integers(0, load + 1, size=rng.integers(0, 5)), load])
        for a, b in zip(cuts[:-1], cuts[1:]):
            chunks.append([e, rng.integers(P), a, b])
    rng.shuffle(chunks)                          # the plan order of the chunks does not matter
    return _plan(loads, pi, P, chunks)


def _check_records(res, plan, T, k):
    """device_loads, weights_received and device_slots agree with the plan and cover every slot once."""
    np.testing.assert_array_equal(res.device_loads, plan.assignment.sum(axis=0))
    P = plan.assignment.shape[1]
    np.testing.assert_array_equal(res.weights_received, np.bincount(plan.weight_transfers[:, 2], minlength=P))
    done = np.concatenate(res.device_slots)
    routed = np.column_stack([np.repeat(np.arange(T), k), res.experts.ravel()])
    assert len(done) == T * k
    np.testing.assert_array_equal(np.unique(done, axis=0), np.unique(routed, axis=0))
    for p, slots in enumerate(res.device_slots):
        counts = np.bincount(slots[:, 1], minlength=plan.assignment.shape[0])
        np.testing.assert_array_equal(counts, plan.assignment[:, p])


@pytest.mark.parametrize("top_k, normalize", [(1, True), (2, True), (3, False), (4, True)])
def test_dense_forward_matches_an_independent_reference(top_k, normalize):
    x, logits, experts = _layer(23, 5, 6, 7, seed=top_k)
    res = moe_forward(x, logits, experts, top_k=top_k, normalize=normalize)
    np.testing.assert_allclose(res.output, _reference(x, logits, experts, top_k, normalize), rtol=1e-12,
                               atol=1e-14)
    assert res.output.dtype == np.float64
    np.testing.assert_array_equal(res.device_loads, [23 * top_k])
    np.testing.assert_array_equal(res.weights_received, [0])
    gate_sums = res.gates.sum(axis=1)
    if normalize:
        np.testing.assert_allclose(gate_sums, 1.0, rtol=1e-15)
    else:
        assert np.all(gate_sums < 1.0)


def test_routing_takes_the_largest_logits_ties_to_the_lower_id():
    logits = np.array([[0.0, 1.0, 1.0, 0.5], [2.0, 2.0, 2.0, 2.0], [-1.0, -3.0, -2.0, -0.5]])
    x, _, experts = _layer(3, 4, 2, 3)
    res = moe_forward(x, logits, experts, top_k=2)
    np.testing.assert_array_equal(res.experts, [[1, 2], [0, 1], [3, 0]])
    np.testing.assert_allclose(res.gates[1], [0.5, 0.5])
    np.testing.assert_allclose(res.gates[2], [np.exp(0.5) / (1 + np.exp(0.5)), 1 / (1 + np.exp(0.5))])
    np.testing.assert_array_equal(res.expert_loads, [2, 2, 1, 1])
    np.testing.assert_array_equal(routing_loads(logits, 2), res.expert_loads)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_plans_are_bit_identical_to_the_dense_forward(dtype):
    T, N, D, H, k, P = 41, 8, 5, 6, 2, 4
    x, logits, experts = _layer(T, N, D, H, seed=11, dtype=dtype)
    dense = moe_forward(x, logits, experts, top_k=k)
    assert dense.output.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(dense.output, _reference(x, logits, experts, k), rtol=tol, atol=tol)
    loads = routing_loads(logits, k)
    pi = np.arange(N) // (N // P)
    rng = np.random.default_rng(12)
    plans = [standard_ep_plan(loads, P), llep_plan(loads, P, min_chunk=1, imbalance_threshold=None),
             llep_plan(loads, P, min_chunk=3, capacity_factor=1.1, imbalance_threshold=None),
             optimal_plan(loads, P, max_foreign=1)]
    plans += [_random_chunking(loads, pi, P, rng) for _ in range(8)]
    plans += [_random_chunking(loads, rng.integers(0, 6, size=N), 6, rng) for _ in range(4)]
    assert any(len(p.weight_transfers) for p in plans)
    for plan in plans:
        res = moe_forward(x, logits, experts, plan, top_k=k)
        assert res.output.dtype == dtype
        np.testing.assert_array_equal(res.output, dense.output)
        np.testing.assert_array_equal(res.experts, dense.experts)
        np.testing.assert_array_equal(res.gates, dense.gates)
        _check_records(res, plan, T, k)


def test_llep_plan_balances_the_executed_slots():
    T, N, D, H, k, P = 64, 8, 4, 4, 2, 4
    x, logits, experts = _layer(T, N, D, H, seed=21)
    logits[:, 0] += 3.0                                      # a hot expert
    loads = routing_loads(logits, k)
    plan = llep_plan(loads, P, min_chunk=1, imbalance_threshold=None)
    res = moe_forward(x, logits, experts, plan, top_k=k)
    assert res.device_loads.max() == -(-T * k // P)
    assert res.weights_received.sum() == len(plan.weight_transfers) > 0
    np.testing.assert_array_equal(res.output, moe_forward(x, logits, experts, top_k=k).output)


def test_eplb_placement_is_carried_out():
    T, N, D, H, k = 50, 6, 3, 4, 2
    x, logits, experts = _layer(T, N, D, H, seed=31)
    eplb = eplb_rebalance([[50, 10, 5, 20, 8, 3], [1, 1, 1, 1, 1, 1]], num_replicas=8, num_groups=1, num_nodes=1,
                          num_gpus=4)
    dense = moe_forward(x, logits, experts, top_k=k)
    for layer in (0, -1):
        res = moe_forward(x, logits, experts, eplb, top_k=k, layer=layer)
        np.testing.assert_array_equal(res.output, dense.output)
        assert not res.weights_received.any()
        hosted = eplb.phy2log[layer].reshape(4, 2)
        for q, slots in enumerate(res.device_slots):
            assert set(slots[:, 1].tolist()) <= set(hosted[q].tolist())
    with pytest.raises(ValueError, match="`layer`"):
        moe_forward(x, logits, experts, eplb, top_k=k, layer=2)


def test_edge_cases():
    T, N, D, H = 12, 4, 3, 2
    x, logits, experts = _layer(T, N, D, H, seed=41)
    logits[:, 3] = -50.0                                       # expert 3 is never chosen
    dense = moe_forward(x, logits, experts, top_k=2)
    assert dense.expert_loads[3] == 0
    loads = routing_loads(logits, 2)
    # device 2 of 3 holds no expert and computes nothing
    idle = standard_ep_plan(loads, np.array([0, 0, 1, 1]), num_devices=3)
    res = moe_forward(x, logits, experts, idle, top_k=2)
    np.testing.assert_array_equal(res.output, dense.output)
    assert res.device_loads[2] == 0 and res.device_slots[2].shape == (0, 2)
    # top_k = N: every expert computes every token
    full = moe_forward(x, logits, experts, top_k=N)
    np.testing.assert_array_equal(full.expert_loads, [T] * N)
    np.testing.assert_allclose(full.output, _reference(x, logits, experts, N), rtol=1e-12, atol=1e-14)
    plan = llep_plan(routing_loads(logits, N), 2, min_chunk=1, imbalance_threshold=None)
    np.testing.assert_array_equal(moe_forward(x, logits, experts, plan, top_k=N).output, full.output)
    # no tokens
    empty = moe_forward(np.zeros((0, D)), np.zeros((0, N)), experts, top_k=2)
    assert empty.output.shape == (0, D) and not empty.expert_loads.any()
    # a dict of experts, a single expert, integer input
    as_dict = dict(zip(("w_gate", "w_up", "w_down"), experts))
    np.testing.assert_array_equal(moe_forward(x, logits, as_dict, top_k=2).output, dense.output)
    one = moe_forward(x, logits[:, :1], tuple(w[:1] for w in experts), top_k=1)
    np.testing.assert_allclose(one.gates, 1.0)
    ints = moe_forward(np.arange(T * D).reshape(T, D) % 3, logits, experts, top_k=2)
    assert ints.output.dtype == np.float64


def test_float32_stays_float32_unless_mixed():
    x, logits, experts = _layer(9, 3, 4, 5, seed=51, dtype=np.float32)
    assert moe_forward(x, logits, experts).output.dtype == np.float32
    assert moe_forward(x.astype(np.float64), logits, experts).output.dtype == np.float64


def test_rows_do_not_depend_on_their_batch():
    # the property the bit-exactness rests on: an expert's output row is the same alone or in any batch
    from numtk.moe._executor import _swiglu

    for dtype in (np.float32, np.float64):
        x, _, (wg, wu, wd) = _layer(70, 1, 33, 17, seed=61, dtype=dtype)
        full = _swiglu(x, wg[0], wu[0], wd[0])
        for t in (0, 1, 35, 69):
            np.testing.assert_array_equal(_swiglu(x[t:t + 1], wg[0], wu[0], wd[0])[0], full[t])
        np.testing.assert_array_equal(_swiglu(x[::-1], wg[0], wu[0], wd[0]), full[::-1])


def test_routing_loads_per_source():
    rng = np.random.default_rng(71)
    logits = rng.normal(size=(10, 5))
    per = routing_loads(logits, 2, num_sources=3)
    assert per.shape == (5, 3) and per.dtype == np.int64
    np.testing.assert_array_equal(per.sum(axis=1), routing_loads(logits, 2))
    assert per.sum() == 20
    source = np.arange(10) * 3 // 10                         # blocks of 4, 3, 3 tokens
    np.testing.assert_array_equal(source, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    for s in range(3):
        np.testing.assert_array_equal(per[:, s], routing_loads(logits[source == s], 2))
    np.testing.assert_array_equal(routing_loads(logits, 2, num_sources=1)[:, 0], routing_loads(logits, 2))


def test_errors():
    T, N, D, H = 8, 4, 3, 2
    x, logits, experts = _layer(T, N, D, H, seed=81)
    loads = routing_loads(logits, 2)
    with pytest.raises(ValueError, match="the expert loads of `plan` must equal the router's slot counts"):
        moe_forward(x, logits, experts, standard_ep_plan(loads + np.array([1, -1, 0, 0]), 2), top_k=2)
    with pytest.raises(ValueError, match="`plan` is a plan of 8 experts"):
        moe_forward(x, logits, experts, standard_ep_plan(np.r_[loads, loads], 2), top_k=2)
    with pytest.raises(ValueError, match="`top_k`"):
        moe_forward(x, logits, experts, top_k=5)
    with pytest.raises(ValueError, match="`top_k`"):
        routing_loads(logits, 0)
    with pytest.raises(TypeError, match="`top_k`"):
        moe_forward(x, logits, experts, top_k=1.5)
    with pytest.raises(ValueError, match="`router_logits`"):
        moe_forward(x, logits[:5], experts)
    with pytest.raises(ValueError, match="`router_logits`"):
        moe_forward(x, np.full((T, N), np.nan), experts)
    with pytest.raises(ValueError, match="`x`"):
        moe_forward(np.full((T, D), np.inf), logits, experts)
    with pytest.raises(ValueError, match="`experts`"):
        moe_forward(x, logits, experts[:2])
    with pytest.raises(ValueError, match="`experts`"):
        moe_forward(x, logits, (experts[0], experts[1], experts[1]))
    with pytest.raises(ValueError, match="`experts`"):
        moe_forward(x, logits, {"w_gate": experts[0], "w_up": experts[1], "down": experts[2]})
    with pytest.raises(TypeError, match="`experts`"):
        moe_forward(x, logits, experts[0])
    with pytest.raises(ValueError, match=r"`experts\['w_up'\]`"):
        moe_forward(x, logits, (experts[0], np.full_like(experts[1], np.nan), experts[2]))
    with pytest.raises(TypeError, match="`plan`"):
        moe_forward(x, logits, experts, "standard")
    with pytest.raises(TypeError, match="`normalize`"):
        moe_forward(x, logits, experts, normalize=1)
    with pytest.raises(ValueError, match="`layer`"):
        moe_forward(x, logits, experts, layer=1)
    with pytest.raises(ValueError, match="`num_sources`"):
        routing_loads(logits, 2, num_sources=0)
    # a plan that computes an expert where its weights are not
    plan = _plan(loads, [0, 0, 1, 1], 2, [[0, 1, 0, loads[0]], [1, 0, 0, loads[1]], [2, 1, 0, loads[2]],
                                          [3, 1, 0, loads[3]]])
    tampered = dict(plan.items())
    tampered["weight_transfers"] = np.zeros((0, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="without a weight transfer"):
        moe_forward(x, logits, experts, tampered, top_k=2)


def test_plans_are_carried_out_from_their_chunks():
    T, N, D, H, k, P = 40, 6, 3, 4, 2, 3
    x, logits, experts = _layer(T, N, D, H, seed=91)
    logits[:, 0] += 2.0
    dense = moe_forward(x, logits, experts, top_k=k)
    loads = routing_loads(logits, k)
    plan = llep_plan(loads, P, min_chunk=1, imbalance_threshold=None)
    res = moe_forward(x, logits, experts, plan, top_k=k)
    assert "assignment" not in plan.__dict__                  # the dense assignment is never built
    np.testing.assert_array_equal(res.output, dense.output)
    _check_records(res, plan, T, k)
    # a mapping with the dense assignment and no chunks: each expert's slots cut in device order
    fields = {key: plan[key] for key in ("assignment", "weight_transfers", "placement")}
    by_device = moe_forward(x, logits, experts, fields, top_k=k)
    np.testing.assert_array_equal(by_device.output, dense.output)
    np.testing.assert_array_equal(by_device.device_loads, res.device_loads)
    for p, slots in enumerate(by_device.device_slots):
        np.testing.assert_array_equal(np.bincount(slots[:, 1], minlength=N), plan.assignment[:, p])
    # a plan of several layers: `layer` picks the one routed now
    batch = llep_plan(np.stack([loads[::-1], loads]), P, min_chunk=1, imbalance_threshold=None)
    np.testing.assert_array_equal(moe_forward(x, logits, experts, batch, top_k=k, layer=1).output, dense.output)
    with pytest.raises(ValueError, match="the expert loads of `plan` must equal"):
        moe_forward(x, logits, experts, batch, top_k=k, layer=0)
