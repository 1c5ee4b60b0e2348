"""Tests of the exact extensive-form games (numtk/games/_efg.py, native/include/numtk/games/efg_tree.hpp).

Oracles: the sizes of the spec (specs/games.md §2.1, checked against OpenSpiel 2.0.2), an independent
pure-Python tree walk (tests/reference/games_trees.py), published values (Kuhn and Leduc uniform
payoffs, OpenSpiel's exploitability_test.py; the sequence-form LP values of OpenSpiel's
sequence_form_lp_test.py) and, where installed, OpenSpiel itself.
"""

import pickle
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import linprog

from numtk.games._efg import ExtensiveFormGame, Goofspiel, KuhnPoker, LeducPoker
from reference import games_trees as ref

# (factory, reference game, n_infosets per player, n_sequences per player, nnz(A), tree nodes, terminals)
SIZES = {
    "kuhn": (KuhnPoker, ("kuhn_poker", None), 6, 13, 30, 58, 30),
    "leduc": (LeducPoker, ("leduc_poker", None), 468, 1093, 5520, 9457, 5520),
    "goofspiel2": (lambda: Goofspiel(2), ("goofspiel", 2), 2, 5, 8, 15, 8),
    "goofspiel3": (lambda: Goofspiel(3), ("goofspiel", 3), 57, 118, 216, 418, 216),
    "goofspiel4": (lambda: Goofspiel(4), ("goofspiel", 4), 3652, 7505, 13824, 26773, 13824),
}
SMALL = ["kuhn", "leduc", "goofspiel3"]  # the games walked 20 times by the Python oracle

_CACHE = {}


def game_of(tag):
    """One game object per tag for the whole module (the tree is built once)."""
    if tag not in _CACHE:
        _CACHE[tag] = SIZES[tag][0]()
    return _CACHE[tag]


def ref_of(tag):
    return ref.make(*SIZES[tag][1])


def lookup(game, policy):
    """policy_fn(player, key) of a tabular policy, by numtk's infoset keys."""
    rows = [{k: i for i, k in enumerate(keys)} for keys in game.infoset_keys]
    n0 = game.n_infosets[0]
    return lambda player, key: policy[rows[player][key] + (n0 if player else 0)]


def value(game, pa, pb=None):
    """r0' A r1 for player 0's rows of pa and player 1's rows of pb."""
    pb = pa if pb is None else pb
    r0, _ = game.policy_to_sequence(pa)
    _, r1 = game.policy_to_sequence(pb)
    return float(r0 @ (game.sequence_form().payoff @ r1))


# ---------------------------------------------------------------------------------------------------
# sizes and layout


@pytest.mark.parametrize("tag", list(SIZES))
def test_sizes_match_the_spec(tag):
    _, _, n_inf, n_seq, nnz, nodes, terms = SIZES[tag]
    game = game_of(tag)
    sf = game.sequence_form()
    (E, e), (F, f) = sf.constraints
    assert game.n_infosets == (n_inf, n_inf)
    assert game.n_sequences == (n_seq, n_seq)
    assert (game.n_nodes, game.n_terminals) == (nodes, terms)
    assert sf.payoff.shape == (n_seq, n_seq) and sf.payoff.nnz == nnz
    assert sf.payoff_T.shape == (n_seq, n_seq) and sf.payoff_T.nnz == nnz
    assert E.shape == F.shape == (n_inf + 1, n_seq)
    assert e.shape == f.shape == (n_inf + 1,)
    assert game.legal_mask.shape == (2 * n_inf, game.max_actions)
    assert_array_equal(game.infoset_player, np.repeat(np.int8([0, 1]), n_inf))
    assert game.infoset_player.dtype == np.int8
    assert [len(k) for k in game.infoset_keys] == [n_inf, n_inf]
    assert all(len(set(k)) == n_inf for k in game.infoset_keys)


def test_goofspiel5_sizes():
    # specs/games.md §2.1 (3.35M nodes); the walk takes about 0.5 s in C++.
    game = Goofspiel(5)
    sf = game.sequence_form()
    assert game.n_infosets == (456505, 456505)
    assert game.n_sequences == (938026, 938026)
    assert (game.n_nodes, game.n_terminals) == (3346656, 1728000)
    assert sf.payoff.nnz == 1728000 == ref.goofspiel_terminals(5)
    r0, r1 = game.policy_to_sequence(game.uniform_policy())
    assert abs(r0 @ (sf.payoff @ r1)) < 1e-12  # symmetric game: uniform vs uniform is 0
    (E, e), (F, f) = sf.constraints
    assert_allclose(E @ r0, e, atol=1e-12)
    assert_allclose(F @ r1, f, atol=1e-12)


@pytest.mark.parametrize("tag", list(SIZES))
def test_tree_size_and_keys_match_the_python_tree(tag):
    game, oracle = game_of(tag), ref_of(tag)
    assert ref.tree_size(oracle) == (game.n_nodes, game.n_terminals)
    found = ref.infosets(oracle)
    sf = game.sequence_form()
    for p in (0, 1):
        assert game.infoset_keys[p] == list(found[p])  # same keys, same discovery order
        fs, na, sa = sf.first_sequence[p], sf.n_actions[p], sf.sequence_action[p]
        legal = [tuple(sa[fs[i]:fs[i] + na[i]]) for i in range(len(fs))]
        assert legal == list(found[p].values())


@pytest.mark.parametrize("tag", list(SIZES))
def test_sequence_form_layout(tag):
    game = game_of(tag)
    sf = game.sequence_form()
    assert game.sequence_form() is sf  # cached
    offset = 0
    for p in (0, 1):
        ps, fs, na = sf.parent_sequence[p], sf.first_sequence[p], sf.n_actions[p]
        si, sa = sf.sequence_infoset[p], sf.sequence_action[p]
        n, s = game.n_infosets[p], game.n_sequences[p]
        for arr, length in ((ps, n), (fs, n), (na, n), (si, s), (sa, s)):
            assert arr.dtype == np.int32 and arr.shape == (length,) and arr.flags.c_contiguous
        assert_array_equal(fs, 1 + np.concatenate([[0], np.cumsum(na)[:-1]]))
        assert si[0] == -1 and sa[0] == -1
        assert_array_equal(si[1:], np.repeat(np.arange(n), na))
        # actions ascending within each infoset, and exactly the legal ones
        rows = offset + si[1:]
        assert game.legal_mask[rows, sa[1:]].all()
        assert game.legal_mask[offset:offset + n].sum() == s - 1
        assert_array_equal(game.legal_mask[offset:offset + n].sum(axis=1), na)
        assert np.all(np.diff(sa[1:])[np.diff(si[1:]) == 0] > 0)
        # a parent sequence belongs to an earlier infoset (DFS discovery order)
        assert np.all(ps < fs)
        assert np.all((ps == 0) | (si[ps] < np.arange(n)))
        offset += n


@pytest.mark.parametrize("tag", list(SIZES))
def test_sparse_matrices(tag):
    sf = game_of(tag).sequence_form()
    A, AT = sf.payoff, sf.payoff_T
    for M in (A, AT, *(c[0] for c in sf.constraints)):
        assert isinstance(M, scipy.sparse.csr_array)
        assert M.dtype == np.float64 and M.indices.dtype == np.int32 and M.indptr.dtype == np.int32
        assert M.has_canonical_format
        for arr in (M.data, M.indices, M.indptr):
            assert arr.flags.c_contiguous
    assert (A.T != AT).nnz == 0
    for p, ((E, e), sizes) in enumerate(zip(sf.constraints, zip(sf.parent_sequence, sf.first_sequence,
                                                                  sf.n_actions))):
        ps, fs, na = sizes
        n, s = len(ps), E.shape[1]
        rows = np.concatenate([[0], 1 + np.arange(n), np.repeat(1 + np.arange(n), na)])
        cols = np.concatenate([[0], ps, np.arange(1, s)])
        vals = np.concatenate([[1.0], -np.ones(n), np.ones(s - 1)])
        expect = scipy.sparse.coo_array((vals, (rows, cols)), shape=E.shape).tocsr()
        assert E.nnz == expect.nnz and (E != expect).nnz == 0
        assert_array_equal(e, np.eye(1, len(ps) + 1)[0])


# ---------------------------------------------------------------------------------------------------
# values against the Python tree walk and published numbers


@pytest.mark.parametrize("tag", SMALL)
def test_payoff_matches_tree_walk_for_random_policies(tag):
    game, oracle = game_of(tag), ref_of(tag)
    rng = np.random.default_rng(7)
    for i in range(20):
        pi = game.random_policy(rng=rng, deterministic=(i % 4 == 3))
        expected = ref.expected_payoff(oracle, lookup(game, pi))
        assert_allclose(value(game, pi), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("tag, exact", [("kuhn", Fraction(1, 8)), ("leduc", Fraction(-5, 64)),
                                        ("goofspiel2", 0), ("goofspiel3", 0), ("goofspiel4", 0)])
def test_uniform_payoff(tag, exact):
    # Kuhn (1/8, -1/8) and Leduc (-5/64, 5/64): OpenSpiel expected_game_score (specs/games.md §3).
    game = game_of(tag)
    u = game.uniform_policy()
    assert_allclose(value(game, u), float(exact), atol=1e-15)
    if tag != "goofspiel4":
        walked = ref.expected_payoff(ref_of(tag), lookup(game, [[Fraction(1, int(m.sum())) * int(x) for x in m]
                                                                for m in game.legal_mask]), exact=True)
        assert walked == exact


@pytest.mark.parametrize("tag, published", [("kuhn", -1 / 18), ("leduc", -0.085606424078),
                                            ("goofspiel3", 0.0)])
def test_sequence_form_lp_value(tag, published):
    # max_{r0, v} f'v  s.t.  F'v <= A'r0, E r0 = e, r0 >= 0 (OpenSpiel sequence_form_lp_test.py values).
    sf = game_of(tag).sequence_form()
    (E, e), (F, f) = sf.constraints
    s0, m1 = E.shape[1], F.shape[0]
    c = np.concatenate([np.zeros(s0), -f])
    A_ub = scipy.sparse.hstack([-sf.payoff_T, F.T]).tocsr()
    A_eq = scipy.sparse.hstack([E, scipy.sparse.csr_array((E.shape[0], m1))]).tocsr()
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(A_ub.shape[0]), A_eq=A_eq, b_eq=e,
                  bounds=[(0, None)] * s0 + [(None, None)] * m1, method="highs")
    assert res.status == 0
    assert_allclose(-res.fun, published, atol=1e-9)


# ---------------------------------------------------------------------------------------------------
# realization plans


@pytest.mark.parametrize("tag", list(SIZES))
def test_plans_satisfy_constraints(tag):
    game = game_of(tag)
    sf = game.sequence_form()
    (E, e), (F, f) = sf.constraints
    rng = np.random.default_rng(3)
    for det in (False, True):
        r0, r1 = game.policy_to_sequence(game.random_policy(rng=rng, deterministic=det))
        assert r0.shape == (game.n_sequences[0],) and r1.shape == (game.n_sequences[1],)
        assert r0.dtype == np.float64 and r0.flags.c_contiguous and r1.flags.c_contiguous
        assert r0.min() >= 0 and r1.min() >= 0
        assert_allclose(E @ r0, e, atol=1e-12)
        assert_allclose(F @ r1, f, atol=1e-12)


def test_plan_entries_by_hand_kuhn():
    game = KuhnPoker()
    pi = game.uniform_policy()
    pi[0] = [0.25, 0.75]   # infoset '0' (player 0 holds J): pass 1/4, bet 3/4
    pi[1] = [0.5, 0.5]     # '0pb'
    r0, _ = game.policy_to_sequence(pi)
    # sequences: 1 ('0', pass), 2 ('0', bet), 3 ('0pb', fold), 4 ('0pb', call)
    assert_allclose(r0[:5], [1.0, 0.25, 0.75, 0.125, 0.125])
    assert game.sequence_form().parent_sequence[0][1] == 1


@pytest.mark.parametrize("tag", list(SIZES))
def test_round_trip_on_reached_infosets(tag):
    game = game_of(tag)
    sf = game.sequence_form()
    rng = np.random.default_rng(11)
    for det in (False, True):
        pi = game.random_policy(rng=rng, deterministic=det)
        r0, r1 = game.policy_to_sequence(pi)
        back = game.sequence_to_policy(r0, r1)
        reach = np.concatenate([r[ps] for r, ps in zip((r0, r1), sf.parent_sequence)])
        reached = reach > 0
        assert_allclose(back[reached], pi[reached], rtol=1e-12, atol=1e-15)
        # unreached infosets come back uniform over their legal actions
        assert_allclose(back[~reached], game.uniform_policy()[~reached])
        if det and tag != "goofspiel2":  # Goofspiel(2) has one decision per player: all reached
            assert (~reached).any()
        else:
            assert reached.all()


@pytest.mark.parametrize("tag", ["kuhn", "leduc", "goofspiel4"])
def test_stacks_equal_single_calls(tag):
    game = game_of(tag)
    rng = np.random.default_rng(5)
    stack = np.stack([game.random_policy(rng=rng, deterministic=bool(i % 2)) for i in range(4)])
    R0, R1 = game.policy_to_sequence(stack)
    assert R0.shape == (game.n_sequences[0], 4) and R1.shape == (game.n_sequences[1], 4)
    for i in range(4):
        r0, r1 = game.policy_to_sequence(stack[i])
        assert_array_equal(R0[:, i], r0)
        assert_array_equal(R1[:, i], r1)
    back = game.sequence_to_policy(R0, R1)
    assert back.shape == stack.shape
    for i in range(4):
        assert_array_equal(back[i], game.sequence_to_policy(R0[:, i], R1[:, i]))


def test_mixture_of_plans_is_the_mixed_strategy():
    # Kuhn's theorem (specs/games.md §2.2 and pitfall 3): mixing plans mixes the payoffs linearly.
    game = KuhnPoker()
    rng = np.random.default_rng(2)
    members = np.stack([game.random_policy(rng=rng, deterministic=True) for _ in range(3)])
    x = np.array([0.2, 0.5, 0.3])
    R0, _ = game.policy_to_sequence(members)
    _, r1 = game.policy_to_sequence(game.uniform_policy())
    A = game.sequence_form().payoff
    mixed = (R0 @ x) @ (A @ r1)
    assert_allclose(mixed, sum(x[i] * value(game, members[i], game.uniform_policy()) for i in range(3)))
    behavioural = game.sequence_to_policy(R0 @ x, r1)
    assert_allclose(value(game, behavioural, game.uniform_policy()), mixed, atol=1e-14)


def test_sequence_to_policy_cleans_solver_noise():
    game = KuhnPoker()
    r0, r1 = game.policy_to_sequence(game.uniform_policy())
    noisy = r0.copy()
    noisy[1] = -1e-17
    noisy[2] += 1e-17
    pi = game.sequence_to_policy(noisy, r1)
    assert pi.min() >= 0
    assert_allclose(pi.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="`r0` must be non-negative"):
        game.sequence_to_policy(r0 - 1.0, r1)
    with pytest.raises(ValueError, match=r"`r1` must have shape \(13,\)"):
        game.sequence_to_policy(r0, r1[:-1])
    with pytest.raises(ValueError, match="both be vectors"):
        game.sequence_to_policy(r0, r1[:, None])
    with pytest.raises(ValueError, match="`r0` must be finite"):
        game.sequence_to_policy(np.full_like(r0, np.nan), r1)
    with pytest.raises(TypeError, match="`r1`"):
        game.sequence_to_policy(r0, ["a"] * 13)


# ---------------------------------------------------------------------------------------------------
# policies and validation


@pytest.mark.parametrize("tag", ["kuhn", "leduc", "goofspiel3"])
def test_uniform_and_random_policies(tag):
    game = game_of(tag)
    mask = game.legal_mask
    u = game.uniform_policy()
    assert u.dtype == np.float64 and u.shape == mask.shape
    assert_allclose(u, mask / mask.sum(axis=1, keepdims=True))
    a = game.random_policy(rng=42)
    assert_array_equal(a, game.random_policy(rng=np.random.default_rng(42)))
    assert np.all(a[~mask] == 0) and np.all(a[mask] > 0)
    assert_allclose(a.sum(axis=1), 1.0, atol=1e-15)
    d = game.random_policy(rng=1, deterministic=True)
    assert set(np.unique(d)) == {0.0, 1.0}
    assert_array_equal(d.sum(axis=1), 1.0)
    assert np.all(d[~mask] == 0)
    assert_array_equal(game.check_policy(d), d)
    # every legal action gets chosen sometimes
    hits = sum(game.random_policy(rng=s, deterministic=True) for s in range(60))
    assert np.all(hits[mask] > 0)


def test_check_policy_accepts_and_renormalises():
    game = LeducPoker()
    u = game.uniform_policy()
    out = game.check_policy(u * (1 + 5e-7))
    assert out.dtype == np.float64 and out.flags.c_contiguous
    assert_allclose(out.sum(axis=1), 1.0, atol=1e-15)
    src = u.copy()
    assert game.check_policy(src) is not src
    stack = game.check_policy([u, u])
    assert stack.shape == (2,) + u.shape
    ints = game.check_policy(game.random_policy(rng=0, deterministic=True).astype(np.int64))
    assert ints.dtype == np.float64
    assert_array_equal(game.check_policy(u.astype(np.float32)).sum(axis=1), 1.0)


@pytest.mark.parametrize("bad, match", [
    (lambda u: u[:-1], r"`pol` must have shape \(12, 2\) or \(k, 12, 2\)"),
    (lambda u: u[:, :1], "must have shape"),
    (lambda u: u.ravel(), "must have shape"),
    (lambda u: u[None, None], "must have shape"),
    (lambda u: np.where(np.arange(12)[:, None] == 4, np.nan, u), r"`pol` must be finite.*row 4"),
    (lambda u: np.where(np.arange(12)[:, None] == 2, np.inf, u), "`pol` must be finite"),
    (lambda u: np.where(np.arange(12)[:, None] == 3, [[1.5, -0.5]], u), r"non-negative; it holds -0\.5.*row 3"),
    (lambda u: u * 1.01, r"rows must sum to 1 within 1e-06.*1\.01"),
    (lambda u: np.stack([u, u * 0.5]), r"rows must sum to 1.*member 1, row 0"),
])
def test_check_policy_errors(bad, match):
    game = KuhnPoker()
    with pytest.raises(ValueError, match=match):
        game.check_policy(bad(game.uniform_policy()), "pol")


def test_check_policy_illegal_mass_and_types():
    game = LeducPoker()
    u = game.uniform_policy()
    u[0] = [0.2, 0.4, 0.4]  # fold is illegal at the opening infoset
    with pytest.raises(ValueError, match=r"`policy` puts probability 0\.2 on an illegal action.*\[Observer: 0\]"):
        game.check_policy(u)
    with pytest.raises(ValueError, match="illegal"):
        game.policy_to_sequence(u)
    with pytest.raises(TypeError, match="`policy` must have a numeric"):
        game.check_policy(np.full(game.legal_mask.shape, "x"))
    with pytest.raises(TypeError, match="`policy`"):
        game.check_policy(game.uniform_policy().astype(complex))
    with pytest.raises(ValueError, match="must be non-negative"):
        game.check_policy(game.uniform_policy() - game.legal_mask * 0.75)


def test_random_policy_arguments():
    game = KuhnPoker()
    with pytest.raises(TypeError, match="`deterministic` must be a bool"):
        game.random_policy(rng=0, deterministic=1)
    with pytest.raises(TypeError, match="`rng`"):
        game.random_policy(rng="seed")
    with pytest.raises(TypeError, match="positional argument"):
        game.random_policy(0)  # rng is keyword-only


# ---------------------------------------------------------------------------------------------------
# Goofspiel parameters, identity, threads


@pytest.mark.parametrize("n, exc, match", [
    (6, ValueError, r"`n_cards` must be <= 5.*3\.73e\+08"),
    (1, ValueError, "`n_cards` must be >= 2"),
    (0, ValueError, ">= 2"),
    (2.5, TypeError, "`n_cards` must be an int"),
    (True, TypeError, "`n_cards` must be an int"),
    ("3", TypeError, "`n_cards` must be an int"),
])
def test_goofspiel_n_cards(n, exc, match):
    with pytest.raises(exc, match=match):
        Goofspiel(n)


def test_identity_repr_pickle():
    assert repr(LeducPoker()) == "LeducPoker(infosets=(468, 468), sequences=(1093, 1093))"
    assert repr(Goofspiel(2)) == "Goofspiel(n_cards=2, infosets=(2, 2), sequences=(5, 5))"
    assert KuhnPoker().name == "kuhn_poker" and LeducPoker().name == "leduc_poker"
    assert Goofspiel(4).name == "goofspiel_4" and Goofspiel(np.int64(3)).n_cards == 3
    assert Goofspiel(3) == Goofspiel(3) and Goofspiel(3) != Goofspiel(4) and KuhnPoker() != LeducPoker()
    assert len({KuhnPoker(), KuhnPoker(), Goofspiel(3), Goofspiel(3)}) == 2
    g = pickle.loads(pickle.dumps(game_of("goofspiel3")))
    assert g == game_of("goofspiel3") and g._tree is None
    assert g.infoset_keys == game_of("goofspiel3").infoset_keys
    for game in (KuhnPoker(), Goofspiel(2)):
        assert isinstance(game, ExtensiveFormGame)
        assert game.n_players == 2 and game.is_zero_sum is True
    with pytest.raises(TypeError, match="base class"):
        ExtensiveFormGame()


def test_concurrent_first_use_builds_once():
    game = Goofspiel(4)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: game.sequence_form(), range(8)))
    assert all(r is results[0] for r in results)


def test_binding_refuses_bad_input():
    from numtk.games import _games_ext

    with pytest.raises(ValueError, match="unknown game"):
        _games_ext.efg_build("chess", 0)
    with pytest.raises(ValueError, match="n_cards"):
        _games_ext.efg_build("goofspiel", 6)
    with pytest.raises(ValueError, match="player"):
        _games_ext.efg_key_strings("kuhn_poker", 0, 2, np.ones(1, np.uint64))
    with pytest.raises(ValueError, match="malformed"):
        _games_ext.efg_key_strings("goofspiel", 3, 0, np.array([0x12], np.uint64))
    game = KuhnPoker()
    sf = game.sequence_form()
    with pytest.raises(ValueError, match="row_offset"):
        _games_ext.efg_policy_to_sequence(game.uniform_policy()[None], 7, sf.parent_sequence[0],
                                          sf.first_sequence[0], sf.n_actions[0], sf.sequence_action[0])
    with pytest.raises(ValueError, match="inconsistent"):
        _games_ext.efg_policy_to_sequence(game.uniform_policy()[None], 0, sf.parent_sequence[0],
                                          sf.first_sequence[0] + 20, sf.n_actions[0], sf.sequence_action[0])


def test_goofspiel_keys_spell_the_history():
    keys0, keys1 = Goofspiel(3).infoset_keys
    assert keys0[:4] == ["p0|1", "p0|1:1v1|2", "p0|1:1v1|3", "p0|1:1v2|2"]
    assert keys1[:4] == ["p1|1", "p1|1:1v1|2", "p1|1:1v1|3", "p1|1:2v1|2"]


# ---------------------------------------------------------------------------------------------------
# OpenSpiel as an outside oracle (optional)


def _pyspiel_value(state, rows, policy, key_of):
    """Player 0's exact expected payoff by walking an OpenSpiel state with numtk's tabular policy."""
    if state.is_terminal():
        return state.returns()[0]
    if state.is_chance_node():
        return sum(p * _pyspiel_value(state.child(a), rows, policy, key_of) for a, p in state.chance_outcomes())
    player = state.current_player()
    probs = policy[rows[player][key_of(state, player)]]
    return sum(probs[a] * _pyspiel_value(state.child(a), rows, policy, key_of)
               for a in state.legal_actions() if probs[a] > 0)


def _pyspiel_keys(game):
    found = ([], [])

    def walk(state):
        if state.is_terminal():
            return
        if state.is_chance_node():
            for a, _ in state.chance_outcomes():
                walk(state.child(a))
            return
        p = state.current_player()
        key = state.information_state_string(p)
        if key not in found[p]:
            found[p].append(key)
        for a in state.legal_actions():
            walk(state.child(a))

    walk(game.new_initial_state())
    return found


def _row_index(game):
    n0 = game.n_infosets[0]
    return [{k: i + (n0 if p else 0) for i, k in enumerate(keys)} for p, keys in enumerate(game.infoset_keys)]


@pytest.mark.parametrize("tag, spiel_name", [("kuhn", "kuhn_poker"), ("leduc", "leduc_poker")])
def test_keys_and_values_match_openspiel(tag, spiel_name):
    pyspiel = pytest.importorskip("pyspiel")
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import expected_game_score

    sgame = pyspiel.load_game(spiel_name)
    game = game_of(tag)
    assert game.infoset_keys == tuple(_pyspiel_keys(sgame))
    rows = _row_index(game)
    rng = np.random.default_rng(13)
    for i in range(5):
        pi = game.random_policy(rng=rng, deterministic=(i == 4))
        walked = _pyspiel_value(sgame.new_initial_state(), rows, pi,
                                lambda s, p: s.information_state_string(p))
        assert_allclose(value(game, pi), walked, rtol=1e-12, atol=1e-14)
        tab = os_policy.TabularPolicy(sgame)
        for key, row in tab.state_lookup.items():
            player = 0 if key in rows[0] else 1
            tab.action_probability_array[row] = pi[rows[player][key]]
        score = expected_game_score.policy_value(sgame.new_initial_state(), [tab, tab])
        assert_allclose(score, [value(game, pi), -value(game, pi)], rtol=1e-12, atol=1e-14)


def test_goofspiel_values_match_openspiel():
    pyspiel = pytest.importorskip("pyspiel")
    sgame = pyspiel.convert_to_turn_based(pyspiel.load_game(
        "goofspiel(num_cards=3,points_order=random,returns_type=win_loss,imp_info=False)"))
    game = game_of("goofspiel3")
    rows = _row_index(game)

    def key_of(state, player):
        # OpenSpiel's history: (prize - 1, bid0 - 1, bid1 - 1) per round; keys are numtk's own.
        h = [a + 1 for a in state.history()]
        done = len(h) // 3
        parts = [f"p{player}"] + [f"{h[3 * r]}:{h[3 * r + 1 + player]}v{h[3 * r + 2 - player]}"
                                  for r in range(done)]
        return "|".join(parts + [str(h[3 * done])])

    rng = np.random.default_rng(17)
    for i in range(5):
        pi = game.random_policy(rng=rng, deterministic=(i == 4))
        walked = _pyspiel_value(sgame.new_initial_state(), rows, pi, key_of)
        assert_allclose(value(game, pi), walked, rtol=1e-12, atol=1e-14)
