"""Bad input to numtk.games: refused before any work with a ValueError/TypeError naming the parameter."""

import time

import numpy as np
import pytest

from numtk.games import (Goofspiel, KuhnPoker, MatrixGame, best_response, colonel_blotto, disc_game, elo_game,
                         expected_payoff, meta_strategy, nash_conv, nash_equilibrium, population_exploitability, psro,
                         random_game_of_skill, rock_paper_scissors)

RPS = rock_paper_scissors(bias=(0.5, 0.25, 0.05))


@pytest.mark.parametrize("n", [6, 25, 10**12, 2**63])
def test_huge_goofspiel_n_cards_is_refused_at_once(n):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="`n_cards` must be <= 5"):
        Goofspiel(n)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("bad, exc", [(1, ValueError), (True, TypeError), (3.0, TypeError), ("x", TypeError)])
def test_bad_goofspiel_n_cards_is_refused(bad, exc):
    with pytest.raises(exc, match="`n_cards`"):
        Goofspiel(bad)


@pytest.mark.parametrize("make", [random_game_of_skill, disc_game, elo_game])
def test_huge_generated_game_is_refused_before_allocating(make):
    with pytest.raises(ValueError, match="`n` must be <="):
        make(10**12)


def test_elo_noise_that_overflows_is_refused():
    with pytest.raises(ValueError, match="`noise`"):
        elo_game(5, rng=0, noise=1.7e308)  # the noisy entries overflow float64
    # and moderate noise still works
    assert np.isfinite(elo_game(5, rng=0, noise=10.0).payoffs).all()


@pytest.mark.parametrize("coins, fields, name", [(10**12, 3, "coins"), (2**63, 3, "coins"), (3, 10**12, "fields"),
                                                 (3, 2**63, "fields"), (19_999, 20_000, "coins")])
def test_huge_colonel_blotto_is_refused_at_once(coins, fields, name):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=f"`{name}`"):
        colonel_blotto(coins, fields)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("func", [expected_payoff, nash_conv])
def test_complex_strategy_is_refused(func):
    x = np.full(3, 1 / 3, dtype=complex)
    with pytest.raises(TypeError, match="`policies|`policy"):
        func(RPS, x)
    with pytest.raises(TypeError, match=r"`policies\[1\]`|`policy\[1\]`"):
        func(RPS, (np.full(3, 1 / 3), x + 1e-3j))


def test_complex_payoffs_policies_and_populations_are_refused():
    with pytest.raises(TypeError, match="`payoff_row`"):
        MatrixGame(np.eye(2, dtype=complex))
    with pytest.raises(TypeError, match="`meta_game`"):
        meta_strategy(np.eye(2, dtype=complex))
    game = KuhnPoker()
    with pytest.raises(TypeError, match="`policies`"):
        expected_payoff(game, game.uniform_policy().astype(complex))
    with pytest.raises(TypeError, match="`population`"):
        population_exploitability(RPS, np.array([0, 1], dtype=complex))
    with pytest.raises(TypeError, match="`population`"):
        population_exploitability(RPS, [[0, 1], [2]])
    with pytest.raises(TypeError, match=r"`options\['x0'\]`"):
        nash_equilibrium(RPS, "rm+", options={"x0": np.full(3, 1 / 3, dtype=complex)})


@pytest.mark.parametrize("bad", [[[np.nan, 0], [0, 1]], [[np.inf, 0], [0, 1]]])
def test_non_finite_payoffs_are_refused(bad):
    with pytest.raises(ValueError, match="`payoff_row`"):
        MatrixGame(bad)
    with pytest.raises(ValueError, match="`meta_game`"):
        meta_strategy(bad)


def test_best_response_player_must_be_0_or_1():
    x = np.full(3, 1 / 3)
    for bad, exc in [(2, ValueError), (-1, ValueError), (1.0, TypeError), (True, TypeError), ("x", TypeError)]:
        with pytest.raises(exc, match="`player`"):
            best_response(RPS, x, bad)


@pytest.mark.parametrize("method", ["lp", "rm+", "cfr+", "double_oracle"])
@pytest.mark.parametrize("kw, exc, name", [({"tol": np.nan}, ValueError, "tol"), ({"tol": -1.0}, ValueError, "tol"),
                                           ({"max_iter": -5}, ValueError, "max_iter"),
                                           ({"max_iter": 10**12}, ValueError, "max_iter"),
                                           ({"max_iter": 1.5}, TypeError, "max_iter"),
                                           ({"rng": "x"}, TypeError, "rng"),
                                           ({"callback": 5}, TypeError, "callback"),
                                           ({"options": "x"}, TypeError, "options")])
def test_nash_equilibrium_validates_every_keyword_whatever_the_method(method, kw, exc, name):
    game = KuhnPoker() if method == "cfr+" else RPS
    with pytest.raises(exc, match=f"`{name}`"):
        nash_equilibrium(game, method, **kw)


def test_nash_equilibrium_issue_example_is_refused():
    with pytest.raises((ValueError, TypeError), match="`tol`"):
        nash_equilibrium(RPS, "lp", tol=float("nan"), max_iter=-5, rng="x", callback=5)


def test_nash_equilibrium_option_types_are_checked():
    with pytest.raises(TypeError, match=r"`options\['predictive'\]`"):
        nash_equilibrium(RPS, "rm+", options={"predictive": "yes"})
    with pytest.raises(ValueError, match=r"`options\['highs_method'\]`"):
        nash_equilibrium(RPS, "lp", options={"highs_method": "simplex"})
    with pytest.raises(ValueError, match=r"`options\['x0'\]`"):
        nash_equilibrium(RPS, "rm+", options={"x0": [1.0, 0.0]})


@pytest.mark.parametrize("scale", [1e-308, 1e-200, 1e200, 1e308])
def test_extreme_payoff_scales_are_solved_not_failed(scale):
    # The LP and RM+ are scale-invariant; HiGHS refuses coefficients >= 1e15 and drops tiny ones.
    base = RPS.payoffs[0]
    ne = nash_equilibrium(MatrixGame(base * scale))
    assert np.allclose(ne.strategies[0] * 16, [1, 10, 5], atol=1e-6)
    sigma = meta_strategy(base * scale, "nash").strategies[0]
    assert np.allclose(sigma * 16, [1, 10, 5], atol=1e-6)
    sigma = meta_strategy(base * scale, "rm+", options={"iterations": 2000}).strategies[0]
    assert np.isfinite(sigma).all() and np.allclose(sigma * 16, [1, 10, 5], atol=0.1)
    rm = nash_equilibrium(MatrixGame(base * scale), "rm+", max_iter=2000)
    assert np.isfinite(rm.strategies[0]).all() and np.isfinite(rm.gap)
    pe = population_exploitability(MatrixGame(base * scale), [0, 1])
    assert np.isfinite(pe.value)


def test_population_exploitability_checks_tol_and_max_iter_with_every_method():
    for kw, exc, name in [({"tol": np.nan}, ValueError, "tol"), ({"tol": "x"}, TypeError, "tol"),
                          ({"max_iter": 0}, ValueError, "max_iter"), ({"max_iter": 10**12}, ValueError, "max_iter"),
                          ({"options": {"highs_method": "x"}}, ValueError, "highs_method")]:
        with pytest.raises(exc, match=f"`{name}|{name}"):
            population_exploitability(RPS, [0, 1], **kw)


@pytest.mark.parametrize("method, kw, name", [("prd", {"iterations": 10**12}, "iterations"),
                                              ("prd", {"iterations": 2**63}, "iterations"),
                                              ("rm+", {"iterations": 10**12}, "iterations"),
                                              ("rm+", {"check_every": 10**12}, "check_every"),
                                              ("alpha_rank", {"m": 10**12}, "m")])
def test_meta_strategy_huge_counts_are_refused_at_once(method, kw, name):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"`options\['{name}'\]` must be <="):
        meta_strategy(RPS.payoffs[0], method, options=kw)
    assert time.perf_counter() - t0 < 1.0


def test_meta_strategy_rng_is_validated_for_a_callable_that_ignores_it():
    with pytest.raises(TypeError, match="`rng`"):
        meta_strategy(RPS.payoffs[0], lambda G: np.full(3, 1 / 3), rng="x")


@pytest.mark.parametrize("kw, exc, name", [({"n_candidates": 10**6}, ValueError, "n_candidates"),
                                           ({"n_candidates": 2**63}, ValueError, "n_candidates"),
                                           ({"iterations": 10**12}, ValueError, "iterations"),
                                           ({"workers": 0}, ValueError, "workers"),
                                           ({"workers": "x"}, TypeError, "workers"),
                                           ({"callback": 5}, TypeError, "callback"),
                                           ({"meta_solver": "no-such"}, ValueError, "meta_solver"),
                                           ({"options": "x"}, TypeError, "options"),
                                           ({"options": {"n_learners": 10**12}}, ValueError, "n_learners"),
                                           ({"options": {"dirichlet_alpha": -1.0}}, ValueError, "dirichlet_alpha"),
                                           ({"options": {"meta_options": 5}}, TypeError, "meta_options")])
@pytest.mark.parametrize("variant", ["psro", "global"])
def test_psro_counts_and_unused_keywords_are_refused_before_work(variant, kw, exc, name):
    kw = {"iterations": 3, **kw}
    t0 = time.perf_counter()
    with pytest.raises(exc, match=f"`{name}`|{name}"):
        psro(KuhnPoker(), variant=variant, **kw)
    assert time.perf_counter() - t0 < 1.0


def test_psro_per_player_init_ids_must_be_ints():
    game = MatrixGame([[2, 1, 5], [-3, -4, -2]])
    with pytest.raises(TypeError, match=r"`options\['init'\]`"):
        psro(game, populations="per_player", iterations=2, options={"init": (0.5, 1)})
    res = psro(game, populations="per_player", iterations=2, options={"init": (0, 1)})
    assert res.status in ("equilibrium", "max_iterations")
