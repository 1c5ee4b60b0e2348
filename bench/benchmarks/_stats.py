"""Kendall kernels against SciPy, side by side: ``bench/compare.py --kernels`` (on by default).

For every kernel, data kind and size: the median time of numtk with ``workers=1`` and ``workers=-1`` and of
``scipy.stats.kendalltau``, timed in interleaved rounds (:func:`benchmarks._timing.interleaved`), the
ratios SciPy/numtk (> 1: numtk faster) and whether the results agree (``exact`` when statistic and p-value
are identical floats, otherwise the largest relative difference). The spec targets (seriation.md A1.7)
that the run measured are checked at the end.
"""

import math
import os

import numpy as np
import scipy.stats

import numtk.stats
from benchmarks._data import make_data
from benchmarks._timing import interleaved

# kernel name -> (numtk call taking workers, SciPy anchor call)
KERNELS = {
    "kendall_tau": (
        lambda x, y, workers: numtk.stats.kendall_tau(x, y, workers=workers),
        lambda x, y: scipy.stats.kendalltau(x, y),
    ),
    "kendall_tau_c": (
        lambda x, y, workers: numtk.stats.kendall_tau(x, y, variant="c", workers=workers),
        lambda x, y: scipy.stats.kendalltau(x, y, variant="c"),
    ),
}

#: the names ``--kernels`` accepts (the registry's choices for this section)
CHOICES = tuple(KERNELS)

# Spec A1.7 targets for kendall_tau (tau-b): (n, data) -> minimum SciPy/numtk ratio, workers=1.
SPEED_TARGETS = {(10**6, "continuous"): 2.0, (10**6, "ties"): 1.5}
SMALL_N_TARGET = (10**3, 1.0)  # n <= 10^3: not slower than SciPy
SCALING_FACTOR = 0.6  # workers=k: >= 0.6 k times the workers=1 throughput, k <= 8, n >= 10^6


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not available on every platform
        return os.cpu_count() or 1


def same_float(a, b):
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def agreement(res, ref):
    """'exact' if statistic and pvalue are the same floats, else the largest relative diff."""
    pairs = [(res.statistic, ref.statistic), (res.pvalue, ref.pvalue)]
    if all(same_float(a, b) for a, b in pairs):
        return "exact"
    worst = 0.0
    for a, b in pairs:
        a, b = float(a), float(b)
        if math.isnan(a) != math.isnan(b):
            return "NaN mismatch"
        if not same_float(a, b):
            worst = max(worst, abs(a - b) / max(abs(a), abs(b), np.finfo(float).tiny))
    return f"rel {worst:.1e}"


def fmt_time(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:7.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:7.2f} ms"
    return f"{seconds:7.3f} s "


def fmt_n(n):
    exp = len(str(n)) - 1
    mantissa, rest = divmod(n, 10**exp)
    return f"{mantissa}e{exp}" if rest == 0 and exp >= 3 else str(n)


def run_kernel(kernel, options, rows):
    """One table: every size and data kind of ``options`` for ``kernel``; appends the rows."""
    numtk_call, anchor_call = KERNELS[kernel]
    head = (
        f"{'n':>5} {'data':<11}"
        f" {'numtk w=1':>11} {'numtk w=-1':>11} {'scipy':>11}"
        f" {'scipy/w1':>8} {'scipy/w-1':>9} {'w1/w-1':>7}  agree (w=1; w=-1)"
    )
    print(f"== {kernel} ==")
    print(head)
    print("-" * len(head))
    for n in options.sizes:
        for data in options.data:
            x, y = make_data(n, data)
            calls = {
                "w1": lambda: numtk_call(x, y, 1),
                "wall": lambda: numtk_call(x, y, -1),
                "scipy": lambda: anchor_call(x, y),
            }
            t = interleaved(calls, options.repeat, min_time=options.min_time, max_single=options.max_single)
            flag = "*" if "scipy" in t.single else " "
            row = dict(
                kernel=kernel,
                n=n,
                data=data,
                w1=t.medians["w1"],
                wall=t.medians["wall"],
                scipy=t.medians["scipy"],
                scipy_once="scipy" in t.single,
                agree=(agreement(t.results["w1"], t.results["scipy"]),
                       agreement(t.results["wall"], t.results["scipy"])),
            )
            rows.append(row)
            print(
                f"{fmt_n(n):>5} {data:<11}"
                f" {fmt_time(row['w1']):>11} {fmt_time(row['wall']):>11}"
                f" {fmt_time(row['scipy']):>10}{flag}"
                f" {t.ratio('scipy', 'w1'):7.2f}x {t.ratio('scipy', 'wall'):8.2f}x"
                f" {t.ratio('w1', 'wall'):6.2f}x  {row['agree'][0]}; {row['agree'][1]}",
                flush=True,
            )
            del x, y, calls, t
    print()


def check_targets(rows):
    """Print the spec A1.7 targets that this run measured, with pass/miss."""
    lines = []
    k = min(usable_cores(), 8)
    for row in rows:
        if row["kernel"] != "kendall_tau":
            continue
        n, data, speedup = row["n"], row["data"], row["scipy"] / row["w1"]
        target = SPEED_TARGETS.get((n, data))
        if target is None and n <= SMALL_N_TARGET[0]:
            target = SMALL_N_TARGET[1]
        if target is not None:
            ok = "ok  " if speedup >= target else "MISS"
            lines.append(
                f"{ok} n={fmt_n(n)} {data}: scipy/numtk(w=1) = {speedup:.2f}x"
                f" (target >= {target}x)"
            )
        if n >= 10**6 and k > 1:
            scaling, want = row["w1"] / row["wall"], SCALING_FACTOR * k
            ok = "ok  " if scaling >= want else "MISS"
            lines.append(
                f"{ok} n={fmt_n(n)} {data}: workers=-1 ({k} cores) speed-up = {scaling:.2f}x"
                f" (target >= {want:.1f}x)"
            )
        if row["agree"] != ("exact", "exact"):
            lines.append(f"MISS n={fmt_n(n)} {data}: not identical to SciPy {row['agree']}")
    if lines:
        print("== spec A1.7 targets (kendall_tau, tau-b) ==")
        print("\n".join(lines))


def compare(kernels, options):
    """``bench/compare.py --kernels``: one table per kernel, then the spec targets; returns the rows.

    ``options`` carries ``sizes``, ``data``, ``repeat``, ``min_time`` and ``max_single`` (compare.py's
    shared options).
    """
    rows = []
    for kernel in kernels:
        run_kernel(kernel, options, rows)
    check_targets(rows)
    if any(row["scipy_once"] for row in rows):
        print(f"* SciPy timed once: one call took more than {options.max_single:g} s.")
    return rows
