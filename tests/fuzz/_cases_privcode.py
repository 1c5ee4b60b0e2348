"""Fuzz cases of numtk.torch.privcode (collected by cases_torch.py; see _harness.py for the catalogue).

The model of the gradient calls is a Linear(3, 2) and its batch a (6, 3) tensor, so that the catalogue's (6, 3)
tensors fit ``batch`` (declared ``any``: any tensor, tuple or dict of tensors is a batch; the unit tests cover its
messages). ``clip_norm=inf`` is documented (no clipping, with ``noise_multiplier=0``) and not tried as invalid.
The accountant's ``orders`` take None (the integer grid) and strings, so None is not an invalid option there;
``canary`` is an index (negative counts from the end). ``LatentPrefix``'s codes, and ``pad``'s tensor, hold integers
(declared ``any``, checked in the methods). ``noise_multiplier`` of the accountant must be >= 1e-3 (below, the RDP
overflows), so the catalogue's 1e-308 is refused with a message naming it.
"""

import numpy as np  # noqa: F401

from _harness import Case


def _m():
    import numtk.torch.privcode as privcode

    return privcode


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _lin():
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Linear(3, 2)


def _mse(model, batch):
    return (model(batch) ** 2).mean()


def _psg():
    return _m().per_sample_grads, (_lin(), _mse, _t(6, 3)), {"chunk_size": 2, "method": "vmap"}


def _step():
    import torch

    model = _lin()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return _m().dp_sgd_step, (model, _mse, _t(6, 3), opt), dict(clip_norm=1.0, noise_multiplier=1.0, rng=0,
                                                                   expected_batch_size=6.0, chunk_size=3,
                                                                   method="vmap")


def _poisson():
    return _m().poisson_sample, (100, 0.1), {"rng": 0, "device": "cpu"}


def _sgm():
    return _m().sampled_gaussian_rdp, (0.01, 1.0, [2.0, 3.5, 8.0]), {}


def _eps():
    return _m().rdp_epsilon, (0.01, 1.0, 100, 1e-5, "opacus"), {}


def _sigma():
    return _m().noise_multiplier_for, (4.0, 1e-5, 0.01, 100), {"orders": "integers", "rtol": 1e-4}


def _lam():
    return _m().lambda_schedule, (100, 1000.0, 0.1, 0.01, 20), {}


def _mask():
    code = "x = 1\nfor i in y:\n    x += i\n"
    return _m().structural_token_mask, (code, [(0, 1), (2, 3), (6, 9), (10, 11), (12, 14), (15, 16)]), {
        "node_types": ("For", "If"), "span": "header", "errors": "raise"}


def _kl():
    import torch

    mask = torch.tensor([True, False, True, True, False, True])
    return _m().syntax_aware_kl, (_t(6, 3), _t(6, 3, seed=1), mask), {"direction": "dp||ref", "reduction": "mean"}


def _prefix():
    import torch

    return _m().LatentPrefix, (4, 2, 3), {"init_std": 0.1, "rng": 0, "dtype": torch.float64, "device": "cpu"}


def _prefix_forward():
    import torch

    lp = _m().LatentPrefix(4, 2, 3, rng=0)
    return lp.forward, (_t(6, 3)[None].expand(2, 6, 3).contiguous(), torch.tensor([0, 3])), {}


def _prefix_pad():
    import torch

    lp = _m().LatentPrefix(4, 2, 3, rng=0)
    return lp.pad, (torch.ones(2, 5, dtype=torch.long), -100), {}


def _prefix_sample():
    import torch

    lp = _m().LatentPrefix(3, 2, 3, rng=0)
    return lp.sample_codes, (5,), {"probs": torch.tensor([0.2, 0.3, 0.5]), "rng": 0}


def _exposure():
    return _m().canary_exposure, (_t(6), 2), {}


def _demo():
    return _m().demo, (), dict(steps=2, rng=0, progress=False, epsilon=8.0)


PRIVCODE: list = [
    Case("numtk.torch.privcode.per_sample_grads", _psg, {}, positional={"model": 0, "loss_fn": 1, "batch": 2}),
    Case("numtk.torch.privcode.dp_sgd_step", _step, {},
         positional={"model": 0, "loss_fn": 1, "batch": 2, "optimizer": 3}, skip={"clip_norm": ("float('inf')",)}),
    Case("numtk.torch.privcode.poisson_sample", _poisson, {}, positional={"n": 0, "sample_rate": 1}),
    Case("numtk.torch.privcode.sampled_gaussian_rdp", _sgm, {},
         positional={"q": 0, "noise_multiplier": 1, "orders": 2}, skip={"orders": ("None",)}),
    Case("numtk.torch.privcode.rdp_epsilon", _eps, {},
         positional={"q": 0, "noise_multiplier": 1, "steps": 2, "delta": 3, "orders": 4}, skip={"orders": ("None",)}),
    Case("numtk.torch.privcode.noise_multiplier_for", _sigma, {},
         positional={"epsilon": 0, "delta": 1, "q": 2, "steps": 3}, skip={"orders": ("None",)}, timeout=60.0),
    Case("numtk.torch.privcode.lambda_schedule", _lam, {},
         positional={"t": 0, "lam_max": 1, "lam_min": 2, "alpha": 3, "every": 4}),
    Case("numtk.torch.privcode.structural_token_mask", _mask, {}, positional={"code": 0, "offsets": 1}),
    Case("numtk.torch.privcode.syntax_aware_kl", _kl, {},
         positional={"logits_dp": 0, "logits_ref": 1, "mask": 2}),
    Case("numtk.torch.privcode.LatentPrefix", _prefix, {}, positional={"num_codes": 0, "prefix_len": 1, "dim": 2}),
    Case("numtk.torch.privcode.LatentPrefix.forward", _prefix_forward, {},
         positional={"inputs_embeds": 0, "codes": 1}),
    Case("numtk.torch.privcode.LatentPrefix.pad", _prefix_pad, {}, positional={"x": 0, "value": 1}),
    Case("numtk.torch.privcode.LatentPrefix.sample_codes", _prefix_sample, {}, positional={"n": 0},
         skip={"probs": ("None",)}),
    Case("numtk.torch.privcode.canary_exposure", _exposure, {}, positional={"log_likelihoods": 0, "canary": 1}),
    Case("numtk.torch.privcode.demo", _demo, {}, timeout=120.0),
]
