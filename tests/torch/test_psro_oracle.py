"""Tests of numtk.torch.psro_oracle against numtk.games' exact evaluation.

The rollout chain's exact state distribution against the sequence form's ``r0' A r1`` (Kuhn, Leduc, Goofspiel(3),
a matrix game) and its Monte Carlo means; the biased-RPS contextual bandit (spec: pure strategy 0); Kuhn's RL
best response to the uniform policy within 0.03 of 11/24, evaluated exactly; the conditional oracle within 0.03 of
the exact best-response value against pure opponents; reproducibility under a fixed rng, identical results with a
process pool and a dask cluster; a candidate equal to a member leaves PE unchanged; PSRO with the RL oracle. The
slow test runs Global PSRO with the conditional oracle against PSRO-Nash with the RL oracle on Kuhn at the same
environment-step budget.
"""

import numpy as np
import pytest
import torch

from numtk.games import (Goofspiel, KuhnPoker, LeducPoker, MatrixGame, best_response, expected_payoff, exploitability,
                         population_exploitability, psro, rock_paper_scissors)
from numtk.torch._common import torch_threads
from numtk.torch.psro_oracle import ConditionalBROracle, RLBestResponseOracle, RolloutEnv

BIASED_RPS = np.array([[0.0, -0.25, 0.5], [0.25, 0.0, -0.05], [-0.5, 0.05, 0.0]])


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with torch_threads(1):
        yield


def exact_chain_value(env, learner, opponent, seat):
    """Player 0's expected payoff by propagating state probabilities through the chain (no sampling)."""
    pol = [None, None]
    pol[seat], pol[1 - seat] = env._policy_table([learner])[0] if env.matrix else learner, \
        env._policy_table([opponent])[0] if env.matrix else opponent
    prob = np.zeros(env.n_states)
    prob[0] = 1.0
    value = 0.0
    ev_state = np.repeat(np.arange(env.n_states), np.diff(env._ptr))
    within = env._cum - ev_state
    p_ev = np.diff(np.r_[0.0, within])
    p_ev[env._ptr[:-1][np.diff(env._ptr) > 0]] = within[env._ptr[:-1][np.diff(env._ptr) > 0]]
    for _ in range(64):
        if prob.sum() < 1e-15:
            break
        mass = prob[ev_state] * p_ev
        new = np.zeros(env.n_states)
        term = env._row < 0
        value += float((mass[term] * env._pay[term]).sum())
        for e in np.flatnonzero(~term & (mass > 0)):
            r = env._row[e]
            p = pol[env.row_player[r]][r]
            for a in np.flatnonzero(p > 0):
                new[env._next[e, a]] += mass[e] * p[a]
        prob = new
    return value


@pytest.mark.parametrize("game", [KuhnPoker(), LeducPoker(), Goofspiel(3)], ids=["kuhn", "leduc", "goofspiel3"])
def test_chain_is_exact(game):
    env = RolloutEnv(game)
    pa, pb = game.random_policy(rng=1), game.random_policy(rng=2)
    want = expected_payoff(game, (pa, pb))[0]
    assert exact_chain_value(env, pa, pb, 0) == pytest.approx(want, abs=1e-12)
    u = game.uniform_policy()
    assert exact_chain_value(env, u, u, 0) == pytest.approx(expected_payoff(game, u)[0], abs=1e-12)


def test_chain_matrix_game_and_monte_carlo():
    game = MatrixGame(BIASED_RPS)
    env = RolloutEnv(game)
    for a in range(3):
        for b in range(3):
            assert exact_chain_value(env, a, b, 0) == pytest.approx(BIASED_RPS[a, b])
    kuhn = KuhnPoker()
    env = RolloutEnv(kuhn)
    pa, pb = kuhn.random_policy(rng=3), kuhn.random_policy(rng=4)
    E = 200_000
    out = env.rollout([pb], pa, np.zeros(E, int), np.zeros(E, int), np.zeros(E, int), rng=5)
    se = out["payoff0"].std() / np.sqrt(E)
    assert abs(out["payoff0"].mean() - expected_payoff(kuhn, (pa, pb))[0]) < 4 * se
    assert out["steps"] >= 2 * E and out["steps"] <= 3 * E   # Kuhn: two or three moves an episode
    # the learner in seat 1 against the opponent in seat 0
    out = env.rollout([pa], pb, np.zeros(E, int), np.ones(E, int), np.zeros(E, int), rng=6)
    assert abs(out["payoff0"].mean() - expected_payoff(kuhn, (pa, pb))[0]) < 4 * out["payoff0"].std() / np.sqrt(E)
    assert set(np.unique(env.row_player[out["row"]])) == {1}


def test_biased_rps_contextual_bandit():
    # M sigma = (1/12, 1/15, -0.15) against the uniform mixture: pure strategy 0
    game = MatrixGame(BIASED_RPS)
    for seed in range(3):
        oracle = RLBestResponseOracle(hidden=(32,), steps=20000, lr=3e-3, rng=seed)
        assert oracle(game, [0, 1, 2], [np.ones(3) / 3]) == [0]


def _value_against(game, pi, opp):
    """pi's payoff against opp with random seats (exact)."""
    return 0.5 * (expected_payoff(game, (pi, opp))[0] + expected_payoff(game, (opp, pi))[1])


def _br_value(game, opp):
    return 0.5 * (best_response(game, opp, 0).value + best_response(game, opp, 1).value)


def test_kuhn_rl_best_response_to_uniform():
    game = KuhnPoker()
    u = game.uniform_policy()
    assert exploitability(game, u) == pytest.approx(11 / 24)
    oracle = RLBestResponseOracle(steps=20000, lr=1e-3, rng=0)
    (pi,) = oracle(game, u[None], [np.ones(1)])
    assert set(np.unique(pi)) <= {0.0, 1.0} and np.allclose(pi.sum(axis=1), 1.0)
    assert _value_against(game, pi, u) >= 11 / 24 - 0.03
    assert oracle.env_steps_ >= 20000


def test_conditional_oracle_pure_opponents():
    game = KuhnPoker()
    pop = np.stack([game.uniform_policy()] + [game.random_policy(rng=i, deterministic=True) for i in range(3)])
    oracle = ConditionalBROracle(latent_size=8, steps=40000, lr=1e-3, rng=0)
    targets = [np.ones(4) / 4] + [np.eye(4)[k] for k in range(4)]
    cands = oracle(game, pop, targets)
    assert len(cands) == 5
    for k in range(4):
        assert _value_against(game, cands[1 + k], pop[k]) >= _br_value(game, pop[k]) - 0.03
    # candidates() re-reads the trained network at new mixtures, without training
    again = oracle.candidates([np.eye(4)[k] for k in range(4)])
    for k in range(4):
        np.testing.assert_array_equal(again[k], cands[1 + k])
    with pytest.raises(ValueError, match="sigmas"):
        oracle.candidates([np.ones(3)])


def test_reproducible_under_fixed_rng():
    game = KuhnPoker()
    u = game.uniform_policy()
    runs = [RLBestResponseOracle(hidden=(32,), steps=3000, lr=1e-3, rng=7)(game, u[None], [np.ones(1)] * 2)
            for _ in range(2)]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    # without its own rng, the oracle follows the call's rng
    o1 = RLBestResponseOracle(hidden=(32,), steps=3000, lr=1e-3)
    o2 = RLBestResponseOracle(hidden=(32,), steps=3000, lr=1e-3)
    np.testing.assert_array_equal(o1(game, u[None], [np.ones(1)], rng=3)[0],
                                  o2(game, u[None], [np.ones(1)], rng=np.random.default_rng(3))[0])


def _pop(game):
    return np.stack([game.uniform_policy()] + [game.random_policy(rng=i, deterministic=True) for i in range(2)])


def test_workers_process_pool_identical():
    game = KuhnPoker()
    pop = _pop(game)
    targets = [np.ones(3) / 3, np.eye(3)[1], np.eye(3)[2]]
    serial = RLBestResponseOracle(hidden=(16,), steps=1500, lr=1e-3, rng=11)(game, pop, targets)
    pooled = RLBestResponseOracle(hidden=(16,), steps=1500, lr=1e-3, workers=2, rng=11)(game, pop, targets)
    for a, b in zip(serial, pooled):
        np.testing.assert_array_equal(a, b)


def test_workers_dask_identical():
    distributed = pytest.importorskip("distributed")
    game = KuhnPoker()
    pop = _pop(game)
    targets = [np.ones(3) / 3, np.eye(3)[0], np.eye(3)[1], np.eye(3)[2]]
    kw = dict(hidden=(16,), steps=1500, lr=1e-3, rng=5)
    serial_rl = RLBestResponseOracle(**kw)(game, pop, targets)
    serial_c = ConditionalBROracle(latent_size=4, shards=2, **kw)(game, pop, targets)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        dask_rl = RLBestResponseOracle(workers=client, **kw)(game, pop, targets)
        dask_c = ConditionalBROracle(latent_size=4, shards=2, workers=client, **kw)(game, pop, targets)
    for a, b in zip(serial_rl + serial_c, dask_rl + dask_c):
        np.testing.assert_array_equal(a, b)


def test_duplicate_candidate_leaves_pe_unchanged():
    game = KuhnPoker()
    pop = _pop(game)
    u = game.uniform_policy()
    (pi,) = RLBestResponseOracle(hidden=(32,), steps=4000, lr=1e-3, rng=0)(game, u[None], [np.ones(1)])
    base = population_exploitability(game, pop).value
    assert population_exploitability(game, np.concatenate([pop, pop[1:2]])).value == pytest.approx(base, abs=1e-9)
    grown = np.concatenate([pop, pi[None]])
    assert population_exploitability(game, grown).value <= base + 1e-9
    assert population_exploitability(game, np.concatenate([grown, pi[None]])).value == pytest.approx(
        population_exploitability(game, grown).value, abs=1e-9)


def test_psro_with_rl_oracle_kuhn():
    game = KuhnPoker()
    oracle = RLBestResponseOracle(hidden=(64,), steps=6000, lr=1e-3)
    res = psro(game, oracle=oracle, iterations=4, rng=0)
    pe = res.history["pe"]
    assert res.history["population_size"][0] == 1 and pe[0] == pytest.approx(11 / 24)
    assert np.all(np.diff(pe) <= 1e-9)          # PE never grows with the population
    assert pe[-1] < pe[0] - 0.1
    assert oracle.env_steps_ >= 4 * 6000
    res = psro(rock_paper_scissors(), oracle=RLBestResponseOracle(hidden=(16,), steps=3000, lr=0.01, rng=1),
               iterations=3, options={"init": [0]}, rng=0)
    assert res.history["pe"][-1] == pytest.approx(0.0, abs=1e-9)


def test_validation():
    game = KuhnPoker()
    u = game.uniform_policy()
    with pytest.raises(ValueError, match="steps"):
        RLBestResponseOracle(steps=0)
    with pytest.raises(ValueError, match="algorithm"):
        RLBestResponseOracle(algorithm="sac")
    with pytest.raises(TypeError, match="workers"):
        RLBestResponseOracle(workers="x")
    with pytest.raises(ValueError, match="hidden"):
        RLBestResponseOracle(hidden=())
    with pytest.raises(ValueError, match="simplex_eps"):
        ConditionalBROracle(latent_size=4, simplex_eps=1.5)
    with pytest.raises(ValueError, match="candidates"):
        ConditionalBROracle(latent_size=4).candidates([[1.0]])
    oracle = RLBestResponseOracle(steps=10)
    with pytest.raises(ValueError, match="targets"):
        oracle(game, u[None], [np.ones(2) / 2])
    with pytest.raises(ValueError, match="targets"):
        oracle(game, u[None], [np.array([-1.0])])
    with pytest.raises(ValueError, match="population"):
        oracle(game, u[None, :3], [np.ones(1)])
    with pytest.raises(ValueError, match="latent_size"):
        ConditionalBROracle(latent_size=1, steps=10)(game, np.stack([u, u]), [np.ones(2) / 2])
    with pytest.raises(ValueError, match="game"):
        RolloutEnv(MatrixGame(np.array([[0.0, 1.0], [2.0, 0.0]])))
    with pytest.raises(TypeError, match="game"):
        RolloutEnv("kuhn")


def _run_with_steps(game, variant, oracle, iterations, seed):
    steps = [0]
    res = psro(game, variant=variant, oracle=oracle, iterations=iterations, rng=seed,
               callback=lambda r: steps.append(oracle.env_steps_))
    return dict(zip(res.history["population_size"].tolist(), res.history["pe"].tolist())), \
        dict(zip(res.history["population_size"].tolist(), steps))


@pytest.mark.slow
def test_global_psro_conditional_beats_psro_nash_leduc():
    """The paper's claim at CPU scale (Leduc poker, 50000 environment steps per oracle call, 11 members, about 2.5
    minutes on two cores): Global PSRO with the conditional oracle has a lower exact PE than PSRO-Nash with the RL
    oracle at equal population size, for the same environment steps (one call per member in both). At 20000 steps
    a call the comparison is noisy (see the tutorial); this test does not assert it there."""
    game = LeducPoker()
    rl = RLBestResponseOracle(steps=50000, lr=1e-3)
    nash, nash_steps = _run_with_steps(game, "psro", rl, 10, 0)
    cond = ConditionalBROracle(latent_size=12, steps=50000, lr=1e-3)
    glob, glob_steps = _run_with_steps(game, "global", cond, 5, 0)
    sizes = [3, 5, 7, 9, 11]
    assert set(sizes) <= set(nash) and set(sizes) <= set(glob)
    assert glob_steps[11] <= 1.1 * nash_steps[11]          # the same budget at equal size
    assert np.mean([glob[s] for s in sizes]) < np.mean([nash[s] for s in sizes])
    assert glob[11] < nash[11]
    assert nash[11] < 0.6 * nash[1] and glob[11] < 0.6 * glob[1]   # both learn (uniform: 2.3736)
