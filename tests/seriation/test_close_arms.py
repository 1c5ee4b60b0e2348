"""Close arms: curves with a controllable gap between successive arms, the noise floor, STAGE against it, and
the short-circuit diagnostic.

The arm gap g against the noise per coordinate sigma sets the difficulty: at g = 5 sigma the noise tubes of
successive arms touch. The noise floor is the agreement of the nearest-point projection on the noiseless curve
(numtk.seriation.noise_floor). Measured configuration of the target tests: n = 3000, d = 20, data seeds 1-8,
stage with its defaults and rng=0 (deterministic).
"""

import functools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from numtk._lib import Result
from numtk.seriation import _stage, make_curve, noise_floor, order_agreement, short_circuits, stage
from numtk.seriation._curves import _base_curve

N, DIM, SEED = 3000, 20, 1


# ------------------------------------------------------------------------------------------------
# the curves
# ------------------------------------------------------------------------------------------------

def test_nested_arcs_length_has_its_closed_form():
    p = {"arms": 5, "gap": 0.4, "radius": 1.5, "angle": 2.0}
    _, _, info = make_curve("nested_arcs", 10, 3, params=p, return_info=True, rng=0)
    radii = 1.5 + 0.4 * np.arange(5)
    assert_allclose(info.length, 2.0 * radii.sum() + 4 * math.pi * 0.2, rtol=1e-12)
    assert info.kind == "nested_arcs" and info.coefficients is None


def test_nested_arcs_are_continuous_at_constant_speed_with_arms_one_gap_apart():
    X, t, info = make_curve("nested_arcs", 20_001, 2, sampling="grid", return_info=True, rng=0)
    B = X @ info.frame
    step = np.linalg.norm(np.diff(B, axis=0), axis=1)
    # constant speed: every chord of a grid step is at most, and nearly, the arc length L / (n - 1)
    assert step.max() <= info.length / 20_000 * (1 + 1e-9)
    assert step.min() >= info.length / 20_000 * (1 - 1e-3)
    assert_allclose(info.arclength, t * info.length, rtol=1e-9, atol=1e-9)
    # on the arcs (away from the turns) the radius is one of 1, 1.6, 2.2, 2.8
    r = np.linalg.norm(B, axis=1)
    angle = np.arctan2(B[:, 1], B[:, 0])
    on_arc = (angle > 0.05) & (angle < math.pi - 0.05)
    nearest = 1.0 + 0.6 * np.clip(np.round((r[on_arc] - 1.0) / 0.6), 0, 3)
    assert_allclose(r[on_arc], nearest, atol=1e-9)
    assert set(np.round((r[on_arc] - 1.0) / 0.6).astype(int)) == {0, 1, 2, 3}


def test_spiral_arms_lie_one_gap_apart_along_every_ray():
    gap, turns = 0.35, 3.0
    t = np.linspace(0.0, 1.0 - 1.0 / turns, 101)
    p = {"turns": turns, "gap": gap}
    inner = np.linalg.norm(_base_curve("spiral", t, p)[0], axis=1)
    outer = np.linalg.norm(_base_curve("spiral", t + 1.0 / turns, p)[0], axis=1)  # same ray, next arm
    assert_allclose(outer - inner, gap, rtol=1e-12)


def test_nested_arcs_bad_parameters():
    with pytest.raises(ValueError, match="params\\['gap'\\]"):
        make_curve("nested_arcs", 10, 2, params={"gap": 0.0})
    with pytest.raises(ValueError, match="params\\['angle'\\]"):
        make_curve("nested_arcs", 10, 2, params={"angle": 6.0})
    with pytest.raises(TypeError, match="params\\['arms'\\]"):
        make_curve("nested_arcs", 10, 2, params={"arms": 2.5})
    with pytest.raises(ValueError, match="`n_features` must be at least 2"):
        make_curve("nested_arcs", 10, 1)


# ------------------------------------------------------------------------------------------------
# the noise floor
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, d", [("line", 3), ("helix", 5), ("spiral", 4), ("nested_arcs", 3),
                                     ("random_fourier", 6)])
def test_noise_floor_of_noiseless_points_is_exact(kind, d):
    X, t, info = make_curve(kind, 400, d, return_info=True, rng=2)
    floor = noise_floor(X, t, info)
    assert floor.agreement >= 1 - 1e-12
    assert_allclose(floor.positions, t, atol=1e-7)
    assert floor.distance.max() < 1e-6


def test_noise_floor_projection_matches_a_dense_brute_force_search():
    X, t, info = make_curve("spiral", 300, 10, noise=0.12, params={"gap": 0.6}, return_info=True, rng=3)
    floor = noise_floor(X, t, info)
    grid = np.linspace(0.0, 1.0, 400_001)
    G = _base_curve("spiral", grid, info.params)[0]
    B = X @ info.frame
    for i in range(0, 300, 7):
        dist = np.linalg.norm(G - B[i], axis=1)
        k = int(np.argmin(dist))
        assert floor.distance[i] <= dist[k] + 1e-12  # never farther than the best grid point
        assert abs(floor.positions[i] - grid[k]) < 1e-5


def test_noise_floor_of_a_segment_matches_the_closed_form():
    # ordering by s + (noise along the tangent): E[1 - tau_a] = 4 r / sqrt(pi) - 2 r^2, r = noise / length
    r = 0.01
    values = [noise_floor(*make_curve("line", 2000, 3, noise=r, return_info=True, rng=seed)).agreement
              for seed in range(4)]
    assert abs(np.mean(values) - (1 - 4 * r / math.sqrt(math.pi) + 2 * r * r)) < 1e-3


def test_noise_floor_falls_as_the_arms_close():
    floors = [noise_floor(*make_curve("spiral", 800, 5, noise=0.6 / ratio, return_info=True, rng=4)).agreement
              for ratio in (3, 5, 10, 20)]
    assert floors == sorted(floors)
    assert floors[0] < 0.93 < 0.98 < floors[1] < floors[2] < floors[3]


def test_noise_floor_bad_arguments():
    X, t, info = make_curve("spiral", 50, 4, noise=0.01, return_info=True, rng=0)
    with pytest.raises(TypeError, match="`info`"):
        noise_floor(X, t, {"kind": "spiral"})
    with pytest.raises(ValueError, match="`X` has 5 features"):
        noise_floor(np.c_[X, X[:, :1]], t, info)
    with pytest.raises(ValueError, match="same length"):
        noise_floor(X, t[:-1], info)


# ------------------------------------------------------------------------------------------------
# STAGE against the floor (the target: within 0.01 of it while the gap is at least 5 x the noise)
# ------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _case(kind, ratio, seed=SEED, split_strands="auto", loss="auto", reassemble=True):
    """(X, t, noise floor, stage(X, rng=0)) of one configuration, computed once for all the tests below
    (``reassemble=False``: without the reassembly of pieces laid side by side, see test_strands.py)."""
    X, t, info = make_curve(kind, N, DIM, noise=0.6 / ratio, params={"gap": 0.6}, return_info=True, rng=seed)
    saved = _stage._REASSEMBLE
    _stage._REASSEMBLE = reassemble
    try:
        res = stage(X, rng=0, split_strands=split_strands, loss=loss)
    finally:
        _stage._REASSEMBLE = saved
    return X, t, noise_floor(X, t, info).agreement, res


# The target holds on every one of eight data seeds from 5 noise widths on (measured, n = 3000, d = 20); over
# stage seeds 0-3 as well, 32 of the 32 runs on each curve (worst |tau| - floor -0.0045 on the spiral, -0.0053 on
# the nested arcs). The last miss, the spiral's innermost turn reversed on data seed 4 (-0.027), was a fold of the
# embedding, mended since (test_folds.py). Before the 'auto' size stopped at a rising ratio, the synchronisation
# weighed the edges by their modes' distance and the default loss became 'auto', 27 and 18 of the 32 runs held,
# the worst -0.13 and -0.97; before the folds were mended, 29 and 32.
_SEEDS = range(1, 9)


@pytest.mark.parametrize("kind, ratio", [("spiral", 5), ("spiral", 6), ("spiral", 7), ("spiral", 8),
                                         ("spiral", 15), ("nested_arcs", 5), ("nested_arcs", 6),
                                         ("nested_arcs", 7), ("nested_arcs", 15)])
def test_stage_stays_within_001_of_the_noise_floor_on_every_seed(kind, ratio):
    for seed in _SEEDS:
        X, t, floor, res = _case(kind, ratio, seed)
        assert order_agreement(res.order, t) >= floor - 0.01, f"data seed {seed}"


@pytest.mark.parametrize("kind", ["spiral", "nested_arcs"])
def test_stage_reaches_the_floor_from_ten_noise_widths_and_the_diagnostic_is_quiet(kind):
    for ratio in (10, 20):
        X, t, floor, res = _case(kind, ratio)
        assert order_agreement(res.order, t) >= floor - 0.001
        check = short_circuits(X, res)
        assert check.glued < 0.1
    assert check.n_edges == 0 and check.glued < 0.001  # at 20 noise widths nothing is stretched


@pytest.mark.parametrize("kind", ["spiral", "nested_arcs"])
def test_the_diagnostic_flags_the_misses(kind):
    # without the strand test the arms glue at 5 noise widths in least squares (with it seed 1 holds the floor on
    # both curves): glued rows. The reassembly of pieces laid side by side is left out here (in both variants): it
    # takes the glued least-squares spiral apart into another miss (glued 0.03, 33 windows split)
    X, t, floor, res = _case(kind, 5, split_strands=False, loss="l2", reassemble=False)
    assert order_agreement(res.order, t) < floor - 0.05
    check = short_circuits(X, res)
    assert check.glued > 0.5 and check.n_edges > 0
    # the L1 refinement (loss='auto') holds the arms apart instead: the miss shows as stretched edges (measured
    # 163 and 186 on seed 1, against 5 and 1 in least squares)
    X, t, floor, res = _case(kind, 5, split_strands=False, reassemble=False)
    assert res.n_reweight > 0 and order_agreement(res.order, t) < floor - 0.05
    check = short_circuits(X, res)
    assert check.n_edges > 50 and check.glued < 0.5
    X, t, floor, res = _case(kind, 5)
    assert order_agreement(res.order, t) >= floor - 0.05
    assert short_circuits(X, res).glued < 0.5


# ------------------------------------------------------------------------------------------------
# the diagnostic itself
# ------------------------------------------------------------------------------------------------

def _healthy():
    X, t, info = make_curve("spiral", 1500, 10, noise=0.02, params={"gap": 0.6}, return_info=True, rng=5)
    return X, t, info, stage(X, rng=0)


def test_an_added_edge_between_arms_is_reported_with_its_stretch():
    X, t, info, res = _healthy()
    base = short_circuits(X, res)
    assert base.n_edges == 0 and base.glued == 0.0 and base.share == 0.0
    # join a point to the point of the next arm on its ray (one turn further, 0.6 away): its step along the
    # tangents is ~0 while the embedding puts the two a turn (~2 pi r) apart
    s = info.arclength
    i = int(np.argmin(np.abs(t - 0.4)))
    B = X @ info.frame
    ray = np.arctan2(B[:, 1], B[:, 0])
    j = int(np.argmin(np.abs(t - 0.65) + np.abs(np.angle(np.exp(1j * (ray - ray[i]))))))
    assert np.linalg.norm(X[i] - X[j]) < 1.0 and abs(s[i] - s[j]) > 10
    G = res.graph.tolil()
    G[res.inverse[i], res.inverse[j]] = G[res.inverse[j], res.inverse[i]] = 1.0
    check = short_circuits(X, Result(**{**res, "graph": G.tocsr()}))
    assert check.n_edges == 1 and set(check.edges[0]) == {i, j}
    f = res.embedding
    assert_allclose(check.stretch[0] * check.scale, abs(f[i] - f[j]), rtol=0.05)
    assert check.points.sum() == 2 and check.points[i] and check.points[j]
    assert check.share > 0.5


def test_the_diagnostic_ignores_the_embedding_sign_and_shares_duplicate_rows():
    X, t, info, res = _healthy()
    flipped = Result(**{**res, "embedding": -res.embedding})
    assert_allclose(short_circuits(X, flipped).local_misfit, short_circuits(X, res).local_misfit)
    Xd = np.vstack([X, X[:10]])
    rd = stage(Xd, rng=0)
    check = short_circuits(Xd, rd)
    assert check.local_misfit.shape == (1510,)
    assert_allclose(check.local_misfit[1500:], check.local_misfit[:10])


def test_the_diagnostic_local_misfit_matches_a_loop():
    X, t = make_curve("spiral", 300, 4, noise=0.02, rng=6)
    res = stage(X, n_neighbors=8, rng=0)
    W = sp.csr_matrix(res.graph)
    T = res.signs[:, None] * res.tangents
    f = res.embedding
    edges = [(a, b, w) for a in range(300) for b, w in zip(W.indices[W.indptr[a]:W.indptr[a + 1]],
                                                          W.data[W.indptr[a]:W.indptr[a + 1]])]
    steps = {(a, b): 0.5 * (T[a] + T[b]) @ (X[b] - X[a]) for a, b, _ in edges}
    orient = 1.0 if sum(w * (f[b] - f[a]) * steps[a, b] for a, b, w in edges) > 0 else -1.0
    num, den = np.zeros(300), np.zeros(300)
    for a, b, w in edges:  # both directions of every edge are stored: each node sums its own
        d = orient * steps[a, b]
        num[a] += w * (f[b] - f[a] - d) ** 2
        den[a] += w * d * d
    assert_allclose(short_circuits(X, res).local_misfit, np.sqrt(num / den), rtol=1e-9, atol=1e-12)


def test_the_diagnostic_bad_arguments():
    X, t, info, res = _healthy()
    with pytest.raises(TypeError, match="`result`"):
        short_circuits(X, {"graph": res.graph})
    with pytest.raises(ValueError, match="`result` does not belong to `X`"):
        short_circuits(X[:-1], res)
    with pytest.raises(ValueError, match="`factor`"):
        short_circuits(X, res, factor=0.0)


def test_the_demo_measures_the_configuration_of_these_tests():
    # `python -m numtk demo close-arms` and the tutorial's figure use this module's configuration: same floor
    # and same |tau| as the target test above at 10 noise widths (spectral seriation's eigensolver sums in an order
    # that depends on the BLAS threads, so its |tau| agrees to about 1e-6 between processes)
    from numtk.seriation import spectral_seriation
    from numtk.seriation._demo_arms import gap_table

    (row,) = gap_table(ratios=(10,), kinds=("spiral",))
    X, t, floor, res = _case("spiral", 10)
    assert row["floor"] == floor
    assert row["stage"] == pytest.approx(order_agreement(res.order, t), abs=1e-5)
    assert row["spectral"] == pytest.approx(order_agreement(spectral_seriation(X).order, t), abs=1e-5)
    assert row["stage"] >= row["floor"] - 0.001 > row["spectral"]


def test_the_recorded_umap_values_are_what_umap_learn_gives():
    # the figure draws UMAP_RECORDED where umap-learn is absent; with the recorded release they must agree
    from numtk.seriation._demo_arms import RATIOS, UMAP_RECORDED, UMAP_VERSION, gap_table

    assert set(UMAP_RECORDED) == {"spiral", "nested_arcs"}
    assert all(set(v) == set(RATIOS) and all(0 <= x <= 1 for x in v.values()) for v in UMAP_RECORDED.values())
    pytest.importorskip("umap.umap_")  # the package itself, not a directory an uninstall left behind
    import importlib.metadata

    if importlib.metadata.version("umap-learn") != UMAP_VERSION:
        pytest.skip(f"the values were recorded with umap-learn {UMAP_VERSION}")
    rows = gap_table(ratios=(7, 10), kinds=("spiral",))
    for row in rows:
        assert row["umap"] == pytest.approx(UMAP_RECORDED["spiral"][row["ratio"]], abs=0.02)


# ------------------------------------------------------------------------------------------------
# loss='l1' / 'auto': the least-absolute-deviations refinement of the solve
# ------------------------------------------------------------------------------------------------

def test_the_l1_refinement_reaches_the_l1_optimum_of_a_linear_program():
    # oracle: min sum w |f_j - f_i - d_ij| solved exactly as a linear program by HiGHS
    from scipy.optimize import linprog

    from numtk.seriation._stage import _csr_arrays, _integrate, _least_absolute

    rng = np.random.default_rng(0)
    n = 80
    s = np.sort(rng.uniform(0, 10, n))
    X = np.c_[s, np.zeros(n)]
    rows, cols = [], []
    for lag in (1, 2, 3):
        rows += list(range(n - lag))
        cols += list(range(lag, n))
    rows, cols = np.array(rows), np.array(cols)
    # four shortcut edges between the two halves: their endpoints' tangents point opposite ways, so each step
    # (the mean tangent times the displacement) is 0 while the chain puts the endpoints far apart (glue)
    X2 = X.copy()
    X2[n // 2:, 0] = 20 - X[n // 2:, 0]  # the second half runs back on y = 0.3, its tangents pointing back
    X2[n // 2:, 1] = 0.3
    tangents = np.zeros((n, 2))
    tangents[: n // 2, 0] = 1.0
    tangents[n // 2:, 0] = -1.0
    far = [(5, n - 6), (12, n - 13), (20, n - 21), (30, n - 31)]
    rows = np.r_[rows, [a for a, _ in far]]
    cols = np.r_[cols, [b for _, b in far]]
    w = rng.uniform(0.5, 1.0, rows.size)
    U = sp.csr_matrix((w, (rows, cols)), shape=(n, n))
    W = (U + U.T).tocsr()
    sol = _integrate(X2, W, tangents, solver="direct")
    l1, steps = _least_absolute(X2, W, tangents, sol, solver="direct", preconditioner="aggregation", tol=1e-10,
                                max_iter=None, tree=None, threads=1)
    assert steps > 0
    indptr, indices, wd = _csr_arrays(W)
    rows_all = np.repeat(np.arange(n), np.diff(indptr))
    upper = indices > rows_all
    i, j, we, d = rows_all[upper], indices[upper], wd[upper], sol.increments[upper]
    m = i.size
    B = sp.csr_matrix((np.r_[-np.ones(m), np.ones(m)], (np.r_[np.arange(m), np.arange(m)], np.r_[i, j])),
                      shape=(m, n))
    lp = linprog(np.r_[np.zeros(n), we, we], A_eq=sp.hstack([B, -sp.eye(m), sp.eye(m)]).tocsc(), b_eq=d,
                 bounds=[(0, 0)] + [(None, None)] * (n - 1) + [(0, None)] * (2 * m), method="highs")
    assert lp.status == 0
    cost = float(np.sum(we * np.abs(l1.embedding[j] - l1.embedding[i] - d)))
    assert cost <= lp.fun * 1.06  # smoothed L1 (eps = 0.1 x the median step), 20 steps at most: 4 % above here
    ls_cost = float(np.sum(we * np.abs(sol.embedding[j] - sol.embedding[i] - d)))
    assert ls_cost > lp.fun * 1.2  # least squares is visibly not the L1 optimum here
    # the order along the U: the L1 solution follows the chain, the least-squares one folds at the shortcuts
    assert order_agreement(np.argsort(l1.embedding), np.arange(n)) > order_agreement(np.argsort(sol.embedding),
                                                                                     np.arange(n))


@pytest.mark.parametrize("kind, ratio, seed", [("spiral", 7, 8)])
def test_loss_auto_mends_arms_that_least_squares_glues(kind, ratio, seed):
    # without the strand test (which mends these two by default)
    X, t, info = make_curve(kind, N, DIM, noise=0.6 / ratio, params={"gap": 0.6}, return_info=True, rng=seed)
    floor = noise_floor(X, t, info).agreement
    plain = stage(X, rng=0, split_strands=False, loss="l2")
    assert plain.n_reweight == 0 and plain.misfit > 0.2
    assert order_agreement(plain.order, t) < floor - 0.01
    mended = stage(X, rng=0, split_strands=False)  # loss='auto' is the default
    assert mended.n_reweight > 0
    assert order_agreement(mended.order, t) >= floor - 0.01
    forced = stage(X, rng=0, loss="l1", split_strands=False)
    assert_allclose(forced.embedding, mended.embedding)
    default = stage(X, rng=0)
    assert default.strand_edges > 0 and order_agreement(default.order, t) >= floor - 0.01


def test_loss_auto_leaves_a_well_separated_curve_alone():
    X, t, floor, res = _case("spiral", 15)
    l2 = stage(X, rng=0, loss="l2")
    assert res.n_reweight == 0 and l2.misfit < 0.2
    assert_allclose(res.embedding, l2.embedding)
    l1 = stage(X, rng=0, loss="l1")
    assert l1.n_reweight > 0
    assert order_agreement(l1.order, t) >= floor - 0.001


def test_loss_is_validated():
    X, _ = make_curve("spiral", 200, 3, noise=0.01, rng=0)
    with pytest.raises(ValueError, match="`loss` must be one of"):
        stage(X, loss="huber")
    with pytest.raises(ValueError, match="`loss`"):
        stage(X, loss=None)


def test_loss_auto_holds_the_floor_on_more_seeds():
    # measured over data seeds 1-8 without the strand test: the spiral at 7 noise widths 6 of 8 within 0.01 with
    # 'l2', 7 with 'auto' (the nested arcs at 6: 3 and 3, the same seeds)
    held = 0
    for seed in _SEEDS:
        X, t, info = make_curve("spiral", N, DIM, noise=0.6 / 7, params={"gap": 0.6}, return_info=True, rng=seed)
        res = stage(X, rng=0, loss="auto", split_strands=False)
        held += order_agreement(res.order, t) >= noise_floor(X, t, info).agreement - 0.01
    assert held >= 7, held
