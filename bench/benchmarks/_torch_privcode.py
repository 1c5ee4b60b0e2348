"""Side-by-side runs of numtk.torch.privcode for ``bench/compare.py --privcode``: a DP-SGD step of numtk against
Opacus's and against a non-private step, and the accountant.

DP-SGD step, per model (same weights, same batch, SGD): ``numtk`` is :func:`numtk.torch.privcode.dp_sgd_step`
(per-sample gradients by torch.func's vmap of grad, flat clipping, noise, optimizer step); ``opacus`` is Opacus's
``GradSampleModule`` (per-sample gradients by backward hooks) with its ``DPOptimizer`` (the same clipping, noise and
step; expected batch size B); ``non-private`` is forward, backward and step. Noise multiplier 1, clip 1. The
``agree`` column runs both DP steps once with noise multiplier 0 and reports the largest relative difference of the
parameters' gradients (Opacus adds 1e-6 to each norm before dividing; otherwise the same clipped mean). Models: the
demo's character LM (embeddings, MLP; batch 64 lines of 32 characters) and an MLP classifier (256 -> 512 -> 512 ->
10, batch 256). torch on one intra-op thread unless ``NUMTK_BENCH_TORCH_THREADS=all``. Interleaved rounds
(:func:`benchmarks._timing.interleaved`), medians.

Ghost clipping, on the models whose trainable parameters are all ``nn.Linear`` ones (the MLP): ``numtk ghost`` is
``dp_sgd_step(..., method="ghost")`` (one forward and backward of the summed loss, per-example norms from each
layer's inputs and output gradients, no per-example gradients), timed in the same interleaved rounds as the
others; ``opacus ghost`` is Opacus's ``GradSampleModuleFastGradientClipping`` (ghost clipping) with its
``DPOptimizerFastGradientClipping`` and ``DPLossFastGradientClipping`` (two backward passes). Their ``agree``
compares numtk ghost with Opacus's ``GradSampleModule`` (sigma 0).

Accountant: :func:`numtk.torch.privcode.rdp_epsilon` (q = 0.01, sigma = 1, 1000 steps, delta = 1e-5) with its cache
cleared before each call (and cached), against Opacus's ``RDPAccountant.get_epsilon`` on the same orders (integer
orders 2..256, and Opacus's default grid); :func:`~numtk.torch.privcode.noise_multiplier_for` against Opacus's
``get_noise_multiplier`` (its default tolerance 0.01 on epsilon; numtk bisects sigma to 1e-6).
"""

from __future__ import annotations

import os
import time
import warnings

from benchmarks._timing import interleaved

__all__ = ["compare", "make_problem", "ghost_loss", "step_calls", "accountant_calls", "MODELS"]

#: model name -> (batch size, description)
MODELS = {"char LM (demo)": (64, "embeddings 55x16, context 8, MLP 128 -> 53; 32 characters per line"),
          "MLP classifier": (256, "256 -> 512 -> 512 -> 10, tanh")}


def make_problem(name: str, batch: int | None = None, seed: int = 0):
    """(model factory, loss_fn(model, batch), batch) of one of :data:`MODELS`; the factory gives fresh copies with
    the same weights."""
    import copy

    import numpy as np
    import torch

    B = MODELS[name][0] if batch is None else batch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name.startswith("char LM"):
            from numtk.torch._demo_privcode import CharLM, _encode, _loss, make_lines

            base = CharLM()
            data = _encode(make_lines(B, np.random.default_rng(seed)))
            loss_fn = _loss
        else:
            base = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Tanh(), torch.nn.Linear(512, 512),
                                       torch.nn.Tanh(), torch.nn.Linear(512, 10))
            g = torch.Generator().manual_seed(seed + 1)
            data = (torch.randn(B, 256, generator=g), torch.randint(0, 10, (B,), generator=g))

            def loss_fn(model, batch):
                return torch.nn.functional.cross_entropy(model(batch[0]), batch[1])
    return (lambda: copy.deepcopy(base)), loss_fn, data


def ghost_loss(name: str):
    """The summed loss ``loss_fn(model, batch)`` for ``dp_sgd_step(..., method="ghost")`` of a model of
    :data:`MODELS` whose trainable parameters are all Linear ones; None for the others."""
    import torch

    if name.startswith("char LM"):
        return None

    def loss_sum(model, batch):
        return torch.nn.functional.cross_entropy(model(batch[0]), batch[1], reduction="sum")
    return loss_sum


def step_calls(name: str, *, sigma: float = 1.0, clip: float = 1.0, batch: int | None = None) -> dict:
    """The contestants of one model: name -> callable doing one training step (returns nothing)."""
    import torch

    from numtk.torch.privcode import dp_sgd_step

    factory, loss_fn, data = make_problem(name, batch)
    B = data[0].shape[0]
    ours = factory()
    opt_ours = torch.optim.SGD(ours.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    plain = factory()
    opt_plain = torch.optim.SGD(plain.parameters(), lr=1e-3)

    def numtk_step():
        dp_sgd_step(ours, loss_fn, data, opt_ours, clip_norm=clip, noise_multiplier=sigma, rng=gen)

    def plain_step():
        opt_plain.zero_grad()
        loss_fn(plain, data).backward()
        opt_plain.step()

    calls = {"numtk": numtk_step}
    loss_sum = ghost_loss(name)
    if loss_sum is not None:
        ghost = factory()
        opt_ghost = torch.optim.SGD(ghost.parameters(), lr=1e-3)
        gen_ghost = torch.Generator().manual_seed(0)

        def ghost_step():
            dp_sgd_step(ghost, loss_sum, data, opt_ghost, clip_norm=clip, noise_multiplier=sigma, rng=gen_ghost,
                        method="ghost")
        calls["numtk ghost"] = ghost_step
    try:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
    except ImportError:
        pass
    else:
        gsm = GradSampleModule(factory(), loss_reduction="mean")
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=1e-3), noise_multiplier=sigma, max_grad_norm=clip,
                          expected_batch_size=B, loss_reduction="mean")

        def opacus_step():
            opt.zero_grad()
            loss_fn(gsm, data).backward()
            opt.step()
        calls["opacus"] = opacus_step
        if loss_sum is not None:
            step = _opacus_ghost_step(factory(), data, sigma, clip)
            if step is not None:
                calls["opacus ghost"] = step
    calls["non-private"] = plain_step
    return calls


def _opacus_ghost_step(model, data, sigma: float, clip: float):
    """A training step by Opacus's ghost clipping (None where this Opacus lacks it)."""
    import torch

    try:
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping
        from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
    except ImportError:
        return None
    gsm = GradSampleModuleFastGradientClipping(model, loss_reduction="mean", max_grad_norm=clip,
                                               use_ghost_clipping=True)
    opt = DPOptimizerFastGradientClipping(torch.optim.SGD(gsm.parameters(), lr=1e-3), noise_multiplier=sigma,
                                          max_grad_norm=clip, expected_batch_size=data[0].shape[0],
                                          loss_reduction="mean")
    crit = DPLossFastGradientClipping(gsm, opt, torch.nn.CrossEntropyLoss(), loss_reduction="mean")

    def step():
        opt.zero_grad()
        crit(gsm(data[0]), data[1]).backward()
        opt.step()
    return step


def agreement(name: str, method: str = "vmap") -> float | None:
    """The largest relative difference between numtk's (``method``) and Opacus's noiseless clipped-mean
    gradients."""
    import torch

    from numtk.torch.privcode import dp_sgd_step

    try:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
    except ImportError:
        return None
    factory, loss_fn, data = make_problem(name)
    ours = factory()
    if method == "ghost":
        dp_sgd_step(ours, ghost_loss(name), data, None, clip_norm=1.0, noise_multiplier=0.0, method="ghost")
    else:
        dp_sgd_step(ours, loss_fn, data, None, clip_norm=1.0, noise_multiplier=0.0)
    gsm = GradSampleModule(factory(), loss_reduction="mean")
    opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=0.0), noise_multiplier=0.0, max_grad_norm=1.0,
                      expected_batch_size=data[0].shape[0], loss_reduction="mean")
    opt.zero_grad()
    loss_fn(gsm, data).backward()
    opt.pre_step()
    worst = 0.0
    for p, q in zip(ours.parameters(), gsm._module.parameters()):
        worst = max(worst, float((p.grad - q.grad).norm() / q.grad.norm().clamp_min(1e-30)))
    return worst


def accountant_calls() -> dict:
    """name -> callable computing epsilon (or sigma) of the bench's setting."""
    from numtk.torch import _accounting
    from numtk.torch.privcode import OPACUS_ORDERS, noise_multiplier_for, rdp_epsilon

    q, sigma, steps, delta = 0.01, 1.0, 1000, 1e-5
    ints = list(range(2, 257))

    def uncached(orders):
        def f():
            _accounting._sgm_rdp_cached.cache_clear()
            return rdp_epsilon(q, sigma, steps, delta, orders=orders)
        return f

    calls = {"numtk, integer orders": uncached("integers"), "numtk, Opacus grid": uncached("opacus"),
             "numtk, cached": lambda: rdp_epsilon(q, sigma, steps, delta),
             "numtk noise_multiplier_for": lambda: (_accounting._sgm_rdp_cached.cache_clear(),
                                                    noise_multiplier_for(4.0, delta, q, steps, orders="opacus"))[1]}
    try:
        from opacus.accountants import RDPAccountant
        from opacus.accountants.utils import get_noise_multiplier
    except ImportError:
        return calls

    def opacus_eps(alphas):
        def f():
            acc = RDPAccountant()
            acc.history = [(sigma, q, steps)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return acc.get_epsilon(delta, alphas=alphas)
        return f

    calls["opacus, integer orders"] = opacus_eps(ints)
    calls["opacus, Opacus grid"] = opacus_eps(list(OPACUS_ORDERS))

    def opacus_sigma():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return get_noise_multiplier(target_epsilon=4.0, target_delta=delta, sample_rate=q, steps=steps,
                                        accountant="rdp")
    calls["opacus get_noise_multiplier"] = opacus_sigma
    return calls


def compare(*, quick: bool = False, options=None) -> None:
    """Print the DP-SGD step table and the accountant's times (see the module docstring)."""
    import torch

    from numtk.torch._common import torch_threads

    repeat = getattr(options, "repeat", None) or (7 if quick else 15)
    threads = None if os.environ.get("NUMTK_BENCH_TORCH_THREADS") == "all" else 1
    t0 = time.perf_counter()
    with torch_threads(threads), warnings.catch_warnings():
        # Opacus's hooks warn that no input requires grad (the model's first layer takes data)
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        print(f"DP-SGD step (clip 1, noise multiplier 1, SGD): numtk.torch.privcode.dp_sgd_step against Opacus "
              f"(GradSampleModule + DPOptimizer) and a non-private step; torch {torch.__version__}, "
              f"{torch.get_num_threads()} thread(s), float32; medians of {repeat} interleaved rounds")
        print(f"  {'model':<16} {'batch':>5} {'numtk ms':>9} {'opacus ms':>10} {'plain ms':>9} "
              f"{'opacus/numtk':>12} {'numtk/plain':>11}  agree (sigma 0)")
        ghost_rows = []
        for name, (B, what) in MODELS.items():
            t = interleaved(step_calls(name), repeat=repeat, min_time=0.05)
            m = t.medians
            if "numtk ghost" in m:
                ghost_rows.append((name, B, m))
            op = f"{1e3 * m['opacus']:10.2f}" if "opacus" in m else f"{'-':>10}"
            ratio = f"{m['opacus'] / m['numtk']:11.2f}x" if "opacus" in m else f"{'-':>12}"
            agree = agreement(name)
            agree = "Opacus absent" if agree is None else f"max rel diff {agree:.1e}"
            print(f"  {name:<16} {B:>5} {1e3 * m['numtk']:9.2f} {op} {1e3 * m['non-private']:9.2f} {ratio} "
                  f"{m['numtk'] / m['non-private']:10.2f}x  {agree}")
        for name, (B, what) in MODELS.items():
            print(f"    {name}: {what}")
        print("  (opacus/numtk > 1: numtk's step is faster; numtk/plain: the cost of privacy over a non-private "
              "step)")
        if ghost_rows:
            print("  ghost clipping (numtk: method='ghost'; opacus ghost: GradSampleModuleFastGradientClipping), "
                  "same rounds:")
            print(f"  {'model':<16} {'batch':>5} {'ghost ms':>9} {'op.ghost ms':>11} {'plain ms':>9} "
                  f"{'ghost/plain':>11} {'vmap/ghost':>10} {'opacus/ghost':>12} {'op.ghost/ghost':>14}  "
                  f"agree (sigma 0)")
        for name, B, m in ghost_rows:
            g = m["numtk ghost"]
            og = f"{1e3 * m['opacus ghost']:11.2f}" if "opacus ghost" in m else f"{'-':>11}"
            r_op = f"{m['opacus'] / g:11.2f}x" if "opacus" in m else f"{'-':>12}"
            r_og = f"{m['opacus ghost'] / g:13.2f}x" if "opacus ghost" in m else f"{'-':>14}"
            agree = agreement(name, "ghost")
            agree = "Opacus absent" if agree is None else f"max rel diff {agree:.1e}"
            print(f"  {name:<16} {B:>5} {1e3 * g:9.2f} {og} {1e3 * m['non-private']:9.2f} "
                  f"{g / m['non-private']:10.2f}x {m['numtk'] / g:9.2f}x {r_op} {r_og}  {agree}")
        calls = accountant_calls()
        t = interleaved(calls, repeat=repeat, min_time=0.02)
        print("Accountant, q = 0.01, sigma = 1, 1000 steps, delta = 1e-5 (noise_multiplier_for: epsilon 4): "
              "median ms per call, and the value")
        for name in calls:
            v = t.results[name]
            print(f"  {name:<30} {1e3 * t.medians[name]:9.3f} ms   {v:.10f}")
    print(f"  [{time.perf_counter() - t0:.1f} s]")
