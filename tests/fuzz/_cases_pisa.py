"""Fuzz cases of numtk.torch.pisa (collected by cases_torch.py; see _harness.py for the catalogue).

The catalogue's tensors are (6, 3): six tokens of three features. The valid calls use them as token
representations (``h``, ``h_clean``, ``h_noisy``), as gradients and as the two streams of the fusion; the
server of the valid calls is a parameter-free function of any shape, so a valid tensor of another rank (the
catalogue's (2, 3, 4, 5)) is not tried where any rank is valid. The BERT cases build a randomly initialised
tiny BertModel (hidden size 8, two blocks).
"""

import numpy as np  # noqa: F401

from _harness import Case

ANY_RANK = ("torch.ones((2, 3, 4, 5))",)


def _m():
    import numtk.torch.pisa as pisa

    return pisa


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _server(h, attention_mask=None):
    import torch

    return 2.0 * torch.tanh(h)


def _tiny_bert():
    import torch
    import transformers

    cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=16, max_position_embeddings=16)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return transformers.BertModel(cfg).eval()


def _clip():
    return _m().clip_and_noise, (_t(6, 3), 1.0, 0.5), {"per": "token", "mechanism": "gaussian", "rng": 0}


def _clip_sequence():
    return _m().clip_and_noise, (_t(6, 3), 1.0, 0.5), {"per": "sequence", "rng": 1}


def _clip_dx():
    return _m().clip_and_noise, (_t(6, 3), 1.0, 0.5), {"per": "token", "mechanism": "dx", "rng": 2}


def _sigma():
    return _m().gaussian_sigma, (1.0, 1e-5), {"sensitivity": 1.0}


def _delta():
    return _m().gaussian_delta, (1.0, 3.0), {"sensitivity": 1.0}


def _epsilon():
    return _m().gaussian_epsilon, (3.0, 1e-5), {"sensitivity": 1.0}


def _split_epsilon():
    return _m().split_epsilon, (1.0, 4.0, 16, 2, 1e-5), {"per": "token", "mechanism": "gaussian",
                                                           "orders": np.arange(2.0, 33.0)}


def _split_epsilon_dx():
    return _m().split_epsilon, (1.0, 4.0, 16, 2, 1e-5), {"mechanism": "dx"}


def _split_model():
    return _m().SplitModel, (_server, _server, _server), dict(clip_norm=1.0, noise_multiplier=0.5, per="token",
                                                              send_mask=False, head_inputs=False)


def _split_method(name):
    def make():
        model = _m().SplitModel(lambda x: x, _server, None, clip_norm=1.0, noise_multiplier=0.5)
        return getattr(model, name), (_t(6, 3),), {"stream": "noisy", "rng": 0}
    return make


def _serve():
    model = _m().SplitModel(lambda x: x, _server, None, clip_norm=1.0, noise_multiplier=0.5, send_mask=True)
    return model.serve, (_t(6, 3),), {"attention_mask": None}


def _split_bert():
    return _m().split_bert, (_tiny_bert(), 1), {"freeze_client": True}


def _client():
    bert = _tiny_bert()
    return _m().BertClient, (bert.embeddings, list(bert.encoder.layer[:1])), {}


def _client_forward():
    import torch

    client, _ = _m().split_bert(_tiny_bert(), 1)
    ids = torch.tensor([[1, 5, 7, 2], [1, 3, 2, 0]])
    return client.forward, (ids,), {"attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
                                    "token_type_ids": None}


def _server_ctor():
    return _m().BertServer, (list(_tiny_bert().encoder.layer[1:]),), {}


def _server_forward():
    _, server = _m().split_bert(_tiny_bert(), 1)
    return server.forward, (_t(2, 4, 8),), {"attention_mask": None}


def _mrp():
    return _m().mrp_loss, (_server, _t(6, 3), _t(6, 3, seed=1), 0.5), dict(teacher=None, task_loss=None,
                                                                          reduction="mean")


def _mrp_task():
    return _m().mrp_loss, (_server, _t(6, 3), _t(6, 3, seed=1), 0.5), dict(teacher=_server,
                                                                          task_loss=lambda z: z.mean())


def _fusion():
    return _m().DualStreamFusion, (3,), {"rng": 0}


def _fusion_forward():
    return _m().DualStreamFusion(3, rng=0).forward, (_t(6, 3), _t(6, 3, seed=1)), {}


def _rectify():
    return _m().rectify_gradients, (_t(6, 3), -_t(6, 3)), {}


def _demo():
    return _m().demo, (), dict(steps=1, rng=0, progress=False, sigmas=(0.0, 0.1), n_train=4, n_test=4, model="tiny",
                               dsc=False)


PISA: list = [
    Case("numtk.torch.pisa.clip_and_noise", _clip, {}, positional={"h": 0, "clip_norm": 1, "noise_multiplier": 2},
         skip={"h": ANY_RANK}),
    Case("numtk.torch.pisa.clip_and_noise[sequence]", _clip_sequence, {"h": "tensor"}, positional={"h": 0},
         skip={"h": ANY_RANK}),
    Case("numtk.torch.pisa.clip_and_noise[dx]", _clip_dx,
         {"h": "tensor", "clip_norm": "real>0", "noise_multiplier": "real>=0", "per": "option"},
         positional={"h": 0, "clip_norm": 1, "noise_multiplier": 2}, skip={"h": ANY_RANK}),
    Case("numtk.torch.pisa.gaussian_sigma", _sigma, {}, positional={"epsilon": 0, "delta": 1}),
    Case("numtk.torch.pisa.gaussian_delta", _delta, {}, positional={"epsilon": 0, "sigma": 1}),
    Case("numtk.torch.pisa.gaussian_epsilon", _epsilon, {}, positional={"sigma": 0, "delta": 1}),
    # orders=None is the documented default grid
    Case("numtk.torch.pisa.split_epsilon", _split_epsilon, {},
         positional={"clip_norm": 0, "noise_multiplier": 1, "seq_len": 2, "releases": 3, "delta": 4},
         skip={"orders": ("None",)}),
    Case("numtk.torch.pisa.split_epsilon[dx]", _split_epsilon_dx,
         {"clip_norm": "real>0", "noise_multiplier": "real>0", "seq_len": "int>=1", "releases": "int>=1",
          "per": "option"},
         positional={"clip_norm": 0, "noise_multiplier": 1, "seq_len": 2, "releases": 3, "delta": 4}),
    # head=None is documented (the server's output is returned)
    Case("numtk.torch.pisa.SplitModel", _split_model, {}, positional={"client": 0, "server": 1, "head": 2},
         skip={"head": ("None",)}),
    Case("numtk.torch.pisa.SplitModel.release", _split_method("release"), {}),
    Case("numtk.torch.pisa.SplitModel.forward", _split_method("forward"), {}),
    Case("numtk.torch.pisa.SplitModel.serve", _serve, {}, positional={"h": 0}, skip={"h": ANY_RANK}),
    Case("numtk.torch.pisa.split_bert", _split_bert, {}, positional={"model": 0, "layer": 1}),
    Case("numtk.torch.pisa.BertClient", _client, {"embeddings": "callable", "layers": "option"},
         positional={"embeddings": 0, "layers": 1}, skip={"layers": ("None",)}),
    Case("numtk.torch.pisa.BertClient.forward", _client_forward,
         {"input_ids": "option", "attention_mask": "option"}, positional={"input_ids": 0},
         skip={"attention_mask": ("None",)}),
    Case("numtk.torch.pisa.BertServer", _server_ctor, {"layers": "option"}, positional={"layers": 0},
         skip={"layers": ("None",)}),
    Case("numtk.torch.pisa.BertServer.forward", _server_forward, {"attention_mask": "option"},
         positional={"hidden": 0}, skip={"attention_mask": ("None",)}),
    # teacher=None and task_loss=None are documented (the server itself; no task term)
    Case("numtk.torch.pisa.mrp_loss", _mrp, {}, positional={"server": 0, "h_clean": 1, "h_noisy": 2, "lam": 3},
         skip={"teacher": ("None",), "task_loss": ("None",), "h_clean": ANY_RANK, "h_noisy": ANY_RANK}),
    Case("numtk.torch.pisa.mrp_loss[task]", _mrp_task, {"teacher": "callable", "task_loss": "callable"}),
    Case("numtk.torch.pisa.DualStreamFusion", _fusion, {}, positional={"dim": 0}),
    Case("numtk.torch.pisa.DualStreamFusion.forward", _fusion_forward, {}, positional={"a": 0, "b": 1}),
    Case("numtk.torch.pisa.rectify_gradients", _rectify, {}, positional={"g_task": 0, "g_comp": 1}),
    Case("numtk.torch.pisa.demo", _demo, {}, skip={"steps": ("None",)}, timeout=120.0),
]
