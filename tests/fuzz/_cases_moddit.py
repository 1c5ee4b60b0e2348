"""Fuzz cases of numtk.torch.moddit (collected by cases_torch.py; see _harness.py for the catalogue).

The valid calls are small: q, k, v of shape (1, 2, 8, 4) in blocks of 4 (a 2 x 2 block mask per head), block maps
of 6 x 6 blocks in frames of 2. A softmax scale of 1e308 overflows the scores to infinity, and attention then
gives NaN exactly as torch's own scaled_dot_product_attention does: that edge is not tried on the attention
functions (the block map counts nothing as below the threshold there and stays finite, so it is tried on it).

Sizes beyond the problem: the catalogue's ``int>=1`` values above the C int range are refused before any size is
compared, so the ``[... beyond the problem]`` variants also try the ``workers`` values on the size-like
parameters: 4096 and 2**31 (and, in test_random_out_of_range_numbers, any integer from 1025 up) are blocks longer
than the 8 tokens (or text parts as long), frames longer than the 6-block maps and more lines than their 17:
each must be refused with a message naming the parameter (a block of 2**26 tokens once padded 16 tokens to a
gigabyte). The online state learns n only from its first map, so its variants call the constructor and then the
method.
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
            {"block_diagonal": torch.tensor([0.5, 2.0]), "bd_threshold": 1.0, "text_blocks": 1, "text_position": "end"})


def _state_ctor():
    from numtk.torch.moddit import OnlineMaskState

    return OnlineMaskState, (), dict(top_k=4, blocks_per_frame=2, warmup=12, predict_T=10, block=4, threshold=1e-4,
                                     reg=1e-5, bd_threshold=1.0, column_weight=0.5, text_tokens=0, text_position="end")


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


def _state_then(method, param):
    """A call that builds the state with ``param`` and then runs ``method`` (update at step 10 on 6 x 6 maps, or
    attention at step 0 on 8 tokens)."""
    def make():
        from numtk.torch.moddit import OnlineMaskState

        def call(**kw):
            state = OnlineMaskState(**{"top_k": 4, "blocks_per_frame": 2, "block": 4, **kw})
            if method == "update":
                return state.update(10, _maps())
            return state.attention(*_qkv(), 0)
        defaults = {"top_k": 4, "blocks_per_frame": 2, "block": 4, "text_tokens": 0}
        return call, (), {param: defaults[param]}
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
    # sizes beyond the problem (see the module docstring)
    *[Case(f"numtk.torch.moddit.{name}[block beyond the problem]", make, {"block": "workers"}, positional={"block": i})
      for name, make, i in (("block_sparse_attention", _attention("block_sparse_attention"), 4),
                            ("masked_dense_attention", _attention("masked_dense_attention"), 4),
                            ("block_sparsity_map", _block_map, 2))],
    *[Case(f"numtk.torch.moddit.{name}[blocks_per_frame beyond the problem]", make, {"blocks_per_frame": "workers"},
           positional={"blocks_per_frame": 1 if name != "mask_from_lines" else 2})
      for name, make in (("lines_design_gram", _gram), ("lines_rhs", _rhs), ("fit_line_features", _fit),
                         ("lines_map", _lines_map), ("mask_from_lines", _mask_from_lines))],
    Case("numtk.torch.moddit.extrapolate_and_select[top_k beyond the problem]", _select, {"top_k": "workers"},
         positional={"top_k": 1}),
    *[Case(f"numtk.torch.moddit.OnlineMaskState.{method}[{param} beyond the problem]", _state_then(method, param),
           {param: "workers"}, skip={"text_tokens": ("0",)})       # no text: valid
      for method, param in (("update", "blocks_per_frame"), ("update", "top_k"), ("attention", "block"),
                            ("attention", "blocks_per_frame"), ("attention", "top_k"), ("attention", "text_tokens"))],
    # steps=None is the documented default (42 steps, 24 with quick)
    Case("numtk.torch.moddit.demo", _demo, {}, skip={"steps": ("None",)}, timeout=60.0),
]
