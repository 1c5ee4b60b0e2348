"""Side-by-side runs of numtk.torch.spectral for ``bench/compare.py --spectral``: what the alignment terms cost
beside the denoising loss, and what they buy in the demo's training.

**Cost.** A token denoiser (``TokenDenoiser``: a linear embedding of each token with its time, four residual MLP
blocks of width D, the hidden state read after the second, as REPA reads SiT's after block 8 of 28), on a batch
of B items of N = 16 tokens of 4 values, with REPA's projector (:func:`~numtk.torch.spectral.build_projector`,
hidden 2D, output 64) and a fixed target of 64 features per token. One training step's forward and backward of
:func:`~numtk.torch.spectral.diffusion_loss` is timed with no term (``plain``), with REPA's negative cosine
(``repa``), with the spectral regulariser (``spectral``: a second forward pass at an independent noise level;
every token a sample, so its Gram matrix is (BN) x (BN); ``tokens='mean'`` pools each item's tokens first, a
B x B Gram matrix) and with spectral REPA (``spectral_repa``). Interleaved
rounds (:func:`benchmarks._timing.interleaved`), medians; ratio = time / plain's (> 1: the term costs that much
more). The loss functions alone (forward and backward on the (BN, 64) embeddings: the spectral loss, REPA's
cosine, the mean squared error) are timed beside them. torch runs on one intra-op thread (like the demo;
``NUMTK_BENCH_TORCH_THREADS=all`` keeps all of them).

**Training.** The demo's comparison (:func:`numtk.torch.spectral.demo`: the 2-D mixture, same initialisation,
data and noise for every variant), summarised: the final held-out denoising loss against plain's, the excess
error to the exact optimal velocity at half and at all the steps, the step at which each variant's mean excess
curve reaches plain's final value, the transfer probe, and the time per step. ``--quick``: 300 steps and one
seed; otherwise the demo's default (800 steps, three seeds, the four variants).
"""

from __future__ import annotations

import os

from benchmarks._timing import interleaved

__all__ = ["compare", "TokenDenoiser", "token_problem", "loss_calls", "CONFIGS", "QUICK_CONFIGS"]

#: (batch B, width D) of the cost table; N = 16 tokens per item
CONFIGS = ((32, 128), (128, 128), (32, 512), (128, 512))
QUICK_CONFIGS = ((32, 128), (128, 256))
TOKENS, CHANNELS, EMBED = 16, 4, 64
REGULARIZERS = (None, "repa", "spectral", "spectral_repa")


def TokenDenoiser(width: int, *, channels: int = CHANNELS, blocks: int = 4, read: int = 2, seed: int = 0):
    """(x_t (B, N, C), t (B,)) -> (v (B, N, C), h (B, N, width)): residual MLP blocks on each token."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(seed)
            self.embed = torch.nn.Linear(channels + 1, width)
            self.blocks = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.Linear(width, 2 * width), torch.nn.SiLU(),
                                    torch.nn.Linear(2 * width, width)) for _ in range(blocks))
            self.out = torch.nn.Linear(width, channels)

        def forward(self, x, t):
            tt = t[:, None, None].expand(x.shape[0], x.shape[1], 1)
            h = self.embed(torch.cat([x, tt], dim=-1))
            hidden = None
            for i, block in enumerate(self.blocks):
                h = h + block(h)
                if i + 1 == read:
                    hidden = h
            return self.out(h), hidden

    return Net()


def token_problem(batch: int, width: int, *, seed: int = 0):
    """The model, projector, optimiser-free parameters, clean batch and fixed target of one cost row."""
    import torch

    from numtk.torch.spectral import build_projector

    g = torch.Generator().manual_seed(seed)
    model = TokenDenoiser(width, seed=seed)
    projector = build_projector(width, EMBED, hidden=2 * width, rng=seed)
    x0 = torch.randn(batch, TOKENS, CHANNELS, generator=g)
    target = torch.randn(batch, TOKENS, EMBED, generator=g)
    return model, projector, x0, target


def step_calls(batch: int, width: int) -> dict:
    """name -> a training step's forward and backward of diffusion_loss with that term."""
    import torch

    from numtk.torch.spectral import diffusion_loss

    model, projector, x0, target = token_problem(batch, width)
    params = list(model.parameters()) + list(projector.parameters())
    gen = torch.Generator().manual_seed(1)

    def make(reg, tokens="flatten"):
        def call():
            for p in params:
                p.grad = None
            res = diffusion_loss(model, x0, regularizer=reg, lam=0.5, projector=projector, target=target, rng=gen,
                                 tokens=tokens)
            res.loss.backward()
        return call

    calls = {("plain" if r is None else r): make(r) for r in REGULARIZERS}
    calls["spectral_mean"] = make("spectral", "mean")
    return calls


def loss_calls(rows: int) -> dict:
    """name -> forward and backward of the loss alone on (rows, EMBED) embeddings."""
    import torch

    from numtk.torch.spectral import repa_loss, spectral_contrastive_loss

    g = torch.Generator().manual_seed(2)
    z1 = torch.randn(rows, EMBED, generator=g).requires_grad_()
    z2 = torch.randn(rows, EMBED, generator=g).requires_grad_()

    def run(fn):
        def call():
            z1.grad = z2.grad = None
            fn().backward()
        return call

    return {"mse": run(lambda: ((z1 - z2) ** 2).mean()),
            "repa_loss": run(lambda: repa_loss(z1, z2)),
            "spectral_contrastive_loss": run(lambda: spectral_contrastive_loss(z1, z2))}


def _cost_table(quick: bool, repeat: int) -> None:
    threads = None if os.environ.get("NUMTK_BENCH_TORCH_THREADS") == "all" else 1
    import torch
    from numtk.torch._common import torch_threads

    with torch_threads(threads):
        print(f"Cost of one training step (forward + backward of diffusion_loss), N = {TOKENS} tokens of "
              f"{CHANNELS} values, projector hidden 2D, output {EMBED}; torch threads {torch.get_num_threads()}; "
              f"medians of {repeat} interleaved rounds")
        print("      B     D   plain (ms)    repa   spectral  spectral_repa  spectral (tokens='mean')   (time / plain)")
        for batch, width in (QUICK_CONFIGS if quick else CONFIGS):
            t = interleaved(step_calls(batch, width), repeat=repeat, min_time=0.05)
            m = t.medians
            print(f"  {batch:5d} {width:5d}   {m['plain'] * 1e3:10.2f}   {m['repa'] / m['plain']:5.2f}x  "
                  f"{m['spectral'] / m['plain']:7.2f}x  {m['spectral_repa'] / m['plain']:11.2f}x  "
                  f"{m['spectral_mean'] / m['plain']:21.2f}x")
        print(f"The losses alone, forward + backward on (rows, {EMBED}) embeddings (rows = B N):")
        print("   rows    MSE (ms)  repa_loss  spectral_contrastive_loss   (time / MSE)")
        for rows in ((512, 2048) if quick else (512, 2048, 8192)):
            t = interleaved(loss_calls(rows), repeat=repeat, min_time=0.05)
            m = t.medians
            print(f"  {rows:5d}   {m['mse'] * 1e3:8.3f}   {m['repa_loss'] / m['mse']:7.2f}x   "
                  f"{m['spectral_contrastive_loss'] / m['mse']:10.2f}x")


def _training_table(quick: bool) -> None:
    from numtk.torch.spectral import demo

    if quick:
        res = demo(steps=300, seeds=1, variants=("plain", "spectral", "spectral_repa"))
    else:
        res = demo()
    m, h = res.metrics, res.history
    half = len(h["step"]) // 2 - 1
    print(f"Training: the demo's 2-D mixture, {m['steps']} steps, {m['seeds']} seed(s), same initialisation, data "
          f"and noise per seed ({res.wall_time:.0f} s); excess = ||v - v*||^2 / 2 to the exact optimal velocity")
    print(f"  variant          denoise/plain  excess@{h['step'][half]:<4d} excess@{h['step'][-1]:<4d} "
          f"reaches plain's final  probe (Bayes {m['bayes_probe']:.3f})  time/step  time to plain's final")
    for v in (k for k in ("plain", "repa", "spectral", "spectral_repa") if k in m):
        r = m[v]
        reach = "not reached" if r["steps_to_plain"] is None else f"step {r['steps_to_plain']:.0f}"
        wall = "not reached" if r["time_to_plain_ratio"] is None else f"{r['time_to_plain_ratio']:.2f}x"
        print(f"  {v:<15}  {r['denoise_ratio']:13.4f}  {h[f'{v}/excess'][half]:11.4f}  {r['excess']:11.4f}  "
              f"{reach:>21}  {r['probe']:.3f} (seeds {', '.join(f'{p:.3f}' for p in r['probe_seeds'])})  "
              f"{r['time_ratio']:.2f}x  {wall:>11}")
    print("  (time to plain's final: steps to plain's final error x time/step, over plain's time for all its "
          "steps; above 1x: no wall-clock speed-up)")


def compare(*, quick: bool = False, options=None) -> None:
    """Print the cost table and the training summary (see the module docstring)."""
    repeat = 5 if quick else 9
    if options is not None and getattr(options, "repeat", None):
        repeat = options.repeat
    _cost_table(quick, repeat)
    _training_table(quick)
