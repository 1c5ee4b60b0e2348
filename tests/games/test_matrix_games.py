"""MatrixGame and the generators of spec §1, against closed forms, brute force and LP/nashpy oracles."""

import doctest
import itertools
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.games import _matrix_games
from numtk.games._lp import solve_matrix_game
from numtk.games._matrix_games import (
    MatrixGame,
    as_zero_sum,
    colonel_blotto,
    disc_game,
    elo_game,
    random_game_of_skill,
    rock_paper_scissors,
)


def lp_gap(A, x, y):
    """NashConv of (x, y) in the zero-sum game A (payoff units)."""
    return float((A @ y).max() - (x @ A).min())


# --------------------------------------------------------------------------------------------------
# MatrixGame
# --------------------------------------------------------------------------------------------------
class TestMatrixGame:
    def test_zero_sum_default_and_copy(self):
        A = np.array([[2, 1, 5], [-3, -4, -2]])  # int input: converted, copied
        g = MatrixGame(A)
        A[0, 0] = 99
        assert g.payoffs.shape == (2, 2, 3) and g.payoffs.dtype == np.float64
        assert g.payoffs.flags.c_contiguous and not g.payoffs.flags.writeable
        assert_array_equal(g.payoffs[0], [[2, 1, 5], [-3, -4, -2]])
        assert_array_equal(g.payoffs[1], -g.payoffs[0])
        assert g.shape == (2, 3) and g.n_players == 2
        assert g.is_zero_sum and g.is_constant_sum and g.constant == 0.0
        assert not g.is_symmetric and g.labels is None and g.params == {}

    def test_fortran_and_strided_input(self):
        A = np.asfortranarray(np.arange(12.0).reshape(3, 4))
        g = MatrixGame(A[:, ::2])
        assert g.payoffs.flags.c_contiguous
        assert_array_equal(g.payoffs[0], A[:, ::2])

    def test_general_sum_symmetric(self):
        A = [[3, 0], [5, 1]]  # prisoner's dilemma: B = A^T
        g = MatrixGame(A, np.transpose(A), labels=["cooperate", "defect"])
        assert g.is_symmetric and not g.is_zero_sum and not g.is_constant_sum and g.constant is None
        assert g.labels == ("cooperate", "defect")
        with pytest.raises(ValueError, match="requires a zero-sum game"):
            g.zero_sum_payoff

    def test_constant_sum(self):
        A = np.array([[1.0, 0.25], [0.5, 0.75]])
        g = MatrixGame(A, 2.0 - A)
        assert g.is_constant_sum and not g.is_zero_sum
        assert g.constant == pytest.approx(2.0)
        assert_allclose(g.zero_sum_payoff, A - 1.0)
        # The equilibrium strategies of the shifted game are those of the original one.
        x, y, v = solve_matrix_game(g.zero_sum_payoff)
        assert lp_gap(A, x, y) < 1e-9 and v + 1.0 == pytest.approx(x @ A @ y)

    def test_antisymmetric_is_symmetric(self):
        g = rock_paper_scissors()
        assert g.is_symmetric and g.is_zero_sum
        assert not MatrixGame([[0, 1], [1, 0]]).is_symmetric  # zero-sum but A != -A^T

    def test_tolerance(self):
        A = np.array([[0.0, 1.0], [-1.0, 0.0]])
        assert MatrixGame(A, -A + 1e-13).is_zero_sum
        assert not MatrixGame(A, -A + 1e-9).is_zero_sum
        assert MatrixGame(A, -A + 1e-9).is_constant_sum

    def test_labels_pair_for_rectangular(self):
        g = MatrixGame(np.zeros((2, 3)), labels=(["a", "b"], ["x", "y", "z"]))
        assert g.labels == (("a", "b"), ("x", "y", "z"))
        with pytest.raises(ValueError, match="`labels`"):
            MatrixGame(np.zeros((2, 3)), labels=["a", "b"])
        with pytest.raises(ValueError, match="`labels`"):
            MatrixGame(np.zeros((3, 3)), labels=["a", "b"])
        with pytest.raises(TypeError, match="`labels` must be a sequence of str"):
            MatrixGame(np.zeros((3, 3)), labels=3)

    def test_repr(self):
        text = repr(rock_paper_scissors())
        assert text.startswith("MatrixGame(shape=(3, 3), zero-sum, symmetric")
        assert "rock" in text and "bias" in text
        assert "constant-sum (3.0)" in repr(MatrixGame([[1]], [[2]]))
        assert "general-sum" in repr(MatrixGame([[1, 0]], [[2, 5]]))

    @pytest.mark.parametrize("bad, match", [
        (np.zeros(3), "`payoff_row` must be 2-D"),
        (np.zeros((2, 2, 2)), "`payoff_row` must be 2-D"),
        (np.zeros((0, 3)), "`payoff_row` must not be empty"),
        ([[1.0, np.nan]], "`payoff_row`"),
        ([[1.0, np.inf]], "`payoff_row` must be finite"),
    ])
    def test_bad_payoff_row(self, bad, match):
        with pytest.raises(ValueError, match=match):
            MatrixGame(bad)

    def test_bad_payoff_col(self):
        with pytest.raises(ValueError, match="`payoff_col` must have the shape"):
            MatrixGame(np.zeros((2, 3)), np.zeros((3, 2)))
        with pytest.raises(ValueError, match="`payoff_col`"):
            MatrixGame(np.zeros((2, 2)), [[0, np.nan], [0, 0]])

    @pytest.mark.parametrize("bad", [[["a", "b"]], np.array([[1 + 2j]]), [[object()]]])
    def test_non_numeric(self, bad):
        with pytest.raises(TypeError, match="`payoff_row`"):
            MatrixGame(bad)


class TestAsZeroSum:
    def test_matrix_game_and_arrays(self):
        g = MatrixGame([[1, -1], [-1, 1]])
        assert np.shares_memory(as_zero_sum(g), g.payoffs) and not as_zero_sum(g).flags.writeable
        assert_array_equal(as_zero_sum([[1, 2], [3, 4]]), [[1, 2], [3, 4]])
        A = np.array([[0.3, 0.9], [0.6, 0.2]])
        assert_allclose(as_zero_sum(MatrixGame(A, 1 - A)), A - 0.5)

    def test_general_sum_raises(self):
        g = MatrixGame([[3, 0], [5, 1]], [[3, 5], [0, 1]])
        with pytest.raises(ValueError, match="`meta` is a general-sum game; .*requires a zero-sum game"):
            as_zero_sum(g, "meta")

    def test_bad_types(self):
        with pytest.raises(TypeError, match="`game`"):
            as_zero_sum(None)
        with pytest.raises(ValueError, match="`g` must be 2-D"):
            as_zero_sum([1, 2], "g")


# --------------------------------------------------------------------------------------------------
# rock-paper-scissors
# --------------------------------------------------------------------------------------------------
class TestRockPaperScissors:
    def test_matrix(self):
        assert_array_equal(rock_paper_scissors().payoffs[0], [[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
        g = rock_paper_scissors(bias=(0.5, 0.25, 0.05))  # OpenSpiel's biased RPS
        assert_allclose(g.payoffs[0], [[0, -.25, .5], [.25, 0, -.05], [-.5, .05, 0]], rtol=0, atol=0)
        assert g.params["bias"] == (0.5, 0.25, 0.05)
        assert g.labels == ("rock", "paper", "scissors")

    def test_biased_nash(self):
        x, y, v = solve_matrix_game(rock_paper_scissors(bias=(0.5, 0.25, 0.05)).payoffs[0])
        assert_allclose(x, [1 / 16, 10 / 16, 5 / 16], atol=1e-12)
        assert_allclose(y, [1 / 16, 10 / 16, 5 / 16], atol=1e-12)
        assert v == pytest.approx(0.0, abs=1e-12)

    @pytest.mark.parametrize("seed", range(5))
    def test_closed_form_nash(self, seed):
        a, b, c = np.random.default_rng(seed).uniform(0.1, 3.0, 3)
        M = rock_paper_scissors(bias=(a, b, c)).payoffs[0]
        ne = np.array([c, a, b]) / (a + b + c)
        assert_allclose(M @ ne, 0.0, atol=1e-15)  # every pure strategy earns the value 0 against it
        x, y, v = solve_matrix_game(M)
        assert_allclose(x, ne, atol=1e-9)
        assert_allclose(y, ne, atol=1e-9)
        assert v == pytest.approx(0.0, abs=1e-12)

    def test_nashpy_oracle(self):
        nash = pytest.importorskip("nashpy")
        M = rock_paper_scissors(bias=(0.5, 0.25, 0.05)).payoffs[0]
        eqs = list(nash.Game(M).support_enumeration())
        assert len(eqs) == 1
        assert_allclose(eqs[0][0], [1 / 16, 10 / 16, 5 / 16], atol=1e-12)

    @pytest.mark.parametrize("bias, err, match", [
        ((1, 1), ValueError, "`bias` must hold 3"),
        ((1, 0, 1), ValueError, "`bias` must lie in"),
        ((1, -1, 1), ValueError, "`bias`"),
        ((1, np.nan, 1), ValueError, "`bias` must be finite"),
        ("abc", TypeError, "`bias`"),
        (3, TypeError, "`bias`"),
    ])
    def test_bad_bias(self, bias, err, match):
        with pytest.raises(err, match=match):
            rock_paper_scissors(bias=bias)


# --------------------------------------------------------------------------------------------------
# Colonel Blotto
# --------------------------------------------------------------------------------------------------
def blotto_brute(coins, fields):
    """Independent oracle: allocations sorted as tuples, and the sign rule by Python loops."""
    alloc = sorted(a for a in itertools.product(range(coins + 1), repeat=fields) if sum(a) == coins)
    K = len(alloc)
    M = np.zeros((K, K))
    for i, a in enumerate(alloc):
        for j, b in enumerate(alloc):
            M[i, j] = sum((p > q) - (p < q) for p, q in zip(a, b)) / (fields - 2)
    return np.array(alloc), M


class TestColonelBlotto:
    @pytest.mark.parametrize("coins, fields, size", [
        (5, 3, 21), (5, 4, 56), (5, 5, 126), (10, 3, 66), (10, 4, 286), (10, 5, 1001)])
    def test_sizes_and_order(self, coins, fields, size):
        g = colonel_blotto(coins, fields)
        alloc = g.params["allocations"]
        assert g.shape == (size, size) == (math.comb(coins + fields - 1, fields - 1),) * 2
        assert alloc.shape == (size, fields)
        assert (alloc.sum(axis=1) == coins).all() and (alloc >= 0).all()
        assert [tuple(a) for a in alloc] == sorted(tuple(a) for a in alloc)  # lexicographic, distinct
        assert len({tuple(a) for a in alloc}) == size
        assert tuple(alloc[0]) == (0,) * (fields - 1) + (coins,)
        assert tuple(alloc[-1]) == (coins,) + (0,) * (fields - 1)
        M = g.payoffs[0]
        assert g.is_symmetric and np.abs(M).max() <= 1.0
        off = ~np.eye(size, dtype=bool)
        assert (np.abs(M[off]) * (fields - 2) <= fields - 2).all()

    @pytest.mark.parametrize("coins, fields", [(5, 3), (4, 4), (3, 5)])
    def test_sign_rule_brute_force(self, coins, fields):
        alloc, M = blotto_brute(coins, fields)
        g = colonel_blotto(coins, fields)
        assert_array_equal(g.params["allocations"], alloc)
        assert_allclose(g.payoffs[0], M, rtol=0, atol=0)

    def test_example_entries(self):
        g = colonel_blotto(5, 3)
        a = [tuple(r) for r in g.params["allocations"]]
        i, j = a.index((2, 2, 1)), a.index((0, 0, 5))
        assert g.payoffs[0][i, j] == 1.0  # wins two fields, loses one: (2 - 1) / 1
        i, j = a.index((3, 1, 1)), a.index((1, 3, 1))
        assert g.payoffs[0][i, j] == 0.0  # one win, one loss, one tie

    @pytest.mark.parametrize("coins, fields, err, match", [
        (5, 2, ValueError, "`fields` must be >= 3"),
        (0, 3, ValueError, "`coins` must be >= 1"),
        (5.0, 3, TypeError, "`coins` must be an int"),
        (5, "3", TypeError, "`fields` must be an int"),
    ])
    def test_bad_arguments(self, coins, fields, err, match):
        with pytest.raises(err, match=match):
            colonel_blotto(coins, fields)


# --------------------------------------------------------------------------------------------------
# disc, Elo, game of skill
# --------------------------------------------------------------------------------------------------
class TestDiscGame:
    def test_structure(self):
        g = disc_game(40, rng=3)
        M, u = g.payoffs[0], g.params["points"]
        assert u.shape == (40, 2) and (np.hypot(u[:, 0], u[:, 1]) <= 1.0).all()
        assert_array_equal(M, -M.T)  # exactly antisymmetric
        assert np.linalg.matrix_rank(M) == 2
        assert np.abs(M).max() <= 1.0
        Omega = np.array([[0.0, -1.0], [1.0, 0.0]])
        assert_allclose(M, u @ Omega @ u.T, atol=1e-15)
        sigma = np.random.default_rng(0).dirichlet(np.ones(40))
        assert_allclose(M @ sigma, u @ Omega @ (sigma @ u), atol=1e-14)  # M sigma = (u_i' Omega u_bar)_i

    def test_draw_order(self):
        gen = np.random.default_rng(7)
        U, V = gen.random(5), gen.random(5)
        expected = np.column_stack([np.sqrt(U) * np.cos(2 * np.pi * V), np.sqrt(U) * np.sin(2 * np.pi * V)])
        assert_allclose(disc_game(5, rng=7).params["points"], expected, rtol=1e-15)

    def test_rng_conventions(self):
        assert_array_equal(disc_game(6, rng=1).payoffs, disc_game(6, rng=np.random.default_rng(1)).payoffs)
        with pytest.raises(TypeError, match="`rng`"):
            disc_game(3, rng=np.random.RandomState(0))
        with pytest.raises(ValueError, match="`n` must be >= 1"):
            disc_game(0)

    @pytest.mark.parametrize("make", [random_game_of_skill, disc_game, elo_game])
    def test_rng_is_keyword_only(self, make):
        with pytest.raises(TypeError, match="positional argument"):
            make(4, 0)
        assert_array_equal(make(4, rng=0).payoffs, make(4, rng=np.random.default_rng(0)).payoffs)


class TestEloGame:
    def test_transitive(self):
        g = elo_game(30, rng=5)
        r, M = g.params["ratings"], g.payoffs[0]
        assert_array_equal(M, -M.T)
        assert_allclose(M, 2.0 / (1.0 + np.exp(-(r[:, None] - r[None, :]))) - 1.0, atol=1e-15)
        assert (np.sign(M) == np.sign(r[:, None] - r[None, :])).all()  # i beats j iff r_i > r_j
        # Pure NE at argmax r, value 0.
        x, y, v = solve_matrix_game(M)
        best = np.argmax(r)
        assert_allclose(x, np.eye(30)[best], atol=1e-12)
        assert_allclose(y, np.eye(30)[best], atol=1e-12)
        assert v == pytest.approx(0.0, abs=1e-12)

    def test_noise(self):
        g0, g1 = elo_game(8, rng=2), elo_game(8, rng=2, noise=0.5)
        assert_array_equal(g0.params["ratings"], g1.params["ratings"])  # ratings drawn first
        M0, M1 = g0.payoffs[0], g1.payoffs[0]
        assert_array_equal(M1, -M1.T)
        gen = np.random.default_rng(2)
        gen.standard_normal(8)
        N = gen.standard_normal((8, 8))
        assert_allclose(M1 - M0, 0.5 * (N - N.T) / np.sqrt(2), atol=1e-14)
        with pytest.raises(ValueError, match="`noise`"):
            elo_game(3, noise=-1.0)


class TestRandomGameOfSkill:
    def test_definition(self):
        g = random_game_of_skill(12, rng=11)
        gen = np.random.default_rng(11)
        W = gen.standard_normal((12, 12))
        s = gen.standard_normal(12)
        assert_array_equal(g.params["skill"], s)
        assert_allclose(g.payoffs[0], 0.5 * (W - W.T) + s[:, None] - s[None, :], atol=1e-15)
        assert g.is_symmetric and g.is_zero_sum
        assert_array_equal(g.payoffs[0], -g.payoffs[0].T)

    def test_nashpy_oracle_small(self):
        nash = pytest.importorskip("nashpy")
        M = random_game_of_skill(5, rng=4).payoffs[0]
        x, y, v = solve_matrix_game(M)
        eqs = list(nash.Game(M).support_enumeration())
        assert len(eqs) >= 1
        for sx, sy in eqs:  # every equilibrium has the value 0 of a symmetric zero-sum game
            assert sx @ M @ sy == pytest.approx(v, abs=1e-10)
        assert v == pytest.approx(0.0, abs=1e-12)


def test_docstring_examples():
    result = doctest.testmod(_matrix_games, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 10
