"""merge_experts: pairing, merging and packing a layer (spec moe.md B2.1, B2.3, B3, B4, B6), and the tiny MoE
trained on scikit-learn's digits on which PuzzleMoE is compared with its baselines.

Oracles: brute force over every perfect matching, the spec's NumPy packing and decoding formulas (B2.3) applied
to puzzle_merge's output, per-matrix merges with the norms B2.1 assigns, and finite differences for the tiny
model's gradients.
"""

import itertools

import numpy as np
import pytest

from numtk.moe import merge_experts, puzzle_merge, reconstruction_error
from numtk.moe import _tiny_moe


def numpy_pack(res):
    """B2.3 packing of puzzle_merge's fields, underflow='saturate', in NumPy."""
    m16 = (res.magnitude.view(np.uint32) >> 16).astype(np.uint32)
    e = (m16 >> 7) & 0xFF
    low = e < 112
    field = np.where(low, 0, e - 112)
    mant = np.where(low, 0, m16 & 0x7F)
    u = lambda b: np.asarray(b, np.uint32)  # noqa: E731
    words = (u(res.sign_i) << 15) | (u(res.sign_j) << 14) | (u(res.mask_i) << 13) | (u(res.mask_j) << 12) \
        | (field << 7) | mant
    return words.astype(np.uint16), int(low.sum())


def numpy_decode(words, pos):
    """B2.3 decoding of expert ``pos`` as float32."""
    w = words.astype(np.uint32)
    mask = (w >> (13 - pos)) & 1
    sign = (w >> (15 - pos)) & 1
    bits = (sign << 15) | ((w & 0x0F80) + (112 << 7)) | (w & 0x7F)
    return (np.where(mask == 1, bits, 0) << 16).astype(np.uint32).view(np.float32)


def matchings(items):
    if not items:
        yield []
        return
    a = items[0]
    for k in range(1, len(items)):
        rest = items[1:k] + items[k + 1:]
        for m in matchings(rest):
            yield [(a, items[k])] + m


def rel_distance(A, B):
    a, b = np.abs(A).astype(np.float64), np.abs(B).astype(np.float64)
    return np.linalg.norm(a - b) / (np.linalg.norm(a) + np.linalg.norm(b))


def clustered_experts(N=8, shape=(12, 10), seed=0, noise=0.3, groups=False):
    """N experts in N/2 noisy pairs of a common matrix, shuffled (and the pair of each expert)."""
    g = np.random.default_rng(seed)
    base = g.normal(0, 0.02, (N // 2,) + shape)
    experts = np.concatenate([base, base]) * (1 + noise * g.normal(size=(N,) + shape))
    perm = g.permutation(N)
    out = experts[perm].astype(np.float32)
    return (out, perm % (N // 2)) if groups else out


# --------------------------------------------------------------------------------------------------
# pairing
# --------------------------------------------------------------------------------------------------
def test_auto_pairing_is_the_least_total_distance_and_greedy_is_a_matching():
    for seed in range(3):
        experts = np.random.default_rng(seed).normal(0, 0.02, (8, 6, 5)).astype(np.float32)
        experts[3] = experts[6] * 1.1                                # one near-copy
        D = np.array([[rel_distance(a, b) for b in experts] for a in experts])
        best = min(sum(D[e, f] for e, f in m) for m in matchings(list(range(8))))
        auto = merge_experts(experts, "auto")
        assert auto.pairing == "auto"
        assert sum(D[e, f] for e, f in auto.pairs) == pytest.approx(best, rel=1e-9)
        np.testing.assert_allclose(auto.distance, [D[e, f] for e, f in auto.pairs], rtol=1e-9)
        assert [3, 6] in auto.pairs.tolist()
        greedy = merge_experts(experts, "greedy")
        assert sorted(greedy.pairs.ravel().tolist()) == list(range(8))
        assert sum(D[e, f] for e, f in greedy.pairs) >= best - 1e-12
        closest = np.unravel_index(np.argmin(D + np.eye(8) * 9), D.shape)
        assert sorted(closest) == greedy.pairs[0].tolist()


def test_auto_pairing_finds_the_planted_pairs():
    experts, group = clustered_experts(seed=1, groups=True)
    res = merge_experts(experts)
    assert all(group[e] == group[f] for e, f in res.pairs)
    # planted partners share far more positions than unrelated Gaussian experts (0.48 at tau = 0.4)
    assert res.similarity.min() > 0.8
    seq = merge_experts(experts, "sequential")
    assert seq.pairs.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert seq.distance.sum() > res.distance.sum()


def test_given_pairs_and_the_slots():
    experts = clustered_experts(N=6, seed=2)
    pairs = np.array([[4, 1], [0, 5], [3, 2]])
    res = merge_experts(experts, pairs)
    assert res.pairing == "given" and res.pairs.tolist() == pairs.tolist()
    for e in range(6):
        p, pos = res.slot[e]
        assert res.pairs[p, pos] == e


# --------------------------------------------------------------------------------------------------
# merging and packing
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tau", [0.0, 0.4, 1.0])
def test_packed_layer_equals_the_spec_packing_of_each_merge(tau):
    experts = clustered_experts(N=6, seed=3)
    g = np.random.default_rng(4)
    norms = g.uniform(0.5, 2.0, (6, 10))
    res = merge_experts(experts, "sequential", activation_norms=norms, similarity_threshold=tau)
    assert res.packed.dtype == np.uint16 and res.packed.shape == (3, 12, 10)
    for p, (e, f) in enumerate(res.pairs):
        m = puzzle_merge(experts[e], experts[f], (norms[e], norms[f]), tau)
        words, clamped = numpy_pack(m)
        np.testing.assert_array_equal(res.packed[p], words)
        assert res.n_clamped[p] == clamped
        np.testing.assert_allclose(res.density[p], m.density)
        assert res.similarity[p] == pytest.approx(m.similarity)
        for pos, x in enumerate((e, f)):
            decoded = numpy_decode(res.packed[p], pos)
            ok = m.magnitude >= 2.0**-15                     # below, 'saturate' stores 2**-15
            np.testing.assert_array_equal(decoded[ok], m.reconstruction[pos][ok])
            assert res.error[p, pos] == pytest.approx(reconstruction_error(decoded, experts[x]), rel=1e-9)
    # memory: N/2 packed words per position against N bf16 weights
    assert res.packed_bytes == 3 * 12 * 10 * 2 and res.bf16_bytes == 6 * 12 * 10 * 2
    assert res.memory_ratio == 0.5


def test_clamped_magnitudes_are_counted():
    experts = clustered_experts(N=4, seed=5)
    experts[0, 0, :4] = experts[1, 0, :4] = 0.0                     # exact zeros: shared magnitude 0
    experts[2, 1, :3] = 1e-6
    experts[3, 1, :3] = -2e-6
    res = merge_experts(experts, [[0, 1], [2, 3]])
    m = puzzle_merge(experts[[0, 2]], experts[[1, 3]])
    assert res.n_clamped.tolist() == [int(np.sum(m.magnitude[k] < 2.0**-15)) for k in range(2)]
    assert res.n_clamped[0] >= 4 and res.n_clamped[1] >= 3
    zero = merge_experts(experts, [[0, 1], [2, 3]], underflow="zero")
    assert zero.n_clamped.tolist() == res.n_clamped.tolist()


def gated_layer(N=4, D=10, H=6, C=5, seed=6):
    g = np.random.default_rng(seed)
    return {"w_gate": g.normal(0, 0.1, (N, H, D)).astype(np.float32),
            "w_up": g.normal(0, 0.1, (N, H, D)).astype(np.float32),
            "w_down": g.normal(0, 0.1, (N, C, H)).astype(np.float32)}


def test_gated_experts_are_merged_matrix_by_matrix_with_their_norms():
    layer = gated_layer()
    g = np.random.default_rng(7)
    hidden, inter = g.uniform(0.1, 3, (4, 10)), g.uniform(0.1, 3, (4, 6))
    res = merge_experts(layer, [[0, 2], [3, 1]], activation_norms={"hidden": hidden, "intermediate": inter})
    assert set(res.packed) == {"w_gate", "w_up", "w_down"}
    for p, (e, f) in enumerate(res.pairs):
        for key, n in (("w_gate", hidden), ("w_up", hidden), ("w_down", inter)):
            m = puzzle_merge(layer[key][e], layer[key][f], (n[e], n[f]))
            np.testing.assert_array_equal(res.packed[key][p], numpy_pack(m)[0])
    # error over an expert's three matrices together
    e, f = res.pairs[0]
    num = sum(np.sum((numpy_decode(res.packed[k][0], 0).astype(np.float64) - layer[k][e]) ** 2) for k in layer)
    den = sum(np.sum(layer[k][e].astype(np.float64) ** 2) for k in layer)
    assert res.error[0, 0] == pytest.approx(np.sqrt(num / den), rel=1e-9)
    assert res.memory_ratio == 0.5
    # the other layouts of the same layer give the same words
    triples = [tuple(layer[k][e] for k in ("w_gate", "w_up", "w_down")) for e in range(4)]
    dicts = [{k: layer[k][e] for k in layer} for e in range(4)]
    for form in (tuple(layer[k] for k in ("w_gate", "w_up", "w_down")), triples, dicts):
        other = merge_experts(form, [[0, 2], [3, 1]], activation_norms=(hidden, inter))
        for k in layer:
            np.testing.assert_array_equal(other.packed[k], res.packed[k])


def test_bf16_bit_inputs_and_a_list_of_matrices():
    experts = clustered_experts(N=4, seed=8)
    u = experts.view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)        # round to nearest even
    values = (bits.astype(np.uint32) << 16).view(np.float32)
    a = merge_experts(bits, "sequential")
    b = merge_experts(list(values), "sequential")
    np.testing.assert_array_equal(a.packed, b.packed)
    np.testing.assert_array_equal(a.error, b.error)


def test_merge_experts_refuses_bad_layers():
    experts = clustered_experts(N=4, seed=9)
    with pytest.raises(ValueError, match="even"):
        merge_experts(experts[:3])
    with pytest.raises(ValueError, match="pairs"):
        merge_experts(experts, [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="pairs"):
        merge_experts(experts, [[0, 1]])
    with pytest.raises(ValueError, match="pairs"):
        merge_experts(experts, "random")
    with pytest.raises(TypeError, match="pairs"):
        merge_experts(experts, [[0.0, 1.0], [2.0, 3.0]])
    with pytest.raises(ValueError, match="activation_norms"):
        merge_experts(experts, activation_norms=np.ones((4, 12)))          # d_out norms: the wrong axis
    with pytest.raises(ValueError, match="activation_norms"):
        merge_experts(experts, activation_norms=-np.ones((4, 10)))
    with pytest.raises(ValueError, match="experts"):
        merge_experts([experts[0], experts[1][:5]])
    with pytest.raises(ValueError, match="experts"):
        merge_experts({"w_gate": experts, "w_up": experts})
    with pytest.raises(TypeError, match="experts"):
        merge_experts("layer")
    with pytest.raises(ValueError, match="underflow"):
        merge_experts(experts, underflow="round")
    with pytest.raises(ValueError, match="similarity_threshold"):
        merge_experts(experts, similarity_threshold=-0.1)
    with pytest.raises(ValueError, match="workers"):
        merge_experts(experts, workers=0)
    layer = gated_layer()
    with pytest.raises(ValueError, match="activation_norms"):
        merge_experts(layer, activation_norms={"hidden": np.ones((4, 10))})
    with pytest.raises(ValueError, match="activation_norms"):
        merge_experts(layer, activation_norms=(np.ones((4, 10)), np.ones((4, 10))))


# --------------------------------------------------------------------------------------------------
# the tiny MoE on digits
# --------------------------------------------------------------------------------------------------
def test_tiny_moe_gradients_match_finite_differences():
    g = np.random.default_rng(1)
    N, H, D, C, B = 4, 3, 5, 3, 6
    X = g.normal(size=(B, D))
    y = g.integers(0, C, B)
    params = [g.normal(0, 0.5, s) for s in [(N, D), (N, H, D), (N, H, D), (N, C, H)]]
    _, grads = _tiny_moe._loss_and_grads(X, y, params, 2, 0.3)
    h = 1e-6
    for p, grad in zip(params, grads):
        for ix in list(np.ndindex(p.shape))[::3]:
            old = p[ix]
            p[ix] = old + h
            up, _ = _tiny_moe._loss_and_grads(X, y, params, 2, 0.3)
            p[ix] = old - h
            down, _ = _tiny_moe._loss_and_grads(X, y, params, 2, 0.3)
            p[ix] = old
            assert (up - down) / (2 * h) == pytest.approx(grad[ix], abs=1e-7)


@pytest.fixture(scope="module")
def tiny_moe():
    return _tiny_moe.digits_moe(rng=0)


def test_puzzlemoe_beats_averaging_on_a_trained_moe(tiny_moe, capsys):
    assert tiny_moe.test_accuracy > 0.9
    rows = {r["method"]: r for r in _tiny_moe.compare_merges(tiny_moe, rng=0)}
    assert set(rows) == {"unmerged", "puzzlemoe", "puzzlemoe-nonorm", "average", "ties", "dare", "drop"}
    assert rows["puzzlemoe"]["output_error"] < rows["average"]["output_error"]
    assert rows["puzzlemoe"]["memory_ratio"] == 0.5
    with capsys.disabled():
        print("\n  tiny MoE on digits (8 experts, top-2), 50 % of the expert memory:")
        for r in rows.values():
            print(f"    {r['method']:17s} held-out accuracy {r['test_accuracy']:.3f}   "
                  f"output error {r['output_error']:.3f}")


def test_routed_norms_are_the_norms_of_the_routed_tokens(tiny_moe):
    X = tiny_moe.X_train[:50]
    hidden, inter = _tiny_moe.routed_norms(tiny_moe, X)
    r = X @ tiny_moe.router.astype(np.float64).T
    top = np.argsort(-r, axis=1, kind="stable")[:, :2]
    for e in range(8):
        rows = np.flatnonzero((top == e).any(axis=1))
        np.testing.assert_allclose(hidden[e], np.linalg.norm(X[rows], axis=0), rtol=1e-12, atol=1e-300)
        W = {k: v[e].astype(np.float64) for k, v in tiny_moe.experts.items()}
        gx, ux = X[rows] @ W["w_gate"].T, X[rows] @ W["w_up"].T
        act = gx / (1 + np.exp(-gx)) * ux
        np.testing.assert_allclose(inter[e], np.linalg.norm(act, axis=0), rtol=1e-10, atol=1e-300)
