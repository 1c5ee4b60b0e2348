"""numtk.torch.llep: the MoE layer across P gloo processes, run by a plan, against the dense layer.

Oracles: numtk.moe.moe_forward (the NumPy executor) for the output, and autograd on a dense single-process
layer written here (every token through its k experts, one gathered weight per slot) for the gradients of the
tokens, the router logits and every expert's weights. Each P runs in one spawned group that goes through all
its scenarios (standard EP, LLEP plans made per step, hand-made plans that split an expert over two and
three devices, refused input), so that the file costs two process starts of each size.
"""

import numpy as np
import pytest
import torch
import torch.distributed as dist

from numtk._lib import Result
from numtk.moe import llep_plan, moe_forward, routing_loads, standard_ep_plan
from numtk.torch.llep import llep_moe_forward, run_distributed

D, H = 5, 7


# --------------------------------------------------------------------------------------------------
# data, plans and the dense oracle (used in the parent and, loaded from this file, in the ranks)
# --------------------------------------------------------------------------------------------------
def make_data(sizes, N, seed, hot=0.0):
    """Tokens, logits and cotangents per rank, and the weights of all N experts (float64)."""
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(t, D, generator=g, dtype=torch.float64) for t in sizes]
    logits = [torch.randn(t, N, generator=g, dtype=torch.float64) for t in sizes]
    for lg in logits:  # most tokens prefer expert 0 (and 1): skewed loads that LLEP spills
        lg[:, 0] += hot
        lg[:, 1] += hot / 2
    cots = [torch.randn(t, D, generator=g, dtype=torch.float64) for t in sizes]
    weights = (torch.randn(N, H, D, generator=g, dtype=torch.float64) / 2,
               torch.randn(N, H, D, generator=g, dtype=torch.float64) / 2,
               torch.randn(N, D, H, generator=g, dtype=torch.float64) / 2)
    return xs, logits, cots, weights


def make_plan(chunks, placement, P):
    """A plan Result from hand-written chunks (expert, device, start, stop): the fields the layer reads."""
    chunks = np.asarray(chunks, dtype=np.int64).reshape(-1, 4)
    placement = np.asarray(placement, dtype=np.int64)
    assignment = np.zeros((len(placement), P), dtype=np.int64)
    np.add.at(assignment, (chunks[:, 0], chunks[:, 1]), chunks[:, 3] - chunks[:, 2])
    pairs = []
    for e, p, _, _ in chunks.tolist():
        if p != placement[e] and (e, placement[e], p) not in pairs:
            pairs.append((e, int(placement[e]), p))
    return Result(assignment=assignment, chunks=chunks, placement=placement,
                  weight_transfers=np.array(pairs, dtype=np.int64).reshape(-1, 3))


def dense_layer(x, logits, weights, k, normalize=True):
    """The MoE layer on one process, with autograd: y_t = sum_j g_tj E_{e_tj}(x_t)."""
    order = torch.sort(logits.detach(), dim=1, descending=True, stable=True).indices[:, :k]
    if normalize:
        gates = torch.softmax(torch.gather(logits, 1, order), dim=1)
    else:
        gates = torch.gather(torch.softmax(logits, dim=1), 1, order)
    wg, wu, wd = weights
    y = torch.zeros_like(x)
    for j in range(k):
        e = order[:, j]
        h = torch.nn.functional.silu(torch.einsum("thd,td->th", wg[e], x)) * torch.einsum("thd,td->th", wu[e], x)
        y = y + gates[:, j, None] * torch.einsum("tdh,th->td", wd[e], h)
    return y


def dense_reference(sizes, N, seed, hot, k, normalize=True):
    """Output and gradients of the dense layer on all ranks' tokens, for the loss sum_r <y_r, cot_r>."""
    xs, logits, cots, weights = make_data(sizes, N, seed, hot)
    x = torch.cat(xs).requires_grad_(True)
    lg = torch.cat(logits).requires_grad_(True)
    w = tuple(t.clone().requires_grad_(True) for t in weights)
    y = dense_layer(x, lg, w, k, normalize)
    y.backward(torch.cat(cots))
    out = moe_forward(x.detach().numpy(), lg.detach().numpy(), tuple(t.detach().numpy() for t in weights), top_k=k,
                      normalize=normalize).output
    return dict(y=out, y_torch=y.detach().numpy(), x=x.grad.numpy(), logits=lg.grad.numpy(),
                w=[t.grad.numpy() for t in w], loads=routing_loads(lg.detach().numpy(), k))


def run_layer(sizes, N, seed, hot, k, placement, plan, normalize=True, grad=True):
    """This rank's forward and backward; the gradients of its native experts (zeros where None)."""
    me = dist.get_rank()
    xs, logits, cots, weights = make_data(sizes, N, seed, hot)
    mine = torch.from_numpy(np.flatnonzero(np.asarray(placement) == me))
    experts = tuple(w[mine].clone().requires_grad_(grad) for w in weights)
    x = xs[me].clone().requires_grad_(grad)
    lg = logits[me].clone().requires_grad_(grad)
    y = llep_moe_forward(x, lg, experts, plan, top_k=k, normalize=normalize)
    out = dict(y=y.detach().numpy())
    if grad:
        y.backward(cots[me])
        out.update(x=x.grad.numpy(), logits=lg.grad.numpy(),
                   w=[np.zeros(tuple(w.shape)) if w.grad is None else w.grad.numpy() for w in experts])
    return out


def refused(fn, *args, **kwargs):
    """The (type name, message) of the error every rank must raise."""
    try:
        fn(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)
    return None, "no error"


# --------------------------------------------------------------------------------------------------
# the ranks' programmes
# --------------------------------------------------------------------------------------------------
CASES_2 = {
    # name: (sizes, N, seed, hot, k, placement, plan: "ep" | "llep" | chunks, normalize)
    "standard": ((9, 6), 4, 1, 0.0, 2, [0, 0, 1, 1], "ep", True),
    "llep": ((12, 10), 4, 2, 3.0, 2, [0, 0, 1, 1], "llep", True),
    "llep-top1-unnormalized": ((11, 8), 6, 3, 2.0, 1, [0, 0, 0, 1, 1, 1], "llep", False),
    # expert 0 on both devices, device 1's slots in two pieces (one transfer), expert 3 moved whole
    "split": ((7, 5), 4, 4, 0.0, 2, [0, 0, 1, 1], "split", True),
    # a placement that is not in blocks, and a rank without tokens
    "interleaved": ((10, 0), 4, 5, 2.0, 2, [1, 0, 1, 0], "llep", True),
}


def _plan_for(kind, loads, placement, P):
    if kind == "ep":
        return lambda totals: standard_ep_plan(totals, np.asarray(placement))
    if kind == "llep":
        return lambda totals: llep_plan(totals, np.asarray(placement), min_chunk=1, imbalance_threshold=None)
    if kind == "split":  # loads of expert 0 split as [0, 2) on 1, [2, l0 - 1) on 0, the last slot on 1
        l0 = int(loads[0])
        chunks = [[0, 1, 0, 2], [0, 0, 2, l0 - 1], [0, 1, l0 - 1, l0]]
        chunks += [[e, 0 if e == 3 else int(placement[e]), 0, int(loads[e])] for e in (1, 2, 3) if loads[e]]
        return make_plan(chunks, placement, P)
    if kind == "three":  # expert 0 over devices 2, 0, 1 (two foreign), expert 2 (native 2) on device 1
        l0 = int(loads[0])
        a, b = l0 // 3, 2 * l0 // 3
        chunks = [[0, 2, 0, a], [0, 0, a, b], [0, 1, b, l0]]
        chunks += [[e, 1 if e == 2 else int(placement[e]), 0, int(loads[e])] for e in range(1, len(loads))
                   if loads[e]]
        return make_plan(chunks, placement, P)
    raise AssertionError(kind)


def _programme(cases):
    P = dist.get_world_size()
    results = {}
    for name, (sizes, N, seed, hot, k, placement, kind, normalize) in cases.items():
        xs, logits, _, _ = make_data(sizes, N, seed, hot)
        loads = routing_loads(torch.cat(logits).numpy(), k)
        plan = _plan_for(kind, loads, placement, P)
        results[name] = run_layer(sizes, N, seed, hot, k, placement, plan, normalize)
    return results


def programme_2():
    """P = 2: every case of CASES_2, then refused input, then a valid call on the same group."""
    me = dist.get_rank()
    out = {"cases": _programme(CASES_2)}
    sizes, N, seed, hot, k, placement = (6, 5), 4, 7, 0.0, 2, [0, 0, 1, 1]
    xs, logits, _, weights = make_data(sizes, N, seed, hot)
    loads = routing_loads(torch.cat(logits).numpy(), k)
    mine = torch.from_numpy(np.flatnonzero(np.asarray(placement) == me))
    experts = tuple(w[mine].clone() for w in weights)
    good = make_plan([[e, placement[e], 0, int(loads[e])] for e in range(N) if loads[e]], placement, 2)
    x, lg = xs[me], logits[me]
    errors = {}
    errors["other loads"] = refused(llep_moe_forward, x, lg, experts, standard_ep_plan(loads + 1, 2), top_k=k)
    bad_x = x.clone()
    if me == 1:
        bad_x[0, 0] = float("nan")
    errors["nan on rank 1"] = refused(llep_moe_forward, bad_x, lg, experts, good, top_k=k)
    errors["top_k differs"] = refused(llep_moe_forward, x, lg, experts, good, top_k=1 + me)
    wrong = tuple(w[:1] for w in experts) if me == 0 else experts
    errors["experts of rank 0"] = refused(llep_moe_forward, x, lg, wrong, good, top_k=k)
    no_transfer = Result(**{**good, "chunks": np.array([[e, 1, 0, int(loads[e])] for e in range(N) if loads[e]]),
                            "assignment": np.column_stack([np.zeros(N, np.int64), loads])})
    errors["no transfer"] = refused(llep_moe_forward, x, lg, experts, no_transfer, top_k=k)
    errors["three devices"] = refused(llep_moe_forward, x, lg, experts, standard_ep_plan(loads, [0, 0, 1, 2]), top_k=k)
    errors["grad on rank 0 only"] = refused(llep_moe_forward, x.clone().requires_grad_(me == 0), lg, experts, good,
                                            top_k=k)
    # the same work cut differently: expert 0's slots in two chunks on rank 1
    other = make_plan([[0, 0, 0, 1], [0, 0, 1, int(loads[0])]] + [[e, placement[e], 0, int(loads[e])]
                                                                  for e in range(1, N) if loads[e]], placement, 2)
    errors["plans differ"] = refused(llep_moe_forward, x, lg, experts, good if me == 0 else other, top_k=k)
    out["errors"] = errors
    out["after"] = llep_moe_forward(x, lg, experts, good, top_k=k).numpy()
    return out


CASES_3 = {
    "standard": ((6, 5, 7), 6, 11, 0.0, 2, [0, 0, 1, 1, 2, 2], "ep", True),
    "llep": ((9, 8, 7), 6, 12, 3.0, 2, [0, 0, 1, 1, 2, 2], "llep", True),
    "three": ((8, 6, 7), 6, 13, 2.0, 3, [0, 0, 1, 1, 2, 2], "three", True),
    # rank 1 holds no expert, rank 2 no token
    "empty rank": ((9, 7, 0), 6, 14, 3.0, 2, [0, 0, 2, 2, 0, 2], "llep", True),
}


def programme_3():
    return {"cases": _programme(CASES_3)}


# --------------------------------------------------------------------------------------------------
# the tests
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ranks_2():
    return run_distributed(programme_2, 2, timeout=240)


@pytest.fixture(scope="module")
def ranks_3():
    return run_distributed(programme_3, 3, timeout=240)


def _check_case(ranks, cases, name):
    sizes, N, seed, hot, k, placement, kind, normalize = cases[name]
    ref = dense_reference(sizes, N, seed, hot, k, normalize)
    P = len(ranks)
    bounds = np.cumsum((0,) + tuple(sizes))
    assert np.allclose(ref["y"], ref["y_torch"], rtol=1e-12, atol=1e-13)  # the two dense oracles agree
    for r in range(P):
        got = ranks[r]["cases"][name]
        rows = slice(bounds[r], bounds[r + 1])
        np.testing.assert_allclose(got["y"], ref["y"][rows], rtol=1e-12, atol=1e-13, err_msg=f"{name} y rank {r}")
        np.testing.assert_allclose(got["x"], ref["x"][rows], rtol=1e-11, atol=1e-12, err_msg=f"{name} dx rank {r}")
        np.testing.assert_allclose(got["logits"], ref["logits"][rows], rtol=1e-11, atol=1e-12,
                                   err_msg=f"{name} dlogits rank {r}")
        native = np.flatnonzero(np.asarray(placement) == r)
        for i, key in enumerate(("w_gate", "w_up", "w_down")):
            np.testing.assert_allclose(got["w"][i], ref["w"][i][native], rtol=1e-11, atol=1e-12,
                                       err_msg=f"{name} d{key} rank {r}")
    return ref


@pytest.mark.parametrize("name", list(CASES_2))
def test_two_ranks_equal_the_dense_layer(ranks_2, name):
    ref = _check_case(ranks_2, CASES_2, name)
    sizes, N, seed, hot, k, placement, kind, _ = CASES_2[name]
    if kind == "llep":  # the scenario does move work: the LLEP plan spills, with weight transfers
        plan = llep_plan(ref["loads"], np.asarray(placement), min_chunk=1, imbalance_threshold=None)
        assert len(plan.weight_transfers) >= 1
        assert plan.max_load < standard_ep_plan(ref["loads"], np.asarray(placement)).max_load


@pytest.mark.parametrize("name", list(CASES_3))
def test_three_ranks_equal_the_dense_layer(ranks_3, name):
    _check_case(ranks_3, CASES_3, name)


def test_the_hand_made_plans_split_experts_as_intended():
    # the scenarios' plans are valid for the NumPy executor too, and split as their comments say
    for cases, name, P, spread in ((CASES_2, "split", 2, 2), (CASES_3, "three", 3, 3)):
        sizes, N, seed, hot, k, placement, kind, normalize = cases[name]
        _, logits, _, _ = make_data(sizes, N, seed, hot)
        loads = routing_loads(torch.cat(logits).numpy(), k)
        plan = _plan_for(kind, loads, placement, P)
        assert np.count_nonzero(plan.assignment[0]) == spread  # expert 0 computed on `spread` devices
        xs, logits, _, weights = make_data(sizes, N, seed, hot)
        res = moe_forward(torch.cat(xs).numpy(), torch.cat(logits).numpy(), tuple(w.numpy() for w in weights), plan,
                          top_k=k)
        assert res.weights_received.sum() == len(plan.weight_transfers) >= spread - 1


def test_refused_input_stops_every_rank_with_the_same_error(ranks_2):
    for r in range(2):
        errors = ranks_2[r]["errors"]
        assert errors["other loads"][0] == "ValueError" and "expert loads of `plan`" in errors["other loads"][1]
        assert errors["nan on rank 1"][0] == "ValueError" and "`x` must be finite" in errors["nan on rank 1"][1]
        assert errors["top_k differs"][0] == "ValueError" and "`top_k`" in errors["top_k differs"][1]
        assert errors["experts of rank 0"][0] == "ValueError"
        assert "native experts" in errors["experts of rank 0"][1] or "`experts`" in errors["experts of rank 0"][1]
        assert errors["no transfer"][0] == "ValueError" and "without a weight transfer" in errors["no transfer"][1]
        assert errors["three devices"][0] == "ValueError" and "3 devices" in errors["three devices"][1]
        assert errors["grad on rank 0 only"][0] == "ValueError" and "every rank" in errors["grad on rank 0 only"][1]
        assert errors["plans differ"][0] == "ValueError" and "`plan`" in errors["plans differ"][1]
    # the rank that did not fail names the one that did
    assert "raised on rank 1" in ranks_2[0]["errors"]["nan on rank 1"][1]
    assert "raised on rank" not in ranks_2[1]["errors"]["nan on rank 1"][1]
    # the group still works after the refusals
    sizes, N, seed, hot, k = (6, 5), 4, 7, 0.0, 2
    xs, logits, _, weights = make_data(sizes, N, seed, hot)
    ref = moe_forward(torch.cat(xs).numpy(), torch.cat(logits).numpy(), tuple(w.numpy() for w in weights), top_k=k)
    np.testing.assert_allclose(np.concatenate([ranks_2[0]["after"], ranks_2[1]["after"]]), ref.output, rtol=1e-12,
                               atol=1e-13)


# --------------------------------------------------------------------------------------------------
# one process: argument checks (a group of one rank in this process)
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def group_of_one():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _one_rank_inputs(T=6, N=3):
    x, logits, _, weights = make_data((T,), N, 21, 0.0)
    loads = routing_loads(logits[0].numpy(), 2)
    return x[0], logits[0], weights, standard_ep_plan(loads, 1)


def test_one_rank_is_the_dense_layer(group_of_one):
    x, logits, weights, plan = _one_rank_inputs()
    y = llep_moe_forward(x, logits, weights, plan, top_k=2)
    ref = moe_forward(x.numpy(), logits.numpy(), tuple(w.numpy() for w in weights), top_k=2).output
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-13)
    # float32 follows the input dtype; a dict of weights is accepted
    as_dict = dict(zip(("w_gate", "w_up", "w_down"), (w.float() for w in weights)))
    y32 = llep_moe_forward(x.float(), logits.float(), as_dict, plan, top_k=2)
    assert y32.dtype == torch.float32
    np.testing.assert_allclose(y32.numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("change", "error", "match"), [
    (dict(x=np.ones((6, D))), TypeError, "`x` must be a torch.Tensor"),
    (dict(x=torch.ones(6, D, dtype=torch.int64)), TypeError, "`x` must hold floating-point"),
    (dict(x=torch.ones(5, D, dtype=torch.float64)), ValueError, "one row per token"),
    (dict(router_logits=torch.full((6, 3), float("inf"), dtype=torch.float64)), ValueError,
     "`router_logits` must be finite"),
    (dict(experts=(torch.ones(3, H, D),)), ValueError, "`experts` must be"),
    (dict(experts="weights"), TypeError, "`experts` must be a tuple"),
    (dict(experts={"w_gate": 1}), ValueError, "`experts` as a dict"),
    (dict(plan=None), TypeError, "`plan` must be a plan Result"),
    (dict(plan={"phy2log": 1}), TypeError, "EPLB"),
    (dict(top_k=0), ValueError, "`top_k`"),
    (dict(top_k=4), ValueError, "`top_k`"),
    (dict(normalize="yes"), TypeError, "`normalize`"),
    (dict(group="world"), TypeError, "`group`"),
])
def test_bad_input_is_refused_naming_the_argument(group_of_one, change, error, match):
    x, logits, weights, plan = _one_rank_inputs()
    kwargs = dict(x=x, router_logits=logits, experts=weights, plan=plan, top_k=2)
    kwargs.update(change)
    with pytest.raises(error, match=match):
        llep_moe_forward(**kwargs)


def test_weights_of_another_dtype_and_bad_chunks_are_refused(group_of_one):
    x, logits, weights, plan = _one_rank_inputs()
    with pytest.raises(TypeError, match="dtype of `x`"):
        llep_moe_forward(x, logits, tuple(w.float() for w in weights), plan, top_k=2)
    gap = Result(**{**plan, "chunks": plan.chunks + np.array([0, 0, 1, 1])})
    with pytest.raises(ValueError, match="tile"):
        llep_moe_forward(x, logits, weights, gap, top_k=2)


def test_without_a_process_group_the_error_says_how_to_start_one():
    x, logits, weights, plan = _one_rank_inputs()
    with pytest.raises(RuntimeError, match="init_process_group"):
        llep_moe_forward(x, logits, weights, plan, top_k=2)


def test_a_plan_of_several_layers_needs_layer(group_of_one):
    x, logits, weights, plan = _one_rank_inputs()
    loads = routing_loads(logits.numpy(), 2)
    batch = llep_plan(np.stack([loads + 1, loads]), 1)              # this step's loads are layer 1's
    with pytest.raises(ValueError, match="`plan` is a plan of 2 layers.*pass `layer`"):
        llep_moe_forward(x, logits, weights, batch, top_k=2)
    ref = llep_moe_forward(x, logits, weights, plan, top_k=2)
    for layer in (1, -1):
        np.testing.assert_array_equal(llep_moe_forward(x, logits, weights, batch, top_k=2, layer=layer).numpy(),
                                      ref.numpy())
    with pytest.raises(ValueError, match="expert loads of `plan`"):
        llep_moe_forward(x, logits, weights, batch, top_k=2, layer=0)
    with pytest.raises(ValueError, match="`layer`"):
        llep_moe_forward(x, logits, weights, batch, top_k=2, layer=2)
    with pytest.raises(TypeError, match="`layer`"):
        llep_moe_forward(x, logits, weights, batch, top_k=2, layer=1.5)
    # a planner that makes several layers, and a one-layer plan with layer 0
    planner = lambda totals: standard_ep_plan(np.stack([totals, totals]), 1)  # noqa: E731
    np.testing.assert_array_equal(llep_moe_forward(x, logits, weights, planner, top_k=2, layer=0).numpy(), ref.numpy())
    with pytest.raises(ValueError, match="pass `layer`"):
        llep_moe_forward(x, logits, weights, planner, top_k=2)
    np.testing.assert_array_equal(llep_moe_forward(x, logits, weights, plan, top_k=2, layer=0).numpy(), ref.numpy())


def test_plans_are_checked_as_numtk_moe_checks_them(group_of_one):
    # one helper of numtk.moe checks a plan for the simulator, the NumPy executor and this layer: the same
    # broken plan gets the same message from all three
    from numtk.moe import simulate_ep

    x, logits, weights, plan = _one_rank_inputs()
    fields = dict(plan.items())
    l0 = int(fields["chunks"][0, 3])
    broken = {
        "gap": {"chunks": fields["chunks"] + np.array([0, 0, 1, 1])},
        "reversed": {"chunks": np.r_[[[int(fields["chunks"][0, 0]), 0, l0, 0]], fields["chunks"][1:]]},
        "expert": {"chunks": np.r_[fields["chunks"], [[7, 0, 0, 1]]]},
        "transfer": {"weight_transfers": np.array([[0, 0, 0]])},
        "device_loads": {"device_loads": fields["device_loads"] + 1},
        "assignment": {"assignment": fields["assignment"] + 1},
    }
    for name, change in broken.items():
        bad = Result(**{**fields, **change})
        with pytest.raises(ValueError) as sim:
            simulate_ep(bad)
        with pytest.raises(ValueError) as run:
            llep_moe_forward(x, logits, weights, bad, top_k=2)
        with pytest.raises(ValueError) as ref:
            moe_forward(x.numpy(), logits.numpy(), tuple(w.numpy() for w in weights), bad, top_k=2)
        assert str(sim.value) == str(run.value) == str(ref.value), name
