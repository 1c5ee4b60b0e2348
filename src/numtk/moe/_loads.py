"""Synthetic routing loads for expert-parallel planning: a few hot experts (deterministic, in two
conventions), Zipf popularities and Dirichlet popularities with an optional drift across steps.

Every generator returns int64 counts of (token, expert) routing slots per expert that sum to
``num_tokens * top_k`` exactly (times ``num_sources`` for :func:`hot_expert_loads`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtk._lib import normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import C_INT_MAX, check_bool, check_int, check_option, check_real, check_size

__all__ = ["hot_expert_loads", "zipf_loads", "dirichlet_loads"]

#: the total number of routing slots stays below this (as in the plans' checks)
_MAX_TOTAL = 2**62
_STYLES = ("slots", "anchor")
#: clip-and-redistribute rounds drawn at random before the remaining excess is placed deterministically
_REDRAW_ROUNDS = 64


def _check_common(num_experts: Any, num_tokens: Any, top_k: Any, factor: int = 1) -> tuple[int, int, int]:
    N = check_int(num_experts, "num_experts", minimum=1, maximum=C_INT_MAX)
    n = check_int(num_tokens, "num_tokens", minimum=1, maximum=C_INT_MAX)
    k = check_int(top_k, "top_k", minimum=1, maximum=C_INT_MAX)
    if k > N:
        raise ValueError(f"`top_k` ({k}) must be at most `num_experts` ({N}): a token picks distinct experts")
    if n * k * factor >= _MAX_TOTAL:
        raise ValueError(f"`num_tokens` * `top_k`{' * `num_sources`' if factor > 1 else ''} = {n * k * factor} "
                         "routing slots must be below 2**62")
    return N, n, k


def _check_batch(size: Any, N: int) -> int | None:
    if size is None:
        return None
    size = check_int(size, "size", minimum=1, maximum=C_INT_MAX)
    check_size(size * N, 8 * 4.0, "size")
    return size


# --------------------------------------------------------------------------------------------------
# hot experts
# --------------------------------------------------------------------------------------------------
def _anchor_counts(N: int, n: int, k: int, h: int, r: float) -> np.ndarray:
    """Per-expert slot counts of one source under the "anchor" rule, in closed form (O(N + k))."""
    counts = np.zeros(N, dtype=np.int64)
    hot_tokens = int(np.floor(r * n))
    # hot token i sends slot j to expert j mod h: expert e gets hot_tokens * #{j < k : j mod h = e}
    counts[:h] += hot_tokens * np.bincount(np.arange(k) % h, minlength=h)
    cold_tokens = n - hot_tokens
    if cold_tokens:
        M = N - h
        # cold token i (hot_tokens <= i < n) sends slot j to h + ((i + j) mod M): for each j the values i + j
        # run over cold_tokens consecutive integers starting at hot_tokens + j, i.e. every residue
        # cold_tokens // M times, plus once more for the cold_tokens % M residues from (hot_tokens + j) mod M on
        full, rest = divmod(cold_tokens, M)
        cold = np.full(M, full * k, dtype=np.int64)
        if rest:
            starts = (hot_tokens + np.arange(k, dtype=np.int64)) % M
            diff = np.zeros(M + 1, dtype=np.int64)
            ends = starts + rest
            np.add.at(diff, starts, 1)
            np.add.at(diff, np.minimum(ends, M), -1)
            wrap = ends > M
            np.add.at(diff, np.zeros(int(wrap.sum()), dtype=np.int64), 1)
            np.add.at(diff, ends[wrap] - M, -1)
            cold += np.cumsum(diff[:M])
        counts[h:] += cold
    return counts


@constraints(num_experts="count", num_tokens="count", top_k="int>=1", hot_fraction="prob", num_hot="int>=1",
             num_sources="count", style="option")
def hot_expert_loads(num_experts: int, num_tokens: int, *, top_k: int = 1, hot_fraction: float = 0.8,
                     num_hot: int = 1, num_sources: int = 1, style: str = "slots") -> np.ndarray:
    r"""Deterministic loads in which ``num_hot`` experts take a given share of the routing.

    The synthetic imbalance of the LLEP paper's benchmarks [1]_: experts ``0 .. num_hot - 1`` are hot. The
    two ``style`` values are the two readings of "a share of the tokens goes to the hot experts" under
    top-k routing (see Notes).

    Parameters
    ----------
    num_experts : int
        N, the experts.
    num_tokens : int
        n, the tokens routed by each source device (in total when ``num_sources=1``).
    top_k : int, optional
        k, the experts each token is routed to (at most N). Default 1.
    hot_fraction : float, optional
        r in [0, 1]: the share of routing slots (``'slots'``) or of tokens (``'anchor'``) that go to the
        hot experts. Default 0.8.
    num_hot : int, optional
        h, the hot experts (experts ``0 .. h - 1``); at most N, and below N with ``'anchor'`` when some
        tokens are cold. Default 1.
    num_sources : int, optional
        S, the source devices (EP ranks), each routing ``num_tokens`` tokens by the same rule. The result
        is the total over sources, S times the loads of one source: the ``loads`` a planner takes. The
        per-source counts, all columns equal, are ``np.repeat(loads[:, None] // S, S, axis=1)``, shape
        (N, S): pass them to :func:`simulate_ep` as ``source_loads`` (never as ``loads``). Default 1.
    style : {'slots', 'anchor'}, optional
        ``'slots'`` (default): ``hot_fraction`` of the routing slots go to the hot experts, spread evenly;
        ``'anchor'``: the rule of the LLEP reference tests (``create_imbalanced_routing``), in which
        ``hot_fraction`` of the tokens route their k slots round-robin over the hot experts.

    Returns
    -------
    loads : ndarray of int64, shape (N,)
        Routing slots per expert, summing to ``n * k * S``.

    Raises
    ------
    ValueError
        A count out of range, ``top_k > num_experts``, ``num_hot > num_experts`` (with ``'anchor'``:
        no cold expert left for the cold tokens), or, with ``'slots'``, an expert that would receive more
        than ``num_tokens`` slots per source (more than one slot per token: impossible with distinct
        top-k experts).
    TypeError
        A non-integer count, or a ``style`` that is not a string.

    Notes
    -----
    Per source, with :math:`T = n k` slots:

    ``'slots'``: :math:`H = \lfloor r T \rfloor` hot slots are split evenly over the h hot experts
    (:math:`\lfloor H / h \rfloor` each); the remaining :math:`T - h \lfloor H / h \rfloor` slots are split
    evenly over *all* N experts (floor), and what the floors leave over goes to expert N - 1. Every load
    must stay :math:`\le n` (a token takes each expert at most once), else ``ValueError``.

    ``'anchor'``: token :math:`i < \lfloor r n \rfloor` sends its j-th slot to hot expert :math:`j \bmod h`;
    every other token sends slot j to cold expert :math:`h + ((i + j) \bmod (N - h))`. When h < k a hot
    token is routed to the same expert several times (the reference behaviour, kept: the hot loads then
    exceed n), and the hot share of the *slots* is :math:`\lfloor r n \rfloor / n`. The counts are computed
    in closed form, O(N + k), not by visiting tokens.

    On the paper's benchmark configuration (N = 128 on 8 devices of 16 experts, top-4, 32768 tokens per
    device and 8 sources, h = 4, ``'anchor'``) the native device loads have max/mean 2.942, 4.387, 6.555
    and 7.639 for r = 0.3, 0.5, 0.8, 0.95.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.

    Examples
    --------
    >>> from numtk.moe import hot_expert_loads
    >>> hot_expert_loads(8, 100, top_k=2, hot_fraction=0.3)
    array([77, 17, 17, 17, 17, 17, 17, 21])
    >>> hot_expert_loads(8, 10, top_k=2, hot_fraction=0.5, num_hot=2, style="anchor")
    array([5, 5, 2, 2, 2, 2, 1, 1])
    >>> int(hot_expert_loads(128, 32768, top_k=4, hot_fraction=0.95, num_hot=4, num_sources=8,
    ...                      style="anchor").sum())
    1048576
    """
    style = check_option(style, "style", _STYLES)
    S = check_int(num_sources, "num_sources", minimum=1, maximum=C_INT_MAX)
    N, n, k = _check_common(num_experts, num_tokens, top_k, factor=S)
    r = check_real(hot_fraction, "hot_fraction", low=0.0, high=1.0)
    h = check_int(num_hot, "num_hot", minimum=1, maximum=C_INT_MAX)
    if h > N:
        raise ValueError(f"`num_hot` ({h}) must be at most `num_experts` ({N})")
    check_size(N, 8 * 6.0, "num_experts")
    if style == "anchor":
        if h == N and int(np.floor(r * n)) < n:
            raise ValueError(f"`num_hot` ({h}) must be below `num_experts` ({N}) with style='anchor' when some "
                             "tokens are cold (`hot_fraction` < 1): the cold tokens need a cold expert")
        counts = _anchor_counts(N, n, k, h, r)
    else:
        T = n * k
        H = int(np.floor(r * T))
        counts = np.zeros(N, dtype=np.int64)
        counts[:h] = H // h
        rest = T - h * (H // h)
        counts += rest // N
        counts[-1] += rest - N * (rest // N)
        if counts.max() > n:
            e = int(np.argmax(counts))
            raise ValueError(f"with style='slots', expert {e} would receive {int(counts[e])} slots of "
                             f"`num_tokens` = {n} tokens (more than one per token); lower `hot_fraction` or "
                             f"`top_k`, raise `num_hot`, or use style='anchor'")
    return counts * S


# --------------------------------------------------------------------------------------------------
# random popularities
# --------------------------------------------------------------------------------------------------
def _cap(counts: np.ndarray, p: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Clip-and-redistribute one draw in place: loads above ``n`` are cut to ``n`` and the excess slots are
    redrawn multinomially over the experts below ``n`` in proportion to ``p`` (uniformly if those have
    ``p = 0``), until no load exceeds ``n``; after a number of rounds the remaining excess fills the experts
    with room in order of decreasing ``p``. Needs ``sum(counts) <= n * N``."""
    for _ in range(_REDRAW_ROUNDS):
        over = counts > n
        if not over.any():
            return counts
        excess = int((counts[over] - n).sum())
        counts[over] = n
        room = counts < n
        q = np.where(room, p, 0.0)
        if not q.sum() > 0:
            q = room.astype(np.float64)
        counts += rng.multinomial(excess, q / q.sum())
    over = counts > n
    excess = int((counts[over] - n).sum())
    counts[over] = n
    for e in np.argsort(-p, kind="stable"):
        if excess == 0:
            break
        take = min(excess, n - int(counts[e]))
        counts[e] += take
        excess -= take
    return counts


def _draw(p: np.ndarray, total: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Multinomial counts of ``total`` slots for each row of ``p`` (B, N), each load capped at ``n``."""
    p = p / p.sum(axis=1, keepdims=True)
    counts = rng.multinomial(total, p).astype(np.int64)
    for b in np.flatnonzero((counts > n).any(axis=1)):
        _cap(counts[b], p[b], n, rng)
    return counts


@constraints(num_experts="count", num_tokens="count", s="real>=0", top_k="int>=1", shuffle="bool", size="count",
             rng="rng")
def zipf_loads(num_experts: int, num_tokens: int, *, s: float = 1.2, top_k: int = 1, shuffle: bool = True,
               size: int | None = None, rng: Any = None) -> np.ndarray:
    r"""Random loads with Zipf popularities: ``n * k`` slots drawn multinomially with ``p_e`` ∝ rank^(-s).

    Parameters
    ----------
    num_experts : int
        N, the experts.
    num_tokens : int
        n, the tokens of the step.
    s : float, optional
        The Zipf exponent (>= 0; 0 is uniform). Default 1.2.
    top_k : int, optional
        k, the experts per token (at most N). Default 1.
    shuffle : bool, optional
        If True (default), the popularity ranks are assigned to experts by a random permutation; if False
        expert e has rank e + 1 (expert 0 is the most popular).
    size : int, optional
        B independent draws (each with its own permutation) as a (B, N) array; None (default) gives one
        draw of shape (N,).
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness; an int seeds a fresh generator.

    Returns
    -------
    loads : ndarray of int64, shape (N,) or (B, N)
        Routing slots per expert; each row sums to ``n * k`` and no entry exceeds n.

    Raises
    ------
    ValueError
        A count out of range, ``top_k > num_experts``, a negative or non-finite ``s``.
    TypeError
        A non-integer count, a non-bool ``shuffle``, an ``rng`` of the wrong type.

    Notes
    -----
    :math:`p_e = \mathrm{rank}_e^{-s} / \sum_{j=1}^N j^{-s}`, loads :math:`\sim \mathrm{Multinomial}(nk, p)`.
    A token takes each expert at most once, so a load above n is impossible under top-k routing; when a
    draw has one (only for large s or large k), the excess is cut and redrawn over the experts below n in
    proportion to p, until none exceeds n. This changes the distribution only in that regime and keeps the
    total at exactly nk. Zipf popularities are a common model of skewed expert usage; the LLEP paper [1]_
    measures speed-ups on such skewed routing.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.

    Examples
    --------
    >>> from numtk.moe import zipf_loads
    >>> loads = zipf_loads(8, 1000, s=1.2, top_k=2, shuffle=False, rng=0)
    >>> int(loads.sum()), bool(loads.max() <= 1000), loads.shape
    (2000, True, (8,))
    >>> zipf_loads(16, 512, size=3, rng=0).shape
    (3, 16)
    """
    N, n, k = _check_common(num_experts, num_tokens, top_k)
    s = check_real(s, "s", low=0.0)
    shuffle = check_bool(shuffle, "shuffle")
    B = _check_batch(size, N)
    check_size(N * (B or 1), 8 * 4.0, "num_experts")
    gen = normalize_rng(rng)
    with np.errstate(over="ignore", under="ignore"):
        logp = -s * np.log(np.arange(1, N + 1, dtype=np.float64))
        base = np.exp(logp - logp.max())
    rows = B or 1
    p = np.broadcast_to(base, (rows, N))
    if shuffle:
        p = gen.permuted(np.array(p), axis=1)
    out = _draw(np.array(p, dtype=np.float64), n * k, n, gen)
    return out if B is not None else out[0]


def _dirichlet(concentration: np.ndarray, rng: np.random.Generator, rows: int) -> np.ndarray:
    """``rows`` Dirichlet draws (rows, N); a draw whose gamma variates overflowed (concentrations near
    1e308, where the Dirichlet is concentrated on its mean) is replaced by the mean."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = rng.dirichlet(concentration, size=rows)
        total = p.sum(axis=1)
        bad = ~(np.isfinite(p).all(axis=1) & (total > 0.5) & (total < 1.5))
    if bad.any():
        mean = concentration / concentration.max()  # no overflow in the sum
        p[bad] = mean / mean.sum()
    return p


@constraints(num_experts="count", num_tokens="count", alpha="real>0", top_k="int>=1", size="count",
             drift="real>0", rng="rng")
def dirichlet_loads(num_experts: int, num_tokens: int, *, alpha: float = 0.5, top_k: int = 1,
                    size: int | None = None, drift: float | None = None, rng: Any = None) -> np.ndarray:
    r"""Random loads with Dirichlet popularities, independent or drifting from step to step.

    Parameters
    ----------
    num_experts : int
        N, the experts.
    num_tokens : int
        n, the tokens of each step.
    alpha : float, optional
        The symmetric concentration (> 0): small values give a few dominant experts, large values nearly
        uniform loads. Default 0.5.
    top_k : int, optional
        k, the experts per token (at most N). Default 1.
    size : int, optional
        B steps as a (B, N) array; None (default) gives one step of shape (N,).
    drift : float, optional
        None (default): each step draws its own popularities :math:`p_b \sim \mathrm{Dir}(\alpha 1_N)`.
        A number c > 0: the popularities form a Markov chain, :math:`p_0 \sim \mathrm{Dir}(\alpha 1_N)`
        and :math:`p_{b+1} \sim \mathrm{Dir}(c\, p_b)`; large c drifts slowly (the mean of
        :math:`p_{b+1}` is :math:`p_b`, its variance shrinks like 1 / (c + 1)).
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness; an int seeds a fresh generator.

    Returns
    -------
    loads : ndarray of int64, shape (N,) or (B, N)
        Routing slots per expert; each row sums to ``n * k`` and no entry exceeds n.

    Raises
    ------
    ValueError
        A count out of range, ``top_k > num_experts``, a non-positive or non-finite ``alpha`` or
        ``drift``.
    TypeError
        A non-integer count, an ``rng`` of the wrong type.

    Notes
    -----
    Loads of step b are :math:`\mathrm{Multinomial}(nk, p_b)`. Each expert's expected share is 1/N (the
    Dirichlet is symmetric, and the chain keeps the mean: :math:`E[p_{b+1} \mid p_b] = p_b`). An expert
    with :math:`p_e = 0` in the chain (possible in floating point for tiny alpha) stays at 0.
    Concentrations so large that the gamma draws overflow (about 1e300) give the Dirichlet's mean.
    Loads above n, impossible under top-k routing, can only occur for tiny alpha with k > 1; the excess is
    then cut and redrawn over the experts below n in proportion to :math:`p_b`, keeping the total nk.

    References
    ----------
    .. [1] X.-P. Nguyen, S. Pandit, A. Xu, C. Xiong, S. Joty, "Least-Loaded Expert Parallelism: Load
       Balancing An Imbalanced Mixture-of-Experts", ICML 2026, arXiv:2601.17111.

    Examples
    --------
    >>> from numtk.moe import dirichlet_loads
    >>> loads = dirichlet_loads(8, 4096, alpha=0.5, top_k=2, size=4, drift=50.0, rng=0)
    >>> loads.shape, loads.sum(axis=1).tolist()
    ((4, 8), [8192, 8192, 8192, 8192])
    """
    N, n, k = _check_common(num_experts, num_tokens, top_k)
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True)
    if drift is not None:
        drift = check_real(drift, "drift", low=0.0, low_open=True)
    B = _check_batch(size, N)
    check_size(N * (B or 1), 8 * 4.0, "num_experts")
    gen = normalize_rng(rng)
    rows = B or 1
    flat = np.full(N, alpha)
    if drift is None:
        p = _dirichlet(flat, gen, rows)
    else:
        p = np.empty((rows, N))
        p[0] = _dirichlet(flat, gen, 1)[0]
        for b in range(1, rows):
            p[b] = _dirichlet(drift * p[b - 1], gen, 1)[0]
    out = _draw(p, n * k, n, gen)
    return out if B is not None else out[0]
