"""Folds of the embedding: a tangent field turned through half a turn over a short stretch lays the curve beyond it
out backwards (an interior extremum of the embedding). stage finds them in the sublevel sets of the embedding
(_stage._fold) and flips the signs beyond them (_stage._unfold).

The oracles are constructions whose folded part is known: a V laid on a tube, a tail whose signs were flipped
against the true tangents, and two strands side by side (a jump, which is not a fold).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from numtk.seriation import _stage, make_curve, noise_floor, order_agreement, stage
from numtk.seriation._curves import _base_curve
from numtk.seriation._graph import graph_from_neighbors


def _tube(n, length=10.0, width=0.05, rng=0, offset=(0.0, 0.0)):
    """Points along a segment of the x axis in the plane, the positions s sorted, with Gaussian noise across."""
    gen = np.random.default_rng(rng)
    s = np.sort(gen.uniform(0.0, length, n))
    P = np.c_[s, width * gen.standard_normal(n)] + np.asarray(offset)
    return P, s


def _edges(P, k=10):
    """The symmetric k-NN graph of P as a CSR matrix (connected), and its edges once each (upper triangle)."""
    dist, ind = cKDTree(P).query(P, k + 1)
    W, _ = graph_from_neighbors(dist[:, 1:], ind[:, 1:])
    assert connected_components(W, directed=False)[0] == 1
    C = sp.triu(W, k=1).tocoo()
    return W, C.row.astype(np.int64), C.col.astype(np.int64)


@pytest.mark.parametrize("turn", [1.0, 2.0, 3.5, 4.5, 5.0, 8.0])
def test_a_v_on_a_tube_is_a_fold_and_the_points_beyond_it_are_its_shorter_side(turn):
    P, s = _tube(2000)
    W, rows, cols = _edges(P)
    found = _stage._fold(P, np.abs(s - turn), rows, cols)
    assert found is not None
    beyond, arm = found
    # the shorter side of the V (either side when the turn is in the middle); the bottom's points are split
    # between the sides by graph steps, so a few points at the turn may go either way (at most 1.5 %)
    sides = [np.flatnonzero(s < turn), np.flatnonzero(s > turn)]
    mismatch = [len(np.setxor1d(beyond, side)) for side in sides]
    if turn == 5.0:
        assert min(mismatch) <= 30
    else:
        assert mismatch[0 if turn < 5.0 else 1] <= 30
    assert arm == pytest.approx(min(len(side) for side in sides), rel=0.5)


def test_fold_on_small_and_empty_graphs():
    P, s = _tube(63)
    W, rows, cols = _edges(P)
    assert _stage._fold(P, np.abs(s - 5.0), rows, cols) is None  # below the smallest scale examined
    P, s = _tube(64)
    W, rows, cols = _edges(P)
    assert _stage._fold(P, np.abs(s - 5.0), rows, cols) is not None
    none = np.zeros(0, dtype=np.int64)
    assert _stage._fold(P, np.abs(s - 5.0), none, none) is None  # no edges: 48 single points, no arm


@pytest.mark.parametrize("f", [lambda s: s, lambda s: s ** 2, lambda s: np.log1p(s)])
def test_an_end_of_the_curve_is_not_a_fold(f):
    P, s = _tube(2000)
    W, rows, cols = _edges(P)
    assert _stage._fold(P, f(s), rows, cols) is None
    assert _stage._fold(P, -f(s), rows, cols) is None


def test_two_strands_side_by_side_are_a_jump_not_a_fold():
    # two parallel strands, both laid out from x = 0, the second's values 0.5 higher, joined by 20 edges between
    # their first halves of a unit (as a piece of a curve misplaced next to another arm): at the low end the band
    # holds two pieces, both meeting the bottom, but from the same side of it
    P1, s1 = _tube(1000, rng=1)
    P2, s2 = _tube(1000, rng=2, offset=(0.0, 1.0))
    P, s = np.r_[P1, P2], np.r_[s1, s2 + 0.5]
    _, r1, c1 = _edges(P1)
    _, r2, c2 = _edges(P2)
    gen = np.random.default_rng(0)
    a = gen.choice(np.flatnonzero(s1 < 0.5), 20)
    b = 1000 + gen.choice(np.flatnonzero(s2 < 0.5), 20)
    rows, cols = np.r_[r1, r2 + 1000, a], np.r_[c1, c2 + 1000, b]
    assert _stage._fold(P, s, rows, cols) is None


def test_a_second_extremum_elsewhere_is_not_a_fold_at_this_end():
    # f rises to a local maximum at s = 3, falls to 0 at s = 6 and rises to its maximum at the end s = 10: the highest
    # values lie about two places, and only the piece about the maximum (an end) counts
    P, s = _tube(3000)
    W, rows, cols = _edges(P)
    f = np.where(s < 3, s, np.where(s < 6, 6 - s, s - 6))
    assert _stage._fold(P, -f, rows, cols) is None


def _helix_with_true_tangents():
    """A noisy helix, its positions t, its k-NN graph and a resolve(signs) -> (least-squares solve,) with the true
    tangents of make_curve."""
    X, t, info = make_curve("helix", 3000, 3, noise=0.02, return_info=True, rng=3)
    T = _base_curve("helix", t, info.params)[1] @ info.frame.T
    T /= np.linalg.norm(T, axis=1, keepdims=True)
    W, _, _ = _edges(X, k=15)
    solve = dict(solver="cg", preconditioner="aggregation", tol=1e-10, max_iter=None, threads=1)

    def resolve(signs):
        return (_stage._integrate(X, W, signs[:, None] * T, **solve),)

    return X, t, W, resolve


def test_unfold_mends_a_tail_whose_signs_were_flipped():
    # a noisy helix with its true tangents: flipping the signs of the points with t < 0.3 folds the embedding at
    # t = 0.3; _unfold flips them back and the embedding orders the points again
    X, t, W, resolve = _helix_with_true_tangents()
    signs = np.where(t < 0.3, -1, 1).astype(np.int8)
    folded = resolve(signs)
    assert order_agreement(np.argsort(folded[0].embedding), t) < 0.8
    signs2, (sol,), mended = _stage._unfold(X, W, signs, folded, resolve)
    assert mended >= 1
    assert order_agreement(np.argsort(sol.embedding), t) > 0.99
    # one orientation for the whole curve, but for a few points of the turn (split between the sides by graph steps)
    odd = signs2 != np.sign(np.sum(signs2))
    assert np.all(np.abs(t[odd] - 0.3) < 0.01), t[odd]


def test_unfold_leaves_an_unfolded_embedding_alone():
    X, t, W, resolve = _helix_with_true_tangents()
    signs = np.ones(len(X), dtype=np.int8)
    state = resolve(signs)
    signs2, state2, mended = _stage._unfold(X, W, signs, state, lambda trial: pytest.fail("no trial expected"))
    assert mended == 0 and state2 is state and np.array_equal(signs2, signs)


# The two cases traced to a turned tangent field (n = 3000 or 2000 points, d = 20, arm gap 0.6): the spiral at 5
# noise widths, data seed 4 (its innermost turn was reversed, -0.027 from the floor), and the sparser spiral at
# 8 noise widths, data seed 1 (the last 30 % reversed, -0.39).
@pytest.mark.parametrize("n, ratio, seed, before", [(3000, 5, 4, -0.02), (2000, 8, 1, -0.3)])
def test_stage_mends_the_folds_of_turned_tangents(monkeypatch, n, ratio, seed, before):
    X, t, info = make_curve("spiral", n, 20, noise=0.6 / ratio, params={"gap": 0.6}, return_info=True, rng=seed)
    floor = noise_floor(X, t, info).agreement
    res = stage(X, rng=0)
    assert res.n_unfold >= 1
    assert order_agreement(res.order, t) >= floor - 0.01
    monkeypatch.setattr(_stage, "_FOLD_ROUNDS", 0)
    # the pieces' reassembly (see test_strands.py) mends these folds too: the curve beyond the turn, laid
    # backwards at the values of the stretch before it, makes windows of two strands
    alone = stage(X, rng=0)
    assert alone.n_unfold == 0 and alone.n_reassembled >= 1
    assert order_agreement(alone.order, t) >= floor - 0.01
    monkeypatch.setattr(_stage, "_REASSEMBLE", False)
    off = stage(X, rng=0)
    assert off.n_unfold == 0 and off.n_reassembled == 0
    assert order_agreement(off.order, t) - floor < before


def test_stage_leaves_a_jump_alone(monkeypatch):
    # the sparser spiral at 6 noise widths, data seed 2: a stretch of the curve misplaced next to the neighbouring
    # arm (a jump, -0.106 from the floor) makes two pieces at the high end; a first version of the fold test, which
    # neither looked at the sides the pieces meet the bottom from nor kept to the bottom's piece about the maximum,
    # flipped one of them and took |tau| to 0.30 below the floor
    X, t = make_curve("spiral", 2000, 20, noise=0.1, params={"gap": 0.6}, rng=2)
    res = stage(X, rng=0)
    assert res.n_unfold == 0
    monkeypatch.setattr(_stage, "_FOLD_ROUNDS", 0)
    assert np.array_equal(stage(X, rng=0).order, res.order)
