"""Strands that an embedding lays side by side: windows of its ranks that the graph holds in separate pieces.

Along one strand of a curve, the points of any m consecutive values of a good embedding f lie in one stretch,
and the graph's edges among them join them (each point has neighbours ahead and behind). Where a stretch of the
curve was laid at the values of another, far from it in space, the window holds points of both, and no edge
joins the two groups there. ``split_windows`` counts such windows; ``strand_pieces`` follows the groups from
window to window and cuts the points into pieces, each one stretch laid in order; ``piece_path`` finds the order
and direction of the pieces that joins them end to end at least cost.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, dijkstra

# A group of a window counts when it holds at least this fraction of the window's points (and 5 points): the rest
# are outliers whose edges all leave the window. Measured with windows of 4 k-NN (60 points): a second group of at
# most 3 points where the embedding was within 0.01 of the noise floor (close arms, n = 2000 and 3000, d = 20 and
# 100), 19-30 points in most windows of each miss.
_GROUP = 1.0 / 6.0
_GROUP_MIN = 5
# Windows (see window_size): 4 times the median degree (about 15 neighbours each: 60 points), and at least 8
# times the median rank difference of the edges: a window across a tube wider than the neighbour radius holds
# points whose neighbours lie outside it (at n = 1e5 - 1e6, d = 100, noise 0.05, windows of 60 points were split
# on 240 of 3333 (helix) and 23593 of 33333 (spiral) while the order was at the noise floor; with the rule, none).
_WINDOW_DEGREE = 4
_WINDOW_SPAN = 8
# Groups of consecutive windows are linked where they share at least this fraction of the smaller one's points
# (along one strand they share about half: the windows overlap by half). A few points of another strand held to a
# group by an edge make a weaker link: on the spiral at 6 noise widths (2000 points, d = 20, seed 2) 3-5 points
# of a 17-point stretch, which linked the main strand's group to that stretch's and made both junctions.
_LINK = 1.0 / 3.0


def window_size(f: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> int:
    """The window for the graph with edges (rows, cols), each once, and embedding f: _WINDOW_DEGREE times the
    median degree and at least _WINDOW_SPAN times the median rank difference of the edges."""
    n = int(f.size)
    if rows.size == 0:
        return max(n, 1)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(f, kind="stable")] = np.arange(n)
    span = float(np.median(np.abs(rank[rows] - rank[cols])))
    degree = float(np.median(np.bincount(np.r_[rows, cols], minlength=n)))
    return int(max(_WINDOW_DEGREE * degree, _WINDOW_SPAN * span, 8))


def _window_groups(f: np.ndarray, rows: np.ndarray, cols: np.ndarray, m: int):
    """Windows of m consecutive ranks of f, overlapping by half, each split into the connected groups of the
    edges (rows, cols) inside it. Returns (order, h, K, labels): point of rank r lies in windows r // h - 1 + s,
    s = 0, 1 (those in 0 .. K - 1); its group there is labels[2 r + s] (-1 where that window does not exist)."""
    n = int(f.size)
    h = max(m // 2, 1)
    K = max(1, -(-(n - h) // h))  # windows [w h, w h + m), w = 0 .. K - 1, the last one clipped at n
    order = np.argsort(f, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    a, b = rank[rows], rank[cols]
    a, b = np.minimum(a, b), np.maximum(a, b)
    src, dst = [], []
    for s in (0, 1):
        w = a // h - 1 + s
        ok = (w >= 0) & (w < K) & (b < w * h + m)
        src.append(2 * a[ok] + s)
        dst.append(2 * b[ok] + (w[ok] - (b[ok] // h - 1)))
    src, dst = np.concatenate(src), np.concatenate(dst)
    G = sp.csr_matrix((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(2 * n, 2 * n))
    _, labels = connected_components(G, directed=False)
    r = np.repeat(np.arange(n), 2)
    w = r // h - 1 + np.tile([0, 1], n)
    labels = np.where((w >= 0) & (w < K), labels, -1)
    return order, h, K, labels


def _significant(labels: np.ndarray, h: int, K: int, n: int, m: int):
    """(the group sizes, which groups count, each group's window)."""
    valid = labels >= 0
    sizes = np.bincount(labels[valid], minlength=2 * n)
    r = np.repeat(np.arange(n), 2)
    w = r // h - 1 + np.tile([0, 1], n)
    window = np.full(2 * n, -1)
    window[labels[valid]] = w[valid]
    width = np.minimum(m, n - np.maximum(window, 0) * h)
    big = (sizes >= _GROUP_MIN) & (sizes >= _GROUP * width)
    return sizes, big, window


def split_windows(f: np.ndarray, rows: np.ndarray, cols: np.ndarray, m: int) -> tuple[int, int, np.ndarray, int]:
    """(windows holding two or more groups that count, windows, per point: in such a window outside its largest
    group, the longest run of consecutive such windows). ``rows``, ``cols``: the graph's edges, each once; f: the
    embedding of its nodes."""
    n = int(f.size)
    order, h, K, labels = _window_groups(f, rows, cols, m)
    sizes, big, window = _significant(labels, h, K, n, m)
    per_window = np.bincount(window[big], minlength=K)
    largest = np.full(K, -1)
    groups = np.flatnonzero(big)
    by_size = groups[np.argsort(sizes[groups], kind="stable")]
    largest[window[by_size]] = by_size  # the last write per window is its largest group
    split = per_window >= 2
    lab = labels.reshape(n, 2)
    w = (np.arange(n) // h - 1)[:, None] + np.array([0, 1])[None, :]
    inside = (lab >= 0) & split[np.clip(w, 0, K - 1)] & big[np.maximum(lab, 0)] & (lab != largest[np.clip(w, 0, K - 1)])
    stray = np.zeros(n, dtype=bool)
    stray[order[np.any(inside, axis=1)]] = True
    edges = np.diff(np.r_[0, split.astype(np.int8), 0])  # +1 where a run starts, -1 after it ends
    run = int(np.max(np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1))) if split.any() else 0
    return int(np.count_nonzero(split)), K, stray, run


def strand_pieces(f: np.ndarray, rows: np.ndarray, cols: np.ndarray, m: int, min_piece: int):
    """Pieces of the points, each a stretch laid in order by f, where some window holds two groups; None where
    none does (or fewer than two pieces are left). The groups that count are linked from window to window where
    they share at least _LINK of the smaller one's points; a group linked to two on one side is a junction of
    two strands and is cut out; the chains of links left are the pieces. Points of junctions, of groups too small
    to count, of two chains at once and of pieces under ``min_piece`` points join the piece that reaches them
    in the fewest graph steps. Returns (per point its piece 0 .. p - 1, per point whether it lay in a piece's
    chain rather than joined it so)."""
    n = int(f.size)
    order, h, K, labels = _window_groups(f, rows, cols, m)
    sizes, big, window = _significant(labels, h, K, n, m)
    if not np.any(np.bincount(window[big], minlength=K) >= 2):
        return None
    lab = labels.reshape(n, 2)
    both = (lab[:, 0] >= 0) & (lab[:, 1] >= 0)
    pairs = lab[both]
    pairs = pairs[big[pairs[:, 0]] & big[pairs[:, 1]]]
    link, shared = np.unique(pairs, axis=0, return_counts=True)  # (group in window w, group in w + 1), points
    # a link holds where the two groups share a good part of the smaller (consecutive windows share half their
    # ranks); a few points of another strand held to a group by an edge make a weak link, which is dropped
    link = link[shared >= _LINK * np.minimum(sizes[link[:, 0]], sizes[link[:, 1]])]
    up = np.bincount(link[:, 0], minlength=2 * n)
    down = np.bincount(link[:, 1], minlength=2 * n)
    junction = (up > 1) | (down > 1)  # two strands meet in it: cut out
    link = link[~junction[link[:, 0]] & ~junction[link[:, 1]]]
    big = big & ~junction
    L = sp.csr_matrix((np.ones(len(link), dtype=np.int8), (link[:, 0], link[:, 1])), shape=(2 * n, 2 * n))
    _, chain = connected_components(L, directed=False)
    per_rank = np.where((lab >= 0) & big[np.maximum(lab, 0)], chain[np.maximum(lab, 0)], -1)
    piece = np.max(per_rank, axis=1)
    piece[(per_rank.min(axis=1) >= 0) & (per_rank[:, 0] != per_rank[:, 1])] = -1  # two chains: left to the search
    piece_of = np.full(n, -1)
    piece_of[order] = piece
    # small pieces give their points to their neighbours
    ids, counts = np.unique(piece_of[piece_of >= 0], return_counts=True)
    small = ids[counts < min_piece]
    piece_of[np.isin(piece_of, small)] = -1
    ids = ids[counts >= min_piece]
    if ids.size < 2:
        return None
    piece_of = np.where(piece_of >= 0, np.searchsorted(ids, np.maximum(piece_of, 0)), -1)
    core = piece_of >= 0
    loose = np.flatnonzero(~core)
    if loose.size:
        G = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
        seeds = np.flatnonzero(piece_of >= 0)
        _, _, source = dijkstra(G, directed=False, indices=seeds, unweighted=True, min_only=True,
                                return_predecessors=True)
        reached = source[loose] >= 0
        piece_of[loose[reached]] = piece_of[source[loose[reached]]]
        piece_of[loose[~reached]] = 0  # not reachable from any piece: cannot happen on a connected graph
    return piece_of, core


def piece_path(ends: np.ndarray) -> tuple[list[int], list[int]]:
    """The order and direction of p pieces joining them end to end at least cost.

    ``ends``: (p, 2, p, 2) costs of joining end a of piece i to end b of piece j (end 0: low f, 1: high f).
    Returns (pieces in path order, the end each one is entered by). Exact (dynamic programming over subsets)."""
    p = ends.shape[0]
    full = (1 << p) - 1
    # best[mask, i, e]: least cost of a path over the pieces in mask that ends in piece i, left by its end e
    best = np.full((1 << p, p, 2), np.inf)
    back = np.full((1 << p, p, 2, 2), -1, dtype=np.int64)
    for i in range(p):
        best[1 << i, i, :] = 0.0
    step = ends.reshape(p, 2, p, 2)[:, :, :, ::-1]  # [i, e, j, x]: from end e of i into j, leaving j by end x
    for mask in range(1, full + 1):
        cur = best[mask]
        if not np.isfinite(cur).any():
            continue
        free = np.array([not mask >> j & 1 for j in range(p)])
        if not free.any():
            continue
        total = cur[:, :, None, None] + step  # [i, e, j, x]
        total[:, :, ~free, :] = np.inf
        flat = total.reshape(2 * p, p, 2)
        arg = np.argmin(flat, axis=0)  # the best (i, e) for each (j, x)
        val = np.take_along_axis(flat, arg[None], axis=0)[0]
        js = np.flatnonzero(free)
        nm = mask | (1 << js)
        better = val[js] < best[nm, js]  # (free pieces, 2)
        best[nm, js] = np.where(better, val[js], best[nm, js])
        jj, xx = np.nonzero(better)
        back[nm[jj], js[jj], xx, 0] = arg[js[jj], xx] // 2
        back[nm[jj], js[jj], xx, 1] = arg[js[jj], xx] % 2
    i, e = np.unravel_index(int(np.argmin(best[full])), (p, 2))
    path, entered, mask = [], [], full
    while True:
        path.append(int(i))
        entered.append(1 - int(e))
        pi, pe = back[mask, i, e]
        if pi < 0:
            break
        mask ^= 1 << int(i)
        i, e = pi, pe
    return path[::-1], entered[::-1]
