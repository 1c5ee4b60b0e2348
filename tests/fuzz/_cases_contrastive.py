"""Fuzz cases of numtk.torch.contrastive (collected by cases_torch.py; see _harness.py for the catalogue).

The catalogue's tensors are (6, 3): six rows of three features. The valid calls use them as embeddings (``h1``,
``h2``), as latents (``z``, ``z_tilde``, ``mu``: unit rows) and as representations (``h``). Documented None values
(``axes=None``: every axis moves; ``dtype=None``: float32; ``angles=None``: the default angles) are not tried as
invalid options. ``support_mask`` of :func:`support_corrected_info_nce` is declared ``any`` and checked in the
function (a bool tensor of shape (B, B)): the unit tests cover its messages.
"""

import numpy as np  # noqa: F401

from _harness import Case


def _m():
    import numtk.torch.contrastive as contrastive

    return contrastive


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _unit(*shape, seed=0):
    import torch

    return torch.nn.functional.normalize(_t(*shape, seed=seed), dim=-1)


def _vmf():
    return _m().sample_vmf, (_unit(3), 2.0, 5), {"rng": 0}


def _vmf_batched():
    return _m().sample_vmf, (_unit(6, 3), 2.0, 2), {"rng": 1}


def _restricted():
    return _m().sample_restricted_vmf, (_unit(6, 3), 3.0, 0.8), {"rng": 0, "axes": [0, 1]}


def _mlp():
    import torch

    return _m().invertible_mlp, (3,), {"layers": 2, "rng": 0, "negative_slope": 0.2, "candidates": 4,
                                       "dtype": torch.float64}


def _info_nce():
    return _m().info_nce, (_t(6, 3), _t(6, 3, seed=1), 0.5, True), {"symmetric": True,
                                                                   "same_view_negatives": True,
                                                                   "reduction": "mean"}


def _corrected():
    import torch

    mask = torch.rand(6, 6, generator=torch.Generator().manual_seed(3)) < 0.5
    return _m().support_corrected_info_nce, (_t(6, 3), _t(6, 3, seed=1), mask, 0.5, True), {
        "correction": "reweight", "off_support_weight": 0.2, "reduction": "none"}


def _mask():
    return _m().support_mask, (_unit(6, 3), _unit(6, 3, seed=1), 1.0), {"axes": [0, 2], "tol": 0.5}


def _linear_r2():
    return _m().linear_r2, (_t(6, 3), _t(6, 3, seed=1)), {}


def _orthogonal_r2():
    return _m().orthogonal_r2, (_t(6, 3), _t(6, 3, seed=1)), {}


def _mcc():
    return _m().mcc, (_t(6, 3), _t(6, 3, seed=1)), {}


def _demo():
    return _m().demo, (), dict(steps=2, rng=0, progress=False, angles=(3.0,), encoder="linear")


CONTRASTIVE: list = [
    Case("numtk.torch.contrastive.sample_vmf", _vmf, {}, positional={"mu": 0, "kappa": 1, "n": 2}),
    Case("numtk.torch.contrastive.sample_vmf[batched]", _vmf_batched, {"mu": "tensor"}, positional={"mu": 0}),
    Case("numtk.torch.contrastive.sample_restricted_vmf", _restricted, {},
         positional={"z": 0, "kappa": 1, "max_angle": 2}, skip={"axes": ("None",)}),
    Case("numtk.torch.contrastive.invertible_mlp", _mlp, {}, positional={"dim": 0}, skip={"dtype": ("None",)}),
    Case("numtk.torch.contrastive.info_nce", _info_nce, {},
         positional={"h1": 0, "h2": 1, "tau": 2, "normalize": 3}),
    Case("numtk.torch.contrastive.support_corrected_info_nce", _corrected, {},
         positional={"h1": 0, "h2": 1, "support_mask": 2, "tau": 3, "normalize": 4}),
    Case("numtk.torch.contrastive.support_mask", _mask, {},
         positional={"z": 0, "z_tilde": 1, "max_angle": 2}, skip={"axes": ("None",)}),
    Case("numtk.torch.contrastive.linear_r2", _linear_r2, {}, positional={"h": 0, "z": 1}),
    Case("numtk.torch.contrastive.orthogonal_r2", _orthogonal_r2, {}, positional={"h": 0, "z": 1}),
    Case("numtk.torch.contrastive.mcc", _mcc, {}, positional={"h": 0, "z": 1}),
    Case("numtk.torch.contrastive.demo", _demo, {}, skip={"angles": ("None",)}, timeout=60.0),
]
