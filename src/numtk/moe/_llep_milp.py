"""The exact expert-parallel plan: a mixed-integer linear program solved by HiGHS.

The oracle of :func:`~numtk.moe.llep_plan`: on small layers (a few dozen experts on a few devices) it finds
the least possible maximum device load, and among the plans that reach it one with the fewest weight
transfers, under the same memory model as the greedy. The model (variables, rows, the lexicographic second
stage) is described in :func:`optimal_plan`'s Notes.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import NumtkWarning, Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import C_INT_MAX, as_array, check_int, check_real
from numtk.moe import _plan

__all__ = ["optimal_plan"]

#: above this many (expert, device) pairs the MILP warns that it may be slow (an oracle, not a planner)
WARN_PAIRS = 512
#: ... and above this many it refuses: the constraint matrix alone would take gigabytes
MAX_PAIRS = 2**22
#: the loads must stay exact in double precision, where HiGHS works
MAX_MILP_TOTAL = 2**53

# SciPy's vocabulary (scipy.optimize.milp): 0 optimal, 1 limit reached, 2 infeasible
_OPTIMAL, _LIMIT, _INFEASIBLE = 0, 1, 2


def _ndim(value: Any, name: str) -> int:
    """``np.ndim(value)``, with a TypeError naming ``name`` for ragged nested sequences."""
    try:
        return np.ndim(value)
    except ValueError:
        raise TypeError(f"`{name}` must be array-like with a regular shape; got ragged nested sequences") from None


def _as_max_foreign(max_foreign: Any, P: int) -> np.ndarray | None:
    """``max_foreign`` as int64 (P,): a scalar for every device or one count per device."""
    if max_foreign is None:
        return None
    if _ndim(max_foreign, "max_foreign") == 0 and not isinstance(max_foreign, (np.ndarray, str, bytes)):
        value = check_int(max_foreign, "max_foreign", minimum=0, maximum=C_INT_MAX)
        return np.full(P, value, dtype=np.int64)
    arr = as_array(max_foreign, "max_foreign", kinds="iuf")
    if arr.ndim == 0:
        arr = np.full(P, arr[()])
    if arr.shape != (P,):
        raise ValueError(f"`max_foreign` must be an int or an array of one count per device ({P}); "
                         f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
        raise ValueError("`max_foreign` must hold whole numbers of experts")
    if np.any(arr < 0) or np.any(arr > C_INT_MAX):
        raise ValueError(f"`max_foreign` must hold counts in [0, {C_INT_MAX}]")
    return arr.astype(np.int64)


def _transfers(x: np.ndarray, pi: np.ndarray) -> int:
    """Weight transfers of the assignment ``x`` (N, P): the (expert, device) pairs with slots away from the
    expert's native device. (Not the nonzeros of x less the nonzero loads: an expert moved whole to another
    device leaves its native entry at 0 and still costs one transfer.)"""
    away = x > 0
    away[np.arange(len(pi)), pi] = False
    return int(np.count_nonzero(away))


def _chunks_from_assignment(x: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """One chunk per (expert, device) with x > 0: per expert the native device first, then the others in
    id order, as contiguous ranges of the expert's slots."""
    rows = []
    P = x.shape[1]
    for e in np.flatnonzero(x.sum(axis=1)):
        order = [int(pi[e])] + [p for p in range(P) if p != pi[e]]
        start = 0
        for p in order:
            c = int(x[e, p])
            if c > 0:
                rows.append((e, p, start, start + c))
                start += c
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _round_plan(sol: np.ndarray, loads: np.ndarray, pi: np.ndarray, N: int, P: int) -> np.ndarray:
    """An integer assignment near a HiGHS solution, for when the exact polish (:meth:`_Model.polish`) fails:
    round x and y, send slots placed where y rounds to 0 back to the native device, and fix the row sums
    so that each expert's slots add up to its load exactly."""
    x = np.rint(sol[:N * P]).reshape(N, P).astype(np.int64)
    y = np.rint(sol[N * P:2 * N * P]).reshape(N, P).astype(bool)
    y[np.arange(N), pi] = True
    x = np.clip(x, 0, None)
    x[~y] = 0
    for e in range(N):
        diff = int(loads[e]) - int(x[e].sum())
        while diff < 0:  # too many: take them off the largest pieces
            p = int(np.argmax(x[e]))
            take = min(-diff, int(x[e, p]))
            x[e, p] -= take
            diff += take
        x[e, pi[e]] += diff
    return x


def _memory_ok(x: np.ndarray, pi: np.ndarray, P: int, limit: np.ndarray | None, expert_bytes: float | None,
               token_bytes: float, max_foreign: np.ndarray | None) -> bool:
    """Whether the assignment ``x`` honours the memory limit and the foreign-expert counts."""
    foreign = (x > 0)
    foreign[np.arange(len(pi)), pi] = False
    hosted = foreign.sum(axis=0)
    if max_foreign is not None and np.any(hosted > max_foreign):
        return False
    if limit is not None:
        peak = (np.bincount(pi, minlength=P) + hosted) * expert_bytes + x.sum(axis=0) * token_bytes
        return bool(np.all(peak <= limit * (1 + 1e-12)))
    return True


def _fewest_transfers(loads: np.ndarray, pi: np.ndarray, P: int, z: int) -> int:
    """A lower bound on the weight transfers of any plan with maximum load at most ``z``.

    Two counts, the larger is returned. Per expert: e needs ceil(l_e / z) hosts, all but one foreign. Per
    device group: in the graph whose edges are the transfers (native device -> host), slots move only within
    a connected component, so every component U is self-sufficient, sum_{p in U} N_p <= |U| z with N_p the
    native load of device p; a graph on P nodes with c components has at least P - c edges, and c is at most
    the largest number of groups in a partition of the devices into self-sufficient groups (computed over
    subsets of devices in O(3^P), for P <= 10).
    """
    z = max(int(z), 1)
    per_expert = int(np.maximum(-(-loads // z) - 1, 0).sum())
    if P > 10:
        return per_expert
    native = np.zeros(P, dtype=np.int64)
    np.add.at(native, pi, loads)
    full = (1 << P) - 1
    bits = np.arange(full + 1)
    members = (bits[:, None] >> np.arange(P)) & 1
    ok = members @ native <= members.sum(axis=1) * z
    if not ok[full]:  # no plan reaches z at all; the bound is moot
        return per_expert
    most = np.full(full + 1, -1, dtype=np.int64)  # most groups in a partition of the mask (-1: none)
    most[0] = 0
    for mask in range(1, full + 1):
        low = mask & -mask
        rest = mask ^ low
        sub = rest
        best = -1
        while True:  # groups that hold the lowest device of mask: low | (subsets of rest)
            group = low | sub
            if ok[group] and most[mask ^ group] >= 0:
                best = max(best, most[mask ^ group] + 1)
            if sub == 0:
                break
            sub = (sub - 1) & rest
        most[mask] = best
    return max(per_expert, P - int(most[full]))


class _Model:
    """The MILP of :func:`optimal_plan` for one bound ``z_hi`` on the maximum load; the objective and the
    bounds on z are set per solve.

    Variables, in this order: x[e, p] (index e*P + p), y[e, p] (N*P + e*P + p), z (2*N*P). x is continuous
    unless activation bytes enter a memory row (see the Notes of :func:`optimal_plan`); y is binary, z
    integer.
    """

    def __init__(self, loads, pi, P, z_hi, m, limit, expert_bytes, token_bytes, max_foreign, transfers=None):
        from scipy import sparse

        N = len(loads)
        self.N, self.P, self.pi, self.loads = N, P, pi, loads
        NP = N * P
        n = 2 * NP + 1
        e_idx, p_idx = np.divmod(np.arange(NP), P)
        native = pi[e_idx] == p_idx
        lp = loads[e_idx].astype(np.float64)
        foreign = ~native & (lp > 0)
        cap = np.minimum(lp, float(z_hi))             # no device computes more than z_hi slots of anything

        lo, hi = np.zeros(n), np.zeros(n)
        hi[:NP] = cap                                 # x in [0, min(l_e, z_hi)]
        lo[NP:2 * NP][native] = 1.0                   # the native copy is always there
        hi[NP:2 * NP][native | foreign] = 1.0
        self.lo, self.hi = lo, hi
        bytes_rows = limit is not None and max(expert_bytes, token_bytes) > 0
        self.integrality = np.ones(n)
        if not (bytes_rows and token_bytes > 0):
            self.integrality[:NP] = 0                 # integral x exists for integral y and z (a flow)

        rows, cols, vals, row_lo, row_hi = [], [], [], [], []
        r = 0
        # sum_p x[e, p] = l_e
        rows.append(e_idx + r); cols.append(np.arange(NP)); vals.append(np.ones(NP))
        row_lo.append(loads.astype(np.float64)); row_hi.append(loads.astype(np.float64)); r += N
        # x[e, p] - min(l_e, z_hi) y[e, p] <= 0 on foreign pairs (the native x is bounded directly)
        k = np.flatnonzero(foreign)
        nk = len(k)
        rows += [np.arange(nk) + r] * 2; cols += [k, NP + k]; vals += [np.ones(nk), -cap[k]]
        row_lo.append(np.full(nk, -np.inf)); row_hi.append(np.zeros(nk)); r += nk
        # chunk rule: x[e, p] - min(m, l_e) y[e, p] >= 0 on foreign pairs (only where it says more than x >= y)
        c = np.minimum(float(m), lp[k])
        kc, c = k[c >= 2], c[c >= 2]
        nc = len(kc)
        rows += [np.arange(nc) + r] * 2; cols += [kc, NP + kc]; vals += [np.ones(nc), -c]
        row_lo.append(np.zeros(nc)); row_hi.append(np.full(nc, np.inf)); r += nc
        # device loads: sum_e x[e, p] - z <= 0
        rows += [p_idx + r, np.arange(P) + r]; cols += [np.arange(NP), np.full(P, n - 1)]
        vals += [np.ones(NP), -np.ones(P)]
        row_lo.append(np.full(P, -np.inf)); row_hi.append(np.zeros(P)); r += P
        # memory in bytes, scaled by the larger of the two per-unit sizes so that coefficients stay near 1:
        # expert_bytes * sum_e y[e, p] + token_bytes * sum_e x[e, p] <= limit_p
        if bytes_rows:
            scale = max(expert_bytes, token_bytes)
            rows += [p_idx + r, p_idx + r]; cols += [np.arange(NP), NP + np.arange(NP)]
            vals += [np.full(NP, token_bytes / scale), np.full(NP, expert_bytes / scale)]
            row_lo.append(np.full(P, -np.inf)); row_hi.append(limit / scale); r += P
        # at most F_p foreign experts on device p
        if max_foreign is not None:
            kf = np.flatnonzero(~native)
            rows.append(p_idx[kf] + r); cols.append(NP + kf); vals.append(np.ones(len(kf)))
            row_lo.append(np.full(P, -np.inf)); row_hi.append(max_foreign.astype(np.float64)); r += P
        # the transfer count within (lo, hi): a valid lower bound at max load z_hi (:func:`_fewest_transfers`),
        # and the count of a plan already found
        if transfers is not None:
            kf = np.flatnonzero(~native)
            rows.append(np.full(len(kf), r)); cols.append(NP + kf); vals.append(np.ones(len(kf)))
            row_lo.append([float(transfers[0])]); row_hi.append([float(transfers[1])]); r += 1
        self.A = sparse.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                  shape=(r, n))
        self.row_lo, self.row_hi = np.concatenate(row_lo), np.concatenate(row_hi)
        self.foreign_x = np.flatnonzero(~native)
        self.foreign_y = NP + self.foreign_x

    def solve(self, c: np.ndarray, z_lo: float, z_hi: float, time_limit: float, gap: float, *,
              fix_y: np.ndarray | None = None, integral: bool = False):
        from scipy.optimize import Bounds, LinearConstraint, milp

        lo, hi = self.lo.copy(), self.hi.copy()
        lo[-1], hi[-1] = z_lo, z_hi
        NP = self.N * self.P
        if fix_y is not None:
            lo[NP:2 * NP] = hi[NP:2 * NP] = fix_y
        integrality = np.ones_like(self.integrality) if integral else self.integrality
        return milp(c, integrality=integrality, bounds=Bounds(lo, hi),
                    constraints=LinearConstraint(self.A, self.row_lo, self.row_hi),
                    options={"time_limit": time_limit, "mip_rel_gap": gap, "presolve": True})

    def polish(self, sol: np.ndarray, z: int, time_limit: float) -> np.ndarray:
        """The integer assignment with the hosts (y) of ``sol`` and maximum load at most ``z`` that moves the
        fewest slots off their native devices. With y and z fixed what is left is a flow problem with
        integral data: its LP relaxation has integral optimal vertices, so HiGHS ends at the root."""
        N, P, NP = self.N, self.P, self.N * self.P
        y = np.rint(sol[NP:2 * NP])
        c = np.zeros(2 * NP + 1)
        c[self.foreign_x] = 1.0
        res = self.solve(c, 0.0, float(z), time_limit, 0.0, fix_y=y, integral=True)
        if res.x is None:
            return _round_plan(sol, self.loads, self.pi, N, P)
        return _round_plan(res.x, self.loads, self.pi, N, P)


@constraints(loads="array1d", placement=("int>=1", "array1d"), min_chunk="cap",
             memory_limit=("real>=0", "array1d"), expert_bytes="real>=0", token_bytes="real>=0",
             max_foreign=("int>=0", "array1d"), transfer_weight="real>=0", time_limit="real>0",
             num_devices="count")
def optimal_plan(loads: ArrayLike, placement: ArrayLike | int, *, min_chunk: int = 1,
                 memory_limit: ArrayLike | float | None = None, expert_bytes: float | None = None,
                 token_bytes: float = 0, max_foreign: ArrayLike | int | None = None,
                 transfer_weight: float | None = None, time_limit: float = 60.0,
                 num_devices: int | None = None) -> Result:
    r"""The plan of least maximum device load (then fewest weight transfers), by an exact MILP.

    The routing slots of each expert are split over the devices so that the busiest device computes as
    few slots as possible; among such plans, one that copies the fewest experts' weights to other devices,
    optionally within a per-device memory limit. Solved by HiGHS [3]_ through :func:`scipy.optimize.milp`.
    An oracle for small layers (tests, quality checks of the least-loaded greedy of [1]_,
    :func:`~numtk.moe.llep_plan`), not a per-step planner.

    Parameters
    ----------
    loads : array_like of int, shape (N,)
        Routing-slot totals of each expert in the layer (sum per-source counts over the sources first; a
        2-D array is refused). Non-negative whole numbers; floats with integral values are accepted.
    placement : int or array_like of int, shape (N,)
        The native device of each expert, or a device count P for contiguous blocks
        (``placement[e] = e * P // N``, which needs ``N % P == 0``).
    min_chunk : int, default 1
        The chunk rule: a foreign device that computes part of expert e computes at least
        ``min(min_chunk, l_e)`` of its slots. 1 imposes nothing.
    memory_limit : float or array_like of float, shape (P,), optional
        Bytes each device may hold: its experts' weights, the copies it receives and the activations of the
        slots it computes. Needs `expert_bytes`.
    expert_bytes : float, optional
        Bytes of one expert's weights (required with `memory_limit`; with it alone, `peak_memory` is
        reported).
    token_bytes : float, default 0
        Activation bytes per routed slot computed on a device.
    max_foreign : int or array_like of int, shape (P,), optional
        The cardinality form of the memory limit: at most this many foreign experts on each device. May be
        combined with `memory_limit`; both then hold.
    transfer_weight : float, optional
        None (default): lexicographic, first the least maximum load z*, then the fewest transfers with the
        maximum load held at z*. A number mu >= 0: one solve of ``min z + mu * (number of transfers)``
        (mu = 0 minimises the maximum load alone and leaves the transfer count to the solver).
    time_limit : float, default 60.0
        Seconds HiGHS may spend, over both stages together (the final integral placement of the slots, a
        root-node solve, gets at least a second). When it runs out, the best plan found so far is returned
        with ``status = 1`` and its `mip_gap`.
    num_devices : int, optional
        The device count P when some devices host no expert (default: from `placement`).

    Returns
    -------
    Result
        The plan, with the fields every plan of :mod:`numtk.moe` has and those of the solve:

        assignment : ndarray of int64, shape (N, P)
            Slots of expert e computed on device p.
        chunks : ndarray of int64, shape (K, 4)
            Rows (expert, device, start, stop): one per (expert, device) pair with slots, per expert the
            native device first and then the others in id order, tiling ``[0, l_e)``.
        weight_transfers : ndarray of int64, shape (W, 3)
            Rows (expert, source, destination), one per foreign device that computes part of an expert.
        device_loads : ndarray of int64, shape (P,)
            Slots computed on each device.
        max_load : int
            The largest device load: the optimum z* when ``status == 0``.
        lower_bound : int
            max(LB1, LB2) of the Notes (LB2 only with a memory limit or `max_foreign`).
        capacity : int
            The per-device load the plan keeps to: equal to `max_load`.
        method : str
            ``"milp"``.
        imbalance_ratio : float
            Max over mean of the native device loads (1.0 for zero loads).
        forced : int
            Chunks placed beyond `capacity`: always 0.
        peak_memory : ndarray of float64, shape (P,), or None
            Bytes on each device (weights held plus activations); None without `expert_bytes`.
        feasible : bool
            Whether the plan honours the memory limits (`memory_limit`, `max_foreign`). False when no plan
            can: the standard expert-parallel plan is returned then.
        placement : ndarray of int64, shape (N,)
            The native device of each expert (the placement the plan was made with).
        status : int
            0 every stage solved to optimality; 1 the time limit stopped a stage (the plan is the best found:
            feasible, maybe not optimal); 2 no plan fits the memory limits.
        mip_gap : float or None
            The relative gap ``(objective - bound) / objective`` of the stage that the time limit stopped,
            as HiGHS reports it (the maximum load in the first stage, the transfer count in the second;
            the weighted objective with `transfer_weight`), 0.0 when every stage is optimal, None when
            status is 2.
        success : bool
            Whether status is 0.
        message : str
            What happened, in words.

    Raises
    ------
    ValueError
        Negative or fractional `loads`, device ids out of range, mismatched shapes, `memory_limit` without
        `expert_bytes`, memory or byte sizes whose totals overflow, a problem of more than 2**22 (expert,
        device) pairs or loads totalling 2**53 or more.
    TypeError
        Non-numeric arguments.

    Warns
    -----
    NumtkWarning
        When N * P exceeds 512: the solve may take long.

    See Also
    --------
    llep_plan : The least-loaded greedy this oracle measures.
    standard_ep_plan : Every expert on its native device.
    scipy.optimize.milp : The HiGHS interface used here.

    Notes
    -----
    Variables: :math:`x_{e,p} \ge 0` the slots of expert e computed on device p,
    :math:`y_{e,p} \in \{0, 1\}` whether e's weights are on p (:math:`y_{e,\pi(e)} = 1` fixed), and the
    maximum load :math:`z \in \mathbb{Z}`; 2NP + 1 in all. Rows:

    .. math::

        \sum_p x_{e,p} = l_e, \qquad x_{e,p} \le \min(l_e, \bar z)\, y_{e,p}, \qquad \sum_e x_{e,p} \le z,

    with :math:`\bar z` an upper bound on z (the standard plan's max load when it fits the memory, the
    total T otherwise; :math:`z^*` in the second stage), and, as asked, the chunk rule
    :math:`x_{e,p} \ge \min(m, l_e)\, y_{e,p}` for :math:`p \ne \pi(e)`, the memory rows
    :math:`b_w \sum_e y_{e,p} + b_t \sum_e x_{e,p} \le M_p` (`expert_bytes` b_w, `token_bytes` b_t,
    `memory_limit` M_p), and the cardinality rows :math:`\sum_{e: \pi(e) \ne p} y_{e,p} \le F_p`.
    Objective: min z, then (lexicographic, the default) min :math:`\sum_{p \ne \pi(e)} y_{e,p}` subject to
    :math:`z \le z^*`; or :math:`\min z + \mu \sum_{p \ne \pi(e)} y_{e,p}` with ``transfer_weight = mu``.
    z is bounded below by `lower_bound`, which lets HiGHS stop as soon as a plan reaches it. Without memory
    limits and with ``min_chunk = 1``, :math:`z^* = \lceil T/P \rceil` (filling the devices in turn reaches
    it) and only the second stage is solved.

    In the lexicographic mode the first solve minimises :math:`z + \mu' \sum y` with
    :math:`\mu'` below 1/2 over the number of foreign pairs, which keeps z first and steers the plan found
    towards few transfers. The transfers of any plan with maximum load z are at least the larger of
    :math:`\sum_e \max(\lceil l_e / z \rceil - 1, 0)` and P - c, where c is the largest number of groups
    in a partition of the devices such that each group's native load fits, :math:`\sum_{p \in U} N_p
    \le |U| z` (slots move only within a connected component of the transfer graph, and a graph on P
    nodes with c components has at least P - c edges; computed for P <= 10). When the first plan meets
    this bound the second solve is skipped; otherwise the bound is one of its rows.

    The slots x are integers, but are declared continuous (which HiGHS solves several times faster):
    once y and z are fixed, what is left is a flow problem (experts supply their loads, devices take at
    most z, arcs where y = 1 carry between the chunk minimum and :math:`\min(l_e, \bar z)`) whose data are
    integers, so an integral x exists whenever a fractional one does. A last solve with y and z fixed finds
    it, and among those the x that moves the fewest slots off their native devices. With activation bytes
    in a memory row (``token_bytes > 0`` and a `memory_limit`) a device's slot budget is not an integer and
    x is declared integer instead.

    The chunk rule is a model of the greedy's, not a copy: :func:`~numtk.moe.llep_plan` may give a foreign
    device fewer than m slots when they are the last piece of an expert, which this row forbids unless
    the piece is the whole expert (``min(m, l_e) = l_e``). With ``min_chunk = 1`` the two agree.

    Lower bounds: LB1 = ceil(T / P) with T = sum_e l_e. With at most F_p foreign experts on device p,
    LB2 is the least z with :math:`\sum_e \max(\lceil l_e / z \rceil - 1, 0) \le \sum_p F_p` (each expert
    needs ceil(l_e / z) hosts, all but its native one foreign). With `memory_limit`, F_p =
    floor((M_p - native bytes_p) / b_w), capped by `max_foreign` when both are given.

    Zero loads, a single device, and layers where the standard plan already reaches `lower_bound` within
    the memory limit are answered without calling the solver. HiGHS works in double precision; should a
    solution's y be fractional within the integrality tolerance (only possible for loads of about 10**6
    and more), slots on a device whose y rounds to 0 go back to the native device, so `max_load` is always
    that of the returned integer plan.

    With a cardinality or memory limit the problem is splittable scheduling with setup and cardinality
    constraints, NP-hard in general [2]_; the size grows as N * P, so keep to a few hundred pairs (N = 24,
    P = 6 takes about 0.1 s).

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.
    .. [2] F. Schalekamp, R. Sitters, S. van der Ster, L. Stougie, V. Verdugo, A. van Zuylen,
       "Split scheduling with uniform setup times", Journal of Scheduling 18, 2015.
    .. [3] Q. Huangfu, J. A. J. Hall, "Parallelizing the dual revised simplex method", Mathematical
       Programming Computation 10, 2018 (HiGHS).

    Examples
    --------
    One hot expert on device 0, two light ones on device 1: device 1 takes four slots of expert 0.

    >>> from numtk.moe import optimal_plan
    >>> res = optimal_plan([10, 0, 1, 1], [0, 0, 1, 1])
    >>> res.max_load, res.lower_bound, res.weight_transfers.tolist()
    (6, 6, [[0, 0, 1]])
    >>> res.device_loads.tolist(), res.status
    ([6, 6], 0)

    Without room for a foreign expert the standard plan is the optimum:

    >>> optimal_plan([10, 0, 1, 1], [0, 0, 1, 1], max_foreign=0).max_load
    10
    """
    loads_arr = _plan.as_layer_loads(loads, "loads", hint="sum per-source counts over the sources "
                                     "(`loads.sum(axis=1)`); optimal_plan plans one layer, so plan a batch of "
                                     "layers one row at a time")
    N = len(loads_arr)
    _ndim(placement, "placement")
    pi, P = _plan.as_placement(placement, N, num_devices)
    m = check_int(min_chunk, "min_chunk", minimum=1)
    limit, expert_bytes, token_bytes = _plan.check_memory(memory_limit, expert_bytes, token_bytes, P)
    F = _as_max_foreign(max_foreign, P)
    if transfer_weight is not None:
        transfer_weight = check_real(transfer_weight, "transfer_weight", low=0.0)
    time_limit = check_real(time_limit, "time_limit", low=0.0, low_open=True)
    total = int(loads_arr.sum())
    if total >= MAX_MILP_TOTAL:
        raise ValueError("the total of `loads` must be below 2**53 for the MILP (HiGHS works in double "
                         f"precision); got {total}")
    if N * P > MAX_PAIRS:
        raise ValueError(f"`loads` and `placement` (or `num_devices`) give N * P = {N} * {P} = {N * P} (expert, "
                         f"device) pairs; the MILP is limited to {MAX_PAIRS} (and slow long before)")
    if expert_bytes is not None and not np.isfinite(expert_bytes * (N + 1)):
        raise ValueError(f"`expert_bytes` = {expert_bytes:g} times the number of experts overflows")
    if not np.isfinite(token_bytes * (total + 1.0)):
        raise ValueError(f"`token_bytes` = {token_bytes:g} times the total load overflows")
    if N * P > WARN_PAIRS:
        warnings.warn(f"optimal_plan: N * P = {N * P} > {WARN_PAIRS} (expert, device) pairs; the MILP may take "
                      f"long (time_limit = {time_limit:g} s)", NumtkWarning, stacklevel=2)

    # foreign slots for the bound: the smaller of the byte form and the cardinality form
    F_bound = F
    if limit is not None:
        F_bytes = _plan.max_foreign_from_bytes(limit, expert_bytes, pi, P)
        F_bound = F_bytes if F_bound is None else np.minimum(F_bound, F_bytes)
    lower = _plan.lower_bound(loads_arr, P, F_bound)
    imbalance = _plan.imbalance_ratio(loads_arr, pi, P, "device")

    def finish(x: np.ndarray, status: int, gap: float | None, message: str) -> Result:
        chunks = _chunks_from_assignment(x, pi)
        peak_fields: dict[str, Any] = {}
        if status == _INFEASIBLE or F is not None:  # plan_result judges bytes only; the counts are judged here
            peak_fields["feasible"] = status != _INFEASIBLE and _memory_ok(x, pi, P, limit, expert_bytes,
                                                                           token_bytes, F)
        max_load = int(x.sum(axis=0).max()) if P else 0
        return _plan.plan_result(loads_arr, pi, P, chunks, method="milp", capacity=max_load, imbalance=imbalance,
                                 forced=0, lower=lower, expert_bytes=expert_bytes, token_bytes=token_bytes,
                                 memory_limit=limit, status=status, mip_gap=gap, success=status == _OPTIMAL,
                                 message=message, **peak_fields)

    standard = np.zeros((N, P), dtype=np.int64)
    standard[np.arange(N), pi] = loads_arr
    standard_ok = _memory_ok(standard, pi, P, limit, expert_bytes, token_bytes, F)
    standard_max = int(standard.sum(axis=0).max())

    # answers that need no solver
    if limit is not None and np.any(np.bincount(pi, minlength=P) * expert_bytes > limit * (1 + 1e-12)):
        return finish(standard, _INFEASIBLE, None, "infeasible: the native experts of a device alone exceed "
                      "its `memory_limit`; returned the standard plan")
    if standard_ok and standard_max <= lower:
        return finish(standard, _OPTIMAL, 0.0, "optimal: the standard plan reaches the lower bound")

    start = time.perf_counter()
    n = 2 * N * P + 1
    args = (m, limit, expert_bytes, token_bytes, F)

    def left() -> float:
        return time_limit - (time.perf_counter() - start)

    def polished(model: _Model, sol: np.ndarray, z: int) -> np.ndarray:
        return model.polish(sol, z, max(left(), 1.0))

    def transfer_gap(x: np.ndarray, z: int) -> float:
        fewest = _fewest_transfers(loads_arr, pi, P, z)
        transfers = _transfers(x, pi)
        return (transfers - fewest) / max(transfers, 1)

    # stage 1 (or the one weighted stage): the least max load. Without memory limits and chunk rule it is
    # ceil(T / P) (water filling reaches it), and the stage is skipped in the lexicographic mode.
    first = None
    if transfer_weight is None and m == 1 and limit is None and F is None:
        z1 = lower
    else:
        z_hi = standard_max if standard_ok else total  # with a feasible standard plan, z* <= its max load
        model = _Model(loads_arr, pi, P, z_hi, *args)
        c = np.zeros(n)
        c[-1] = 1.0
        if transfer_weight is not None:
            # beyond z_hi - lower + 1 one transfer outweighs any change of z: every larger weight ranks the
            # plans alike, so the weight is capped there (which keeps the costs finite for HiGHS)
            c[model.foreign_y] = min(transfer_weight, z_hi - lower + 1.0)
            # z is integral at the optimum: a relative gap below 1 / (2 z_hi) proves it optimal
            gap = 0.0 if transfer_weight else 0.5 / (z_hi + 1.0)
        else:
            # z + mu * transfers with mu * (most transfers) < 1/2 keeps z first and steers the plan found
            # towards few transfers (often the fewest, which then skips the second stage); an absolute gap
            # below 1/4 proves z optimal
            c[model.foreign_y] = 0.5 / (len(model.foreign_y) + 1)
            gap = 0.25 / (z_hi + 1.0)
        res = model.solve(c, float(lower), float(z_hi), time_limit, gap=gap)
        if res.x is None:
            if res.status == _INFEASIBLE:
                return finish(standard, _INFEASIBLE, None, "infeasible: no plan fits the memory limits; "
                              "returned the standard plan")
            # the time ran out before HiGHS found a plan: fall back on the standard plan
            gap = (standard_max - lower) / standard_max if standard_max and standard_ok else None
            return finish(standard, _LIMIT, gap, "time limit reached before a plan was found (HiGHS: "
                          f"{res.message}); returned the standard plan")
        z_found = int(round(res.x[-1]))
        first = (model, res.x, z_found)  # polished only when returned
        if res.status != _OPTIMAL:
            x = polished(*first)
            gap = float(res.mip_gap) if res.mip_gap is not None else (z_found - lower) / max(z_found, 1)
            stage = "weighted" if transfer_weight is not None else "max-load"
            return finish(x, _LIMIT, gap, f"time limit reached in the {stage} stage: the plan is the best found "
                          f"(relative gap {gap:.3g}; HiGHS: {res.message})")
        if transfer_weight is not None:
            return finish(polished(*first), _OPTIMAL, 0.0, "optimal: least max load plus transfer_weight times the transfers")
        z1 = z_found
        if standard_ok and standard_max <= z1:
            return finish(standard, _OPTIMAL, 0.0, "optimal: the standard plan reaches the least max load")
        x = polished(*first)
        transfers = _transfers(x, pi)
        fewest = _fewest_transfers(loads_arr, pi, P, z1)
        if transfers <= fewest:
            return finish(x, _OPTIMAL, 0.0, "optimal: least max load, with as few transfers as any plan needs")
        if left() <= 0:
            return finish(x, _LIMIT, transfer_gap(x, z1),
                          "time limit reached after the max-load stage: the max load is optimal, the transfers "
                          "were not minimised")

    # stage 2: the fewest transfers with the max load held at z1
    bounds = (_fewest_transfers(loads_arr, pi, P, z1), np.inf if first is None else transfers)
    model = _Model(loads_arr, pi, P, z1, *args, transfers=bounds)
    c = np.zeros(n)
    c[model.foreign_y] = 1.0
    res2 = model.solve(c, float(lower), float(z1), max(left(), 1e-3), gap=0.5 / max(len(model.foreign_y), 1))
    if res2.x is None:  # only when the time ran out (a plan at z1 exists)
        if first is not None:
            return finish(x, _LIMIT, transfer_gap(x, z1), "time limit reached in the transfer stage before it "
                          "improved on the first: the max load is optimal, the transfers were not minimised")
        gap = (standard_max - lower) / standard_max if standard_max and standard_ok else None
        return finish(standard, _LIMIT, gap, "time limit reached before a plan was found (HiGHS: "
                      f"{res2.message}); returned the standard plan")
    x = polished(model, res2.x, z1)
    if res2.status == _OPTIMAL:
        return finish(x, _OPTIMAL, 0.0, "optimal: least max load, then fewest weight transfers")
    gap = float(res2.mip_gap) if res2.mip_gap is not None else 1.0
    return finish(x, _LIMIT, gap, "time limit reached in the transfer stage: the max load is optimal, the "
                  f"transfer count is the best found (relative gap {gap:.3g}; HiGHS: {res2.message})")
