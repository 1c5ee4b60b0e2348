"""Fuzz cases of numtk.torch.tokendrop (collected by cases_torch.py; see _harness.py for the catalogue).

The blocks are those of a tiny llama of width 16 (4 query heads, 2 key/value heads); their valid calls run the
token split (training mode, autograd on). The block forwards do not scan their hidden states for NaN (a pass
over the activations and a device sync per block, as torch's own modules do not either): the catalogue's
non-finite tensors are skipped for LayerDropBlock.forward, whose stand-in block (tanh) takes any shape, and fail
TokenDropBlock.forward's 3-D check anyway.
"""

import numpy as np  # noqa: F401

from _harness import Case

_SMALL = dict(vocab_size=11, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2)
# tanh takes any shape, and the forward does not scan for NaN (see above)
_ANY_TENSOR = ("torch.full((6, 3), float('nan'))", "torch.full((6, 3), float('inf'))", "torch.ones((2, 3, 4, 5))")


def _td():
    import numtk.torch.tokendrop as td

    return td


def _model(lora=False):
    td = _td()
    model = td.TinyLlamaForCausalLM(td.TinyLlamaConfig(**_SMALL), rng=0)
    return td.apply_lora(model, r=2, rng=0) if lora else model


def _scores():
    import torch

    g = torch.Generator().manual_seed(0)
    return _td().residual_update_scores, (torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)), {}


def _topk():
    import torch

    prev = torch.zeros(6, 3, dtype=torch.bool)
    prev[:, 1] = True
    return _td().cumulative_topk, (torch.linspace(0, 1, 18).reshape(6, 3), 0.5), {"prev_mask": prev}


def _keep():
    return _td().keep_count, (0.5, 7), {}


def _block_ctor():
    return _td().TokenDropBlock, (_model().model.layers[0],), {"rho": 0.5, "lazy_layers": 0, "exact": True}


def _block_forward(exact=True):
    def make():
        import torch

        model = _model(lora=True)
        block = _td().TokenDropBlock(model.model.layers[0], rho=0.5, exact=exact)
        x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1), requires_grad=True)
        cos_sin = model.model.rotary_emb(x, torch.arange(8)[None])
        return block.forward, (x,), {"position_embeddings": cos_sin}
    return make


def _layerdrop_ctor():
    import torch

    return _td().LayerDropBlock, (torch.nn.Tanh(),), {"rho": 0.5, "skip": "no_grad", "rng": 0}


def _layerdrop_forward():
    import torch

    block = _td().LayerDropBlock(torch.nn.Tanh(), rho=0.5, rng=0)
    return block.forward, (torch.linspace(-1, 1, 18).reshape(6, 3).requires_grad_(),), {}


def _wrap():
    return _td().wrap_model, (_model(),), {"rho": 0.5, "lazy_layers": 1, "mode": "tokendrop", "exact": True,
                                           "rng": 0}


def _wrap_layerdrop():
    return _td().wrap_model, (_model(),), {"rho": [0.5, 0.75], "mode": "layerdrop", "rng": 0}


def _unwrap():
    td = _td()
    return td.unwrap_model, (td.wrap_model(_model()),), {}


def _saved():
    import torch

    x = torch.ones(6, 3, requires_grad=True)
    return _td().saved_activation_bytes, (lambda t: torch.tanh(t).sum(), x), {}


def _config():
    return _td().TinyLlamaConfig, (), dict(_SMALL, head_dim=None, rope_theta=100.0, rms_norm_eps=1e-5,
                                           tie_word_embeddings=True, initializer_range=0.02)


def _tiny_ctor():
    td = _td()
    return td.TinyLlamaForCausalLM, (td.TinyLlamaConfig(**_SMALL),), {"rng": 0}


def _tiny_forward():
    import torch

    return _model().forward, (torch.arange(12).reshape(2, 6) % 11,), {}


def _lora():
    return _td().apply_lora, (_model(),), {"r": 2, "alpha": 4.0, "targets": ("q_proj", "v_proj"), "rng": 0}


def _copy():
    return _td().copy_task, (4, 9, 7), {"rng": 0}


def _loss():
    import torch

    logits = torch.linspace(-1, 1, 40).reshape(2, 5, 4)
    labels = torch.tensor([[-100, -100, 1, 2, 3], [-100, 0, 1, 2, -100]])
    return _td().lm_loss, (logits, labels), {"reduction": "mean"}


def _demo():
    return _td().demo, (), {"steps": 1, "rng": 0, "progress": False}


TOKENDROP: list = [
    Case("numtk.torch.tokendrop.residual_update_scores", _scores, {}, positional={"x_in": 0, "x_out": 1}),
    Case("numtk.torch.tokendrop.keep_count", _keep, {}, positional={"rho": 0, "length": 1}),
    Case("numtk.torch.tokendrop.cumulative_topk", _topk, {"prev_mask": "tensor"},
         positional={"scores": 0, "rho": 1}),
    Case("numtk.torch.tokendrop.TokenDropBlock", _block_ctor, {}, positional={"block": 0}),
    Case("numtk.torch.tokendrop.TokenDropBlock.forward", _block_forward(), {"token_mask": "tensor"},
         positional={"hidden_states": 0}),
    Case("numtk.torch.tokendrop.TokenDropBlock.forward[split]", _block_forward(exact=False),
         {"hidden_states": "tensor", "token_mask": "tensor"}, positional={"hidden_states": 0}),
    Case("numtk.torch.tokendrop.LayerDropBlock", _layerdrop_ctor, {}, positional={"block": 0}),
    Case("numtk.torch.tokendrop.LayerDropBlock.forward", _layerdrop_forward, {}, positional={"hidden_states": 0},
         skip={"hidden_states": _ANY_TENSOR}),
    # lazy_layers=None is the documented default (a quarter of the blocks)
    Case("numtk.torch.tokendrop.wrap_model", _wrap, {"model": "option"}, positional={"model": 0},
         skip={"lazy_layers": ("None",)}),
    Case("numtk.torch.tokendrop.wrap_model[layerdrop]", _wrap_layerdrop, {"rho": ("prob", "array1d"),
                                                                          "rng": "rng"}),
    Case("numtk.torch.tokendrop.unwrap_model", _unwrap, {"model": "option"}, positional={"model": 0}),
    Case("numtk.torch.tokendrop.saved_activation_bytes", _saved, {}, positional={"fn": 0}),
    # head_dim and num_key_value_heads None are the documented defaults (derived from the other sizes)
    Case("numtk.torch.tokendrop.TinyLlamaConfig", _config, {},
         skip={"head_dim": ("None",), "num_key_value_heads": ("None",)}),
    Case("numtk.torch.tokendrop.TinyLlamaForCausalLM", _tiny_ctor, {"config": "option"},
         positional={"config": 0}),
    # integer tensors are the valid kind of token ids: the catalogue's int64 ones are tokens in the vocabulary
    Case("numtk.torch.tokendrop.TinyLlamaForCausalLM.forward", _tiny_forward, {}, positional={"input_ids": 0},
         skip={"input_ids": ("torch.ones((6, 3), dtype=torch.int64)",)}),
    Case("numtk.torch.tokendrop.apply_lora", _lora, {"model": "option"}, positional={"model": 0}),
    Case("numtk.torch.tokendrop.copy_task", _copy, {}, positional={"batch": 0, "length": 1, "vocab": 2}),
    Case("numtk.torch.tokendrop.lm_loss", _loss, {}, positional={"logits": 0, "labels": 1}),
    Case("numtk.torch.tokendrop.demo", _demo, {}, timeout=60.0),
]
