"""An expert-parallel MoE layer run by an LLEP plan under torch.distributed: tokens move by all-to-all, the
weights of spilled experts move point to point, gradients of foreign-computed chunks return to each expert's
native rank.

The layer is the one of :func:`numtk.moe.moe_forward` (top-k routing, SwiGLU experts in ``nn.Linear``
layout, the same gates and the same slot order of a chunk), cut across P processes: rank p holds the tokens
it was given and the weights of its native experts (``plan.placement == p``), and computes the chunks the
plan gives it.
"""

from __future__ import annotations

import statistics
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real
from numtk._lib._swiglu import EXPERT_KEYS, check_expert_shapes, expert_matrices
from numtk.moe import plan_layer
from numtk.torch._common import check_tensor, torch
from numtk.torch._distributed import run_distributed

import torch.distributed as dist  # noqa: E402 - after the ImportError that names the extra

__all__ = ["llep_moe_forward", "benchmark_llep"]

_EXPERT_KEYS = EXPERT_KEYS
_DTYPES = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3, torch.float64: 4}
# header gathered from every rank before the layer runs: agreement of the shapes and keywords
_HEADER = ("error", "experts", "hidden", "intermediate", "top_k", "dtype", "grad", "normalize", "plan", "native")


# --------------------------------------------------------------------------------------------------
# arguments (checked on each rank; every rank learns of any rank's refusal, so that all raise together)
# --------------------------------------------------------------------------------------------------
@dataclass
class _Plan:
    chunks: np.ndarray      # (K, 4) int64 (expert, device, start, stop), start < stop, plan order
    placement: np.ndarray   # (N,) int64 native device of each expert
    transfers: np.ndarray   # (W, 3) int64 (expert, src, dst), unique (expert, dst), plan order
    loads: np.ndarray       # (N,) int64 slots of each expert
    P: int

    def fingerprint(self) -> int:
        blob = b"".join(np.ascontiguousarray(a, dtype=np.int64).tobytes()
                        for a in (self.chunks, self.placement, self.transfers, self.loads))
        return zlib.crc32(blob) + (self.P << 32)


def _parse_plan(plan: Any, P: int, layer: Any) -> _Plan:
    """Layer ``layer`` of a plan Result: its chunks, placement and transfers, checked as
    :func:`numtk.moe.moe_forward` and :func:`numtk.moe.simulate_ep` check them (one helper of numtk.moe)."""
    if not (hasattr(plan, "keys") and hasattr(plan, "__getitem__")) or isinstance(plan, (str, bytes)):
        raise TypeError(f"`plan` must be a plan Result of numtk.moe (llep_plan, standard_ep_plan, optimal_plan) "
                        f"or a callable that makes one from the loads; got {type(plan).__name__}")
    if "phy2log" in plan:
        raise TypeError("`plan` is an EPLB placement; the distributed layer runs plans with chunks (llep_plan, "
                        "standard_ep_plan, optimal_plan)")
    one = plan_layer(plan, 0 if layer is None else layer)
    if layer is None and one.num_layers > 1:
        raise ValueError(f"`plan` is a plan of {one.num_layers} layers (made from (L, N) loads); pass `layer` to "
                         "pick the layer this call runs")
    if one.num_devices != P:
        raise ValueError(f"`plan` is a plan for {one.num_devices} devices; the process group has {P} ranks")
    return _Plan(chunks=one.chunks, placement=one.placement, transfers=one.transfers, loads=one.loads, P=P)


def _local_checks(x: Any, router_logits: Any, experts: Any, plan: Any, top_k: Any, normalize: Any, layer: Any,
                  P: int) -> tuple[list[int], tuple]:
    """This rank's header (see ``_HEADER``, error code aside) and its checked arguments; raises on bad input."""
    x = check_tensor(x, "x", ndim=2)
    logits = check_tensor(router_logits, "router_logits", ndim=2)
    T, D = x.shape
    if logits.shape[0] != T:
        raise ValueError(f"`x` and `router_logits` must have one row per token; got {T} and {logits.shape[0]} rows")
    if logits.device != x.device:
        raise ValueError(f"`router_logits` must be on the device of `x` ({x.device}); got {logits.device}")
    if D < 1:
        raise ValueError(f"`x` must have at least one feature (column); got shape {tuple(x.shape)}")
    N = logits.shape[1]
    if N < 1:
        raise ValueError("`router_logits` must have one column per expert (at least one)")
    if x.dtype not in _DTYPES:
        raise TypeError(f"`x` must be float16, bfloat16, float32 or float64; got {x.dtype}")
    wg, wu, wd = (check_tensor(m, f"experts['{k}']", ndim=3)
                  for k, m in zip(_EXPERT_KEYS, expert_matrices(experts, whose=" of this rank's native experts")))
    M = wg.shape[0]
    H = check_expert_shapes([wg, wu, wd], D, "native experts of this rank")
    for key, w in zip(_EXPERT_KEYS, (wg, wu, wd)):
        if w.dtype != x.dtype:
            raise TypeError(f"`experts['{key}']` must have the dtype of `x` ({x.dtype}); got {w.dtype}")
        if w.device != x.device:
            raise ValueError(f"`experts['{key}']` must be on the device of `x` ({x.device}); got {w.device}")
    k = check_int(top_k, "top_k", minimum=1, maximum=N)
    normalize = check_bool(normalize, "normalize")
    if layer is not None:
        check_int(layer, "layer")
    parsed = None
    fingerprint = -1
    if not callable(plan) or hasattr(plan, "keys"):
        parsed = _parse_plan(plan, P, layer)
        if len(parsed.loads) != N:
            raise ValueError(f"`plan` is a plan of {len(parsed.loads)} experts; `router_logits` has {N}")
        fingerprint = parsed.fingerprint()
    grad = torch.is_grad_enabled() and (x.requires_grad or any(w.requires_grad for w in (wg, wu, wd)))
    header = [N, D, H, k, _DTYPES[x.dtype], int(grad), int(normalize), fingerprint, M]
    return header, (x, logits, (wg, wu, wd), parsed, k, normalize)


def _comm_device(group: Any) -> Any:
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _gather_rows(values: list[int], group: Any, P: int, device: Any) -> np.ndarray:
    t = torch.tensor(values, dtype=torch.int64, device=device)
    out = [torch.empty_like(t) for _ in range(P)]
    dist.all_gather(out, t, group=group)
    return torch.stack(out).cpu().numpy()


def _agree(error: BaseException | None, header: list[int], group: Any, P: int, me: int, device: Any) -> np.ndarray:
    """Gather every rank's header; if any rank refused its input, raise on every rank (the same type and
    message: the first failing rank's), so that no rank is left waiting in a collective."""
    code = 0 if error is None else 1 if isinstance(error, ValueError) else 2 if isinstance(error, TypeError) else 3
    rows = _gather_rows([code] + (header if error is None else [0] * (len(_HEADER) - 1)), group, P, device)
    failed = np.flatnonzero(rows[:, 0])
    if len(failed):
        messages: list[Any] = [None] * P
        dist.all_gather_object(messages, "" if error is None else f"{error}", group=group)
        if error is not None:
            raise error
        r = int(failed[0])
        kind = {1: ValueError, 2: TypeError}.get(int(rows[r, 0]), RuntimeError)
        raise kind(f"{messages[r]} (raised on rank {r}; every rank stops)")
    names = {"experts": "`router_logits` columns (experts)", "hidden": "`x` columns (hidden size)",
             "intermediate": "`experts` intermediate size H", "top_k": "`top_k`", "dtype": "`x` dtype",
             "normalize": "`normalize`", "plan": "`plan`"}
    for i, key in enumerate(_HEADER[1:], start=1):
        if key in names and len(set(rows[:, i].tolist())) > 1:
            raise ValueError(f"{names[key]} must be the same on every rank; got {rows[:, i].tolist()} by rank")
    if len(set(rows[:, _HEADER.index("grad")].tolist())) > 1:
        raise ValueError("`x` and `experts` must require gradients (under grad mode) on every rank or on none: the "
                         "backward pass is collective; got " + str(rows[:, _HEADER.index('grad')].tolist()))
    return rows


# --------------------------------------------------------------------------------------------------
# routing, schedule
# --------------------------------------------------------------------------------------------------
def _route(logits: Any, k: int, normalize: bool, dtype: Any) -> tuple[Any, Any]:
    """(experts (T, k) int64 by decreasing logit, ties to the lower id; gates (T, k) in the wider of the logits'
    dtype and ``dtype``) as moe_forward routes."""
    order = torch.sort(logits.detach(), dim=1, descending=True, stable=True).indices[:, :k]
    logits = logits.to(torch.promote_types(logits.dtype, dtype))
    chosen = torch.gather(logits, 1, order)
    if normalize:
        gates = torch.softmax(chosen, dim=1)
    else:
        gates = torch.gather(torch.softmax(logits, dim=1), 1, order)
    return order, gates


@dataclass
class _Schedule:
    """What rank ``me`` sends, receives and computes for one forward (the backward runs it in reverse)."""

    group: Any
    me: int
    send_counts: list[int]          # rows of tokens to each rank (dispatch)
    recv_counts: list[int]          # rows of tokens from each rank
    send_slots: np.ndarray          # local slot ids (t * k + j) in send order
    perm: np.ndarray                # chunk-major row order of the received tokens
    my_chunks: list[tuple[int, int]]  # (expert, size) of the chunks computed here, plan order
    w_out: list[tuple[int, int, int]] = field(default_factory=list)  # (expert, dst, tag) weights sent
    w_in: list[tuple[int, int, int]] = field(default_factory=list)   # (expert, src, tag) weights received


def _schedule(plan: _Plan, counts: np.ndarray, chosen: np.ndarray, me: int, group: Any) -> _Schedule:
    """The exchange of rank ``me`` from the per-source counts ``counts`` (P, N) and its chosen experts (T, k).

    Expert e's slots are ordered source-major, then by token (token-major order of the concatenated tokens,
    as in moe_forward): rank s holds slots [off[e, s], off[e, s + 1]).
    """
    P, N = counts.shape
    off = np.zeros((N, P + 1), dtype=np.int64)
    np.cumsum(counts.T, axis=1, out=off[:, 1:])
    e, d, a, b = plan.chunks.T
    lo = np.maximum(a[:, None], off[e, :-1])
    n = np.maximum(np.minimum(b[:, None], off[e, 1:]) - lo, 0)           # (K, P) slots of chunk j from source s
    send_counts = np.bincount(d, weights=n[:, me], minlength=P).astype(np.int64)
    mine = np.flatnonzero(d == me)
    recv_counts = n[mine].sum(axis=0).astype(np.int64)

    # send order: destination-major, then chunk (plan order), then slot
    flat = chosen.reshape(-1)
    local_sorted = np.argsort(flat, kind="stable")                    # by expert, then token
    estart = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(counts[me], out=estart[1:])
    starts, lengths = [], []
    for q in range(P):
        for j in np.flatnonzero((d == q) & (n[:, me] > 0)).tolist():
            starts.append(estart[e[j]] + lo[j, me] - off[e[j], me])
            lengths.append(n[j, me])
    send_slots = local_sorted[_ranges(np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64))]

    # received rows are source-major (then chunk, then slot); the computation wants them chunk-major
    nm = n[mine]                                                        # (Kr, P)
    within = np.cumsum(nm, axis=0) - nm                                 # offset of chunk j inside source s
    base = np.cumsum(recv_counts) - recv_counts
    seg = base[None, :] + within                                        # (Kr, P) start in the receive buffer
    perm = _ranges(seg.reshape(-1), nm.reshape(-1))
    my_chunks = [(int(e[j]), int(b[j] - a[j])) for j in mine.tolist()]

    sched = _Schedule(group=group, me=me, send_counts=send_counts.tolist(), recv_counts=recv_counts.tolist(),
                      send_slots=send_slots, perm=perm, my_chunks=my_chunks)
    for tag, (ex, src, dst) in enumerate(plan.transfers.tolist()):
        if src == me:
            sched.w_out.append((ex, dst, tag))
        if dst == me:
            sched.w_in.append((ex, src, tag))
    return sched


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(s, s + l) over (s, l)."""
    lengths = lengths.astype(np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.cumsum(lengths) - lengths
    return np.repeat(starts.astype(np.int64) - first, lengths) + np.arange(total, dtype=np.int64)


# --------------------------------------------------------------------------------------------------
# communication with autograd
# --------------------------------------------------------------------------------------------------
def _all_to_all(t: Any, in_splits: list[int], out_splits: list[int], group: Any) -> Any:
    t = t.contiguous()
    out = t.new_empty((sum(out_splits),) + tuple(t.shape[1:]))
    dist.all_to_all_single(out, t, output_split_sizes=out_splits, input_split_sizes=in_splits, group=group)
    return out


def _p2p(sends: list[tuple[Any, int, int]], recvs: list[tuple[Any, int, int]], group: Any) -> None:
    """Post every send (tensor, group rank, tag) and receive, then wait for all of them."""
    ops = [dist.P2POp(dist.isend, t, group=group, tag=tag, group_peer=peer) for t, peer, tag in sends]
    ops += [dist.P2POp(dist.irecv, t, group=group, tag=tag, group_peer=peer) for t, peer, tag in recvs]
    if ops:
        for work in dist.batch_isend_irecv(ops):
            work.wait()


class _Dispatch(torch.autograd.Function):
    """Weights of spilled experts to their computing ranks (point to point), then tokens by all-to-all.

    Backward, in the same order: the received weights' gradients back to the native ranks, then the tokens'
    gradients by the reverse all-to-all. One function for both, so every rank runs the two exchanges of the
    backward in one order."""

    @staticmethod
    def forward(ctx: Any, x_send: Any, w_send: Any, sched: _Schedule) -> tuple[Any, Any]:
        ctx.sched = sched
        w_recv = w_send.new_empty((len(sched.w_in), w_send.shape[1]))
        _p2p([(w_send[i], dst, tag) for i, (_, dst, tag) in enumerate(sched.w_out)],
             [(w_recv[i], src, tag) for i, (_, src, tag) in enumerate(sched.w_in)], sched.group)
        x_recv = _all_to_all(x_send, sched.send_counts, sched.recv_counts, sched.group)
        return x_recv, w_recv

    @staticmethod
    def backward(ctx: Any, g_x_recv: Any, g_w_recv: Any) -> tuple[Any, Any, None]:
        sched = ctx.sched
        g_w_recv = g_w_recv.contiguous()
        g_w_send = g_w_recv.new_empty((len(sched.w_out), g_w_recv.shape[1]))
        _p2p([(g_w_recv[i], src, tag) for i, (_, src, tag) in enumerate(sched.w_in)],
             [(g_w_send[i], dst, tag) for i, (_, dst, tag) in enumerate(sched.w_out)], sched.group)
        g_x_send = _all_to_all(g_x_recv, sched.recv_counts, sched.send_counts, sched.group)
        return g_x_send, g_w_send, None


class _Combine(torch.autograd.Function):
    """Expert outputs back to the tokens' ranks (the reverse all-to-all); backward: the forward one."""

    @staticmethod
    def forward(ctx: Any, y: Any, sched: _Schedule) -> Any:
        ctx.sched = sched
        return _all_to_all(y, sched.recv_counts, sched.send_counts, sched.group)

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple[Any, None]:
        sched = ctx.sched
        return _all_to_all(g, sched.send_counts, sched.recv_counts, sched.group), None


def _swiglu(x: Any, w_gate: Any, w_up: Any, w_down: Any) -> Any:
    """``w_down (silu(w_gate x) * (w_up x))`` for every row x (weights in nn.Linear layout: (out, in))."""
    return torch.nn.functional.linear(
        torch.nn.functional.silu(torch.nn.functional.linear(x, w_gate)) * torch.nn.functional.linear(x, w_up),
        w_down)


# --------------------------------------------------------------------------------------------------
# the layer
# --------------------------------------------------------------------------------------------------
@constraints(x="tensor", router_logits="tensor", experts="option", plan=("option", "callable"), top_k="int>=1",
             normalize="bool", layer="index", group="option")
def llep_moe_forward(x: Any, router_logits: Any, experts: Any, plan: Any, *, top_k: int = 2,
                     normalize: bool = True, layer: int | None = None, group: Any = None) -> Any:
    r"""One MoE layer of SwiGLU experts across the ranks of a process group, computed by an expert-parallel plan.

    Collective: every rank of ``group`` calls it at the same time with its own tokens and its native experts'
    weights. Tokens travel by all-to-all to the ranks that compute their chunks and back (dispatch,
    combine); the weights of an expert computed away from its native rank travel there point to point. The
    result on each rank is the layer's output for that rank's tokens, equal (to rounding) to the dense
    single-device layer :func:`numtk.moe.moe_forward` on the tokens of all ranks, and differentiable: the
    backward pass (also collective) sends the gradients of the received weights back to each expert's native
    rank, where they add up with the gradient of its local chunks.

    Parameters
    ----------
    x : torch.Tensor, shape (T_r, D)
        This rank's tokens (float16, bfloat16, float32 or float64; T_r may differ between ranks, and be 0).
    router_logits : torch.Tensor, shape (T_r, N)
        Their router logits over the N experts (floating, on the device of ``x``).
    experts : tuple of 3 torch.Tensor or dict
        ``(w_gate, w_up, w_down)`` (or a dict with these keys) of this rank's M native experts, those with
        ``plan.placement == rank`` in increasing expert id: ``w_gate`` and ``w_up`` of shape (M, H, D),
        ``w_down`` of shape (M, D, H) (``nn.Linear`` layout, as :func:`numtk.moe.moe_forward`); the dtype and
        device of ``x``.
    plan : Result or callable
        A plan of :func:`numtk.moe.llep_plan`, :func:`numtk.moe.standard_ep_plan` or
        :func:`numtk.moe.optimal_plan` for P = ``group`` size devices, made from the loads of this step's
        routing, the same on every rank; or a callable ``plan(loads)`` that makes one from the loads (int64
        array (N,): the routing-slot totals of each expert, summed over the ranks, as every planner of
        :mod:`numtk.moe` takes them), called on every rank after the loads are gathered (it must be
        deterministic, as those planners are). A plan of several layers (from (L, N) loads) needs ``layer``.
    top_k : int, optional
        Experts per token (default 2), at most N.
    normalize : bool, optional
        True (default): gates are the softmax of the k chosen logits; False: the chosen experts' probabilities
        under the softmax over all N logits (as :func:`numtk.moe.moe_forward`).
    layer : int, optional
        The layer of a plan of several layers that this call runs (negative values count from the end), as in
        :func:`numtk.moe.moe_forward` and :func:`numtk.moe.simulate_ep`. Required for such a plan; for a plan
        of one layer None (default), 0 or -1.
    group : torch.distributed.ProcessGroup, optional
        The process group (default: the default group). Rank r of the group is device r of the plan.

    Returns
    -------
    torch.Tensor, shape (T_r, D)
        :math:`y_t = \sum_j g_{t,j} E_{e_{t,j}}(x_t)` for this rank's tokens.

    Raises
    ------
    ValueError
        Shapes that do not agree, non-finite input, ``top_k`` outside [1, N], a plan for another number of
        devices or other loads (its chunks must cover the experts' slot counts summed over all ranks),
        chunks that do not tile the loads, a chunk away from its expert's native rank without a weight
        transfer, a plan of several layers without ``layer`` (or ``layer`` out of range), ``experts`` that do
        not hold this rank's native experts, arguments that differ between ranks.
        Every rank raises when any rank's input is refused (the others name that rank).
    TypeError
        Arguments that are not tensors, non-floating dtypes, weights of another dtype than ``x``, a plan of
        another type.
    RuntimeError
        If torch.distributed is not initialised.

    Notes
    -----
    Routing (as :func:`numtk.moe.moe_forward`): the experts of token t are its ``top_k`` largest logits, ties
    to the lower expert id, by decreasing logit; expert e is
    :math:`E_e(x) = W^{down}_e\,(\mathrm{silu}(W^{gate}_e x) \odot W^{up}_e x)`.

    Slots: the routing slots of expert e are its tokens in token order over the concatenation of the ranks'
    tokens (rank 0's first), so rank s holds slots :math:`[o_{e,s}, o_{e,s+1})` with
    :math:`o_{e,s} = \sum_{q<s} c_{e,q}` and :math:`c_{e,q}` the slots rank q routes to e. A chunk
    ``(e, p, start, stop)`` makes rank p compute slots ``[start, stop)``: it receives the rows of the
    intersection of ``[start, stop)`` with each rank's range.

    One forward: (1) an all-gather of each rank's header and slot counts (every rank learns the loads
    :math:`c_{e,q}` and whether any rank refused its input); (2) the weights
    :math:`(W^{gate}_e, W^{up}_e, W^{down}_e)` of each transfer (e, src, dst) of the plan go from src to dst
    (one packed message each); (3) dispatch all-to-all of the token rows; (4) each rank computes its chunks in
    plan order; (5) combine all-to-all back; (6) each token adds its k weighted expert outputs in rank
    order. Backward reverses (5), then (2) and (3): a received weight's gradient goes back to its native rank
    and is added there to the gradient of the expert's local chunks, so the native rank's weight gradient is
    :math:`\partial L/\partial W_e = \sum_{p} \partial L/\partial W_e^{(p)}` over every rank p that computed
    part of e.

    Every rank must call the backward of the output when any does (the loss must depend on the output on
    every rank, with the same ``requires_grad`` settings: this is checked in the forward). The tested backend
    is gloo on CPU processes of one machine; with NCCL (CUDA tensors, ``torch.cuda.set_device`` per rank)
    the same code runs untested.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.
    .. [2] D. Lepikhin et al., "GShard: Scaling Giant Models with Conditional Computation and Automatic
       Sharding", ICLR 2021, arXiv:2006.16668 (expert parallelism by all-to-all).
    .. [3] N. Shazeer, "GLU Variants Improve Transformer", arXiv:2002.05202, 2020 (SwiGLU).

    Examples
    --------
    On one process (a group of one rank) the layer is the dense one:

    >>> import numpy as np
    >>> import torch
    >>> import torch.distributed as dist
    >>> from numtk.moe import moe_forward, standard_ep_plan
    >>> from numtk.torch.llep import llep_moe_forward
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> g = torch.Generator().manual_seed(0)
    >>> T, N, D, H = 8, 4, 6, 10
    >>> x, logits = torch.randn(T, D, generator=g, dtype=torch.float64), torch.randn(T, N, generator=g)
    >>> shapes = [(N, H, D), (N, H, D), (N, D, H)]     # w_gate, w_up, w_down of all N experts
    >>> experts = tuple(torch.randn(*s, generator=g, dtype=torch.float64) / 3 for s in shapes)
    >>> y = llep_moe_forward(x, logits, experts, lambda loads: standard_ep_plan(loads, 1), top_k=2)
    >>> ref = moe_forward(x.numpy(), logits.numpy(), tuple(w.numpy() for w in experts), top_k=2).output
    >>> bool(np.allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12))
    True
    >>> dist.destroy_process_group()

    Across processes, with :func:`run_distributed`: see the tests (``tests/torch/test_llep.py``) and
    :func:`benchmark_llep`.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("llep_moe_forward needs an initialised torch.distributed process group "
                           "(torch.distributed.init_process_group, or numtk.torch.llep.run_distributed)")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(f"`group` must be None or a torch.distributed.ProcessGroup; got {type(group).__name__}")
    P = dist.get_world_size(group)
    me = dist.get_rank(group)
    if me < 0:
        raise ValueError("`group` does not contain this process")
    device = _comm_device(group)

    error: BaseException | None = None
    header: list[int] = []
    args: tuple = ()
    try:
        header, args = _local_checks(x, router_logits, experts, plan, top_k, normalize, layer, P)
    except Exception as exc:  # noqa: BLE001 - whatever stops this rank must stop the others too
        error = exc
    rows = _agree(error, header, group, P, me, device)
    x, logits, (wg, wu, wd), parsed, k, normalize = args
    T, D = x.shape
    N, H = logits.shape[1], wg.shape[1]

    chosen_t, gates = _route(logits, k, normalize, x.dtype)
    chosen = chosen_t.cpu().numpy()
    counts = _gather_rows(np.bincount(chosen.reshape(-1), minlength=N).tolist(), group, P, device)  # (P, N)
    if parsed is None:
        parsed = _parse_plan(plan(counts.sum(axis=0)), P, layer)
        if len(parsed.loads) != N:
            raise ValueError(f"`plan` made a plan of {len(parsed.loads)} experts; `router_logits` has {N}")
    totals = counts.sum(axis=0)
    diff = np.flatnonzero(parsed.loads != totals)
    if len(diff):
        e = int(diff[0])
        raise ValueError(f"the expert loads of `plan` must equal the slot counts the router gives (top-`top_k` of "
                         f"`router_logits`, summed over all ranks); expert {e}: {int(parsed.loads[e])} in the plan, "
                         f"{int(totals[e])} routed")
    native = np.bincount(parsed.placement, minlength=P)
    given = rows[:, _HEADER.index("native")]
    if np.any(given != native):
        q = int(np.flatnonzero(given != native)[0])
        raise ValueError(f"`experts` must hold the native experts of each rank (plan.placement == rank): rank {q} "
                         f"gave {int(given[q])}, its native experts are {int(native[q])}")

    sched = _schedule(parsed, counts, chosen, me, group)
    local_index = {int(e): i for i, e in enumerate(np.flatnonzero(parsed.placement == me).tolist())}

    # (2)-(3): weights of the spilled experts, token rows
    out_idx = torch.tensor([local_index[e] for e, _, _ in sched.w_out], dtype=torch.int64, device=x.device)
    w_send = torch.cat([wg[out_idx].reshape(len(out_idx), H * D), wu[out_idx].reshape(len(out_idx), H * D),
                        wd[out_idx].reshape(len(out_idx), D * H)], dim=1)
    send_slots = torch.from_numpy(sched.send_slots).to(x.device)
    x_send = x[send_slots // k]
    x_recv, w_recv = _Dispatch.apply(x_send, w_send, sched)

    # (4) the chunks of this rank, plan order
    foreign = {e: i for i, (e, _, _) in enumerate(sched.w_in)}
    HD = H * D
    rows_cm = x_recv[torch.from_numpy(sched.perm).to(x.device)]
    parts, ptr = [], 0
    for e, size in sched.my_chunks:
        if e in local_index:
            i = local_index[e]
            weights = (wg[i], wu[i], wd[i])
        else:
            flat = w_recv[foreign[e]]
            weights = (flat[:HD].view(H, D), flat[HD:2 * HD].view(H, D), flat[2 * HD:].view(D, H))
        parts.append(_swiglu(rows_cm[ptr:ptr + size], *weights))
        ptr += size
    y_cm = torch.cat(parts) if parts else rows_cm  # (0, D) when nothing is computed here: still in the graph
    y_recv = y_cm[torch.from_numpy(np.argsort(sched.perm)).to(x.device)]

    # (5)-(6): outputs back, weighted sum in rank order
    y_back = _Combine.apply(y_recv, sched)
    y_slot = y_back[torch.from_numpy(np.argsort(sched.send_slots)).to(x.device)].view(T, k, D)
    g = gates.to(x.dtype)
    out = g[:, 0, None] * y_slot[:, 0]
    for j in range(1, k):
        out = out + g[:, j, None] * y_slot[:, j]
    return out


# --------------------------------------------------------------------------------------------------
# benchmark: LLEP against standard EP under hot-expert routing
# --------------------------------------------------------------------------------------------------
def _hot_logits(T: int, N: int, k: int, hot_fraction: float, num_hot: int, gen: Any, dtype: Any) -> Any:
    """Router logits where a share ``hot_fraction`` of the tokens put their largest logits on the hot experts
    0..num_hot-1 (all of them when top_k >= num_hot), the others route at random."""
    logits = torch.randn(T, N, generator=gen, dtype=dtype)
    hot = torch.rand(T, generator=gen) < hot_fraction
    logits[hot, :num_hot] += 20.0
    return logits


def _bench_rank(cfg: dict) -> dict:  # pragma: no cover - runs in the spawned processes
    from numtk.moe import llep_plan, standard_ep_plan

    P, me = dist.get_world_size(), dist.get_rank()
    N, D, H, k, T = cfg["num_experts"], cfg["hidden_size"], cfg["intermediate_size"], cfg["top_k"], cfg["tokens"]
    dtype = getattr(torch, cfg["dtype"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    scale = 1.0 / np.sqrt(D)
    full = [torch.randn(N, H, D, generator=gen, dtype=dtype) * scale, torch.randn(N, H, D, generator=gen, dtype=dtype)
            * scale, torch.randn(N, D, H, generator=gen, dtype=dtype) * (1.0 / np.sqrt(H))]
    placement = np.arange(N) * P // N
    mine = torch.from_numpy(np.flatnonzero(placement == me))
    experts = tuple(w[mine].contiguous().requires_grad_(cfg["backward"]) for w in full)
    gen_r = torch.Generator().manual_seed(cfg["seed"] + 1 + me)
    x = torch.randn(T, D, generator=gen_r, dtype=dtype).requires_grad_(cfg["backward"])
    logits = _hot_logits(T, N, k, cfg["hot_fraction"], cfg["num_hot"], gen_r, dtype)
    planners = {
        "ep": lambda loads: standard_ep_plan(loads, placement),
        "llep": lambda loads: llep_plan(loads, placement, min_chunk=cfg["min_chunk"],
                                        capacity_factor=cfg["capacity_factor"], imbalance_threshold=None),
    }
    times: dict[str, list[float]] = {name: [] for name in planners}
    cpu: dict[str, list[float]] = {name: [] for name in planners}
    outputs = {}
    for rep in range(cfg["warmup"] + cfg["repeats"]):
        for name, planner in planners.items():
            for w in experts:
                w.grad = None
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            y = llep_moe_forward(x, logits, experts, planner, top_k=k)
            if cfg["backward"]:
                y.square().sum().backward()
            elapsed = torch.tensor([time.perf_counter() - t0, time.process_time() - c0], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if rep >= cfg["warmup"]:
                times[name].append(float(elapsed[0]))
                cpu[name].append(float(elapsed[1]))
            outputs[name] = y.detach()
    counts = np.bincount(np.argsort(-logits.numpy(), axis=1, kind="stable")[:, :k].ravel(), minlength=N)
    all_counts = [None] * P
    dist.all_gather_object(all_counts, counts)
    source_loads = np.stack(all_counts, axis=1)  # (N, P): expert e's slots from each rank
    diff = float((outputs["ep"] - outputs["llep"]).abs().max()) if T else 0.0
    return dict(times=times, cpu=cpu, source_loads=source_loads, diff=diff, placement=placement)


@constraints(world_size="count", tokens="count", hidden_size="count", intermediate_size="count",
             num_experts="count", top_k="int>=1", hot_fraction="prob", num_hot="int>=1", min_chunk="cap",
             capacity_factor="real>0", backward="bool", repeats="count", warmup="int>=0", dtype="option",
             rng="rng", timeout="real>0")
def benchmark_llep(*, world_size: int = 2, tokens: int = 4096, hidden_size: int = 256, intermediate_size: int = 512,
                   num_experts: int = 16, top_k: int = 4, hot_fraction: float = 0.95, num_hot: int = 4,
                   min_chunk: int = 64, capacity_factor: float = 1.0, backward: bool = False, repeats: int = 5,
                   warmup: int = 1, dtype: str = "float32", rng: Any = 0, timeout: float = 600.0) -> Result:
    r"""Wall-clock time of the MoE layer under LLEP against standard expert parallelism, on P processes.

    Spawns ``world_size`` gloo processes (:func:`run_distributed`); each holds ``tokens`` tokens and the
    weights of its ``num_experts / world_size`` native experts (contiguous blocks, so the hot experts
    0..num_hot-1 all live on rank 0), routes with hot-expert logits (a share ``hot_fraction`` of every rank's
    tokens put their top logits on the hot experts) and times :func:`llep_moe_forward` with the plan made per
    step by :func:`numtk.moe.standard_ep_plan` and by :func:`numtk.moe.llep_plan` (imbalance gate off),
    alternating the two. A repetition's time is the slowest rank's, from a barrier to the end of its forward
    (and backward with ``backward=True``); planning, the loads' all-gather and the weight transfers included.

    Parameters
    ----------
    world_size : int, optional
        Processes P (default 2); ``num_experts`` must be a multiple of it.
    tokens : int, optional
        Tokens per rank (default 4096).
    hidden_size, intermediate_size : int, optional
        D and H of the SwiGLU experts (defaults 256 and 512).
    num_experts : int, optional
        N (default 16).
    top_k : int, optional
        Experts per token (default 4), at most N.
    hot_fraction : float, optional
        Share of each rank's tokens routed to the hot experts (default 0.95).
    num_hot : int, optional
        Hot experts (default 4), at most N.
    min_chunk : int, optional
        ``min_chunk`` of :func:`numtk.moe.llep_plan` (default 64: scale it with the batch).
    capacity_factor : float, optional
        ``capacity_factor`` of :func:`numtk.moe.llep_plan` (default 1.0).
    backward : bool, optional
        Time forward and backward (default False: forward only).
    repeats : int, optional
        Timed repetitions per method (default 5).
    warmup : int, optional
        Untimed repetitions first (default 1).
    dtype : {"float32", "float64"}, optional
        Tensors' dtype (default "float32").
    rng : None, int or numpy.random.Generator, optional
        Draws the seed of the weights, tokens and routing (default 0: the same layer every call).
    timeout : float, optional
        Seconds the whole run may take (default 600, at most 1e6).

    Returns
    -------
    res : Result
        With fields

        ep_time : float
            Median seconds per step under standard EP.
        llep_time : float
            Median seconds per step under LLEP.
        speedup : float
            ``ep_time / llep_time``.
        ep_times, llep_times : list of float
            Every timed repetition.
        ep_cpu_time, llep_cpu_time : float
            Median over the repetitions of the largest CPU time of a rank (seconds of its process, every
            thread): the work of the busiest rank, which wall-clock shows only when the ranks have cores of
            their own.
        cpu_speedup : float
            ``ep_cpu_time / llep_cpu_time``.
        loads : ndarray of int64, shape (N,)
            Routing slots of each expert over all ranks (of the last repetition): the ``loads`` of the plans.
        source_loads : ndarray of int64, shape (N, P)
            The same per source rank: ``source_loads[e, s]`` slots of expert e from rank s's tokens, the
            ``source_loads`` of :func:`numtk.moe.simulate_ep`.
        ep_max_load, llep_max_load : int
            The largest device load of each plan (slots).
        ideal_speedup : float
            ``ep_max_load / llep_max_load``: the speed-up if time were proportional to the largest load.
        max_abs_diff : float
            Largest difference between the two methods' outputs (rounding only).
        config : dict
            The arguments, with the seed drawn from ``rng`` in its place.

    Raises
    ------
    ValueError
        Arguments out of range, ``num_experts`` not a multiple of ``world_size``.
    TypeError
        Arguments of the wrong type.

    Notes
    -----
    CPU processes share the machine's cores (each gets ``cpu_count // world_size`` threads), so the numbers
    measure the load balance and the overheads of the exchange on this machine, not a GPU cluster. LLEP turns
    one busy rank into P busy ranks: the wall-clock gain needs P free cores; on a machine whose cores are taken
    by other work the busiest rank's CPU time (``cpu_speedup``) still shows the balance.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.

    Examples
    --------
    >>> from numtk.torch.llep import benchmark_llep
    >>> res = benchmark_llep(tokens=64, hidden_size=8, intermediate_size=16, num_experts=8, repeats=1)
    >>> res.ep_max_load > res.llep_max_load, res.max_abs_diff < 1e-4
    (True, True)
    """
    from numtk.moe import llep_plan, standard_ep_plan

    P = check_int(world_size, "world_size", minimum=1, maximum=256)
    T = check_int(tokens, "tokens", minimum=1, maximum=2**31 - 1)
    D = check_int(hidden_size, "hidden_size", minimum=1, maximum=2**20)
    Hs = check_int(intermediate_size, "intermediate_size", minimum=1, maximum=2**20)
    N = check_int(num_experts, "num_experts", minimum=1, maximum=2**20)
    k = check_int(top_k, "top_k", minimum=1)
    if k > N:
        raise ValueError(f"`top_k` ({k}) must be at most `num_experts` ({N})")
    hf = check_real(hot_fraction, "hot_fraction", low=0.0, high=1.0)
    nh = check_int(num_hot, "num_hot", minimum=1)
    if nh > N:
        raise ValueError(f"`num_hot` ({nh}) must be at most `num_experts` ({N})")
    mc = check_int(min_chunk, "min_chunk", minimum=1)
    cf = check_real(capacity_factor, "capacity_factor", low=0.0, low_open=True)
    backward = check_bool(backward, "backward")
    reps = check_int(repeats, "repeats", minimum=1, maximum=10**6)
    warm = check_int(warmup, "warmup", minimum=0, maximum=10**6)
    dtype = check_option(dtype, "dtype", ("float32", "float64"))
    seed = int(normalize_rng(rng).integers(0, 2**31 - 1))
    timeout = check_real(timeout, "timeout", low=0.0, low_open=True, high=1e6)
    if N % P:
        raise ValueError(f"`num_experts` ({N}) must be a multiple of `world_size` ({P}): contiguous blocks of experts")
    elements = T * max(D, Hs) * k
    if elements > 2**31 or N * Hs * D * 3 > 2**31:
        raise ValueError("`tokens`, `hidden_size`, `intermediate_size` and `num_experts` ask for more than 2**31 "
                         "elements per rank; choose a smaller layer")
    cfg = dict(world_size=P, tokens=T, hidden_size=D, intermediate_size=Hs, num_experts=N, top_k=k, hot_fraction=hf,
               num_hot=nh, min_chunk=mc, capacity_factor=cf, backward=backward, repeats=reps, warmup=warm,
               dtype=dtype, seed=seed)
    ranks = run_distributed(_bench_rank, P, cfg, timeout=timeout)
    r0 = ranks[0]
    ep_times, llep_times = r0["times"]["ep"], r0["times"]["llep"]
    source_loads = np.asarray(r0["source_loads"], dtype=np.int64)
    loads = source_loads.sum(axis=1)
    ep_plan = standard_ep_plan(loads, r0["placement"])
    ll_plan = llep_plan(loads, r0["placement"], min_chunk=mc, capacity_factor=cf, imbalance_threshold=None)
    ep_time, llep_time = statistics.median(ep_times), statistics.median(llep_times)
    ep_cpu, llep_cpu = statistics.median(r0["cpu"]["ep"]), statistics.median(r0["cpu"]["llep"])
    return Result(ep_time=ep_time, llep_time=llep_time, speedup=ep_time / llep_time, ep_times=ep_times,
                  llep_times=llep_times, ep_cpu_time=ep_cpu, llep_cpu_time=llep_cpu,
                  cpu_speedup=ep_cpu / max(llep_cpu, 1e-9), loads=loads, source_loads=source_loads,
                  ep_max_load=int(ep_plan.max_load),
                  llep_max_load=int(ll_plan.max_load),
                  ideal_speedup=float(ep_plan.max_load / max(ll_plan.max_load, 1)),
                  max_abs_diff=max(r["diff"] for r in ranks), config=cfg)
