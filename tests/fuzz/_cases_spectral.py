"""Fuzz cases of numtk.torch.spectral (collected by cases_torch.py; see _harness.py for the catalogue).

The catalogue's tensors are (6, 3): six items of three features. The valid calls use them as embeddings
(``z1``, ``z2``, ``F``, ``h``, ``z_target``) and as clean data (``x0``, ``noise``); the models and hidden-state
functions of the valid calls are parameter-free functions that accept any batch shape and dtype (a sum and a
sum of squares of each item's entries, and its time), so that a valid ``x0`` of another shape, such as the
catalogue's (2, 3, 4, 5), still runs; the frozen targets are callables of ``x0`` for the same reason. Data of
any rank is valid for ``x0`` (items of any shape), so the catalogue's "a dimension too many" tensor is not tried
there.
"""

import numpy as np  # noqa: F401

from _harness import Case

ANY_RANK = ("torch.ones((2, 3, 4, 5))",)


def _m():
    import numtk.torch.spectral as spectral

    return spectral


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _features(x, t):
    """(B, 3) hidden states of a batch of any shape and dtype: sum, sum of squares, time."""
    import torch

    flat = x.reshape(x.shape[0], -1)
    return torch.stack([flat.sum(1), (flat ** 2).sum(1), t.to(x.dtype)], dim=1)


def _model(x, t):
    """A v-prediction 'model' of any shape: (0.5 x + t, hidden features)."""
    tt = t.to(x.dtype).reshape(t.shape + (1,) * (x.ndim - 1))
    return 0.5 * x + tt, _features(x, t)


def _target(x0):
    """A frozen encoder's (B, 3) features of the clean batch."""
    import torch

    flat = x0.reshape(x0.shape[0], -1)
    return torch.stack([flat.mean(1), flat.abs().mean(1), flat.max(1).values], dim=1)


def _contrastive():
    return _m().spectral_contrastive_loss, (_t(6, 3), _t(6, 3, seed=1)), {"mu": 1.0, "clip": True,
                                                                         "reduction": "mean"}


def _population():
    import torch

    W = torch.rand(6, 6, generator=torch.Generator().manual_seed(2))
    return _m().spectral_population_loss, (_t(6, 3), W + W.T), {"form": "expectation"}


def _repa():
    return _m().repa_loss, (_t(6, 3), _t(6, 3, seed=1)), {"reduction": "mean"}


def _repa_projector():
    import torch

    return _m().repa_loss, (_t(6, 3), _t(6, 2, seed=1), torch.nn.Linear(3, 2)), {"reduction": "none"}


def _projector():
    return _m().build_projector, (3, 2), {"hidden": 4, "rng": 0}


def _interpolant():
    return _m().linear_interpolant, (_t(6, 3), _t(6, 3, seed=1), 0.25), {}


def _alignment():
    return _m().spectral_alignment_loss, (_features, _t(6, 3)), dict(
        t1=0.3, t2=0.7, projector=None, target=None, mu=1.0, clip=True, same_noise=False, tokens="flatten",
        reduction="mean", rng=0)


def _alignment_target():
    return _m().spectral_alignment_loss, (_features, _t(6, 3)), dict(t1=0.3, projector=lambda h: 2.0 * h,
                                                                      target=_target, rng=0)


def _diffusion():
    return _m().diffusion_loss, (_model, _t(6, 3)), dict(
        regularizer="spectral_repa", lam=0.5, projector=None, target=_target, t=None, t2="uniform", mu=1.0,
        clip=True, tokens="flatten", rng=0)


def _diffusion_spectral():
    return _m().diffusion_loss, (_model, _t(6, 3)), dict(regularizer="spectral", t=0.4, t2=0.6, rng=1)


def _diffusion_repa():
    return _m().diffusion_loss, (_model, _t(6, 3)), dict(regularizer="repa", lam=0.5, target=_target, rng=2)


def _demo():
    return _m().demo, (), dict(steps=2, rng=0, progress=False, seeds=1, variants=("spectral",))


SPECTRAL: list = [
    Case("numtk.torch.spectral.spectral_contrastive_loss", _contrastive, {}, positional={"z1": 0, "z2": 1}),
    Case("numtk.torch.spectral.spectral_population_loss", _population, {}, positional={"F": 0, "W": 1}),
    Case("numtk.torch.spectral.repa_loss", _repa, {}, positional={"h": 0, "z_target": 1},
         skip={"projector": ("None",)}),
    Case("numtk.torch.spectral.repa_loss[projector]", _repa_projector,
         {"h": "tensor", "z_target": "tensor", "projector": "callable"},
         positional={"h": 0, "z_target": 1, "projector": 2}),
    Case("numtk.torch.spectral.build_projector", _projector, {}, positional={"in_dim": 0, "out_dim": 1}),
    Case("numtk.torch.spectral.linear_interpolant", _interpolant, {}, positional={"x0": 0, "noise": 1, "t": 2}),
    # projector=None, target=None and t2=None are documented values (identity, no target, t2 = t1)
    Case("numtk.torch.spectral.spectral_alignment_loss", _alignment, {},
         positional={"hidden_fn": 0, "x0": 1},
         skip={"projector": ("None",), "target": ("None",), "t2": ("None",), "x0": ANY_RANK}),
    Case("numtk.torch.spectral.spectral_alignment_loss[target]", _alignment_target,
         {"x0": "tensor", "target": ("tensor", "callable"), "projector": "callable"},
         positional={"x0": 1}, skip={"x0": ANY_RANK}),
    # regularizer=None (no term), projector=None, target=None, t=None (drawn), t2=None (t2 = t) are documented
    Case("numtk.torch.spectral.diffusion_loss", _diffusion, {}, positional={"model": 0, "x0": 1},
         skip={"regularizer": ("None",), "projector": ("None",), "target": ("None",), "t": ("None",),
               "t2": ("None",), "x0": ANY_RANK}),
    Case("numtk.torch.spectral.diffusion_loss[spectral]", _diffusion_spectral,
         {"x0": "tensor", "t": ("prob", "tensor"), "t2": ("prob", "tensor", "option"), "lam": "real>=0",
          "mu": "real>0"},
         positional={"x0": 1}, skip={"t2": ("None",), "x0": ANY_RANK}),
    Case("numtk.torch.spectral.diffusion_loss[repa]", _diffusion_repa,
         {"x0": "tensor", "target": ("tensor", "callable"), "lam": "real>=0"}, positional={"x0": 1},
         skip={"x0": ANY_RANK}),
    Case("numtk.torch.spectral.demo", _demo, {}, timeout=60.0),
]
