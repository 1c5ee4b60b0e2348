"""The PSRO family with exact oracles: termination, invariants, equivalences, determinism."""

import numpy as np
import pytest

from numtk.games import (KuhnPoker, colonel_blotto, exploitability, population_exploitability, psro,
                         random_game_of_skill, rock_paper_scissors)
from numtk.games._psro import PSRO_VARIANTS


@pytest.fixture(scope="module")
def kuhn():
    return KuhnPoker()


def test_rps_from_rock():
    res = psro(rock_paper_scissors(), options={"init": [0]})
    assert res.history["population_size"].tolist() == [1, 2, 3]
    np.testing.assert_allclose(res.history["pe"], [1.0, 1 / 3, 0.0], atol=1e-9)
    assert res.status == "equilibrium"
    assert sorted(res.population.tolist()) == [0, 1, 2]
    np.testing.assert_allclose(res.strategy.policy, [1 / 3] * 3, atol=1e-9)


def test_kuhn_psro_nash_reaches_an_equilibrium(kuhn):
    res = psro(kuhn, iterations=30)
    assert res.status == "equilibrium"
    assert res.history["pe"][-1] <= 1e-9
    assert res.history["population_size"][-1] <= 18          # prototype: 12 (tie-breaking dependent)
    assert exploitability(kuhn, res.strategy.policy) <= 1e-8


def test_blotto_psro_nash_reaches_zero():
    game = colonel_blotto(5, 4)
    for seed in range(3):
        res = psro(game, iterations=40, rng=seed)
        assert res.status == "equilibrium" and res.history["pe"][-1] <= 1e-9
        assert res.history["population_size"][-1] <= 15      # prototype: by 10 in all 5 seeds


@pytest.mark.parametrize("variant", PSRO_VARIANTS)
def test_every_variant_keeps_pe_non_increasing(variant, kuhn):
    game = kuhn
    res = psro(game, variant=variant, iterations=6, n_candidates=4, rng=2)
    pe = res.history["pe"]
    assert np.all(np.diff(pe) <= 1e-9) and pe.min() >= -1e-12
    sizes = res.history["population_size"]
    assert np.all(np.diff(sizes) >= 1)
    assert sizes[-1] == len(res.population)
    # PE equals the LP on the returned population.
    assert population_exploitability(game, res.population).value == pytest.approx(pe[-1], abs=1e-9)
    # No duplicate members.
    R = np.vstack(res.plans)
    assert np.unique(R.T, axis=0).shape[0] == R.shape[1]


def test_anytime_reports_pe(kuhn):
    res = psro(kuhn, variant="anytime", iterations=8)
    np.testing.assert_allclose(res.history["exploitability"], res.history["pe"], atol=1e-9)
    assert np.all(np.diff(res.history["exploitability"]) <= 1e-9)


def test_pipeline_equals_psro_with_exact_oracles(kuhn):
    a = psro(kuhn, variant="psro", iterations=8)
    b = psro(kuhn, variant="pipeline", iterations=4, options={"n_learners": 2})
    k = len(b.population)
    np.testing.assert_array_equal(a.population[:k], b.population)


def test_same_rng_same_run():
    game = random_game_of_skill(30, rng=0)
    a = psro(game, variant="global", iterations=4, n_candidates=5, rng=7)
    b = psro(game, variant="global", iterations=4, n_candidates=5, rng=7)
    np.testing.assert_array_equal(a.population, b.population)
    np.testing.assert_array_equal(a.history["pe"], b.history["pe"])


@pytest.mark.parametrize("meta_solver", ["uniform", "prd", "alpha_rank", "rm+"])
def test_meta_solvers_run(meta_solver):
    game = random_game_of_skill(25, rng=3)
    res = psro(game, meta_solver=meta_solver, iterations=5, rng=0,
               options={"meta_options": {"iterations": 2000}} if meta_solver == "prd" else None)
    assert len(res.meta_strategies) == len(res.history["pe"])
    for sigma, k in zip(res.meta_strategies, res.history["population_size"]):
        assert sigma.shape == (k,) and sigma.sum() == pytest.approx(1.0)


def test_callable_oracle_and_meta_solver(kuhn):
    """A user oracle built on the public best_response reproduces the exact oracle."""
    from numtk.games import best_response

    calls = []

    def oracle(game, population, targets, *, rng):
        calls.append(len(targets))
        R0, R1 = game.policy_to_sequence(population)
        out = []
        for w in targets:
            mix = game.sequence_to_policy(R0 @ w, R1 @ w)
            pol = best_response(game, mix, 0).policy
            pol[game.n_infosets[0]:] = best_response(game, mix, 1).policy[game.n_infosets[0]:]
            out.append(pol)
        return out

    mine = psro(kuhn, iterations=5, oracle=oracle, meta_solver=lambda G: np.full(G.shape[0], 1 / G.shape[0]))
    uniform = psro(kuhn, iterations=5, meta_solver="uniform")
    assert len(calls) >= 5 and set(calls) == {1}
    np.testing.assert_array_equal(mine.population, uniform.population)
    np.testing.assert_allclose(mine.history["pe"], uniform.history["pe"], atol=1e-12)


def test_a_callable_oracle_that_finds_nothing_new_certifies_nothing(kuhn):
    """An oracle that only returns a member already present stops the run without claiming an equilibrium: the
    exact PE of the one-policy population is positive, and the exact oracle's run from it goes on."""
    def stale(game, population, targets, *, rng):
        return [population[0].copy() for _ in targets]

    res = psro(kuhn, iterations=10, oracle=stale, rng=0)
    assert (res.status, res.success, res.n_iter) == ("no_new_response", False, 1)
    assert res.history["pe"][-1] > 0.1
    assert psro(kuhn, iterations=1, rng=0).history["n_added"][-1] == 1


def test_callback_stops_and_progress(kuhn):
    seen = []

    def callback(res):
        seen.append(res.history["population_size"][-1])
        if len(seen) == 3:
            raise StopIteration

    res = psro(kuhn, iterations=20, callback=callback, progress=True)
    assert res.status == "callback" and len(seen) == 3
    res = psro(kuhn, iterations=20, options={"max_policies": 5})
    assert res.status == "max_policies" and len(res.population) == 5


def test_validation(kuhn):
    with pytest.raises(ValueError, match="variant"):
        psro(kuhn, variant="dpp")
    with pytest.raises(ValueError, match="options"):
        psro(kuhn, options={"bogus": 1})
    with pytest.raises(ValueError, match="symmetric"):
        from numtk.games import MatrixGame
        psro(MatrixGame(np.eye(3)))
    with pytest.raises(ValueError, match="oracle"):
        psro(kuhn, oracle="rl")


def test_per_player_double_oracle():
    from numtk.games import MatrixGame, nash_equilibrium

    M = np.random.default_rng(5).uniform(-1, 1, size=(30, 20))      # not symmetric, not square
    res = psro(MatrixGame(M), populations="per_player", iterations=100, rng=0)
    assert res.status == "equilibrium" and res.history["pe"][-1] <= 1e-9
    x, y = res.strategy.policy
    lp = nash_equilibrium(MatrixGame(M))
    assert x @ M @ y == pytest.approx(lp.value, abs=1e-9)
    assert np.all(np.diff(res.history["pe"]) <= 1e-9)
    kuhn = KuhnPoker()
    res = psro(kuhn, populations="per_player", iterations=100)
    assert res.status == "equilibrium" and exploitability(kuhn, res.strategy.policy) <= 1e-8
    assert len(res.population) == 2
    with pytest.raises(ValueError, match="per_player"):
        psro(kuhn, populations="per_player", variant="global")


PSRO_FIELDS = ["population", "plans", "meta_game", "meta_strategies", "strategy", "history", "n_iter", "success",
               "status", "message", "variant", "populations"]
HISTORY_KEYS = ["population_size", "exploitability", "nash_exploitability", "pe", "n_added", "time", "candidate_pe"]


@pytest.mark.parametrize("variant", PSRO_VARIANTS)
def test_one_result_schema_whatever_the_variant(variant, kuhn):
    res = psro(kuhn, variant=variant, iterations=3, n_candidates=2, rng=0)
    assert list(res.keys()) == PSRO_FIELDS and list(res.history) == HISTORY_KEYS
    assert res.variant == variant and res.populations == "shared"
    assert res.success == (res.status == "equilibrium")
    assert (res.history["candidate_pe"] is None) == (variant != "global")
    assert list(res.strategy.keys()) == ["mixture", "policy"]


def test_per_player_has_the_same_schema_and_callback(kuhn):
    seen = []

    def callback(intermediate):
        assert list(intermediate.keys()) == PSRO_FIELDS and list(intermediate.history) == HISTORY_KEYS
        assert intermediate.status == "running" and not intermediate.success
        assert intermediate.populations == "per_player" and intermediate.n_iter == len(seen) + 1
        # the intermediate population is the one the history describes last
        assert sum(len(p) for p in intermediate.population) == intermediate.history["population_size"][-1]
        seen.append(intermediate.n_iter)
        if len(seen) == 2:
            raise StopIteration

    res = psro(kuhn, populations="per_player", iterations=20, callback=callback)
    assert list(res.keys()) == PSRO_FIELDS and list(res.history) == HISTORY_KEYS
    assert (res.status, res.success, res.n_iter, seen) == ("callback", False, 2, [1, 2])
    assert res.history["candidate_pe"] is None
    done = psro(kuhn, populations="per_player", iterations=100)
    assert (done.status, done.success) == ("equilibrium", True)


def test_shared_callback_gets_the_result_schema(kuhn):
    def callback(intermediate):
        assert list(intermediate.keys()) == PSRO_FIELDS and intermediate.status == "running"
        assert len(intermediate.population) == intermediate.history["population_size"][-1]
        raise StopIteration

    res = psro(kuhn, iterations=20, callback=callback)
    assert (res.status, res.success, res.n_iter) == ("callback", False, 1)
