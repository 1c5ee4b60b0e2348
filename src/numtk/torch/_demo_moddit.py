"""The MOD-DiT demonstration used by ``python -m numtk demo moddit`` and the tour.

Planted structured attention over a run of "denoising steps": the queries and keys of every step are built so
that each head's attention has a known mix of the structures MOD-DiT models (a local band around the diagonal,
diagonals at whole-frame offsets, a few key columns that every query attends to and attention within a frame),
plus noise; the structure drifts slowly with the step (one column fades while another grows, the band sharpens,
the noise rotates), as attention does along a diffusion trajectory. :class:`~numtk.torch.moddit.OnlineMaskState`
runs MOD-DiT's schedule on it (full attention at the warm-up and interval-end steps, the predicted block-sparse
mask elsewhere); at every sparse step its output is compared with the dense output, beside a random mask with the
same number of kept blocks per head and a static band mask (the blocks nearest the diagonal, the same number per
head).
"""

from __future__ import annotations

import math
import time
from typing import Any, Iterator

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints

__all__ = ["demo", "run", "planted_steps", "band_mask", "random_mask", "plot_maps"]

#: the planted structures of each head: score amplitudes (in nats) of the local band, the frame-offset
#: diagonals, the key columns, the same-frame blocks and the noise
HEADS = (
    dict(local=11.0, spatial=0.0, sink=9.0, frame=0.0, noise=1.5),
    dict(local=8.0, spatial=10.0, sink=0.0, frame=0.0, noise=1.5),
    dict(local=6.0, spatial=0.0, sink=0.0, frame=7.0, noise=1.5),
    dict(local=9.0, spatial=7.0, sink=7.0, frame=3.0, noise=1.5),
)
#: the demo's sizes: (frames, tokens per frame, block, top_k, steps), default and quick
DEFAULT = dict(frames=10, tokens_per_frame=128, block=16, top_k=10, steps=42)
QUICK = dict(frames=8, tokens_per_frame=128, block=16, top_k=8, steps=24)
#: MOD-DiT's full-attention warm-up steps (the state's default)
WARMUP = 12


def planted_steps(steps: int, *, frames: int = 16, tokens_per_frame: int = 256, block: int = 32,
                  heads: tuple = HEADS, rng: Any = 0, dtype: Any = None) -> Iterator[tuple]:
    r"""The (q, k, v) of each of ``steps`` denoising steps of one attention layer with planted structure.

    Tokens are ``frames`` frames of ``tokens_per_frame`` tokens (token t: frame ``t // tokens_per_frame``,
    position ``t % tokens_per_frame``). For each head the attention score of query t and key s is

    .. math:: a_{loc} K(t - s) + a_{sp} K'(p_t - p_s) + a_{sink} \beta_s + a_{fr} [f_t = f_s] + a_n \xi_t \cdot \xi'_s

    with K, K' Gaussian kernels (random Fourier features; widths of one block and a quarter block), so that the
    attention has a band around the diagonal, diagonals at whole-frame offsets, columns at two "sink" key blocks
    (weights ``1 - u`` and ``u``, u going from 0 to 1 along the steps: one column fades, the other grows), blocks
    within a frame and unit-variance noise. Along the steps the band sharpens (its amplitude grows by 20 %) and
    the noise rotates a quarter turn. Values v are standard normal, fixed.

    Yields
    ------
    tuple of torch.Tensor
        (q, k, v), each of shape (1, H, L, D), float32 (or ``dtype``), L = frames * tokens_per_frame.
    """
    import torch

    from numtk.torch._common import torch_generator

    g = torch_generator(rng)
    dtype = torch.float32 if dtype is None else dtype
    L = frames * tokens_per_frame
    H = len(heads)
    t = torch.arange(L, dtype=torch.float64)
    pos = t % tokens_per_frame
    frame = torch.div(torch.arange(L), tokens_per_frame, rounding_mode="floor")
    r = 16

    def rff(x, width, R):
        w = torch.randn(H, R, generator=g, dtype=torch.float64) / width
        ang = w[:, None, :] * x[None, :, None]                                # (H, L, R)
        return torch.cat([torch.cos(ang), torch.sin(ang)], dim=-1) / math.sqrt(R)

    loc, spa = rff(t, float(block), 16), rff(pos, block / 4.0, 8)
    fr = torch.nn.functional.one_hot(frame, frames).to(torch.float64)[None].expand(H, L, frames)
    n_blocks = L // block
    sinks = torch.stack([torch.randperm(n_blocks, generator=g)[:2] for _ in range(H)])   # (H, 2)
    blk = torch.div(torch.arange(L), block, rounding_mode="floor")
    noise = [torch.randn(H, L, r, generator=g, dtype=torch.float64) / r**0.25 for _ in range(4)]
    v = torch.randn(1, H, L, 64, generator=g, dtype=torch.float64).to(dtype)
    amp = {key: torch.tensor([h[key] for h in heads], dtype=torch.float64)[:, None, None] for key in heads[0]}
    ones = torch.ones(H, L, 1, dtype=torch.float64)
    for step in range(steps):
        u = step / max(1, steps - 1)
        beta = ((blk[None] == sinks[:, :1]) * (1.0 - u) + (blk[None] == sinks[:, 1:]) * u).to(torch.float64)
        theta = u * math.pi / 2
        xq = math.cos(theta) * noise[0] + math.sin(theta) * noise[1]
        xk = math.cos(theta) * noise[2] + math.sin(theta) * noise[3]
        q = torch.cat([amp["local"] * (1.0 + 0.2 * u) * loc, amp["spatial"] * spa, amp["sink"] * ones,
                       amp["frame"] * fr, amp["noise"] * xq], dim=-1)
        k = torch.cat([loc, spa, beta[..., None], fr, xk], dim=-1)
        D = q.shape[-1]
        yield (q * math.sqrt(D))[None].to(dtype), k[None].to(dtype), v


def band_mask(n: int, kept: Any) -> Any:
    """A static mask per head: the ``kept[h]`` blocks nearest the diagonal (by ``|kb - qb|``, then row-major),
    shape (H, n, n)."""
    import torch

    r = torch.arange(n)
    dist = (r[None, :] - r[:, None]).abs().flatten().double()
    order = torch.argsort(dist * n * n + torch.arange(n * n), stable=True)
    out = torch.zeros(len(kept), n * n, dtype=torch.bool)
    for h, c in enumerate(kept):
        out[h, order[:int(c)]] = True
    return out.view(len(kept), n, n)


def random_mask(n: int, kept: Any, *, rng: Any = 0) -> Any:
    """A random mask per head with ``kept[h]`` blocks drawn uniformly without replacement, shape (H, n, n)."""
    import torch

    from numtk.torch._common import torch_generator

    g = torch_generator(rng)
    out = torch.zeros(len(kept), n * n, dtype=torch.bool)
    for h, c in enumerate(kept):
        out[h, torch.randperm(n * n, generator=g)[:int(c)]] = True
    return out.view(len(kept), n, n)


def _rel_error(out: Any, ref: Any) -> Any:
    """Per head ||out - ref|| / ||ref||."""
    import torch

    return (torch.linalg.vector_norm(out - ref, dim=(-2, -1)) / torch.linalg.vector_norm(ref, dim=(-2, -1)))[0]


@constraints(steps="count", rng="rng", progress="bool", quick="bool")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, quick: bool = False) -> Result:
    """MOD-DiT on planted structured attention: its predicted masks against random and static masks.

    Runs :func:`planted_steps` (4 heads; 10 frames of 128 tokens in blocks of 16: L = 1280, an 80 x 80 block
    map, 8 blocks per frame; ``quick``: 8 frames, a 64 x 64 map) through
    :class:`~numtk.torch.moddit.OnlineMaskState` with the paper's schedule (12 full-attention warm-up steps,
    intervals of 10) and ``top_k`` 10 lines (quick: 8). At every sparse step the attention output under three
    masks is compared with the dense output: MOD-DiT's current mask, a random mask and a static band mask (the
    blocks nearest the diagonal), the latter two with the same number of kept blocks per head as MOD-DiT's.

    Parameters
    ----------
    steps : int, optional
        Denoising steps, more than 12 (default 42; quick 24). The first sparse step is step 12.
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Seeds the planted problem and the random masks.
    progress : bool, default False
        Show a progress bar over the steps.
    quick : bool, default False
        The smaller problem of the tour.

    Returns
    -------
    Result
        metrics : dict
            Per mask (``'moddit'``, ``'static'``, ``'random'``): ``error`` (mean relative output error
            ``||out - dense|| / ||dense||`` over sparse steps and heads), ``max_error`` and ``sparsity`` (mean
            fraction of skipped blocks); and ``n`` (blocks per side), ``dense_steps``, ``sparse_steps``,
            ``seconds_sparse`` and ``seconds_dense`` (mean seconds of one attention call of MOD-DiT's state at a
            sparse step and at a full-attention step, block map included), ``seconds_sdpa`` (mean seconds of
            dense SDPA at the sparse steps); all with one thread of torch, so that they compare from run to run.
        history : dict of lists
            ``step`` (the sparse steps), ``sparsity`` of MOD-DiT's mask there, and per mask the relative error
            (mean over heads).
        maps : dict or None
            At the last full-attention step with a mask: ``measured`` (the state's block-map history),
            ``fitted`` and ``predicted`` (the lines' maps of the last fit and of its extrapolation), ``mask``
            (each an (H, n, n) ndarray) and ``step``.
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.moddit import demo
    >>> res = demo(steps=14, quick=True)
    >>> res.metrics["sparse_steps"], res.metrics["moddit"]["error"] < res.metrics["random"]["error"]
    (2, True)
    """
    import torch

    from numtk._lib import progress_bar
    from numtk._lib._validation import check_bool, check_int
    from numtk.torch._common import torch_generator, torch_threads
    # the public functions, from their room (numtk.torch.moddit re-exports this module's demo: no cycle)
    from numtk.torch._moddit import OnlineMaskState, block_sparse_attention, extrapolate_and_select, lines_map

    t0 = time.perf_counter()
    quick = check_bool(quick, "quick")
    cfg = dict(QUICK if quick else DEFAULT)
    if steps is not None:
        steps = check_int(steps, "steps", minimum=1, maximum=10_000)
        if steps <= WARMUP:
            raise ValueError(f"`steps` must be > {WARMUP}: the first {WARMUP} steps are full-attention warm-up and "
                             f"the comparison needs a sparse step; got {steps}")
    steps = cfg["steps"] if steps is None else steps
    progress = check_bool(progress, "progress")
    block = cfg["block"]
    bpf = cfg["tokens_per_frame"] // block
    n = cfg["frames"] * bpf
    state = OnlineMaskState(top_k=cfg["top_k"], blocks_per_frame=bpf, block=block)
    history: dict[str, list] = {"step": [], "sparsity": [], "moddit": [], "static": [], "random": []}
    errors = {key: [] for key in ("moddit", "static", "random")}
    sparsity = {key: [] for key in errors}
    t_sparse, t_dense, t_sdpa = [], [], []
    maps = None
    dense = state.dense_steps(steps)
    g = torch_generator(rng)   # the planted problem draws from it before its first step, the random masks after
    gen = planted_steps(steps, frames=cfg["frames"], tokens_per_frame=cfg["tokens_per_frame"], block=block, rng=g)
    with torch_threads(1):   # one thread: timings comparable from run to run, whatever else runs on the machine
        for step, (q, k, v) in enumerate(progress_bar(gen, total=steps, disable=not progress, desc="moddit")):
            s0 = time.perf_counter()
            out = state.attention(q, k, v, step)
            elapsed = time.perf_counter() - s0
            if state.is_dense(step):
                t_dense.append(elapsed)
                if state.mask is not None:
                    sel = extrapolate_and_select(state.fits, state.top_k, state.predict_T)
                    maps = dict(measured=state.history.numpy(), fitted=state.fits[-1].fitted.numpy(),
                                predicted=lines_map(sel.predicted, bpf).numpy(), mask=state.mask.numpy(), step=step)
                continue
            t_sparse.append(elapsed)
            s0 = time.perf_counter()
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            t_sdpa.append(time.perf_counter() - s0)
            kept = state.mask.sum(dim=(-2, -1))
            masks = {"moddit": state.mask, "static": band_mask(n, kept),
                     "random": random_mask(n, kept, rng=g)}
            history["step"].append(step)
            history["sparsity"].append(float(state.sparsity))
            for key, m in masks.items():
                o = out if key == "moddit" else block_sparse_attention(q, k, v, m, block)
                e = _rel_error(o, ref)
                errors[key].append(e)
                sparsity[key].append(1.0 - float(m.float().mean()))
                history[key].append(float(e.mean()))
    metrics: dict[str, Any] = {"n": n, "dense_steps": len(t_dense), "sparse_steps": len(t_sparse),
                               "seconds_dense": float(np.mean(t_dense)) if t_dense else math.nan,
                               "seconds_sparse": float(np.mean(t_sparse)) if t_sparse else math.nan,
                               "seconds_sdpa": float(np.mean(t_sdpa)) if t_sdpa else math.nan}
    for key in errors:
        if errors[key]:
            e = torch.stack(errors[key])
            metrics[key] = {"error": float(e.mean()), "max_error": float(e.max()),
                            "sparsity": float(np.mean(sparsity[key]))}
        else:
            metrics[key] = {"error": math.nan, "max_error": math.nan, "sparsity": math.nan}
    return Result(metrics=metrics, history=history, maps=maps, wall_time=time.perf_counter() - t0)


def plot_maps(res: Result, path: str) -> None:
    """Measured, fitted and predicted block maps and the mask of each head at the last full-attention step, and
    the error of each mask along the steps; saved to ``path``."""
    from numtk._lib._optional import import_optional

    plt = import_optional("matplotlib.pyplot", purpose="the moddit demo's figure")
    maps = res.maps
    H = maps["measured"].shape[0]
    fig, axes = plt.subplots(H, 5, figsize=(15, 3 * H), squeeze=False)
    titles = ("measured negligibility", "fitted (lines)", "predicted (extrapolated)", "MOD-DiT mask")
    for h in range(H):
        for j, key in enumerate(("measured", "fitted", "predicted", "mask")):
            ax = axes[h, j]
            ax.imshow(maps[key][h], vmin=0.0, vmax=1.0, cmap="viridis" if key != "mask" else "gray_r",
                      interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if h == 0:
                ax.set_title(titles[j], fontsize=9)
        axes[h, 0].set_ylabel(f"head {h}")
        ax = axes[h, 4]
        if h == 0:
            for key, style in (("moddit", "-o"), ("static", "--"), ("random", ":")):
                ax.plot(res.history["step"], res.history[key], style, ms=3, label=key)
            ax.set_yscale("log")
            ax.set_xlabel("step")
            ax.set_title("relative output error (mean over heads)", fontsize=9)
            ax.legend(fontsize=7)
        else:
            ax.axis("off")
    fig.suptitle(f"MOD-DiT on planted attention: block maps at step {maps['step']} "
                 f"(0 = every probability in the block matters, 1 = none does)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """MOD-DiT's predicted masks against random and static masks of equal sparsity on planted attention.

    Prints the metrics table through ``out``; returns the tour's rows; with ``plot``, saves the block maps and
    the error curves there (needs matplotlib).
    """
    res = demo(quick=quick)
    m = res.metrics
    out(f"MOD-DiT on planted structured attention: 4 heads, {m['n']} x {m['n']} block map, "
        f"{m['dense_steps']} full-attention and {m['sparse_steps']} sparse steps")
    out(f"  {'mask':<8} {'sparsity':>9} {'rel. error':>11} {'max error':>10}")
    for key in ("moddit", "static", "random"):
        r = m[key]
        out(f"  {key:<8} {r['sparsity']:9.3f} {r['error']:11.4f} {r['max_error']:10.4f}")
    out(f"  at a sparse step: MOD-DiT's block-sparse call {m['seconds_sparse'] * 1e3:.1f} ms, dense SDPA "
        f"{m['seconds_sdpa'] * 1e3:.1f} ms; a full-attention step (block map included from step 10) "
        f"{m['seconds_dense'] * 1e3:.1f} ms; wall time {res.wall_time:.1f} s")
    if plot:
        plot_maps(res, plot)
        out(f"figure saved to {plot}")
    return [{"area": "torch", "method": "MOD-DiT predicted block masks, planted attention", "n": m["n"],
             "result": f"rel. error {m['moddit']['error']:.3f} at sparsity {m['moddit']['sparsity']:.2f}",
             "vs anchor": f"random {m['random']['error']:.3f}, static band {m['static']['error']:.3f}",
             "speed": f"{m['seconds_sparse'] * 1e3:.0f} ms/sparse call (dense {m['seconds_sdpa'] * 1e3:.0f} ms)"}]
