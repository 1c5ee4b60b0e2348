"""Side-by-side runs of numtk.torch.tokendrop for ``bench/compare.py --tokendrop``: the activation memory and the
training-step time of TokenDrop against plain backpropagation and DropBP's layer-level skipping, on the CPU.

The problem: a llama-layout model (:class:`~numtk.torch.tokendrop.TinyLlamaForCausalLM`: width 256, 8 query and
4 key/value heads of 32, SwiGLU MLP 688, vocabulary 256) with LoRA (rank 8, alpha 16) on ``q_proj`` and
``v_proj``, the base frozen, trained on a copy-task batch: 8 blocks, 2 sequences of 512 tokens (``--quick``: 4
blocks, 2 x 256). One step is the forward pass, the loss, the backward pass and ``zero_grad`` (no optimizer
update: it is the same for every contestant).

The contestants, each a fresh model with the same weights:

- **backprop**: plain backpropagation;
- **TokenDrop rho**: :func:`~numtk.torch.tokendrop.wrap_model` (the default ``exact=True``: forward values
  bit-identical to backprop's, the gradient from the token split; lazy scheduling with the default quarter of
  the blocks dense) at rho = 1, 0.5 and 0.25, and without lazy blocks at 0.5 and 0.25;
- **TokenDrop exact=False**: the split alone (forward equal to backprop's up to rounding; one forward of the
  selected tokens fewer) at rho = 0.5 and 0.25;
- **DropBP rho**: DropBP's rule, each block's backward kept with probability rho (the drop rate 1 - rho),
  dropped blocks run under ``torch.no_grad()``; and DropBP as published (``skip='detach'``: the dropped branch
  computed with autograd, then detached).

A second table runs transformers' ``LlamaForCausalLM`` with ``attn_implementation='sdpa'`` (the same weights and
LoRA, 4 blocks) on 2 sequences of 2048 tokens (``--quick``: 512): there plain backpropagation saves no attention
probabilities, so neither may the split (it attends through ``scaled_dot_product_attention``).

Saved bytes are :func:`~numtk.torch.tokendrop.saved_activation_bytes` of one forward (DropBP's random skipping:
the mean of 16 forwards, 8 with ``--quick``). Times are medians of interleaved rounds
(:func:`benchmarks._timing.interleaved`), torch on one intra-op thread (small matrices; on shared cores a second
thread mostly adds synchronisation).
"""

from __future__ import annotations

import os
import time

import numpy as np

from benchmarks._timing import interleaved

__all__ = ["compare", "make_model", "make_hf_model", "CONTESTANTS", "HF_CONTESTANTS", "SIZES", "HF_SIZES"]

#: (blocks, batch, sequence length): full and --quick
SIZES = {"full": (8, 2, 512), "quick": (4, 2, 256)}
#: the same for transformers' LlamaForCausalLM with sdpa attention (long sequences: where (T, T) tensors count)
HF_SIZES = {"full": (4, 2, 2048), "quick": (4, 2, 512)}
#: name -> wrap_model keywords (None: plain backpropagation); the DropBP ``detach`` row sets skip afterwards
CONTESTANTS = {
    "backprop": None,
    "TokenDrop rho=1": dict(rho=1.0),
    "TokenDrop rho=0.5": dict(rho=0.5),
    "TokenDrop rho=0.25": dict(rho=0.25),
    "TokenDrop rho=0.5, no lazy": dict(rho=0.5, lazy_layers=0),
    "TokenDrop rho=0.25, no lazy": dict(rho=0.25, lazy_layers=0),
    "TokenDrop rho=0.5, exact=False": dict(rho=0.5, exact=False),
    "TokenDrop rho=0.25, exact=False": dict(rho=0.25, exact=False),
    "DropBP rho=0.5": dict(rho=0.5, mode="layerdrop", rng=0),
    "DropBP rho=0.25": dict(rho=0.25, mode="layerdrop", rng=0),
    "DropBP rho=0.5, detach": dict(rho=0.5, mode="layerdrop", rng=0),
}
#: the contestants on transformers' LlamaForCausalLM
HF_CONTESTANTS = {
    "backprop": None,
    "TokenDrop rho=0.5": dict(rho=0.5),
    "TokenDrop rho=0.25": dict(rho=0.25),
    "TokenDrop rho=0.5, exact=False": dict(rho=0.5, exact=False),
    "TokenDrop rho=0.25, exact=False": dict(rho=0.25, exact=False),
    "DropBP rho=0.5": dict(rho=0.5, mode="layerdrop", rng=0),
}
WIDTH = dict(vocab_size=256, hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=4)


def make_model(blocks: int, wrap: dict | None = None, *, name: str = ""):
    """The benchmark's model (fixed weights) with LoRA on q_proj and v_proj, wrapped as ``wrap`` says."""
    from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM, apply_lora, wrap_model

    model = apply_lora(TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=blocks, **WIDTH), rng=0), r=8,
                       alpha=16.0, rng=1)
    if wrap is not None:
        wrap_model(model, **wrap)
        if name.endswith("detach"):
            for block in model.model.layers:
                block.skip = "detach"
    return model.train()


def _step(model, ids, labels):
    from numtk.torch.tokendrop import lm_loss

    def run():
        loss = lm_loss(model(ids), labels)
        if loss.requires_grad:  # DropBP may drop every block's backward pass
            loss.backward()
        model.zero_grad(set_to_none=True)
        return float(loss.detach())
    return run


def _saved(model, ids, labels, draws, hf=False):
    from numtk.torch.tokendrop import lm_loss, saved_activation_bytes

    fwd = (lambda: lm_loss(model(ids, use_cache=False).logits, labels)) if hf else \
        (lambda: lm_loss(model(ids), labels))
    return float(np.mean([saved_activation_bytes(fwd) for _ in range(draws)]))


def _table(title, models, saved, timings, diffs):
    print(title)
    base_b, base_t = saved["backprop"], timings.medians["backprop"]
    print(f"  {'contestant':<31} {'saved MiB':>9} {'memory':>7} {'saving':>7} {'step s':>7} {'speed-up':>8}  "
          "forward vs backprop")
    for name in models:
        b, t = saved[name], timings.medians[name]
        fwd = ("bit-identical" if diffs.get(name) == 0.0 else
               f"max |diff| {diffs[name]:.1e}" if name in diffs else "identical values")
        print(f"  {name:<31} {b / 2**20:>9.1f} {b / base_b:>7.3f} {100 * (1 - b / base_b):>6.1f}% "
              f"{t:>7.3f} {base_t / t:>7.2f}x  {fwd}")


def compare(*, quick: bool = False, options=None) -> None:
    import torch

    from numtk.torch._common import torch_threads
    from numtk.torch.tokendrop import copy_task

    blocks, batch, length = SIZES["quick" if quick else "full"]
    repeat = getattr(options, "repeat", None) or (5 if quick else 7)
    t0 = time.perf_counter()
    with torch_threads(1):
        ids, labels = copy_task(batch, length, WIDTH["vocab_size"], rng=0)
        models = {name: make_model(blocks, wrap, name=name) for name, wrap in CONTESTANTS.items()}
        saved = {name: _saved(m, ids, labels, (8 if quick else 16) if "DropBP" in name else 1)
                 for name, m in models.items()}
        with torch.no_grad():
            ref = models["backprop"](ids)
        # the forward in training mode (the wrappers split only then): values against backprop's
        diffs = {name: float((m(ids).detach() - ref).abs().max()) for name, m in models.items() if "TokenDrop" in name}
        timings = interleaved({name: _step(m, ids, labels) for name, m in models.items()}, repeat=repeat)
    _table(f"TokenDrop: a llama of {blocks} blocks (width 256, 8/4 heads of 32, MLP 688) with LoRA r=8 on "
           f"q_proj, v_proj; copy-task batch {batch} x {length}; CPU, torch on 1 thread ({os.cpu_count()} cores "
           f"here); step = forward + loss + backward; medians of {repeat} interleaved rounds", models, saved,
           timings, diffs)
    _compare_transformers(quick=quick, repeat=max(3, repeat - 2))
    print("  (paper, abstract: up to 42.9 % less memory and 1.50x faster than backpropagation, on GPUs at LLM "
          "scale; DropBP's saved bytes and times are means over its random skips)")
    print(f"  [{time.perf_counter() - t0:.1f} s]")


def make_hf_model(blocks: int, length: int, wrap: dict | None = None):
    """transformers' LlamaForCausalLM (``sdpa`` attention) with the weights of :func:`make_model`'s llama and the
    same LoRA, wrapped as ``wrap`` says."""
    import transformers

    from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM, apply_lora, wrap_model

    cfg = transformers.LlamaConfig(**WIDTH, num_hidden_layers=blocks, max_position_embeddings=length,
                                   attn_implementation="sdpa", attention_bias=False, mlp_bias=False,
                                   rms_norm_eps=1e-6)
    model = transformers.LlamaForCausalLM(cfg)
    model.load_state_dict(TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=blocks, **WIDTH),
                                               rng=0).state_dict())
    apply_lora(model, r=8, alpha=16.0, rng=1)
    if wrap is not None:
        wrap_model(model, **wrap)
    return model.train()


def _hf_step(model, ids, labels):
    from numtk.torch.tokendrop import lm_loss

    def run():
        loss = lm_loss(model(ids, use_cache=False).logits, labels)
        if loss.requires_grad:
            loss.backward()
        model.zero_grad(set_to_none=True)
        return float(loss.detach())
    return run


def _compare_transformers(*, quick: bool, repeat: int) -> None:
    import torch

    try:
        import transformers  # noqa: F401
    except ImportError:
        print("  (transformers is not installed: its LlamaForCausalLM table is skipped)")
        return
    from numtk.torch._common import torch_threads
    from numtk.torch.tokendrop import copy_task

    blocks, batch, length = HF_SIZES["quick" if quick else "full"]
    with torch_threads(1):
        ids, labels = copy_task(batch, length, WIDTH["vocab_size"], rng=0)
        models = {name: make_hf_model(blocks, length, wrap) for name, wrap in HF_CONTESTANTS.items()}
        saved = {name: _saved(m, ids, labels, 8 if "DropBP" in name else 1, hf=True) for name, m in models.items()}
        with torch.no_grad():
            ref = models["backprop"](ids, use_cache=False).logits
        diffs = {name: float((m(ids, use_cache=False).logits.detach() - ref).abs().max())
                 for name, m in models.items() if "TokenDrop" in name}
        timings = interleaved({name: _hf_step(m, ids, labels) for name, m in models.items()}, repeat=repeat)
    _table(f"TokenDrop on transformers' LlamaForCausalLM (attn_implementation='sdpa', the same weights and LoRA), "
           f"{blocks} blocks, copy-task batch {batch} x {length}; torch on 1 thread; medians of {repeat} "
           "interleaved rounds", models, saved, timings, diffs)
