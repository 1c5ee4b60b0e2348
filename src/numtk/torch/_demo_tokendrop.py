"""The TokenDrop demonstration used by ``python -m numtk tour`` and ``python -m numtk demo tokendrop``.

A tiny llama-layout model (4 blocks, width 64, 4 query and 2 key/value heads) learns the copy task from scratch
(random symbols, a separator, the symbols again; only the copy is scored) four times, from the same weights on
the same batches: with plain backpropagation, with TokenDrop keeping half and a quarter of the tokens (the
first block dense, lazy scheduling), and with DropBP's layer-level skipping at a keep rate of one half. Each
training step's saved activations are measured through saved-tensor hooks. The claim reproduced at CPU scale:
TokenDrop reaches the loss of plain backpropagation with less activation memory.

All weights are trained (not LoRA): LoRA on a randomly initialised base does not learn the task in a CPU
minute, and TokenDrop's split is the same whichever parameters train. The tutorial reports what happened with
LoRA on a model pre-trained on half of the vocabulary.

The demonstration calls only public functions of :mod:`numtk.torch.tokendrop`, imported from the modules that
define them (the public module re-exports :func:`demo`, so importing it here would close a cycle).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints

__all__ = ["demo", "run", "train", "memory_sweep", "plot_demo", "DEMO_CONFIG", "VARIANTS", "RHO_SWEEP"]

#: the tiny model of the demonstration (TinyLlamaConfig keywords)
DEMO_CONFIG = dict(vocab_size=16, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2)
#: the training runs: name -> wrap_model keywords (None: plain backpropagation)
VARIANTS = {"backprop": None,
            "TokenDrop rho=0.5": dict(rho=0.5),
            "TokenDrop rho=0.25": dict(rho=0.25),
            "DropBP rho=0.5": dict(rho=0.5, mode="layerdrop")}
#: the keep ratios of the memory sweep
RHO_SWEEP = (0.125, 0.25, 0.5, 0.75, 1.0)
#: forwards averaged for DropBP's (random) saved bytes in the sweep
DROPBP_DRAWS = 8
#: sequence length (16 symbols, the separator, 16 copied) and learning rate
LENGTH = 33
LR = 1e-2


def _config():
    from numtk.torch._tinyllama import TinyLlamaConfig

    return TinyLlamaConfig(**DEMO_CONFIG)


def train(wrap: dict | None, *, steps: int, batch: int = 32, rng: int = 0, progress: bool = False,
          desc: str = "") -> dict:
    """One training run of the demonstration: ``steps`` AdamW steps on fresh copy-task batches.

    The weights are drawn from ``rng`` and the batches from ``rng + 1``, so every run with the same ``rng`` starts
    from the same model and sees the same data. Returns a dict of lists: ``loss``, ``saved_bytes`` and
    ``seconds`` (each step's forward, loss, backward and update).

    The saved bytes are measured in a separate pass, so that the saved-tensor hooks do not slow the timed
    step: a second copy of the model (the same weights and wrapping, DropBP's generator seeded alike, so that
    it drops the same blocks as the trained model at every step) runs each step's forward under
    :func:`saved_activation_bytes`. What autograd saves depends on the shapes and on which blocks and tokens
    run with autograd, not on the weights' values, so it saves what the trained model's step saves.
    """
    import torch

    from numtk._lib import progress_bar
    from numtk.torch._tinyllama import TinyLlamaForCausalLM, copy_task, lm_loss
    from numtk.torch._tokendrop import saved_activation_bytes, wrap_model

    def make():
        model = TinyLlamaForCausalLM(_config(), rng=rng)
        if wrap is not None:
            wrap_model(model, **({"rng": rng + 2, **wrap} if wrap.get("mode") == "layerdrop" else wrap))
        return model.train()

    model, shadow = make(), make()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    gen = torch.Generator().manual_seed(rng + 1)
    out: dict[str, list] = {"loss": [], "saved_bytes": [], "seconds": []}
    for _ in progress_bar(range(steps), progress=progress, desc=desc):
        ids, labels = copy_task(batch, LENGTH, DEMO_CONFIG["vocab_size"], rng=gen)
        out["saved_bytes"].append(saved_activation_bytes(lambda: lm_loss(shadow(ids), labels)))
        t0 = time.perf_counter()
        loss = lm_loss(model(ids), labels)
        opt.zero_grad()
        if loss.requires_grad:  # DropBP may drop every block's backward pass in a step
            loss.backward()
            opt.step()
        out["seconds"].append(time.perf_counter() - t0)
        out["loss"].append(loss.item())
    return out


def memory_sweep(rhos=RHO_SWEEP, *, batch: int = 8, rng: int = 0) -> dict:
    """Saved activation bytes of one training forward of the demo's model against TokenDrop's keep ratio
    (activations grow in proportion to the batch: the ratios do not depend on it).

    Returns a dict: ``rho`` (the ratios), ``saved_bytes`` (TokenDrop at each), ``dropbp_bytes`` (the mean over
    ``DROPBP_DRAWS`` forwards of DropBP's layer skipping at each keep rate) and ``backprop_bytes``.
    """
    from numtk.torch._tinyllama import TinyLlamaForCausalLM, copy_task, lm_loss
    from numtk.torch._tokendrop import saved_activation_bytes, unwrap_model, wrap_model

    model = TinyLlamaForCausalLM(_config(), rng=rng)
    ids, labels = copy_task(batch, LENGTH, DEMO_CONFIG["vocab_size"], rng=rng + 1)
    fwd = lambda: lm_loss(model(ids), labels)  # noqa: E731
    plain = saved_activation_bytes(fwd)
    td, drop = [], []
    for rho in rhos:
        wrap_model(model, rho=rho)
        td.append(saved_activation_bytes(fwd))
        unwrap_model(model)
        wrap_model(model, rho=rho, mode="layerdrop", rng=rng)
        drop.append(float(np.mean([saved_activation_bytes(fwd) for _ in range(DROPBP_DRAWS)])))
        unwrap_model(model)
    return {"rho": list(rhos), "saved_bytes": td, "dropbp_bytes": drop, "backprop_bytes": plain}


def _seed(rng: Any) -> int:
    """An int seed from the ``rng`` keyword (an int itself, else drawn from it)."""
    import numbers

    from numtk.torch._common import torch_generator

    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)) and 0 <= int(rng) < 2**62:
        return int(rng)
    return int(torch_generator(rng).initial_seed() % 2**62)


def _tail(values: list, steps: int) -> float:
    n = max(3, steps // 10)
    return float(np.mean(values[-n:]))


def _summary(runs: dict, steps: int) -> dict:
    base = runs["backprop"]
    base_bytes = float(np.mean(base["saved_bytes"]))
    base_secs = float(np.median(base["seconds"]))
    metrics = {}
    for name, r in runs.items():
        nbytes = float(np.mean(r["saved_bytes"]))
        secs = float(np.median(r["seconds"]))
        metrics[name] = {"final_loss": _tail(r["loss"], steps), "saved_bytes": nbytes,
                         "memory_ratio": nbytes / base_bytes, "memory_saving": 1.0 - nbytes / base_bytes,
                         "seconds_per_step": secs, "speedup": base_secs / secs}
    return metrics


@constraints(steps="count", rng="rng", progress="bool")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False):
    """Train the tiny model on the copy task with plain backpropagation, TokenDrop and DropBP's layer skipping.

    Parameters
    ----------
    steps : int, optional
        Training steps per run (default 120).
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Seeds the weights (shared by the runs) and the batches; an int ``s`` seeds the weights with ``s`` and the
        batches with ``s + 1``.
    progress : bool, default False
        Show a progress bar per run.

    Returns
    -------
    Result
        ``metrics`` (per run: ``final_loss``, the mean of the last tenth of the steps; ``saved_bytes``, the mean
        saved activation bytes of a step; ``memory_ratio`` and ``memory_saving`` against plain backpropagation;
        ``seconds_per_step``, the median, and ``speedup``), ``history`` (per run: the lists ``loss``,
        ``saved_bytes`` and ``seconds``), ``sweep`` (saved bytes against the keep ratio, see
        :func:`memory_sweep`), ``steps`` and ``wall_time`` (seconds).

    Examples
    --------
    >>> from numtk.torch.tokendrop import demo
    >>> res = demo(steps=2)
    >>> sorted(res.metrics)
    ['DropBP rho=0.5', 'TokenDrop rho=0.25', 'TokenDrop rho=0.5', 'backprop']
    >>> res.metrics["TokenDrop rho=0.5"]["memory_ratio"] < 1.0
    True
    """
    return _demo(steps=steps, rng=rng, progress=progress, batch=32, variants=VARIANTS)


def _demo(*, steps, rng, progress, batch, variants):
    from numtk._lib import Result
    from numtk._lib._validation import check_bool, check_int

    steps = 120 if steps is None else check_int(steps, "steps", minimum=1, maximum=10**6)
    rng = _seed(rng)
    progress = check_bool(progress, "progress")
    from numtk.torch._common import torch_threads

    t0 = time.perf_counter()
    # one thread: the model is so small that a step is mostly thread synchronisation otherwise (40 ms a step on
    # one thread, 250 ms on two busy cores), and the timings compare from run to run
    with torch_threads(1):
        runs = {name: train(wrap, steps=steps, batch=batch, rng=rng, progress=progress, desc=name)
                for name, wrap in variants.items()}
        sweep = memory_sweep(rng=rng)
    return Result(metrics=_summary(runs, steps), history=runs, sweep=sweep, steps=steps,
                  wall_time=time.perf_counter() - t0)


def plot_demo(res, path: str) -> None:
    """Two panels: saved activation memory against the keep ratio (TokenDrop's sweep and DropBP's layer
    skipping, relative to plain backpropagation), and the training loss of each run."""
    from numtk._lib._optional import import_optional

    import_optional("matplotlib", purpose="the TokenDrop demo's figure")
    import matplotlib.pyplot as plt
    sweep = res.sweep
    base = sweep["backprop_bytes"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    left.plot(sweep["rho"], np.asarray(sweep["saved_bytes"]) / base, "o-", color="C1",
              label="TokenDrop (lazy: block 0 dense)")
    left.plot(sweep["rho"], np.asarray(sweep["dropbp_bytes"]) / base, "s--", color="C2",
              label=f"DropBP layer skipping (mean of {DROPBP_DRAWS} steps)")
    left.plot([0, 1], [0, 1], ":", color="grey", lw=0.8, label="proportional")
    left.axhline(1.0, color="C0", lw=0.8, label="plain backprop")
    left.set_xlabel("keep ratio rho")
    left.set_ylabel("saved activation bytes / backprop")
    left.set_xlim(0, 1.05)
    left.set_ylim(0, 1.1)
    left.set_title("activation memory of one training step", fontsize=9)
    left.legend(fontsize=7)
    colors = {"backprop": "C0", "TokenDrop rho=0.5": "C1", "TokenDrop rho=0.25": "C3", "DropBP rho=0.5": "C2"}
    for name, h in res.history.items():
        right.semilogy(np.arange(1, len(h["loss"]) + 1), h["loss"], color=colors.get(name), lw=1,
                       label=f"{name} ({res.metrics[name]['memory_ratio']:.2f}x memory)")
    right.set_xlabel("step")
    right.set_ylabel("copy loss (nats)")
    right.set_title("tiny llama on the copy task, same weights and batches", fontsize=9)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """TokenDrop against plain backpropagation and DropBP on the copy task; prints the table, returns the tour's
    rows, saves the figure to ``plot`` when given (needs matplotlib)."""
    if quick:
        res = _demo(steps=40, rng=0, progress=False, batch=16,
                    variants={k: VARIANTS[k] for k in ("backprop", "TokenDrop rho=0.5", "TokenDrop rho=0.25")})
    else:
        res = demo()
    cfg = DEMO_CONFIG
    out(f"TokenDrop on a tiny llama ({cfg['num_hidden_layers']} blocks, width {cfg['hidden_size']}, "
        f"{cfg['num_attention_heads']}/{cfg['num_key_value_heads']} heads) learning the copy task from scratch: "
        f"{res.steps} AdamW steps, sequences of {LENGTH}, the same weights and batches for every run")
    out("  run                   final loss  saved activations  vs backprop  s/step  speed-up")
    for name, m in res.metrics.items():
        out(f"  {name:<20}  {m['final_loss']:>10.4f}  {m['saved_bytes'] / 2**20:>13.2f} MiB  "
            f"{m['memory_ratio']:>10.3f}  {m['seconds_per_step']:>6.3f}  {m['speedup']:>7.2f}x")
    sw = res.sweep
    out("  saved activations against the keep ratio (one forward; TokenDrop, then DropBP's mean over "
        f"{DROPBP_DRAWS}):")
    out("    rho    " + "  ".join(f"{r:>6.3f}" for r in sw["rho"]))
    out("    TD     " + "  ".join(f"{b / sw['backprop_bytes']:>6.3f}" for b in sw["saved_bytes"]))
    out("    DropBP " + "  ".join(f"{b / sw['backprop_bytes']:>6.3f}" for b in sw["dropbp_bytes"]))
    out(f"  (paper: up to 42.9 % less memory and 1.50x faster; wall time {res.wall_time:.1f} s)")
    bp = res.metrics["backprop"]
    td = res.metrics["TokenDrop rho=0.5"]
    rows = [{"area": "torch", "method": "TokenDrop rho=0.5, tiny llama, copy task", "n": res.steps,
             "result": f"loss {td['final_loss']:.2g}, {td['memory_saving'] * 100:.0f} % less activation memory",
             "vs anchor": f"backprop loss {bp['final_loss']:.2g}",
             "speed": f"{td['speedup']:.2f}x per step"}]
    if plot:
        plot_demo(res, plot)
        out(f"figure saved to {plot}")
    return rows
