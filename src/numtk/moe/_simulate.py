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
from numtk.moe._plan import as_loads

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


def _check_tiling(chunks: np.ndarray, loads: np.ndarray, name: str) -> None:
    """The chunks of every expert tile [0, loads[e]) without overlap."""
    N = len(loads)
    if len(chunks) == 0:
        if loads.any():
            raise ValueError(f"`{name}` has no chunks, but its experts have routing slots")
        return
    e, start, stop = chunks[:, 0], chunks[:, 2], chunks[:, 3]
    if e.min() < 0 or e.max() >= N:
        raise ValueError(f"`{name}` has a chunk of an expert outside [0, {N})")
    if np.any(start < 0) or np.any(stop <= start):
        raise ValueError(f"`{name}` has a chunk with start < 0 or stop <= start")
    order = np.lexsort((start, e))
    e, start, stop = e[order], start[order], stop[order]
    first = np.r_[True, e[1:] != e[:-1]]
    last = np.r_[e[1:] != e[:-1], True]
    covered = np.zeros(N, dtype=bool)
    covered[e] = True
    if (np.any(start[first] != 0) or np.any(start[~first] != stop[np.flatnonzero(~first) - 1])
            or np.any(stop[last] != loads[e[last]]) or np.any(loads[~covered] != 0)):
        raise ValueError(f"the chunks of `{name}` must tile [0, load) of every expert without gaps or overlaps")


def _view_of_plan(plan: Any, layer: Any, name: str) -> ExecutionView:
    if "assignment" not in plan:
        raise ValueError(f"`{name}` lacks the field 'assignment'")
    batched = np.ndim(plan["assignment"]) == 3  # a plan of several layers: chunks and transfers lead with it
    assignment = _int_field(plan, "assignment", 3 if batched else 2, name)
    chunks = _int_field(plan, "chunks", 2, name)
    transfers = _int_field(plan, "weight_transfers", 2, name)
    placement = _int_field(plan, "placement", (1, 2), name)
    num_layers = assignment.shape[0] if batched else 1
    layer = check_int(layer, "layer", minimum=-num_layers, maximum=num_layers - 1) % num_layers
    lead = int(batched)
    if chunks.shape[1:] != (4 + lead,) or transfers.shape[1:] != (3 + lead,):
        raise ValueError(f"`{name}` must have chunks of shape (K, {4 + lead}) and weight_transfers (W, {3 + lead})"
                         f"; got {chunks.shape} and {transfers.shape}")
    if batched:
        assignment = assignment[layer]
        chunks = chunks[chunks[:, 0] == layer, 1:]
        transfers = transfers[transfers[:, 0] == layer, 1:]
    if placement.ndim == 2:
        if placement.shape[0] != num_layers:
            raise ValueError(f"`{name}.placement` must hold one row per layer ({num_layers}); got "
                             f"{placement.shape[0]}")
        placement = placement[layer]
    N, P = assignment.shape
    if N < 1 or P < 1:
        raise ValueError(f"`{name}.assignment` must have at least one expert and one device; got shape "
                         f"{assignment.shape}")
    if assignment.size and assignment.min() < 0:
        raise ValueError(f"`{name}.assignment` must be non-negative")
    if placement.shape != (N,):
        raise ValueError(f"`{name}.placement` must hold one device per expert ({N}); got shape {placement.shape}")
    if placement.size and (placement.min() < 0 or placement.max() >= P):
        raise ValueError(f"`{name}.placement` must hold device ids in [0, {P})")
    chunks = chunks[chunks[:, 3] != chunks[:, 2]]  # empty chunks compute nothing
    loads = assignment.sum(axis=1)
    if loads.size and loads.max() >= 2**62:
        raise ValueError(f"`{name}.assignment` must hold loads below 2**62")
    _check_tiling(chunks, loads, name)
    if chunks[:, 1].size and (chunks[:, 1].min() < 0 or chunks[:, 1].max() >= P):
        raise ValueError(f"`{name}` has a chunk on a device outside [0, {P})")
    pairs = _pairs(chunks, P)
    if (np.count_nonzero(assignment) != len(pairs)
            or np.any(assignment[pairs[:, 0], pairs[:, 1]] != pairs[:, 2])):
        raise ValueError(f"`{name}.assignment` does not match its chunks")
    if len(transfers) and (transfers.min() < 0 or transfers[:, 0].max() >= N or transfers[:, 1:].max() >= P
                           or np.any(transfers[:, 1] != placement[transfers[:, 0]])):
        raise ValueError(f"`{name}.weight_transfers` must hold rows (expert, native device, destination) of "
                         "experts and devices of the plan")
    # every chunk away from the native device needs its expert's weights there
    away = chunks[chunks[:, 1] != placement[chunks[:, 0]]]
    if len(away):
        have = set((transfers[:, 0] * P + transfers[:, 2]).tolist())
        missing = [k for k in (away[:, 0] * P + away[:, 1]).tolist() if k not in have]
        if missing:
            e, p = divmod(missing[0], P)
            raise ValueError(f"`{name}` computes expert {e} on device {p} without a weight transfer to it")
    copies = np.unique(transfers[:, 0] * P + transfers[:, 2]) if len(transfers) else np.zeros(0, np.int64)
    received = np.bincount(copies % P, minlength=P).astype(np.int64)
    sent = np.bincount(placement[copies // P], minlength=P).astype(np.int64)
    hosted = np.bincount(placement, minlength=P).astype(np.int64) + received
    return ExecutionView(chunks=chunks, pairs=pairs, num_devices=P, loads=loads, per_source=None, hosted=hosted,
                         received=received, sent=sent, placement=placement, transfers=transfers, replicas=None,
                         kind="plan")


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
                         replicas=phy2log[layer].reshape(G, per_gpu).copy(), kind="eplb")


def execution_view(plan: Any, loads: Any = None, layer: Any = 0, *, name: str = "plan") -> ExecutionView:
    """The execution view of a plan Result, or of layer ``layer`` of an EPLB Result with current ``loads``.

    ``loads`` (N,) or (N, S) with S = P source devices: for a plan optional (then it must agree with the plan's
    expert loads and the per-source counts are kept), for an EPLB placement required. ``layer`` picks a layer
    of a plan of several layers (``llep_plan`` on (L, N) loads) or of an EPLB placement.
    """
    if not hasattr(plan, "keys") or not hasattr(plan, "__getitem__") or isinstance(plan, (str, bytes)):
        raise TypeError(f"`{name}` must be a plan Result (llep_plan, standard_ep_plan, optimal_plan) or an "
                        f"eplb_rebalance Result; got {type(plan).__name__}")
    totals = per_source = None
    if loads is not None:
        totals, per_source = as_loads(loads, "loads")
    if "phy2log" in plan:
        if totals is None:
            raise ValueError(f"`loads` is needed with an EPLB placement as `{name}` (the current loads of the "
                             "layer)")
        view = _view_of_eplb(plan, totals, layer, name)
    elif "assignment" in plan:
        view = _view_of_plan(plan, layer, name)
        if totals is not None and not np.array_equal(totals, view.loads):
            raise ValueError(f"`loads` (summed over sources) must equal the expert loads of `{name}`")
    else:
        raise TypeError(f"`{name}` must be a plan Result (with 'assignment', 'chunks', 'weight_transfers', "
                        "'placement') or an eplb_rebalance Result (with 'phy2log'); got a mapping with fields "
                        f"{list(plan.keys())[:8]}")
    if per_source is not None:
        if per_source.shape[1] != view.num_devices:
            raise ValueError(f"per-source `loads` must have one column per device ({view.num_devices}); got "
                             f"{per_source.shape[1]}")
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


@constraints(plan="option", cost_model=("option", "mapping"), loads=("array1d", "array2d"), overlap="bool",
             layer="index")
def simulate_ep(plan: Any, cost_model: str | Mapping[str, float] = "unit", *, loads: Any = None,
                overlap: bool = False, layer: int = 0) -> Result:
    r"""Per-device latency and peak memory of one MoE layer's expert-parallel plan under a cost model.

    Parameters
    ----------
    plan : Result
        A plan of :func:`llep_plan`, :func:`standard_ep_plan` or :func:`optimal_plan` (fields ``assignment``,
        ``chunks``, ``weight_transfers``, ``placement``; of one layer, or of several with ``layer``), or a
        placement of :func:`eplb_rebalance` (field ``phy2log``), which then needs the current ``loads``.
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
    loads : array_like of int, shape (N,) or (N, S), optional
        Routing-slot counts of the layer. For a plan: optional; the totals over sources must equal the plan's
        expert loads, and per-source counts (N, P), ``loads[e, s]`` slots of expert e from tokens living on
        device s, make the all-to-all term exact (without them the origin of every slot is uniform over the
        devices). For an EPLB placement: required, the loads the replicas share.
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
        tile the loads, a chunk on a device without its expert's weights), ``loads`` that disagree with the
        plan, per-source ``loads`` with a column count other than P, an EPLB placement without ``loads``.
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

    The per-source order: the slots of expert e are taken source by source, those of device 0 first; a chunk
    ``[start, stop)`` of e on device p is local for its overlap with source p's range. This is the order
    :func:`moe_forward` uses when tokens live on devices in contiguous blocks (:func:`routing_loads` with
    ``num_sources``). EPLB splits the slots of expert e evenly over its replicas, the first ``l_e mod c_e``
    replicas (``log2phy`` order) taking one more.

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
    >>> from numtk.moe import simulate_ep
    >>> from numtk.moe._plan import plan_result, standard_chunks
    >>> pi = np.array([0, 0, 1, 1])
    >>> def plans(s):                                     # loads [10, 0, 1, 1] * s
    ...     loads = np.array([10, 0, 1, 1]) * s
    ...     kw = dict(method="demo", capacity=6 * s, imbalance=1.0, forced=0, lower=6 * s, expert_bytes=None,
    ...               token_bytes=0.0, memory_limit=None)
    ...     balanced = [[0, 0, 0, 6 * s], [0, 1, 6 * s, 10 * s], [2, 1, 0, s], [3, 1, 0, s]]
    ...     return (plan_result(loads, pi, 2, standard_chunks(loads, pi), **kw),
    ...             plan_result(loads, pi, 2, np.array(balanced), **kw))
    >>> standard, balanced = plans(1)
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
    """
    overlap = check_bool(overlap, "overlap")
    params = _cost_model(cost_model)
    view = execution_view(plan, loads, layer)
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
