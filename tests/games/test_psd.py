"""PSD-PSRO's diversity-regularised best response (numtk/games/_psd.py) and the opponent-and-chance
reach matrices of the sequence form (``sequence_form().infoset_reach``, built in efg_tree.hpp).

Oracles: an independent pure-Python tree walk (tests/reference/games_trees.py) for the reach
matrices; enumeration of all pure strategies (tests/reference/games.py) for the anchored best
responses and their true PSD objective on Kuhn poker; the closed-form novelty bonus for matrix games.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.games import (Goofspiel, KuhnPoker, LeducPoker, MatrixGame, population_exploitability, psro,
                         random_game_of_skill, rock_paper_scissors)
from numtk.games import _psd
from numtk.games._model import model_of
from numtk.games._psd import diversity_best_responses, psd_response
from numtk.games._psro import Population
from reference import games as ref_games
from reference import games_trees as ref_trees

GAMES = {
    "kuhn": (KuhnPoker, ("kuhn_poker", None)),
    "leduc": (LeducPoker, ("leduc_poker", None)),
    "goofspiel3": (lambda: Goofspiel(3), ("goofspiel", 3)),
}
_CACHE = {}


def game_of(tag):
    if tag not in _CACHE:
        _CACHE[tag] = GAMES[tag][0]()
    return _CACHE[tag]


def sequence_ids(game):
    """Per player: {(infoset key, action id): sequence id}, with None for the empty sequence."""
    sf = game.sequence_form()
    out = []
    for p in (0, 1):
        keys = game.infoset_keys[p]
        ids = {None: 0}
        for s in range(1, game.n_sequences[p]):
            ids[(keys[sf.sequence_infoset[p][s]], int(sf.sequence_action[p][s]))] = s
        out.append(ids)
    return out


def reference_reach_matrices(game, tag):
    """Dense W0, W1 from the pure-Python walk."""
    walked = ref_trees.infoset_reach(ref_trees.make(*GAMES[tag][1]))
    seq = sequence_ids(game)
    mats = []
    for p in (0, 1):
        row = {k: i for i, k in enumerate(game.infoset_keys[p])}
        W = np.zeros((game.n_infosets[p], game.n_sequences[1 - p]))
        for (key, opp), prob in walked[p].items():
            W[row[key], seq[1 - p][opp]] += float(prob)
        mats.append(W)
    return mats


# ------------------------------------------------------------------------------------------------
# the reach matrices

@pytest.mark.parametrize("tag", list(GAMES))
def test_infoset_reach_matches_the_python_walk(tag):
    game = game_of(tag)
    sf = game.sequence_form()
    expected = reference_reach_matrices(game, tag)
    assert len(sf.infoset_reach) == 2
    for p, (W, ref) in enumerate(zip(sf.infoset_reach, expected)):
        assert W.format == "csr" and W.dtype == np.float64
        assert W.shape == (game.n_infosets[p], game.n_sequences[1 - p])
        assert W.has_canonical_format
        assert_allclose(W.toarray(), ref, rtol=0, atol=1e-15)
        assert_array_equal(W.toarray() != 0, ref != 0)  # the pattern: pairs that occur in the tree


@pytest.mark.parametrize("tag", list(GAMES))
def test_top_level_reach_sums_to_one(tag):
    # In these three games every play passes through exactly one infoset of each player without an
    # own move before it, so their opponent-and-chance reaches sum to 1 against any opponent plan.
    game = game_of(tag)
    sf = game.sequence_form()
    rng = np.random.default_rng(0)
    r0, r1 = game.policy_to_sequence(game.random_policy(rng=rng))
    for p, q in ((0, r1), (1, r0)):
        w = sf.infoset_reach[p] @ q
        top = sf.parent_sequence[p] == 0
        assert w.min() >= 0 and w.max() <= 1 + 1e-12
        assert w[top].sum() == pytest.approx(1.0, abs=1e-12)


def test_infoset_reach_by_hand_kuhn():
    game = KuhnPoker()
    W0, W1 = game.sequence_form().infoset_reach
    keys0, keys1 = game.infoset_keys
    seq = sequence_ids(game)
    # Player 0 holding J at the root: dealt J with probability 1/3, before player 1 moves.
    assert W0[[keys0.index("0")]].toarray()[0, 0] == pytest.approx(1 / 3)
    # '0pb': player 1 holds Q or K (1/6 each) and bet after a pass.
    row = W0[[keys0.index("0pb")]].toarray()[0]
    assert row[seq[1][("1p", 1)]] == pytest.approx(1 / 6)
    assert row[seq[1][("2p", 1)]] == pytest.approx(1 / 6)
    assert row.sum() == pytest.approx(1 / 3)
    # Player 1 holding K facing a bet: player 0 holds J or Q and bet.
    row = W1[[keys1.index("2b")]].toarray()[0]
    assert row[seq[0][("0", 1)]] == pytest.approx(1 / 6) and row[seq[0][("1", 1)]] == pytest.approx(1 / 6)


def test_goofspiel4_reach_shapes():
    game = Goofspiel(4)
    W0, W1 = game.sequence_form().infoset_reach
    assert W0.shape == (3652, 7505) and W1.shape == (3652, 7505)
    # Bids are public after each round: player 0's infoset fixes player 1's past bids (one column
    # per row), whereas player 1 moves after player 0's pending, unseen bid.
    assert W0.nnz == 3652 and W1.nnz == 7504


# ------------------------------------------------------------------------------------------------
# the compiled best response from utilities

def test_best_response_from_utilities_binding():
    game = LeducPoker()
    model = model_of(game)
    rng = np.random.default_rng(1)
    R0, R1 = game.policy_to_sequence(np.stack([game.random_policy(rng=rng) for _ in range(3)]))
    for player, opp, M, sign in ((0, R1, model.A, 1.0), (1, R0, model.AT, -1.0)):
        c = np.ascontiguousarray(sign * (M @ opp))
        before = c.copy()
        v, B, L = model.native.best_response_from_utilities(player, c)
        assert_array_equal(c, before)  # the input is not overwritten
        v2, B2, L2 = model.native.best_response(player, opp)
        assert_allclose(v, v2, rtol=0, atol=1e-12)
        assert_array_equal(B, B2)
        assert_array_equal(L, L2)
    with pytest.raises(ValueError, match="c"):
        model.native.best_response_from_utilities(0, np.zeros((5, 2)))
    with pytest.raises(ValueError, match="player"):
        model.native.best_response_from_utilities(2, np.zeros((model.n_sequences[0], 1)))


# ------------------------------------------------------------------------------------------------
# anchored best responses against enumeration (Kuhn poker: 2^6 = 64 pure strategies per player)

def reach_weights(game, player, opponent_plan):
    """w(I) from the Python walk: sum over histories of chance probability times opponent reach."""
    walked = ref_trees.infoset_reach(ref_trees.make("kuhn_poker"))[player]
    seq = sequence_ids(game)[1 - player]
    row = {k: i for i, k in enumerate(game.infoset_keys[player])}
    w = np.zeros(game.n_infosets[player])
    for (key, opp), prob in walked.items():
        w[row[key]] += float(prob) * opponent_plan[seq[opp]]
    return w


def brute_force_terms(game, player, opponent_plan, anchors, eps):
    """For every pure plan r of ``player``: (r, u, [sum_I ownreach * w(I) * KL(pi_r(.|I) || pi~_k(.|I))]_k),
    the KL written for the behavioural policy of r, infoset by infoset."""
    sf = game.sequence_form()
    ps, fs, na = sf.parent_sequence[player], sf.first_sequence[player], sf.n_actions[player]
    sa = sf.sequence_action[player]
    offset = 0 if player == 0 else game.n_infosets[0]
    c = ref_games.utilities(sf, player, opponent_plan)
    w = reach_weights(game, player, opponent_plan)
    out = []
    for r in ref_games.pure_plans(sf, player):
        kls = []
        for anchor in anchors:
            total = 0.0
            for I in range(len(ps)):
                own = r[ps[I]]
                if own == 0:
                    continue
                pi = np.zeros(game.max_actions)            # pi_r(.|I), a one-hot row
                pi[sa[fs[I] + int(np.argmax(r[fs[I]:fs[I] + na[I]]))]] = 1.0
                legal = game.legal_mask[offset + I]
                smooth = (1 - eps) * anchor[offset + I] + eps * legal / legal.sum()
                kl = sum(pi[a] * np.log(pi[a] / smooth[a]) for a in range(game.max_actions) if pi[a] > 0)
                total += own * w[I] * kl
            kls.append(total)
        out.append((r, float(r @ c), np.array(kls)))
    return out


def kuhn_anchors(game, rng):
    return [game.uniform_policy(), game.random_policy(rng=rng), game.random_policy(rng=rng, deterministic=True),
            game.random_policy(rng=rng, deterministic=True)]


@pytest.mark.parametrize("player", [0, 1])
@pytest.mark.parametrize("lam, eps", [(0.7, 1e-3), (0.05, 0.2), (3.0, 0.5)])
def test_anchored_best_responses_match_enumeration(player, lam, eps):
    game = KuhnPoker()
    model = model_of(game)
    rng = np.random.default_rng(int(100 * lam) + player)
    anchors = kuhn_anchors(game, rng)
    r0, r1 = game.policy_to_sequence(game.random_policy(rng=rng))
    opp = r1 if player == 0 else r0
    res = diversity_best_responses(model, player, opp, anchors, lam, eps)
    terms = brute_force_terms(game, player, opp, anchors, eps)
    K = len(anchors)
    assert res.plans.shape == (game.n_sequences[player], K)
    assert_allclose(res.reach, reach_weights(game, player, opp), rtol=0, atol=1e-15)
    for k in range(K):
        # BR_k maximises u + lam * D_k over all 64 pure strategies.
        best = max(u + lam * kl[k] for _, u, kl in terms)
        assert res.values[k] == pytest.approx(best, abs=1e-12)
        # ... and the returned plan attains it (pure strategies differing only at infosets they do
        # not reach share one plan, hence several matches with one value).
        match = [u + lam * kl[k] for r, u, kl in terms if np.array_equal(r, res.plans[:, k])]
        assert match and max(match) - min(match) <= 1e-12 and match[0] == pytest.approx(best, abs=1e-12)
    # The true objective of every candidate, evaluated by enumeration.
    by_plan = {r.tobytes(): (u, kl) for r, u, kl in terms}
    for j in range(K):
        u, kl = by_plan[res.plans[:, j].tobytes()]
        assert res.utility[j] == pytest.approx(u, abs=1e-12)
        assert_allclose(res.divergence[j], kl, rtol=0, atol=1e-12)
        assert res.objective[j] == pytest.approx(u + lam * kl.min(), abs=1e-12)
    assert res.best == int(np.flatnonzero(res.objective >= res.objective.max() - 1e-12)[0])
    # The anchored choice never beats the exact maximiser of u + lam * min_k D_k.
    exact = max(u + lam * kl.min() for _, u, kl in terms)
    assert res.objective[res.best] <= exact + 1e-12


def test_one_anchor_is_the_exact_psd_maximiser():
    game = KuhnPoker()
    model = model_of(game)
    rng = np.random.default_rng(5)
    for _ in range(5):
        anchors = [game.random_policy(rng=rng, deterministic=True)]
        r0, r1 = game.policy_to_sequence(game.random_policy(rng=rng))
        res = diversity_best_responses(model, 0, r1, anchors, 0.5, 1e-3)
        exact = max(u + 0.5 * kl.min() for _, u, kl in brute_force_terms(game, 0, r1, anchors, 1e-3))
        assert res.objective[0] == pytest.approx(exact, abs=1e-12)


def test_lambda_zero_gives_the_plain_best_response():
    game = LeducPoker()
    model = model_of(game)
    rng = np.random.default_rng(2)
    anchors = [game.random_policy(rng=rng, deterministic=True) for _ in range(3)]
    r0, r1 = game.policy_to_sequence(game.random_policy(rng=rng))
    res = diversity_best_responses(model, 0, r1, anchors, 0.0, 1e-3)
    v, B, L = model.best_response(0, r1)
    assert_allclose(res.values, v, rtol=0, atol=1e-12)
    assert_array_equal(res.plans, np.repeat(B[:, None], 3, axis=1))
    assert res.best == 0


def test_chunked_anchors_equal_one_batch(monkeypatch):
    game = LeducPoker()
    model = model_of(game)
    rng = np.random.default_rng(3)
    anchors = [game.random_policy(rng=rng, deterministic=bool(i % 2)) for i in range(7)]
    r0, r1 = game.policy_to_sequence(game.random_policy(rng=rng))
    whole = diversity_best_responses(model, 1, r0, anchors, 0.3, 1e-2)
    monkeypatch.setattr(_psd, "_CHUNK_ELEMENTS", 2 * game.n_sequences[1])  # chunks of two anchors
    parts = diversity_best_responses(model, 1, r0, anchors, 0.3, 1e-2)
    for name in ("values", "plans", "actions", "utility", "divergence", "objective"):
        assert_allclose(getattr(parts, name), getattr(whole, name), rtol=0, atol=1e-12)
    assert parts.best == whole.best


def test_epsilon_zero_stays_finite():
    game = KuhnPoker()
    model = model_of(game)
    rng = np.random.default_rng(4)
    anchors = [game.random_policy(rng=rng, deterministic=True) for _ in range(3)]
    r0, r1 = game.policy_to_sequence(game.uniform_policy())
    res = diversity_best_responses(model, 0, r1, anchors, 0.1, 0.0)
    assert np.isfinite(res.values).all() and np.isfinite(res.objective).all()


# ------------------------------------------------------------------------------------------------
# psd_response on a shared population

def population_of(game, members):
    model = model_of(game)
    pop = Population(model, game)
    if pop.matrix:
        for i in members:
            pop.add(model.pure_plans([i], 0)[:, 0], model.pure_plans([i], 1)[:, 0], int(i))
    else:
        R0, R1 = game.policy_to_sequence(np.stack(members))
        for j, m in enumerate(members):
            pop.add(R0[:, j].copy(), R1[:, j].copy(), m)
    return pop


@pytest.mark.parametrize("tag", ["kuhn", "leduc"])
def test_psd_response_combines_both_seats(tag):
    game = game_of(tag)
    rng = np.random.default_rng(6)
    members = [game.uniform_policy()] + [game.random_policy(rng=rng, deterministic=True) for _ in range(4)]
    pop = population_of(game, members)
    nash = rng.dirichlet(np.ones(pop.size))
    r0, r1, member = psd_response(pop, nash, 0.5, 1e-3)
    model = pop.model
    seat0 = diversity_best_responses(model, 0, pop.R1 @ nash, pop.members, 0.5, 1e-3)
    seat1 = diversity_best_responses(model, 1, pop.R0 @ nash, pop.members, 0.5, 1e-3)
    assert_array_equal(r0, seat0.plans[:, seat0.best])
    assert_array_equal(r1, seat1.plans[:, seat1.best])
    p0, p1 = game.policy_to_sequence(member)
    assert_array_equal(p0, r0)
    assert_array_equal(p1, r1)
    assert set(np.unique(member)) <= {0.0, 1.0}
    # lambda = 0: the plain BR(Nash) of Population.exact_responses.
    b0, b1, bm = pop.exact_responses(nash[:, None])[1][0]
    z0, z1, zm = psd_response(pop, nash, 0.0, 1e-3)
    assert_array_equal(z0, b0)
    assert_array_equal(z1, b1)
    assert_array_equal(zm, bm)
    with pytest.raises(ValueError, match="nash"):
        psd_response(pop, nash[:-1], 0.5, 1e-3)


def test_psd_response_matrix_is_the_exact_min_kl_maximiser():
    game = random_game_of_skill(12, rng=3)
    model = model_of(game)
    n = 12
    rng = np.random.default_rng(7)
    for trial in range(20):
        members = list(rng.choice(n, size=int(rng.integers(1, 6)), replace=False))
        pop = population_of(game, members)
        nash = rng.dirichlet(np.ones(pop.size))
        lam, eps = [(0.1, 1e-3), (5.0, 1e-3), (0.5, 0.3), (2.0, 0.0)][trial % 4]
        r0, r1, a = psd_response(pop, nash, lam, eps)
        u = np.asarray(game.zero_sum_payoff) @ (pop.R1[1:] @ nash)
        score = []
        for i in range(n):
            kls = [-np.log(max((1 - eps) * (i == k) + eps / n, np.finfo(float).tiny)) for k in members]
            score.append(u[i] + lam * min(kls))
        score = np.array(score)
        assert a == int(np.flatnonzero(score >= score.max() - 1e-12 * (1 + abs(score.max())))[0])
        assert_array_equal(r0, model.pure_plans([a], 0)[:, 0])
        assert_array_equal(r1, model.pure_plans([a], 1)[:, 0])


def test_psd_response_matrix_novelty_moves_off_a_member_best_response():
    # Rock-paper-scissors against pure rock: the BR (paper) is already a member; a large lambda makes
    # the novelty bonus pick scissors, the only non-member, although it loses to rock.
    game = rock_paper_scissors()
    pop = population_of(game, [0, 1])
    nash = np.array([1.0, 0.0])
    assert psd_response(pop, nash, 0.01, 1e-3)[2] == 1
    assert psd_response(pop, nash, 10.0, 1e-3)[2] == 2


# ------------------------------------------------------------------------------------------------
# the psro loop

def assert_clean_run(game, res):
    pe = res.history["pe"]
    assert np.all(np.diff(pe) <= 1e-9) and pe.min() >= -1e-12
    sizes = res.history["population_size"]
    assert np.all(np.diff(sizes) >= 1) and sizes[-1] == len(res.population)
    R = np.vstack(res.plans)
    assert np.unique(R.T, axis=0).shape[0] == R.shape[1]          # no duplicate members
    assert population_exploitability(game, res.population).value == pytest.approx(pe[-1], abs=1e-9)


def test_psro_psd_runs_on_kuhn():
    game = KuhnPoker()
    res = psro(game, variant="psd", iterations=10, rng=0, options={"p_diversity": 1.0})
    assert res.variant == "psd" and res.n_iter >= 1
    assert_clean_run(game, res)


def test_psro_psd_differs_from_psro_for_large_lambda():
    game = KuhnPoker()
    a = psro(game, variant="psd", iterations=6, rng=0, options={"p_diversity": 1.0, "lambda": 10.0})
    b = psro(game, variant="psro", iterations=6, rng=0)
    assert_clean_run(game, a)
    k = min(a.plans[0].shape[1], b.plans[0].shape[1])
    assert not np.array_equal(a.plans[0][:, :k], b.plans[0][:, :k])
    # p_diversity = 0 is plain PSRO (the coin is still flipped, the responses coincide).
    c = psro(game, variant="psd", iterations=6, rng=0, options={"p_diversity": 0.0, "lambda": 10.0})
    assert_array_equal(c.plans[0], b.plans[0])


def test_psro_psd_runs_on_leduc_and_goofspiel():
    for game in (LeducPoker(), Goofspiel(3)):
        res = psro(game, variant="psd", iterations=4, rng=1, options={"p_diversity": 1.0, "lambda": 0.05})
        assert_clean_run(game, res)


def test_psro_psd_matrix_unchanged():
    # Frozen from the matrix-only implementation before the extensive-form version (same rng use).
    game = random_game_of_skill(40, rng=1)
    res = psro(game, variant="psd", iterations=12, rng=0, options={"p_diversity": 1.0})
    assert res.population.tolist() == [34, 31] and res.status == "equilibrium"
    res = psro(game, variant="psd", iterations=12, rng=1, options={"p_diversity": 0.5, "lambda": 0.5,
                                                                    "epsilon": 0.1})
    assert res.population.tolist() == [18, 31] and res.status == "equilibrium"
    assert isinstance(game, MatrixGame)
