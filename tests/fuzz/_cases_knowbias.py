"""Fuzz cases of numtk.torch.knowbias (collected by cases_torch.py; see _harness.py for the catalogue).

The models are numtk's tiny llama (2 blocks of width 16, FFN 24): the llama layout, so module names resolve
without transformers. Token ids are integer tensors: the catalogue's int64 (6, 3) tensor is refused as
``input_ids`` because it holds six prompts, not one.
"""

import numpy as np  # noqa: F401

from _harness import Case

_SMALL = dict(vocab_size=11, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2)


def _kb():
    import numtk.torch.knowbias as kb

    return kb


def _model():
    from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM

    return TinyLlamaForCausalLM(TinyLlamaConfig(**_SMALL), rng=0)


def _ids():
    import torch

    return torch.tensor([1, 4, 2, 8, 5])


def _module_name():
    return _kb().ffn_module_name, (_model(), 1), {"module_name": None}


def _hook():
    return _kb().ffn_activation_hook, (_model().model.layers[0].mlp.gate_proj,), {"position": -1}


def _ig():
    return _kb().integrated_gradients_neurons, (_model(), _ids(), 3, 1), {"steps": 4, "module_name": None,
                                                                          "position": -1, "batch_size": 2,
                                                                          "prefix_cache": False}


def _scores():
    import torch

    return torch.linspace(-1, 1, 24).reshape(4, 2, 3)


def _select():
    return _kb().select_neurons, (_scores(), 0.1, 0.49), {"layers": [3, 7]}


def _adaptive():
    return _kb().select_neurons_adaptive, (_scores(), 0.2, 0.7), {"target": (1, 3), "step": 0.05, "layers": None,
                                                                 "max_iter": 50}


def _enhance():
    return _kb().enhance_neurons, (_model(), [(0, 3), (1, 5)], 2.0), {"module_name": None, "position": -1}


def _planted():
    return _kb().planted_neuron_model, (), {"layer": 1, "unit": 3, "no_id": 2, "strength": 2.0, "vocab_size": 12,
                                            "hidden_size": 16, "intermediate_size": 8, "rng": 0}


class _Tokenizer:
    """A stand-in tokenizer: one id per character, no chat template."""

    chat_template = None

    def __call__(self, text):
        return {"input_ids": [ord(c) % 50 for c in text]}


def _encode():
    return _kb().encode_question, (_Tokenizer(), "Is it? Answer yes or no."), {"chat": True}


def _demo():
    return _kb().demo, (), {"steps": 2, "rng": 0, "progress": False, "smollm2": False, "questions": 1,
                            "layers": (12,), "lams": (1.0, 2.0)}


KNOWBIAS: list = [
    Case("numtk.torch.knowbias.ffn_module_name", _module_name, {}, positional={"model": 0, "layer": 1}),
    # position None records the whole output (the documented value)
    Case("numtk.torch.knowbias.ffn_activation_hook", _hook, {}, positional={"module": 0}),
    # int64 tensors are the valid kind of token ids: the catalogue's (6, 3) one is six prompts (refused, named)
    Case("numtk.torch.knowbias.integrated_gradients_neurons", _ig, {"target_id": "int>=0"},
         positional={"model": 0, "input_ids": 1, "target_id": 2, "layer": 3}, timeout=60.0,
         skip={"prefix_cache": ("None",)}),
    Case("numtk.torch.knowbias.select_neurons", _select, {},
         positional={"scores": 0, "rel_threshold": 1, "share": 2}),
    Case("numtk.torch.knowbias.select_neurons_adaptive", _adaptive, {},
         positional={"scores": 0, "rel_threshold": 1, "share": 2}),
    Case("numtk.torch.knowbias.enhance_neurons", _enhance, {}, positional={"model": 0, "neurons": 1, "lam": 2}),
    Case("numtk.torch.knowbias.planted_neuron_model", _planted, {}),
    Case("numtk.torch.knowbias.encode_question", _encode, {}, positional={"tokenizer": 0, "question": 1}),
    # smollm2=None is the documented default (run the SmolLM2 part when installed)
    Case("numtk.torch.knowbias.demo", _demo, {}, timeout=60.0, skip={"smollm2": ("None",)}),
]
