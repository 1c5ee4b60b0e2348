"""numtk.algebra against independent oracles: Fröberg's theorem with networkx's chordality test, Hochster's
formula and Reisner's criterion written on tuples with Fraction arithmetic (tests/algebra/_algebra_reference.py),
the Johnson graph and networkx diameters, the topology of the sphere, the torus and the real projective plane,
and brute-force generator graphs and colon ideals."""

import itertools
import math
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from numtk.algebra import (dual_complex_facets, dual_graph_diameter, generator_graph, has_linear_quotients,
                           has_linear_resolution, is_cohen_macaulay, linear_quotient_order, masks_to_subsets,
                           random_generators, reduced_betti_numbers, squarefree_veronese, subsets_to_masks)
from numtk.algebra._reisner import rank_gf2, rank_mod_p, rank_q

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _algebra_reference as ref  # noqa: E402

FIELDS = ("Q", "GF2")
METHODS = ("auto", "reisner")

# the 6-vertex real projective plane (the hemi-icosahedron): H~_1 = Z/2, so CM over Q and not over GF(2)
RP2 = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5), (0, 5, 1), (1, 2, 4), (2, 3, 5), (3, 4, 1), (4, 5, 2), (5, 1, 3)]
# Möbius' 7-vertex torus
TORUS = [tuple(sorted(((i + a) % 7, (i + b) % 7, (i + c) % 7))) for i in range(7) for a, b, c in ((0, 1, 3), (0, 2, 3))]


def random_graph_edges(rng, n, p):
    return [e for e in itertools.combinations(range(n), 2) if rng.random() < p]


def grow_linear_quotients(rng, n, d, steps):
    """Random generator sets built by appending d-subsets that keep linear quotients (the order is kept)."""
    pool = [tuple(S) for S in itertools.combinations(range(n), d)]
    G = [pool[rng.integers(len(pool))]]
    for _ in range(steps):
        cands = [S for S in pool if S not in G and ref.lq_brute(G + [S])]
        if not cands:
            break
        G.append(cands[rng.integers(len(cands))])
    return G


# ------------------------------------------------------------------------------------------------------------
# Fröberg: the edge ideal of H is linear iff the complement of H is chordal
# ------------------------------------------------------------------------------------------------------------
def test_froberg_150_graphs_on_6_vertices():
    rng = np.random.default_rng(2026)
    seen = {True: 0, False: 0}
    graphs = 0
    while graphs < 150:
        E = random_graph_edges(rng, 6, rng.uniform(0.3, 0.9))
        if not E:
            continue
        graphs += 1
        H = nx.Graph()
        H.add_nodes_from(range(6))
        H.add_edges_from(E)
        chordal = nx.is_chordal(nx.complement(H))
        seen[chordal] += 1
        G = subsets_to_masks(E, 6)
        for field in FIELDS:
            for method in METHODS:
                assert has_linear_resolution(G, 6, field=field, method=method) == chordal, (E, field, method)
    assert graphs == 150 and min(seen.values()) >= 30  # both answers well represented


# ------------------------------------------------------------------------------------------------------------
# squarefree Veronese and the Johnson graph
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, d, diameter", [(5, 2, 2), (6, 3, 3), (7, 3, 3), (7, 2, 2), (6, 1, 1), (4, 4, 0)])
def test_veronese_is_linear_with_johnson_graph(n, d, diameter):
    V = squarefree_veronese(n, d)
    assert len(V) == math.comb(n, d)
    for field in FIELDS:
        assert has_linear_resolution(V, n, field=field, method="reisner")
    assert has_linear_quotients(V)
    A = generator_graph(V)
    subsets = [set(S) for S in masks_to_subsets(V)]
    J = np.array([[len(S & T) == d - 1 and S != T for T in subsets] for S in subsets])
    np.testing.assert_array_equal(A, J)
    assert dual_graph_diameter(V) == diameter == min(d, n - d)
    if len(V) > 1:
        assert nx.diameter(nx.from_numpy_array(A.astype(int))) == diameter


# ------------------------------------------------------------------------------------------------------------
# linear quotients
# ------------------------------------------------------------------------------------------------------------
def test_linear_quotients_against_colon_ideals():
    rng = np.random.default_rng(3)
    agree = {True: 0, False: 0}
    for _ in range(300):
        n, d = int(rng.integers(4, 8)), int(rng.integers(1, 4))
        m = int(rng.integers(1, min(9, math.comb(n, d)) + 1))
        G = random_generators(n, d, m, rng=rng)
        expect = ref.lq_brute(masks_to_subsets(G))
        assert has_linear_quotients(G) == expect
        agree[expect] += 1
    assert min(agree.values()) >= 30


def test_linear_quotients_imply_reisner_linear():
    rng = np.random.default_rng(5)
    for trial in range(25):
        n, d = (6, 2) if trial % 3 == 0 else ((7, 3) if trial % 3 == 1 else (7, 4))
        T = grow_linear_quotients(rng, n, d, int(rng.integers(2, 12)))
        G = subsets_to_masks(T, n)
        assert has_linear_quotients(G)
        for field in FIELDS:
            assert has_linear_resolution(G, n, field=field, method="reisner")
        perm = rng.permutation(len(G))  # linearity does not depend on the order
        assert has_linear_resolution([G[i] for i in perm], n, method="reisner")


def test_linear_quotient_order_returns_valid_orders():
    rng = np.random.default_rng(11)
    found = 0
    for trial in range(30):
        n, d = (7, 3) if trial % 2 else (6, 2)
        T = grow_linear_quotients(rng, n, d, int(rng.integers(3, 10)))
        G = subsets_to_masks(T, n)
        shuffled = [G[i] for i in rng.permutation(len(G))]
        order = linear_quotient_order(shuffled)
        if order is not None:
            found += 1
            assert sorted(order) == sorted(G)
            assert has_linear_quotients(order)
    assert found >= 25  # a heuristic, but it should rarely fail on shellable instances this small
    V = squarefree_veronese(6, 3)
    order = linear_quotient_order([V[i] for i in rng.permutation(len(V))])
    assert order is not None and has_linear_quotients(order)


def test_linear_quotient_order_none_when_not_linear():
    # a 5-cycle edge ideal is not linear, so no order can have linear quotients
    G = subsets_to_masks([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)])
    assert linear_quotient_order(G) is None
    assert linear_quotient_order(G, max_starts=2) is None


# ------------------------------------------------------------------------------------------------------------
# the characteristic dependence: the Alexander dual of an ideal is RP^2
# ------------------------------------------------------------------------------------------------------------
def test_rp2_ideal_is_linear_over_q_not_gf2():
    rp2 = subsets_to_masks(RP2, 6)
    G = [0b111111 ^ F for F in rp2]  # generators [6] \ F: 3-subsets whose Alexander dual complex is RP^2
    assert dual_complex_facets(G, 6) == rp2
    for method in METHODS:
        assert has_linear_resolution(G, 6, field="Q", method=method)
        assert not has_linear_resolution(G, 6, field="GF2", method=method)
    assert ref.reisner_cm(RP2, "Q") and not ref.reisner_cm(RP2, "GF2")
    assert ref.hochster_linear(masks_to_subsets(G), 6, "Q")
    assert not ref.hochster_linear(masks_to_subsets(G), 6, "GF2")
    assert linear_quotient_order(G) is None  # linear quotients would be field independent
    assert dual_graph_diameter(G) <= 3


def test_reisner_against_hochster_on_random_ideals():
    rng = np.random.default_rng(7)
    seen = {True: 0, False: 0}
    for trial in range(40):
        n, d = (6, 3) if trial % 2 else (5, int(rng.integers(2, 4)))
        if trial % 4 == 0:  # grown with linear quotients, then perturbed by one random generator
            T = grow_linear_quotients(rng, n, d, int(rng.integers(2, 8)))
            G = subsets_to_masks(T, n)
            extra = random_generators(n, d, 1, rng=rng)[0]
            if extra not in G:
                G.append(extra)
        else:
            G = random_generators(n, d, int(rng.integers(2, min(12, math.comb(n, d)) + 1)), rng=rng)
        field = FIELDS[(trial // 2) % 2]
        expect = ref.hochster_linear(masks_to_subsets(G), n, field)
        seen[expect] += 1
        for method in METHODS:
            assert has_linear_resolution(G, n, field=field, method=method) == expect
    assert min(seen.values()) >= 8


def test_is_cohen_macaulay_against_reference():
    rng = np.random.default_rng(13)
    for trial in range(40):
        n = 6
        k = int(rng.integers(2, 4))
        F = random_generators(n, k, int(rng.integers(1, 8)), rng=rng)
        field = FIELDS[trial % 2]
        assert is_cohen_macaulay(F, n, field=field) == ref.reisner_cm(masks_to_subsets(F), field)
    # non-pure: a triangle with a pendant edge is not CM; a non-maximal face given as a facet is ignored
    assert not is_cohen_macaulay(subsets_to_masks([(0, 1, 2), (2, 3)]))
    assert is_cohen_macaulay(subsets_to_masks([(0, 1, 2), (0, 1)]))
    assert is_cohen_macaulay(subsets_to_masks([(0, 1, 2), (1, 2, 3)]), field="GF2")
    assert is_cohen_macaulay(subsets_to_masks(RP2), field="Q") and not is_cohen_macaulay(subsets_to_masks(RP2),
                                                                                              field="GF2")
    assert not is_cohen_macaulay(subsets_to_masks(TORUS), field="Q")  # H~_1(torus) = Q^2


# ------------------------------------------------------------------------------------------------------------
# the homology kernel
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", FIELDS)
def test_betti_numbers_of_small_complexes(field):
    for k in range(1, 6):  # the boundary of a k-simplex is a (k - 1)-sphere
        sphere = squarefree_veronese(k + 1, k)
        assert reduced_betti_numbers(sphere, field=field).tolist() == [0] * (k - 1) + [1]
    assert reduced_betti_numbers(subsets_to_masks(TORUS), field=field).tolist() == [0, 2, 1]
    rp2 = reduced_betti_numbers(subsets_to_masks(RP2), field=field).tolist()
    assert rp2 == ([0, 0, 0] if field == "Q" else [0, 1, 1])
    assert reduced_betti_numbers([0b1, 0b10, 0b100], field=field).tolist() == [2]  # three points
    assert reduced_betti_numbers([0b111], field=field).tolist() == [0, 0, 0]  # a simplex is contractible
    assert reduced_betti_numbers([0], field=field).tolist() == []  # the complex {empty set}


def test_betti_numbers_against_reference_on_random_complexes():
    rng = np.random.default_rng(17)
    for trial in range(30):
        F = random_generators(7, int(rng.integers(2, 5)), int(rng.integers(2, 12)), rng=rng)
        field = FIELDS[trial % 2]
        h = ref.homology(ref.faces_of(masks_to_subsets(F)), field)
        got = reduced_betti_numbers(F, field=field)
        assert got.tolist() == [h[i] for i in range(len(got))]


def test_exact_rank_over_q_against_fractions():
    rng = np.random.default_rng(19)
    for _ in range(40):
        r, c = rng.integers(1, 12, size=2)
        k = int(rng.integers(1, min(r, c) + 1))
        M = (rng.integers(-3, 4, size=(r, k)) @ rng.integers(-3, 4, size=(k, c))).astype(np.int64)
        expect = ref.rank(M.tolist(), "Q")
        assert rank_q(M) == expect
        assert rank_mod_p(M, 2147483647) == expect  # no nonzero maximal minor here is a multiple of 2**31 - 1
        assert rank_gf2([sum((int(M[i, j]) & 1) << i for i in range(r)) for j in range(c)]) == ref.rank(
            M.tolist(), "GF2")
    # torsion: this matrix has rank 2 over Q and rank 1 mod 2 and mod 3 (its invariant factors are 1, 6)
    M = np.array([[1, 1], [1, 7]])
    assert rank_q(M) == 2 and rank_mod_p(M, 2) == 1 and rank_mod_p(M, 3) == 1
    # a large prime power determinant: the Hadamard certificate must use several primes
    p = 2147483647
    M = np.array([[p, 0], [0, 1]], dtype=np.int64)
    assert rank_mod_p(M, p) == 1 and rank_q(M) == 2


# ------------------------------------------------------------------------------------------------------------
# graphs and diameters
# ------------------------------------------------------------------------------------------------------------
def test_generator_graph_against_brute_force():
    rng = np.random.default_rng(23)
    for _ in range(30):
        n, d = int(rng.integers(3, 12)), int(rng.integers(1, 4))
        d = min(d, n)
        G = random_generators(n, d, int(rng.integers(1, min(30, math.comb(n, d)) + 1)), rng=rng)
        S = [set(s) for s in masks_to_subsets(G)]
        expect = np.array([[len(a & b) == d - 1 and a != b for b in S] for a in S])
        np.testing.assert_array_equal(generator_graph(G), expect)
        np.testing.assert_array_equal(generator_graph(np.array(G, dtype=np.int64), d), expect)


@pytest.mark.parametrize("n, d, m", [(7, 3, 6), (12, 3, 40), (11, 4, 300)])
def test_diameter_against_networkx(n, d, m):
    rng = np.random.default_rng(m)
    connected = disconnected = 0
    for _ in range(12 if m < 300 else 3):
        G = random_generators(n, d, m, rng=rng)
        H = nx.from_numpy_array(generator_graph(G).astype(int))
        if nx.is_connected(H):
            connected += 1
            assert dual_graph_diameter(G) == nx.diameter(H)
        else:
            disconnected += 1
            assert dual_graph_diameter(G) == math.inf
    assert connected >= 1 and (disconnected >= 1 or m > 6)


def test_diameter_on_random_connected_graphs():
    rng = np.random.default_rng(29)
    checked = 0
    while checked < 40:
        n, d = 8, int(rng.integers(2, 5))
        G = random_generators(n, d, int(rng.integers(2, 25)), rng=rng)
        H = nx.from_numpy_array(generator_graph(G).astype(int))
        if nx.is_connected(H):
            checked += 1
            assert dual_graph_diameter(G) == nx.diameter(H)


def test_linear_means_connected():
    rng = np.random.default_rng(31)
    for _ in range(10):
        G = random_generators(7, 3, int(rng.integers(5, 20)), linear=True, rng=rng)
        assert has_linear_resolution(G, 7, method="reisner")
        assert dual_graph_diameter(G) < math.inf


def test_edge_cases():
    assert dual_graph_diameter([]) == 0 and dual_graph_diameter([0b1]) == 0
    assert generator_graph([]).shape == (0, 0)
    assert has_linear_resolution([], 3) and has_linear_resolution([0b1], 1)
    assert has_linear_quotients([]) and has_linear_quotients([0b11])
    assert linear_quotient_order([]) == []
    # d = 1: any set of variables is linear and its graph is complete
    G = [1 << v for v in (0, 2, 5)]
    assert has_linear_resolution(G, 6, method="reisner") and dual_graph_diameter(G) == 1
    # d = n: one generator
    assert has_linear_resolution([0b1111], 4, method="reisner")
    # int32 / int64 arrays and numpy integers
    V = squarefree_veronese(5, 2)
    for dtype in (np.int32, np.int64, np.uint64):
        a = np.array(V, dtype=dtype)
        assert has_linear_resolution(a, 5) and dual_graph_diameter(a) == 2 and has_linear_quotients(a)
    # the largest ground set
    top = [(1 << 62) - 1 ^ (1 << 61), (1 << 62) - 1 ^ (1 << 60)]
    assert dual_graph_diameter(top) == 1 and has_linear_quotients(top)
    assert subsets_to_masks([(61, 0)]) == [(1 << 61) | 1]


# ------------------------------------------------------------------------------------------------------------
# random generators
# ------------------------------------------------------------------------------------------------------------
def test_random_generators():
    G = random_generators(8, 3, 20, rng=0)
    assert G == random_generators(8, 3, 20, rng=0)
    assert len(set(G)) == 20 and all(bin(x).count("1") == 3 and x < 1 << 8 for x in G)
    big = random_generators(40, 5, 50, rng=1)  # sampled without listing C(40, 5)
    assert len(set(big)) == 50 and all(bin(x).count("1") == 5 and x < 1 << 40 for x in big)
    assert sorted(random_generators(5, 2, 10, rng=2)) == sorted(squarefree_veronese(5, 2))
    L = random_generators(7, 2, 12, linear=True, field="GF2", rng=3)
    assert has_linear_resolution(L, 7, field="GF2", method="reisner")
    # uniformity: each of the C(5, 2) = 10 subsets is drawn with frequency m / 10
    g = np.random.default_rng(4)
    counts = np.zeros(32)
    for _ in range(2000):
        for x in random_generators(5, 2, 3, rng=g):
            counts[x] += 1
    freq = counts[counts > 0] / 2000
    assert freq.size == 10 and np.allclose(freq, 0.3, atol=0.05)


def test_random_generators_gives_up_clearly():
    # 7 edges of K_6 whose complement (8 edges) is chordal are rare; one try will not do
    with pytest.raises(RuntimeError, match="max_tries"):
        for seed in range(20):
            random_generators(6, 2, 7, linear=True, rng=seed, max_tries=1)


# ------------------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, exc, match", [
    (lambda: generator_graph([0b11, 0b111]), ValueError, "one size"),
    (lambda: generator_graph([0b11, 0b110], d=3), ValueError, "`d`"),
    (lambda: generator_graph([0b11, 0b11]), ValueError, "distinct"),
    (lambda: generator_graph([0b11, -1]), ValueError, "`G`"),
    (lambda: generator_graph([(0, 1)]), TypeError, "subsets_to_masks"),
    (lambda: generator_graph([1.0]), TypeError, "`G`"),
    (lambda: generator_graph(np.array([1.0, 2.0])), TypeError, "`G`"),
    (lambda: generator_graph(5), TypeError, "`G`"),
    (lambda: generator_graph([0]), ValueError, "empty set"),
    (lambda: dual_graph_diameter([1 << 62]), ValueError, "`G`"),
    (lambda: has_linear_resolution([0b1001], 3), ValueError, "not inside"),
    (lambda: has_linear_resolution([0b11], 63), ValueError, "`n`"),
    (lambda: has_linear_resolution([0b11], 0), ValueError, "`n`"),
    (lambda: has_linear_resolution([0b11], 3, field="R"), ValueError, "`field`"),
    (lambda: has_linear_resolution([0b11], 3, method="x"), ValueError, "`method`"),
    (lambda: has_linear_quotients([0b11, 0b1]), ValueError, "`G_ordered`"),
    (lambda: random_generators(5, 2, 11), ValueError, "`m`"),
    (lambda: random_generators(5, 6, 1), ValueError, "`d`"),
    (lambda: random_generators(63, 2, 1), ValueError, "`n`"),
    (lambda: random_generators(5, 2, 2, linear="yes"), TypeError, "`linear`"),
    (lambda: random_generators(5, 2, 2, max_tries=0), ValueError, "`max_tries`"),
    (lambda: squarefree_veronese(5, 0), ValueError, "`d`"),
    (lambda: squarefree_veronese(60, 30), ValueError, "C\\(n, d\\)"),
    (lambda: subsets_to_masks([(0, 5)], 5), ValueError, "`subsets`"),
    (lambda: subsets_to_masks([(0, 0)]), ValueError, "twice"),
    (lambda: subsets_to_masks([5]), TypeError, "`subsets`"),
    (lambda: reduced_betti_numbers([]), ValueError, "`facets`"),
    (lambda: is_cohen_macaulay([0b1000], 3), ValueError, "`facets`"),
    (lambda: linear_quotient_order([0b11], max_starts=0), ValueError, "`max_starts`"),
])
def test_validation(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_unused_variables_only_cone_the_dual_complex():
    # has_linear_resolution works on the generators' support; the full dual complex on [n] is a cone over
    # that one, and Reisner's criterion on the cone (is_cohen_macaulay) must give the same answer
    rng = np.random.default_rng(37)
    seen = {True: 0, False: 0}
    for trial in range(30):
        G = random_generators(6, 3, int(rng.integers(2, 12)), rng=rng)
        field = FIELDS[trial % 2]
        expect = has_linear_resolution(G, 6, field=field, method="reisner")
        seen[expect] += 1
        for n in (7, 8):
            assert has_linear_resolution(G, n, field=field, method="reisner") == expect
            assert is_cohen_macaulay(dual_complex_facets(G, n), n, field=field) == expect
    assert min(seen.values()) >= 5
    # far more variables than the check could enumerate: only the support counts
    assert has_linear_resolution(squarefree_veronese(6, 3), 62, method="reisner")


def test_too_many_faces_is_refused():
    G = [((1 << 40) - 1) ^ (1 << v) for v in range(3)]  # 39-subsets of [40]: dual facets of 2 vertices, fine
    assert has_linear_resolution(G, 40, method="reisner")
    G = subsets_to_masks([(0, 1), (1, 2), (2, 3)] + [(v, v + 1) for v in range(4, 30)], 31)
    with pytest.raises(ValueError, match="`G`.*faces"):
        has_linear_resolution(G, 31, method="reisner")
    with pytest.raises(ValueError, match="`facets`.*faces"):
        reduced_betti_numbers([(1 << 30) - 1])
    with pytest.raises(ValueError, match="`facets`.*faces"):
        is_cohen_macaulay([(1 << 30) - 1])
    # the budget is 2**16 faces: a 17-vertex simplex is refused, a 10-vertex one (a cone: CM) is fine
    with pytest.raises(ValueError, match="`facets`.*faces"):
        is_cohen_macaulay([(1 << 17) - 1])
    assert is_cohen_macaulay([(1 << 10) - 1]) and reduced_betti_numbers([(1 << 10) - 1]).tolist() == [0] * 10


def _permute(G, perm):
    return [sum(1 << int(perm[v]) for v in range(x.bit_length()) if x >> v & 1) for x in G]


def test_relabelling_variables_changes_nothing():
    rng = np.random.default_rng(41)
    for trial in range(40):
        n, d = 7, int(rng.integers(2, 5))
        G = random_generators(n, d, int(rng.integers(2, 15)), rng=rng)
        perm = rng.permutation(n)
        H = _permute(G, perm)
        field = FIELDS[trial % 2]
        assert has_linear_resolution(H, n, field=field, method="reisner") == has_linear_resolution(
            G, n, field=field, method="reisner")
        assert dual_graph_diameter(H) == dual_graph_diameter(G)
        np.testing.assert_array_equal(generator_graph(H), generator_graph(G))
        assert has_linear_quotients(H) == has_linear_quotients(G)


def test_reisner_against_hochster_seven_variables():
    rng = np.random.default_rng(43)
    seen = {True: 0, False: 0}
    for trial in range(60):
        d = 3 if trial % 2 else 4
        if trial % 3 == 0:
            G = subsets_to_masks(grow_linear_quotients(rng, 7, d, int(rng.integers(3, 10))), 7)
        else:
            G = random_generators(7, d, int(rng.integers(3, 14)), rng=rng)
        field = FIELDS[(trial // 2) % 2]
        expect = ref.hochster_linear(masks_to_subsets(G), 7, field)
        seen[expect] += 1
        assert has_linear_resolution(G, 7, field=field, method="reisner") == expect
    assert min(seen.values()) >= 12


# ------------------------------------------------------------------------------------------------------------
# the compiled kernel against Python
# ------------------------------------------------------------------------------------------------------------
def _gf2_failures_reference(F):
    """Every (sigma, k) with nonzero reduced GF(2) homology of lk(sigma) in dimension k - 1 < dim lk, in the
    kernel's order (larger faces first, then increasing masks, then increasing k), from tuples."""
    top = bin(F[0]).count("1")
    faces = sorted(_faces(F))
    out = []
    for s in range(top - 2, -1, -1):
        for sigma in [f for f in faces if bin(f).count("1") == s]:
            link = {tuple(v for v in range(62) if (f ^ sigma) >> v & 1) for f in faces if f & sigma == sigma}
            h = ref.homology(link, "GF2")
            out += [(sigma, i + 1) for i in range(0, top - s - 1) if h.get(i, 0)]
    return out


def _faces(F):
    out = set()
    for f in F:
        sub = f
        while True:
            out.add(sub)
            if sub == 0:
                break
            sub = (sub - 1) & f
    return out


def test_compiled_failures_against_reference():
    from numtk.algebra import _algebra_ext
    from numtk.algebra._reisner import _cm, _cm_python

    rng = np.random.default_rng(47)
    cases = [[0], [0b1], [0b1, 0b10], [0b111], [0b11, 0b1100], subsets_to_masks(RP2), subsets_to_masks(TORUS),
             squarefree_veronese(5, 4), squarefree_veronese(6, 3)]
    for _ in range(60):
        n = int(rng.integers(1, 8))
        k = int(rng.integers(0, n + 1))
        cases.append(random_generators(n, k, int(rng.integers(1, min(10, math.comb(n, k)) + 1)), rng=rng)
                     if k else [0])
    for F in cases:
        sig, ks = _algebra_ext.reisner_gf2_failures(np.asarray(F, dtype=np.uint64), False)
        assert list(zip(sig.tolist(), ks.tolist())) == _gf2_failures_reference(F), F
        first = _algebra_ext.reisner_gf2_failures(np.asarray(F, dtype=np.uint64), True)
        assert first[0].tolist() == sig.tolist()[:1]
        for field in FIELDS:
            assert _cm(F, field) == _cm_python(F, field) == ref.reisner_cm(masks_to_subsets(F), field)


def test_compiled_kernel_refuses_bad_input():
    from numtk.algebra import _algebra_ext

    with pytest.raises(ValueError, match="`facets`"):
        _algebra_ext.reisner_gf2_failures(np.array([0b1, 0b11], dtype=np.uint64), False)  # not pure
    with pytest.raises(ValueError, match="`facets`"):
        _algebra_ext.reisner_gf2_failures(np.array([1 << 63], dtype=np.uint64), False)
    with pytest.raises(ValueError, match="`facets`"):
        _algebra_ext.reisner_gf2_failures(np.array([(1 << 40) - 1], dtype=np.uint64), False)  # 2**40 faces
    with pytest.raises(ValueError, match="`facets`"):
        _algebra_ext.reisner_gf2_failures(np.array([(1 << 17) - 1], dtype=np.uint64), False)  # > 2**16 faces
    with pytest.raises(ValueError, match="`facets`"):
        _algebra_ext.reisner_gf2_failures(np.zeros((2, 2), dtype=np.uint64), False)
    with pytest.raises(TypeError):
        _algebra_ext.reisner_gf2_failures(np.array([1.5]), False)
    sig, ks = _algebra_ext.reisner_gf2_failures(np.zeros(0, dtype=np.uint64), False)
    assert sig.size == ks.size == 0


def test_connectivity_shortcut_against_networkx():
    from numtk.algebra._ideals import _connected

    rng = np.random.default_rng(53)
    seen = {True: 0, False: 0}
    for _ in range(60):
        n, d = int(rng.integers(6, 10)), int(rng.integers(2, 4))
        G = random_generators(n, d, int(rng.integers(1, 16)), rng=rng)
        H = nx.from_numpy_array(generator_graph(G).astype(int))
        expect = nx.is_connected(H)
        seen[expect] += 1
        assert _connected(G, d) == expect
    assert min(seen.values()) >= 10
