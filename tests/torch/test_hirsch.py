"""Tests of numtk.torch.hirsch against independent oracles.

gymnasium's environment checker; the environment's rewards, terminations and diameters on random trajectories
against numtk.algebra (Reisner's criterion always run, the BFS diameter) and networkx; its linearity on edge
ideals against Froeberg's theorem (networkx.is_chordal of the complement); the masks; seeding; the GNN's exact
equivariance (variables and generator order, float64); the options agent's spine is an induced path of the
generator graph (networkx); on n = 5, d = 2 every linear ideal any method finds has diameter <= 2 (Froeberg and
networkx as the oracles); the greedy baseline's states are linear; bad input.
"""

import itertools
import math

import networkx as nx
import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from numtk.algebra import dual_graph_diameter, generator_graph, has_linear_quotients, has_linear_resolution  # noqa
from numtk.torch._common import torch_threads  # noqa: E402
from numtk.torch._hirsch import _greedy_lq_order  # noqa: E402
from numtk.torch.hirsch import (EquivariantGNNPolicy, FlatAgent, HirschEnv, OptionsAgent, candidate_subsets,  # noqa
                                demo, greedy_search, is_induced_path, squarefree_veronese, subset_index)

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with torch_threads(1):
        yield


def bits(x):
    return [v for v in range(x.bit_length()) if (x >> v) & 1]


def nx_graph(gens, d):
    A = generator_graph(list(gens), d)
    g = nx.from_numpy_array(A.astype(int))
    return g


def froeberg_linear(edges, n):
    """Edge ideal linear <=> the complement of the graph is chordal (Froeberg)."""
    h = nx.Graph()
    h.add_nodes_from(range(n))
    h.add_edges_from(tuple(bits(e)) for e in edges)
    return nx.is_chordal(nx.complement(h))


def oracle(gens, n, d, field="Q"):
    """(diameter, linear, counterexample) from numtk.algebra with Reisner's criterion always run."""
    gens = list(gens)
    if not gens:
        return 0, False, False
    diam = dual_graph_diameter(gens, d)
    lin = diam < math.inf and has_linear_resolution(gens, n, field=field, method="reisner")
    return diam, lin, lin and diam > d


# --------------------------------------------------------------------------------------------------
# the environment
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,d,reward", [(5, 2, "sparse"), (5, 2, "shaped"), (7, 3, "sparse")])
def test_gymnasium_env_checker(n, d, reward):
    env = HirschEnv(n, d, reward=reward, max_steps=16)
    check_env(env, skip_render_check=True)
    C = math.comb(n, d)
    assert env.observation_space == gym.spaces.MultiBinary(C)
    assert env.action_space == gym.spaces.Discrete(2 * C + 1)
    assert candidate_subsets(n, d) == tuple(sum(1 << v for v in c) for c in itertools.combinations(range(n), d))


@pytest.mark.parametrize("n,d,field,reward", [(5, 2, "Q", "sparse"), (5, 2, "GF2", "shaped"), (6, 3, "Q", "shaped"),
                                              (6, 2, "GF2", "sparse")])
def test_rewards_match_the_algebra_oracle_on_random_trajectories(n, d, field, reward):
    rng = np.random.default_rng(n * 10 + d)
    env = HirschEnv(n, d, field=field, reward=reward, max_steps=25, step_cost=0.02)
    C = env.n_candidates
    subsets = candidate_subsets(n, d)
    seen_terminal = seen_linear = 0
    for episode in range(25):
        _, info = env.reset(seed=episode)
        state: list[int] = []
        for t in range(1, 26):
            mask = info["action_mask"]
            if rng.random() < 0.1:
                a = int(rng.integers(2 * C + 1))                 # maybe illegal
            elif rng.random() < 0.05 and state:
                a = env.stop_action
            else:
                legal = np.flatnonzero(mask[:2 * C])
                adds = legal[legal < C]
                a = int(rng.choice(adds if len(adds) and rng.random() < 0.75 else legal))
            legal_a = bool(mask[a])
            obs, r, term, trunc, info = env.step(a)
            assert info["illegal"] == (not legal_a)
            if legal_a and a < C:
                state.append(subsets[a])
            elif legal_a and a < 2 * C:
                state.remove(subsets[a - C])
            assert list(info["generators"]) == state
            assert obs.tolist() == [int(s in state) for s in subsets]
            diam, lin, cx = oracle(state, n, d, field)
            assert info["diameter"] == diam
            if diam < math.inf and len(state) > 1:
                assert diam == nx.diameter(nx_graph(state, d))
            stop = legal_a and a == env.stop_action
            assert term == (stop or cx)
            assert trunc == (not term and t == 25)
            if reward == "sparse":
                assert r == (1.0 if cx else 0.0)
            else:
                phi = (diam - d) if lin else -(d + 1)
                assert r == pytest.approx(-0.02 + (phi if term or trunc else 0.0), abs=1e-12)
            assert env.is_linear() == lin
            seen_linear += lin
            if term or trunc:
                seen_terminal += 1
                assert info["linear"] == lin and info["counterexample"] == cx
                break
    assert seen_terminal == 25 and seen_linear > 0


def test_linearity_of_edge_ideals_is_froeberg():
    rng = np.random.default_rng(1)
    env = HirschEnv(6, 2)
    subsets = candidate_subsets(6, 2)
    agree = linear = 0
    for _ in range(150):
        members = int(rng.integers(1, 2**15)) | int(rng.integers(1, 2**15))
        edges = [subsets[i] for i in range(15) if (members >> i) & 1]
        truth = froeberg_linear(edges, 6)
        agree += env._linear(members) == truth
        linear += truth
    assert agree == 150 and 10 < linear < 140


def test_squarefree_veronese_is_linear_with_the_johnson_diameter():
    for n, d, diam in [(5, 2, 2), (6, 3, 3), (7, 3, 3), (7, 2, 2)]:
        env = HirschEnv(n, d)
        _, info = env.reset(options={"generators": squarefree_veronese(n, d)})
        assert info["diameter"] == diam == min(d, n - d)
        assert env.is_linear() and not env.is_counterexample()


def test_masks_and_illegal_actions():
    env = HirschEnv(5, 2, reward="shaped")
    _, info = env.reset(options={"generators": [0b00011, 0b00110]})
    C = env.n_candidates
    i, j = subset_index(0b00011, 5, 2), subset_index(0b00110, 5, 2)
    mask = info["action_mask"]
    assert mask.dtype == np.int8 and mask.shape == (2 * C + 1,)
    assert set(np.flatnonzero(mask[C:2 * C])) == {i, j}
    assert set(np.flatnonzero(mask[:C])) == set(range(C)) - {i, j}
    assert mask[-1] == 1
    before = env.members
    obs, r, term, trunc, info = env.step(i)                     # add a present generator: illegal, no change
    assert info["illegal"] and env.members == before and r == pytest.approx(-0.01)
    obs, r, term, trunc, info = env.step(C + 3)                 # remove an absent one
    assert info["illegal"] and env.members == before
    env.reset()
    assert env.action_mask()[-1] == 0
    obs, r, term, trunc, info = env.step(env.stop_action)       # stop on the empty set: illegal, no termination
    assert info["illegal"] and not term
    # the options' masks
    env.reset(options={"generators": [0b00011, 0b00110]})       # path 01 - 12
    path = [i, j]
    spine = OptionsAgent._spine_mask(env, path)
    adds = {candidate_subsets(5, 2)[k] for k in np.flatnonzero(spine)}
    assert adds == {0b01100, 0b10100}                            # 23, 24: adjacent to 12 only (not to 01)
    complete = OptionsAgent._complete_mask(env)
    adds = {candidate_subsets(5, 2)[k] for k in np.flatnonzero(complete)}
    assert adds == {s for s in candidate_subsets(5, 2) if s not in (0b11, 0b110) and (s & 0b111)}
    assert not spine[C:].any() and not complete[C:].any()


def test_seeding_is_reproducible():
    a, b = HirschEnv(7, 3), HirschEnv(7, 3)
    oa, _ = a.reset(seed=5, options={"random": 6})
    ob, _ = b.reset(seed=5, options={"random": 6})
    assert np.array_equal(oa, ob) and oa.sum() == 6
    assert HirschEnv(7, 3, rng=3).reset(options={"random": 4})[1]["generators"] == \
        HirschEnv(7, 3, rng=3).reset(options={"random": 4})[1]["generators"]

    def train(seed):
        agent = OptionsAgent(EquivariantGNNPolicy(8, 1, rng=0), EquivariantGNNPolicy(8, 1, rng=1))
        return agent.train(5, 2, steps=150, rng=seed, batch_episodes=4)

    r1, r2, r3 = train(7), train(7), train(8)
    assert r1.history == r2.history and r1.linear_diameters == r2.linear_diameters
    assert r1.history["mean_return"] != r3.history["mean_return"]
    g1, g2 = greedy_search(6, 3, steps=200, rng=4), greedy_search(6, 3, steps=200, rng=4)
    assert g1.history == g2.history


def test_greedy_order_finder_gives_linear_quotients():
    rng = np.random.default_rng(2)
    subsets = candidate_subsets(6, 3)
    found = 0
    for _ in range(100):
        gens = [subsets[i] for i in rng.choice(20, size=int(rng.integers(2, 12)), replace=False)]
        order = _greedy_lq_order(gens)
        if order is not None:
            found += 1
            assert sorted(order) == sorted(gens) and has_linear_quotients(order)
            assert has_linear_resolution(gens, 6, method="reisner")
    assert found > 5


# --------------------------------------------------------------------------------------------------
# the policy
# --------------------------------------------------------------------------------------------------
def _permute(mask, perm):
    return sum(1 << perm[v] for v in bits(mask))


@pytest.mark.parametrize("n,d", [(6, 3), (7, 2)])
def test_policy_is_equivariant(n, d):
    torch.manual_seed(0)
    policy = EquivariantGNNPolicy(hidden=24, layers=3, rng=3).to(F64)
    rng = np.random.default_rng(n + d)
    subsets = candidate_subsets(n, d)
    C = len(subsets)
    states = [[subsets[i] for i in rng.choice(C, size=k, replace=False)] for k in (1, 4, 9)]
    out = policy(states, n, d)
    for _ in range(3):
        perm = rng.permutation(n)
        pstates = [[_permute(g, perm) for g in s] for s in states]
        pout = policy(pstates, n, d)
        # candidate U's action in the original is candidate perm(U)'s in the permuted state
        where = [subset_index(_permute(s, perm), n, d) for s in subsets]
        for k in range(len(states)):
            assert torch.allclose(pout.logits[k, where], out.logits[k, :C], atol=1e-10, rtol=0)
            rem_p, rem = pout.logits[k, [C + w for w in where]], out.logits[k, C:2 * C]
            assert torch.equal(torch.isinf(rem_p), torch.isinf(rem))
            fin = torch.isfinite(rem)
            assert torch.allclose(rem_p[fin], rem[fin], atol=1e-10, rtol=0)
        assert torch.allclose(pout.logits[:, -1], out.logits[:, -1], atol=1e-10, rtol=0)
        assert torch.allclose(pout.value, out.value, atol=1e-10, rtol=0)
    # permuting the order of the generators: remove logits permute, the environment-layout logits do not change
    order = rng.permutation(len(states[2]))
    shuffled = [states[0], states[1], [states[2][i] for i in order]]
    sout = policy(shuffled, n, d)
    assert torch.equal(torch.isinf(sout.logits), torch.isinf(out.logits))
    fin = torch.isfinite(out.logits)
    assert torch.allclose(sout.logits[fin], out.logits[fin], atol=1e-10, rtol=0)
    assert torch.allclose(sout.remove[2, :9], out.remove[2, :9][order], atol=1e-10, rtol=0)
    # the logits are not trivially constant
    assert out.logits[2, :C].std() > 1e-6


def test_policy_logits_follow_the_state():
    policy = EquivariantGNNPolicy(hidden=16, layers=2, rng=0)
    out = policy([[], [0b00111]], 5, 3)
    C = 10
    assert torch.isinf(out.logits[0, C:2 * C]).all() and torch.isfinite(out.logits[0, :C]).all()
    assert torch.isfinite(out.logits[1, C + subset_index(0b00111, 5, 3)])
    assert out.remove.shape == (2, 1) and torch.isinf(out.remove[0, 0])
    out.value.sum().backward()                                  # differentiable
    assert any(p.grad is not None for p in policy.parameters())


# --------------------------------------------------------------------------------------------------
# the agents
# --------------------------------------------------------------------------------------------------
def test_options_agent_spine_is_an_induced_path():
    agent = OptionsAgent(EquivariantGNNPolicy(16, 2, rng=0), EquivariantGNNPolicy(16, 2, rng=1))
    for n, d in [(7, 3), (6, 2)]:
        env = HirschEnv(n, d, reward="shaped")
        lengths = []
        for seed in range(12):
            ep = agent.run_episode(env, rng=seed)
            spine = list(ep.spine)
            assert 1 <= len(spine) <= ep.spine_length
            assert is_induced_path(spine, d)
            g = nx_graph(spine, d)
            if len(spine) > 1:
                assert nx.is_isomorphic(g, nx.path_graph(len(spine)))
                assert all(g.has_edge(i, i + 1) for i in range(len(spine) - 1))
            assert list(ep.generators[:len(spine)]) == spine        # the spine comes first, then the completion
            if ep.linear:
                assert ep.diameter <= d and has_linear_resolution(list(ep.generators), n, method="reisner")
            lengths.append(len(spine))
        assert max(lengths) >= 3
    fixed = OptionsAgent(EquivariantGNNPolicy(16, 2, rng=0), EquivariantGNNPolicy(16, 2, rng=0), spine_length=2)
    assert fixed.run_episode(HirschEnv(7, 3), rng=0).spine_length == 2
    assert not is_induced_path([0b0011, 0b0110, 0b0101], 2) and not is_induced_path([0b0011, 0b1100], 2)


def test_froeberg_bound_holds_for_everything_found_on_n5_d2():
    n, d = 5, 2
    agent = OptionsAgent(EquivariantGNNPolicy(16, 2, rng=0), EquivariantGNNPolicy(16, 2, rng=1))
    results = {"options": agent.train(n, d, steps=800, rng=0, batch_episodes=8),
               "flat": FlatAgent(EquivariantGNNPolicy(16, 2, rng=0)).train(n, d, steps=600, rng=0, batch_episodes=8),
               "greedy": greedy_search(n, d, steps=600, rng=0)}
    for name, res in results.items():
        assert res.n_linear > 0, name
        assert max(res.linear_diameters) <= 2 and res.best_diameter <= 2, name
        assert res.counterexamples == [] and res.field == "Q"
        gens = list(res.best_generators)
        assert froeberg_linear(gens, n)                          # independent of numtk's linearity code
        assert nx.diameter(nx_graph(gens, d)) == res.best_diameter
        curve = res.history["best_diameter"]
        assert len(curve) == len(res.history["env_steps"]) and res.history["env_steps"][-1] == res.env_steps
        assert all(a <= b for a, b in zip(curve, curve[1:]) if a is not None)
        assert curve[-1] == res.best_diameter
    assert results["options"].best_diameter == 2 and results["greedy"].best_diameter == 2


def test_greedy_states_have_linear_quotients():
    res = greedy_search(7, 3, steps=400, rng=1)
    assert res.best_diameter == 3 and res.counterexamples == []
    gens = list(res.best_generators)
    assert has_linear_resolution(gens, 7, field="GF2", method="reisner")
    assert has_linear_resolution(gens, 7, field="Q", method="reisner")
    assert dual_graph_diameter(gens, 3) == 3
    short = greedy_search(6, 2, steps=100, rng=0, max_generators=2)
    assert short.best_diameter == 1 and set(short.linear_diameters) <= {0, 1}


def test_demo_small():
    res = demo(steps=300, n=5, d=2, rng=1)
    m = res.metrics
    assert m["hirsch_holds"] and m["counterexamples"] == 0 and m["max_linear_diameter"] <= 2
    for name in ("options", "flat", "greedy"):
        assert m[name]["env_steps"] >= 300
        assert len(res.history[f"{name}/env_steps"]) == len(res.history[f"{name}/best_diameter"])


# --------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------
def test_bad_input():
    for kw, exc, word in [(dict(n=1, d=1), ValueError, "n"), (dict(n=5, d=5), ValueError, "d"),
                          (dict(n=5, d=0), ValueError, "d"), (dict(n=13, d=2), ValueError, "n"),
                          (dict(n=2.5, d=1), TypeError, "n"), (dict(n=5, d=2, field="R"), ValueError, "field"),
                          (dict(n=5, d=2, reward="dense"), ValueError, "reward"),
                          (dict(n=5, d=2, max_steps=0), ValueError, "max_steps"),
                          (dict(n=5, d=2, step_cost=-1.0), ValueError, "step_cost"),
                          (dict(n=5, d=2, rng="x"), TypeError, "rng")]:
        n, d = kw.pop("n"), kw.pop("d")
        with pytest.raises(exc, match=f"`{word}`"):
            HirschEnv(n, d, **kw)
    env = HirschEnv(5, 2)
    env.reset()
    with pytest.raises(ValueError, match="`action`"):
        env.step(21)
    with pytest.raises(TypeError, match="`action`"):
        env.step(1.5)
    with pytest.raises(ValueError, match="generators"):
        env.reset(options={"generators": [0b111]})
    with pytest.raises(ValueError, match="options"):
        env.reset(options={"start": 1})
    with pytest.raises(ValueError, match="`subset`"):
        subset_index(0b111, 5, 2)
    with pytest.raises(ValueError, match="`hidden`"):
        EquivariantGNNPolicy(hidden=0)
    with pytest.raises(ValueError, match="states"):
        EquivariantGNNPolicy(8, 1)([[0b111]], 5, 2)
    with pytest.raises(TypeError, match="`spine_policy`"):
        OptionsAgent(None, EquivariantGNNPolicy(8, 1))
    agent = OptionsAgent(EquivariantGNNPolicy(8, 1), EquivariantGNNPolicy(8, 1))
    with pytest.raises(ValueError, match="`d`"):
        agent.train(5, steps=10)
    with pytest.raises(ValueError, match="`steps`"):
        agent.train(5, 2, steps=0)
    with pytest.raises(ValueError, match="`d`"):
        FlatAgent(EquivariantGNNPolicy(8, 1)).train(env, 2, steps=10)
    with pytest.raises(ValueError, match="`d`"):
        greedy_search(5, 6)
