"""An MoE layer carried out by an expert-parallel plan on simulated devices, in NumPy (:func:`moe_forward`), and
the routing loads a router gives (:func:`routing_loads`).

The executor is a reference, not a fast path: it shows that a plan's chunks compute exactly the layer the
router asked for. Every expert output row is computed by the same sequence of floating-point operations
whichever rows share its batch (products summed by a fixed pairwise tree, elementwise activations), and every
token combines its experts' outputs in the same order, so a plan's output equals the dense forward bit for
bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._swiglu import EXPERT_KEYS as _EXPERT_KEYS, check_expert_shapes, expert_matrices
from numtk._lib._validation import as_array, check_bool, check_finite, check_int, check_size
from numtk.moe._simulate import ExecutionView, execution_view

__all__ = ["moe_forward", "routing_loads", "expert_matrices", "check_expert_shapes"]

#: elements of the product temporary of one row block of :func:`_rowwise_matmul`
_BLOCK_ELEMENTS = 1 << 21


def _logits(router_logits: Any) -> np.ndarray:
    arr = as_array(router_logits, "router_logits", ndim=2, kinds="iuf")
    if arr.shape[1] < 1:
        raise ValueError(f"`router_logits` must have one column per expert (at least one); got shape {arr.shape}")
    with np.errstate(over="ignore"):
        arr = arr.astype(np.float64)
    check_finite(arr, "router_logits")
    return arr


def _route(logits: np.ndarray, top_k: Any, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(experts (T, k) int64 by decreasing logit, ties to the lower expert id; gates (T, k) float64)."""
    N = logits.shape[1]
    k = check_int(top_k, "top_k", minimum=1, maximum=N)
    order = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    chosen = np.take_along_axis(logits, order, axis=1)
    with np.errstate(over="ignore", under="ignore"):
        gates = _gates(logits, order, chosen, normalize)
    return order.astype(np.int64), gates


def _gates(logits: np.ndarray, order: np.ndarray, chosen: np.ndarray, normalize: bool) -> np.ndarray:
    if normalize:  # softmax over the k chosen logits
        z = np.exp(chosen - chosen[:, :1])
        gates = z / z.sum(axis=1, keepdims=True)
    else:  # the chosen experts' probabilities under the softmax over all N logits
        z = np.exp(logits - logits.max(axis=1, keepdims=True)) if logits.size else logits
        gates = np.take_along_axis(z, order, axis=1) / z.sum(axis=1, keepdims=True)
    return gates


@constraints(router_logits="array2d", top_k="int>=1", num_sources="count")
def routing_loads(router_logits: Any, top_k: int = 2, *, num_sources: int | None = None) -> np.ndarray:
    r"""The routing-slot count of every expert under top-k routing: the ``loads`` a plan is made from, or per
    source device the ``source_loads`` of :func:`simulate_ep`.

    Parameters
    ----------
    router_logits : array_like, shape (T, N)
        Router logits of T tokens over N experts.
    top_k : int, optional
        Experts per token (default 2), at most N.
    num_sources : int, optional
        If given, S source devices holding the tokens in contiguous blocks (token t lives on device
        :math:`\lfloor t S / T \rfloor`); the counts are then per source: the ``source_loads`` of
        :func:`simulate_ep` (with S = P), not the ``loads`` of a planner, which are their sums over the sources.

    Returns
    -------
    loads : ndarray of int64, shape (N,) or (N, S)
        ``loads[e]`` tokens route to expert e: the ``loads`` of :func:`llep_plan`, :func:`standard_ep_plan`,
        :func:`optimal_plan`. With ``num_sources``, ``loads[e, s]`` of them live on device s: per-source counts
        for ``simulate_ep(..., source_loads=...)``; ``loads.sum(axis=1)`` are the totals. Sums to
        ``T * top_k``.

    Raises
    ------
    ValueError
        Logits that are not 2-D or not finite, ``top_k`` outside [1, N], ``num_sources`` < 1.
    TypeError
        Non-numeric logits, non-integer ``top_k`` or ``num_sources``.

    Notes
    -----
    The experts of a token are its ``top_k`` largest logits, ties going to the lower expert id: the selection
    :func:`moe_forward` makes, so a plan built from these loads fits the layer exactly.

    References
    ----------
    .. [1] N. Shazeer et al., "Outrageously Large Neural Networks: The Sparsely-Gated Mixture-of-Experts Layer",
       ICLR 2017, arXiv:1701.06538.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import routing_loads
    >>> logits = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0], [2.0, 2.0, 0.0], [1.0, 0.0, 4.0]])
    >>> routing_loads(logits, top_k=2)
    array([3, 2, 3])
    >>> source = routing_loads(logits, top_k=2, num_sources=2)   # tokens 0-1 on device 0, 2-3 on device 1
    >>> source
    array([[1, 2],
           [1, 1],
           [2, 1]])
    >>> source.sum(axis=1)                                     # the totals, what a plan takes
    array([3, 2, 3])
    """
    logits = _logits(router_logits)
    T, N = logits.shape
    experts, _ = _route(logits, top_k)
    if num_sources is None:
        return np.bincount(experts.ravel(), minlength=N).astype(np.int64)
    S = check_int(num_sources, "num_sources", minimum=1, maximum=2**31 - 1)
    check_size(N * S, 8, "num_sources")
    source = np.arange(T, dtype=np.int64) * S // max(T, 1)
    keys = experts * S + source[:, None]
    return np.bincount(keys.ravel(), minlength=N * S).astype(np.int64).reshape(N, S)


def _rowwise_matmul(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``X @ W.T`` (B, M) with every entry summed by the same pairwise tree over K, whatever B is.

    Products ``X[b, k] * W[m, k]`` are formed elementwise and halved pairwise in place: at each level the first
    ``floor(n / 2)`` entries take the last ones. Only elementwise IEEE operations are used, so row b's result
    does not depend on the other rows of X (a BLAS product may change its summation order with the batch).
    """
    B, K = X.shape
    M = W.shape[0]
    out = np.empty((B, M), dtype=X.dtype)
    rows = max(1, _BLOCK_ELEMENTS // max(M * K, 1))
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported once, on the layer's output
        for lo in range(0, B, rows):
            prod = X[lo:lo + rows, None, :] * W[None, :, :]
            n = K
            while n > 1:
                half = n // 2
                prod[..., :half] += prod[..., n - half:n]
                n -= half
            out[lo:lo + rows] = prod[..., 0]
    return out


def _swiglu(X: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """``w_down @ (silu(w_gate @ x) * (w_up @ x))`` for every row x of X, silu(g) = g / (1 + exp(-g))."""
    g = _rowwise_matmul(X, w_gate)
    u = _rowwise_matmul(X, w_up)
    with np.errstate(over="ignore", invalid="ignore"):
        a = g / (1 + np.exp(-g)) * u
        return _rowwise_matmul(a, w_down)


def _experts(experts: Any, D: int, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    wg, wu, wd = (as_array(mat, f"experts['{key}']", ndim=3, kinds="iuf")
                  for key, mat in zip(_EXPERT_KEYS, expert_matrices(experts)))
    if not wg.shape[0] == wu.shape[0] == wd.shape[0] == N:
        raise ValueError(f"`experts` must hold one matrix per expert of `router_logits` ({N} columns); got "
                         f"{wg.shape[0]}, {wu.shape[0]} and {wd.shape[0]}")
    check_expert_shapes([wg, wu, wd], D, "experts")
    return wg, wu, wd


def _dense_view(loads: np.ndarray) -> tuple[np.ndarray, list]:
    experts = np.flatnonzero(loads)
    chunks = np.column_stack([experts, np.zeros_like(experts), np.zeros_like(experts), loads[experts]])
    return chunks.astype(np.int64).reshape(-1, 4), [np.arange(len(loads), dtype=np.int64)]


@constraints(x="array2d", router_logits="array2d", experts="option", plan="option", top_k="int>=1",
             normalize="bool", layer="index")
def moe_forward(x: Any, router_logits: Any, experts: Any, plan: Any = None, *, top_k: int = 2,
                normalize: bool = True, layer: int = 0) -> Result:
    r"""One MoE layer of SwiGLU experts, computed by a plan's chunks on P simulated devices (NumPy).

    Parameters
    ----------
    x : array_like, shape (T, D)
        The tokens' hidden states.
    router_logits : array_like, shape (T, N)
        Router logits over N experts.
    experts : tuple of 3 arrays or dict
        ``(w_gate, w_up, w_down)`` (or a dict with these keys): ``w_gate`` and ``w_up`` of shape (N, H, D),
        ``w_down`` of shape (N, D, H), as ``nn.Linear`` stores them (out, in).
    plan : Result, optional
        A plan of :func:`llep_plan`, :func:`standard_ep_plan` or :func:`optimal_plan` made from
        ``routing_loads(router_logits, top_k)``, or an :func:`eplb_rebalance` placement (its replicas share
        each expert's slots evenly, as in :func:`simulate_ep`). None (default): the dense forward on one
        device.
    top_k : int, optional
        Experts per token (default 2), at most N.
    normalize : bool, optional
        True (default): the gates are the softmax of the k chosen logits (Mixtral, gpt-oss; the same as
        renormalising the chosen softmax probabilities). False: the chosen experts' probabilities under the
        softmax over all N logits (no renormalisation).
    layer : int, optional
        The layer of a plan of several layers or of an EPLB placement (default 0; negative values count from
        the end); 0 or -1 without a plan.

    Returns
    -------
    res : Result
        With fields

        output : ndarray, shape (T, D)
            :math:`y_t = \sum_j g_{t,j} E_{e_{t,j}}(x_t)`, float32 when ``x`` and the weights are float32,
            float64 otherwise.
        experts : ndarray of int64, shape (T, top_k)
            The chosen experts of each token, by decreasing logit.
        gates : ndarray, shape (T, top_k)
            Their gates (the output dtype).
        expert_loads : ndarray of int64, shape (N,)
            Routing slots per expert (:func:`routing_loads`).
        device_loads : ndarray of int64, shape (P,)
            Routing slots each device computed (P = 1 without a plan).
        device_slots : tuple of P ndarrays of int64, shape (M_p, 2)
            The rows (token, expert) each device computed, in the order it computed them.
        weights_received : ndarray of int64, shape (P,)
            Expert weight copies each device received from another device before computing.

    Raises
    ------
    ValueError
        Shapes that do not agree, non-finite input, ``top_k`` outside [1, N], a plan whose expert loads differ
        from the router's slot counts, or whose chunks do not tile them, or that computes an expert on a
        device without its weights.
    TypeError
        Non-numeric arrays, ``experts`` or ``plan`` of another type.

    Notes
    -----
    Routing: the experts of token t are its ``top_k`` largest logits, ties to the lower expert id, ranked
    :math:`e_{t,0}, \dots, e_{t,k-1}` by decreasing logit; the gates :math:`g_{t,j}` are the softmax of the
    chosen logits (``normalize=True``) or of all logits. Expert e is
    :math:`E_e(x) = W^{down}_e\,(\mathrm{silu}(W^{gate}_e x) \odot W^{up}_e x)`, silu(g) = g / (1 + exp(-g)).

    The routing slots of expert e are its tokens in increasing token order (token-major order of the
    (token, rank) slots); a chunk ``(e, p, start, stop)`` of the plan makes device p compute slots
    ``[start, stop)`` of that list with the weights it holds, its own or those it received (the plan's
    ``weight_transfers``). With tokens living on devices in contiguous blocks this is also the source-major
    order of :func:`simulate_ep`.

    Exactness: each output row of an expert is computed by the same elementwise operations whatever batch it
    is in (every dot product is summed by one fixed pairwise tree over its length), and every token adds
    :math:`g_{t,0} E(x_t)`, then :math:`g_{t,1} E(x_t)`, ... to zero in rank order. So the output of any
    valid plan equals the dense forward (``plan=None``) bit for bit; against a BLAS product it agrees to
    rounding. Cost O(T k D H) time in temporaries of at most about 2**21 entries per step: a reference, not a
    fast path.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.
    .. [2] N. Shazeer, "GLU Variants Improve Transformer", arXiv:2002.05202, 2020 (SwiGLU).
    .. [3] A. Q. Jiang et al., "Mixtral of Experts", arXiv:2401.04088, 2024 (top-2 softmax gates).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import llep_plan, moe_forward, routing_loads
    >>> rng = np.random.default_rng(0)
    >>> T, N, D, H = 6, 4, 8, 16
    >>> x, logits = rng.normal(size=(T, D)), rng.normal(size=(T, N))
    >>> experts = tuple(rng.normal(size=s) / 4 for s in [(N, H, D), (N, H, D), (N, D, H)])
    >>> loads = routing_loads(logits, top_k=2)
    >>> loads
    array([4, 3, 2, 3])
    >>> # experts 0, 1 native on device 0 and 2, 3 on device 1; device 1 takes the last slot of expert 0
    >>> plan = llep_plan(loads, 2, min_chunk=1, imbalance_threshold=None)
    >>> plan.chunks.tolist()                     # (expert, device, start, stop)
    [[0, 0, 0, 3], [0, 1, 3, 4], [1, 0, 0, 3], [3, 1, 0, 3], [2, 1, 0, 2]]
    >>> res = moe_forward(x, logits, experts, plan, top_k=2)
    >>> res.device_loads, res.weights_received
    (array([6, 6]), array([0, 1]))
    >>> np.array_equal(res.output, moe_forward(x, logits, experts, top_k=2).output)
    True
    """
    X = as_array(x, "x", ndim=2, kinds="iuf")
    logits = _logits(router_logits)
    T, D = X.shape
    if logits.shape[0] != T:
        raise ValueError(f"`x` and `router_logits` must have one row per token; got {T} and {logits.shape[0]} rows")
    if D < 1:
        raise ValueError(f"`x` must have at least one feature (column); got shape {X.shape}")
    N = logits.shape[1]
    wg, wu, wd = _experts(experts, D, N)
    normalize = check_bool(normalize, "normalize")
    dtype = np.float32 if all(a.dtype == np.float32 for a in (X, wg, wu, wd)) else np.float64
    with np.errstate(over="ignore"):
        X = np.ascontiguousarray(X, dtype=dtype)
        wg, wu, wd = (np.ascontiguousarray(w, dtype=dtype) for w in (wg, wu, wd))
    check_finite(X, "x")
    for key, w in zip(_EXPERT_KEYS, (wg, wu, wd)):
        check_finite(w, f"experts['{key}']")
    chosen, gates = _route(logits, top_k, normalize)
    k = chosen.shape[1]
    loads = np.bincount(chosen.ravel(), minlength=N).astype(np.int64)

    if plan is None:
        if check_int(layer, "layer") not in (0, -1):
            raise ValueError(f"`layer` must be 0 or -1 without a plan (the layer is one); got {layer}")
        chunks, holdings = _dense_view(loads)
        native = [np.arange(N)]
    else:
        if hasattr(plan, "keys") and hasattr(plan, "__contains__") and "phy2log" in plan:
            E = np.shape(plan["logcnt"])[-1] if "logcnt" in plan else N
            if E != N:
                raise ValueError(f"`plan` is an EPLB placement of {E} experts; `router_logits` has {N}")
            view: ExecutionView = execution_view(plan, loads, layer)
        else:
            view = execution_view(plan, None, layer)
            if len(view.loads) != N:
                raise ValueError(f"`plan` is a plan of {len(view.loads)} experts; `router_logits` has {N}")
            diff = np.flatnonzero(view.loads != loads)
            if len(diff):
                e = int(diff[0])
                raise ValueError(f"the expert loads of `plan` must equal the router's slot counts (routing_loads("
                                 f"router_logits, top_k)); expert {e}: {int(view.loads[e])} in the plan, "
                                 f"{int(loads[e])} routed")
        chunks, holdings = view.chunks, view.holdings()
        if view.placement is None:  # EPLB: every replica is resident, nothing is received
            native = holdings
        else:
            native = [h[view.placement[h] == p] for p, h in enumerate(holdings)]
    P = len(holdings)

    # the devices' weight stores: their native experts' weights, copies of the ones they receive
    stores: list[dict[int, tuple]] = []
    received = np.zeros(P, dtype=np.int64)
    for p in range(P):
        own = set(native[p].tolist())
        store = {}
        for e in holdings[p].tolist():
            if e in store:
                continue
            if e in own:
                store[e] = (wg[e], wu[e], wd[e])
            else:
                store[e] = (wg[e].copy(), wu[e].copy(), wd[e].copy())
                received[p] += 1
        stores.append(store)

    # slots of each expert in token-major order: slot i = t * k + j, t increasing
    flat = chosen.ravel()
    order = np.argsort(flat, kind="stable")
    offsets = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(loads, out=offsets[1:])
    slot_out = np.empty((T * k, D), dtype=dtype)
    device_loads = np.zeros(P, dtype=np.int64)
    device_slots = []
    for p in range(P):
        mine = chunks[chunks[:, 1] == p]
        done = []
        for e, _, start, stop in mine.tolist():
            slots = order[offsets[e] + start:offsets[e] + stop]
            tokens = slots // k
            slot_out[slots] = _swiglu(X[tokens], *stores[p][e])
            done.append(np.column_stack([tokens, np.full(len(tokens), e, dtype=np.int64)]))
            device_loads[p] += len(slots)
        device_slots.append(np.concatenate(done) if done else np.zeros((0, 2), dtype=np.int64))

    g = gates.astype(dtype)
    y = slot_out.reshape(T, k, D)
    output = np.zeros((T, D), dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(k):
            output += g[:, j, None] * y[:, j]
    if not np.isfinite(output).all():
        raise ValueError(f"the layer overflowed the {np.dtype(dtype).name} range: `x` or `experts` too large")
    return Result(output=output, experts=chosen, gates=g, expert_loads=loads, device_loads=device_loads,
                  device_slots=tuple(device_slots), weights_received=received)
