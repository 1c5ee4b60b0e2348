"""Stretches of a curve laid side by side at the same values (numtk.seriation._strands) and stage's
reassembly of them: windows of consecutive ranks that the graph holds in separate groups, the pieces they cut
the points into, and the least-cost order and directions of the pieces."""

import itertools

import numpy as np
import pytest

from numtk._lib import Result
from numtk.seriation import _stage, make_curve, noise_floor, order_agreement, short_circuits, stage
from numtk.seriation._strands import piece_path, split_windows, strand_pieces, window_size


def _brute_force(cost):
    p = cost.shape[0]
    best = np.inf
    for perm in itertools.permutations(range(p)):
        for ends in itertools.product((0, 1), repeat=p):  # the end each piece is entered by
            best = min(best, sum(cost[perm[q], 1 - ends[q], perm[q + 1], ends[q + 1]] for q in range(p - 1)))
    return best


def _path_cost(cost, path, entered):
    return sum(cost[a, 1 - ea, b, eb] for a, ea, b, eb in zip(path[:-1], entered[:-1], path[1:], entered[1:]))


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6])
def test_piece_path_is_the_least_cost_path(p):
    rng = np.random.default_rng(p)
    for trial in range(6):
        cost = rng.random((p, 2, p, 2)) if trial % 2 else rng.integers(0, 3, (p, 2, p, 2)).astype(float)  # ties
        path, entered = piece_path(cost)
        assert sorted(path) == list(range(p)) and set(entered) <= {0, 1} and len(entered) == p
        assert _path_cost(cost, path, entered) == pytest.approx(_brute_force(cost), abs=1e-12)


def test_piece_path_of_shuffled_pieces_of_a_line():
    # the pieces of 0 .. 59 cut at 10, 25, 40, shuffled and some reversed; ends joined by distance: the path
    # puts them back in order (either way round)
    cuts = [(0, 10), (10, 25), (25, 40), (40, 60)]
    rng = np.random.default_rng(0)
    perm = rng.permutation(4)
    flip = [True, False, True, False]
    ends = []
    for q in perm:
        lo, hi = cuts[q]
        e = (lo, hi - 1)
        ends.append(e[::-1] if flip[q] else e)  # (low-f end, high-f end) as laid
    ends = np.array(ends, dtype=float)
    cost = np.abs(ends[:, :, None, None] - ends[None, None, :, :])
    path, entered = piece_path(cost)
    walk = []
    for c, e in zip(path, entered):
        lo, hi = ends[c] if e == 0 else ends[c][::-1]
        walk += [lo, hi]
    assert walk == sorted(walk) or walk == sorted(walk, reverse=True)
    assert _path_cost(cost, path, entered) == 3.0  # three unit gaps


def _chain(ids, reach=2):
    """Edges (each once) joining each id to the next ``reach`` along the list."""
    ids = np.asarray(ids)
    rows = np.concatenate([ids[:-s] for s in range(1, reach + 1)])
    cols = np.concatenate([ids[s:] for s in range(1, reach + 1)])
    return rows, cols


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_one_chain_in_order_splits_no_window(dtype):
    n = 600
    rows, cols = _chain(np.arange(n))
    rows, cols = rows.astype(dtype), cols.astype(dtype)
    rng = np.random.default_rng(1)
    f = np.arange(n) + rng.uniform(-1.5, 1.5, n)  # local swaps of neighbours
    m = window_size(f, rows, cols)
    assert m == 16  # 4 x the median degree 4 (8 x the median rank difference ~ 1.5 is less)
    split, windows, stray, run = split_windows(f, rows, cols, m)
    assert split == run == 0 and windows == -(-(n - m // 2) // (m // 2)) and not stray.any()
    assert strand_pieces(f, rows, cols, m, m // 4) is None


def test_two_interleaved_chains_split_every_window():
    # chains A = 0 .. 299 and B = 300 .. 599 laid at alternate values, no edge between them
    A, B = np.arange(300), np.arange(300, 600)
    ra, ca = _chain(A)
    rb, cb = _chain(B)
    rows, cols = np.r_[ra, rb], np.r_[ca, cb]
    f = np.empty(600)
    f[A], f[B] = 2 * np.arange(300), 2 * np.arange(300) + 1
    m = 40
    split, windows, stray, run = split_windows(f, rows, cols, m)
    assert split == windows == run == 29
    # in each window one of the two chains is the smaller or equal group: about half the points are strays
    assert 200 <= stray.sum() <= 400
    # one edge between them in the middle joins the groups of the two windows that hold it only
    split1, _, _, run1 = split_windows(f, np.r_[rows, 150], np.r_[cols, 450], m)
    assert split1 == windows - 2 and run1 == 14  # windows 0-13 and 16-28 left split: runs of 14 and 13


def test_nothing_to_split():
    empty = np.zeros(0, dtype=np.int64)
    assert split_windows(np.zeros(1), empty, empty, 8)[:2] == (0, 1)
    f = np.arange(5.0)
    rows, cols = _chain(np.arange(5))
    split, windows, stray, run = split_windows(f, rows, cols, 8)  # fewer points than a window
    assert (split, windows, run) == (0, 1, 0) and stray.shape == (5,)
    assert window_size(np.zeros(3), empty, empty) == 3


def test_strand_pieces_cut_a_stretch_laid_backwards_beside_another():
    # a chain 0 .. 599 in three stretches: S1 = 0 .. 299 in place, S2 = 300 .. 449 laid backwards at the values
    # of S1's upper half (held to S1's end by one edge), S3 = 450 .. 599 after S1 (held to S1's end by one edge,
    # the thin spot between S2 and S3 lost)
    S1, S2, S3 = np.arange(300), np.arange(300, 450), np.arange(450, 600)
    f = np.empty(600)
    f[S1] = np.arange(300)
    f[S2] = 299.5 - np.arange(150)
    f[S3] = 300 + np.arange(150)
    parts = [_chain(S1), _chain(S2), _chain(S3)]
    rows = np.concatenate([p[0] for p in parts] + [[299, 299]])
    cols = np.concatenate([p[1] for p in parts] + [[300, 450]])
    piece, core = strand_pieces(f, rows, cols, 24, 6)
    stretch = np.repeat([0, 1, 2], [300, 150, 150])
    # every piece lies (but for the points about a junction) in one stretch, and S2 is a piece of its own
    for c in range(piece.max() + 1):
        where = np.bincount(stretch[piece == c], minlength=3)
        assert where.max() >= 0.95 * where.sum(), (c, where)
    assert len(set(piece[S2[10:-10]])) == 1 and not np.isin(piece[S2[10:-10]], piece[S1[:100]]).any()
    assert core.mean() > 0.8


# ------------------------------------------------------------------------------------------------
# stage end to end: close arms at 2000 points, where a stretch was laid beside another arm
# ------------------------------------------------------------------------------------------------

# Measured (data seed, |tau| - floor without the reassembly): the spiral at 5 noise widths in d = 100 (seed 8:
# -0.082, the tail laid at the values of the arm inside it), in d = 20 (seed 1: -0.153) and the nested arcs in
# d = 100 (seed 7: -0.42). Within 0.01 of the floor with it.
@pytest.mark.parametrize("kind, dim, seed", [("spiral", 100, 8), ("spiral", 20, 1), ("nested_arcs", 100, 7)])
def test_stage_rejoins_a_stretch_laid_beside_another_arm(monkeypatch, kind, dim, seed):
    X, t, info = make_curve(kind, 2000, dim, noise=0.12, params={"gap": 0.6}, return_info=True, rng=seed)
    floor = noise_floor(X, t, info).agreement
    res = stage(X, rng=0)
    assert res.n_reassembled >= 1
    assert order_agreement(res.order, t) >= floor - 0.01
    assert short_circuits(X, res).split_windows <= 3
    monkeypatch.setattr(_stage, "_REASSEMBLE", False)
    off = stage(X, rng=0)
    assert off.n_reassembled == 0
    assert order_agreement(off.order, t) < floor - 0.05
    check = short_circuits(X, off)  # the diagnostic sees what the misfit does not
    assert check.split_windows >= 10 and check.stray.sum() >= 100


def test_stage_rejoins_a_random_fourier_curve_crossing_itself(monkeypatch):
    # make_curve's random Fourier curve in d = 3 at noise 0.1 (data seed 2) passes close to itself: without the
    # reassembly 0.77 below the floor, with it within 0.03 (the only make_curve kinds that moved, 3 of 180 cases
    # at noise 0 - 0.1, all of them up)
    X, t, info = make_curve("random_fourier", 2000, 3, noise=0.1, return_info=True, rng=2)
    floor = noise_floor(X, t, info).agreement
    assert order_agreement(stage(X, rng=0).order, t) >= floor - 0.03
    monkeypatch.setattr(_stage, "_REASSEMBLE", False)
    assert order_agreement(stage(X, rng=0).order, t) < floor - 0.5


def test_stage_leaves_a_curve_at_the_floor_alone(monkeypatch):
    # no window is split: the same order with and without the reassembly, nothing counted
    X, t = make_curve("spiral", 2000, 20, noise=0.02, params={"gap": 0.3}, rng=0)
    res = stage(X, rng=0)
    assert res.n_reassembled == 0 and short_circuits(X, res).split_windows == 0
    monkeypatch.setattr(_stage, "_REASSEMBLE", False)
    assert np.array_equal(stage(X, rng=0).order, res.order)


def test_short_circuits_split_windows_on_a_constructed_result():
    # two chains laid at alternate values as a stage Result: every window split, the strays are the rows of the
    # smaller group of each window
    import scipy.sparse as sp

    n = 200
    X = np.c_[np.arange(n, dtype=float), np.zeros(n)]
    rows, cols = _chain(np.arange(100), reach=8)
    rows, cols = np.r_[rows, rows + 100], np.r_[cols, cols + 100]
    G = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    G = (G + G.T).tocsr()
    f = np.r_[2 * np.arange(100), 2 * np.arange(100) + 1].astype(float)
    T = np.tile([1.0, 0.0], (n, 1))
    res = Result(graph=G, embedding=f, tangents=T, signs=np.ones(n, dtype=np.int8), inverse=np.arange(n))
    check = short_circuits(X, res)
    assert check.windows >= 2 and check.split_windows == check.windows == check.split_run
    assert check.stray.shape == (n,) and 0 < check.stray.sum() < n
