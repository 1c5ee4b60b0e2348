"""Meta-solvers (spec §5) and their kernels (RM+/PRM+, PRD), against independent oracles: closed forms,
the published/OpenSpiel values of spec §10.3, pure-NumPy references of the kernels, the HiGHS LP,
nashpy, and OpenSpiel itself where it imports."""

import doctest
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.games import _games_ext, _meta_solvers
from numtk.games._lp import solve_matrix_game
from numtk.games._matrix_games import MatrixGame, rock_paper_scissors
from numtk.games._meta_solvers import META_SOLVERS, _alpha_rank_multi, _fixation, meta_strategy

BIASED = np.array([[0.0, -0.25, 0.5], [0.25, 0.0, -0.05], [-0.5, 0.05, 0.0]])
BIASED_NE = np.array([1.0, 10.0, 5.0]) / 16
PRD_BIASED = np.array([0.0547, 0.6374, 0.3080])                    # spec §10.3 (OpenSpiel defaults)
PRD_SWAPPED = (np.array([0.9581, 0.0270, 0.0149]), np.array([0.0209, 0.0158, 0.9633]))  # [B, -B^T]
TRANSITIVE = np.array([[0.0, 1.0, 1.0], [-1.0, 0.0, 1.0], [-1.0, -1.0, 0.0]])


def gap(A, x, y):
    return float((A @ y).max() - (x @ A).min())


def support_enumeration_ref(A, tol=1e-12):
    """Every equilibrium of the zero-sum game A (row player maximises x A y) with supports of equal
    size, by brute force; on a nondegenerate game these are all its equilibria."""
    from itertools import combinations

    m, n = A.shape
    found = []
    for k in range(1, min(m, n) + 1):
        for S in combinations(range(m), k):
            for T in combinations(range(n), k):
                M = A[np.ix_(S, T)]
                rhs = np.r_[np.zeros(k), 1.0]
                try:
                    # (y, v): the rows of S earn v against y; (x, u): the columns of T pay u against x
                    yv = np.linalg.solve(np.block([[M, -np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]]), rhs)
                    xv = np.linalg.solve(np.block([[M.T, -np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]]), rhs)
                except np.linalg.LinAlgError:
                    continue
                if (yv[:k] < -tol).any() or (xv[:k] < -tol).any():
                    continue
                x = np.zeros(m)
                y = np.zeros(n)
                x[list(S)] = xv[:k]
                y[list(T)] = yv[:k]
                if (A @ y).max() <= yv[k] + 1e-10 and (x @ A).min() >= xv[k] - 1e-10:
                    found.append((x, y))
    return found


# --------------------------------------------------------------------------------------------------
# pure-NumPy references of the kernels (written from the spec, independent of the C++)
# --------------------------------------------------------------------------------------------------
def rm_plus_ref(A, iterations, predictive=False, x0=None, y0=None):
    """Spec §4 RM+/PRM+: alternating (column player first), linear averaging."""
    m, n = A.shape
    x = np.full(m, 1 / m) if x0 is None else np.array(x0, float)
    y = np.full(n, 1 / n) if y0 is None else np.array(y0, float)
    Qx, Qy, Sx, Sy = np.zeros(m), np.zeros(n), np.zeros(m), np.zeros(n)

    def step(u, s, Q):
        r = u - s @ u
        Q = np.maximum(Q + r, 0.0)
        p = np.maximum(Q + r, 0.0) if predictive else Q
        return (p / p.sum() if p.sum() > 0 else np.full(len(s), 1 / len(s))), Q

    for t in range(1, iterations + 1):
        y, Qy = step(-(x @ A), y, Qy)
        x, Qx = step(A @ y, x, Qx)
        Sx += t * x
        Sy += t * y
    return Sx / Sx.sum(), Sy / Sy.sum()


def project_ref(v, gamma):
    """Euclidean projection onto {x >= gamma, sum x = 1} (sort-based, Duchi et al. 2008)."""
    k = len(v)
    z, mass = v - gamma, 1.0 - k * gamma
    u = np.sort(z)[::-1]
    css = np.cumsum(u)
    r = np.arange(1, k + 1)
    rho = r[u - (css - mass) / r > 0][-1]
    return gamma + np.maximum(z - (css[rho - 1] - mass) / rho, 0.0)


def prd_ref(A0, A1, x0, x1, iterations, dt, gamma):
    pts0, pts1 = [x0], [x1]
    for _ in range(iterations):
        u0, u1 = A0 @ x1, A1.T @ x0
        x0, x1 = (project_ref(x0 + dt * x0 * (u0 - x0 @ u0), gamma),
                  project_ref(x1 + dt * x1 * (u1 - x1 @ u1), gamma))
        pts0.append(x0)
        pts1.append(x1)
    return np.mean(pts0, axis=0), np.mean(pts1, axis=0), x0, x1


def random_simplex(rng, k):
    return rng.dirichlet(np.ones(k))


# --------------------------------------------------------------------------------------------------
# meta_strategy: 'nash' and 'uniform'
# --------------------------------------------------------------------------------------------------
def test_meta_solver_names():
    assert META_SOLVERS == ("nash", "uniform", "prd", "alpha_rank", "rm+")


class TestNash:
    def test_openspiel_lp_example(self):
        # OpenSpiel lp_solver_test: pure NE (row 0, column 1), value 1.
        A = [[2, 1, 5], [-3, -4, -2]]
        x, y = meta_strategy(A, "nash").strategies
        assert_array_equal(x, [1.0, 0.0])
        assert_array_equal(y, [0.0, 1.0, 0.0])
        assert x @ np.array(A) @ y == 1.0

    def test_biased_rps_shared(self):
        res = meta_strategy(BIASED, "nash")
        assert res.populations == "shared"
        sigma, other = res.strategies
        assert sigma.shape == (3,)
        assert_allclose(sigma, BIASED_NE, atol=1e-12)
        assert_array_equal(other, sigma)  # one mixture for both seats
        x, y = meta_strategy(BIASED, "nash", populations="per_player").strategies
        assert_allclose(x, BIASED_NE, atol=1e-12)
        assert_allclose(y, BIASED_NE, atol=1e-12)

    @pytest.mark.parametrize("seed", range(6))
    def test_generic_games_against_support_enumeration(self, seed):
        # A generic game has exactly one equilibrium (checked by the brute force itself), so both
        # oracles are defined: our own enumeration of equal-size supports and nashpy's vertex
        # enumeration. (nashpy 0.0.43's support_enumeration returns no equilibrium on seeds 3-5
        # and calls the game degenerate; its vertex enumeration finds the one equilibrium.)
        rng = np.random.default_rng(seed)
        A = rng.uniform(-1, 1, (4, 5))
        x, y = meta_strategy(A, "nash").strategies
        equilibria = support_enumeration_ref(A)
        assert len(equilibria) == 1
        (ex, ey), = equilibria
        assert_allclose(x, ex, atol=1e-9)
        assert_allclose(y, ey, atol=1e-9)
        nash = pytest.importorskip("nashpy")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = list(nash.Game(A).vertex_enumeration())
        assert len(found) == 1
        assert_allclose(x, found[0][0], atol=1e-9)
        assert_allclose(y, found[0][1], atol=1e-9)

    def test_matrix_game_input_constant_sum(self):
        A = np.array([[0.6, 0.2], [0.3, 0.9]])
        x, y = meta_strategy(MatrixGame(A, 1.0 - A)).strategies  # shifted to zero-sum
        assert gap(A, x, y) < 1e-12
        with pytest.raises(ValueError, match="requires a zero-sum game"):
            meta_strategy(MatrixGame(A, A.T), "uniform")


def test_uniform():
    assert_array_equal(meta_strategy(BIASED, "uniform").strategies[0], np.full(3, 1 / 3))
    x, y = meta_strategy(np.zeros((2, 5)), "uniform").strategies
    assert_array_equal(x, [0.5, 0.5])
    assert_array_equal(y, np.full(5, 0.2))


# --------------------------------------------------------------------------------------------------
# 'prd' and its kernel
# --------------------------------------------------------------------------------------------------
class TestPRD:
    def test_biased_rps_spec_values(self):
        sigma = meta_strategy(BIASED, "prd").strategies[0]
        assert_allclose(sigma, PRD_BIASED, atol=1e-4)
        assert np.abs(sigma - BIASED_NE).max() < 0.0125  # spec says 0.01; 0.6374 - 10/16 = 0.0124
        x, y = meta_strategy(BIASED, "prd", populations="per_player").strategies
        assert_allclose(x, PRD_BIASED, atol=1e-4)
        assert_allclose(y, PRD_BIASED, atol=1e-4)

    def test_swapped_sign_impossible(self):
        # The kernel takes two tables; fed GlobalPSRO's [B, -B^T] it reproduces the anchor bug ...
        u = np.full(3, 1 / 3)
        bad0, bad1, _, _ = _games_ext.projected_replicator_dynamics(BIASED, -BIASED.T, u, u, 100_000, 1e-3, 1e-6)
        assert_allclose(bad0, PRD_SWAPPED[0], atol=1e-4)
        assert_allclose(bad1, PRD_SWAPPED[1], atol=1e-4)
        # ... but the public API builds the tables itself: every way of passing the game gives the
        # correct dynamics, never the swapped ones.
        results = [meta_strategy(BIASED, "prd").strategies[0], meta_strategy(MatrixGame(BIASED), "prd").strategies[0],
                   *meta_strategy(BIASED, "prd", populations="per_player").strategies,
                   *meta_strategy(MatrixGame(BIASED), "prd", populations="per_player").strategies]
        for r in results:
            assert_allclose(r, PRD_BIASED, atol=1e-4)
            assert np.abs(r - PRD_SWAPPED[0]).max() > 0.5 and np.abs(r - PRD_SWAPPED[1]).max() > 0.5

    @pytest.mark.parametrize("seed, dt, gamma", [(0, 1e-2, 1e-6), (1, 0.5, 1e-3), (2, 3.0, 0.05)])
    def test_kernel_matches_numpy_reference(self, seed, dt, gamma):
        rng = np.random.default_rng(seed)
        A0, A1 = rng.uniform(-1, 1, (4, 6)), rng.uniform(-1, 1, (4, 6))  # general-sum
        x0, x1 = random_simplex(rng, 4), random_simplex(rng, 6)
        got = _games_ext.projected_replicator_dynamics(A0, A1, x0, x1, 400, dt, gamma)
        ref = prd_ref(A0, A1, x0, x1, 400, dt, gamma)
        for g, r in zip(got, ref):
            assert_allclose(g, r, rtol=0, atol=1e-12)
        assert_allclose(got[2].sum(), 1.0, atol=1e-12)
        assert got[2].min() >= gamma - 1e-15 and got[3].min() >= gamma - 1e-15

    def test_projection_kkt(self):
        # One large step forces the projection to bind; its output must satisfy the KKT conditions of
        # min |p - v|^2 over {p >= gamma, sum p = 1}: p - v = -lambda on {p > gamma}, v - gamma <= lambda else.
        rng = np.random.default_rng(9)
        A0, A1 = rng.uniform(-1, 1, (7, 5)), rng.uniform(-1, 1, (7, 5))
        x0, x1 = random_simplex(rng, 7), random_simplex(rng, 5)
        dt, gamma = 4.0, 0.02
        _, _, p0, p1 = _games_ext.projected_replicator_dynamics(A0, A1, x0, x1, 1, dt, gamma)
        for p, x, u in ((p0, x0, A0 @ x1), (p1, x1, A1.T @ x0)):
            v = x + dt * x * (u - x @ u)
            free = p > gamma + 1e-12
            assert free.any() and (~free).any()  # both kinds occur
            lam = (v - p)[free]
            assert_allclose(lam, lam[0], atol=1e-12)
            assert (v[~free] - gamma <= lam[0] + 1e-12).all()
            assert p.sum() == pytest.approx(1.0, abs=1e-12)

    def test_openspiel(self):
        prd = pytest.importorskip("open_spiel.python.algorithms.projected_replicator_dynamics")
        rng = np.random.default_rng(3)
        A0, A1 = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
        ref = prd.projected_replicator_dynamics([A0, A1], prd_iterations=2000, prd_dt=1e-2, prd_gamma=1e-3)
        got = _games_ext.projected_replicator_dynamics(A0, A1, np.full(3, 1 / 3), np.full(4, 1 / 4), 2000,
                                                       1e-2, 1e-3)
        assert_allclose(got[0], ref[0], atol=1e-12)
        assert_allclose(got[1], ref[1], atol=1e-12)

    def test_options(self):
        res = meta_strategy(BIASED, "prd", options={"iterations": 10, "dt": 1e-3, "gamma": 0.0})
        ref = prd_ref(BIASED, -BIASED, np.full(3, 1 / 3), np.full(3, 1 / 3), 10, 1e-3, 0.0)[0]
        assert_allclose(res.strategies[0], ref, atol=1e-15)
        assert (res.n_iter, res.success, res.status) == (10, True, "done")
        with pytest.raises(ValueError, match=r"`options\['gamma'\]` must be < 1 / 3"):
            meta_strategy(BIASED, "prd", options={"gamma": 0.4})
        with pytest.raises(ValueError, match=r"`options\['dt'\]`"):
            meta_strategy(BIASED, "prd", options={"dt": 0.0})
        with pytest.raises(ValueError, match=r"`options\['iterations'\]` must be >= 1"):
            meta_strategy(BIASED, "prd", options={"iterations": 0})

    def test_kernel_validation(self):
        u = np.full(3, 1 / 3)
        with pytest.raises(ValueError, match="`A1` must have the shape of `A0`"):
            _games_ext.projected_replicator_dynamics(BIASED, BIASED[:2], u, u, 1, 1e-3, 0.0)
        with pytest.raises(ValueError, match="`x1`"):
            _games_ext.projected_replicator_dynamics(BIASED, BIASED, u, u[:2], 1, 1e-3, 0.0)
        with pytest.raises(ValueError, match="`x0` must sum to 1"):
            _games_ext.projected_replicator_dynamics(BIASED, BIASED, 2 * u, u, 1, 1e-3, 0.0)
        with pytest.raises(ValueError, match="`gamma`"):
            _games_ext.projected_replicator_dynamics(BIASED, BIASED, u, u, 1, 1e-3, 0.5)


# --------------------------------------------------------------------------------------------------
# 'alpha_rank'
# --------------------------------------------------------------------------------------------------
class TestAlphaRank:
    @pytest.mark.parametrize("alpha", [0.01, 1.0, 10.0, 100.0, 1e4])
    def test_rps_uniform(self, alpha):
        assert_allclose(meta_strategy(rock_paper_scissors().payoffs[0], "alpha_rank",
                                      options={"alpha": alpha}).strategies[0], np.full(3, 1 / 3), atol=1e-12)

    @pytest.mark.parametrize("alpha, expected, atol", [
        (0.1, [0.28692, 0.57956, 0.13352], 5e-6),
        (1.0, [0.17440, 0.71704, 0.10856], 5e-6),
        (10.0, [0.28053, 0.44081, 0.27866], 5e-6),
        # "1/3 to 5 d.p." in the spec; OpenSpiel's digits are (0.3333283, 0.3333434, 0.3333283).
        (100.0, [0.3333283, 0.3333434, 0.3333283], 1e-7),
    ])
    def test_biased_rps_spec_values(self, alpha, expected, atol):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the stable rho never overflows
            sigma = meta_strategy(BIASED, "alpha_rank", options={"alpha": alpha}).strategies[0]
        assert_allclose(sigma, expected, atol=atol)

    def test_transitive(self):
        for alpha in (1.0, 10.0, 100.0, 1e6):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert_allclose(meta_strategy(TRANSITIVE, "alpha_rank", options={"alpha": alpha}).strategies[0],
                                [1, 0, 0], atol=1e-12)
        sigma = meta_strategy(TRANSITIVE, "alpha_rank", options={"inf_alpha": True, "epsilon": 0.01}).strategies[0]
        assert_allclose(sigma, [0.98020, 0.01478, 0.00503], atol=5e-6)

    def test_fixation_stable(self):
        u = np.array([-1e6, -50.0, -1.0, -1e-15, 0.0, 1e-15, 1e-3, 2.0, 800.0, 1e6])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rho = _fixation(u, 50)
        naive = np.array([(1 - np.exp(-v)) / (1 - np.exp(-50 * v)) if abs(v) >= 1e-14 else 1 / 50
                          for v in u[2:8]])
        assert_allclose(rho[2:8], naive, rtol=1e-9)
        assert rho[0] == 0.0 and rho[-1] == 1.0 and rho[-2] == 1.0
        assert_allclose(rho[1], np.exp(49 * -50.0) * np.expm1(-50.0) / np.expm1(-2500.0), rtol=1e-12)
        assert np.all(np.diff(rho) >= 0)  # increasing in u

    def test_per_player_brute_force_chain(self):
        # Oracle: the profile chain written out state by state, its stationary distribution taken as
        # the eigenvector of eigenvalue 1 (a different linear-algebra route from numtk's solve).
        G = np.random.default_rng(4).uniform(-1, 1, (3, 4))
        for alpha, m, inf_alpha, eps in ((3.0, 20, False, 0.01), (1.0, 50, True, 0.05)):
            profiles = [(i, j) for i in range(3) for j in range(4)]
            C = np.zeros((12, 12))
            for s, (i, j) in enumerate(profiles):
                for r, (a, b) in enumerate(profiles):
                    if (a != i) + (b != j) != 1:
                        continue
                    d = G[a, j] - G[i, j] if a != i else -G[i, b] + G[i, j]
                    if inf_alpha:
                        p = 0.5 if d == 0 else (1 - eps if d > 0 else eps)
                    else:
                        p = (1 - np.exp(-alpha * d)) / (1 - np.exp(-m * alpha * d))
                    C[s, r] = p / 5  # eta = 1 / ((3 - 1) + (4 - 1))
                C[s, s] = 1 - C[s].sum()
            w, v = np.linalg.eig(C.T)
            pi = np.real(v[:, np.argmin(np.abs(w - 1))])
            pi = (pi / pi.sum()).reshape(3, 4)
            s0, s1 = meta_strategy(G, "alpha_rank", options={"alpha": alpha, "m": m, "inf_alpha": inf_alpha,
                                                             "epsilon": eps}).strategies
            assert_allclose(s0, pi.sum(axis=1), atol=1e-10)
            assert_allclose(s1, pi.sum(axis=0), atol=1e-10)

    def test_single_brute_force_chain(self):
        W = np.random.default_rng(5).uniform(-1, 1, (4, 4))
        G = W - W.T
        C = np.zeros((4, 4))
        for s in range(4):
            for r in range(4):
                if r != s:
                    u = 0.7 * (G[r, s] - G[s, r])
                    C[s, r] = (1 - np.exp(-u)) / (1 - np.exp(-50 * u)) / 3
            C[s, s] = 1 - C[s].sum()
        w, v = np.linalg.eig(C.T)
        pi = np.real(v[:, np.argmin(np.abs(w - 1))])
        assert_allclose(meta_strategy(G, "alpha_rank", options={"alpha": 0.7}).strategies[0], pi / pi.sum(), atol=1e-12)

    def test_profile_limit(self):
        with pytest.raises(ValueError, match="exceeds 10000"):
            _alpha_rank_multi(np.zeros((101, 100)), 1.0, 50, False, 0.01)

    def test_openspiel(self):
        pytest.importorskip("open_spiel")
        try:
            from open_spiel.python.egt import alpharank
        except Exception as exc:  # its visualiser needs matplotlib/networkx
            pytest.skip(f"open_spiel.python.egt.alpharank does not import: {exc}")
        rng = np.random.default_rng(6)
        W = rng.uniform(-1, 1, (5, 5))
        G = W - W.T
        P = rng.uniform(-1, 1, (3, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # OpenSpiel's own overflow warnings
            for alpha in (0.3, 2.0, 5.0):
                single = alpharank.compute([G], alpha=alpha, m=50)[2]
                assert_allclose(meta_strategy(G, "alpha_rank", options={"alpha": alpha}).strategies[0], single,
                                atol=1e-9)
                multi = alpharank.compute([P, -P], alpha=alpha, m=30)[2].reshape(3, 4)  # profile (i, j)
                s0, s1 = meta_strategy(P, "alpha_rank", options={"alpha": alpha, "m": 30}).strategies
                assert_allclose(s0, multi.sum(axis=1), atol=1e-9)
                assert_allclose(s1, multi.sum(axis=0), atol=1e-9)
            inf_single = alpharank.compute([G], use_inf_alpha=True, inf_alpha_eps=0.02)[2]
            assert_allclose(meta_strategy(G, "alpha_rank", options={"inf_alpha": True, "epsilon": 0.02}).strategies[0],
                            inf_single, atol=1e-9)

    def test_single_member(self):
        assert_array_equal(meta_strategy([[0.0]], "alpha_rank").strategies[0], [1.0])
        x, y = meta_strategy([[0.5]], "alpha_rank").strategies
        assert_array_equal(x, [1.0])
        assert_array_equal(y, [1.0])

    @pytest.mark.parametrize("opts, err, match", [
        ({"m": 1}, ValueError, r"`options\['m'\]` must be >= 2"),
        ({"alpha": -1.0}, ValueError, r"`options\['alpha'\]`"),
        ({"epsilon": 0.0, "inf_alpha": True}, ValueError, r"`options\['epsilon'\]`"),
        ({"inf_alpha": 1}, TypeError, r"`options\['inf_alpha'\]` must be a bool"),
    ])
    def test_bad_options(self, opts, err, match):
        with pytest.raises(err, match=match):
            meta_strategy(BIASED, "alpha_rank", options=opts)


# --------------------------------------------------------------------------------------------------
# 'rm+' and the RM+/PRM+ kernel
# --------------------------------------------------------------------------------------------------
class TestRMPlus:
    @pytest.mark.parametrize("predictive", [False, True])
    @pytest.mark.parametrize("seed", [0, 1])
    def test_kernel_matches_numpy_reference(self, seed, predictive):
        rng = np.random.default_rng(seed)
        A = rng.uniform(-1, 1, (30, 40))
        x0, y0 = (random_simplex(rng, 30), random_simplex(rng, 40)) if seed else (None, None)
        for iterations, transpose_limit in ((1, -1), (7, -1), (300, -1), (300, 0)):  # 0: no copy of A'
            x, y, n_iter, g, hist = _games_ext.rm_plus(A, max_iter=iterations, tol=0.0, check_every=10,
                                                       predictive=predictive, x0=x0, y0=y0,
                                                       transpose_limit=transpose_limit)
            rx, ry = rm_plus_ref(A, iterations, predictive, x0, y0)
            assert n_iter == iterations and len(hist) == iterations // 10
            assert_allclose(x, rx, rtol=0, atol=1e-10)
            assert_allclose(y, ry, rtol=0, atol=1e-10)
            assert g == pytest.approx(gap(A, rx, ry), abs=1e-12)

    @pytest.mark.parametrize("seed", range(3))
    def test_brackets_lp_value(self, seed):
        A = np.random.default_rng(seed).uniform(-1, 1, (40, 60))
        _, _, v = solve_matrix_game(A)
        for predictive, tol in ((False, 1e-4), (True, 1e-5)):
            x, y, n_iter, g, hist = _games_ext.rm_plus(A, max_iter=200_000, tol=tol, check_every=10,
                                                       predictive=predictive)
            assert g <= tol and n_iter % 10 == 0 and len(hist) == n_iter // 10 and n_iter < 200_000
            assert g == pytest.approx(gap(A, x, y), abs=1e-13)  # the reported gap is exact
            assert hist[-1] == g
            assert (A @ y).max() >= v - 1e-12 and (x @ A).min() <= v + 1e-12  # LB <= v <= UB
            assert abs(x @ A @ y - v) <= g
            assert_allclose([x.sum(), y.sum()], 1.0, atol=1e-12)

    def test_running_gap_history_is_exact(self):
        A = np.random.default_rng(5).uniform(-1, 1, (20, 25))
        _, _, _, _, hist = _games_ext.rm_plus(A, max_iter=100, tol=0.0, check_every=20)
        for k, h in enumerate(hist, start=1):
            x, y = rm_plus_ref(A, 20 * k)
            assert h == pytest.approx(gap(A, x, y), abs=1e-12)

    def test_zero_iterations_and_degenerate(self):
        x, y, n_iter, g, hist = _games_ext.rm_plus(np.array([[1.0, -1.0]]), max_iter=0, tol=0.0,
                                                   check_every=1)
        assert n_iter == 0 and len(hist) == 0
        assert_array_equal(x, [1.0])
        assert_array_equal(y, [0.5, 0.5])
        assert g == pytest.approx(0.0 - (-1.0))
        x, y, n_iter, g, _ = _games_ext.rm_plus(np.zeros((3, 2)), max_iter=50, tol=0.0, check_every=5)
        assert_allclose(x, np.full(3, 1 / 3)) and g == 0.0  # no regret ever: uniform throughout

    def test_kernel_validation(self):
        A = np.zeros((2, 3))
        with pytest.raises(ValueError, match="`A` must be 2-D"):
            _games_ext.rm_plus(np.zeros(3))
        with pytest.raises(ValueError, match="`A` must not be empty"):
            _games_ext.rm_plus(np.zeros((0, 3)))
        with pytest.raises(ValueError, match="`x0` must be 1-D of length 2"):
            _games_ext.rm_plus(A, x0=np.ones(3) / 3)
        with pytest.raises(ValueError, match="`y0`"):
            _games_ext.rm_plus(A, y0=np.array([1.0, -0.5, 0.5]))
        with pytest.raises(ValueError, match="`check_every` must be >= 1"):
            _games_ext.rm_plus(A, check_every=0)
        with pytest.raises(ValueError, match="`max_iter` must be >= 0"):
            _games_ext.rm_plus(A, max_iter=-1)

    def test_any_layout_and_dtype(self):
        A = np.random.default_rng(2).uniform(-1, 1, (9, 12))
        ref = _games_ext.rm_plus(A, max_iter=50, tol=0.0)
        for variant in (np.asfortranarray(A), A.astype(np.float32).astype(np.float64),
                        np.ascontiguousarray(np.vstack([A, A])[::2])):
            got = _games_ext.rm_plus(variant, max_iter=50, tol=0.0)
            assert_allclose(got[0], rm_plus_ref(variant, 50)[0], atol=1e-12)
        assert_allclose(_games_ext.rm_plus(np.asfortranarray(A), max_iter=50, tol=0.0)[0], ref[0], atol=0)
        B = np.array([[3, -1, 0], [-2, 4, 1]])  # int64: converted
        assert_allclose(_games_ext.rm_plus(B, max_iter=40, tol=0.0)[0], rm_plus_ref(B.astype(float), 40)[0],
                        atol=1e-12)

    def test_releases_gil_thread_safe(self):
        A = np.random.default_rng(8).uniform(-1, 1, (60, 70))
        serial = _games_ext.rm_plus(A, max_iter=500, tol=0.0)[0]
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda _: _games_ext.rm_plus(A, max_iter=500, tol=0.0)[0], range(8)))
        for o in outs:
            assert_array_equal(o, serial)

    def test_meta_strategy(self):
        sigma = meta_strategy(BIASED, "rm+", options={"iterations": 3000}).strategies[0]
        assert (BIASED @ sigma).max() < 1e-3  # exploitability in the symmetric game
        assert np.abs(sigma - BIASED_NE).max() < 1e-2
        # Shared: the mean of the two averages, whose exploitability is at most gap / 2.
        x, y, _, g, _ = _games_ext.rm_plus(BIASED, max_iter=1000, tol=0.0)
        res = meta_strategy(BIASED, "rm+")
        s = res.strategies[0]
        assert_allclose(s, (x + y) / 2, atol=1e-15)
        assert (BIASED @ s).max() <= g / 2 + 1e-15
        assert (res.n_iter, res.success, res.status) == (1000, True, "done")  # tol = 0: the budget is the stop
        A = np.random.default_rng(1).uniform(-1, 1, (6, 9))
        res = meta_strategy(A, "rm+", options={"iterations": 100_000, "tol": 1e-8, "predictive": True})
        x, y = res.strategies
        assert gap(A, x, y) <= 1e-8
        assert res.success and res.status == "converged" and res.n_iter < 100_000
        # A tolerance out of reach within the budget: success False, the budget spent.
        _, _, n_iter, g, _ = _games_ext.rm_plus(A, max_iter=20, tol=1e-12, check_every=10)
        res = meta_strategy(A, "rm+", options={"iterations": 20, "tol": 1e-12})
        assert g > 1e-12 and n_iter == 20
        assert (res.n_iter, res.success, res.status) == (20, False, "max_iterations")

    def test_bad_options(self):
        with pytest.raises(ValueError, match=r"`options\['tol'\]`"):
            meta_strategy(BIASED, "rm+", options={"tol": -1.0})
        with pytest.raises(TypeError, match=r"`options\['predictive'\]` must be a bool"):
            meta_strategy(BIASED, "rm+", options={"predictive": "yes"})


# --------------------------------------------------------------------------------------------------
# callables, populations, validation
# --------------------------------------------------------------------------------------------------
class TestCallable:
    def test_shared_renormalised(self):
        res = meta_strategy(BIASED, lambda G: np.array([0.5, 0.5, 1e-7]))
        out = res.strategies[0]
        assert res.populations == "shared" and res.status == "done" and res.n_iter is None
        assert_allclose(out, np.array([0.5, 0.5, 1e-7]) / (1 + 1e-7), rtol=1e-15)
        assert out.sum() == pytest.approx(1.0, abs=1e-15)

    def test_per_player_pair_and_options(self):
        seen = {}

        def solver(G, *, weight, rng):
            seen["G"], seen["rng"] = G, rng
            return np.eye(G.shape[0])[0] * weight, np.full(G.shape[1], 1 / G.shape[1])

        A = np.arange(6.0).reshape(2, 3)
        x, y = meta_strategy(A, solver, rng=5, options={"weight": 1.0}).strategies
        assert_array_equal(x, [1.0, 0.0])
        assert_allclose(y, np.full(3, 1 / 3))
        assert_array_equal(seen["G"], A) and not seen["G"].flags.writeable
        assert isinstance(seen["rng"], np.random.Generator)

    @pytest.mark.parametrize("output, match", [
        (np.ones(2) / 2, r"must have shape \(3,\)"),
        (np.array([0.7, 0.7, -0.4]), "probability vector"),
        (np.array([0.5, 0.5, 0.1]), "probability vector"),
        (np.array([np.nan, 0.5, 0.5]), "finite"),
        ("abc", "probability vector"),
    ])
    def test_bad_output(self, output, match):
        with pytest.raises(ValueError, match=match):
            meta_strategy(BIASED, lambda G: output)

    def test_per_player_needs_pair(self):
        with pytest.raises(ValueError, match=r"pair \(sigma0, sigma1\)"):
            meta_strategy(np.zeros((2, 3)), lambda G: np.ones(2) / 2)


class TestValidation:
    def test_unknown_method(self):
        with pytest.raises(ValueError, match="`method` must be one of 'nash', 'uniform', 'prd', 'alpha_rank', 'rm\\+'"):
            meta_strategy(BIASED, "fictitious_play")
        with pytest.raises(ValueError, match="`method`"):
            meta_strategy(BIASED, 3)

    def test_unknown_option(self):
        with pytest.raises(ValueError, match="`options`: unknown key\\(s\\) 'prd_dt' for method='prd'; it accepts "
                                             "'iterations'"):
            meta_strategy(BIASED, "prd", options={"prd_dt": 0.1})
        with pytest.raises(ValueError, match="it accepts none"):
            meta_strategy(BIASED, "uniform", options={"alpha": 1.0})
        with pytest.raises(ValueError, match=r"`options\['highs_method'\]`"):
            meta_strategy(BIASED, "nash", options={"highs_method": "simplex"})
        with pytest.raises(TypeError, match="`options` must be a dict or None"):
            meta_strategy(BIASED, "prd", options=[("dt", 0.1)])

    def test_populations(self):
        with pytest.raises(ValueError, match="`populations` must be one of 'shared', 'per_player'"):
            meta_strategy(BIASED, populations="both")
        with pytest.raises(ValueError, match="must be square and antisymmetric"):
            meta_strategy(np.ones((3, 3)), populations="shared")
        with pytest.raises(ValueError, match="must be square and antisymmetric"):
            meta_strategy(np.ones((2, 3)), populations="shared")
        # Antisymmetric input is shared by default; the result says which reading was used.
        assert meta_strategy(BIASED, "uniform").populations == "shared"
        assert meta_strategy(BIASED, "uniform", populations="per_player").populations == "per_player"
        assert meta_strategy(np.ones((3, 3)), "uniform").populations == "per_player"

    @pytest.mark.parametrize("bad, err, match", [
        (np.zeros(3), ValueError, "`meta_game` must be 2-D"),
        (np.zeros((2, 3, 3)), ValueError, "`meta_game` must be 2-D"),
        (np.zeros((0, 0)), ValueError, "`meta_game` must not be empty"),
        ([[0.0, np.nan], [0.0, 0.0]], ValueError, "`meta_game`"),
        ([["a"]], TypeError, "`meta_game`"),
    ])
    def test_bad_meta_game(self, bad, err, match):
        with pytest.raises(err, match=match):
            meta_strategy(bad)

    def test_rng_validated(self):
        with pytest.raises(TypeError, match="`rng`"):
            meta_strategy(BIASED, "uniform", rng="seed")


def test_docstring_examples():
    result = doctest.testmod(_meta_solvers, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 5
