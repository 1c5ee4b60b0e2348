"""Side-by-side runs of numtk.torch.ffr for ``bench/compare.py --ffr``: the cost of the GRPO token loss and of one
GRPO step against a plain cross-entropy step, on the CPU.

Two tables, each timed in interleaved rounds (:func:`benchmarks._timing.interleaved`), torch on one intra-op
thread:

- **the token loss** (forward and backward) on (B, T) per-token log-probabilities, B = 64 sequences of T = 512
  tokens (``--quick``: 32 x 256), three quarters of them completion tokens: :func:`~numtk.torch.ffr.grpo_token_loss`
  (argument checks included) against the anchor's expression written inline (the authors' trainer: ratio trick,
  k3 KL, mean over completion tokens then sequences) and against a masked mean of ``-logp`` (the cheapest loss of
  the same shape);
- **one training step** of a llama of ``transformers`` (4 blocks, width 256, 8/4 heads, MLP 688, vocabulary 4096;
  ``--quick``: 2 blocks) on 8 sequences (2 prompts x G = 4) of 64 prompt and 64 completion tokens:
  :func:`~numtk.torch.ffr.grpo_step` (the policy's forward and backward, the reference's forward, the loss, an Adam
  step) against a plain cross-entropy step on the same tokens and completion mask (forward, backward, Adam step),
  and the policy's share alone (``grpo_step`` with ``beta=0`` and no reference).
"""

from __future__ import annotations

import copy
import os
import time

from benchmarks._timing import interleaved

__all__ = ["compare", "make_llama", "make_batch", "loss_inputs", "SIZES", "LOSS_SIZES", "WIDTH"]

#: (blocks, prompts, G, prompt tokens, completion tokens): full and --quick
SIZES = {"full": (4, 2, 4, 64, 64), "quick": (2, 2, 4, 64, 64)}
#: (B, T) of the token-loss table
LOSS_SIZES = {"full": (64, 512), "quick": (32, 256)}
WIDTH = dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_attention_heads=8, num_key_value_heads=4)


def make_llama(blocks: int, seed: int = 0):
    """transformers' LlamaForCausalLM (sdpa attention) with random weights drawn from ``seed``."""
    import torch
    import transformers

    cfg = transformers.LlamaConfig(num_hidden_layers=blocks, max_position_embeddings=512, **WIDTH)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return transformers.LlamaForCausalLM(cfg).train()


def make_batch(prompts: int, G: int, p_len: int, c_len: int, seed: int = 0):
    """Token ids (prompts x G, p_len + c_len), the attention mask, the completion mask and advantages."""
    import torch

    from numtk.torch.ffr import group_normalized_advantages

    g = torch.Generator().manual_seed(seed)
    B, L = prompts * G, p_len + c_len
    ids = torch.randint(0, WIDTH["vocab_size"], (B, L), generator=g)
    attn = torch.ones(B, L, dtype=torch.long)
    comp = torch.zeros(B, L, dtype=torch.bool)
    comp[:, p_len:] = True
    adv = group_normalized_advantages(torch.rand(B, generator=g), G)
    return ids, attn, comp, adv


def loss_inputs(B: int, T: int, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(B, T, generator=g) * 5).requires_grad_(True)
    ref = -torch.rand(B, T, generator=g) * 5
    adv = torch.randn(B, generator=g)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[:, T // 4:] = True
    return logp, ref, adv, mask


def _anchor_loss(logp, ref, adv, mask, beta=0.04):
    """The authors' trainer's loss, written inline (mask as float, ratio trick, k3 KL clamped at 10)."""
    import torch

    x = torch.clamp(ref - logp, min=-10, max=10)
    kl = torch.exp(x) - x - 1
    per = torch.exp(logp - logp.detach()) * adv.unsqueeze(1)
    per = -(per - beta * kl)
    m = mask.float()
    return ((per * m).sum(dim=1) / m.sum(dim=1)).mean()


def _loss_table(quick: bool, repeat: int) -> None:
    from numtk.torch.ffr import grpo_token_loss

    B, T = LOSS_SIZES["quick" if quick else "full"]
    logp, ref, adv, mask = loss_inputs(B, T)

    def run(fn):
        def call():
            logp.grad = None
            loss = fn()
            loss.backward()
            return float(loss.detach())
        return call

    calls = {"numtk grpo_token_loss": run(lambda: grpo_token_loss(logp, ref, adv, mask, 0.04)),
             "anchor's expression inline": run(lambda: _anchor_loss(logp, ref, adv, mask)),
             "masked mean of -logp": run(lambda: -(logp * mask).sum() / mask.sum())}
    t = interleaved(calls, repeat=repeat, min_time=0.05)
    same = abs(t.results["numtk grpo_token_loss"] - t.results["anchor's expression inline"])
    base = t.medians["anchor's expression inline"]
    print(f"GRPO token loss, forward + backward: {B} sequences x {T} tokens (3/4 completion), float32; medians of "
          f"{repeat} interleaved rounds")
    print(f"  {'contestant':<28} {'ms':>8} {'vs anchor inline':>17}")
    for name in calls:
        print(f"  {name:<28} {1e3 * t.medians[name]:>8.3f} {t.medians[name] / base:>16.2f}x")
    print(f"  (numtk's value minus the anchor's: {same:.1e})")


def _step_table(quick: bool, repeat: int) -> None:
    import torch

    from numtk.torch.ffr import grpo_step

    blocks, prompts, G, p_len, c_len = SIZES["quick" if quick else "full"]
    ids, attn, comp, adv = make_batch(prompts, G, p_len, c_len)
    models = {name: make_llama(blocks) for name in ("grpo", "grpo_nokl", "ce")}
    ref = copy.deepcopy(models["grpo"]).eval()
    opts = {name: torch.optim.Adam(m.parameters(), lr=1e-5) for name, m in models.items()}
    labels = ids.masked_fill(~comp, -100)

    def grpo(name, beta):
        def call():
            r = grpo_step(models[name], ref if beta else None, opts[name], ids, attn, comp, adv, beta=beta)
            return r.loss
        return call

    def ce():
        model, opt = models["ce"], opts["ce"]
        opt.zero_grad(set_to_none=True)
        loss = model(ids, attention_mask=attn, labels=labels, use_cache=False).loss
        loss.backward()
        opt.step()
        return float(loss.detach())

    calls = {"GRPO step (beta 0.04, reference forward)": grpo("grpo", 0.04),
             "GRPO step (beta 0, no reference)": grpo("grpo_nokl", 0.0),
             "cross-entropy step": ce}
    t = interleaved(calls, repeat=repeat)
    base = t.medians["cross-entropy step"]
    n_param = sum(p.numel() for p in models["ce"].parameters())
    print(f"One training step of transformers' LlamaForCausalLM ({blocks} blocks, width 256, 8/4 heads, MLP 688, "
          f"vocabulary 4096; {n_param / 1e6:.1f} M parameters), {prompts * G} sequences ({prompts} prompts x G = {G}) "
          f"of {p_len} prompt + {c_len} completion tokens, Adam; medians of {repeat} interleaved rounds")
    print(f"  {'contestant':<42} {'s':>8} {'vs cross-entropy':>17}")
    for name in calls:
        print(f"  {name:<42} {t.medians[name]:>8.3f} {t.medians[name] / base:>16.2f}x")


def compare(*, quick: bool = False, options=None) -> None:
    from numtk.torch._common import torch_threads

    repeat = getattr(options, "repeat", None) or (5 if quick else 9)
    t0 = time.perf_counter()
    with torch_threads(1):
        _loss_table(quick, repeat)
        _step_table(quick, max(3, repeat - 2))
    print(f"  (CPU, torch on 1 thread, {os.cpu_count()} cores here. grpo_step adds the reference model's forward but "
          f"computes the logits of the completion positions only (logits_to_keep), where the cross-entropy step of "
          f"transformers computes them at every position; the paper reports no timings)")
    print(f"  [{time.perf_counter() - t0:.1f} s]")
