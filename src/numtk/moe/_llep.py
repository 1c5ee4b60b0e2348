"""The least-loaded expert-parallel planner (LLEP) and the standard expert-parallel plan it falls back to.

Under expert parallelism every device owns a fixed set of experts and computes every routing slot sent to
them, so a skewed router makes one device the bottleneck. :func:`llep_plan` keeps the router's decisions and
plans, per layer and per step, which device computes which slice of each expert's slots: the overflow of an
overloaded expert goes, with a copy of its weights, to the least-loaded devices (Nguyen et al., ICML 2026).
The loop runs compiled (``native/include/numtk/moe/llep_plan.hpp``); this module checks the arguments,
applies the imbalance gate, computes the capacities exactly and builds the plan Result
(:func:`numtk.moe._plan.layers_result`). A batch of layers is planned in one call, spread over ``workers``.
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from functools import lru_cache, partial
from typing import Any, Callable, Union

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import Result, as_map, n_threads
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_int, check_option, check_real, check_size
from numtk.moe import _moe_ext
from numtk.moe._plan import (MAX_TOTAL, as_loads, as_placement, check_memory, imbalance_ratio, layers_result,
                             lower_bound, max_foreign_from_bytes, native_ratios, standard_layers)

__all__ = ["llep_plan", "standard_ep_plan"]

IMBALANCE_METRICS = ("device", "expert")

Workers = Union[int, Callable]

_INF = float("inf")

# Above this many chunk rows and device entries (L * (N + P)), check the memory before planning.
_CHECK_SIZE_FROM = 2**20
# Layer-experts (layers x experts of the batch) per planner thread (one per block of layers): 128 Zipf layers of
# 64 experts (8192, about 3 ms on one thread) ran at 0.1-0.8x of the one-thread time with two threads on 2
# shared cores, 512 and 2048 layers at 1.0x (bench/compare.py --kernels none --threads); on an idle machine
# 512 layers at 0.96-1.07x and 2048 at 1.12-1.22x, so threads start from 2 * 2**15 (1024 such layers).
LLEP_GRAIN = 2**15
# Bytes per such entry that a plan holds at its peak: the kernel's chunk buffer (4 int64 per chunk, about N + P
# chunks a layer), the Result's copies of it (layer column, sizes, keys of the transfers) and its per-device
# arrays (loads, ratios, peak memory).
_BYTES_PER_ENTRY = 160


# --------------------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------------------
_NATIVE_COUNTS = (np.dtype(np.int32), np.dtype(np.int64))  # native byte order


def _counts(loads: Any) -> np.ndarray:
    """``loads`` as an (L, N) or (N,) int32/int64 C-contiguous array of totals per expert.

    A C-contiguous int32 or int64 array of native byte order passes through without a copy (after the
    checks: one pass for the sign and the largest entry); anything else goes through
    :func:`numtk.moe._plan.as_loads` (int64; (L, N, S) summed over sources). Totals are checked in exact
    integers, so that no sum wraps around.
    """
    if (type(loads) is np.ndarray and loads.dtype in _NATIVE_COUNTS and loads.ndim in (1, 2)
            and loads.flags.c_contiguous and loads.size):
        low, high = loads.min(), loads.max()
        if low < 0:
            raise ValueError("`loads` must be non-negative")
        if int(high) >= MAX_TOTAL // loads.shape[-1]:  # a sum could reach 2**62: check it exactly
            rows = loads.reshape(-1, loads.shape[-1])
            if max(sum(int(v) for v in row) for row in rows) >= MAX_TOTAL:
                raise ValueError("the total of `loads` must be below 2**62")
        return loads
    if isinstance(loads, np.ndarray) and loads.dtype.kind in "iu" and loads.ndim in (1, 2, 3) and loads.size:
        # as_loads sums (L, N, S) over sources in int64: check first that no sum wraps around
        per_layer = loads.size // (loads.shape[0] if loads.ndim > 1 else 1)
        if int(loads.max()) >= MAX_TOTAL // max(per_layer, 1):
            rows = loads.reshape(1 if loads.ndim == 1 else loads.shape[0], -1)
            if loads.min() >= 0 and max(sum(int(v) for v in row) for row in rows) >= MAX_TOTAL:
                raise ValueError("the total of `loads` must be below 2**62")
    totals, _ = as_loads(loads, batch=True)
    return totals


@lru_cache(maxsize=32)
def _blocks(N: int, count: int, num_devices: int | None) -> tuple[np.ndarray, int]:
    """:func:`numtk.moe._plan.as_placement` of an int placement (contiguous blocks), kept for the next call
    (read-only: the planner and the Result only read it; the Result keeps a copy)."""
    pi, P = as_placement(count, N, num_devices)
    pi.setflags(write=False)
    return pi, P


def _layers_and_placement(loads: Any, placement: Any, num_devices: Any):
    """(batch (L, N), single, pi, P, totals (L,)): the loads as a batch, whether one layer was given, the
    placement, the total of each layer."""
    totals = _counts(loads)
    single = totals.ndim == 1
    batch = totals.reshape(1, -1) if single else totals
    if batch.shape[0] < 1:
        raise ValueError("`loads` must hold at least one layer; got shape " + str(totals.shape))
    N = batch.shape[1]
    if type(placement) is int and (num_devices is None or type(num_devices) is int):
        pi, P = _blocks(N, placement, num_devices)  # the common int placement: checked once per (N, P)
    else:
        if isinstance(placement, (list, tuple)):
            placement = as_array(placement, "placement")  # a ragged list: a TypeError naming `placement`
        if isinstance(placement, np.ndarray) and placement.ndim == 1 and placement.shape[0] != N:
            raise ValueError(f"`placement` must hold one device id per expert: `loads` has {N} experts, "
                             f"`placement` has {placement.shape[0]} entries")
        pi, P = as_placement(placement, N, num_devices)
    count = batch.shape[0] * (N + P)
    if count > _CHECK_SIZE_FROM:  # the chunk lists and the per-device arrays (the dense assignment is lazy)
        check_size(count, _BYTES_PER_ENTRY, "loads" if N >= P else
                   "num_devices" if num_devices is not None else "placement")
    return batch, single, pi, P, batch.sum(axis=1, dtype=np.int64)


def _memory_args(memory_limit: Any, expert_bytes: Any, token_bytes: Any, N: int, totals: np.ndarray, P: int):
    """:func:`numtk.moe._plan.check_memory`, and byte counts small enough that no peak memory (at most 2N
    experts and a layer's total of slots on one device; only reported with ``expert_bytes``) overflows a
    float."""
    limit, expert_bytes, token_bytes = check_memory(memory_limit, expert_bytes, token_bytes, P)
    most = float(totals.max())
    if expert_bytes is not None and not np.isfinite(2.0 * N * expert_bytes):
        raise ValueError(f"`expert_bytes` = {expert_bytes:g} is too large: the bytes of the experts on a device "
                         "would overflow a float")
    with np.errstate(over="ignore"):
        if expert_bytes is not None and not np.isfinite(most * token_bytes + 2.0 * N * expert_bytes):
            raise ValueError(f"`token_bytes` = {token_bytes:g} is too large: the activation bytes of a device "
                             "would overflow a float")
    return limit, expert_bytes, token_bytes


@lru_cache(maxsize=64)
def _decimal_ratio(alpha: float) -> tuple[int, int]:
    """alpha as the ratio of integers its shortest repr writes: 1.1 -> (11, 10), not the binary double's
    (2476979795053773, 2251799813685248), which is slightly above 11/10."""
    ratio = Fraction(repr(float(alpha)))
    return ratio.numerator, ratio.denominator


def _capacity(total: int, P: int, alpha: float) -> int:
    """ceil(alpha * total / P) in exact integer arithmetic, alpha read as the decimal it was written as
    (:func:`_decimal_ratio`), capped at 2**62: any capacity >= total keeps every expert on its native device,
    so the cap changes no plan."""
    num, den = _decimal_ratio(alpha)
    return min(-(-(num * int(total)) // (den * P)), MAX_TOTAL)


# --------------------------------------------------------------------------------------------------
# the compiled planner, over a thread count or a map-like callable
# --------------------------------------------------------------------------------------------------
def _kernel(loads: np.ndarray, pi: np.ndarray, caps: np.ndarray, min_chunk: int, P: int,
            limit: np.ndarray | None, expert_bytes: float, token_bytes: float, threads: int = 1):
    """The compiled planner on the layers of ``loads`` (L, N): (chunks (K, 4), offsets (L + 1,), forced (L,),
    stranded (S, 2) rows (layer, expert): the remainders the memory limit kept on their native device)."""
    return _moe_ext.llep_plan_layers(loads, pi, caps, min_chunk, P, limit, expert_bytes, token_bytes, threads)


def _run(loads: np.ndarray, pi: np.ndarray, caps: np.ndarray, min_chunk: int, P: int, limit, expert_bytes: float,
         token_bytes: float, workers: Any, total_layers: int):
    """The planner on every layer of ``loads`` (``total_layers`` before the gate, for messages): compiled
    threads for an int ``workers``, else one call per layer through the map-like callable."""
    eb = 0.0 if expert_bytes is None else float(expert_bytes)
    if not callable(workers):
        return _moe_ext.llep_plan_layers(loads, pi, caps, min_chunk, P, limit, eb, float(token_bytes), workers)
    task = partial(_kernel, pi=pi, min_chunk=min_chunk, P=P, limit=limit, expert_bytes=eb,
                   token_bytes=float(token_bytes))
    with as_map(workers) as mapper:
        parts = list(mapper(_layer_task, [(task, loads[i:i + 1], caps[i:i + 1]) for i in range(len(loads))]))
    if len(parts) != len(loads):
        raise ValueError(f"`workers` returned {len(parts)} result(s) for {len(loads)} item(s), one per layer "
                         f"to plan ({len(loads)} of the {total_layers} layer(s): the others were left to the "
                         "standard plan by the gate); a map-like callable must return one result per item"
                         if total_layers != len(loads) else
                         f"`workers` returned {len(parts)} result(s) for {len(loads)} item(s), one per layer; "
                         "a map-like callable must return one result per item")
    sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
    chunks = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, 4), np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    forced = np.array([p[2][0] for p in parts], dtype=np.int64)
    stranded = [np.column_stack([np.full(len(p[3]), i, dtype=np.int64), p[3][:, 1]]) for i, p in enumerate(parts)]
    stranded = np.concatenate(stranded) if stranded else np.zeros((0, 2), np.int64)
    return chunks, offsets, forced, stranded


def _layer_task(item):
    task, loads, caps = item
    return task(loads, caps=caps)


# --------------------------------------------------------------------------------------------------
# why a plan does not fit the memory limit
# --------------------------------------------------------------------------------------------------
def _listed(name: str, items, verb: str = "") -> str:
    """'device 3 exceeds its' or 'devices [0, 2] exceed their' (at most 10 listed)."""
    items = [int(v) for v in items]
    one = len(items) == 1
    text = f"{name} {items[0]}" if one else f"{name}s {items[:10]}{'...' if len(items) > 10 else ''}"
    return text + {"": "", "exceed": " exceeds its" if one else " exceed their"}[verb]


def _infeasible_message(peak: np.ndarray, limit: np.ndarray, native_bytes: np.ndarray, stranded: np.ndarray,
                        pi: np.ndarray, gated: bool, ratio: float, threshold: float | None) -> str:
    """Why one layer's plan exceeds ``memory_limit``: the devices over it, by cause (their native experts'
    weights alone; an overflow that no other device had the memory to take, with its experts; the standard
    plan the gate returned)."""
    tol = limit * (1 + 1e-12)
    over = np.flatnonzero(peak > tol)
    alone = over[native_bytes[over] > tol[over]]
    parts = []
    if len(alone):
        parts.append(f"the native experts' weights of {_listed('device', alone)} alone exceed the `memory_limit` "
                     "there (no plan fits)")
    rest = np.setdiff1d(over, alone)
    if gated and len(rest):
        parts.append(f"the gate returned the standard plan (imbalance ratio {ratio:.4g} < "
                     f"`imbalance_threshold` = {threshold:g}), which exceeds the `memory_limit` of "
                     f"{_listed('device', rest)}")
    elif len(rest):
        kept = stranded[np.isin(pi[stranded], rest)] if len(stranded) else stranded
        if len(kept):
            parts.append(f"no other device had the memory to receive the overflow of {_listed('expert', kept)}: it "
                         f"stayed native, and {_listed('device', np.unique(pi[kept]), 'exceed')} `memory_limit`")
        left = np.setdiff1d(rest, pi[kept]) if len(kept) else rest
        if len(left):
            parts.append(f"{_listed('device', left, 'exceed')} `memory_limit`")
    return "; ".join(parts)


def _memory_report(res: Result, limit: np.ndarray, expert_bytes: float, pi: np.ndarray, P: int,
                   stranded: np.ndarray, active: np.ndarray, ratios: np.ndarray, threshold: float | None,
                   single: bool) -> list[str]:
    """The ``message`` of every layer ('' where the plan fits), and a RuntimeWarning when one does not."""
    feasible = np.atleast_1d(res.feasible)
    messages = [""] * len(feasible)
    bad = np.flatnonzero(~feasible)
    if not len(bad):
        return messages
    native_bytes = np.bincount(pi, minlength=P) * expert_bytes
    peak = np.atleast_2d(res.peak_memory)
    for i in bad.tolist():
        mine = stranded[stranded[:, 0] == i, 1] if len(stranded) else stranded[:, 1]
        messages[i] = _infeasible_message(peak[i], limit, native_bytes, mine, pi, not active[i], float(ratios[i]),
                                          threshold)
    if single:
        text = f"llep_plan: the plan does not fit `memory_limit`: {messages[0]} (feasible=False; see `message`)"
    else:
        layers = bad.tolist()
        text = (f"llep_plan: {len(layers)} of {len(feasible)} layers do not fit `memory_limit` (feasible=False, "
                f"layers {layers[:10]}{'...' if len(layers) > 10 else ''}; see `message`); layer {layers[0]}: "
                f"{messages[layers[0]]}")
    warnings.warn(text, RuntimeWarning, stacklevel=3)
    return messages


# --------------------------------------------------------------------------------------------------
# the public functions
# --------------------------------------------------------------------------------------------------
@constraints(loads=("array1d", "array2d"), placement=("int>=1", "array1d"), capacity_factor="real>0",
             min_chunk="cap", imbalance_threshold="real>=0", imbalance_metric="option",
             memory_limit=("real>=0", "array1d"), expert_bytes="real>=0", token_bytes="real>=0", num_devices="count",
             workers="workers")
def llep_plan(loads: ArrayLike, placement: Union[int, ArrayLike], *, capacity_factor: float = 1.0,
              min_chunk: int = 1024, imbalance_threshold: float | None = 1.3, imbalance_metric: str = "device",
              memory_limit: Union[float, ArrayLike, None] = None, expert_bytes: float | None = None,
              token_bytes: float = 0, num_devices: int | None = None, workers: Workers = 1) -> Result:
    r"""Least-loaded expert-parallel plan: spill overloaded experts' routing slots to the least-loaded devices.

    Experts are visited by decreasing load; each keeps on its native device what fits under the per-device
    capacity, and the rest goes, in chunks of at least ``min_chunk`` slots (with a copy of the expert's
    weights), to the devices with the least effective load (Nguyen et al. [1]_, Alg. 2/3). When the routing is
    balanced (imbalance ratio below ``imbalance_threshold``) the standard expert-parallel plan is returned.

    Parameters
    ----------
    loads : array_like of int, shape (N,), (L, N) or (L, N, S)
        Routing slots of each of the N experts in this step (tokens times top-k, summed over source
        devices); (L, N) plans L layers at once; (L, N, S) gives them per source device and is summed over
        S. Non-negative integers (floats with integral values are accepted). A C-contiguous int32 or int64
        array is planned without a copy. A single layer's per-source counts (N, S) are passed summed (or as
        (1, N, S)): a 2-D array is a batch of layers.
    placement : int or array_like of int, shape (N,)
        The native device of each expert, ids in [0, P); or an int P for contiguous blocks
        (expert e on device ``e * P // N``; needs N divisible by P).
    capacity_factor : float, default 1.0
        alpha > 0: the capacity of a device is ``ceil(alpha * T / P)`` slots (T the layer's total), computed
        exactly in integers with alpha read as the decimal number it was written as (its shortest repr):
        1.1 means 11/10, so T = 100 on P = 2 devices gives 55, not the 56 of the binary double just above
        1.1.
    min_chunk : int, default 1024
        The smallest chunk sent to another device, unless it is the last piece of an expert.
    imbalance_threshold : float or None, default 1.3
        The gate lambda: when the imbalance ratio is below it the standard plan is returned. None disables
        the gate.
    imbalance_metric : {'device', 'expert'}, default 'device'
        'device': max / mean of the native device loads (the reference code's gate); 'expert': max / mean
        of the expert loads (the paper's text).
    memory_limit : float or array_like of float, shape (P,), optional
        Bytes each device may hold; with it a device receives a chunk only if it still fits, and (with
        ``token_bytes``) keeps of its own experts' slots only what fits (Notes). Needs ``expert_bytes``.
    expert_bytes : float, optional
        Bytes of one expert's weights. With it (and no limit) the plan reports ``peak_memory``.
    token_bytes : float, default 0
        Activation bytes per routed slot (``(D + H) * dtype_bytes`` matches :func:`simulate_ep`).
    num_devices : int, optional
        P, when some devices host no expert (default: from ``placement``).
    workers : int or map-like callable, default 1
        Layers of a batch are planned in parallel: an int is a number of compiled threads (-1: every core),
        a callable with the signature of ``map`` carries one layer per item. The plans do not depend on it.

    Returns
    -------
    Result
        For one layer:

        assignment : ndarray of int64, shape (N, P)
            Slots of expert e computed on device p.
        chunks : ndarray of int64, shape (K, 4)
            Rows (expert, device, start, stop) in plan order: the device computes the slots [start, stop)
            of the expert. The chunks of an expert tile [0, l_e); consecutive pieces of one expert on one
            device are one chunk.
        weight_transfers : ndarray of int64, shape (W, 3)
            Rows (expert, src, dst), unique, in plan order: the copies of expert weights the plan needs.
        device_loads : ndarray of int64, shape (P,)
            Slots computed on each device (column sums of ``assignment``).
        max_load : int
            The largest device load.
        lower_bound : int
            ``ceil(T / P)``, and with ``memory_limit`` the bound from the foreign experts each device can
            hold (:func:`optimal_plan`); no plan does better.
        capacity : int
            ``ceil(alpha * T / P)`` (capped at 2**62: any capacity >= T keeps every expert native).
        method : str
            'llep', or 'standard' when the gate returned the standard plan.
        imbalance_ratio : float
            The ratio the gate compared with ``imbalance_threshold`` (``imbalance_metric``; 1.0 for
            all-zero loads).
        forced : int
            Chunks placed beyond capacity: no device had room for ``min_chunk`` slots, or no device could
            take the remainder (one device, or memory) so it stayed native.
        peak_memory : ndarray of float64, shape (P,) or None
            ``(native + received experts) * expert_bytes + device_loads * token_bytes``; None without
            ``expert_bytes``.
        feasible : bool
            Whether the plan fits the memory limit: ``peak_memory <= memory_limit`` on every device (up
            to a relative 1e-12). True without a limit. A remainder that no device had the memory to take
            stays on its native device; that makes the plan infeasible only if the native device's memory
            cannot hold it (otherwise it is a forced chunk like any other).
        placement : ndarray of int64, shape (N,)
            The native device of each expert (the placement the plan was made with).
        message : str
            Why the plan is infeasible, naming the devices over the limit and the cause: their native
            experts' weights alone exceed it (no plan fits), an overflow that no other device had the
            memory to receive stayed on them (the experts named), or the gate returned the standard plan,
            which does not fit. The empty string when ``feasible`` is True.

        For L layers the same fields, stacked: ``assignment`` (L, N, P), ``device_loads`` (L, P),
        ``max_load``, ``lower_bound``, ``capacity``, ``imbalance_ratio``, ``forced`` arrays (L,),
        ``feasible`` bool (L,), ``method`` and ``message`` str (L,), ``peak_memory`` (L, P) or None,
        ``placement`` (N,) (shared by the layers); ``chunks`` (K, 5) rows (layer, expert, device, start, stop)
        and ``weight_transfers`` (W, 4) rows (layer, expert, src, dst). ``assignment`` is built from
        ``chunks`` when first read; where the dense (L, N, P) array would not fit in memory, reading it
        raises a MemoryError and ``chunks`` holds the same plan.

    Raises
    ------
    ValueError
        If the loads are negative, fractional or not finite, the placement does not fit the loads or the
        device count, or a number is out of range.
    TypeError
        If an argument has the wrong type.

    Warns
    -----
    RuntimeWarning
        Whenever a plan does not fit ``memory_limit`` (``feasible`` is False), with its ``message``.

    See Also
    --------
    standard_ep_plan : every expert on its native device.
    optimal_plan : the exact optimum of small instances (MILP).
    simulate_ep : latency and memory of a plan.

    Notes
    -----
    Let :math:`l_e` be the loads, :math:`\pi(e)` the native devices, :math:`T = \sum_e l_e`,
    :math:`N_p = \sum_{\pi(e)=p} l_e` the native loads and :math:`c = \lceil \alpha T / P \rceil` the
    capacity. With ``pending[p]`` the slots of p's experts not yet visited and ``assigned[p]`` those placed
    on p, ``eff[p] = assigned[p] + pending[p]``. Experts are visited by decreasing load (ties: lower id); for
    expert e on g, ``pending[g] -= l_e`` and ``avail = c - eff[g]``: g keeps ``min(l_e, max(avail, 0))``
    slots and the remainder r spills. While r > 0, take the device o other than g with the least
    (``eff[o]``, id) and ``a = c - eff[o]``: if ``a > 0`` and (``a >= min_chunk`` or ``r <= a``), o takes
    ``min(r, a)`` slots; otherwise o takes all of r beyond its capacity (a forced chunk). The compiled loop
    keeps the devices in a min-heap on (eff, id): :math:`O(N \log N + (N + S) \log P)` time for S spill
    chunks.

    With ``min_chunk=1``, ``capacity_factor=1`` and no memory limit the plan reaches the lower bound
    :math:`\lceil T/P \rceil` exactly (before e is placed the free room :math:`Pc - T + l_e \ge l_e` covers
    it). When T/P is small against ``min_chunk`` forced chunks appear and the maximum can exceed
    :math:`\lceil T/P \rceil` by a large factor: scale ``min_chunk`` with the batch.

    **Gate.** With ratio :math:`\rho` = max/mean of the native device loads :math:`N_p` ('device') or of the
    expert loads ('expert'), :math:`\rho < \lambda` returns the standard plan: every field equal to
    :func:`standard_ep_plan`'s, except those that depend on arguments it does not take: ``capacity`` and
    ``imbalance_ratio`` report this call's ``capacity_factor`` and ``imbalance_metric``, and with
    ``memory_limit`` ``lower_bound`` and ``feasible`` account for it. The expert ratio is far above 1.3 for
    almost any real routing, so the gate seldom fires with ``imbalance_metric='expert'``.

    **Memory** (numtk's extension; the paper bounds only tokens). A device o may receive c slots of expert e
    only if :math:`B_o + (h_o + n)\,b_w + b_t(\mathrm{eff}_o + c) \le M_o`, with :math:`B_o` the bytes of
    its native experts, :math:`h_o` the foreign experts it received so far, n = 0 if it received e already
    (else 1), :math:`b_w` = ``expert_bytes``, :math:`b_t` = ``token_bytes``. The test uses eff (slots placed
    plus native slots still to place) as the device's load, so a device within its limit stays within it;
    the least-eff device among those that pass receives the chunk. The native device g is held to the same
    test (n = 0): with :math:`b_t > 0`, e keeps on g at most the largest k with
    :math:`B_g + h_g b_w + b_t(\mathrm{eff}_g + k) \le M_g` (0 if none), besides the capacity, and the rest
    spills as usual. When no device passes, the remainder stays native (a forced chunk), and the plan is
    infeasible if g cannot hold it. This greedy is near-optimal when memory leaves room for about three
    foreign experts per device and can be far from the optimum when only one fits; :func:`optimal_plan`
    solves small instances exactly.

    Capacity differs from the reference code, which uses ``int(alpha * (T // P))``: with alpha = 1 and T not
    divisible by P its P capacities hold fewer than T slots and the last ones are forced. alpha is read as
    the decimal it was written as (``fractions.Fraction(repr(alpha))``) rather than as its binary double,
    which for most decimals is slightly above or below it: with alpha = 1.1, T = 100 and P = 2 the capacity
    is :math:`\lceil 110/2 \rceil = 55`, where the double (1.100000000000000088...) would give 56.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.
    .. [2] R. L. Graham, "Bounds on Multiprocessing Timing Anomalies", SIAM J. Appl. Math. 17(2), 1969
       (longest processing time first).

    Examples
    --------
    Expert 0 holds 10 of 12 slots; its device would compute 10, the other 2. LLEP sends 4 slots of
    expert 0 to device 1:

    >>> import numpy as np
    >>> from numtk.moe import llep_plan
    >>> res = llep_plan([10, 0, 1, 1], [0, 0, 1, 1], min_chunk=1)
    >>> res.device_loads, res.max_load, res.lower_bound
    (array([6, 6]), 6, 6)
    >>> res.chunks
    array([[ 0,  0,  0,  6],
           [ 0,  1,  6, 10],
           [ 2,  1,  0,  1],
           [ 3,  1,  0,  1]])
    >>> res.weight_transfers
    array([[0, 0, 1]])

    With a memory limit (here 1 byte per slot, weights free) device 0 keeps only the 5 slots it can hold;
    the rest spills, and the two slots of device 1's own experts stay there beyond capacity:

    >>> res = llep_plan([10, 0, 1, 1], [0, 0, 1, 1], min_chunk=1, memory_limit=[5, 100], expert_bytes=0,
    ...                 token_bytes=1)
    >>> res.device_loads, res.feasible, res.forced, res.message
    (array([5, 7]), True, 3, '')

    A balanced layer stays on the standard plan; a batch of layers is planned in one call:

    >>> batch = llep_plan(np.array([[10, 0, 1, 1], [3, 3, 3, 3]]), 2, min_chunk=1)
    >>> batch.method, batch.max_load
    (array(['llep', 'standard'], dtype='<U8'), array([6, 6]))
    >>> batch.chunks[:2]
    array([[ 0,  0,  0,  0,  6],
           [ 0,  0,  1,  6, 10]])
    """
    # the full checks, unless the value is plainly valid (a finite float in range, a positive int, a listed str)
    if not (type(capacity_factor) is float and 0.0 < capacity_factor < _INF):
        capacity_factor = check_real(capacity_factor, "capacity_factor", low=0.0, low_open=True)
    if not (type(min_chunk) is int and 1 <= min_chunk <= MAX_TOTAL):
        min_chunk = min(check_int(min_chunk, "min_chunk", minimum=1), MAX_TOTAL)
    if imbalance_threshold is not None and not (type(imbalance_threshold) is float
                                                and 0.0 <= imbalance_threshold < _INF):
        imbalance_threshold = check_real(imbalance_threshold, "imbalance_threshold", low=0.0)
    if not (type(imbalance_metric) is str and imbalance_metric in IMBALANCE_METRICS):
        check_option(imbalance_metric, "imbalance_metric", IMBALANCE_METRICS)
    # a map-like callable is used as given; the common workers=1 and -1 skip the count of available cores here
    # (-1 is resolved from the batch's size below, where most batches get one thread without that count)
    if callable(workers) or (type(workers) is int and workers == 1):
        threads = 1
    else:
        threads = -1 if type(workers) is int and workers == -1 else n_threads(workers)
    batch, single, pi, P, totals = _layers_and_placement(loads, placement, num_devices)
    L = batch.shape[0]
    if threads != 1:
        threads = n_threads(workers, work=batch.size, grain=LLEP_GRAIN)
    if memory_limit is None and expert_bytes is None and type(token_bytes) is int and token_bytes == 0:
        limit = None  # the common call: nothing to check
    else:
        limit, expert_bytes, token_bytes = _memory_args(memory_limit, expert_bytes, token_bytes, batch.shape[1],
                                                        totals, P)

    if L == 1:  # the same value as native_ratios gives, with fewer NumPy calls
        ratios = np.array([imbalance_ratio(batch[0], pi, P, imbalance_metric)])
    else:
        ratios = native_ratios(batch, pi, P, imbalance_metric)
    sums = totals.tolist()
    caps = np.array([_capacity(t, P, capacity_factor) for t in sums], dtype=np.int64)
    if limit is None:
        lower = np.array([-(-t // P) for t in sums], dtype=np.int64)  # ceil(T / P)
    else:
        foreign = max_foreign_from_bytes(limit, expert_bytes, pi, P)
        lower = np.array([lower_bound(batch[i], P, foreign) for i in range(L)], dtype=np.int64)
    active = np.ones(L, dtype=bool) if imbalance_threshold is None else ~(ratios < imbalance_threshold)
    n_active = int(np.count_nonzero(active))
    run_with = workers if callable(workers) else threads
    if n_active == L:
        chunks, offsets, forced, stranded = _run(batch, pi, caps, min_chunk, P, limit, expert_bytes, token_bytes,
                                                 run_with, L)
        method = np.full(L, "llep", dtype="<U8")
    elif n_active == 0:
        chunks, offsets = standard_layers(batch, pi)
        forced, stranded = np.zeros(L, dtype=np.int64), np.zeros((0, 2), dtype=np.int64)
        method = np.full(L, "standard", dtype="<U8")
    else:  # some layers gated: the planner on the others, the standard plan on these, in layer order
        rows = np.flatnonzero(active)
        k_chunks, k_offsets, k_forced, k_stranded = _run(np.ascontiguousarray(batch[rows]), pi, caps[rows],
                                                         min_chunk, P, limit, expert_bytes, token_bytes, run_with, L)
        s_chunks, s_offsets = standard_layers(batch, pi)
        forced = np.zeros(L, dtype=np.int64)
        forced[rows] = k_forced
        stranded = np.column_stack([rows[k_stranded[:, 0]], k_stranded[:, 1]])
        where = {int(i): j for j, i in enumerate(rows)}
        parts = [k_chunks[k_offsets[where[i]]:k_offsets[where[i] + 1]] if i in where
                 else s_chunks[s_offsets[i]:s_offsets[i + 1]] for i in range(L)]
        chunks = np.concatenate(parts)
        offsets = np.zeros(L + 1, dtype=np.int64)
        np.cumsum([len(part) for part in parts], out=offsets[1:])
        method = np.where(active, "llep", "standard")
    # feasible: the plan's peak memory within the limit on every device (layers_result)
    res = layers_result(batch, pi, P, chunks, offsets, method=method, capacity=caps, imbalance=ratios,
                        forced=forced, lower=lower, expert_bytes=expert_bytes, token_bytes=token_bytes,
                        memory_limit=limit, single=single)
    if limit is None:
        res.message = "" if single else np.full(L, "")
    else:
        messages = _memory_report(res, limit, expert_bytes, pi, P, stranded, active, ratios, imbalance_threshold,
                                  single)
        res.message = messages[0] if single else np.array(messages, dtype=str)
    return res


@constraints(loads=("array1d", "array2d"), placement=("int>=1", "array1d"), expert_bytes="real>=0",
             token_bytes="real>=0", num_devices="count")
def standard_ep_plan(loads: ArrayLike, placement: Union[int, ArrayLike], *, expert_bytes: float | None = None,
                     token_bytes: float = 0, num_devices: int | None = None) -> Result:
    r"""Standard expert parallelism: every expert's routing slots on its native device.

    Parameters
    ----------
    loads : array_like of int, shape (N,), (L, N) or (L, N, S)
        Routing slots per expert, one layer or a batch of L layers (as in :func:`llep_plan`).
    placement : int or array_like of int, shape (N,)
        Native device of each expert, or an int P for contiguous blocks (as in :func:`llep_plan`).
    expert_bytes : float, optional
        Bytes of one expert's weights; with it the plan reports ``peak_memory``.
    token_bytes : float, default 0
        Activation bytes per routed slot.
    num_devices : int, optional
        P, when some devices host no expert.

    Returns
    -------
    Result
        The plan fields of :func:`llep_plan`, for one layer:

        assignment : ndarray of int64, shape (N, P)
            ``l_e`` in column ``pi(e)``, zeros elsewhere.
        chunks : ndarray of int64, shape (K, 4)
            One row (expert, native device, 0, l_e) per expert with a non-zero load, by expert id.
        weight_transfers : ndarray of int64, shape (0, 3)
            None: no weights move.
        device_loads : ndarray of int64, shape (P,)
            The native loads :math:`N_p`.
        max_load : int
            :math:`\max_p N_p`.
        lower_bound : int
            :math:`\lceil T/P \rceil`.
        capacity : int
            :math:`\lceil T/P \rceil`, the capacity :func:`llep_plan` uses with ``capacity_factor=1``
            (standard EP does not use it).
        method : str
            'standard'.
        imbalance_ratio : float
            :math:`\max_p N_p / \mathrm{mean}_p N_p` (1.0 for all-zero loads).
        forced : int
            0.
        peak_memory : ndarray of float64, shape (P,) or None
            ``native experts * expert_bytes + device_loads * token_bytes``; None without ``expert_bytes``.
        feasible : bool
            True: without a memory limit every plan is feasible.
        placement : ndarray of int64, shape (N,)
            The native device of each expert.
        message : str
            '' (the plan is feasible).

        For L layers the same fields stacked as in :func:`llep_plan`.

    Raises
    ------
    ValueError
        If the loads are negative, fractional or not finite, or the placement does not fit them.
    TypeError
        If an argument has the wrong type.

    See Also
    --------
    llep_plan : the least-loaded plan, which returns this one when the routing is balanced.

    Notes
    -----
    :math:`x_{e,\pi(e)} = l_e`: each device computes its native experts' slots, so the step waits for the
    device with the largest native load. The ratio :math:`\max_p N_p / \lceil T/P \rceil` is what
    least-loaded planning can gain on overhead-free hardware [1]_.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.

    Examples
    --------
    >>> from numtk.moe import standard_ep_plan
    >>> res = standard_ep_plan([10, 0, 1, 1], 2)
    >>> res.device_loads, res.max_load, res.lower_bound, res.imbalance_ratio
    (array([10,  2]), 10, 6, 1.6666666666666667)
    """
    batch, single, pi, P, totals = _layers_and_placement(loads, placement, num_devices)
    _, expert_bytes, token_bytes = _memory_args(None, expert_bytes, token_bytes, batch.shape[1], totals, P)
    L = batch.shape[0]
    chunks, offsets = standard_layers(batch, pi)
    lower = -(-totals // P)
    res = layers_result(batch, pi, P, chunks, offsets, method=np.full(L, "standard"), capacity=lower,
                        imbalance=native_ratios(batch, pi, P, "device"), forced=np.zeros(L, dtype=np.int64),
                        lower=lower, expert_bytes=expert_bytes, token_bytes=token_bytes, memory_limit=None,
                        single=single)
    res.message = "" if single else np.full(L, "")  # no memory limit here: every plan is feasible
    return res
