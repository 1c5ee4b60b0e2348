"""Global PSRO with exact oracles: the paper's qualitative claim as orderings, and the tie rule."""

import numpy as np
import pytest

from numtk.games import KuhnPoker, LeducPoker, colonel_blotto, psro, random_game_of_skill


def pe_at(res, size):
    """PE of the first recorded population with at least ``size`` members."""
    sizes = res.history["population_size"]
    idx = np.flatnonzero(sizes >= size)
    return res.history["pe"][idx[0]] if idx.size else res.history["pe"][-1]


def test_kuhn_global_needs_fewer_policies_than_psro_nash():
    game = KuhnPoker()
    nash = psro(game, variant="psro", iterations=40)
    glob = psro(game, variant="global", iterations=40, n_candidates=8, rng=0)
    assert nash.status == glob.status == "equilibrium"
    assert glob.history["population_size"][-1] < nash.history["population_size"][-1]


def test_blotto_global_beats_psro_nash_at_ten_policies():
    game = colonel_blotto(10, 4)
    pe_nash, pe_glob = [], []
    for seed in range(5):
        pe_nash.append(psro(game, iterations=20, rng=seed, options={"max_policies": 10}).history["pe"][-1])
        pe_glob.append(psro(game, variant="global", iterations=20, rng=seed,
                            options={"max_policies": 10}).history["pe"][-1])
    assert np.mean(pe_glob) < np.mean(pe_nash)               # prototype: .056 vs .120


def test_selection_never_adds_a_duplicate_and_prefers_nash_br_on_ties():
    game = random_game_of_skill(60, rng=4)
    res = psro(game, variant="global", iterations=8, n_candidates=6, rng=1)
    assert len(set(res.population.tolist())) == len(res.population)
    # K = 0, rollout off: candidates are BR(Nash), BR(uniform), BR(PE mixture); one is added per step.
    res = psro(game, variant="global", iterations=6, n_candidates=0, rng=1, options={"rollout": False})
    assert np.all(res.history["n_added"][1:] == 1)
    nash = psro(game, variant="psro", iterations=6, rng=1)
    # From one member every mixture is the same: the candidates collapse to the Nash-BR, as in PSRO.
    assert res.population[0] == nash.population[0] and res.population[1] == nash.population[1]
    for t, scores in enumerate(res.history["candidate_pe"]):
        assert res.history["pe"][t + 1] == pytest.approx(np.nanmin(scores), abs=1e-9)   # the minimiser is added


def test_candidate_scores_are_post_expansion_pe():
    game = KuhnPoker()
    res = psro(game, variant="global", iterations=3, n_candidates=3, rng=2, options={"rollout": False})
    for t, scores in enumerate(res.history["candidate_pe"]):
        # The chosen candidate's score is the PE of the next population (rollout off: one member added).
        assert np.nanmin(scores) == pytest.approx(res.history["pe"][t + 1], abs=1e-8)
        assert np.nanmin(scores) <= res.history["pe"][t] + 1e-9


@pytest.mark.slow
def test_leduc_global_beats_psro_nash_at_30_policies():
    game = LeducPoker()
    nash = psro(game, iterations=40, options={"max_policies": 30})
    # four candidates a step (the prototype's eight: 0.256 vs 0.698) keep the gap and halve the candidate LPs:
    # rng 0-4 gave PE 0.27-0.37 at 30 policies against PSRO-Nash's 0.677
    glob = psro(game, variant="global", iterations=40, n_candidates=4, rng=0, options={"max_policies": 30})
    assert nash.history["population_size"][-1] == glob.history["population_size"][-1] == 30
    assert glob.history["pe"][-1] < nash.history["pe"][-1]


def test_workers_give_the_same_run():
    game = KuhnPoker()
    one = psro(game, variant="global", iterations=3, n_candidates=4, rng=3)
    two = psro(game, variant="global", iterations=3, n_candidates=4, rng=3, workers=2)
    np.testing.assert_array_equal(one.population, two.population)
    np.testing.assert_allclose(one.history["pe"], two.history["pe"], atol=1e-12)
    # Any map-like callable carries the candidate LPs (a Dask client's map works the same way).
    seen = []

    def mapper(func, items):
        items = list(items)
        seen.append(len(items))
        return map(func, items)

    three = psro(game, variant="global", iterations=3, n_candidates=4, rng=3, workers=mapper)
    np.testing.assert_array_equal(one.population, three.population)
    assert seen and all(n >= 1 for n in seen)
