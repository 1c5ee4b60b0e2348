"""Fuzz cases of numtk.torch.mswt (collected by cases_torch.py; see _harness.py for the catalogue).

The transforms take any leading dimensions, so the catalogue's "a dimension too many" tensor (2, 3, 4, 5) is a
valid input of ``dwt1d``, ``dwt2d``, ``unstack_subbands``, ``energy_spectrum`` and ``rollout`` (any state
shape): it is not tried there.
The modules take channel-first maps; their valid calls are the smallest that run: 4 channels over 8 points
(1-D) or 8 x 8 pixels (2-D).
"""

import numpy as np  # noqa: F401

from _harness import Case

ANY_RANK = ("torch.ones((2, 3, 4, 5))",)


def _m():
    import numtk.torch.mswt as mswt

    return mswt


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _dwt1d():
    return _m().dwt1d, (_t(6, 3),), {"wavelet": "db2", "mode": "symmetric"}


def _idwt1d():
    return _m().idwt1d, (_t(6, 3), _t(6, 3, seed=1)), {"wavelet": "haar", "mode": "periodization"}


def _dwt2d():
    return _m().dwt2d, (_t(6, 3),), {"wavelet": "sym2", "mode": "reflect"}


def _idwt2d():
    c = (_t(2, 3), (_t(2, 3, seed=1), _t(2, 3, seed=2), _t(2, 3, seed=3)))
    return _m().idwt2d, (c,), {"wavelet": "db1", "mode": "periodization"}


def _stack():
    c = (_t(2, 3), (_t(2, 3, seed=1), _t(2, 3, seed=2), _t(2, 3, seed=3)))
    return _m().stack_subbands, (c,), {"dim": -1}


def _unstack():
    return _m().unstack_subbands, (_t(6, 4),), {"ndim": 1, "dim": 0}


def _filters():
    return _m().wavelet_filters, ("coif1",), {}


def _ctor(cls, args, kw):
    def make():
        return getattr(_m(), cls), args, kw
    return make


def _forward(cls, ctor_args, ctor_kw, args):
    def make():
        import torch

        torch.manual_seed(0)
        module = getattr(_m(), cls)(*ctor_args, **ctor_kw)
        return module.forward, tuple(_t(*s, seed=i) for i, s in enumerate(args)), {}
    return make


def _rel():
    return _m().relative_l2, (_t(6, 3), _t(6, 3, seed=1)), {"reduction": "sum"}


def _spectrum():
    return _m().energy_spectrum, (_t(6, 3),), {"ndim": 1}


def _rollout():
    return _m().rollout, (lambda u: 0.5 * u, _t(6, 3), 2), {"grad": False}


def _demo():
    return _m().demo, (), {"steps": 2, "rng": 0, "progress": False, "quick": True}


MSWT: list = [
    Case("numtk.torch.mswt.dwt1d", _dwt1d, {}, positional={"x": 0}, skip={"x": ANY_RANK}),
    Case("numtk.torch.mswt.idwt1d", _idwt1d, {}, positional={"cA": 0, "cD": 1}),
    Case("numtk.torch.mswt.dwt2d", _dwt2d, {}, positional={"x": 0}, skip={"x": ANY_RANK}),
    Case("numtk.torch.mswt.idwt2d", _idwt2d, {}, positional={"coeffs": 0}),
    Case("numtk.torch.mswt.stack_subbands", _stack, {}, positional={"coeffs": 0}),
    Case("numtk.torch.mswt.unstack_subbands", _unstack, {}, positional={"x": 0}, skip={"x": ANY_RANK}),
    Case("numtk.torch.mswt.wavelet_filters", _filters, {}, positional={"wavelet": 0}),
    Case("numtk.torch.mswt.WaveletDownsample", _ctor("WaveletDownsample", (4, "db2"), {"out_dim": 3, "ndim": 1}),
         {}, positional={"dim": 0, "wavelet": 1}),
    Case("numtk.torch.mswt.WaveletDownsample.forward", _forward("WaveletDownsample", (4,), {"ndim": 2}, [(1, 4, 8, 8)]),
         {}, positional={"x": 0}),
    Case("numtk.torch.mswt.WaveletUpsample", _ctor("WaveletUpsample", (4, "haar"),
                                                   {"out_dim": 2, "skip_dim": 3, "ndim": 1}),
         {}, positional={"dim": 0, "wavelet": 1}),
    Case("numtk.torch.mswt.WaveletUpsample.forward",
         _forward("WaveletUpsample", (4,), {"skip_dim": 2, "ndim": 1}, [(2, 4, 4), (2, 2, 8)]),
         {}, positional={"x": 0, "skip": 1}),
    Case("numtk.torch.mswt.WaveletAttention", _ctor("WaveletAttention", (8, 2, 2, "db2"), {"ndim": 2}),
         {}, positional={"dim": 0, "heads": 1, "window": 2, "wavelet": 3}),
    Case("numtk.torch.mswt.WaveletAttention.forward", _forward("WaveletAttention", (8, 2), {"ndim": 1}, [(2, 8, 8)]),
         {}, positional={"x": 0}),
    Case("numtk.torch.mswt.WaveletBlock", _ctor("WaveletBlock", (4, 1, None, "haar"), {"ndim": 1, "mlp_ratio": 2}),
         {}, positional={"dim": 0, "heads": 1, "window": 2, "wavelet": 3}, skip={"window": ("None",)}),
    Case("numtk.torch.mswt.WaveletBlock.forward", _forward("WaveletBlock", (4, 2, 2), {}, [(1, 4, 8, 8)]),
         {}, positional={"x": 0}),
    Case("numtk.torch.mswt.MSWT1D", _ctor("MSWT1D", (1, 2, 4, "haar"), {"dims": [4, 8], "heads": 2, "window": 2,
                                                                          "local_levels": (0,), "grid": "periodic",
                                                                          "mlp_ratio": 2}),
         {}, positional={"in_ch": 0, "out_ch": 1, "dim": 2, "wavelet": 3}),
    Case("numtk.torch.mswt.MSWT1D.forward", _forward("MSWT1D", (1, 1), {"dims": [4, 8], "heads": 2}, [(2, 1, 8)]),
         {}, positional={"x": 0}),
    Case("numtk.torch.mswt.MSWT2D", _ctor("MSWT2D", (2, 1, 8, "db2"), {"dims": [4, 8], "heads": 2, "window": 2,
                                                                        "local_levels": (1,), "grid": "none",
                                                                        "mlp_ratio": 1}),
         {}, positional={"in_ch": 0, "out_ch": 1, "dim": 2, "wavelet": 3}),
    Case("numtk.torch.mswt.MSWT2D.forward", _forward("MSWT2D", (1, 1), {"dims": [4], "heads": 1}, [(1, 1, 4, 4)]),
         {}, positional={"x": 0}),
    Case("numtk.torch.mswt.relative_l2", _rel, {}, positional={"pred": 0, "true": 1}),
    Case("numtk.torch.mswt.energy_spectrum", _spectrum, {}, positional={"u": 0}, skip={"u": ANY_RANK}),
    Case("numtk.torch.mswt.rollout", _rollout, {}, positional={"model": 0, "u0": 1, "steps": 2},
         skip={"u0": ANY_RANK}),
    # steps=None is the documented default (the demo's own number of steps, a full run): not tried
    Case("numtk.torch.mswt.demo", _demo, {}, skip={"steps": ("None",)}, timeout=60.0),
]
