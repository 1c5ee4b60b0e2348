"""The latency and memory simulator of expert-parallel plans (:func:`simulate_ep`).

A plan (from :func:`~numtk.moe.llep_plan`, :func:`~numtk.moe.standard_ep_plan`, :func:`~numtk.moe.optimal_plan`)
or an :func:`~numtk.moe.eplb_rebalance` placement applied to current loads is first brought to one *execution
view* (:func:`execution_view`): its chunks ``(expert, device, start, stop)``, the (expert, device) pairs, the weight
transfers and the expert weights each device holds. The simulator prices that view under a cost model; the
executor (:func:`~numtk.moe.moe_forward`) carries the same view out on data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_bool, check_int, check_real
from numtk.moe._plan import as_layer_loads, as_loads, check_plan_layer

__all__ = ["simulate_ep", "COST_PRESETS", "ExecutionView", "execution_view"]

#: Cost-model presets (besides ``"unit"``). ``"h200"``: vendor datasheet figures of one NVIDIA H200 (dense bf16
#: peak, HBM bandwidth, NVLink per direction), to be confirmed, and the public shape of gpt-oss-120b's experts
#: (hidden size 2880, intermediate size 2880, SwiGLU: three matrices, bf16), also to be confirmed.
COST_PRESETS: Mapping[str, Mapping[str, float]] = {
    "h200": {"hidden_size": 2880, "intermediate_size": 2880, "num_matrices": 3, "dtype_bytes": 2,
             "peak_flops": 989e12, "mem_bandwidth": 4.8e12, "link_bandwidth": 450e9, "a2a_bandwidth": 450e9,
             "gemm_overhead": 10e-6},
}
_INT_KEYS = ("hidden_size", "intermediate_size", "num_matrices")
_POSITIVE_KEYS = ("dtype_bytes", "peak_flops", "mem_bandwidth", "link_bandwidth", "a2a_bandwidth")
_KEYS = (*_INT_KEYS, *_POSITIVE_KEYS, "gemm_overhead")


def _cost_model(cost_model: Any) -> dict[str, float] | None:
    """The resolved cost parameters, or None for ``"unit"``."""
    if isinstance(cost_model, str):
        if cost_model == "unit":
            return None
        if cost_model in COST_PRESETS:
            return dict(COST_PRESETS[cost_model])
        raise ValueError(f"`cost_model` must be 'unit', {', '.join(repr(k) for k in COST_PRESETS)} or a dict of "
                         f"cost parameters; got {cost_model!r}")
    if not isinstance(cost_model, Mapping):
        raise TypeError(f"`cost_model` must be a preset name or a dict of cost parameters; got "
                        f"{type(cost_model).__name__}")
    unknown = [k for k in cost_model if k not in _KEYS]
    if unknown:
        raise ValueError(f"`cost_model` has unknown keys {unknown!r}; the keys are {list(_KEYS)}")
    params = dict(COST_PRESETS["h200"])
    for key, value in cost_model.items():
        name = f"cost_model['{key}']"
        if key in _INT_KEYS:
            params[key] = check_int(value, name, minimum=1, maximum=2**31 - 1)
        elif key in _POSITIVE_KEYS:
            params[key] = check_real(value, name, low=0.0, low_open=True)
        else:
            params[key] = check_real(value, name, low=0.0)
    return params


@dataclass
class ExecutionView:
    """A plan or an EPLB placement as the simulator and the executor see it (one layer)."""

    chunks: np.ndarray        # (K, 4) int64 rows (expert, device, start, stop), start < stop
    pairs: np.ndarray         # (Q, 3) int64 rows (expert, device, slots > 0): the assignment's nonzero entries
    num_devices: int          # P
    loads: np.ndarray         # (N,) int64 slots of each expert
    per_source: np.ndarray | None  # (N, P) int64 slots of each expert per source device, or None
    hosted: np.ndarray        # (P,) int64 expert weight copies each device holds during the step
    received: np.ndarray      # (P,) int64 expert weights each device receives for this step
    sent: np.ndarray          # (P,) int64 expert weights each device sends for this step
    placement: np.ndarray | None  # (N,) native device of each expert (plans); None for an EPLB placement
    transfers: np.ndarray     # (W, 3) int64 rows (expert, src, dst)
    replicas: np.ndarray | None  # (P, R / P) experts of each GPU's replica slots (EPLB); None for plans
    kind: str                 # "plan" or "eplb"
    num_layers: int = 1       # layers of the plan or placement the view was taken from
    layer: int = 0            # the layer taken, in [0, num_layers)

    @property
    def device_loads(self) -> np.ndarray:
        """(P,) int64 slots computed on each device."""
        out = np.zeros(self.num_devices, dtype=np.int64)
        np.add.at(out, self.pairs[:, 1], self.pairs[:, 2])
        return out

    def holdings(self) -> list[np.ndarray]:
        """The experts whose weights each device holds: its native ones, then the ones it receives (plans), or
        its replica slots (EPLB)."""
        if self.replicas is not None:
            return list(self.replicas)
        P = self.num_devices
        order = np.argsort(self.placement, kind="stable")
        native = np.split(order, np.cumsum(np.bincount(self.placement, minlength=P))[:-1])
        t = np.unique(self.transfers[:, [2, 0]], axis=0) if len(self.transfers) else np.zeros((0, 2), np.int64)
        got = np.split(t[:, 1], np.cumsum(np.bincount(t[:, 0], minlength=P))[:-1])
        return [np.concatenate([a, b]).astype(np.int64) for a, b in zip(native, got)]


def _pairs(chunks: np.ndarray, P: int) -> np.ndarray:
    """The chunks summed per (expert, device): rows (expert, device, slots), sorted."""
    if not len(chunks):
        return np.zeros((0, 3), dtype=np.int64)
    keys, inverse = np.unique(chunks[:, 0] * P + chunks[:, 1], return_inverse=True)
    slots = np.zeros(len(keys), dtype=np.int64)
    np.add.at(slots, inverse.ravel(), chunks[:, 3] - chunks[:, 2])
    return np.column_stack([keys // P, keys % P, slots])


def _int_field(plan: Any, key: str, ndim: int | tuple[int, ...], name: str) -> np.ndarray:
    if key not in plan:
        raise ValueError(f"`{name}` lacks the field {key!r}")
    arr = as_array(plan[key], f"{name}.{key}", kinds="iu")
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if arr.ndim not in ndims:
        raise ValueError(f"`{name}.{key}` must be {' or '.join(map(str, ndims))}-D; got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _view_of_plan(plan: Any, layer: Any, name: str) -> ExecutionView:
    """The view of one layer of a plan, from its chunks (:func:`numtk.moe.plan_layer` checks them; the
    dense assignment is not built)."""
    one = check_plan_layer(plan, layer, name=name)
    P, placement, transfers = one.num_devices, one.placement, one.transfers
    received = np.bincount(transfers[:, 2], minlength=P).astype(np.int64)  # transfers: one per (expert, dst)
    sent = np.bincount(transfers[:, 1], minlength=P).astype(np.int64)
    hosted = np.bincount(placement, minlength=P).astype(np.int64) + received
    return ExecutionView(chunks=one.chunks, pairs=_pairs(one.chunks, P), num_devices=P, loads=one.loads,
                         per_source=None, hosted=hosted, received=received, sent=sent, placement=placement,
                         transfers=transfers, replicas=None, kind="plan", num_layers=one.num_layers,
                         layer=one.layer)


def _view_of_eplb(plan: Any, loads: np.ndarray, layer: Any, name: str) -> ExecutionView:
    phy2log = _int_field(plan, "phy2log", 2, name)
    log2phy = _int_field(plan, "log2phy", 3, name)
    logcnt = _int_field(plan, "logcnt", 2, name)
    if "device_loads" not in plan:
        raise ValueError(f"`{name}` lacks the field 'device_loads'")
    G = int(np.shape(plan["device_loads"])[-1])
    L, R = phy2log.shape
    layer = check_int(layer, "layer", minimum=-L, maximum=L - 1) % L
    E = logcnt.shape[1]
    if log2phy.shape[:2] != (L, E) or logcnt.shape[0] != L or G < 1 or R % G:
        raise ValueError(f"`{name}` is not a consistent EPLB result (phy2log {phy2log.shape}, log2phy "
                         f"{log2phy.shape}, logcnt {logcnt.shape}, {G} GPUs)")
    if len(loads) != E:
        raise ValueError(f"`loads` must hold one load per logical expert of `{name}` ({E}); got {len(loads)}")
    cnt, slots = logcnt[layer], log2phy[layer]
    rank = np.arange(slots.shape[1])
    valid = rank[None, :] < cnt[:, None]
    listed = slots[valid]
    if (np.any(cnt < 1) or np.any(cnt > slots.shape[1]) or cnt.sum() != R or np.any(listed < 0)
            or np.any(listed >= R) or np.any(phy2log[layer][np.where(valid, slots, 0)][valid] != np.nonzero(valid)[0])):
        raise ValueError(f"`{name}`: log2phy and logcnt of layer {layer} do not invert phy2log")
    # even split of each expert's slots over its replicas, the first (l mod c) replicas (log2phy order) one more
    safe = np.maximum(cnt, 1)
    share = np.where(valid, (loads // safe)[:, None] + (rank[None, :] < (loads % safe)[:, None]), 0)
    start = np.cumsum(share, axis=1) - share
    e_idx, r_idx = np.nonzero(valid & (share > 0))
    per_gpu = R // G
    chunks = np.column_stack([e_idx, slots[e_idx, r_idx] // per_gpu, start[e_idx, r_idx],
                              start[e_idx, r_idx] + share[e_idx, r_idx]]).astype(np.int64)
    zeros = np.zeros(G, dtype=np.int64)
    return ExecutionView(chunks=chunks, pairs=_pairs(chunks, G), num_devices=G, loads=loads.copy(),
                         per_source=None, hosted=np.full(G, per_gpu, dtype=np.int64), received=zeros,
                         sent=zeros.copy(), placement=None, transfers=np.zeros((0, 3), dtype=np.int64),
                         replicas=phy2log[layer].reshape(G, per_gpu).copy(), kind="eplb", num_layers=L,
                         layer=layer)


_LOADS_HINT = ("pass per-source counts (N, S) as `source_loads`, or their totals `loads.sum(axis=1)` as `loads`; "
               "a plan of several layers takes `layer`")


def _as_source_loads(source_loads: Any) -> np.ndarray:
    """``source_loads`` as int64 (N, S), per-source counts of one layer, or (L, N, S) of L layers."""
    arr = as_array(source_loads, "source_loads", kinds="iuf")
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[0] < 1):
        raise ValueError("`source_loads` must have shape (N, S), per-source counts of one layer, or (L, N, S) for "
                         f"the layers of a plan (with `layer`); got an array of shape {arr.shape}")
    return as_loads(arr, "source_loads", batch=arr.ndim == 3)[1]


def execution_view(plan: Any, loads: Any = None, layer: Any = 0, *, source_loads: Any = None,
                   name: str = "plan") -> ExecutionView:
    """The execution view of layer ``layer`` of a plan Result, or of an EPLB Result with current loads.

    ``loads`` (N,) routing-slot totals of the layer: for a plan optional (then it must equal the plan's expert
    loads), for an EPLB placement required unless ``source_loads`` gives them. ``source_loads`` (N, S) with
    S = P, the per-source counts of the layer (or (L, N, S) of the plan's L layers, row ``layer`` taken), are
    kept in the view for the all-to-all; their sums must equal the expert loads. ``layer`` picks a layer of a
    plan of several layers (``llep_plan`` on (L, N) loads) or of an EPLB placement.
    """
    if not hasattr(plan, "keys") or not hasattr(plan, "__getitem__") or isinstance(plan, (str, bytes)):
        raise TypeError(f"`{name}` must be a plan Result (llep_plan, standard_ep_plan, optimal_plan) or an "
                        f"eplb_rebalance Result; got {type(plan).__name__}")
    totals = source = None
    if loads is not None:
        totals = as_layer_loads(loads, "loads", hint=_LOADS_HINT)
    if source_loads is not None:
        source = _as_source_loads(source_loads)
    if "phy2log" in plan:
        if totals is None:
            if source is None:
                raise ValueError(f"`loads` is needed with an EPLB placement as `{name}` (the current loads of the "
                                 "layer, or per-source counts as `source_loads`)")
            L = source.shape[0]
            row = 0 if source.ndim == 2 else check_int(layer, "layer", minimum=-L, maximum=L - 1) % L
            totals = (source if source.ndim == 2 else source[row]).sum(axis=1)
        view = _view_of_eplb(plan, totals, layer, name)
    elif "chunks" in plan or "assignment" in plan:
        view = _view_of_plan(plan, layer, name)
        if totals is not None and not np.array_equal(totals, view.loads):
            raise ValueError(f"`loads` must equal the expert loads of `{name}` (its {len(view.loads)} experts' "
                             "routing slots)")
    else:
        raise TypeError(f"`{name}` must be a plan Result (with 'chunks', 'weight_transfers', 'placement', "
                        "'device_loads') or an eplb_rebalance Result (with 'phy2log'); got a mapping with fields "
                        f"{list(plan.keys())[:8]}")
    if source is not None:
        if source.ndim == 3 and source.shape[0] != view.num_layers:
            raise ValueError(f"`source_loads` of shape (L, N, S) must hold one matrix per layer of `{name}` "
                             f"({view.num_layers}); got {source.shape[0]}")
        per_source = source if source.ndim == 2 else source[view.layer]
        if per_source.shape[1] != view.num_devices:
            raise ValueError(f"`source_loads` must have one column per device ({view.num_devices}); got "
                             f"{per_source.shape[1]}")
        if not np.array_equal(per_source.sum(axis=1), view.loads):
            raise ValueError(f"`source_loads` summed over the sources must equal the expert loads of `{name}`"
                             + (" (`loads`, which the placement's replicas share)" if view.kind == "eplb" else ""))
        view.per_source = per_source
    return view


def remote_slots(view: ExecutionView) -> np.ndarray:
    """Slots computed on each device that originate on another device (float64 (P,)).

    With per-source loads the slots of expert e are ordered source by source (source 0's first), so a chunk
    ``[start, stop)`` on device p holds the overlap of that range with source p's range as local slots. Without
    them every slot's origin is uniform over the devices: a fraction (P - 1) / P is remote.
    """
    P = view.num_devices
    L = view.device_loads
    if view.per_source is None:
        return L * ((P - 1) / P)
    bounds = np.zeros((len(view.loads), P + 1), dtype=np.int64)
    np.cumsum(view.per_source, axis=1, out=bounds[:, 1:])
    e, p, a, b = view.chunks.T
    local = np.maximum(0, np.minimum(b, bounds[e, p + 1]) - np.maximum(a, bounds[e, p]))
    return (L - np.bincount(p, weights=local, minlength=P)).astype(np.float64)


@constraints(plan="option", cost_model=("option", "mapping"), loads="array1d", source_loads="array2d",
             overlap="bool", layer="index")
def simulate_ep(plan: Any, cost_model: str | Mapping[str, float] = "unit", *, loads: Any = None,
                source_loads: Any = None, overlap: bool = False, layer: int = 0) -> Result:
    r"""Per-device latency and peak memory of one MoE layer's expert-parallel plan under a cost model.

    Parameters
    ----------
    plan : Result
        A plan of :func:`llep_plan`, :func:`standard_ep_plan` or :func:`optimal_plan` (of one layer, or of
        several with ``layer``; read from its ``chunks``, ``weight_transfers``, ``placement`` and
        ``device_loads``, so its dense ``assignment`` is not built), or a placement of :func:`eplb_rebalance`
        (field ``phy2log``), which then needs the current ``loads``.
    cost_model : {'unit', 'h200'} or dict, optional
        ``'unit'`` (default): the latency of a device is its load (routing slots), everything else costs 0.
        ``'h200'``: the roofline model of Notes with one NVIDIA H200 (989e12 FLOP/s dense bf16, 4.8e12 B/s
        memory, 450e9 B/s NVLink per direction and all-to-all, 10 us per GEMM group) and gpt-oss-120b's expert
        shape (D = H = 2880, 3 matrices, bf16); datasheet and public-config figures, to be confirmed: a
        planning aid, not a claim about measured speed. A dict sets any of the keys ``hidden_size`` (D),
        ``intermediate_size`` (H), ``num_matrices`` (:math:`k_m`, 3 for SwiGLU), ``dtype_bytes`` (b),
        ``peak_flops`` (FLOP/s), ``mem_bandwidth``, ``link_bandwidth`` (per direction), ``a2a_bandwidth``
        (bytes/s), ``gemm_overhead`` (seconds per expert GEMM group); missing keys take the ``'h200'``
        values, unknown keys raise.
    loads : array_like of int, shape (N,), optional
        The routing-slot totals of the layer's experts, as everywhere in :mod:`numtk.moe` (a 2-D array is
        refused: per-source counts go in ``source_loads``). For a plan: optional, a cross-check (they must
        equal the plan's expert loads). For an EPLB placement: required (unless ``source_loads`` is given,
        whose sums then are the loads), the loads the replicas share.
    source_loads : array_like of int, shape (N, S) or (L, N, S), optional
        Per-source counts of the layer, S = P: ``source_loads[e, s]`` slots of expert e come from tokens
        living on device s (:func:`routing_loads` with ``num_sources``). They make the all-to-all term exact;
        without them the origin of every slot is uniform over the devices. Their sums over the sources must
        equal the expert loads. (L, N, S) gives them for every layer of a plan of L layers (or of an EPLB
        placement); row ``layer`` is used.
    overlap : bool, optional
        If True, the weight transfers run while the tokens are dispatched, so a device pays the larger of
        compute and transfer time instead of their sum.
    layer : int, optional
        The layer of a plan of several layers (a plan from (L, N) loads) or of an EPLB placement (default 0;
        negative values count from the end).

    Returns
    -------
    res : Result
        With fields

        latency : ndarray of float64, shape (P,)
            ``a2a + compute + weights`` per device (``a2a + max(compute, weights)`` with ``overlap``).
            Seconds, or routing slots under ``'unit'``.
        compute : ndarray of float64, shape (P,)
            The expert GEMM time of each device.
        weights : ndarray of float64, shape (P,)
            The time of each device's weight transfers (the larger of its sent and received bytes).
        a2a : ndarray of float64, shape (P,)
            The dispatch and combine time of the slots a device computes for tokens of other devices.
        step_time : float
            ``max(latency)``: the layer waits for its slowest device.
        peak_memory : ndarray of float64, shape (P,)
            Bytes of expert weights held plus activations (routing slots under ``'unit'``).
        device_loads : ndarray of int64, shape (P,)
            Routing slots computed on each device.
        remote_slots : ndarray of float64, shape (P,)
            Slots computed on each device for tokens of another device (fractional for a uniform origin).
        cost_model : str or dict
            ``'unit'`` or the cost parameters used.
        overlap : bool
            The ``overlap`` used.

    Raises
    ------
    ValueError
        An unknown preset or cost key, a parameter out of range, inconsistent plan fields (chunks that do not
        tile the loads, a chunk on a device without its expert's weights), ``loads`` that are not (N,) or
        disagree with the plan, ``source_loads`` whose sums disagree or with a column count other than P, an
        EPLB placement without ``loads``.
    TypeError
        ``plan`` of another type, ``cost_model`` neither a string nor a dict, wrong types of values.

    Notes
    -----
    With :math:`x_{e,p}` the slots of expert e computed on device p, :math:`L_p = \sum_e x_{e,p}`, D, H,
    :math:`k_m`, b and the rates of the cost model (Nguyen et al., section 3.2):

    .. math::

        \mathrm{compute}_p = \sum_{e:\,x_{e,p} > 0} \Big[ t_{ovh} + \max\Big(
            \frac{2 k_m D H x_{e,p}}{F_{peak}},
            \frac{(k_m D H + x_{e,p}(D + H))\, b}{BW_{mem}} \Big) \Big],

    a roofline per expert GEMM group: few tokens are bound by reading the weights, many by arithmetic, so the
    time per token falls as :math:`x_{e,p}` grows. ``weights_p = max(sent_p, received_p) k_m D H b /
    BW_link`` counts each unique (expert, destination) transfer once; ``a2a_p = 2 r_p D b / BW_a2a`` with
    :math:`r_p` the remote slots (dispatch and combine; the slots a device sends away are another device's
    receipts). ``peak_memory_p = h_p k_m D H b + L_p (D + H) b`` with :math:`h_p` the weight copies held:
    native plus received experts for a plan, the R / G replica slots of a GPU for EPLB (static, so no
    transfers per step). Under ``'unit'``: compute = latency = :math:`L_p`, weights = a2a = 0,
    peak_memory = :math:`L_p`.

    The per-source order (with ``source_loads``): the slots of expert e are taken source by source, those of
    device 0 first; a chunk ``[start, stop)`` of e on device p is local for its overlap with source p's range.
    This is the order :func:`moe_forward` uses when tokens live on devices in contiguous blocks
    (:func:`routing_loads` with ``num_sources``). EPLB splits the slots of expert e evenly over its replicas,
    the first ``l_e mod c_e`` replicas (``log2phy`` order) taking one more.

    The speed-up of a plan is ``simulate_ep(standard).step_time / simulate_ep(plan).step_time`` on the same
    loads and cost model.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.
    .. [2] S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance model for
       multicore architectures", Communications of the ACM 52(4), 2009.
    .. [3] DeepSeek-AI, "Expert Parallelism Load Balancer (EPLB)", https://github.com/deepseek-ai/EPLB.

    Examples
    --------
    Expert 0 is hot; the balanced plan moves 40 % of its slots, with its weights, to device 1:

    >>> import numpy as np
    >>> from numtk.moe import llep_plan, routing_loads, simulate_ep, standard_ep_plan
    >>> def plans(s):                                     # loads [10, 0, 1, 1] * s, two experts per device
    ...     loads = np.array([10, 0, 1, 1]) * s
    ...     return standard_ep_plan(loads, 2), llep_plan(loads, 2, min_chunk=1)
    >>> standard, balanced = plans(1)
    >>> balanced.chunks.tolist()                          # (expert, device, start, stop)
    [[0, 0, 0, 6], [0, 1, 6, 10], [2, 1, 0, 1], [3, 1, 0, 1]]
    >>> simulate_ep(standard).latency, simulate_ep(balanced).latency      # 'unit': the device loads
    (array([10.,  2.]), array([6., 6.]))
    >>> res = simulate_ep(balanced, "h200")
    >>> res.weights * 1e6            # one expert, 3 * 2880**2 * 2 bytes, over 450 GB/s, in microseconds
    array([110.592, 110.592])
    >>> round(simulate_ep(standard, "h200").step_time / res.step_time, 3)     # the copy costs more
    0.237
    >>> standard, balanced = plans(1000)
    >>> round(simulate_ep(standard, "h200").step_time / simulate_ep(balanced, "h200").step_time, 3)
    1.235

    Where the tokens live: per-source counts from the router make the all-to-all exact. Tokens 0-1 live on
    device 0 and prefer its experts 0 and 1, tokens 2-3 on device 1; only token 3 routes across (to expert 0):

    >>> logits = np.array([[3.0, 2.0, 0.0, 0.0], [2.0, 3.0, 0.0, 1.0], [0.0, 1.0, 3.0, 2.0], [3.0, 0.0, 2.0, 1.0]])
    >>> loads, source = routing_loads(logits, 2), routing_loads(logits, 2, num_sources=2)
    >>> loads, source.tolist()                           # totals plan, per-source counts simulate
    (array([3, 2, 2, 1]), [[2, 1], [2, 0], [0, 2], [0, 1]])
    >>> plan = standard_ep_plan(loads, 2)
    >>> simulate_ep(plan).remote_slots                    # uniform origin: (P - 1) / P of each device's slots
    array([2.5, 1.5])
    >>> simulate_ep(plan, source_loads=source).remote_slots
    array([1., 0.])
    """
    overlap = check_bool(overlap, "overlap")
    params = _cost_model(cost_model)
    view = execution_view(plan, loads, layer, source_loads=source_loads)
    P = view.num_devices
    L = view.device_loads
    remote = remote_slots(view)
    if params is None:
        compute = L.astype(np.float64)
        weights = np.zeros(P)
        a2a = np.zeros(P)
        peak = L.astype(np.float64)
    else:
        D, H, km, b = (params[k] for k in ("hidden_size", "intermediate_size", "num_matrices", "dtype_bytes"))
        x = view.pairs[:, 2].astype(np.float64)  # one expert GEMM group per (expert, device) with slots
        expert_bytes = km * D * H * b
        flop_time = 2.0 * km * D * H * x / params["peak_flops"]
        mem_time = (km * D * H + x * (D + H)) * b / params["mem_bandwidth"]
        group_time = params["gemm_overhead"] + np.maximum(flop_time, mem_time)
        compute = np.bincount(view.pairs[:, 1], weights=group_time, minlength=P)
        weights = np.maximum(view.sent, view.received) * expert_bytes / params["link_bandwidth"]
        a2a = 2.0 * remote * D * b / params["a2a_bandwidth"]
        peak = view.hosted * float(expert_bytes) + L * float((D + H) * b)
    latency = a2a + (np.maximum(compute, weights) if overlap else compute + weights)
    if not (np.isfinite(latency).all() and np.isfinite(peak).all()):
        raise ValueError("`cost_model` gives times or memory beyond the float range; check its rates and sizes")
    return Result(latency=latency, compute=compute, weights=weights, a2a=a2a,
                  step_time=float(latency.max()), peak_memory=peak, device_loads=L, remote_slots=remote,
                  cost_model="unit" if params is None else params, overlap=overlap)
