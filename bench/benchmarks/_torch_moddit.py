"""Side-by-side runs of numtk.torch.moddit for ``bench/compare.py --moddit``: block-sparse attention against dense
:func:`torch.nn.functional.scaled_dot_product_attention` on the CPU.

The problem of the issue: sequence 16384 (``--quick``: 4096), blocks of 128, one batch, two heads of dimension
64, float32, standard normal q, k, v. Two kinds of masks at about 80 % of the blocks masked:

- **per-row random**: every query-block row keeps the same number of key blocks (20 % of them, rounded), chosen
  uniformly at random per row and head; no row needs padding;
- **structured lines**: what MOD-DiT produces, :func:`~numtk.torch.moddit.mask_from_lines` of random diagonals
  and columns (drawn until 20 % of the blocks are kept) plus the frame-block diagonal (16 frames: 8 blocks each
  at L = 16384), per head; the rows keep different numbers of blocks, so the gathered rows are padded per chunk.

Each row of the table times dense SDPA and :func:`~numtk.torch.moddit.block_sparse_attention` in interleaved
rounds (:func:`benchmarks._timing.interleaved`) and reports the ratio of medians and the largest absolute
difference from :func:`~numtk.torch.moddit.masked_dense_attention` (the dense product with the mask applied:
"the same output"). A sweep over the fraction of masked blocks (per-row random masks) finds the crossover,
where the block-sparse call stops being faster than the dense one.

Threads: every row runs first with one thread of torch (the primary figure: it depends least on what else runs
on the machine) and then, where torch's default differs, with the default count, under
:func:`numtk.torch._common.torch_threads`. With other processes on the cores, the block-sparse path (a few dozen
parallel calls) loses more to them than the one large dense call, so the ratio at the default count depends on
the load; the header prints the load average.
"""

from __future__ import annotations

import os
import time

from benchmarks._timing import interleaved

__all__ = ["compare", "problem", "row_mask", "lines_mask", "SWEEP"]

#: the fractions of masked blocks of the sweep
SWEEP = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
HEADS, DIM, BLOCK = 2, 64, 128
#: frames per sequence of the structured masks (frames of n // FRAMES blocks: 8 at L = 16384)
FRAMES = 16


def problem(L: int, *, heads: int = HEADS, dim: int = DIM, seed: int = 0):
    """Standard normal float32 q, k, v of shape (1, heads, L, dim)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, L, dim, generator=g) for _ in range(3))


def row_mask(n: int, sparsity: float, *, heads: int = HEADS, seed: int = 0):
    """Per head, every row keeps ``round((1 - sparsity) n)`` (at least one) key blocks drawn at random."""
    import torch

    g = torch.Generator().manual_seed(seed)
    kept = max(1, round((1.0 - sparsity) * n))
    cols = torch.rand(heads, n, n, generator=g).argsort(dim=-1)[..., :kept]
    return torch.zeros(heads, n, n, dtype=torch.bool).scatter(-1, cols, True)


def lines_mask(n: int, sparsity: float, *, heads: int = HEADS, frame: int | None = None, seed: int = 0):
    """Per head, the frame-block diagonal and random lines (diagonals and columns) added one by one until at most a
    fraction ``sparsity`` of the blocks is masked, through :func:`numtk.torch.moddit.mask_from_lines`."""
    import torch

    from numtk.torch.moddit import mask_from_lines

    frame = max(1, n // FRAMES) if frame is None else frame
    g = torch.Generator().manual_seed(seed)
    masks = []
    for _ in range(heads):
        order = torch.randperm(3 * n - 1, generator=g)
        for k in range(1, 3 * n):
            m = mask_from_lines(order[:k], n, frame, block_diagonal=torch.zeros(()))
            if 1.0 - float(m.float().mean()) <= sparsity:
                break
        masks.append(m)
    return torch.stack(masks)


def _thread_counts(default: int) -> list[int]:
    """The thread counts of the comparison: one first (the primary figure), then torch's default if it differs."""
    return [1] if default == 1 else [1, default]


def _row(label, q, k, v, mask, repeat, out, threads_list, check=True):
    import torch

    from numtk.torch._common import torch_threads
    from numtk.torch.moddit import block_sparse_attention, masked_dense_attention

    F = torch.nn.functional
    ref = masked_dense_attention(q, k, v, mask, BLOCK) if check else None
    sparsity = 1.0 - float(mask.float().mean())
    kept = mask.sum(dim=-1)
    cells, ratios, diff = [], [], 0.0
    for threads in threads_list:
        with torch_threads(threads):
            t = interleaved({"dense": lambda: F.scaled_dot_product_attention(q, k, v),
                             "sparse": lambda: block_sparse_attention(q, k, v, mask, BLOCK)}, repeat)
        if check:
            diff = max(diff, float((t.results["sparse"] - ref).abs().max()))
        ratio = t.ratio("sparse", "dense")
        ratios.append(ratio)
        cells.append(f"{t.medians['dense']:8.3f} {t.medians['sparse']:8.3f} {ratio:6.3f}")
    out(f"  {label:<22} {sparsity:8.3f} {int(kept.min()):>4}-{int(kept.max()):<4} " + "   ".join(cells)
        + (f" {diff:11.2e}" if check else f" {'-':>11}"))
    return sparsity, ratios, diff


def _crossover(points):
    """The sparsity where the ratio crosses 1, by linear interpolation (None: not in the sweep)."""
    for (s0, r0), (s1, r1) in zip(points, points[1:]):
        if r0 >= 1.0 > r1:
            return s0 + (1.0 - r0) * (s1 - s0) / (r1 - r0)
    return None


def compare(*, quick: bool = False, options=None) -> None:
    """Print the comparison table and the sparsity sweep (see the module docstring)."""
    import torch

    from numtk.torch.moddit import block_sparse_attention

    L = 4096 if quick else 16384
    repeat = 3 if quick else 5
    if options is not None and getattr(options, "repeat", None):
        repeat = min(options.repeat, repeat)
    n = L // BLOCK
    out = print
    default = torch.get_num_threads()
    threads_list = _thread_counts(default)
    out("\n== moddit: block-sparse attention against dense scaled_dot_product_attention (CPU) ==")
    out(f"L = {L}, block = {BLOCK} ({n} x {n} blocks), batch 1, {HEADS} heads, head dim {DIM}, float32; "
        f"torch {torch.__version__}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}. Medians of "
        f"{repeat} interleaved rounds (seconds), with 1 thread (the primary figure)"
        + ("" if default == 1 else f" and again with torch's default {default} threads (where other processes "
           "share the cores, the many small parallel calls of the block-sparse path lose more to them than the one "
           "large dense call: that ratio depends on the load)")
        + "; ratio = sparse / dense (target <= 0.5 at 80 %); max |diff| against masked_dense_attention (the dense "
        "product with the mask applied).")
    q, k, v = problem(L)
    full = torch.ones(n, n, dtype=torch.bool)
    same = torch.equal(block_sparse_attention(q, k, v, full, BLOCK), torch.nn.functional.scaled_dot_product_attention(
        q, k, v))
    out(f"all-true mask: the output is dense SDPA's, bit for bit: {same}")
    cols = "   ".join(f"{'dense s':>8} {'sparse s':>8} {'ratio':>6}" for _ in threads_list)
    tags = "   ".join(f"{('threads ' + str(t)):^24}" for t in threads_list)
    head = f"  {'mask':<22} {'sparsity':>8} {'kept/row':>9} {cols} {'max |diff|':>11}"
    out(f"  {'':<22} {'':>8} {'':>9} {tags}")
    out(head)
    t0 = time.perf_counter()
    _row("per-row random 80%", q, k, v, row_mask(n, 0.8), repeat, out, threads_list)
    _row("structured lines 80%", q, k, v, lines_mask(n, 0.8), repeat, out, threads_list)
    rounds = max(2, repeat - 2)
    out(f"sweep (per-row random masks; {rounds} rounds" + ("" if quick else "; the reference output is not "
        "computed at this length, where its dense product takes longer than the timings") + "):")
    out(head)
    points = [[] for _ in threads_list]
    for s in SWEEP:
        sparsity, ratios, _ = _row(f"per-row random {s:.0%}", q, k, v, row_mask(n, s, seed=1), rounds, out,
                                   threads_list, check=quick)
        for p, r in zip(points, ratios):
            p.append((sparsity, r))
    for t, p in zip(threads_list, points):
        cross = _crossover(p)
        what = (f"below {p[0][0]:.2f} (faster at every sparsity of the sweep)" if p[0][1] < 1.0 else
                "not reached in the sweep" if cross is None else
                f"about {cross:.2f} of the blocks masked (linear interpolation of the ratios)")
        out(f"crossover with {t} thread(s): {what}")
    out(f"({time.perf_counter() - t0:.1f} s)")
