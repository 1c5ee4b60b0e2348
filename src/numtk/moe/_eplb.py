"""DeepSeek's expert-parallel load balancer (EPLB), the static baseline of LLEP: replicate the heaviest
experts and place the replicas on GPUs from historical loads, then read off the GPU loads that current loads
would give under that placement.

How this module was written: from a prose description of ``rebalance_experts`` of deepseek-ai/EPLB (its four
steps, the packing and apportionment rules and the tie rules, as summarised in the Notes of
:func:`eplb_rebalance`) and the golden example of the EPLB README, not from the reference's source. An
earlier version of this module had followed the reference's code step for step; it was replaced by this one,
which has its own structure (one layer and one node at a time, heaps for the greedy choices, the slot table
written GPU by GPU) and gives the same outputs (compared on thousands of random instances, ties included,
before the earlier version was removed). The reference's README example is reproduced exactly.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_int, check_size
from numtk.moe._plan import as_layer_loads

__all__ = ["eplb_rebalance", "eplb_device_loads"]

#: at most this many physical expert slots per layer (the placement is a Python loop over the slots)
MAX_REPLICAS = 2**20


# --------------------------------------------------------------------------------------------------
# the two greedy rules, on plain lists of floats (one layer, or one node of one layer)
# --------------------------------------------------------------------------------------------------
def _fill_packs(weights: list[float], num_packs: int) -> list[list[int]]:
    """Balanced packing: split the items ``0 .. n - 1`` into ``num_packs`` packs of ``n / num_packs`` items.

    The items are taken heaviest first (equal weights: lower item id first) and each goes into the pack of
    least weight among those not yet full (equal weights: lower pack id), kept in a heap of
    ``(weight, pack id)``. With one item per pack item i simply goes to pack i. Returns each pack's items in
    the order they went in."""
    n = len(weights)
    room = n // num_packs
    if room == 1:
        return [[item] for item in range(n)]
    packs: list[list[int]] = [[] for _ in range(num_packs)]
    open_packs = [(0.0, p) for p in range(num_packs)]      # already a heap
    # heaviest first; sorted() stays stable with reverse=True, so equal weights keep the id order
    for item in sorted(range(n), key=weights.__getitem__, reverse=True):
        load, p = heapq.heappop(open_packs)
        pack = packs[p]
        pack.append(item)
        if len(pack) < room:
            heapq.heappush(open_packs, (load + weights[item], p))
    return packs


def _apportion(weights: list[float], seats: int) -> tuple[list[int], list[int]]:
    """Give ``seats >= n`` replicas to ``n`` experts: one each, then every further one to the expert with the
    largest load per replica ``w / count`` (equal quotients: lower expert index), i.e. D'Hondt's
    highest-averages rule applied to the extra replicas, kept in a heap of ``(-w / count, expert)``.

    Returns ``(owner, count)``: the expert of each replica in the order the replicas were created (the
    ``n`` first replicas are the experts' originals, in expert order) and each expert's replica count."""
    n = len(weights)
    count = [1] * n
    owner = list(range(n))
    quotients = [(-w, e) for e, w in enumerate(weights)]
    heapq.heapify(quotients)
    for _ in range(seats - n):
        e = quotients[0][1]
        count[e] += 1
        owner.append(e)
        heapq.heapreplace(quotients, (-(weights[e] / count[e]), e))
    return owner, count


def _balanced_packing(weight: np.ndarray, num_packs: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_fill_packs` on each row of ``weight`` (rows, n), as arrays: ``(pack_index, rank_in_pack)``,
    both int64 (rows, n), the pack of each item and the number of items that went into it before."""
    rows, n = weight.shape
    pack_index = np.empty((rows, n), dtype=np.int64)
    rank_in_pack = np.empty((rows, n), dtype=np.int64)
    for r in range(rows):
        for p, items in enumerate(_fill_packs(weight[r].tolist(), num_packs)):
            pack_index[r, items] = p
            rank_in_pack[r, items] = np.arange(len(items))
    return pack_index, rank_in_pack


def _place_layer(w: list[float], group_loads: list[float], num_replicas: int, num_groups: int,
                 num_nodes: int, num_gpus: int) -> tuple[list[int], list[list[int]]]:
    """One layer of the four steps of :func:`eplb_rebalance` (the global policy: one group, one node).

    Returns ``(slots, replicas)``: the expert held by each physical slot, GPU-major, and for each expert its
    slots in the order its replicas were created (the original first)."""
    group_size = len(w) // num_groups
    node_slots = num_replicas // num_nodes
    node_gpus = num_gpus // num_nodes
    slots: list[int] = []
    replicas: list[list[int]] = [[] for _ in w]
    for node_groups in _fill_packs(group_loads, num_nodes):
        # the node's experts: its groups in the order they were packed, each group's experts by id
        experts = [g * group_size + k for g in node_groups for k in range(group_size)]
        mine = [w[e] for e in experts]
        owner, count = _apportion(mine, node_slots)
        replica_load = [mine[i] / count[i] for i in owner]
        # the node's GPUs in order, R / G replicas each, each GPU's replicas in the order they were packed
        gpu_major = [r for gpu in _fill_packs(replica_load, node_gpus) for r in gpu]
        slot_of = [0] * node_slots
        for slot, r in enumerate(gpu_major, start=len(slots)):
            slot_of[r] = slot
        slots.extend(experts[owner[r]] for r in gpu_major)
        for r, i in enumerate(owner):                        # creation order
            replicas[experts[i]].append(slot_of[r])
    return slots, replicas


# --------------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------------
def _as_weight(weight: Any) -> tuple[np.ndarray, bool]:
    arr = as_array(weight, "weight", kinds="iuf")
    if arr.ndim not in (1, 2):
        raise ValueError(f"`weight` must have shape (E,) or (L, E); got an array of shape {arr.shape}")
    promoted = arr.ndim == 1
    arr = np.atleast_2d(arr).astype(np.float64)
    if arr.shape[0] < 1:
        raise ValueError(f"`weight` must hold at least one layer; got shape {arr.shape}")
    if arr.shape[1] < 1:
        raise ValueError(f"`weight` must hold at least one expert; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`weight` must be finite")
    if np.any(arr < 0):
        raise ValueError("`weight` must be non-negative (historical loads)")
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(arr.sum(axis=1))):
            raise ValueError("`weight` is too large: the sum of a layer's loads overflows float64")
    return np.ascontiguousarray(arr), promoted


@constraints(weight=("array1d", "array2d"), num_replicas="count", num_groups="int>=1", num_nodes="int>=1",
             num_gpus="count")
def eplb_rebalance(weight: ArrayLike, num_replicas: int, num_groups: int, num_nodes: int,
                   num_gpus: int) -> Result:
    r"""DeepSeek's EPLB: replicate the heaviest experts and place the replicas on GPUs, from historical loads.

    The static expert-parallel load balancer of DeepSeek-V3 [2]_ (``deepseek-ai/EPLB``), the baseline LLEP
    [1]_ is measured against. Each of the ``num_replicas`` physical expert slots of a layer holds one
    replica of a logical expert; slot ``s`` lives on GPU ``s // (num_replicas // num_gpus)``.

    Parameters
    ----------
    weight : array_like, shape (L, E) or (E,)
        Historical load of each logical expert (routing slots, or any non-negative real measure of them)
        per layer. A 1-D ``weight`` is one layer: it is promoted to ``L = 1`` and every field keeps the
        layer axis (``res.phy2log[0]`` is that layer's map). Any integer or float dtype; finite,
        non-negative.
    num_replicas : int
        R, the physical expert slots per layer; a multiple of ``num_gpus``, at least E, at most 2**20.
    num_groups : int
        Expert groups (contiguous blocks of ``E // num_groups`` experts, DeepSeek-V3's node-limited
        routing groups); must divide E.
    num_nodes : int
        Server nodes; must divide ``num_gpus``. The hierarchical policy is used when it divides
        ``num_groups``, else the global policy.
    num_gpus : int
        G, the GPUs over all nodes; must divide ``num_replicas``.

    Returns
    -------
    res : Result
        With fields

        phy2log : ndarray of int64, shape (L, R)
            The logical expert held by each physical slot; GPU q holds slots
            ``[q * R // G, (q + 1) * R // G)``.
        log2phy : ndarray of int64, shape (L, E, maxcnt)
            The physical slots of each expert's replicas in the order they were created (the original
            first), padded with -1; ``maxcnt = logcnt.max()``.
        logcnt : ndarray of int64, shape (L, E)
            Replicas per expert (>= 1; each row sums to R).
        device_loads : ndarray of float64, shape (L, G)
            Load of each GPU for ``weight`` itself, each expert's load split evenly over its replicas.
        max_load : ndarray of float64, shape (L,)
            The largest GPU load per layer.
        policy : str
            ``'hierarchical'`` (``num_groups % num_nodes == 0``) or ``'global'``.

    Raises
    ------
    ValueError
        ``weight`` not 1-D or 2-D, empty, negative or non-finite; ``num_replicas`` not a multiple of
        ``num_gpus`` or below E; ``num_gpus`` not a multiple of ``num_nodes``; E not a multiple of
        ``num_groups``; a count out of range.
    TypeError
        A non-numeric ``weight`` or a non-integer count.

    See Also
    --------
    eplb_device_loads : GPU loads of *current* loads under an EPLB placement.
    llep_plan : the per-step least-loaded plan.

    Notes
    -----
    **Hierarchical policy** (E experts in ``num_groups`` groups of ``E / num_groups``, R slots, G GPUs on
    ``num_nodes`` nodes). Let :math:`\mathrm{pack}(w, k)` be the balanced packing of n items with weights w
    into k packs of n / k items each: take the items heaviest first and put each into the lightest pack that
    still has room (with one item per pack, item i goes to pack i), the longest-processing-time rule with a
    limit on the items per pack.

    1. The group loads :math:`t_k = \sum_{e \in k} w_e` are packed onto the nodes. A node lists its
       experts group by group, in the order its groups went into its pack, each group's experts by id.
    2. Each node's :math:`E / \text{num\_nodes}` experts share its :math:`R / \text{num\_nodes}` slots: one
       replica each, then one more replica at a time to :math:`\arg\max_e w_e / c_e` (:math:`c_e` the
       current count). The extra replicas are thus apportioned by D'Hondt's highest-averages rule (the
       k-th extra replica of e has the quotient :math:`w_e / k`, and the extras go to the largest
       quotients), which is Adams's divisor method for the whole counts; it makes
       :math:`\max_e w_e / c_e` over the node as small as any counts with :math:`c_e \ge 1` can. The
       replicas are numbered in the order they are created: the originals in the node's expert order,
       then the extras in the order they were given.
    3. The node's replicas, of load :math:`w_e / c_e` each (final counts), are packed onto its
       :math:`G / \text{num\_nodes}` GPUs, :math:`R / G` per GPU.
    4. The slots are numbered node by node, GPU by GPU, each GPU's replicas in the order they went into
       its pack. ``log2phy[e]`` lists the slots of e's replicas in their creation order, the original
       first.

    **Global policy** (``num_groups % num_nodes != 0``): the same with one group and one node, so replicas
    are spread over all G GPUs regardless of groups.

    Ties go to what comes first: among equal weights to the lower group id or the replica created
    first, among equal quotients to the expert listed first on its node (the lower id within a group,
    but a heavier group's experts before a lighter one's), among equally light packs to the lower pack
    id. The reference sorts with ``torch.sort(descending=True)``, which does not promise stability; on
    inputs without ties (the README example) the two agree, and numtk's output is reproducible on any
    input. Loads are compared in float64.

    EPLB's replicas occupy memory permanently, and tokens are split only into even shares over the
    replicas: unlike LLEP it cannot react to a step's routing beyond these shares
    (:func:`eplb_device_loads`). Cost: :math:`O(L\, R \log R)` Python operations (a sort and a heap per
    packing, a heap for the apportionment), one layer and one node at a time.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.
    .. [2] DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, 2024 (section 3.4, redundant
       experts); the load balancer ``deepseek-ai/EPLB`` (MIT licence).

    Examples
    --------
    The example of DeepSeek's EPLB README: 12 experts in 4 groups, 16 replicas on 2 nodes of 4 GPUs.

    >>> import numpy as np
    >>> from numtk.moe import eplb_rebalance
    >>> weight = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    ...           [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
    >>> res = eplb_rebalance(weight, num_replicas=16, num_groups=4, num_nodes=2, num_gpus=8)
    >>> res.policy
    'hierarchical'
    >>> res.phy2log
    array([[ 5,  6,  5,  7,  8,  4,  3,  4, 10,  9, 10,  2,  0,  1, 11,  1],
           [ 7, 10,  6,  8,  6, 11,  8,  9,  2,  4,  5,  1,  5,  0,  3,  1]])
    >>> res.logcnt.sum(axis=1)
    array([16, 16])
    >>> res.device_loads[0]
    array([121.5,  86.5, 125. , 113. , 147.5, 131.5, 156. , 152. ])
    >>> round(float(res.max_load[0] / res.device_loads[0].mean()), 3)
    1.208
    """
    w, _ = _as_weight(weight)
    L, E = w.shape
    num_replicas = check_int(num_replicas, "num_replicas", minimum=1, maximum=MAX_REPLICAS)
    num_groups = check_int(num_groups, "num_groups", minimum=1, maximum=MAX_REPLICAS)
    num_nodes = check_int(num_nodes, "num_nodes", minimum=1, maximum=MAX_REPLICAS)
    num_gpus = check_int(num_gpus, "num_gpus", minimum=1, maximum=MAX_REPLICAS)
    if num_replicas % num_gpus:
        raise ValueError(f"`num_replicas` ({num_replicas}) must be a multiple of `num_gpus` ({num_gpus})")
    if num_gpus % num_nodes:
        raise ValueError(f"`num_gpus` ({num_gpus}) must be a multiple of `num_nodes` ({num_nodes})")
    if E % num_groups:
        raise ValueError(f"the number of experts in `weight` ({E}) must be a multiple of `num_groups` "
                         f"({num_groups})")
    if num_replicas < E:
        raise ValueError(f"`num_replicas` ({num_replicas}) must be at least the number of experts in `weight` "
                         f"({E}): every expert needs a replica")
    check_size(L * num_replicas, 8 * 12.0, "num_replicas")
    hierarchical = num_groups % num_nodes == 0
    if not hierarchical:
        num_groups = num_nodes = 1
    group_loads = w.reshape(L, num_groups, E // num_groups).sum(axis=2)
    phy2log = np.empty((L, num_replicas), dtype=np.int64)
    logcnt = np.empty((L, E), dtype=np.int64)
    by_expert = np.empty((L, num_replicas), dtype=np.int64)   # the slots, expert by expert, creation order
    for layer in range(L):
        slots, replicas = _place_layer(w[layer].tolist(), group_loads[layer].tolist(), num_replicas,
                                       num_groups, num_nodes, num_gpus)
        phy2log[layer] = slots
        logcnt[layer] = [len(r) for r in replicas]
        by_expert[layer] = [s for where in replicas for s in where]
    log2phy = np.full((L, E, int(logcnt.max())), -1, dtype=np.int64)
    for layer, cnt in enumerate(logcnt):
        first = np.cumsum(cnt) - cnt                          # where expert e starts in by_expert[layer]
        expert = np.repeat(np.arange(E), cnt)
        log2phy[layer, expert, np.arange(num_replicas) - first[expert]] = by_expert[layer]
    share = w / logcnt                                   # each replica's even share of its expert's load
    device_loads = np.take_along_axis(share, phy2log, axis=1).reshape(L, num_gpus, -1).sum(axis=2)
    return Result(phy2log=phy2log, log2phy=log2phy, logcnt=logcnt, device_loads=device_loads,
                  max_load=device_loads.max(axis=1), policy="hierarchical" if hierarchical else "global")


def _check_eplb_result(result: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    fields = ("phy2log", "log2phy", "logcnt", "device_loads")
    if not isinstance(result, Result) or any(f not in result for f in fields):
        raise TypeError(f"`result` must be the Result of eplb_rebalance (with fields {', '.join(fields)}); "
                        f"got {type(result).__name__}")
    phy2log = np.asarray(result.phy2log)
    log2phy = np.asarray(result.log2phy)
    logcnt = np.asarray(result.logcnt)
    G = np.shape(result.device_loads)[-1] if np.ndim(result.device_loads) == 2 else 0
    ok = (phy2log.ndim == 2 and log2phy.ndim == 3 and logcnt.ndim == 2 and G >= 1
          and phy2log.shape[0] == log2phy.shape[0] == logcnt.shape[0] == np.shape(result.device_loads)[0]
          and log2phy.shape[1] == logcnt.shape[1] and phy2log.shape[1] % G == 0
          and phy2log.dtype.kind in "iu" and log2phy.dtype.kind in "iu" and logcnt.dtype.kind in "iu")
    if ok:
        E, R = logcnt.shape[1], phy2log.shape[1]
        ok = (phy2log.size == 0 or (phy2log.min() >= 0 and phy2log.max() < E)) and bool(
            np.all(logcnt.sum(axis=1) == R))
    if not ok:
        raise ValueError("`result` is not a consistent eplb_rebalance Result (phy2log, log2phy, logcnt and "
                         "device_loads disagree in shape or content)")
    return phy2log, log2phy, logcnt, int(G)


@constraints(result="option", loads="array1d", layer="index")
def eplb_device_loads(result: Result, loads: ArrayLike, layer: int = 0) -> Result:
    r"""The GPU loads that *current* routing loads give under an EPLB placement.

    EPLB fixes the replicas from historical loads; at run time the routing slots of expert e are shared
    evenly by its ``logcnt[e]`` replicas. This turns one layer of an :func:`eplb_rebalance` Result and
    that layer's current integer loads into whole token counts per replica and per GPU, the EPLB side of
    a comparison with :func:`llep_plan` on the same loads.

    Parameters
    ----------
    result : Result
        What :func:`eplb_rebalance` returned.
    loads : array_like of int, shape (E,)
        Current routing-slot totals of each expert of the layer (a 2-D array is refused: sum per-source
        counts over the sources). Whole, non-negative numbers (floats with integral values accepted).
    layer : int, optional
        Which layer of ``result`` (default 0; negative values count from the end).

    Returns
    -------
    res : Result
        With fields

        replica_loads : ndarray of int64, shape (R,)
            Routing slots computed by each physical slot.
        assignment : ndarray of int64, shape (E, G)
            Slots of expert e computed on GPU q (the ``assignment`` of a plan Result; a GPU holding two
            replicas of the same expert computes both shares).
        hosted : ndarray of int64, shape (E, G)
            Replicas of expert e held by GPU q (each GPU holds ``R // G``).
        device_loads : ndarray of int64, shape (G,)
            Slots per GPU.
        max_load : int
            The largest GPU load.
        layer : int
            The layer used (non-negative).

    Raises
    ------
    TypeError
        ``result`` is not a Result of :func:`eplb_rebalance`, or ``layer`` is not an int.
    ValueError
        ``loads`` negative, fractional, non-finite or not one per expert; ``layer`` out of range.

    Notes
    -----
    Expert e with load :math:`l_e` and :math:`c_e` replicas gives each replica
    :math:`\lfloor l_e / c_e \rfloor` slots and one more to :math:`l_e \bmod c_e` of them: largest-remainder
    rounding of the even shares :math:`l_e / c_e`, whose remainders are all equal, so the extra slots go to
    the replicas created first (the order of ``log2phy``). The GPU load is then
    :math:`L_q = \sum_{s \text{ on } q} \mathrm{share}_s`, within one slot per replica of the fractional
    :math:`\sum_{s \text{ on } q} l_{e(s)} / c_{e(s)}`, and the shares of every expert sum to :math:`l_e`.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.

    Examples
    --------
    Place 6 replicas of 4 experts on 3 GPUs from history, then route a step in which expert 2 is the hot one
    (41 slots of expert 0 over 2 replicas: the first created gets the odd slot):

    >>> from numtk.moe import eplb_rebalance, eplb_device_loads
    >>> res = eplb_rebalance([100, 10, 60, 30], num_replicas=6, num_groups=1, num_nodes=1, num_gpus=3)
    >>> res.logcnt[0], res.phy2log[0]
    (array([2, 1, 2, 1]), array([0, 2, 0, 1, 2, 3]))
    >>> now = eplb_device_loads(res, [41, 5, 90, 5])
    >>> now.replica_loads, now.device_loads, now.max_load
    (array([21, 45, 20,  5, 45,  5]), array([66, 25, 50]), 66)
    """
    phy2log, log2phy, logcnt, G = _check_eplb_result(result)
    L, E = logcnt.shape
    R = phy2log.shape[1]
    if isinstance(layer, (bool, np.bool_)):
        raise TypeError("`layer` must be an int; got a bool")
    layer = check_int(layer, "layer", minimum=-L, maximum=L - 1)
    layer %= L
    totals = as_layer_loads(loads, "loads", hint="sum per-source counts over the sources (`loads.sum(axis=1)`); "
                                               "`layer` picks the layer of `result`")
    if totals.shape[0] != E:
        raise ValueError(f"`loads` must hold one load per expert ({E}); got {totals.shape[0]}")
    p2l = phy2log[layer].astype(np.int64)
    cnt = logcnt[layer].astype(np.int64)
    # the rank of each slot among its expert's replicas, from log2phy (rank j of expert e -> slot log2phy[e, j])
    l2p = log2phy[layer].astype(np.int64)
    rank = np.zeros(R, dtype=np.int64)
    e_idx, j_idx = np.nonzero(l2p >= 0)
    rank[l2p[e_idx, j_idx]] = j_idx
    base, extra = np.divmod(totals[p2l], cnt[p2l])
    replica_loads = base + (rank < extra)
    gpu = np.arange(R) // (R // G)
    assignment = np.zeros((E, G), dtype=np.int64)
    np.add.at(assignment, (p2l, gpu), replica_loads)
    hosted = np.zeros((E, G), dtype=np.int64)
    np.add.at(hosted, (p2l, gpu), 1)
    device_loads = replica_loads.reshape(G, R // G).sum(axis=1)
    return Result(replica_loads=replica_loads, assignment=assignment, hosted=hosted, device_loads=device_loads,
                  max_load=int(device_loads.max()), layer=int(layer))
