"""Fuzz cases of the PyTorch bridge, numtk.torch (see _harness.py for the catalogue and the outcomes).

The layer runs in a process group of one rank (gloo, in the fuzzing child); its valid call has T = 6 tokens
of D = 3 features over N = 3 experts, so that the catalogue's (6, 3) tensors fit ``x`` and
``router_logits``. ``run_distributed`` and ``benchmark_llep`` spawn processes for every call that passes
their checks (a few seconds each), so their valid calls are the smallest runs.
"""

import numpy as np

from _harness import Case
# one list per further room of the bridge, each in its own file
from _cases_moddit import MODDIT
from _cases_mswt import MSWT
from _cases_spectral import SPECTRAL
from _cases_tokendrop import TOKENDROP
from _cases_contrastive import CONTRASTIVE
from _cases_dipg import DIPG
from _cases_dyco import DYCO
from _cases_knowbias import KNOWBIAS
from _cases_ffr import FFR
from _cases_privcode import PRIVCODE
from _cases_pisa import PISA
from _cases_hirsch import HIRSCH
from _cases_psro_oracle import PSRO_ORACLE
from _cases_models import MODELS


def _llep_module():
    import torch.distributed as dist

    import numtk.torch.llep as llep

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return llep


def _layer():
    import torch

    from numtk.moe import routing_loads, standard_ep_plan

    g = torch.Generator().manual_seed(0)
    T, N, D, H = 6, 3, 3, 2
    x = torch.randn(T, D, generator=g)
    logits = torch.randn(T, N, generator=g)
    experts = (torch.randn(N, H, D, generator=g), torch.randn(N, H, D, generator=g),
               torch.randn(N, D, H, generator=g))
    plan = standard_ep_plan(routing_loads(logits.numpy(), 2), 1)
    return x, logits, experts, plan


def _forward():
    x, logits, experts, plan = _layer()
    return _llep_module().llep_moe_forward, (x, logits, experts, plan), {"top_k": 2, "normalize": False}


def _forward_planner():
    from numtk.moe import llep_plan

    x, logits, experts, _ = _layer()
    return _llep_module().llep_moe_forward, (x, logits, experts, lambda loads: llep_plan(loads, 1)), {"top_k": 2}


def _run():
    import torch.distributed as dist

    import numtk.torch.llep as llep

    return llep.run_distributed, (dist.get_world_size, 1), {"timeout": 120.0, "threads": 1}


def _benchmark():
    import numtk.torch.llep as llep

    return llep.benchmark_llep, (), dict(world_size=1, tokens=16, hidden_size=4, intermediate_size=4, num_experts=4,
                                         top_k=2, num_hot=1, repeats=1, warmup=0, timeout=120.0)


# --- numtk.torch.puzzle: PackedExperts --------------------------------------------------------------
# Three pairs of 3 x 3 experts (six experts), so that the catalogue's (6, 3) tensors fit ``x``.
def _packed_layer(gated=False):
    from numtk.moe import merge_experts

    rng = np.random.default_rng(0)
    if gated:  # D = 3, H = 4
        experts = {"w_gate": rng.normal(0, 0.3, (6, 4, 3)), "w_up": rng.normal(0, 0.3, (6, 4, 3)),
                   "w_down": rng.normal(0, 0.3, (6, 3, 4))}
    else:
        experts = rng.normal(0, 0.3, (6, 3, 3))
    return merge_experts(experts, pairs="sequential")


def _packed_ctor():
    from numtk.torch.puzzle import PackedExperts

    res = _packed_layer()
    return PackedExperts, (res.packed, np.array([[1, 0], [2, 5], [4, 3]])), {"backend": "auto", "workers": 1}


def _packed_method(name, gated=False, **kw):
    def make():
        import torch

        from numtk.torch.puzzle import PackedExperts

        layer = PackedExperts(_packed_layer(gated))
        args = (torch.linspace(-1, 1, 18).reshape(6, 3),) if name == "forward" else ()
        return getattr(layer, name), args, kw
    return make


PUZZLE: list = [
    Case("numtk.torch.puzzle.PackedExperts", _packed_ctor, {}, positional={"packed": 0, "pairs": 1}),
    # selection by expert: `position` None is its documented default
    Case("numtk.torch.puzzle.PackedExperts.forward", _packed_method("forward", expert=1), {},
         positional={"x": 0}, skip={"position": ("None",)}),
    Case("numtk.torch.puzzle.PackedExperts.forward[pair]", _packed_method("forward", pair=1, position=0),
         {"pair": "index", "position": "option"}),
    Case("numtk.torch.puzzle.PackedExperts.forward[gated]", _packed_method("forward", gated=True, expert=4),
         {"x": "tensor", "expert": "index"}, positional={"x": 0}),
    Case("numtk.torch.puzzle.PackedExperts.unpack", _packed_method("unpack", expert=1), {},
         skip={"position": ("None",)}),
    Case("numtk.torch.puzzle.PackedExperts.unpack[pair]", _packed_method("unpack", gated=True, pair=2, position=1),
         {"pair": "index", "position": "option"}),
]


CASES = {c.name: c for c in [
    # group=None is the documented default (the default process group)
    Case("numtk.torch.llep.llep_moe_forward", _forward, {},
         positional={"x": 0, "router_logits": 1, "experts": 2, "plan": 3}, skip={"group": ("None",)}),
    Case("numtk.torch.llep.llep_moe_forward[planner]", _forward_planner,
         {"x": "tensor", "router_logits": "tensor", "top_k": "int>=1"},
         positional={"x": 0, "router_logits": 1}),
    Case("numtk.torch.llep.run_distributed", _run, {}, positional={"fn": 0, "world_size": 1}, timeout=60.0),
    # world_size=1, num_hot=1, repeats=1 and warmup=0 are the valid call itself (each call spawns a process:
    # not twice)
    Case("numtk.torch.llep.benchmark_llep", _benchmark, {}, timeout=60.0,
         skip={"world_size": ("1",), "num_hot": ("1",), "repeats": ("1",), "warmup": ("0",)}),
    *PUZZLE,
    *TOKENDROP,
    *MODDIT,
    *MSWT,
    *SPECTRAL,
    *CONTRASTIVE,
    *DIPG,
    *DYCO,
    *KNOWBIAS,
    *FFR,
    *PRIVCODE,
    *PISA,
    *HIRSCH,
    *PSRO_ORACLE,
    *MODELS,
]}
