"""PuzzleMoE's pairwise merge and the merging baselines (spec moe.md part B: B2.1, B2.2, B2.5, B4).

Oracles: a whole-array NumPy transcription of the merge's five steps (B2.1), the structural identities of the
masks, the closed forms for i.i.d. Gaussian experts (B2.2), plain-loop re-derivations of TIES and DARE, and
PEFT's own functions when peft is importable.
"""

import math

import numpy as np
import pytest

from numtk.moe import average_merge, dare_merge, puzzle_merge, reconstruction_error, ties_merge


def bf16(x):
    """Round float32 to bf16 (round-to-nearest-even) by integer arithmetic, as float32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def reference_merge(Wi, Wj, ni=None, nj=None, tau=0.4):
    """The five steps of B2.1, whole-array, float32 (Δ compared with τ in float64)."""
    Wi = np.asarray(Wi, np.float32)
    Wj = np.asarray(Wj, np.float32)
    a, b = np.abs(Wi), np.abs(Wj)
    s = a + b
    with np.errstate(invalid="ignore"):
        delta = np.abs(a - b) / s
    delta[s == 0] = 0
    sim = delta.astype(np.float64) <= tau
    if ni is None:
        sal = a >= b
    else:
        sal = a * np.asarray(ni, np.float32) >= b * np.asarray(nj, np.float32)
    mag = bf16(np.where(sim, s * np.float32(0.5), np.where(sal, a, b)))
    mi, mj = sal | sim, ~sal | sim
    rec_i = np.where(mi, np.where(np.signbit(Wi), -mag, mag), np.float32(0)).astype(np.float32)
    rec_j = np.where(mj, np.where(np.signbit(Wj), -mag, mag), np.float32(0)).astype(np.float32)
    return dict(magnitude=mag, mask_i=mi, mask_j=mj, similarity_mask=sim, rec=(rec_i, rec_j),
                sign_i=np.signbit(Wi), sign_j=np.signbit(Wj))


def same(x, y):
    return np.array_equal(np.asarray(x).view(np.uint32), np.asarray(y).view(np.uint32))


def pair(shape, seed=0, sigma=0.02):
    g = np.random.default_rng(seed)
    return (g.normal(0, sigma, shape).astype(np.float32), g.normal(0, sigma, shape).astype(np.float32))


# --------------------------------------------------------------------------------------------------
# structure
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tau", [0.0, 0.2, 0.4, 0.6, 1.0])
@pytest.mark.parametrize("with_norms", [False, True])
def test_merge_equals_the_five_steps_and_its_identities(tau, with_norms):
    Wi, Wj = pair((37, 53), seed=1)
    Wj[::5] = -Wi[::5]                       # equal magnitudes, opposite signs
    Wi[3, :7] = Wj[3, :7] = 0.0              # both zero: Δ = 0
    Wi[4, 0], Wj[4, 0] = -0.0, 0.0           # the sign of -0.0 is kept
    g = np.random.default_rng(2)
    norms = (g.uniform(0.5, 2, 53), g.uniform(0.5, 2, 53)) if with_norms else None
    res = puzzle_merge(Wi, Wj, norms, tau)
    ref = reference_merge(Wi, Wj, *(norms or (None, None)), tau=tau)
    assert same(res.magnitude, ref["magnitude"])
    for k in ("mask_i", "mask_j", "similarity_mask", "sign_i", "sign_j"):
        assert np.array_equal(getattr(res, k), ref[k]), k
    assert same(res.reconstruction[0], ref["rec"][0]) and same(res.reconstruction[1], ref["rec"][1])
    # B4 merge structure
    assert (res.mask_i | res.mask_j).all()
    assert np.array_equal(res.mask_i & res.mask_j, res.similarity_mask)
    assert res.similarity_mask[3, :7].all() and (res.magnitude[3, :7] == 0).all()   # Δ := 0 where both are 0
    assert res.sign_i[4, 0] and not res.sign_j[4, 0]
    # where only one expert keeps a position, it gets its own weight back up to bf16 rounding
    own_i = ~res.similarity_mask & res.mask_i
    own_j = ~res.similarity_mask & res.mask_j
    assert same(res.reconstruction[0][own_i], bf16(Wi)[own_i])
    assert same(res.reconstruction[1][own_j], bf16(Wj)[own_j])
    assert np.all(np.abs(res.reconstruction[0][own_i] - Wi[own_i]) <= 2.0**-8 * np.abs(Wi[own_i]))
    assert (res.reconstruction[0][~res.mask_i] == 0).all() and (res.reconstruction[1][~res.mask_j] == 0).all()
    # density and similarity are the mask means
    np.testing.assert_allclose(res.density, [res.mask_i.mean(), res.mask_j.mean()])
    assert res.similarity == pytest.approx(res.similarity_mask.mean())
    assert res.magnitude.dtype == np.float32 and res.reconstruction[0].dtype == np.float32


def test_tau_zero_shares_only_equal_magnitudes_and_tau_one_shares_everything():
    Wi, Wj = pair((40, 30), seed=3)
    Wj[::4] = -Wi[::4]
    equal = np.abs(Wi) == np.abs(Wj)
    assert equal.any() and not equal.all()
    res0 = puzzle_merge(Wi, Wj, similarity_threshold=0.0)
    assert np.array_equal(res0.similarity_mask, equal)
    assert np.array_equal(res0.magnitude, bf16(np.maximum(np.abs(Wi), np.abs(Wj))))  # pure saliency selection
    res1 = puzzle_merge(Wi, Wj, similarity_threshold=1.0)
    assert res1.similarity_mask.all() and res1.mask_i.all() and res1.mask_j.all()
    avg = bf16((np.abs(Wi) + np.abs(Wj)) * np.float32(0.5))
    assert same(res1.reconstruction[0], np.where(np.signbit(Wi), -avg, avg))
    assert same(res1.reconstruction[1], np.where(np.signbit(Wj), -avg, avg))


def test_threshold_is_compared_exactly_at_the_boundary():
    # Δ = |0.75 - 1.25| / 2 = 0.25 exactly: shared at τ = 0.25, not at the float just below
    Wi = np.array([[0.75, 1.0]], np.float32)
    Wj = np.array([[1.25, 3.0]], np.float32)           # Δ = 0.25 and 0.5
    assert puzzle_merge(Wi, Wj, similarity_threshold=0.25).similarity_mask.tolist() == [[True, False]]
    assert puzzle_merge(Wi, Wj, similarity_threshold=np.nextafter(0.25, 0)).similarity_mask.tolist() == [[False,
                                                                                                            False]]


def test_saliency_ties_go_to_expert_i():
    # a = 1, b = 2 with norms 2 and 1: equal saliencies, Δ = 1/3 > 0.2 so not similar
    Wi = np.array([[1.0, -1.0]], np.float32)
    Wj = np.array([[-2.0, 2.0]], np.float32)
    res = puzzle_merge(Wi, Wj, (np.array([2.0, 2.0]), np.array([1.0, 1.0])), 0.2)
    assert res.mask_i.all() and not res.mask_j.any()
    assert res.reconstruction[0].tolist() == [[1.0, -1.0]]
    swapped = puzzle_merge(Wj, Wi, (np.array([1.0, 1.0]), np.array([2.0, 2.0])), 0.2)
    assert swapped.mask_i.all() and swapped.reconstruction[0].tolist() == [[-2.0, 2.0]]
    # without norms, equal magnitudes of opposite sign are similar at any τ: both keep
    eq = puzzle_merge(np.array([[0.5]]), np.array([[-0.5]]), similarity_threshold=0.0)
    assert eq.mask_i.all() and eq.mask_j.all() and eq.reconstruction[1].tolist() == [[-0.5]]


def test_norms_are_per_input_channel_that_is_per_column():
    g = np.random.default_rng(4)
    Wi = g.uniform(1, 2, (6, 4)).astype(np.float32)
    Wj = g.uniform(1, 2, (6, 4)).astype(np.float32)
    ni = np.array([1e3, 1e-3, 1.0, 1.0])
    nj = np.array([1e-3, 1e3, 1.0, 1.0])
    res = puzzle_merge(Wi, Wj, (ni, nj), similarity_threshold=0.0)
    assert res.mask_i[:, 0].all() and not res.mask_j[:, 0].any()      # column 0: the channel expert i sees
    assert res.mask_j[:, 1].all() and not res.mask_i[:, 1].any()
    # the same norms given as a row (1, d_in) and as (d_in,) agree; a column vector does not broadcast
    res_row = puzzle_merge(Wi, Wj, (ni[None, :], nj[None, :]), similarity_threshold=0.0)
    assert np.array_equal(res_row.mask_i, res.mask_i)
    with pytest.raises(ValueError, match="activation_norms"):
        puzzle_merge(Wi, Wj, (ni[:, None], nj[:, None]))
    with pytest.raises(ValueError, match="activation_norms"):
        puzzle_merge(Wi, Wj, (np.ones(6), np.ones(6)))                   # d_out norms: the wrong axis


def test_a_batch_of_pairs_equals_the_pairs_one_by_one():
    Wi, Wj = pair((3, 2, 9, 11), seed=5)
    g = np.random.default_rng(6)
    ni = g.uniform(0.5, 2, (3, 2, 11))                  # one norm row per pair: (..., d_in)
    nj = g.uniform(0.5, 2, (3, 2, 1, 11))               # or (..., 1, d_in)
    res = puzzle_merge(Wi, Wj, (ni, nj))
    assert res.density.shape == (3, 2, 2) and res.similarity.shape == (3, 2)
    for idx in np.ndindex(3, 2):
        one = puzzle_merge(Wi[idx], Wj[idx], (ni[idx], nj[idx][0]))
        assert same(res.magnitude[idx], one.magnitude)
        assert np.array_equal(res.mask_i[idx], one.mask_i) and np.array_equal(res.mask_j[idx], one.mask_j)
        np.testing.assert_array_equal(res.density[idx], one.density)
        assert res.similarity[idx] == one.similarity


def test_bf16_bits_and_float64_inputs():
    Wi, Wj = pair((20, 24), seed=7)
    bits_i = (bf16(Wi).view(np.uint32) >> 16).astype(np.uint16)
    bits_j = (bf16(Wj).view(np.uint32) >> 16).astype(np.uint16)
    res_bits = puzzle_merge(bits_i, bits_j)
    res_vals = puzzle_merge(bf16(Wi), bf16(Wj))
    assert same(res_bits.magnitude, res_vals.magnitude) and np.array_equal(res_bits.mask_i, res_vals.mask_i)
    res64 = puzzle_merge(Wi.astype(np.float64), Wj.astype(np.float64))
    assert same(res64.magnitude, puzzle_merge(Wi, Wj).magnitude)
    mixed = puzzle_merge(bits_i, bf16(Wj))
    assert same(mixed.magnitude, res_vals.magnitude)


def test_blocks_do_not_change_the_result(monkeypatch):
    import numtk.moe._puzzle as mod

    Wi, Wj = pair((4, 33, 17), seed=8)
    norms = (np.random.default_rng(9).uniform(0.5, 2, (4, 17)), np.ones(17))
    full = puzzle_merge(Wi, Wj, norms)
    monkeypatch.setattr(mod, "_BLOCK", 40)                # blocks of 2 rows, crossing the pairs
    small = puzzle_merge(Wi, Wj, norms)
    assert same(full.magnitude, small.magnitude) and np.array_equal(full.mask_j, small.mask_j)


def test_bad_input_is_refused_with_the_parameter_named():
    Wi, Wj = pair((4, 5))
    with pytest.raises(ValueError, match="`W_i` and `W_j`"):
        puzzle_merge(Wi, Wj[:3])
    with pytest.raises(ValueError, match="W_i"):
        puzzle_merge(Wi[0], Wj[0])
    with pytest.raises(ValueError, match="W_j"):
        puzzle_merge(Wi, np.full((4, 5), np.nan))
    with pytest.raises(ValueError, match="W_i"):
        puzzle_merge(np.full((4, 5), 2.0**127), Wj)
    with pytest.raises(ValueError, match="W_i"):
        puzzle_merge(np.full((4, 5), 0x7F80, dtype=np.uint16), Wj)    # bf16 infinity
    with pytest.raises(TypeError, match="W_i"):
        puzzle_merge(np.ones((4, 5), dtype=np.int64), Wj)
    with pytest.raises(ValueError, match="W_i"):
        puzzle_merge(np.ones((0, 5)), np.ones((0, 5)))
    with pytest.raises(ValueError, match="similarity_threshold"):
        puzzle_merge(Wi, Wj, similarity_threshold=1.5)
    with pytest.raises(ValueError, match="activation_norms"):
        puzzle_merge(Wi, Wj, (np.ones(5), -np.ones(5)))
    with pytest.raises(ValueError, match="activation_norms"):
        puzzle_merge(Wi, Wj, (np.ones(5),))
    with pytest.raises(TypeError, match="activation_norms"):
        puzzle_merge(Wi, Wj, "norms")


# --------------------------------------------------------------------------------------------------
# closed forms for i.i.d. Gaussian experts (B2.2), 10^6 entries
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gaussian_pair():
    return pair((1000, 1000), seed=11)


def p_sim(tau):
    return 1 - 4 / math.pi * math.atan((1 - tau) / (1 + tau))


@pytest.mark.parametrize("tau", [0.2, 0.4, 0.6])
def test_similarity_probability_and_mask_density(gaussian_pair, tau):
    res = puzzle_merge(*gaussian_pair, similarity_threshold=tau)
    assert res.similarity == pytest.approx(p_sim(tau), abs=0.005)
    np.testing.assert_allclose(res.density, (1 + p_sim(tau)) / 2, atol=0.005)


def test_published_probabilities():
    assert [round(p_sim(t), 4) for t in (0.2, 0.4, 0.6)] == [0.2513, 0.4845, 0.6881]


def test_reconstruction_errors_against_the_closed_forms(gaussian_pair):
    Wi, Wj = gaussian_pair
    extreme = math.sqrt(0.5 - 1 / math.pi)                   # 0.42625
    for tau in (0.0, 1.0):
        res = puzzle_merge(Wi, Wj, similarity_threshold=tau)
        assert reconstruction_error(res.reconstruction[0], Wi) == pytest.approx(extreme, abs=0.005)
        assert reconstruction_error(res.reconstruction[1], Wj) == pytest.approx(extreme, abs=0.005)
    avg = average_merge([Wi, Wj])
    assert reconstruction_error(avg, Wi) == pytest.approx(math.sqrt(0.5), abs=0.005)
    res = puzzle_merge(Wi, Wj)
    err = reconstruction_error(res.reconstruction[0], Wi)
    assert err == pytest.approx(0.2234, abs=0.005)
    assert err < extreme and err < math.sqrt(0.5)
    # per-channel norms ~ U(0.5, 2): a little worse than without (spec: 0.2315 at 2e6 entries)
    g = np.random.default_rng(12)
    normed = puzzle_merge(Wi, Wj, (g.uniform(0.5, 2, 1000), g.uniform(0.5, 2, 1000)))
    assert reconstruction_error(normed.reconstruction[0], Wi) == pytest.approx(0.2315, abs=0.01)


# --------------------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------------------
def loop_trim(t, density):
    """Keep the floor(density * n) largest |t| (ties: first in C order), plain Python."""
    flat = list(np.asarray(t).ravel())
    n = len(flat)
    if density >= 1:
        return np.array(flat).reshape(np.shape(t))
    k = int(density * n)
    order = sorted(range(n), key=lambda i: (-abs(flat[i]), i))[:k]
    out = [0.0] * n
    for i in order:
        out[i] = flat[i]
    return np.array(out).reshape(np.shape(t))


def sgn(x):
    return int(x > 0) - int(x < 0)


def loop_ties(W, density, base, majority, weights, presplit=None):
    K = len(W)
    shape = W[0].shape
    if isinstance(base, str):
        b = sum(W) / K if base == "mean" else np.zeros(shape)
    else:
        b = base
    taus = presplit if presplit is not None else [loop_trim(Wk - b, density) for Wk in W]
    out = np.zeros(shape)
    for pos in np.ndindex(shape):
        vals = [taus[k][pos] for k in range(K)]
        total = sum(vals) if majority == "total" else sum(sgn(v) for v in vals)
        elected = 1 if total >= 0 else -1
        num, cnt = 0.0, 0
        for k, v in enumerate(vals):
            if sgn(v) == elected:
                num += weights[k] * v
                cnt += 1
        out[pos] = b[pos] + num / max(cnt, 1)
    return out


def test_average_merge_against_loops():
    g = np.random.default_rng(13)
    W = [g.normal(size=(3, 4)) for _ in range(3)]
    w = [1.0, 2.0, 5.0]
    expect = np.zeros((3, 4))
    for pos in np.ndindex(3, 4):
        expect[pos] = sum(w[k] * W[k][pos] for k in range(3)) / sum(w)
    np.testing.assert_allclose(average_merge(W, weights=w), expect, rtol=1e-13)
    np.testing.assert_allclose(average_merge(np.stack(W)), sum(W) / 3, rtol=1e-13)


@pytest.mark.parametrize("density", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("majority", ["total", "frequency"])
@pytest.mark.parametrize("base", ["mean", "zero", "array"])
def test_ties_merge_against_a_plain_loop(density, majority, base):
    g = np.random.default_rng(14)
    W = [np.round(g.normal(size=(4, 5)) * 4) / 4 for _ in range(3)]     # quarter steps: magnitude ties
    b = g.normal(size=(4, 5)) if base == "array" else base
    w = [1.0, 0.5, 2.0]
    got = ties_merge(W, density=density, base=b, majority_sign=majority, weights=w)
    np.testing.assert_allclose(got, loop_ties(W, density, b, majority, w), rtol=1e-12, atol=1e-12)
    got1 = ties_merge(W, density=density, base=b, majority_sign=majority)
    np.testing.assert_allclose(got1, loop_ties(W, density, b, majority, [1.0] * 3), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("combine", ["linear", "ties"])
@pytest.mark.parametrize("density", [0.3, 0.7, 1.0])
def test_dare_merge_against_a_plain_loop_with_the_documented_masks(combine, density):
    g = np.random.default_rng(15)
    W = [g.normal(size=(5, 6)) for _ in range(3)]
    mean = sum(W) / 3
    draw = np.random.default_rng(99)
    masks = [draw.random((5, 6)) < density if density < 1 else np.ones((5, 6), bool) for _ in range(3)]
    rescaled = []
    for k in range(3):
        t = np.zeros((5, 6))
        for pos in np.ndindex(5, 6):
            t[pos] = (W[k][pos] - mean[pos]) * masks[k][pos] / density
        rescaled.append(t)
    got = dare_merge(W, density=density, combine=combine, rng=99)
    if combine == "linear":
        expect = mean + sum(rescaled) / 3
    else:
        expect = loop_ties(W, 1.0, "mean", "total", [1.0] * 3, presplit=rescaled)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)
    w = [0.2, 0.3, 0.5]
    got_w = dare_merge(W, density=density, combine=combine, rng=np.random.default_rng(99), weights=w)
    if combine == "linear":
        expect_w = mean + sum(wk * t for wk, t in zip(w, rescaled))
    else:
        expect_w = loop_ties(W, 1.0, "mean", "total", w, presplit=rescaled)
    np.testing.assert_allclose(got_w, expect_w, rtol=1e-12, atol=1e-12)


def test_two_experts_with_the_mean_base():
    # opposite task vectors: TIES keeps the larger weight where they differ most, DARE picks per position
    Wi = np.array([1.0, 2.0, 3.0, 4.0])
    Wj = np.array([4.0, 2.5, 0.0, 4.0])
    np.testing.assert_array_equal(ties_merge([Wi, Wj], density=0.5), [4.0, 2.25, 3.0, 4.0])
    d = dare_merge([Wi, Wj], density=0.5, rng=3)
    assert np.all((d == Wi) | (d == Wj) | (d == (Wi + Wj) / 2))


def test_baselines_refuse_bad_input():
    W = [np.ones((2, 3)), np.zeros((2, 3))]
    with pytest.raises(ValueError, match="weights_list"):
        average_merge([np.ones(3), np.ones(4)])
    with pytest.raises(ValueError, match="weights"):
        average_merge(W, weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="weights"):
        ties_merge(W, weights=[1.0])
    with pytest.raises(ValueError, match="density"):
        ties_merge(W, density=1.5)
    with pytest.raises(ValueError, match="density"):
        dare_merge(W, density=0.0)
    with pytest.raises(ValueError, match="base"):
        ties_merge(W, base="median")
    with pytest.raises(TypeError, match="base"):
        ties_merge(W, base=3.0)
    with pytest.raises(ValueError, match="base"):
        dare_merge(W, base=np.ones(3))
    with pytest.raises(ValueError, match="combine"):
        dare_merge(W, combine="sum")
    with pytest.raises(ValueError, match="majority_sign"):
        ties_merge(W, majority_sign="max")
    with pytest.raises(TypeError, match="rng"):
        dare_merge(W, rng="seed")
    with pytest.raises(ValueError, match="weights_list"):
        ties_merge(np.ones(4))


# PEFT (optional): its ties / dare_linear / dare_ties on the same inputs; DARE with the masks our rng draws
def _peft():
    pytest.importorskip("torch")
    return pytest.importorskip("peft.utils.merge_utils")


@pytest.mark.filterwarnings("ignore:The density")      # PEFT warns that density 1 prunes nothing
@pytest.mark.parametrize("density", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("majority", ["total", "frequency"])
def test_ties_merge_equals_peft(density, majority):
    import torch

    mu = _peft()
    g = np.random.default_rng(16)
    W = [g.normal(size=(6, 7)) for _ in range(4)]
    w = np.array([1.0, 0.7, 1.3, 0.4])
    base = g.normal(size=(6, 7))
    tasks = [torch.tensor(Wk - base) for Wk in W]
    expect = base + mu.ties(tasks, torch.tensor(w), density, majority).numpy()
    got = ties_merge(W, density=density, base=base, majority_sign=majority, weights=w)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("combine", ["linear", "ties"])
def test_dare_merge_equals_peft_on_the_same_masks(combine, monkeypatch):
    import torch

    mu = _peft()
    g = np.random.default_rng(17)
    W = [g.normal(size=(5, 8)) for _ in range(3)]
    w = np.array([0.5, 0.25, 0.25])
    density = 0.4
    draw = np.random.default_rng(5)
    masks = [torch.tensor((draw.random((5, 8)) < density).astype(np.float64)) for _ in range(3)]
    handed = iter(masks)
    monkeypatch.setattr(torch, "bernoulli", lambda probs, *a, **k: next(handed))
    mean = sum(W) / 3
    tasks = [torch.tensor(Wk - mean) for Wk in W]
    fn = mu.dare_linear if combine == "linear" else mu.dare_ties
    expect = mean + fn(tasks, torch.tensor(w), density).numpy()
    got = dare_merge(W, density=density, combine=combine, rng=5, weights=w)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# reconstruction_error
# --------------------------------------------------------------------------------------------------
def test_reconstruction_error_in_weights_and_outputs():
    g = np.random.default_rng(18)
    W = g.normal(size=(2, 6, 5))
    W_hat = W + g.normal(scale=0.1, size=W.shape)
    assert reconstruction_error(W_hat, W) == pytest.approx(np.sqrt(((W_hat - W) ** 2).sum() / (W ** 2).sum()))
    X = g.normal(size=(9, 5))
    num = sum(np.sum((X @ W_hat[k].T - X @ W[k].T) ** 2) for k in range(2))
    den = sum(np.sum((X @ W[k].T) ** 2) for k in range(2))
    assert reconstruction_error(W_hat, W, X) == pytest.approx(np.sqrt(num / den))
    bits = (bf16(W[0].astype(np.float32)).view(np.uint32) >> 16).astype(np.uint16)
    assert reconstruction_error(bits, W[0]) < 2.0**-8
    with pytest.raises(ValueError, match="W_hat"):
        reconstruction_error(W_hat[0], W)
    with pytest.raises(ValueError, match="X"):
        reconstruction_error(W_hat, W, X[:, :4])
    with pytest.raises(ValueError, match="W"):
        reconstruction_error(W, np.zeros_like(W))
