"""numtk.torch.contrastive: InfoNCE (and NT-Xent), the support-corrected InfoNCE, the vMF samplers, the invertible
MLP generator, the identifiability metrics and the demo.

Oracles: loops over anchors and candidates in plain Python floats (the losses), closed-form limits (tau -> 0 and
tau -> infinity), the Bessel ratio I_{d/2}(kappa) / I_{d/2-1}(kappa) from scipy.special.ive and
scipy.stats.vonmises_fisher (the sampler), scikit-learn's LinearRegression and r2_score, SciPy's
orthogonal_procrustes and linear_sum_assignment and brute force over permutations (the metrics).
"""

import itertools
import math

import numpy as np
import pytest
import torch

from numtk.torch.contrastive import cap_support_mask, info_nce, support_corrected_info_nce

F64 = torch.float64


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------------------------------
# InfoNCE against loops
# --------------------------------------------------------------------------------------------------
def _unit(h):
    return [[float(v) / math.sqrt(sum(float(u) ** 2 for u in row)) for v in row] for row in h]


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def _lse(values):
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def info_nce_loop(h1, h2, tau, normalize=True, symmetric=False, same_view=False, weights=None):
    """Per-pair terms, anchor by anchor: -log(exp(s_ii/tau) / sum over candidates)."""
    a_rows = _unit(h1) if normalize else h1.tolist()
    b_rows = _unit(h2) if normalize else h2.tolist()
    B = len(a_rows)

    def direction(a, b, w):
        terms = []
        for i in range(B):
            cands = []
            for j in range(B):
                wij = 1.0 if (w is None or j == i) else w[i][j]
                if wij > 0:
                    cands.append(_dot(a[i], b[j]) / tau + math.log(wij))
            if same_view:
                cands += [_dot(a[i], a[k]) / tau for k in range(B) if k != i]
            terms.append(_lse(cands) - _dot(a[i], b[i]) / tau)
        return terms

    t = direction(a_rows, b_rows, weights)
    if symmetric:
        t2 = direction(b_rows, a_rows, weights)
        t = [(x + y) / 2 for x, y in zip(t, t2)]
    return t


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("same_view", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_info_nce_matches_loop(symmetric, same_view, normalize):
    h1 = torch.randn(7, 4, generator=gen(1), dtype=F64)
    h2 = torch.randn(7, 4, generator=gen(2), dtype=F64)
    got = info_nce(h1, h2, 0.3, normalize, symmetric=symmetric, same_view_negatives=same_view, reduction="none")
    want = info_nce_loop(h1, h2, 0.3, normalize, symmetric, same_view)
    assert got.shape == (7,)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-13)
    mean = info_nce(h1, h2, 0.3, normalize, symmetric=symmetric, same_view_negatives=same_view)
    total = info_nce(h1, h2, 0.3, normalize, symmetric=symmetric, same_view_negatives=same_view, reduction="sum")
    assert float(mean) == pytest.approx(sum(want) / 7, rel=1e-13)
    assert float(total) == pytest.approx(sum(want), rel=1e-13)


def test_nt_xent_matches_simclr_2b_form():
    """NT-Xent of SimCLR: 2B views stacked, cosine logits / tau, self excluded, mean cross-entropy over 2B."""
    B, tau = 5, 0.5
    h1 = torch.randn(B, 3, generator=gen(3), dtype=F64)
    h2 = torch.randn(B, 3, generator=gen(4), dtype=F64)
    z = torch.nn.functional.normalize(torch.cat([h1, h2]), dim=1)
    sim = z @ z.T / tau
    sim.fill_diagonal_(-math.inf)
    target = torch.cat([torch.arange(B, 2 * B), torch.arange(B)])
    want = torch.nn.functional.cross_entropy(sim, target)
    got = info_nce(h1, h2, tau, symmetric=True, same_view_negatives=True)
    assert float(got) == pytest.approx(float(want), rel=1e-13)


def test_info_nce_gradient_flows_to_both_views():
    h1 = torch.randn(6, 3, generator=gen(5), dtype=F64, requires_grad=True)
    h2 = torch.randn(6, 3, generator=gen(6), dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: info_nce(a, b, 0.7, symmetric=True, same_view_negatives=True),
                                    (h1, h2))


def test_info_nce_limits():
    B, d = 4, 6
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen(7), dtype=F64))
    h = q[:B]                                   # orthonormal rows, B <= d
    for tau in (0.1, 0.05, 0.01):
        assert float(info_nce(h, h, tau)) == pytest.approx(math.log1p((B - 1) * math.exp(-1 / tau)), rel=1e-12)
    assert float(info_nce(h, h, 1e-3)) < 1e-300 or float(info_nce(h, h, 1e-3)) == 0.0
    x = torch.randn(9, 3, generator=gen(8), dtype=F64)
    y = torch.randn(9, 3, generator=gen(9), dtype=F64)
    # log B to the last bit (logsumexp of B zeros, rounded once or twice)
    assert float(info_nce(x, y, 1e300)) == pytest.approx(math.log(9), rel=4e-16)
    assert float(info_nce(x, y, 1e300, same_view_negatives=True)) == pytest.approx(math.log(17), rel=4e-16)
    # independent views: about log B + log E[exp(s / tau)], with s the cosine of two independent directions in
    # R^8 (E[s] = 0, E[s^2] = 1/8: the excess is about 1 / (2 * 8 * tau^2))
    big1 = torch.randn(512, 8, generator=gen(10), dtype=F64)
    big2 = torch.randn(512, 8, generator=gen(11), dtype=F64)
    assert float(info_nce(big1, big2, 5.0)) == pytest.approx(math.log(512) + 1 / (2 * 8 * 25), abs=0.01)


def test_info_nce_follows_dtype():
    h = torch.randn(5, 3, generator=gen(12))
    assert info_nce(h, h).dtype == torch.float32
    assert info_nce(h.double(), h.double(), reduction="none").dtype == F64


def test_info_nce_validation():
    h = torch.randn(4, 3)
    with pytest.raises(ValueError, match="`h2` must have the shape"):
        info_nce(h, torch.randn(5, 3))
    with pytest.raises(TypeError, match="`h2` must have the dtype"):
        info_nce(h, h.double())
    with pytest.raises(ValueError, match="`tau`"):
        info_nce(h, h, 0.0)
    with pytest.raises(ValueError, match="`h1` must be a 2-D"):
        info_nce(h[0], h[0])
    with pytest.raises(ValueError, match="`h1` must be finite"):
        info_nce(h * math.nan, h)
    with pytest.raises(TypeError, match="`symmetric`"):
        info_nce(h, h, symmetric=1)
    with pytest.raises(ValueError, match="`reduction`"):
        info_nce(h, h, reduction="avg")


# --------------------------------------------------------------------------------------------------
# the support-corrected InfoNCE
# --------------------------------------------------------------------------------------------------
def test_support_corrected_all_ones_is_info_nce():
    h1 = torch.randn(8, 3, generator=gen(13), dtype=F64)
    h2 = torch.randn(8, 3, generator=gen(14), dtype=F64)
    ones = torch.ones(8, 8, dtype=torch.bool)
    for correction in ("restrict", "reweight"):
        got = support_corrected_info_nce(h1, h2, ones, 0.4, correction=correction, off_support_weight=0.3,
                                         reduction="none")
        assert torch.equal(got, info_nce(h1, h2, 0.4, reduction="none"))


@pytest.mark.parametrize("correction,omega", [("restrict", 0.3), ("reweight", 0.0), ("reweight", 0.25),
                                              ("reweight", 1.0)])
def test_support_corrected_matches_loop(correction, omega):
    B = 7
    h1 = torch.randn(B, 3, generator=gen(15), dtype=F64)
    h2 = torch.randn(B, 3, generator=gen(16), dtype=F64)
    mask = torch.rand(B, B, generator=gen(17)) < 0.5
    w_off = 0.0 if correction == "restrict" else omega
    weights = [[1.0 if bool(mask[i, j]) else w_off for j in range(B)] for i in range(B)]
    got = support_corrected_info_nce(h1, h2, mask, 0.6, correction=correction, off_support_weight=omega,
                                     reduction="none")
    np.testing.assert_allclose(got.numpy(), info_nce_loop(h1, h2, 0.6, weights=weights), rtol=1e-13, atol=1e-14)
    if correction == "reweight" and omega == 1.0:
        assert torch.allclose(got, info_nce(h1, h2, 0.6, reduction="none"), rtol=1e-14, atol=0)


def test_cap_support_mask():
    z = torch.nn.functional.normalize(torch.randn(10, 3, generator=gen(18), dtype=F64), dim=1)
    zt = torch.nn.functional.normalize(torch.randn(10, 3, generator=gen(19), dtype=F64), dim=1)
    m = cap_support_mask(z, zt, 1.0)
    for i in range(10):
        for j in range(10):
            inside = _dot(z[i].tolist(), zt[j].tolist()) >= math.cos(1.0)
            assert bool(m[i, j]) == (inside or i == j)
    assert bool(cap_support_mask(z, zt, math.pi).all())


def test_support_corrected_validation():
    h = torch.randn(4, 3)
    with pytest.raises(TypeError, match="`support_mask`"):
        support_corrected_info_nce(h, h, torch.ones(4, 4))
    with pytest.raises(ValueError, match="`support_mask` must have shape"):
        support_corrected_info_nce(h, h, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="`correction`"):
        support_corrected_info_nce(h, h, torch.ones(4, 4, dtype=torch.bool), correction="drop")
    with pytest.raises(ValueError, match="`off_support_weight`"):
        support_corrected_info_nce(h, h, torch.ones(4, 4, dtype=torch.bool), off_support_weight=2.0)
