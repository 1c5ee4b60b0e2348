"""Side-by-side runs of numtk.torch.dipg for ``bench/compare.py --dipg``: the screened top-k against the full top-k.

**Problem.** I-MLE's target solve: ``values = theta + eps - lam * g`` with ``theta`` standard normal scores,
``eps`` sum-of-Gamma noise for this k and ``|g| <= G`` uniform, over ``m`` items; the bounds
``theta + eps -+ w`` with ``w = lam * G`` (the bound width) are built once, outside the timing. Widths from
0.01 to 3 move the active-set fraction from about k/m to a large share of the items.

**Contestants** (one torch thread, interleaved rounds of :func:`benchmarks._timing.interleaved`, medians):
``torch.topk`` (the k largest values and their indices only, no mask, ties unspecified), ``topk_mask`` (the
exact k-hot mask with the lower-position tie rule), a stable descending sort (the textbook way to the same exact
mask), ``screened_topk`` computing its threshold (the k-th largest lower bound), ``screened_topk`` given the
threshold that I-MLE has for free (the forward solve's k-th value less ``w``), and "core": the screening and the
masked top-k alone (``upper >= threshold`` and the top-k on the active set), without the public function's
validation (the NaN and bound checks, each a pass over the items with a host synchronisation). The table prints
the active-set fraction, the times, the speed-ups ``topk_mask / screened`` and ``sort / screened`` (> 1:
screening faster), and the share of the screened call spent outside the core (the validation). Every screened
mask is checked against ``topk_mask``.

**Finding.** In torch on a CPU, the public ``screened_topk`` does not beat ``torch.topk`` nor ``topk_mask``: the
selection of a small k is already one linear pass in compiled code, and the screened call costs several (the
bound checks, the comparison with the threshold, the gather of the active set). Its validation (NaN and bound
checks with host synchronisations) is the larger part of the call where few items are active (55-71 %); the
core alone, the screening and the masked top-k, beats ``topk_mask`` 2.1 to 3.2 times at m >= 1e5 with under 2 %
of the items active, and loses to it at large active fractions; it does not beat ``torch.topk`` (values and
indices only). Everything screened beats the stable sort, whose cost grows as ``m log m`` (the public call computing its
threshold: 2.0 to 8.5 times). The rule pays off
where the solver itself is expensive (a solver that is not a top-k, or one written per item).
"""

from __future__ import annotations

import os

from benchmarks._timing import interleaved

__all__ = ["compare", "screen_problem", "screen_calls", "SIZES", "QUICK_SIZES", "WIDTHS", "KS"]

SIZES = (10**4, 10**5, 10**6)
QUICK_SIZES = (10**4, 10**5)
WIDTHS = (0.01, 0.1, 1.0, 3.0)
QUICK_WIDTHS = (0.01, 1.0, 3.0)
KS = (10, 1000)


def _threads(n):
    from numtk.torch._common import torch_threads

    return torch_threads(None if os.environ.get("NUMTK_BENCH_TORCH_THREADS") == "all" else n)


def screen_problem(m: int, k: int, width: float, seed: int = 0):
    """(values, lower, upper, threshold) of the I-MLE target solve over m items (float32)."""
    import torch

    from numtk.torch.dipg import sum_of_gamma_noise

    g = torch.Generator().manual_seed(seed)
    base = torch.randn(m, generator=g) + sum_of_gamma_noise(m, k, rng=g)
    grad = 2 * torch.rand(m, generator=g) - 1
    values = base - width * grad
    threshold = torch.topk(base, k).values[-1] - width
    return values, base - width, base + width, threshold


def screen_calls(m: int, k: int, width: float, seed: int = 0) -> dict:
    """The contestants on one problem: name -> callable returning a mask (or torch.topk's values)."""
    import torch

    from numtk.torch._dipg import _masked_topk
    from numtk.torch.dipg import screened_topk, topk_mask

    v, lo, hi, thr = screen_problem(m, k, width, seed)

    def by_sort():
        order = torch.sort(v, descending=True, stable=True).indices[:k]
        return torch.zeros_like(v).scatter_(0, order, 1.0)

    return {"torch.topk": lambda: torch.topk(v, k),
            "topk_mask": lambda: topk_mask(v, k),
            "sort": by_sort,
            "screened": lambda: screened_topk(v, k, lo, hi).mask,
            "screened+threshold": lambda: screened_topk(v, k, lo, hi, threshold=thr).mask,
            "core": lambda: _masked_topk(v, hi >= thr, k)}


def compare(*, quick: bool = False, options=None) -> None:
    """Print the table of the module docstring."""
    import torch

    from numtk.torch.dipg import screened_topk, topk_mask

    repeat = 5 if quick else 9
    if options is not None and getattr(options, "repeat", None):
        repeat = options.repeat
    with _threads(1):
        print(f"Screened top-k (reconstructed rule) against full top-k; torch threads {torch.get_num_threads()}, "
              f"float32, medians of {repeat} interleaved rounds; speed-up > 1: screening faster")
        print("        m      k  width  active   torch.topk  topk_mask       sort   screened  +threshold      core"
              "   topk_mask/scr  sort/scr  topk_mask/core  validation   (ms; scr = screened given the threshold;"
              " validation = its share of scr)")
        for m in (QUICK_SIZES if quick else SIZES):
            for k in KS:
                if k >= m:
                    continue
                for w in (QUICK_WIDTHS if quick else WIDTHS):
                    calls = screen_calls(m, k, w)
                    v, lo, hi, thr = screen_problem(m, k, w)
                    r = screened_topk(v, k, lo, hi, threshold=thr)
                    ref = topk_mask(v, k)
                    assert torch.equal(r.mask, ref) and torch.equal(screened_topk(v, k, lo, hi).mask, ref)
                    assert torch.equal(calls["core"](), ref)
                    t = interleaved(calls, repeat=repeat, min_time=0.02)
                    ms = {name: 1e3 * t.medians[name] for name in calls}
                    print(f"  {m:7d} {k:6d} {w:6.2f}  {r.fraction:6.4f}   {ms['torch.topk']:10.3f} "
                          f"{ms['topk_mask']:10.3f} {ms['sort']:10.3f} {ms['screened']:10.3f} "
                          f"{ms['screened+threshold']:11.3f} {ms['core']:9.3f}   "
                          f"{t.ratio('topk_mask', 'screened+threshold'):13.2f} "
                          f"{t.ratio('sort', 'screened+threshold'):9.2f} {t.ratio('topk_mask', 'core'):15.2f} "
                          f"{1 - ms['core'] / ms['screened+threshold']:11.0%}")
