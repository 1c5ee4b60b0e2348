"""Side-by-side runs of numtk.torch.pisa for ``bench/compare.py --pisa``: the split's mechanism and its calibration.

**Mechanism.** :func:`~numtk.torch.pisa.clip_and_noise` (per-token clipping to norm C, Gaussian noise of std
sigma C) on a batch of B sequences of T = 128 tokens of width d (float32), against a naive two-pass version
written the obvious way: the clipped tensor through ``torch.where`` on the norms (the norms, the quotient and
the selection each a temporary), then the noise drawn, scaled and added as three more tensors. Both draw their
noise from a seeded generator; interleaved rounds (:func:`benchmarks._timing.interleaved`), medians; the
throughput is in millions of tokens per second and in GB/s of the tensor read once and written once; ratio =
naive / numtk (> 1: numtk faster). torch runs on one intra-op thread (``NUMTK_BENCH_TORCH_THREADS=all`` keeps
all of them).

**Calibration.** The time of one call of :func:`~numtk.torch.pisa.gaussian_sigma` (brentq on the analytic
Gaussian in logs), :func:`~numtk.torch.pisa.gaussian_delta`, :func:`~numtk.torch.pisa.gaussian_epsilon` and
:func:`~numtk.torch.pisa.split_epsilon` (T = 128 tokens, E = 10 releases: two exact inversions and the RDP
bound over the 255 integer orders), beside dp-accounting's analytic Gaussian (``get_sigma_gaussian``,
``get_epsilon_gaussian``) when it is installed, and the largest difference in sigma between the two over a grid
of (epsilon, delta).
"""

from __future__ import annotations

import contextlib
import math
import os

from benchmarks._timing import interleaved

__all__ = ["compare", "clip_calls", "naive_clip_and_noise", "calibration_calls", "CONFIGS", "QUICK_CONFIGS"]

#: (batch B, width d) of the mechanism table; T = 128 tokens per sequence
CONFIGS = ((8, 384), (32, 384), (32, 768), (128, 768))
QUICK_CONFIGS = ((8, 384), (32, 768))
TOKENS, CLIP, SIGMA = 128, 1.0, 0.5


def _threads(n=1):
    """torch on ``n`` intra-op threads inside the block (all of them with NUMTK_BENCH_TORCH_THREADS=all)."""
    from numtk.torch._common import torch_threads

    if os.environ.get("NUMTK_BENCH_TORCH_THREADS") == "all":
        return contextlib.nullcontext()
    return torch_threads(n)


def naive_clip_and_noise(h, clip_norm, noise_multiplier, gen):
    """Per-token clipping and Gaussian noise in two passes, the obvious way (the baseline)."""
    import torch

    norms = torch.sqrt((h * h).sum(dim=-1, keepdim=True))
    clipped = torch.where(norms > clip_norm, h / norms * clip_norm, h)
    noise = torch.randn(h.shape, generator=gen, dtype=h.dtype, device=h.device)
    return clipped + noise * (noise_multiplier * clip_norm)


def clip_calls(batch: int, width: int) -> dict:
    """name -> one call of the mechanism on a (batch, 128, width) float32 tensor."""
    import torch

    from numtk.torch.pisa import clip_and_noise

    g = torch.Generator().manual_seed(0)
    h = 2.0 * torch.randn(batch, TOKENS, width, generator=g) / math.sqrt(width)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    return {"numtk": lambda: clip_and_noise(h, CLIP, SIGMA, rng=g1),
            "naive": lambda: naive_clip_and_noise(h, CLIP, SIGMA, g2)}


def calibration_calls() -> dict:
    """name -> one call of each calibration function (and dp-accounting's, when installed)."""
    from numtk.torch.pisa import gaussian_delta, gaussian_epsilon, gaussian_sigma, split_epsilon

    calls = {"gaussian_sigma": lambda: gaussian_sigma(1.0, 1e-5),
             "gaussian_delta": lambda: gaussian_delta(1.0, 3.7306),
             "gaussian_epsilon": lambda: gaussian_epsilon(3.7306, 1e-5),
             "split_epsilon": lambda: split_epsilon(1.0, 20.0, TOKENS, 10, 1e-5)}
    try:
        from dp_accounting import gaussian_mechanism
    except ImportError:
        return calls
    calls["dp_accounting sigma"] = lambda: gaussian_mechanism.get_sigma_gaussian(1.0, 1e-5)
    calls["dp_accounting epsilon"] = lambda: gaussian_mechanism.get_epsilon_gaussian(3.7306, 1e-5)
    return calls


def _mechanism_table(quick: bool, repeat: int) -> None:
    import torch

    with _threads(1):
        print(f"clip_and_noise: per-token clipping to C = {CLIP} and noise std {SIGMA} C on (B, {TOKENS}, d) float32; "
              f"torch threads {torch.get_num_threads()}; medians of {repeat} interleaved rounds")
        print("      B     d   numtk (ms)   Mtok/s   GB/s   naive two-pass (ms)   naive / numtk")
        for batch, width in (QUICK_CONFIGS if quick else CONFIGS):
            t = interleaved(clip_calls(batch, width), repeat=repeat, min_time=0.05)
            m = t.medians
            tokens = batch * TOKENS
            gbs = 2 * 4 * tokens * width / m["numtk"] / 1e9
            mtok = tokens / m["numtk"] / 1e6
            print(f"  {batch:5d} {width:5d}   {m['numtk'] * 1e3:10.3f}   {mtok:6.2f}  {gbs:5.2f}   "
                  f"{m['naive'] * 1e3:19.3f}   {m['naive'] / m['numtk']:13.2f}x")


def _calibration_table(repeat: int) -> None:
    from numtk.torch.pisa import gaussian_sigma

    t = interleaved(calibration_calls(), repeat=repeat, min_time=0.05)
    print(f"Calibration, one call (medians of {repeat} interleaved rounds):")
    for name, sec in t.medians.items():
        print(f"  {name:<24} {sec * 1e3:8.3f} ms")
    try:
        from dp_accounting import gaussian_mechanism
    except ImportError:
        print("  (dp-accounting is not installed: no anchor)")
        return
    worst = 0.0
    for eps in (0.1, 0.5, 1.0, 4.0, 8.0, 32.0):
        for delta in (1e-3, 1e-5, 1e-8, 1e-12):
            ours, theirs = gaussian_sigma(eps, delta), gaussian_mechanism.get_sigma_gaussian(eps, delta)
            worst = max(worst, abs(ours / theirs - 1.0))
    print(f"  sigma against dp-accounting's analytic Gaussian over 24 (epsilon, delta): largest relative "
          f"difference {worst:.1e}")


def compare(*, quick: bool = False, options=None) -> None:
    """Print the mechanism's throughput and the calibration's times (see the module docstring)."""
    repeat = 5 if quick else 9
    if options is not None and getattr(options, "repeat", None):
        repeat = options.repeat
    _mechanism_table(quick, repeat)
    _calibration_table(repeat)
