"""What every expert-parallel plan of numtk.moe shares: the checks of ``loads``, ``placement`` and the memory
arguments, the lower bounds, and the plan :class:`~numtk._lib.Result` built from a list of chunks.

A plan of N experts on P devices is a list of chunks ``(expert, device, start, stop)``: device ``device``
computes the routing slots ``[start, stop)`` of expert ``expert``'s ``loads[expert]`` slots. The chunks of an
expert tile ``[0, loads[expert])``. Everything else of the plan Result (the dense assignment, the unique
weight transfers, the device loads, the peak memory) follows from the chunks and the placement, here, in one
place, for :func:`~numtk.moe.llep_plan`, :func:`~numtk.moe.standard_ep_plan` and
:func:`~numtk.moe.optimal_plan`.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_int, check_real

__all__ = ["as_loads", "as_placement", "check_memory", "lower_bound", "max_foreign_from_bytes",
           "plan_result", "standard_chunks", "imbalance_ratio",
           "PlanResult", "layers_result", "standard_layers", "native_ratios",
           "as_layer_loads", "check_plan_layer", "plan_layer"]

#: loads and chunk offsets stay below this, so that sums over experts cannot overflow int64
MAX_TOTAL = 2**62


def as_loads(loads: Any, name: str = "loads", *, batch: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """``loads`` as int64 routing-slot counts.

    One layer: (N,) or (N, S) per source device. With ``batch=True`` also (L, N) for L layers (then the
    per-source form is (L, N, S)). Returns ``(totals, per_source)``: the counts summed over sources,
    (N,) or (L, N), and the per-source counts or None. Floats with integral values are accepted; negative,
    fractional, non-finite or boolean entries are refused with a ValueError (TypeError for booleans).
    """
    arr = as_array(loads, name, kinds="iuf")
    ndims = (1, 2, 3) if batch else (1, 2)
    if arr.ndim not in ndims:
        shapes = "(N,), (N, S), (L, N) or (L, N, S)" if batch else "(N,) or (N, S)"
        raise ValueError(f"`{name}` must have shape {shapes}; got an array of shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"`{name}` must be finite")
        if np.any(arr != np.floor(arr)):
            raise ValueError(f"`{name}` must hold whole numbers of routing slots; got fractional values")
        if arr.size and np.max(np.abs(arr)) >= MAX_TOTAL:
            raise ValueError(f"`{name}` must be below 2**62")
    if arr.size and arr.min() < 0:
        raise ValueError(f"`{name}` must be non-negative")
    if arr.dtype.kind == "u" and arr.size and arr.max() >= MAX_TOTAL:
        raise ValueError(f"`{name}` must be below 2**62")
    arr = arr.astype(np.int64, copy=False)
    per_source = None
    if batch:
        # (N,) -> one layer; (N, S) is ambiguous with (L, N): a batch is 2-D, per-source data of a batch 3-D
        if arr.ndim == 3:
            per_source, arr = arr, arr.sum(axis=2)
    elif arr.ndim == 2:
        per_source, arr = arr, arr.sum(axis=1)
    if arr.shape[-1] < 1:
        raise ValueError(f"`{name}` must hold at least one expert")
    if arr.size and int(arr.max()) >= MAX_TOTAL // arr.shape[-1]:  # a sum may reach 2**62: check it exactly
        rows = arr.reshape(-1, arr.shape[-1])
        if max(sum(int(v) for v in row) for row in rows) >= MAX_TOTAL:
            raise ValueError(f"the total of `{name}` must be below 2**62")
    return np.ascontiguousarray(arr), per_source


def as_placement(placement: Any, num_experts: int, num_devices: Any = None) -> tuple[np.ndarray, int]:
    """``placement`` as (pi, P): the native device of each expert, int64 (N,), and the device count.

    ``placement`` is an int P (contiguous blocks ``pi[e] = e * P // N``, which needs ``N % P == 0``) or an
    integer array (N,) of device ids in [0, P). ``num_devices`` sets P when some devices host no expert
    (default: ``max(placement) + 1`` for an array).
    """
    if num_devices is not None:
        num_devices = check_int(num_devices, "num_devices", minimum=1, maximum=2**31 - 1)
    if isinstance(placement, (bool, np.bool_)):
        raise TypeError("`placement` must be an int (a device count) or an array of device ids; got a bool")
    if isinstance(placement, (list, tuple)):
        placement = as_array(placement, "placement")  # a ragged list: a TypeError naming `placement`
    if np.ndim(placement) == 0 and not isinstance(placement, (str, bytes)):
        try:
            count = operator.index(placement)
        except TypeError:
            raise TypeError("`placement` must be an int (a device count) or an integer array of device ids; "
                            f"got {type(placement).__name__}") from None
        if count < 1 or count > 2**31 - 1:
            raise ValueError(f"`placement` as a device count must be >= 1; got {count}")
        if num_experts % count:
            raise ValueError(f"`placement` = {count} devices needs the number of experts ({num_experts}) to be "
                             "a multiple of it (contiguous blocks); pass an array of device ids instead")
        if num_devices is not None and num_devices < count:
            raise ValueError(f"`num_devices` ({num_devices}) must be at least the device count of `placement` "
                             f"({count})")
        pi = np.arange(num_experts, dtype=np.int64) * count // num_experts
        return pi, (count if num_devices is None else num_devices)
    arr = as_array(placement, "placement", ndim=1, kinds="iu")
    if arr.shape[0] != num_experts:
        raise ValueError(f"`placement` must hold one device id per expert ({num_experts}); got {arr.shape[0]}")
    if arr.size and arr.min() < 0:
        raise ValueError("`placement` must hold device ids >= 0")
    top = int(arr.max()) + 1 if arr.size else 1
    if num_devices is None:
        if top > 2**31 - 1:
            raise ValueError("`placement` holds a device id beyond 2**31 - 2")
        num_devices = top
    elif top > num_devices:
        raise ValueError(f"`placement` holds device id {top - 1}, not below `num_devices` = {num_devices}")
    return np.ascontiguousarray(arr, dtype=np.int64), int(num_devices)


def check_memory(memory_limit: Any, expert_bytes: Any, token_bytes: Any, P: int,
                 ) -> tuple[np.ndarray | None, float | None, float]:
    """The memory arguments: ``memory_limit`` (bytes per device, scalar or (P,), or None), ``expert_bytes``
    (the weights of one expert; required with a limit) and ``token_bytes`` (activations per routed slot)."""
    token_bytes = check_real(token_bytes, "token_bytes", low=0.0)
    if expert_bytes is not None:
        expert_bytes = check_real(expert_bytes, "expert_bytes", low=0.0)
    if memory_limit is None:
        return None, expert_bytes, token_bytes
    if expert_bytes is None:
        raise ValueError("`expert_bytes` is needed with `memory_limit` (the bytes of one expert's weights)")
    limit = as_array(memory_limit, "memory_limit", kinds="iuf").astype(np.float64)
    if limit.ndim == 0:
        limit = np.full(P, float(limit))
    if limit.shape != (P,):
        raise ValueError(f"`memory_limit` must be a number or an array of one limit per device ({P}); "
                         f"got shape {limit.shape}")
    if not np.all(np.isfinite(limit)) or np.any(limit < 0):
        raise ValueError("`memory_limit` must be finite and non-negative")
    return limit, expert_bytes, token_bytes


def max_foreign_from_bytes(memory_limit: np.ndarray, expert_bytes: float, pi: np.ndarray, P: int) -> np.ndarray:
    """F_p = floor((memory_limit_p - native_bytes_p) / expert_bytes), the foreign experts a device could hold
    with no tokens (valid for a lower bound); a device over its limit with its own experts gets 0."""
    native = np.bincount(pi, minlength=P).astype(np.float64) * expert_bytes
    if expert_bytes == 0:
        return np.full(P, np.iinfo(np.int64).max // (4 * max(P, 1)), dtype=np.int64)
    room = np.floor((memory_limit - native) / expert_bytes)
    return np.clip(room, 0, len(pi)).astype(np.int64)


def lower_bound(loads: np.ndarray, P: int, max_foreign: np.ndarray | None = None) -> int:
    """max(LB1, LB2): LB1 = ceil(T / P) (slots split freely); LB2, with at most ``max_foreign[p]`` foreign
    experts on device p, the least z with sum_e max(ceil(l_e / z) - 1, 0) <= sum_p max_foreign[p] (every
    expert needs ceil(l_e / z) hosts, and each host but its native one takes a foreign slot)."""
    total = int(loads.sum())
    lb1 = -(-total // P)
    if max_foreign is None or total == 0:
        return lb1
    slots = int(np.minimum(max_foreign, len(loads)).sum())
    positive = loads[loads > 0]

    def extra_hosts(z: int) -> int:
        return int(np.maximum(-(-positive // z) - 1, 0).sum())

    lo, hi = max(lb1, 1), int(positive.max())  # extra_hosts(max l_e) == 0
    while lo < hi:
        mid = (lo + hi) // 2
        if extra_hosts(mid) <= slots:
            hi = mid
        else:
            lo = mid + 1
    return max(lb1, lo)


def imbalance_ratio(loads: np.ndarray, pi: np.ndarray, P: int, metric: str) -> float:
    """max / mean of the native device loads (``metric='device'``) or of the expert loads ('expert');
    1.0 for all-zero loads."""
    values = np.bincount(pi, weights=loads, minlength=P) if metric == "device" else loads.astype(np.float64)
    mean = values.mean()
    return float(values.max() / mean) if mean > 0 else 1.0


def standard_chunks(loads: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Standard EP: every expert's slots on its native device, one chunk per expert with load > 0."""
    experts = np.flatnonzero(loads)
    return np.column_stack([experts, pi[experts], np.zeros_like(experts), loads[experts]]).astype(np.int64)


class PlanResult(Result):
    """A plan Result whose dense ``assignment`` is built from ``chunks`` when it is first read.

    The dense (N, P) array is what a user reads, but at N = 1e4 experts on P = 1e3 devices it is 80 MB that
    costs more to fill than the plan costs to compute; the compact ``chunks`` carry the same information.
    ``res.assignment``, ``res["assignment"]``, ``keys()``, ``==`` and the repr all see the field (building it
    on first use); a plan of L layers (``chunks`` with a leading layer column) gives (L, N, P).
    """

    def _fill(self) -> None:
        d = self.__dict__
        if "assignment" in d:
            return
        chunks, P, N = d["chunks"], d["device_loads"].shape[-1], len(d["placement"])
        shape = (d["device_loads"].shape[0], N, P) if chunks.shape[1] == 5 else (N, P)
        need = 8 * N * P * (shape[0] if len(shape) == 3 else 1)  # bytes of the int64 array (Python ints)
        if need > 2**26:  # the plans fit whatever the size of their dense form: check before allocating it
            from numtk._lib._validation import available_memory

            avail = available_memory()
            if need > avail:
                rows = "(layer, expert, device, start, stop)" if len(shape) == 3 else "(expert, device, start, stop)"
                raise MemoryError(f"`assignment` of this plan would be a dense int64 array of shape {shape}, about "
                                  f"{need / 2**30:.3g} GiB, more than the {avail / 2**30:.3g} GiB this process may "
                                  f"allocate; read `chunks` instead: the same plan as rows {rows}")
        sizes = chunks[:, -1] - chunks[:, -2]
        if chunks.shape[1] == 5:  # (layer, expert, device, start, stop)
            dense = np.zeros(shape, dtype=np.int64)
            np.add.at(dense, (chunks[:, 0], chunks[:, 1], chunks[:, 2]), sizes)
        else:
            dense = np.zeros((N, P), dtype=np.int64)
            np.add.at(dense, (chunks[:, 0], chunks[:, 1]), sizes)
        fields = dict(d)
        d.clear()
        d.update(assignment=dense, **fields)  # first, where the plan fields list it

    def __getattr__(self, name: str) -> Any:  # only called for a missing attribute
        if name == "assignment" and "chunks" in self.__dict__:
            self._fill()
            return self.__dict__["assignment"]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def keys(self):
        self._fill()
        return super().keys()

    def values(self):
        self._fill()
        return super().values()

    def items(self):
        self._fill()
        return super().items()

    def __getitem__(self, key: str | int) -> Any:
        self._fill()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        return key == "assignment" or super().__contains__(key)

    def __eq__(self, other: object) -> bool:
        self._fill()
        if isinstance(other, PlanResult):
            other._fill()
        return super().__eq__(other)

    __hash__ = None

    def __dir__(self):
        self._fill()
        return super().__dir__()

    def __repr__(self) -> str:
        self._fill()
        return super().__repr__()


def plan_result(loads: np.ndarray, pi: np.ndarray, P: int, chunks: np.ndarray, *, method: str, capacity: int,
                imbalance: float, forced: int, lower: int, expert_bytes: float | None, token_bytes: float,
                memory_limit: np.ndarray | None, **extra: Any) -> Result:
    """The plan Result of one layer from its chunk list (rows expert, device, start, stop; plan order): the
    one-layer case of :func:`layers_result`, with ``extra`` fields added (or replacing computed ones).

    The Result also keeps ``placement`` (int64 (N,), the native device of each expert): the simulator and the
    executor need it for the weights every device holds (experts with no load included). Its ``assignment``
    is built on first use (:class:`PlanResult`)."""
    chunks = np.asarray(chunks, dtype=np.int64).reshape(-1, 4)
    res = layers_result(np.asarray(loads, dtype=np.int64).reshape(1, -1), pi, P, chunks,
                        np.array([0, len(chunks)], dtype=np.int64), method=np.array([method]),
                        capacity=np.array([capacity]), imbalance=np.array([imbalance]), forced=np.array([forced]),
                        lower=np.array([lower]), expert_bytes=expert_bytes, token_bytes=token_bytes,
                        memory_limit=memory_limit, single=True)
    res.__dict__.update(extra)
    return res


def layers_result(batch: np.ndarray, pi: np.ndarray, P: int, chunks: np.ndarray, offsets: np.ndarray, *,
                  method: np.ndarray, capacity: np.ndarray, imbalance: np.ndarray, forced: np.ndarray,
                  lower: np.ndarray, expert_bytes: float | None, token_bytes: float,
                  memory_limit: np.ndarray | None, stranded: np.ndarray | None = None,
                  single: bool = False) -> PlanResult:
    """The plan Result of L layers at once, vectorised over the layers (what :func:`plan_result` gives for one
    layer, for each layer, stacked).

    ``chunks`` (K, 4) holds the layers' chunk lists one after the other, layer i's in rows
    ``offsets[i]:offsets[i + 1]``; the per-layer arguments are arrays of length L. With ``single`` (L = 1)
    the fields are those of one layer (:func:`plan_result`'s); else chunks become (K, 5) rows (layer,
    expert, device, start, stop), weight transfers (W, 4) rows (layer, expert, src, dst), and every other
    field gains a leading layer axis. ``stranded`` marks layers the memory limit left infeasible.
    """
    L, N = batch.shape
    chunks = np.asarray(chunks, dtype=np.int64).reshape(-1, 4)
    # one layer (the common call, per layer per step) skips the layer bookkeeping
    layer = np.repeat(np.arange(L, dtype=np.int64), np.diff(offsets)) if L > 1 else np.zeros(len(chunks), np.int64)
    experts, devices = chunks[:, 0], chunks[:, 1]
    sizes = chunks[:, 3] - chunks[:, 2]
    cells = layer * P + devices if L > 1 else devices
    if len(sizes) and int(batch.sum(axis=1).max()) < 2**53:  # float sums are exact: bincount
        device_loads = np.bincount(cells, weights=sizes, minlength=L * P).astype(np.int64).reshape(L, P)
    else:
        device_loads = np.zeros(L * P, dtype=np.int64)
        np.add.at(device_loads, cells, sizes)
        device_loads = device_loads.reshape(L, P)
    away = np.flatnonzero(devices != pi[experts])
    keys = (layer[away] * N + experts[away]) * P + devices[away]
    if len(away) <= 64:  # few copies (the usual case): first occurrences by a dict, cheaper than a sort
        seen: dict[int, int] = {}
        for i, key in enumerate(keys.tolist()):
            seen.setdefault(key, i)
        first = away[list(seen.values())]  # in increasing order: first occurrences, in plan order
    else:
        _, first = np.unique(keys, return_index=True)
        first = away[np.sort(first)]  # rows of the chunks that copy an expert, in plan order
    t_layer, t_expert, t_dst = layer[first], experts[first], devices[first]
    peak = None
    feasible = np.ones(L, dtype=bool) if stranded is None else ~np.asarray(stranded, dtype=bool)
    if expert_bytes is not None:
        hosted = np.bincount(pi, minlength=P)[None, :] + np.bincount(t_layer * P + t_dst,
                                                                     minlength=L * P).reshape(L, P)
        peak = hosted * expert_bytes + device_loads * token_bytes
        if memory_limit is not None:
            feasible &= np.all(peak <= memory_limit * (1 + 1e-12), axis=1)
    max_load = device_loads.max(axis=1) if P else np.zeros(L, dtype=np.int64)
    if single:
        return PlanResult(chunks=chunks, weight_transfers=np.column_stack([t_expert, pi[t_expert], t_dst]),
                          device_loads=device_loads[0], max_load=int(max_load[0]), lower_bound=int(lower[0]),
                          capacity=int(capacity[0]), method=str(method[0]), imbalance_ratio=float(imbalance[0]),
                          forced=int(forced[0]), peak_memory=None if peak is None else peak[0],
                          feasible=bool(feasible[0]), placement=np.array(pi, dtype=np.int64))
    return PlanResult(chunks=np.column_stack([layer, chunks]),
                      weight_transfers=np.column_stack([t_layer, t_expert, pi[t_expert], t_dst]),
                      device_loads=device_loads, max_load=max_load.astype(np.int64),
                      lower_bound=np.asarray(lower, dtype=np.int64), capacity=np.asarray(capacity, dtype=np.int64),
                      method=np.asarray(method, dtype=str), imbalance_ratio=np.asarray(imbalance, dtype=np.float64),
                      forced=np.asarray(forced, dtype=np.int64), peak_memory=peak, feasible=feasible,
                      placement=np.array(pi, dtype=np.int64))


def standard_layers(batch: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standard EP for L layers: (chunks (K, 4), offsets (L + 1,)), each layer's experts with load > 0 in id
    order on their native devices (what :func:`standard_chunks` gives per layer)."""
    rows, experts = np.nonzero(batch)
    chunks = np.column_stack([experts, pi[experts], np.zeros_like(experts), batch[rows, experts]]).astype(np.int64)
    offsets = np.zeros(batch.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=batch.shape[0]), out=offsets[1:])
    return chunks, offsets


def native_ratios(batch: np.ndarray, pi: np.ndarray, P: int, metric: str) -> np.ndarray:
    """:func:`imbalance_ratio` of every layer of ``batch`` (L, N), vectorised."""
    if metric == "device":
        L = batch.shape[0]
        cells = pi if L == 1 else (np.arange(L, dtype=np.int64)[:, None] * P + pi).ravel()
        values = np.bincount(cells, weights=batch.ravel(), minlength=L * P).reshape(L, P)
    else:
        values = batch.astype(np.float64)
    mean = values.mean(axis=1)
    top = values.max(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mean > 0, top / np.where(mean > 0, mean, 1.0), 1.0)


def as_layer_loads(loads: Any, name: str = "loads", *, hint: str = "") -> np.ndarray:
    """One layer's ``loads`` as int64 (N,): the routing-slot totals of its experts.

    A 2-D array is refused: it would be per-source counts (N, S) for one function and a batch of layers
    (L, N) for another. The ValueError says so, followed by ``hint`` (what to pass instead here)."""
    arr = as_array(loads, name, kinds="iuf")
    if arr.ndim != 1:
        what = ("a 2-D array is ambiguous (per-source counts (N, S) or a batch of layers (L, N)); "
                if arr.ndim == 2 else "")
        raise ValueError(f"`{name}` must be the routing-slot totals of one layer, shape (N,); got an array of "
                         f"shape {arr.shape}: {what}{hint or 'sum per-source counts over the sources'}")
    totals, _ = as_loads(arr, name)
    return totals


_PLAN_KINDS = "a plan Result of numtk.moe: llep_plan, standard_ep_plan or optimal_plan"


def _has_field(plan: Any, key: str) -> bool:
    """Whether ``plan`` holds ``key`` without building anything: a :class:`PlanResult`'s ``assignment`` counts
    only once it has been built."""
    if isinstance(plan, PlanResult):
        return key in plan.__dict__
    return key in plan


def _plan_field(plan: Any, key: str, ndims: tuple[int, ...], name: str) -> np.ndarray:
    if key not in plan:
        raise ValueError(f"`{name}` lacks the field {key!r} ({_PLAN_KINDS})")
    # attribute access on a Result: item access on a PlanResult would build its dense assignment
    value = plan.__dict__[key] if isinstance(plan, Result) and key in plan.__dict__ else plan[key]
    arr = as_array(value, f"{name}.{key}", kinds="iu")
    if arr.ndim not in ndims:
        raise ValueError(f"`{name}.{key}` must be {' or '.join(map(str, ndims))}-D; got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _chunks_of_assignment(assignment: np.ndarray) -> np.ndarray:
    """Chunks of a dense (N, P) assignment: each expert's slots cut in increasing device order."""
    e, p = np.nonzero(assignment)
    stop = np.cumsum(assignment, axis=1)[e, p]
    return np.column_stack([e, p, stop - assignment[e, p], stop]).astype(np.int64).reshape(-1, 4)


def check_plan_layer(plan: Any, layer: Any = 0, *, name: str = "plan") -> Result:
    """Layer ``layer`` of a plan (a plan Result, or a mapping with its fields), checked.

    Reads ``chunks`` (K, 4), or (K, 5) with a leading layer column for a plan of several layers,
    ``weight_transfers`` (W, 3) or (W, 4), ``placement`` (N,) (or one row per layer) and ``device_loads``
    (P,) or (L, P). The dense ``assignment`` is read only where it costs nothing: a mapping without
    ``chunks`` (then its rows are cut in device order), or one that holds it; a :class:`PlanResult`'s is
    cross-checked only once built. Refuses, with a ValueError naming ``name``: missing or malformed fields,
    chunks of an expert or device out of range, chunks that do not tile ``[0, load)`` of every expert,
    transfers that are not (expert, native device, another device), a chunk away from its expert's native
    device without a transfer there, device loads or an assignment that disagree with the chunks.
    """
    if (not (hasattr(plan, "keys") and hasattr(plan, "__getitem__") and hasattr(plan, "__contains__"))
            or isinstance(plan, (str, bytes))):
        raise TypeError(f"`{name}` must be {_PLAN_KINDS}; got {type(plan).__name__}")
    has_chunks = "chunks" in plan
    assignment = None
    if _has_field(plan, "assignment") or not has_chunks:
        if "assignment" not in plan:
            raise ValueError(f"`{name}` lacks the field 'chunks' ({_PLAN_KINDS})")
        assignment = _plan_field(plan, "assignment", (2, 3), name)
    if has_chunks:
        chunks = _plan_field(plan, "chunks", (2,), name)
        if chunks.shape[1] not in (4, 5):
            raise ValueError(f"`{name}.chunks` must have rows (expert, device, start, stop), shape (K, 4), or "
                             f"(layer, expert, device, start, stop) for a plan of several layers; got shape "
                             f"{chunks.shape}")
        batched = chunks.shape[1] == 5
    else:
        batched = assignment.ndim == 3
    lead = int(batched)
    transfers = _plan_field(plan, "weight_transfers", (2,), name)
    if transfers.shape[1] != 3 + lead:
        raise ValueError(f"`{name}.weight_transfers` must have shape (W, {3 + lead}) with chunks of "
                         f"{4 + lead} columns; got {transfers.shape}")
    placement = _plan_field(plan, "placement", (1, 2), name)
    device_loads = _plan_field(plan, "device_loads", (1 + lead,), name) if "device_loads" in plan else None
    if assignment is not None and assignment.ndim != 2 + lead:
        raise ValueError(f"`{name}.assignment` must be {2 + lead}-D with chunks of {4 + lead} columns; got shape "
                         f"{assignment.shape}")
    sized = device_loads if device_loads is not None else assignment
    if sized is None:
        raise ValueError(f"`{name}` lacks the field 'device_loads' (the device count; {_PLAN_KINDS})")
    P = int(sized.shape[-1])
    L = int(sized.shape[0]) if batched else 1
    if P < 1 or L < 1:
        raise ValueError(f"`{name}` must have at least one device and one layer; got device loads of shape "
                         f"{sized.shape}")
    layer = check_int(layer, "layer", minimum=-L, maximum=L - 1) % L
    if batched:
        for what, arr in (("chunks", chunks if has_chunks else None), ("weight_transfers", transfers)):
            if arr is not None and len(arr) and (arr[:, 0].min() < 0 or arr[:, 0].max() >= L):
                raise ValueError(f"`{name}.{what}` has a layer outside [0, {L})")
        transfers = transfers[transfers[:, 0] == layer, 1:]
        if has_chunks:
            chunks = chunks[chunks[:, 0] == layer, 1:]
        if assignment is not None:
            if assignment.shape[0] != L:
                raise ValueError(f"`{name}.assignment` must hold one matrix per layer ({L}); got {assignment.shape[0]}")
            assignment = assignment[layer]
        if device_loads is not None:
            device_loads = device_loads[layer]
    if placement.ndim == 2:
        if placement.shape[0] != L:
            raise ValueError(f"`{name}.placement` must hold one row per layer ({L}); got {placement.shape[0]}")
        placement = placement[layer]
    N = len(placement)
    if N < 1:
        raise ValueError(f"`{name}.placement` must hold the native device of at least one expert")
    if placement.min() < 0 or placement.max() >= P:
        raise ValueError(f"`{name}.placement` must hold device ids in [0, {P})")
    if assignment is not None:
        if assignment.shape != (N, P):
            raise ValueError(f"`{name}.assignment` must have shape (N, P) = ({N}, {P}); got {assignment.shape}")
        if assignment.size and assignment.min() < 0:
            raise ValueError(f"`{name}.assignment` must be non-negative")
        if not has_chunks:
            if assignment.size and int(assignment.max()) >= MAX_TOTAL // max(P, 1):
                raise ValueError(f"`{name}.assignment` must hold loads below 2**62")
            chunks = _chunks_of_assignment(assignment)

    # chunks: in range, non-empty, tiling [0, load) of each expert
    e, p, start, stop = chunks.T
    if len(chunks) and (e.min() < 0 or e.max() >= N):
        raise ValueError(f"`{name}` has a chunk of an expert outside [0, {N})")
    if len(chunks) and (p.min() < 0 or p.max() >= P):
        raise ValueError(f"`{name}` has a chunk on a device outside [0, {P})")
    if np.any(start < 0) or np.any(stop < start):
        raise ValueError(f"`{name}` has a chunk with start < 0 or stop < start")
    if np.any(stop == start):  # empty chunks compute nothing
        chunks = chunks[stop > start]
        e, p, start, stop = chunks.T
    loads = np.zeros(N, dtype=np.int64)
    if len(chunks):
        es, ss, ts = e, start, stop
        first = np.r_[True, es[1:] != es[:-1]]
        # a planner lists each expert's chunks together, by increasing start: then no sort is needed
        if np.any(np.bincount(es[first], minlength=N) > 1) or np.any(ss[1:][~first[1:]] != ts[:-1][~first[1:]]):
            order = np.lexsort((start, e))
            es, ss, ts = e[order], start[order], stop[order]
            first = np.r_[True, es[1:] != es[:-1]]
        if np.any(ss[first] != 0) or np.any(ss[1:][~first[1:]] != ts[:-1][~first[1:]]):
            raise ValueError(f"the chunks of `{name}` must tile [0, load) of every expert without gaps or overlaps")
        last = np.r_[first[1:], True]
        loads[es[last]] = ts[last]
        if int(loads.max()) >= MAX_TOTAL // N and sum(int(v) for v in loads) >= MAX_TOTAL:
            raise ValueError(f"the expert loads of `{name}` must total below 2**62")
    sizes = stop - start
    if device_loads is not None:
        per_device = np.zeros(P, dtype=np.int64)
        np.add.at(per_device, p, sizes)
        if device_loads.shape != (P,) or not np.array_equal(per_device, device_loads):
            raise ValueError(f"`{name}.device_loads` does not match its chunks")
    if assignment is not None and has_chunks:
        keys, inverse = np.unique(e * P + p, return_inverse=True)
        slots = np.zeros(len(keys), dtype=np.int64)
        np.add.at(slots, inverse.ravel(), sizes)
        if np.count_nonzero(assignment) != len(keys) or np.any(assignment[keys // P, keys % P] != slots):
            raise ValueError(f"`{name}.assignment` does not match its chunks")

    # transfers: (expert, native device, another device), one per (expert, destination); every chunk away
    # from its expert's native device has one
    if len(transfers):
        te, ts_, td = transfers.T
        if (te.min() < 0 or te.max() >= N or td.min() < 0 or td.max() >= P or np.any(ts_ != placement[te])
                or np.any(td == ts_)):
            raise ValueError(f"`{name}.weight_transfers` must hold rows (expert, native device, another device) of "
                             "the plan's experts and devices")
        _, keep = np.unique(te * P + td, return_index=True)
        if len(keep) < len(transfers):
            transfers = transfers[np.sort(keep)]
    away = np.flatnonzero(p != placement[e]) if len(chunks) else np.zeros(0, dtype=np.int64)
    if len(away):
        wanted = e[away] * P + p[away]
        have = np.sort(transfers[:, 0] * P + transfers[:, 2])
        at = np.minimum(np.searchsorted(have, wanted), max(len(have) - 1, 0))
        missing = have[at] != wanted if len(have) else np.ones(len(wanted), dtype=bool)
        if missing.any():
            ee, pp = divmod(int(wanted[np.argmax(missing)]), P)
            raise ValueError(f"`{name}` computes expert {ee} on device {pp} without a weight transfer to it")
    return Result(chunks=np.ascontiguousarray(chunks), placement=np.ascontiguousarray(placement),
                  transfers=np.ascontiguousarray(transfers), loads=loads, num_devices=P, num_layers=L, layer=layer)


@constraints(plan="option", layer="index")
def plan_layer(plan: Any, layer: int = 0) -> Result:
    """One layer of an expert-parallel plan, checked: what an executor carries out.

    Parameters
    ----------
    plan : Result or mapping
        A plan of :func:`llep_plan`, :func:`standard_ep_plan` or :func:`optimal_plan`, of one layer or of
        several (from (L, N) loads), or a mapping with the plan fields (``chunks`` or ``assignment``,
        ``weight_transfers``, ``placement``, optionally ``device_loads``).
    layer : int, optional
        The layer of a plan of several layers (default 0; negative values count from the end).

    Returns
    -------
    res : Result
        With fields

        chunks : ndarray of int64, shape (K, 4)
            Rows (expert, device, start, stop), start < stop, in plan order: device ``device`` computes the
            routing slots ``[start, stop)`` of expert ``expert``.
        placement : ndarray of int64, shape (N,)
            The native device of each expert.
        transfers : ndarray of int64, shape (W, 3)
            Rows (expert, native device, destination): one weight copy per (expert, destination).
        loads : ndarray of int64, shape (N,)
            Each expert's routing slots (the sizes of its chunks).
        num_devices : int
            P.
        num_layers : int
            L of the plan.
        layer : int
            The layer taken, in [0, L).

    Raises
    ------
    ValueError
        Missing or malformed fields; chunks of an expert or device out of range; chunks that do not tile
        ``[0, load)`` of every expert; transfers that are not (expert, native device, another device); a chunk
        away from its expert's native device without a transfer there; device loads or a dense assignment that
        disagree with the chunks; ``layer`` out of range.
    TypeError
        ``plan`` not a mapping.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import llep_plan, plan_layer
    >>> batch = llep_plan(np.array([[10, 0, 1, 1], [3, 3, 3, 3]]), 2, min_chunk=1)
    >>> one = plan_layer(batch, 0)
    >>> one.chunks
    array([[ 0,  0,  0,  6],
           [ 0,  1,  6, 10],
           [ 2,  1,  0,  1],
           [ 3,  1,  0,  1]])
    >>> one.transfers, one.loads, one.num_layers
    (array([[0, 0, 1]]), array([10,  0,  1,  1]), 2)
    """
    return check_plan_layer(plan, layer, name="plan")
