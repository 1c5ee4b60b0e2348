"""The routing-load generators: exact totals, the 'anchor' rule by a literal loop over tokens, the
'slots' rule by hand, the paper's benchmark imbalance, Zipf frequencies by a chi-square test, the
Dirichlet mean share and drift, reproducibility and validation."""

import numpy as np
import pytest
from scipy import stats

from numtk.moe import dirichlet_loads, hot_expert_loads, zipf_loads
from numtk.moe._loads import _cap


def _anchor_by_loop(N, n, k, h, r):
    """The rule of spec A3 written out token by token (one source)."""
    counts = [0] * N
    for i in range(n):
        for j in range(k):
            if i < int(np.floor(r * n)):
                counts[j % h] += 1
            else:
                counts[h + ((i + j) % (N - h))] += 1
    return counts


def _slots_by_rule(N, n, k, h, r):
    """The 'slots' rule of spec A3, literally (one source)."""
    T = n * k
    H = int(np.floor(r * T))
    counts = [H // h if e < h else 0 for e in range(N)]
    rest = T - sum(counts)
    counts = [c + rest // N for c in counts]
    counts[-1] += T - sum(counts)
    return counts


# --------------------------------------------------------------------------------------------------
# hot_expert_loads
# --------------------------------------------------------------------------------------------------
def test_anchor_hand_count_small():
    # N = 8, k = 2, n = 10, r = 0.5, h = 2: tokens 0..4 send slot 0 to expert 0 and slot 1 to expert 1;
    # tokens 5..9 send slot j to 2 + ((i + j) mod 6): (5,0)->7 (5,1)->2 (6,0)->2 (6,1)->3 (7,0)->3 (7,1)->4
    # (8,0)->4 (8,1)->5 (9,0)->5 (9,1)->6
    got = hot_expert_loads(8, 10, top_k=2, hot_fraction=0.5, num_hot=2, style="anchor")
    np.testing.assert_array_equal(got, [5, 5, 2, 2, 2, 2, 1, 1])
    assert got.dtype == np.int64


@pytest.mark.parametrize("r", [0.0, 0.3, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("h", [1, 2, 3])
def test_anchor_matches_token_loop(r, h):
    # N = 8, k = 2, n = 10, including h < k (a hot token takes expert 0 twice when h = 1)
    got = hot_expert_loads(8, 10, top_k=2, hot_fraction=r, num_hot=h, style="anchor")
    np.testing.assert_array_equal(got, _anchor_by_loop(8, 10, 2, h, r))
    got = hot_expert_loads(8, 10, top_k=2, hot_fraction=r, num_hot=h, num_sources=3, style="anchor")
    np.testing.assert_array_equal(got, 3 * np.array(_anchor_by_loop(8, 10, 2, h, r)))


def test_anchor_matches_token_loop_random():
    rng = np.random.default_rng(5)
    for _ in range(60):
        N = int(rng.integers(2, 20))
        k = int(rng.integers(1, N + 1))
        h = int(rng.integers(1, N))
        n = int(rng.integers(1, 60))
        r = float(rng.choice([0.0, rng.random(), 1.0]))
        got = hot_expert_loads(N, n, top_k=k, hot_fraction=r, num_hot=h, style="anchor")
        np.testing.assert_array_equal(got, _anchor_by_loop(N, n, k, h, r), err_msg=str((N, n, k, h, r)))
        assert got.sum() == n * k


def test_slots_rule_by_hand():
    # N = 8, n = 100, k = 2, r = 0.3: T = 200, H = 60 to expert 0; the other 140 over all 8 experts:
    # 17 each, and the 4 left over to expert 7
    np.testing.assert_array_equal(hot_expert_loads(8, 100, top_k=2, hot_fraction=0.3),
                                  [77, 17, 17, 17, 17, 17, 17, 21])
    # h = 3: H = floor(0.5 * 300) = 150, 50 each; rest 150 -> 18 each over 8, 6 to the last
    np.testing.assert_array_equal(hot_expert_loads(8, 100, top_k=3, hot_fraction=0.5, num_hot=3),
                                  [68, 68, 68, 18, 18, 18, 18, 24])
    # h = 3, H = floor(0.7 * 100) = 70: 23 each (one slot of H falls to the rest), rest 31 -> 3 each, 7 left
    np.testing.assert_array_equal(hot_expert_loads(8, 100, hot_fraction=0.7, num_hot=3),
                                  [26, 26, 26, 3, 3, 3, 3, 10])
    np.testing.assert_array_equal(hot_expert_loads(8, 100, hot_fraction=0.7, num_hot=3, num_sources=4),
                                  4 * np.array([26, 26, 26, 3, 3, 3, 3, 10]))


@pytest.mark.parametrize("style", ["slots", "anchor"])
def test_hot_totals_exact(style):
    rng = np.random.default_rng(7)
    for _ in range(200):
        N = int(rng.integers(2, 300))
        k = int(rng.integers(1, min(N, 8) + 1))
        h = int(rng.integers(1, min(N - 1, k) + 1))
        n = int(rng.integers(N, 5000))
        S = int(rng.integers(1, 9))
        r = float(rng.random())
        kw = dict(top_k=k, hot_fraction=r, num_hot=h, num_sources=S, style=style)
        if style == "slots":
            expected = _slots_by_rule(N, n, k, h, r)
            if max(expected) > n:
                with pytest.raises(ValueError, match="hot_fraction"):
                    hot_expert_loads(N, n, **kw)
                continue
            np.testing.assert_array_equal(hot_expert_loads(N, n, **kw), S * np.array(expected))
        x = hot_expert_loads(N, n, **kw)
        assert x.shape == (N,) and x.dtype == np.int64 and x.min() >= 0
        assert x.sum() == n * k * S


def test_benchmark_configuration():
    # 128 experts on 8 devices (contiguous 16), top-4, 32768 tokens per device from 8 sources, 4 hot experts
    expected_device = {0.3: 2.942, 0.5: 4.387, 0.8: 6.555, 0.95: 7.639}
    expected_expert = {0.3: 9.60, 0.5: 16.00, 0.8: 25.60, 0.95: 30.40}
    for r in expected_device:
        x = hot_expert_loads(128, 32768, top_k=4, hot_fraction=r, num_hot=4, num_sources=8, style="anchor")
        assert x.sum() == 1_048_576
        device = x.reshape(8, 16).sum(axis=1)
        assert round(device.max() / device.mean(), 3) == expected_device[r]
        assert round(x.max() / x.mean(), 2) == expected_expert[r]


def test_slots_refuses_an_expert_beyond_the_tokens():
    # 0.95 of 4 slots per token on one expert: 3.8 slots per token
    with pytest.raises(ValueError, match="hot_fraction"):
        hot_expert_loads(128, 1000, top_k=4, hot_fraction=0.95)
    # the remainder rule can overflow too: 4 slots of 1 token, all left over to the last expert
    with pytest.raises(ValueError, match="num_tokens"):
        hot_expert_loads(5, 1, top_k=4, hot_fraction=0.0)
    # the anchor rule allows it (duplicates within a token, as the reference does)
    assert hot_expert_loads(128, 1000, top_k=4, hot_fraction=0.95, style="anchor")[0] == 950 * 4


@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    (dict(num_experts=0), ValueError, "num_experts"),
    (dict(num_experts=2**40), ValueError, "num_experts"),
    (dict(num_tokens=0), ValueError, "num_tokens"),
    (dict(num_tokens=1.5), TypeError, "num_tokens"),
    (dict(top_k=9), ValueError, "top_k"),
    (dict(top_k=0), ValueError, "top_k"),
    (dict(hot_fraction=1.5), ValueError, "hot_fraction"),
    (dict(hot_fraction=float("nan")), ValueError, "hot_fraction"),
    (dict(num_hot=9), ValueError, "num_hot"),
    (dict(num_hot=8, style="anchor"), ValueError, "num_hot"),
    (dict(num_sources=0), ValueError, "num_sources"),
    (dict(style="tokens"), ValueError, "style"),
    (dict(num_tokens=2**31 - 1, top_k=8, num_sources=2**31 - 1), ValueError, "num_tokens"),
])
def test_hot_validation(kwargs, exc, name):
    args = dict(num_experts=8, num_tokens=100, top_k=2, hot_fraction=0.3)
    args.update(kwargs)
    with pytest.raises(exc, match=f"`{name}`"):
        hot_expert_loads(**args)


def test_anchor_all_hot_needs_no_cold_expert():
    np.testing.assert_array_equal(hot_expert_loads(2, 10, top_k=2, hot_fraction=1.0, num_hot=2, style="anchor"),
                                  [10, 10])


# --------------------------------------------------------------------------------------------------
# zipf_loads
# --------------------------------------------------------------------------------------------------
def _zipf_p(N, s):
    p = np.arange(1, N + 1, dtype=float) ** -s
    return p / p.sum()


def test_zipf_frequencies_chi_square():
    N, n, s = 16, 20000, 1.2
    x = zipf_loads(N, n, s=s, shuffle=False, rng=123)
    assert x.sum() == n
    chi2, pvalue = stats.chisquare(x, n * _zipf_p(N, s))
    assert pvalue > 1e-4, (chi2, pvalue)
    # a batch, pooled: 50 draws of top-2 routing
    xb = zipf_loads(N, 2000, s=0.8, top_k=2, shuffle=False, size=50, rng=7)
    assert xb.shape == (50, N) and np.all(xb.sum(axis=1) == 4000)
    chi2, pvalue = stats.chisquare(xb.sum(axis=0), 50 * 4000 * _zipf_p(N, 0.8))
    assert pvalue > 1e-4, (chi2, pvalue)


def test_zipf_shuffle_permutes_the_ranks():
    N = 12
    xb = zipf_loads(N, 100000, s=2.0, shuffle=True, size=40, rng=3)
    # each draw is the unshuffled law up to a permutation: its sorted counts follow rank^-2 closely
    expected = 100000 * _zipf_p(N, 2.0)
    top = np.sort(xb, axis=1)[:, ::-1]
    assert np.all(np.abs(top[:, 0] - expected[0]) < 6 * np.sqrt(expected[0]))
    # and the hottest expert is not always the same one
    assert len(set(np.argmax(xb, axis=1).tolist())) > 5
    # s = 0 is uniform
    x = zipf_loads(N, 120000, s=0.0, rng=1)
    assert stats.chisquare(x).pvalue > 1e-4


def test_zipf_clip_and_redistribute():
    # s = 5: p_1 = 0.96, so expert 0 would get about 384 of 400 slots of 100 tokens
    x = zipf_loads(8, 100, s=5.0, top_k=4, shuffle=False, rng=0)
    assert x.sum() == 400 and x.max() <= 100 and x[0] == 100
    # the excess goes mostly to the next most popular experts
    assert x[1] == 100
    # extreme: everything on one expert; the excess of 7 * n spreads uniformly (all other p are 0)
    x = zipf_loads(8, 50, s=1e308, top_k=8, rng=0)
    np.testing.assert_array_equal(x, np.full(8, 50))
    xb = zipf_loads(6, 10, s=1e308, top_k=3, size=20, rng=2)
    assert np.all(xb.sum(axis=1) == 30) and xb.max() <= 10


def test_cap_redraws_and_deterministic_fallback(monkeypatch):
    import numtk.moe._loads as loads_module

    # p gives no mass to the experts with room: uniform redraws until no load exceeds n
    counts = np.array([30, 0, 0, 0], dtype=np.int64)
    _cap(counts, np.array([1.0, 0.0, 0.0, 0.0]), 10, np.random.default_rng(0))
    assert counts.sum() == 30 and counts.max() <= 10 and counts[0] == 10
    # with no random rounds left, the excess fills the experts with room by decreasing p
    monkeypatch.setattr(loads_module, "_REDRAW_ROUNDS", 0)
    counts = np.array([30, 0, 0, 0], dtype=np.int64)
    _cap(counts, np.array([0.5, 0.3, 0.2, 0.0]), 10, np.random.default_rng(0))
    np.testing.assert_array_equal(counts, [10, 10, 10, 0])


# --------------------------------------------------------------------------------------------------
# dirichlet_loads
# --------------------------------------------------------------------------------------------------
def test_dirichlet_mean_share_and_variance():
    # top-1, so that no load can exceed n and no draw is clipped (clipping would shrink the variance)
    N, n, k, alpha, B = 8, 1000, 1, 0.5, 3000
    x = dirichlet_loads(N, n, alpha=alpha, top_k=k, size=B, rng=11)
    assert x.shape == (B, N) and x.dtype == np.int64 and np.all(x.sum(axis=1) == n * k)
    share = x / (n * k)
    var_p = (1 / N) * (1 - 1 / N) / (N * alpha + 1)
    # mean share 1/N: the standard error of each mean is sqrt(var / B) ~ 0.0027
    np.testing.assert_allclose(share.mean(axis=0), 1 / N, atol=5 * np.sqrt(var_p / B))
    # Var(share) = Var(p) + E[p (1 - p)] / (n k)
    var_share = var_p + (1 / N - (var_p + 1 / N**2)) / (n * k)
    np.testing.assert_allclose(share.var(axis=0).mean(), var_share, rtol=0.1)


def test_dirichlet_drift_chain():
    N, n = 16, 100000
    slow = dirichlet_loads(N, n, alpha=0.5, size=30, drift=1e7, rng=4) / n
    fast = dirichlet_loads(N, n, alpha=0.5, size=30, drift=2.0, rng=4) / n
    indep = dirichlet_loads(N, n, alpha=0.5, size=30, rng=4) / n
    step = lambda s: np.abs(np.diff(s, axis=0)).sum(axis=1).mean()  # noqa: E731 - mean L1 step
    # Dir(c p) has standard deviation ~ sqrt(p / c): a slow chain barely moves (multinomial noise only)
    assert step(slow) < 0.02
    assert step(fast) > 5 * step(slow)
    assert step(indep) > 5 * step(slow)
    # the chain keeps the mean: over many short chains, the last step's share is still 1/N on average
    many = np.stack([dirichlet_loads(4, 1000, alpha=1.0, size=4, drift=3.0, rng=s)[-1] for s in range(400)])
    np.testing.assert_allclose(many.mean(axis=0) / 1000, 0.25, atol=0.04)


def test_dirichlet_extremes():
    # tiny alpha with top-2: one expert would take both slots of every token; clipped to n
    x = dirichlet_loads(8, 100, alpha=1e-6, top_k=2, size=10, rng=0)
    assert np.all(x.sum(axis=1) == 200) and x.max() <= 100
    # huge concentration: the uniform mean (the gamma draws overflow at 1e308)
    x = dirichlet_loads(4, 1000, alpha=1e308, rng=0)
    assert x.sum() == 1000 and stats.chisquare(x).pvalue > 1e-4
    x = dirichlet_loads(4, 1000, alpha=1.0, drift=1e308, size=3, rng=0)
    assert np.all(x.sum(axis=1) == 1000)


# --------------------------------------------------------------------------------------------------
# reproducibility and validation of the random generators
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gen", [zipf_loads, dirichlet_loads])
def test_reproducible(gen):
    a = gen(32, 1000, top_k=2, size=5, rng=42)
    b = gen(32, 1000, top_k=2, size=5, rng=np.random.default_rng(42))
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(1)
    c, d = gen(32, 1000, rng=g), gen(32, 1000, rng=g)
    assert c.shape == (32,) and not np.array_equal(c, d)


@pytest.mark.parametrize("gen", [zipf_loads, dirichlet_loads])
@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    (dict(num_experts=0), ValueError, "num_experts"),
    (dict(num_tokens=-1), ValueError, "num_tokens"),
    (dict(num_tokens="x"), TypeError, "num_tokens"),
    (dict(top_k=9), ValueError, "top_k"),
    (dict(size=0), ValueError, "size"),
    (dict(size=2**40), ValueError, "size"),
    (dict(rng="x"), TypeError, "rng"),
])
def test_random_validation(gen, kwargs, exc, name):
    args = dict(num_experts=8, num_tokens=100)
    args.update(kwargs)
    with pytest.raises(exc, match=f"`{name}`"):
        gen(**args)


def test_parameter_validation():
    with pytest.raises(ValueError, match="`s`"):
        zipf_loads(8, 100, s=-1.0)
    with pytest.raises(TypeError, match="`shuffle`"):
        zipf_loads(8, 100, shuffle="yes")
    with pytest.raises(ValueError, match="`alpha`"):
        dirichlet_loads(8, 100, alpha=0.0)
    with pytest.raises(ValueError, match="`drift`"):
        dirichlet_loads(8, 100, drift=float("inf"))
    with pytest.raises(ValueError, match="`drift`"):
        dirichlet_loads(8, 100, drift=-2.0)
