"""Fuzz cases of numtk.torch.dyco (collected by cases_torch.py; see _harness.py for the catalogue).

The catalogue's tensors are (6, 3): six items of three features. They serve as embeddings (``z_clean``,
``z_adv``, ``train_z``, ``test_z``, ``h``, ``phi``) and as the inputs of the perturbation, whose model is a
parameter-free function of items of any shape (so the catalogue's "a dimension too many" tensor is valid
there and not tried). The I/Q functions and modules take (B, 2, L) windows: their valid calls use two windows
of 16 samples, and every tensor of the catalogue (2-D or 4-D) is refused for its shape.
"""

import numpy as np  # noqa: F401

from _harness import Case

ANY_RANK = ("torch.ones((2, 3, 4, 5))",)


def _m():
    import numtk.torch.dyco as dyco

    return dyco


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _features(v):
    """(B, 3) outputs of items of any shape and dtype: a smooth nonlinear map."""
    import torch

    flat = v.reshape(v.shape[0], -1)
    return torch.stack([flat.sum(1), (flat ** 2).sum(1), torch.tanh(flat).sum(1)], dim=1)


def _vaa():
    return _m().virtual_adversarial_perturbation, (_features, _t(6, 3)), dict(
        eps=0.05, xi=1e-3, n_power=1, divergence="cosine", relative=True, tau=1.0, rng=0)


def _vaa_kl():
    return _m().virtual_adversarial_perturbation, (_features, _t(6, 3)), dict(
        eps=0.1, xi=1e-3, n_power=2, divergence="kl", relative=False, tau=0.5, rng=1)


def _consistency():
    return _m().consistency_loss, (_t(6, 3), _t(6, 3, seed=1)), {"kind": "cosine", "reduction": "mean", "tau": 1.0}


def _consistency_kl():
    return _m().consistency_loss, (_t(6, 3), _t(6, 3, seed=1)), {"kind": "kl", "reduction": "none", "tau": 0.5}


def _iq(b=2, n=16):
    return _t(b, 2, n, seed=3)


def _cumulants():
    return _m().cumulants, (_iq(),), {"normalize": True}


def _expert():
    return _m().expert_features, (_iq(),), {}


def _ctor(cls, args, kw):
    def make():
        return getattr(_m(), cls), args, kw
    return make


def _method(cls, ctor_args, ctor_kw, method, args, kw=None):
    def make():
        module = getattr(_m(), cls)(*ctor_args, **ctor_kw)
        return getattr(module, method), args(), dict(kw or {})
    return make


def _dyco_model(**kw):
    import torch

    enc = _m().SignalSwin1D(length=16, patch=4, dims=(4,), depths=(1,), heads=(1,), window=2, rng=0)
    return _m().DyCoCL(enc, torch.nn.Linear(4, 3), **kw)


def _dyco_method(method, kw):
    def make():
        return getattr(_dyco_model(eps=0.1, xi=1e-3), method), (_t(4, 2, 16, seed=4),), dict(kw)
    return make


def _fusion_forward():
    return _m().HybridFusion(3, 3, rng=0).forward, (_t(6, 3), _t(6, 3, seed=1)), {}


def _prototype():
    import torch

    return _m().prototype_accuracy, (_t(6, 3), torch.tensor([0, 1, 2, 0, 1, 2]), _t(6, 3, seed=1),
                                     torch.tensor([0, 0, 1, 1, 2, 2])), {"normalize": True}


def _demo():
    return _m().demo, (), dict(steps=1, rng=0, progress=False, seeds=1, batch=4, episodes=2, fusion=False)


_WA = ("WindowAttention1D", (8, 2), {"window": 4, "shift": 2, "rng": 0})
_SW = ("SignalSwin1D", (2, 16, 4), {"dims": (4,), "depths": (2,), "heads": (2,), "window": 2, "rng": 0})

DYCO: list = [
    # x of any rank: items of any shape
    Case("numtk.torch.dyco.virtual_adversarial_perturbation", _vaa, {}, positional={"model": 0, "x": 1},
         skip={"x": ANY_RANK}),
    Case("numtk.torch.dyco.virtual_adversarial_perturbation[kl]", _vaa_kl,
         {"x": "tensor", "tau": "real>0", "xi": "real>0", "eps": "real>=0", "n_power": "int>=0"},
         positional={"x": 1}, skip={"x": ANY_RANK}),
    Case("numtk.torch.dyco.consistency_loss", _consistency, {}, positional={"z_clean": 0, "z_adv": 1}),
    Case("numtk.torch.dyco.consistency_loss[kl]", _consistency_kl,
         {"z_clean": "tensor", "z_adv": "tensor", "tau": "real>0"}, positional={"z_clean": 0, "z_adv": 1}),
    Case("numtk.torch.dyco.cumulants", _cumulants, {}, positional={"iq": 0}),
    Case("numtk.torch.dyco.expert_features", _expert, {}, positional={"iq": 0}),
    Case("numtk.torch.dyco.WindowAttention1D",
         _ctor("WindowAttention1D", (8, 2, 4, 2), {"mask": True, "qkv_bias": False, "rng": 0}), {},
         positional={"dim": 0, "num_heads": 1, "window": 2, "shift": 3}),
    Case("numtk.torch.dyco.WindowAttention1D.forward", _method(*_WA, "forward", lambda: (_t(2, 8, 8),)), {},
         positional={"x": 0}),
    Case("numtk.torch.dyco.SignalSwin1D",
         _ctor("SignalSwin1D", (2, 16, 4), {"dims": (4, 8), "depths": (1, 1), "heads": (1, 2), "window": 2,
                                            "mlp_ratio": 1.0, "rng": 0}), {},
         positional={"in_ch": 0, "length": 1, "patch": 2}),
    Case("numtk.torch.dyco.SignalSwin1D.forward", _method(*_SW, "forward", lambda: (_iq(),)), {},
         positional={"x": 0}),
    Case("numtk.torch.dyco.SignalSwin1D.tokens", _method(*_SW, "tokens", lambda: (_iq(),)), {},
         positional={"x": 0}),
    Case("numtk.torch.dyco.HybridFusion", _ctor("HybridFusion", (4, 3), {"feature_norm": False, "rng": 0}), {},
         positional={"dim": 0, "feat_dim": 1}),
    Case("numtk.torch.dyco.HybridFusion.forward", _fusion_forward, {}, positional={"h": 0, "phi": 1}),
    # max_shift=None is the documented default (any shift)
    Case("numtk.torch.dyco.DyCoCL", lambda: (_m().DyCoCL, (_features, _features), dict(
        tau=0.1, lam_cons=1.0, eps=0.05, xi=1e-6, n_power=1, divergence="cosine", relative=True,
        consistency="cosine", phase=True, max_shift=4, cfo=0.01, noise=0.05)), {},
         positional={"encoder": 0, "projector": 1}, skip={"max_shift": ("None",)}),
    Case("numtk.torch.dyco.DyCoCL.forward", _dyco_method("forward", {}), {}, positional={"x": 0}),
    Case("numtk.torch.dyco.DyCoCL.augment", _dyco_method("augment", {"rng": 0}), {}, positional={"x": 0}),
    Case("numtk.torch.dyco.DyCoCL.loss", _dyco_method("loss", {"rng": 0, "parts": True}), {}, positional={"x": 0}),
    Case("numtk.torch.dyco.prototype_accuracy", _prototype, {},
         positional={"train_z": 0, "train_y": 1, "test_z": 2, "test_y": 3}),
    # steps=None is the documented default (the demo's own number of steps, a full run): not tried
    Case("numtk.torch.dyco.demo", _demo, {}, skip={"steps": ("None",)}, timeout=120.0),
]
