"""Fuzz cases of numtk.moe (see _harness.py for the catalogue and the outcomes).

Plans are of a few experts on two to four devices, so that every call takes well under a second. Each room
of the area keeps its cases in its own section below.
"""

import numpy as np

from _harness import Case


def _m():
    import numtk.moe as m
    return m


def _loads8():
    return np.array([40, 3, 0, 9, 1, 1, 30, 4], dtype=np.int64)


# --- planning: llep_plan, standard_ep_plan ----------------------------------------------------------
_PI8 = [0, 0, 1, 1, 2, 2, 3, 3]


def _llep():
    # memory-aware, so that the byte arguments reach the planner
    return _m().llep_plan, (_loads8(), np.array(_PI8)), {"min_chunk": 4, "imbalance_threshold": None,
                                                         "memory_limit": 40.0, "expert_bytes": 8.0,
                                                         "token_bytes": 0.25}


def _llep_batch():
    # three layers of three experts (the catalogue's (6, 3) arrays are six such layers), on two threads
    loads = np.array([[30, 2, 1], [5, 5, 5], [0, 9, 40]], dtype=np.int64)
    return _m().llep_plan, (loads, np.array([0, 1, 1])), {"min_chunk": 2, "workers": 2}


def _standard():
    return _m().standard_ep_plan, (_loads8(), np.array(_PI8)), {"expert_bytes": 8.0, "token_bytes": 0.25}


PLANNING: list = [
    Case("numtk.moe.llep_plan", _llep, {}, positional={"loads": 0, "placement": 1}),
    # (2, 3, 4) is a valid batch: two layers of three experts, loads given per source (summed)
    Case("numtk.moe.llep_plan[batch]", _llep_batch, {"loads": "array2d", "workers": "workers",
                                                      "num_devices": "count"},
         positional={"loads": 0, "placement": 1}, skip={"loads": ("np.ones((2, 3, 4))",)}),
    Case("numtk.moe.standard_ep_plan", _standard, {}, positional={"loads": 0, "placement": 1}),
]

# --- eplb_rebalance and the load generators ---------------------------------------------------------
_EPLB_WEIGHT = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]


def _eplb():
    return _m().eplb_rebalance, (np.array(_EPLB_WEIGHT, dtype=np.float64), 16, 4, 2, 8), {}


def _eplb_global():
    # 3 experts, 6 replicas on 3 GPUs of 3 nodes, one group (1 % 3 != 0: the global policy); most edge
    # arrays of the catalogue are valid weights here
    return _m().eplb_rebalance, (np.array([[5.0, 1.0, 3.0], [0.0, 2.0, 2.0]]), 6, 1, 3, 3), {}


def _eplb_device_loads():
    m = _m()
    res = m.eplb_rebalance(np.array(_EPLB_WEIGHT, dtype=np.float64), 16, 4, 2, 8)
    return m.eplb_device_loads, (res, np.arange(12, dtype=np.int64) * 7), {"layer": 1}


def _hot(style):
    def make():
        return _m().hot_expert_loads, (8, 100), {"top_k": 2, "hot_fraction": 0.3, "num_hot": 2, "num_sources": 2,
                                                 "style": style}
    return make


def _zipf():
    return _m().zipf_loads, (8, 100), {"s": 1.2, "top_k": 2, "size": 3, "rng": 0}


def _dirichlet():
    return _m().dirichlet_loads, (8, 100), {"alpha": 0.5, "top_k": 2, "size": 3, "drift": 10.0, "rng": 0}


_EPLB_ARGS = {"num_replicas": 1, "num_groups": 2, "num_nodes": 3, "num_gpus": 4}
_GEN = {"num_experts": 0, "num_tokens": 1}
EPLB_LOADS: list = [
    Case("numtk.moe.eplb_rebalance", _eplb, {}, positional={"weight": 0, **_EPLB_ARGS}),
    # np.ones(6) (not 2-D) is a valid one-layer weight of 6 experts for 6 replicas
    Case("numtk.moe.eplb_rebalance[global]", _eplb_global, {"weight": ("array1d", "array2d")},
         positional={"weight": 0, **_EPLB_ARGS}, skip={"weight": ("np.ones(6)",)}),
    Case("numtk.moe.eplb_device_loads", _eplb_device_loads, {}, positional={"result": 0, "loads": 1}),
    Case("numtk.moe.hot_expert_loads", _hot("slots"), {}, positional=_GEN),
    Case("numtk.moe.hot_expert_loads[anchor]", _hot("anchor"),
         {"num_experts": "count", "num_tokens": "count", "top_k": "int>=1", "hot_fraction": "prob",
          "num_hot": "int>=1", "num_sources": "count"}, positional=_GEN),
    Case("numtk.moe.zipf_loads", _zipf, {}, positional=_GEN),
    Case("numtk.moe.dirichlet_loads", _dirichlet, {}, positional=_GEN),
]

# --- optimal_plan -----------------------------------------------------------------------------------
def _milp():
    # all eight experts native on device 0 of 5, room for one foreign expert per device
    return _m().optimal_plan, (_loads8(), 1), {"num_devices": 5, "max_foreign": 1, "min_chunk": 2,
                                               "time_limit": 10.0}


def _milp_memory():
    return _m().optimal_plan, (_loads8(), 1), {"num_devices": 5, "memory_limit": np.full(5, 150.0),
                                               "expert_bytes": 10.0, "token_bytes": 0.5, "transfer_weight": 0.5}


MILP: list = [
    Case("numtk.moe.optimal_plan", _milp, {}, positional={"loads": 0, "placement": 1}),
    Case("numtk.moe.optimal_plan[memory]", _milp_memory,
         {"memory_limit": ("real>=0", "array1d"), "expert_bytes": "real>=0", "token_bytes": "real>=0",
          "transfer_weight": "real>=0", "time_limit": "real>0"}),
]

# --- simulate_ep, moe_forward -----------------------------------------------------------------------
def _hand_plan():
    """Experts 0, 1 native on device 0 and 2 on device 1; device 1 computes 3 slots of expert 0."""
    from numtk.moe._plan import plan_result

    return plan_result(np.array([10, 2, 3]), np.array([0, 0, 1]), 2,
                       np.array([[0, 0, 0, 7], [0, 1, 7, 10], [1, 0, 0, 2], [2, 1, 0, 3]]), method="test",
                       capacity=8, imbalance=1.0, forced=0, lower=8, expert_bytes=None, token_bytes=0.0,
                       memory_limit=None)


def _simulate():
    # loads are the totals (N,), the per-source counts (N, S) go in source_loads
    return _m().simulate_ep, (_hand_plan(),), {"cost_model": {"hidden_size": 64, "intermediate_size": 32},
                                               "loads": np.array([10, 2, 3]),
                                               "source_loads": np.array([[6, 4], [2, 0], [1, 2]]), "overlap": True}


def _plan_layer():
    batch = _m().llep_plan(np.array([[10, 0, 1, 1], [3, 3, 3, 3]]), 2, min_chunk=1)
    return _m().plan_layer, (batch,), {"layer": 1}


def _simulate_eplb():
    m = _m()
    res = m.eplb_rebalance(np.array(_EPLB_WEIGHT, dtype=np.float64), 16, 4, 2, 8)
    return m.simulate_ep, (res,), {"cost_model": "h200", "loads": np.arange(12, dtype=np.int64) * 7, "layer": 1}


def _layer():
    """T = 6 tokens of D = 3 features over N = 3 experts of H = 2: the catalogue's (6, 3) arrays fit x and the
    router logits."""
    rng = np.random.default_rng(0)
    experts = tuple(rng.normal(size=s) for s in [(3, 2, 3), (3, 2, 3), (3, 3, 2)])
    return rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), experts


def _forward():
    x, logits, experts = _layer()
    return _m().moe_forward, (x, logits, experts), {"top_k": 2, "normalize": False}


def _forward_plan():
    m = _m()
    x, logits, experts = _layer()
    plan = m.llep_plan(m.routing_loads(logits, 2), np.array([0, 0, 1]), min_chunk=1, imbalance_threshold=None)
    return m.moe_forward, (x, logits, experts, plan), {"top_k": 2}


def _routing_loads():
    return _m().routing_loads, (_layer()[1],), {"top_k": 2, "num_sources": 2}


SIMULATION: list = [
    Case("numtk.moe.plan_layer", _plan_layer, {}, positional={"plan": 0}),
    Case("numtk.moe.simulate_ep", _simulate, {}, positional={"plan": 0}),
    Case("numtk.moe.simulate_ep[eplb]", _simulate_eplb, {"plan": "option", "loads": "array1d", "layer": "index"},
         positional={"plan": 0}),
    # plan=None is the documented default (the dense forward on one device)
    Case("numtk.moe.moe_forward", _forward, {}, positional={"x": 0, "router_logits": 1, "experts": 2},
         skip={"plan": ("None",)}),
    Case("numtk.moe.moe_forward[plan]", _forward_plan,
         {"x": "array2d", "router_logits": "array2d", "top_k": "int>=1", "layer": "index"},
         positional={"x": 0, "router_logits": 1, "experts": 2, "plan": 3}),
    Case("numtk.moe.routing_loads", _routing_loads, {}, positional={"router_logits": 0}),
]

# --- PuzzleMoE merging: puzzle_merge, merge_experts and the baselines ----------------------------------
def _pair63():
    g = np.random.default_rng(0)
    return g.normal(0, 0.02, (6, 3)), g.normal(0, 0.02, (6, 3))


def _puzzle():
    W_i, W_j = _pair63()
    return _m().puzzle_merge, (W_i, W_j), {"activation_norms": (np.array([1.0, 2.0, 0.5]), np.ones(3)),
                                            "similarity_threshold": 0.4}


def _merge_experts():
    # four experts of (6, 3): the catalogue's (6, 3) arrays are one expert's shape, not a layer's
    experts = np.random.default_rng(1).normal(0, 0.02, (4, 6, 3)).astype(np.float32)
    return _m().merge_experts, (experts,), {"pairs": "auto", "activation_norms": np.ones((4, 3)),
                                            "underflow": "zero", "workers": 1}


def _merge_gated():
    g = np.random.default_rng(2)
    layer = {"w_gate": g.normal(0, 0.1, (2, 4, 3)), "w_up": g.normal(0, 0.1, (2, 4, 3)),
             "w_down": g.normal(0, 0.1, (2, 3, 4))}
    return _m().merge_experts, (layer, np.array([[1, 0]])), {"activation_norms": (np.ones((2, 3)), np.ones((2, 4)))}


def _experts5():
    # five experts of (6, 3), so that the catalogue's five-entry arrays are valid weights
    return list(np.random.default_rng(3).normal(size=(5, 6, 3)))


def _average():
    return _m().average_merge, (_experts5(),), {"weights": np.arange(1.0, 6.0)}


def _ties():
    return _m().ties_merge, (_experts5(),), {"density": 0.4, "base": "zero", "majority_sign": "frequency",
                                            "weights": np.ones(5)}


def _dare(combine):
    def make():
        return _m().dare_merge, (_experts5(),), {"density": 0.5, "base": "mean", "combine": combine,
                                                "majority_sign": "total", "rng": 0, "weights": np.full(5, 0.2)}
    return make


def _error():
    W_i, W_j = _pair63()
    return _m().reconstruction_error, (W_i, W_j), {"X": np.random.default_rng(4).normal(size=(5, 3))}


# (2, 3, 4) is a stack of two (3, 4) experts: a valid `weights_list`
_STACK_OK = {"weights_list": ("np.ones((2, 3, 4))",)}
PUZZLE: list = [
    Case("numtk.moe.puzzle_merge", _puzzle, {}, positional={"W_i": 0, "W_j": 1}),
    Case("numtk.moe.merge_experts", _merge_experts, {}, positional={"experts": 0},
         skip={"activation_norms": ("None",)}),
    Case("numtk.moe.merge_experts[gated]", _merge_gated,
         {"experts": "option", "pairs": ("option", "array2d"), "activation_norms": ("option", "array2d")},
         positional={"experts": 0, "pairs": 1}, skip={"activation_norms": ("None",)}),
    Case("numtk.moe.average_merge", _average, {}, positional={"weights_list": 0}, skip=_STACK_OK),
    Case("numtk.moe.ties_merge", _ties, {}, positional={"weights_list": 0}, skip=_STACK_OK),
    Case("numtk.moe.dare_merge", _dare("ties"), {}, positional={"weights_list": 0}, skip=_STACK_OK),
    Case("numtk.moe.dare_merge[linear]", _dare("linear"), {"weights": "array1d", "density": "prob",
                                                           "base": ("option", "array2d")},
         positional={"weights_list": 0}),
    Case("numtk.moe.reconstruction_error", _error, {}, positional={"W_hat": 0, "W": 1}),
]

# --- bf16 packing: pack_bf16, unpack_bf16, packed_matvec ------------------------------------------------
def _bf16_parts():
    """A merged (6, 3) pair (magnitude, mask_i, mask_j, sign_i, sign_j): the catalogue's (6, 3) arrays have the
    shape of every part."""
    g = np.random.default_rng(5)
    magnitude = np.abs(g.normal(0, 0.02, (6, 3))).astype(np.float32)
    return (magnitude, *(g.random((4, 6, 3)) < 0.5))


def _pack_bf16():
    return _m().pack_bf16, _bf16_parts(), {"underflow": "zero", "return_clamped": True, "workers": 1}


def _unpack_bf16():
    m = _m()
    return m.unpack_bf16, (m.pack_bf16(*_bf16_parts()),), {"expert": 1, "as_float": True, "workers": 1}


def _packed_matvec():
    # (4, 3) words: the catalogue's (6, 3) arrays are batches of six vectors for `x`; none has the shape of the
    # product, (4,) or (b, 4), so every `out` it offers is refused
    m = _m()
    packed = m.pack_bf16(*(part[:4] for part in _bf16_parts()))
    return m.packed_matvec, (packed, np.ones((2, 3), np.float32), 0), {"workers": 1}


_PARTS = {"magnitude": 0, "mask_i": 1, "mask_j": 2, "sign_i": 3, "sign_j": 4}
BF16: list = [
    Case("numtk.moe.pack_bf16", _pack_bf16, {}, positional=_PARTS),
    # expert=None is the documented default (the components)
    Case("numtk.moe.unpack_bf16", _unpack_bf16, {}, positional={"packed": 0}, skip={"expert": ("None",)}),
    Case("numtk.moe.packed_matvec", _packed_matvec, {}, positional={"packed": 0, "x": 1, "expert": 2}),
]

CASES = {c.name: c for c in PLANNING + EPLB_LOADS + MILP + SIMULATION + PUZZLE + BF16}
