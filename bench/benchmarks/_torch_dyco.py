"""Side-by-side runs of numtk.torch.dyco for ``bench/compare.py --dyco``: the RML2016.10a-like generator's
throughput, and what the virtual adversarial view costs in a training step.

**Generator.** :func:`numtk.datasets.rml2016_like` (NumPy only) at its defaults (11 classes, windows of 128
complex samples, 8 samples per symbol, true SNR) with the channel (offsets, fading, noise) and without (noise
only), on one core: BLAS held to one thread by threadpoolctl (the generator hardly uses BLAS). Windows per
second against the spec's target of 1e4 per core. :func:`numtk.torch.dyco.expert_features` of the same windows
(windows per second) is timed beside it.

**Training step.** The demo's encoder (a :class:`~numtk.torch.dyco.SignalSwin1D` of patch 8, widths 32 and
64, fused with the 14 expert features) and projector, batch B of (2, 128) windows: one step (loss, backward,
Adam) of :class:`~numtk.torch.dyco.DyCoCL` as plain SimCLR (``lam_cons = 0, eps = 0``: two views), as DyCo-CL
with one power step (the perturbation costs a clean forward and one forward and backward pass; the
consistency term reuses that clean forward as its target) and with two power steps; and the perturbation
alone.
Interleaved rounds (:func:`benchmarks._timing.interleaved`), medians, ratio = time / SimCLR's. torch runs on
one intra-op thread like the demo (``NUMTK_BENCH_TORCH_THREADS=all`` keeps all of them).
"""

from __future__ import annotations

import contextlib
import os

from benchmarks._timing import interleaved

__all__ = ["compare", "generator_calls", "step_calls", "TARGET_WINDOWS_PER_S"]

TARGET_WINDOWS_PER_S = 1e4
#: windows per generator call: n_per_class x 11 classes x len(snr_db)
GEN_N, GEN_SNR = 100, (0, 10)
QUICK_BATCHES, BATCHES = (64,), (64, 128, 256)


def _blas_one_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a test dependency
        return contextlib.nullcontext(), False
    return threadpool_limits(limits=1), True


def _threads(n):
    from numtk.torch._common import torch_threads

    return torch_threads(None if os.environ.get("NUMTK_BENCH_TORCH_THREADS") == "all" else n)


def generator_calls(n_per_class: int = GEN_N, snr_db=GEN_SNR) -> dict:
    """name -> one call of the generator (channel on / off) or of expert_features on its windows."""
    import torch

    from numtk.datasets import rml2016_like
    from numtk.torch.dyco import expert_features

    X = torch.from_numpy(rml2016_like(n_per_class, snr_db=list(snr_db), rng=0).X)
    counter = iter(range(10**9))
    return {"channel": lambda: rml2016_like(n_per_class, snr_db=list(snr_db), rng=next(counter)),
            "no channel": lambda: rml2016_like(n_per_class, snr_db=list(snr_db), channel=False, rng=next(counter)),
            "expert_features": lambda: expert_features(X)}


def step_calls(batch: int) -> dict:
    """name -> one training step (loss, backward, Adam) of SimCLR / DyCo-CL on the demo's model, and the
    perturbation alone."""
    import torch

    from numtk.datasets import rml2016_like
    from numtk.torch._demo_dyco import XI, FusedEncoder, _projector
    from numtk.torch.dyco import DyCoCL, virtual_adversarial_perturbation

    X = torch.from_numpy(rml2016_like(-(-batch // 22), snr_db=[10, 14], rng=0).X[:batch])
    calls = {}
    for name, kw in (("simclr", dict(lam_cons=0.0, eps=0.0)), ("dyco", dict(xi=XI)),
                     ("dyco n_power=2", dict(xi=XI, n_power=2))):
        model = DyCoCL(FusedEncoder(rng=0), _projector(1), **kw)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model=model, opt=opt):
            loss = model.loss(X, rng=0)
            opt.zero_grad()
            loss.backward()
            opt.step()
        calls[name] = step
    model = DyCoCL(FusedEncoder(rng=0), _projector(1))
    calls["perturbation alone"] = lambda: virtual_adversarial_perturbation(model, X, xi=XI, rng=0)
    return calls


def _generator_table(quick: bool, repeat: int) -> None:
    limit, held = _blas_one_thread()
    n = GEN_N * 11 * len(GEN_SNR)
    with limit, _threads(1):
        t = interleaved(generator_calls(), repeat=repeat)
    m = t.medians
    print(f"Generator: rml2016_like({GEN_N}, snr_db={list(GEN_SNR)}) = {n} windows of (2, 128) float32, 11 classes, "
          f"sps 8; one core (BLAS {'held to 1 thread' if held else 'NOT held: threadpoolctl missing'}, torch 1 "
          f"thread); medians of {repeat} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
    print("  call                         time (ms)   windows/s   vs target 1e4/s")
    for name in ("channel", "no channel", "expert_features"):
        rate = n / m[name]
        target = f"{rate / TARGET_WINDOWS_PER_S:.2f}x" if name != "expert_features" else "-"
        label = {"channel": "rml2016_like, channel on", "no channel": "rml2016_like, channel off",
                 "expert_features": "expert_features (torch)"}[name]
        print(f"  {label:<28} {m[name] * 1e3:9.1f}   {rate:9.0f}   {target:>8}")


def _step_table(quick: bool, repeat: int) -> None:
    import torch

    with _threads(1):
        print(f"Training step of the demo's model (signal Swin patch 8, widths 32/64, expert-feature fusion, projector "
              f"64-64-32), batch B of (2, 128) windows; torch threads {torch.get_num_threads()}; medians of {repeat} "
              "interleaved rounds; ratio = time / SimCLR's step")
        print("      B   SimCLR (ms)   DyCo-CL n_power=1   DyCo-CL n_power=2   perturbation alone")
        for batch in (QUICK_BATCHES if quick else BATCHES):
            t = interleaved(step_calls(batch), repeat=repeat, min_time=0.05)
            m = t.medians
            base = m["simclr"]
            print(f"  {batch:5d}   {base * 1e3:11.1f}   {m['dyco'] * 1e3:8.1f} ({m['dyco'] / base:.2f}x)   "
                  f"{m['dyco n_power=2'] * 1e3:8.1f} ({m['dyco n_power=2'] / base:.2f}x)   "
                  f"{m['perturbation alone'] * 1e3:8.1f} ({m['perturbation alone'] / base:.2f}x)")
    print("  (SimCLR: two views, forward + backward; DyCo-CL adds the perturbation's clean forward and n_power "
          "forward + backward passes on one view; the clean forward is also the consistency target)")


def compare(*, quick: bool = False, options=None) -> None:
    """Print the generator's throughput and the training-step costs (see the module docstring)."""
    repeat = 3 if quick else 7
    if options is not None and getattr(options, "repeat", None):
        repeat = options.repeat
    _generator_table(quick, repeat)
    _step_table(quick, repeat)
