"""Fuzz cases of numtk.torch.dipg (collected by cases_torch.py; see _harness.py for the catalogue).

The catalogue's tensors are (6, 3): six items of three features. The top-k functions take any leading batch
dimensions, so the catalogue's "a dimension too many" tensor (2, 3, 4, 5) is a valid ``scores``, ``theta`` or
``values``-like input there and is not tried; ``topk_mask`` also takes integer scores and infinities (``-inf``
excludes an item), so those catalogue values are not tried on ``scores``. The graphs of the valid calls have six
nodes (a path 0 - 1 - ... - 5, both directions), features of width 3 (the catalogue's ``x``), and the prompt
models are float32 in training mode (so that ``rng`` is used).
"""

import numpy as np  # noqa: F401

from _harness import Case

ANY_RANK = ("torch.ones((2, 3, 4, 5))",)
INT_SCORES = ("torch.ones((6, 3), dtype=torch.int64)", "torch.full((6, 3), float('inf'))")


def _m():
    import numtk.torch.dipg as dipg

    return dipg


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _path():
    import torch

    a = torch.arange(5)
    return torch.stack([torch.cat([a, a + 1]), torch.cat([a + 1, a])])


def _topk():
    return _m().topk_mask, (_t(6, 3), 2), {}


def _noise():
    import torch

    return _m().sum_of_gamma_noise, ((6, 3), 2), {"n_iter": 5, "rng": 0, "dtype": torch.float64, "device": "cpu"}


def _imle():
    return _m().imle_topk, (_t(6, 3), 1), dict(lam=10.0, n_samples=2, noise_temperature=1.0, rng=0)


def _screened():
    v = _t(6, 3)
    return _m().screened_topk, (v, 1, v - 0.5, v + 0.5), {"threshold": None}


def _screened_threshold():
    import torch

    v = _t(6, 3)
    return _m().screened_topk, (v, 1, v - 0.5, v + 0.5), {"threshold": torch.full((6,), -10.0)}


def _candidates():
    return _m().candidate_edges, (_path(), 6, 2), {"hops": 2}


def _gcn():
    return _m().GCN, (3, 4, 2), {}


def _gcn_forward():
    import torch

    torch.manual_seed(0)
    return _m().GCN(3, 4, 2).forward, (_t(6, 3), _path()), {"edge_weight": torch.ones(10)}


def _prompt():
    import torch

    torch.manual_seed(0)
    return _m().DiscreteGraphPrompt, (_m().GCN(3, 4, 4), 2), dict(
        score_hidden=8, lam=10.0, num_classes=2, embed_dim=4, hops=2, n_samples=1, noise_temperature=1.0,
        mode="imle", temperature=0.2)


def _model():
    import torch

    torch.manual_seed(0)
    return _m().DiscreteGraphPrompt(_m().GCN(3, 4, 4), 2, score_hidden=8, num_classes=2)


def _prompt_forward():
    import torch

    model = _model()
    x = _t(6, 3)
    return model.forward, (x, _path(), torch.tensor([0, 3])), {"rng": 0, "embeddings": model.embed(x, _path())}


def _prompt_embed():
    return _model().embed, (_t(6, 3), _path()), {}


def _prompt_scores():
    import torch

    model = _model()
    x = _t(6, 3)
    return model.scores, (x, _path(), torch.tensor([1, 4])), {"embeddings": model.embed(x, _path())}


def _prompt_selected():
    import torch

    model = _model().eval()
    x = _t(6, 3)
    return model.selected_nodes, (x, _path(), torch.tensor([2])), {"embeddings": model.embed(x, _path())}


def _prompt_train():
    return _model().train, (True,), {}


def _demo():
    return _m().demo, (), {"steps": 2, "rng": 0, "progress": False, "n_ego": 8}


DIPG: list = [
    Case("numtk.torch.dipg.topk_mask", _topk, {}, positional={"scores": 0, "k": 1},
         skip={"scores": ANY_RANK + INT_SCORES}),
    # dtype=None (the default dtype) is documented
    Case("numtk.torch.dipg.sum_of_gamma_noise", _noise, {}, positional={"shape": 0, "k": 1},
         skip={"dtype": ("None",)}),
    Case("numtk.torch.dipg.imle_topk", _imle, {}, positional={"theta": 0, "k": 1}, skip={"theta": ANY_RANK}),
    Case("numtk.torch.dipg.screened_topk", _screened, {},
         positional={"values": 0, "k": 1, "lower": 2, "upper": 3}),
    Case("numtk.torch.dipg.screened_topk[threshold]", _screened_threshold, {"threshold": ("tensor", "real")},
         positional={"values": 0}),
    Case("numtk.torch.dipg.candidate_edges", _candidates, {}, positional={"edges": 0, "num_nodes": 1, "target": 2}),
    Case("numtk.torch.dipg.GCN", _gcn, {}, positional={"in_dim": 0, "hidden": 1, "out_dim": 2}),
    Case("numtk.torch.dipg.GCN.forward", _gcn_forward, {}, positional={"x": 0, "edges": 1}),
    Case("numtk.torch.dipg.DiscreteGraphPrompt", _prompt, {}, positional={"gnn": 0, "k": 1}),
    Case("numtk.torch.dipg.DiscreteGraphPrompt.forward", _prompt_forward, {},
         positional={"x": 0, "edges": 1, "targets": 2}),
    Case("numtk.torch.dipg.DiscreteGraphPrompt.embed", _prompt_embed, {}, positional={"x": 0, "edges": 1}),
    Case("numtk.torch.dipg.DiscreteGraphPrompt.scores", _prompt_scores, {},
         positional={"x": 0, "edges": 1, "targets": 2}),
    Case("numtk.torch.dipg.DiscreteGraphPrompt.selected_nodes", _prompt_selected, {},
         positional={"x": 0, "edges": 1, "targets": 2}),
    Case("numtk.torch.dipg.DiscreteGraphPrompt.train", _prompt_train, {}, positional={"mode": 0}),
    Case("numtk.torch.dipg.demo", _demo, {}, timeout=60.0),
]
