"""nash_equilibrium: LP, RM+, CFR+ and double oracle against closed forms, each other and anchors."""

import numpy as np
import pytest

from numtk.games import (KuhnPoker, LeducPoker, MatrixGame, colonel_blotto, elo_game, exploitability, nash_conv,
                         nash_equilibrium, random_game_of_skill, rock_paper_scissors)
import reference.games as ref


@pytest.fixture(scope="module")
def kuhn():
    return KuhnPoker()


@pytest.fixture(scope="module")
def leduc():
    return LeducPoker()


def test_closed_forms():
    res = nash_equilibrium(rock_paper_scissors())
    np.testing.assert_allclose(res.strategies[0], [1 / 3] * 3, atol=1e-9)
    np.testing.assert_allclose(res.strategies[1], [1 / 3] * 3, atol=1e-9)
    assert res.value == pytest.approx(0.0, abs=1e-12) and res.success
    a, b, c = 0.5, 0.25, 0.05
    res = nash_equilibrium(rock_paper_scissors(bias=(a, b, c)))
    np.testing.assert_allclose(res.strategies[0], np.array([c, a, b]) / (a + b + c), atol=1e-9)
    res = nash_equilibrium(MatrixGame([[2, 1, 5], [-3, -4, -2]]))
    assert res.value == pytest.approx(1.0)
    np.testing.assert_allclose(res.strategies[0], [1, 0], atol=1e-12)
    np.testing.assert_allclose(res.strategies[1], [0, 1, 0], atol=1e-12)
    res = nash_equilibrium(MatrixGame([[1, -1], [-1, 1]]))          # matching pennies
    np.testing.assert_allclose(res.strategies[0], [0.5, 0.5], atol=1e-12)


def test_duals_equal_the_row_players_own_lp():
    M = np.random.default_rng(0).uniform(-1, 1, size=(12, 9))
    res = nash_equilibrium(MatrixGame(M))
    # Solve the transposed game for the row player directly: its column player's LP is the row's.
    res_t = nash_equilibrium(MatrixGame(-M.T))
    assert res.value == pytest.approx(-res_t.value, abs=1e-9)
    assert ref.matrix_exploitability(M, res.strategies[0], res.strategies[1]) < 1e-9
    assert ref.matrix_exploitability(M, res_t.strategies[1], res.strategies[1]) < 1e-9
    assert res.gap < 1e-9


def test_against_nashpy_vertex_enumeration():
    nashpy = pytest.importorskip("nashpy")
    rng = np.random.default_rng(1)
    for _ in range(5):
        M = rng.normal(size=(4, 5))                 # generic: non-degenerate almost surely
        ours = nash_equilibrium(MatrixGame(M))
        x, y = next(iter(nashpy.Game(M, -M).vertex_enumeration()))
        assert ours.value == pytest.approx(float(x @ M @ y), abs=1e-9)


@pytest.mark.parametrize("method", ["rm+", "cfr+", "double_oracle"])
def test_iterative_methods_agree_with_lp_on_random_games(method):
    rng = np.random.default_rng(2)
    for shape in [(30, 30), (25, 40)]:
        M = rng.uniform(-1, 1, size=shape)
        lp = nash_equilibrium(MatrixGame(M))
        # Plain RM+ can need 1e5+ iterations for 1e-6 on small games: ask the first-order methods for 1e-4.
        tol = 1e-9 if method == "double_oracle" else 1e-4
        # The double oracle's own rounds to the end (its hand-over to the LP is tested below).
        options = {"lp_switch": None} if method == "double_oracle" else None
        it = nash_equilibrium(MatrixGame(M), method=method, tol=tol, options=options)
        assert it.success, it.message
        assert it.gap <= tol + 1e-12
        # |value - LP value| <= the NashConv of the returned profile.
        assert abs(it.value - lp.value) <= it.gap + 1e-9
        assert ref.matrix_exploitability(M, *it.strategies) == pytest.approx(it.gap / 2, abs=1e-12)


def test_predictive_rm_plus():
    M = np.random.default_rng(3).uniform(-1, 1, size=(40, 40))
    res = nash_equilibrium(MatrixGame(M), method="rm+", tol=1e-6, options={"predictive": True})
    assert res.success and res.gap <= 1e-6


def test_auto_predictive_is_prm_plus_for_tight_gaps_on_small_games():
    from numtk.games._nash_equilibrium import _PRM_ENTRIES, _PRM_TOL

    game = MatrixGame(np.random.default_rng(0).standard_normal((200, 200)))
    runs = {}
    for tol in (_PRM_TOL, 1e-4):
        for pred in ("auto", True, False):
            res = nash_equilibrium(game, method="rm+", tol=tol, options={"predictive": pred})
            assert res.success and res.gap <= tol
            runs[tol, pred] = (res.n_iter, res.gap)
    assert runs[_PRM_TOL, "auto"] == runs[_PRM_TOL, True]
    assert runs[1e-4, "auto"] == runs[1e-4, False]
    # the reason for the rule: at 1e-6 PRM+ needs far fewer iterations here (7,800 against 27,890)
    assert 2 * runs[_PRM_TOL, True][0] < runs[_PRM_TOL, False][0]
    big = MatrixGame(np.random.default_rng(1).standard_normal((1, _PRM_ENTRIES + 1)))
    a = nash_equilibrium(big, method="rm+", tol=_PRM_TOL, max_iter=20)
    b = nash_equilibrium(big, method="rm+", tol=_PRM_TOL, max_iter=20, options={"predictive": False})
    assert (a.n_iter, a.gap) == (b.n_iter, b.gap)


def test_double_oracle_on_transitive_game_stops_fast():
    game = elo_game(200, rng=5)
    res = nash_equilibrium(game, method="double_oracle")
    assert res.success and res.gap <= 1e-9 and res.n_iter <= 3


def test_double_oracle_rounds_alone_equal_the_lp_on_random_games():
    rng = np.random.default_rng(7)
    for shape in [(60, 60), (45, 70)]:
        M = rng.normal(size=shape)
        lp = nash_equilibrium(MatrixGame(M))
        do = nash_equilibrium(MatrixGame(M), "double_oracle", options={"lp_switch": None})
        assert do.status in ("converged", "equilibrium") and "switched" not in do.message
        assert do.value == pytest.approx(lp.value, abs=1e-8) and do.gap <= 1e-9
        # a random game's equilibrium support is about half the strategies: many rounds
        assert do.n_iter >= min(shape) // 4


def test_double_oracle_hands_over_to_the_lp_on_a_dense_random_game():
    M = np.random.default_rng(8).uniform(-1, 1, size=(300, 300))
    lp = nash_equilibrium(MatrixGame(M))
    do = nash_equilibrium(MatrixGame(M), "double_oracle")
    assert do.success and do.status == "optimal" and do.message.startswith("switched to the LP")
    assert do.value == pytest.approx(lp.value, abs=1e-8) and do.gap <= 1e-9
    # it stops long before the ~150 rounds the support needs; history has one gap per round run
    assert 16 < do.n_iter < 60 and do.history.size == do.n_iter
    assert ref.matrix_exploitability(M, *do.strategies) == pytest.approx(do.gap / 2, abs=1e-12)
    # a larger share of the LP's cost hands over later
    game = MatrixGame(M[:120, :120])
    runs = [nash_equilibrium(game, "double_oracle", options={"lp_switch": share}) for share in (0.25, 4.0)]
    assert [r.status for r in runs] == ["optimal", "optimal"] and runs[0].n_iter < runs[1].n_iter
    assert runs[0].value == pytest.approx(nash_equilibrium(game).value, abs=1e-8)


def test_double_oracle_keeps_its_rounds_where_the_support_is_small():
    # transitive (pure equilibrium) and a spinning top: the hand-over never fires
    for game in (elo_game(300, rng=1), colonel_blotto(5, 5)):
        do = nash_equilibrium(game, "double_oracle")
        assert do.status in ("converged", "equilibrium"), do.message
        assert do.value == pytest.approx(nash_equilibrium(game).value, abs=1e-8)


def test_double_oracle_on_leduc_hands_over_to_the_sequence_form_lp(leduc):
    # Without the hand-over: 353 rounds and 55 s against 0.16 s for the LP.
    do = nash_equilibrium(leduc, "double_oracle")
    assert do.status == "optimal" and "switched" in do.message
    assert do.value == pytest.approx(-0.085606424078, abs=1e-9) and do.gap <= 1e-9
    with pytest.raises(ValueError, match="lp_switch"):
        nash_equilibrium(leduc, "double_oracle", options={"lp_switch": -1.0})
    with pytest.raises(TypeError, match="lp_switch"):
        nash_equilibrium(leduc, "double_oracle", options={"lp_switch": "never"})


def test_kuhn_and_leduc_values(kuhn, leduc):
    res = nash_equilibrium(kuhn)
    assert res.value == pytest.approx(-1 / 18, abs=1e-10) and res.gap < 1e-9
    assert exploitability(kuhn, res.strategies) == pytest.approx(res.gap / 2, abs=1e-12)
    res = nash_equilibrium(leduc)
    assert res.value == pytest.approx(-0.085606424078, abs=1e-10) and res.gap < 1e-8


def test_cfr_plus_matches_openspiel_accuracy(kuhn, leduc):
    # OpenSpiel's CFRPlusSolver: Kuhn 1000 iterations -> exploitability 8.7e-5; Leduc 100 -> 1.34e-2.
    res = nash_equilibrium(kuhn, method="cfr+", max_iter=1000, tol=0.0)
    assert res.exploitability <= 8.7e-5 and res.n_iter == 1000
    res = nash_equilibrium(leduc, method="cfr+", max_iter=100, tol=0.0)
    assert res.exploitability <= 1.34e-2
    assert nash_conv(leduc, res.strategies) == pytest.approx(res.gap, abs=1e-10)
    assert res.value == pytest.approx(-0.0856, abs=0.02)


def test_efg_double_oracle(kuhn):
    res = nash_equilibrium(kuhn, method="double_oracle")
    assert res.success and res.gap <= 1e-9
    assert res.value == pytest.approx(-1 / 18, abs=1e-9)


def test_validation(kuhn):
    with pytest.raises(ValueError, match="method"):
        nash_equilibrium(kuhn, method="simplex")
    with pytest.raises(ValueError, match="cfr"):
        nash_equilibrium(kuhn, method="rm+")
    with pytest.raises(ValueError, match="options"):
        nash_equilibrium(rock_paper_scissors(), options={"bogus": 1})
    with pytest.raises(ValueError, match="zero-sum"):
        nash_equilibrium(MatrixGame([[1, 0], [0, 1]], [[1, 0], [0, 2]]))


def test_rm_plus_float_storage_certifies_its_gap_in_double():
    from numtk.games import _games_ext

    M = np.random.default_rng(6).uniform(-1, 1, size=(120, 90))
    runs = {}
    for fs in (0, 1):
        x, y, n_iter, gap, gaps = _games_ext.rm_plus(M, tol=1e-5, float_storage=fs)
        assert gap == pytest.approx((M @ y).max() - (x @ M).min(), abs=1e-15)   # the exact NashConv
        assert gap <= 1e-5
        runs[fs] = (x, n_iter)
    # Rounding A to float32 moves products by ~1e-7: the same run to within a few checks.
    assert abs(runs[0][1] - runs[1][1]) <= 50
    np.testing.assert_allclose(runs[0][0], runs[1][0], atol=1e-4)


NASH_FIELDS = ["strategies", "plans", "value", "gap", "exploitability", "n_iter", "success", "status", "message",
               "method", "history", "time"]


@pytest.mark.parametrize("method", ["lp", "rm+", "cfr+", "double_oracle"])
def test_one_result_schema_whatever_the_method_and_game(method, kuhn):
    games = [random_game_of_skill(8, rng=0)] + ([kuhn] if method != "rm+" else [])
    for game in games:
        res = nash_equilibrium(game, method, max_iter=5000)
        assert list(res.keys()) == NASH_FIELDS
        assert res.method == method and isinstance(res.message, str) and isinstance(res.n_iter, int)
        assert res.success == (res.status in ("optimal", "converged", "equilibrium"))
        if method in ("rm+", "cfr+"):  # success iff the default tol 1e-6 was reached within max_iter
            assert res.success == (res.gap <= 1e-6) and res.status in ("converged", "max_iterations")
            assert res.success or res.n_iter == 5000
        else:
            assert res.success and res.gap <= 1e-9
        # the gap is the exact NashConv of the returned profile (best responses, not the solver's estimate)
        assert res.gap == pytest.approx(nash_conv(game, res.strategies), abs=1e-12)
        if isinstance(game, MatrixGame):
            assert res.plans is None
        else:  # the policy is read off the plans
            np.testing.assert_array_equal(game.sequence_to_policy(*res.plans), res.strategies)
        assert res.status == "optimal" if method == "lp" else res.status != "optimal"


def test_status_when_the_budget_ends_first_and_when_the_callback_stops():
    game = elo_game(40, rng=3, noise=0.3)
    res = nash_equilibrium(game, "rm+", tol=1e-12, max_iter=10)
    assert (res.status, res.success, res.n_iter) == ("max_iterations", False, 10)
    assert nash_conv(game, res.strategies) > 1e-12
    seen = []

    def stop(intermediate):
        assert set(intermediate.keys()) == {"plans", "value", "gap", "n_iter"}
        seen.append(intermediate.n_iter)
        if intermediate.n_iter == 2:
            raise StopIteration

    res = nash_equilibrium(game, "double_oracle", callback=stop)
    assert (res.status, res.success, res.n_iter, seen) == ("callback", False, 2, [1, 2])
    assert list(res.keys()) == NASH_FIELDS


def test_double_oracle_statuses_say_why_it_stopped(kuhn):
    for game in (rock_paper_scissors(), kuhn):
        res = nash_equilibrium(game, "double_oracle", tol=0.0)
        assert res.success and res.status in ("converged", "equilibrium")
        assert nash_conv(game, res.strategies) <= 1e-9
