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

from numtk.torch._common import torch_threads
from numtk.torch.contrastive import (info_nce, invertible_mlp, linear_r2, mcc, orthogonal_r2, sample_restricted_vmf,
                                     sample_vmf, support_corrected_info_nce, support_mask)

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
    huge = torch.full((3, 2), 1e30)
    with pytest.raises(ValueError, match="overflow"):
        info_nce(huge, huge, normalize=False)
    with pytest.raises(ValueError, match="overflow"):
        support_corrected_info_nce(huge, huge, torch.ones(3, 3, dtype=torch.bool), normalize=False)
    # normalised, huge and tiny rows give the loss of the unit rows
    x = torch.randn(5, 3, generator=gen(3), dtype=F64)
    for scale in (1e300, 1e-300):
        assert float(info_nce(x * scale, x * scale, 0.5)) == pytest.approx(float(info_nce(x, x, 0.5)), rel=1e-14)


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


def test_support_mask_axes():
    z = torch.nn.functional.normalize(torch.randn(12, 4, generator=gen(40), dtype=F64), dim=1)
    zt = torch.nn.functional.normalize(torch.randn(12, 4, generator=gen(41), dtype=F64), dim=1)
    m = support_mask(z, zt, 1.2, axes=[0, 2], tol=0.8)
    for i in range(12):
        for j in range(12):
            dist = math.dist(z[i, [1, 3]].tolist(), zt[j, [1, 3]].tolist())
            inside = dist <= 0.8 and _dot(z[i].tolist(), zt[j].tolist()) >= math.cos(1.2)
            assert bool(m[i, j]) == (inside or i == j)
    assert bool(m.any()) and not bool(m.all())


def test_support_mask_cap():
    z = torch.nn.functional.normalize(torch.randn(10, 3, generator=gen(18), dtype=F64), dim=1)
    zt = torch.nn.functional.normalize(torch.randn(10, 3, generator=gen(19), dtype=F64), dim=1)
    m = support_mask(z, zt, 1.0)
    for i in range(10):
        for j in range(10):
            inside = _dot(z[i].tolist(), zt[j].tolist()) >= math.cos(1.0)
            assert bool(m[i, j]) == (inside or i == j)
    assert bool(support_mask(z, zt, math.pi).all())
    # rows are scaled to unit norm first: the mask of scaled rows is the mask of the unit rows
    scale = torch.tensor([0.1, 3.0, 1e-200, 1e200, 1.0, 2.0, 5.0, 0.5, 7.0, 1e-3], dtype=F64)[:, None]
    assert torch.equal(support_mask(z * scale, zt * scale.flip(0), 1.0), m)
    with pytest.raises(ValueError, match="`z_tilde` must have non-zero rows"):
        support_mask(z, zt * 0, 1.0)


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


# --------------------------------------------------------------------------------------------------
# the vMF sampler
# --------------------------------------------------------------------------------------------------
def bessel_ratio(d, kappa):
    from scipy.special import ive

    return float(ive(d / 2, kappa) / ive(d / 2 - 1, kappa))


def test_bessel_ratio_values():
    assert bessel_ratio(3, 5.0) == pytest.approx(0.80009, abs=1e-5)
    assert bessel_ratio(10, 20.0) == pytest.approx(0.79552, abs=1e-5)


@pytest.mark.parametrize("d,kappa,n", [(3, 5.0, 20000), (3, 1e4, 10000), (10, 20.0, 20000), (128, 1e4, 10000),
                                       (2, 3.0, 20000), (2, 1e6, 10000), (64, 0.5, 10000)])
def test_vmf_mean_resultant_against_bessel_ratio(d, kappa, n):
    mu = torch.randn(d, generator=gen(d), dtype=F64)
    x = sample_vmf(mu, kappa, n, rng=d + 1)
    assert x.shape == (n, d) and x.dtype == F64
    assert bool(torch.isfinite(x).all())
    np.testing.assert_allclose(torch.linalg.vector_norm(x, dim=1).numpy(), 1.0, atol=1e-14)
    c = x @ (mu / mu.norm())
    se = float(c.std()) / math.sqrt(n)
    assert abs(float(c.mean()) - bessel_ratio(d, kappa)) < 3 * se


@pytest.mark.parametrize("shape", [0.5, 1.0, 4.5, 63.5])
def test_fallback_gamma_sampler_moments(shape):
    """The Marsaglia-Tsang sampler written in torch (used where torch's gamma sampler takes no generator):
    Gamma(a, 1) has mean a and variance a."""
    from numtk.torch._common import _marsaglia_tsang_gamma as _standard_gamma

    x = _standard_gamma(shape, 40000, gen(60), F64, torch.device("cpu"))
    assert bool((x > 0).all())
    se_mean = math.sqrt(shape / len(x))
    assert abs(float(x.mean()) - shape) < 4 * se_mean
    assert float(x.var()) == pytest.approx(shape, rel=0.05)


def test_vmf_large_kappa_large_d_has_no_overflow_and_the_right_spread():
    mu = torch.zeros(128, dtype=F64)
    mu[5] = 1.0
    x = sample_vmf(mu, 1e12, 2000, rng=0)
    one_minus = 1.0 - x[:, 5]
    # 1 - W has mean (d - 1) / (2 kappa) to first order
    assert float(one_minus.mean()) == pytest.approx(127 / 2e12, rel=0.05)
    assert bool((one_minus >= 0).all())


def test_vmf_kappa_zero_is_uniform():
    x = sample_vmf(torch.tensor([1.0, 0.0, 0.0], dtype=F64), 0.0, 40000, rng=3)
    # uniform on S^2: each coordinate is uniform on [-1, 1] (Archimedes): mean 0, variance 1/3
    np.testing.assert_allclose(x.mean(0).numpy(), 0.0, atol=0.02)
    np.testing.assert_allclose((x ** 2).mean(0).numpy(), 1 / 3, atol=0.01)


def test_vmf_direction_and_rotation_equivariance():
    d = 5
    mu = torch.nn.functional.normalize(torch.randn(d, generator=gen(20), dtype=F64), dim=0)
    x = sample_vmf(mu, 8.0, 20000, rng=4)
    mean = x.mean(0)
    # the mean points along mu, its length is the Bessel ratio
    assert float(torch.dot(mean / mean.norm(), mu)) > 0.999
    # the component orthogonal to mu is isotropic: its covariance is a multiple of (I - mu mu^T)
    P = torch.eye(d, dtype=F64) - torch.outer(mu, mu)
    y = x @ P
    cov = y.T @ y / len(y)
    scale = float(torch.trace(cov)) / (d - 1)
    np.testing.assert_allclose(cov.numpy(), (scale * P).numpy(), atol=0.01)
    # a rotated mean gives the rotated law: same statistics of mu^T x
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen(21), dtype=F64))
    x2 = sample_vmf(Q @ mu, 8.0, 20000, rng=5)
    c1, c2 = (x @ mu).numpy(), (x2 @ (Q @ mu)).numpy()
    from scipy.stats import ks_2samp

    assert ks_2samp(c1, c2).pvalue > 1e-3


def _scipy_vmf():
    stats = pytest.importorskip("scipy.stats")
    if not hasattr(stats, "vonmises_fisher"):
        pytest.skip("scipy.stats.vonmises_fisher needs SciPy >= 1.11")
    return stats


@pytest.mark.parametrize("d,kappa", [(3, 4.0), (10, 20.0), (128, 50.0), (128, 1e4)])
def test_vmf_matches_scipy_vonmises_fisher(d, kappa):
    """Two-sample KS on the cosine W = mu^T x against SciPy's sampler (d = 10 and 128: Wood's rejection path)."""
    stats = _scipy_vmf()
    mu = np.zeros(d)
    mu[[0, d - 1]] = [0.6, 0.8]
    ref = stats.vonmises_fisher(mu, kappa).rvs(10000, random_state=np.random.default_rng(d)) @ mu
    ours = (sample_vmf(torch.tensor(mu), kappa, 10000, rng=1) @ torch.tensor(mu)).numpy()
    # near 1 at large kappa: compare 1 - W (scale-free for the KS statistic)
    assert stats.ks_2samp(1.0 - ours, 1.0 - ref).pvalue > 1e-3


@pytest.mark.parametrize("kappa", [1e-20, 1e-300])
def test_vmf_tiny_kappa_on_s2_is_uniform(kappa):
    """d = 3, kappa -> 0: the cosine W is uniform on [-1, 1] (Archimedes): mean 0, E[W^2] = 1/3."""
    mu = torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    w = sample_vmf(mu, kappa, 20000, rng=11) @ mu
    n = len(w)
    assert abs(float(w.mean())) < 4 * math.sqrt(1 / 3 / n)
    assert abs(float((w ** 2).mean()) - 1 / 3) < 4 * math.sqrt(4 / 45 / n)      # Var(W^2) = 1/5 - 1/9
    # kappa * r^2 through sample_restricted_vmf with three moving axes: the moving part is uniform on its sphere
    z = torch.nn.functional.normalize(torch.randn(20000, 5, generator=gen(12), dtype=F64), dim=1)
    zt = sample_restricted_vmf(z, kappa, math.pi, rng=13, axes=[0, 2, 4])
    zA, ztA = z[:, [0, 2, 4]], zt[:, [0, 2, 4]]
    c = (zA * ztA).sum(1) / (zA * zA).sum(1)
    assert abs(float(c.mean())) < 4 * math.sqrt(1 / 3 / n)
    assert abs(float((c ** 2).mean()) - 1 / 3) < 4 * math.sqrt(4 / 45 / n)


def test_vmf_fallback_gamma_path(monkeypatch):
    """Where torch's gamma sampler is unavailable the Beta variates come from the torch Marsaglia-Tsang sampler:
    the draws still have the Bessel-ratio mean."""
    def unavailable(*args, **kwargs):
        raise RuntimeError("no gamma sampler")

    monkeypatch.setattr(torch, "_standard_gamma", unavailable)
    mu = torch.zeros(10, dtype=F64)
    mu[0] = 1.0
    c = sample_vmf(mu, 20.0, 20000, rng=3)[:, 0]
    se = float(c.std()) / math.sqrt(len(c))
    assert abs(float(c.mean()) - bessel_ratio(10, 20.0)) < 3 * se


def test_vmf_batched_means_dtype_and_determinism():
    mu = torch.randn(4, 3, generator=gen(22))
    a = sample_vmf(mu, 30.0, 7, rng=9)
    b = sample_vmf(mu, 30.0, 7, rng=9)
    assert a.shape == (7, 4, 3) and a.dtype == torch.float32
    assert torch.equal(a, b)
    cos = (a * torch.nn.functional.normalize(mu, dim=1)).sum(-1)
    assert float(cos.mean()) > 0.9
    assert not torch.equal(a, sample_vmf(mu, 30.0, 7, rng=10))
    # a numpy Generator and a torch.Generator are accepted
    sample_vmf(mu[0], 1.0, 3, rng=np.random.default_rng(0))
    sample_vmf(mu[0], 1.0, 3, rng=gen(0))


def test_restricted_vmf_cap_is_the_truncated_law():
    """The cap draw is the vMF conditioned on the cap: compare with plain draws filtered to the cap."""
    from scipy.stats import ks_2samp

    d, kappa, theta = 3, 4.0, 0.5
    z = torch.nn.functional.normalize(torch.randn(10000, d, generator=gen(23), dtype=F64), dim=1)
    zt = sample_restricted_vmf(z, kappa, theta, rng=0)
    c = (z * zt).sum(1)
    assert float(c.min()) >= math.cos(theta) - 1e-15
    mu = torch.tensor([1.0, 0.0, 0.0], dtype=F64)
    ref = sample_vmf(mu, kappa, 40000, rng=1)[:, 0]
    ref = ref[ref >= math.cos(theta)]
    assert ks_2samp(c.numpy(), ref.numpy()).pvalue > 1e-3
    # no truncation at pi: the vMF law
    full = (z * sample_restricted_vmf(z, kappa, math.pi, rng=2)).sum(1)
    assert abs(float(full.mean()) - bessel_ratio(d, kappa)) < 3 * float(full.std()) / math.sqrt(len(full))


def test_restricted_vmf_cap_against_scipy_filtered():
    """d = 10: the cap draw against SciPy's vMF draws filtered to the cap (an independent sampler)."""
    stats = _scipy_vmf()
    d, kappa, theta = 10, 5.0, 0.9
    z = torch.nn.functional.normalize(torch.randn(5000, d, generator=gen(26), dtype=F64), dim=1)
    c = (z * sample_restricted_vmf(z, kappa, theta, rng=3)).sum(1).numpy()
    assert c.min() >= math.cos(theta) - 1e-15
    mu = np.eye(d)[0]
    ref = stats.vonmises_fisher(mu, kappa).rvs(60000, random_state=np.random.default_rng(5))[:, 0]
    ref = ref[ref >= math.cos(theta)]
    assert len(ref) > 2000
    assert stats.ks_2samp(c, ref).pvalue > 1e-3


def test_restricted_vmf_tiny_cap_small_kappa():
    z = torch.nn.functional.normalize(torch.randn(200, 3, generator=gen(24), dtype=F64), dim=1)
    zt = sample_restricted_vmf(z, 0.0, 0.05, rng=0)      # uniform on a cap of area fraction 6e-4
    assert float((z * zt).sum(1).min()) >= math.cos(0.05) - 1e-15


def test_restricted_vmf_axes():
    d = 4
    z = torch.nn.functional.normalize(torch.randn(5000, d, generator=gen(25), dtype=F64), dim=1)
    zt = sample_restricted_vmf(z, 20.0, math.pi, rng=0, axes=[1, 3])
    np.testing.assert_allclose(zt[:, [0, 2]].numpy(), z[:, [0, 2]].numpy(), atol=1e-15)
    np.testing.assert_allclose(torch.linalg.vector_norm(zt, dim=1).numpy(), 1.0, atol=1e-14)
    # the moving part: v ~ vMF(u, kappa r^2) on the circle; E[<u, v>] = I_1(k) / I_0(k) row by row
    zA, ztA = z[:, [1, 3]], zt[:, [1, 3]]
    r2 = (zA ** 2).sum(1)
    cos = (zA * ztA).sum(1) / r2
    want = torch.tensor([bessel_ratio(2, 20.0 * float(r)) for r in r2], dtype=F64)
    resid = cos - want
    assert abs(float(resid.mean())) < 3 * float(resid.std()) / math.sqrt(len(resid))
    capped = sample_restricted_vmf(z, 20.0, 0.2, rng=1, axes=[1, 3])
    assert float((capped * z).sum(1).min()) >= math.cos(0.2) - 1e-14


def test_sampler_validation():
    mu = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError, match="`kappa`"):
        sample_vmf(mu, -1.0, 3)
    with pytest.raises(ValueError, match="`n`"):
        sample_vmf(mu, 1.0, 0)
    with pytest.raises(ValueError, match="`mu` must have non-zero rows"):
        sample_vmf(torch.zeros(3), 1.0, 3)
    with pytest.raises(ValueError, match="`mu` must have d >= 2"):
        sample_vmf(torch.ones(1), 1.0, 3)
    z = torch.eye(3)
    with pytest.raises(ValueError, match="`max_angle`"):
        sample_restricted_vmf(z, 1.0, 0.0)
    with pytest.raises(ValueError, match="`axes`"):
        sample_restricted_vmf(z, 1.0, 1.0, axes=[0, 0])
    with pytest.raises(ValueError, match="`axes`"):
        sample_restricted_vmf(z, 1.0, 1.0, axes=[0, 5])
    with pytest.raises(TypeError, match="`axes`"):
        sample_restricted_vmf(z, 1.0, 1.0, axes="01")
    # rng is keyword-only
    with pytest.raises(TypeError):
        sample_vmf(mu, 1.0, 3, 0)
    with pytest.raises(TypeError):
        sample_restricted_vmf(z, 1.0, 1.0, 0)
    with pytest.raises(TypeError):
        invertible_mlp(3, 2, 0)


def test_unit_rows_of_tiny_and_huge_entries():
    mu = torch.tensor([3.0, 4.0, 0.0], dtype=F64)
    for scale in (1e-300, 1e300, 5e-324):
        x = sample_vmf(mu * scale, 1e6, 50, rng=0)
        assert bool(torch.isfinite(x).all())
        assert float((x @ (mu / 5)).min()) > 0.99
    z = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.6, 0.0, 0.8]], dtype=F64)
    assert torch.allclose(sample_restricted_vmf(z * 1e300, 2.0, 0.5, rng=1), sample_restricted_vmf(z, 2.0, 0.5, rng=1),
                          rtol=0, atol=1e-14)


# --------------------------------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------------------------------
def test_invertible_mlp_is_invertible_and_frozen():
    g = invertible_mlp(4, layers=3, rng=0, dtype=F64)
    assert all(not p.requires_grad for p in g.parameters()) and not g.training
    x = torch.randn(100, 4, generator=gen(26), dtype=F64)
    y = g(x)
    # invert layer by layer: linear solves and the leaky ReLU's inverse
    back = y
    for m in reversed(list(g)):
        if isinstance(m, torch.nn.Linear):
            back = torch.linalg.solve(m.weight, back.T).T
        else:
            back = torch.where(back >= 0, back, back / m.negative_slope)
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-10)
    for m in g:
        if isinstance(m, torch.nn.Linear):
            assert abs(float(torch.linalg.det(m.weight))) == pytest.approx(1.0, rel=1e-10)
            assert float(torch.linalg.cond(m.weight)) < 50
    assert torch.equal(invertible_mlp(4, rng=0)[0].weight, invertible_mlp(4, rng=0)[0].weight)
    # no default initialisation: torch's global random state is untouched
    state = torch.get_rng_state()
    invertible_mlp(5, layers=3, rng=1)
    invertible_mlp(5)
    assert torch.equal(state, torch.get_rng_state())
    assert invertible_mlp(4)[0].weight.dtype == torch.float32
    with pytest.raises(TypeError, match="`dtype`"):
        invertible_mlp(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="`negative_slope`"):
        invertible_mlp(3, negative_slope=0.0)


# --------------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------------
def test_linear_r2_matches_sklearn():
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score

    z = torch.randn(300, 3, generator=gen(27), dtype=F64)
    h = torch.tanh(z @ torch.randn(3, 4, generator=gen(28), dtype=F64))
    h = h + 0.1 * torch.randn(300, 4, generator=gen(29), dtype=F64)
    want = r2_score(z.numpy(), LinearRegression().fit(h.numpy(), z.numpy()).predict(h.numpy()))
    assert linear_r2(h, z) == pytest.approx(want, rel=1e-10)
    A = torch.randn(3, 3, generator=gen(30), dtype=F64)
    assert linear_r2(z @ A.T, z) == pytest.approx(1.0, abs=1e-12)


def orthogonal_r2_brute(h, z):
    """Procrustes by SVD written out, with the least-squares scale, then r2_score."""
    from sklearn.metrics import r2_score

    H, Z = h.numpy(), z.numpy()
    Hc, Zc = H - H.mean(0), Z - Z.mean(0)
    U, S, Vt = np.linalg.svd(Hc.T @ Zc)
    R = U @ Vt
    s = np.sum(S) / np.sum(Hc ** 2)          # argmin_s |s Hc R - Zc|
    return r2_score(Z, s * Hc @ R + Z.mean(0))


def test_orthogonal_r2():
    z = torch.randn(400, 3, generator=gen(31), dtype=F64)
    Q, _ = torch.linalg.qr(torch.randn(3, 3, generator=gen(32), dtype=F64))
    assert orthogonal_r2(z @ Q.T, z) == pytest.approx(1.0, abs=1e-12)
    assert orthogonal_r2(1e-3 * z @ Q.T + 7.0, z) == pytest.approx(1.0, abs=1e-12)      # isotropic rescaling
    assert orthogonal_r2(1e3 * z @ Q.T, z) == pytest.approx(1.0, abs=1e-12)
    A = torch.diag(torch.tensor([3.0, 1.0, 0.3], dtype=F64)) @ Q
    h = z @ A.T
    assert linear_r2(h, z) == pytest.approx(1.0, abs=1e-12)
    assert orthogonal_r2(h, z) < 0.9
    noisy = h + 0.3 * torch.randn(400, 3, generator=gen(33), dtype=F64)
    assert orthogonal_r2(noisy, z) == pytest.approx(orthogonal_r2_brute(noisy, z), rel=1e-10)
    with pytest.raises(ValueError, match="`z` must have as many columns"):
        orthogonal_r2(z, z[:, :2])


def test_mcc_against_brute_force_permutations():
    z = torch.randn(200, 4, generator=gen(34), dtype=F64)
    h = z @ torch.randn(4, 4, generator=gen(35), dtype=F64) + 0.5 * torch.randn(200, 4, generator=gen(36), dtype=F64)
    C = np.abs(np.corrcoef(h.numpy().T, z.numpy().T)[:4, 4:])
    best = max(np.mean([C[i, p[i]] for i in range(4)]) for p in itertools.permutations(range(4)))
    assert mcc(h, z) == pytest.approx(best, rel=1e-12)
    assert mcc(-3 * z[:, [3, 1, 0, 2]] + 2, z) == pytest.approx(1.0, abs=1e-12)


def test_metric_validation():
    z = torch.randn(10, 3)
    with pytest.raises(ValueError, match="`z` must have as many rows"):
        linear_r2(z, z[:5])
    with pytest.raises(TypeError, match="`h`"):
        mcc(z.numpy(), z)
    with pytest.raises(ValueError, match="`h` must be finite"):
        orthogonal_r2(z * math.inf, z)


# --------------------------------------------------------------------------------------------------
# identifiability: training, the loss landscape, the demo
# --------------------------------------------------------------------------------------------------
def _train_linear(axes=None, max_angle=math.pi, steps=120, corrected=None, seed=0):
    """A linear encoder (no bias) on a random linear mixing g, InfoNCE at tau = 1 / kappa (kappa = 3)."""
    with torch_threads(1):      # 3 x 3 maps: one thread is fastest
        return _train_linear_body(axes, max_angle, steps, corrected, seed)


def _train_linear_body(axes, max_angle, steps, corrected, seed):
    g = invertible_mlp(3, layers=1, rng=seed)
    enc = torch.nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        enc.weight.copy_(torch.randn(3, 3, generator=gen(seed)) / math.sqrt(3))
    opt = torch.optim.Adam(enc.parameters(), lr=1e-2)
    draws = gen(seed + 1)
    for _ in range(steps):
        z = torch.nn.functional.normalize(torch.randn(256, 3, generator=draws), dim=1)
        zt = sample_restricted_vmf(z, 3.0, max_angle, rng=draws, axes=axes)
        h1, h2 = enc(g(z)), enc(g(zt))
        if corrected is None:
            loss = info_nce(h1, h2, 1 / 3)
        else:
            mask = support_mask(z, zt, max_angle, axes=axes, tol=0.2)
            loss = support_corrected_info_nce(h1, h2, mask, 1 / 3, correction=corrected, off_support_weight=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    z = torch.nn.functional.normalize(torch.randn(2000, 3, generator=gen(seed + 2)), dim=1)
    with torch.no_grad():
        h = torch.nn.functional.normalize(enc(g(z)), dim=1)
    return linear_r2(h, z), orthogonal_r2(h, z)


def test_identifiability_full_support_and_axis_restriction():
    lin_full, orth_full = _train_linear()
    assert lin_full > 0.95 and orth_full > 0.9
    # the positive preserves the third coordinate: InfoNCE prefers stretching it, orthogonal R2 falls while
    # linear R2 stays high
    lin_ax, orth_ax = _train_linear(axes=[0, 1])
    assert lin_ax > 0.95
    assert orth_ax < orth_full - 0.02
    assert orth_ax < lin_ax - 0.01
    # the support-corrected loss (reweighted off-support negatives) brings orthogonal R2 back up
    _, orth_corr = _train_linear(axes=[0, 1], corrected="reweight")
    assert orth_corr > orth_ax + 0.01


def test_loss_landscape_anisotropic_beats_orthogonal_under_restricted_support():
    """Monte Carlo with common draws: under the axis-restricted conditional an anisotropic linear map has a lower
    InfoNCE than an orthogonal one; under the full-support vMF, under the restricted normaliser and under a cap
    restriction alone it does not."""
    draws = gen(50)
    z = torch.nn.functional.normalize(torch.randn(2048, 3, generator=draws, dtype=F64), dim=1)
    zt_axes = sample_restricted_vmf(z, 3.0, math.pi, rng=draws, axes=[0, 1])
    zt_full = sample_vmf(z, 3.0, 1, rng=draws)[0]
    Q, _ = torch.linalg.qr(torch.randn(3, 3, generator=gen(51), dtype=F64))
    A = Q @ torch.diag(torch.tensor([1.0, 1.0, 2.0], dtype=F64))
    tau = 1 / 3

    def loss(M, zt, **kw):
        if kw:
            return float(support_corrected_info_nce(z @ M.T, zt @ M.T, support_mask(z, zt, axes=[0, 1], tol=0.2),
                                                    tau, **kw))
        return float(info_nce(z @ M.T, zt @ M.T, tau))

    assert loss(A, zt_axes) < loss(Q, zt_axes) - 0.03
    assert loss(A, zt_full) > loss(Q, zt_full) + 0.03
    assert loss(A, zt_axes, correction="restrict") > loss(Q, zt_axes, correction="restrict")
    # a cap alone keeps the conditional rotation invariant: on the same anchors, every stretched map (one axis
    # scaled by 0.5 to 2) has a higher InfoNCE than the orthogonal Q under cap-restricted positives
    zc = z[:1024]
    for theta in (0.3, 1.0):
        zt_cap = sample_restricted_vmf(zc, 3.0, theta, rng=draws)
        plain_q = float(info_nce(zc @ Q.T, zt_cap @ Q.T, tau))
        for stretch, axis in ((0.5, 0), (1.5, 2), (2.0, 0)):
            D = torch.ones(3, dtype=F64)
            D[axis] = stretch
            M = Q @ torch.diag(D)
            assert float(info_nce(zc @ M.T, zt_cap @ M.T, tau)) > plain_q + 0.01


def test_demo_orderings():
    from numtk.torch.contrastive import demo

    res = demo(steps=40, angles=(math.pi,))
    m = res.metrics
    assert set(m) >= {"cap", "axes", "reweight", "restrict", "full_linear_r2", "full_orthogonal_r2"}
    assert m["full_orthogonal_r2"] > m["axes"]["orthogonal_r2"][0]
    assert m["landscape_best_stretch"]["plain"] > 1.0
    assert res.history["angle"] == [math.pi] and res.wall_time > 0


@pytest.mark.slow
def test_identifiability_with_the_mlp_generator_and_encoder():
    """cl-ica's setting: a three-layer invertible leaky-ReLU generator, an MLP encoder: the three runs of
    ``demo(encoder="mlp", angles=(math.pi,), rng=0)`` that the claim needs (full support, axes, reweighted), the
    demo's restricted run and loss landscape left out (about 7 s)."""
    from numtk._lib import normalize_rng
    from numtk.torch._demo_contrastive import DEFAULT_STEPS, _train

    base = int(normalize_rng(0, name="rng").integers(0, 2**31 - 1))      # the demo's base seed for rng=0
    with torch_threads(1):
        full, axes, reweight = (_train(v, math.pi, "mlp", DEFAULT_STEPS, base) for v in ("cap", "axes", "reweight"))
    assert full["linear_r2"] > 0.95 and full["orthogonal_r2"] > 0.9
    assert axes["orthogonal_r2"] < full["orthogonal_r2"] - 0.03
    assert reweight["orthogonal_r2"] > axes["orthogonal_r2"]
