"""Fuzz cases of numtk.torch.moddit (collected by cases_torch.py; see _harness.py for the catalogue).

The valid calls are small: q, k, v of shape (1, 2, 8, 4) in blocks of 4 (a 2 x 2 block mask per head), block maps
of 6 x 6 blocks in frames of 2. A softmax scale of 1e308 overflows the scores to infinity, and attention then
gives NaN exactly as torch's own scaled_dot_product_attention does: that edge is not tried on the attention
functions (the block map counts nothing as below the threshold there and stays finite, so it is tried on it).
"""

import numpy as np  # noqa: F401

from _harness import Case


def _qkv():
    import torch

    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, 2, 8, 4, generator=g) for _ in range(3))


def _mask():
    import torch

    return torch.tensor([[[True, False], [True, True]], [[False, True], [False, False]]])


def _attention(name):
    def make():
        import numtk.torch.moddit as moddit

        q, k, v = _qkv()
        return getattr(moddit, name), (q, k, v, _mask(), 4), {"scale": 0.5}
    return make


def _block_map():
    import numtk.torch.moddit as moddit

    q, k, _ = _qkv()
    return moddit.block_sparsity_map, (q, k, 4), {"threshold": 1e-2, "scale": 0.5}


def _maps():
    import torch

    return torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(1))


def _gram():
    import numtk.torch.moddit as moddit

    return moddit.lines_design_gram, (6, 2), {"reg": 1e-5, "dtype": None, "device": None}


def _rhs():
    import numtk.torch.moddit as moddit

    return moddit.lines_rhs, (_maps(), 2), {}


def _fit():
    import numtk.torch.moddit as moddit

    return moddit.fit_line_features, (_maps(), 2), {"reg": 1e-5}


def _lines_map():
    import torch

    import numtk.torch.moddit as moddit

    return moddit.lines_map, (torch.linspace(-1, 1, 36).reshape(2, 18), 2), {}


def _select():
    import torch

    import numtk.torch.moddit as moddit

    history = torch.linspace(-1, 1, 108).reshape(3, 2, 18)
    return moddit.extrapolate_and_select, (history, 4), {"predict_T": 10, "column_weight": 0.5}


def _mask_from_lines():
    import torch

    import numtk.torch.moddit as moddit

    lines = torch.tensor([[0, 5, 12], [3, 11, 16]])
    return (moddit.mask_from_lines, (lines, 6, 2),
            {"block_diagonal": torch.tensor([0.5, 2.0]), "bd_threshold": 1.0})


def _state_ctor():
    from numtk.torch.moddit import OnlineMaskState

    return OnlineMaskState, (), dict(top_k=4, blocks_per_frame=2, warmup=12, predict_T=10, block=4, threshold=1e-4,
                                     reg=1e-5, bd_threshold=1.0, column_weight=0.5)


def _state_method(name):
    def make():
        from numtk.torch.moddit import OnlineMaskState

        state = OnlineMaskState(top_k=4, blocks_per_frame=2, block=4)
        if name == "is_dense":
            return state.is_dense, (11,), {}
        if name == "dense_steps":
            return state.dense_steps, (30,), {}
        if name == "update":
            state.update(10, _maps())
            return state.update, (11, _maps()), {}
        q, k, v = _qkv()
        return state.attention, (q, k, v, 0), {}
    return make


def _demo():
    import numtk.torch.moddit as moddit

    return moddit.demo, (), {"steps": 13, "rng": 0, "progress": False, "quick": True}


_ATTENTION_POS = {"q": 0, "k": 1, "v": 2, "block_mask": 3, "block": 4}

MODDIT: list = [
    Case("numtk.torch.moddit.block_sparse_attention", _attention("block_sparse_attention"), {},
         positional=_ATTENTION_POS, skip={"scale": ("1e308",)}),
    Case("numtk.torch.moddit.masked_dense_attention", _attention("masked_dense_attention"), {},
         positional=_ATTENTION_POS, skip={"scale": ("1e308",)}),
    Case("numtk.torch.moddit.block_sparsity_map", _block_map, {}, positional={"q": 0, "k": 1, "block": 2}),
    # dtype=None and device=None are the documented defaults (float64 on the CPU)
    Case("numtk.torch.moddit.lines_design_gram", _gram, {}, positional={"n": 0, "blocks_per_frame": 1},
         skip={"dtype": ("None",), "device": ("None",)}),
    Case("numtk.torch.moddit.lines_rhs", _rhs, {}, positional={"S": 0, "blocks_per_frame": 1}),
    Case("numtk.torch.moddit.fit_line_features", _fit, {}, positional={"S": 0, "blocks_per_frame": 1}),
    Case("numtk.torch.moddit.lines_map", _lines_map, {}, positional={"coefficients": 0, "blocks_per_frame": 1}),
    Case("numtk.torch.moddit.extrapolate_and_select", _select, {}, positional={"history": 0, "top_k": 1}),
    Case("numtk.torch.moddit.mask_from_lines", _mask_from_lines, {},
         positional={"lines": 0, "n": 1, "blocks_per_frame": 2}),
    Case("numtk.torch.moddit.OnlineMaskState", _state_ctor, {}),
    Case("numtk.torch.moddit.OnlineMaskState.is_dense", _state_method("is_dense"), {}, positional={"step": 0}),
    Case("numtk.torch.moddit.OnlineMaskState.dense_steps", _state_method("dense_steps"), {},
         positional={"num_steps": 0}),
    Case("numtk.torch.moddit.OnlineMaskState.update", _state_method("update"), {},
         positional={"step": 0, "block_map": 1}),
    Case("numtk.torch.moddit.OnlineMaskState.attention", _state_method("attention"), {},
         positional={"q": 0, "k": 1, "v": 2, "step": 3}),
    # steps=None is the documented default (42 steps, 24 with quick)
    Case("numtk.torch.moddit.demo", _demo, {}, skip={"steps": ("None",)}, timeout=60.0),
]
