"""Side-by-side timing of numtk kernels against their SciPy anchors, in one process.

Usage::

    python bench/compare.py                        # n = 1e3 .. 1e7, continuous and ties data
    python bench/compare.py --quick                # n = 1e3 .. 1e6, 5 repetitions (< 1 minute)
    python bench/compare.py --sizes 1e6 --data continuous,ties,heavy_ties --repeat 9
    python bench/compare.py --kernels none --counterfactual   # group maps vs cvxpy and DAQP only
    python bench/compare.py --kernels none --sampling         # sampler fit, log Z, ESS; Sinkhorn, MMD
    python bench/compare.py --kernels none --sampling-hard    # many-well, funnel, double well, GMM-40 (minutes each)

For every kernel, data kind and size it prints the median time of numtk with ``workers=1``
and ``workers=-1`` and of the SciPy anchor, the ratios anchor/numtk (> 1: numtk faster), and
whether the results agree (``exact`` when statistic and p-value are identical floats,
otherwise the largest relative difference). The calls are interleaved -- each repetition times
every contestant once, in a rotating order -- so that changes in machine load hit all of them
alike. Spec targets (seriation.md A1.7) are checked at the end.
"""

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.stats

import numtk
import numtk.stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmarks._data import DATA_KINDS, make_data  # noqa: E402

FULL_SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)
QUICK_SIZES = (10**3, 10**4, 10**5, 10**6)

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

# Spec A1.7 targets for kendall_tau (tau-b): (n, data) -> minimum SciPy/numtk ratio, workers=1.
SPEED_TARGETS = {(10**6, "continuous"): 2.0, (10**6, "ties"): 1.5}
SMALL_N_TARGET = (10**3, 1.0)  # n <= 10^3: not slower than SciPy
SCALING_FACTOR = 0.6  # workers=k: >= 0.6 k times the workers=1 throughput, k <= 8, n >= 10^6


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not available on every platform
        return os.cpu_count() or 1


def parse_sizes(text):
    sizes = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not value >= 2 or value != int(value):
            raise argparse.ArgumentTypeError(f"bad size {item!r}: need an integer >= 2")
        sizes.append(int(value))
    return tuple(sizes)


def parse_list(choices):
    def parse(text):
        if text.strip() == "none":  # e.g. --kernels none: only the area comparisons
            return ()
        items = tuple(s.strip() for s in text.split(",") if s.strip())
        bad = [s for s in items if s not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}; got {text!r}")
        return items

    return parse


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


def time_interleaved(calls, repeat, min_time, max_single):
    """Median seconds per call of each callable in ``calls`` (a dict name -> callable).

    One warm-up call each (its result is returned for the agreement check and its time sets
    the inner loop count so that one sample lasts >= ``min_time``). Then ``repeat`` rounds;
    round r times every callable once, starting at a different one each round. A callable
    whose warm-up took longer than ``max_single`` seconds is not repeated: its warm-up time is
    reported (flagged in the returned ``single`` set).
    """
    names = list(calls)
    results, loops, samples, single = {}, {}, {}, set()
    for name in names:
        t0 = time.perf_counter()
        results[name] = calls[name]()
        dt = time.perf_counter() - t0
        loops[name] = max(1, math.ceil(min_time / max(dt, 1e-9)))
        samples[name] = []
        if dt > max_single:
            samples[name].append(dt)
            single.add(name)
    active = [name for name in names if name not in single]
    for r in range(repeat):
        k = r % len(active) if active else 0
        for name in active[k:] + active[:k]:
            fn, number = calls[name], loops[name]
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - t0) / number)
    medians = {name: statistics.median(samples[name]) for name in names}
    return medians, results, single


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


def print_header(args):
    print("numtk vs SciPy, median of", args.repeat, "interleaved repetitions")
    print(
        f"cores: {os.cpu_count()} logical, {usable_cores()} usable"
        f" | python {platform.python_version()} ({platform.machine()}, {platform.system()})"
    )
    print(f"numtk {numtk.__version__} | numpy {np.__version__} | scipy {scipy.__version__}")
    print(f"sizes: {', '.join(fmt_n(n) for n in args.sizes)} | data: {', '.join(args.data)}")
    print()


def run_kernel(kernel, args, rows):
    numtk_call, anchor_call = KERNELS[kernel]
    head = (
        f"{'n':>5} {'data':<11}"
        f" {'numtk w=1':>11} {'numtk w=-1':>11} {'scipy':>11}"
        f" {'scipy/w1':>8} {'scipy/w-1':>9} {'w1/w-1':>7}  agree (w=1; w=-1)"
    )
    print(f"== {kernel} ==")
    print(head)
    print("-" * len(head))
    for n in args.sizes:
        for data in args.data:
            x, y = make_data(n, data)
            calls = {
                "w1": lambda: numtk_call(x, y, 1),
                "wall": lambda: numtk_call(x, y, -1),
                "scipy": lambda: anchor_call(x, y),
            }
            med, res, single = time_interleaved(calls, args.repeat, args.min_time, args.max_single)
            flag = "*" if "scipy" in single else " "
            row = dict(
                kernel=kernel,
                n=n,
                data=data,
                w1=med["w1"],
                wall=med["wall"],
                scipy=med["scipy"],
                scipy_once="scipy" in single,
                agree=(agreement(res["w1"], res["scipy"]), agreement(res["wall"], res["scipy"])),
            )
            rows.append(row)
            print(
                f"{fmt_n(n):>5} {data:<11}"
                f" {fmt_time(row['w1']):>11} {fmt_time(row['wall']):>11}"
                f" {fmt_time(row['scipy']):>10}{flag}"
                f" {row['scipy'] / row['w1']:7.2f}x {row['scipy'] / row['wall']:8.2f}x"
                f" {row['w1'] / row['wall']:6.2f}x  {row['agree'][0]}; {row['agree'][1]}",
                flush=True,
            )
            del x, y, calls, res
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, help="comma-separated, e.g. 1e3,1e4,1e6")
    parser.add_argument(
        "--data",
        type=parse_list(DATA_KINDS),
        default=("continuous", "ties"),
        help=f"comma-separated data kinds from {', '.join(DATA_KINDS)} (default: continuous,ties)",
    )
    parser.add_argument(
        "--kernels",
        type=parse_list(tuple(KERNELS)),
        default=("kendall_tau",),
        help=f"comma-separated from {', '.join(KERNELS)} (default: kendall_tau)",
    )
    parser.add_argument("--repeat", type=int, help="interleaved repetitions (default 7; quick 5)")
    parser.add_argument(
        "--min-time",
        type=float,
        help="seconds per timing sample; fast calls loop (default 0.1; quick 0.02)",
    )
    parser.add_argument(
        "--max-single",
        type=float,
        default=120.0,
        help="a call slower than this many seconds is timed once, not repeated (default 120)",
    )
    parser.add_argument("--quick", action="store_true", help="n <= 1e6, 5 repetitions")
    parser.add_argument(
        "--seriation",
        type=parse_sizes,
        default=None,
        help="also time numtk.seriation (stage, spectral, recanati) at these sizes, e.g. 1e3,1e4",
    )
    parser.add_argument(
        "--seriation-hard",
        type=parse_sizes,
        default=None,
        help="also time numtk.seriation on the hard curves (close spiral, noisy helix, uneven density)",
    )
    parser.add_argument(
        "--counterfactual",
        action="store_true",
        help="also time numtk.counterfactual group maps against cvxpy (Clarabel/OSQP/SCS) and DAQP",
    )
    parser.add_argument(
        "--games",
        action="store_true",
        help="also time numtk.games against OpenSpiel and HiGHS (NashConv, PE, CFR+, RM+, PSRO)",
    )
    parser.add_argument(
        "--ftt",
        action="store_true",
        help="also time numtk.ftt (FunctionalTT evaluation against a NumPy einsum reference, one ALS sweep)",
    )
    parser.add_argument(
        "--sampling",
        action="store_true",
        help="also time numtk.sampling (ScoreBasedSampler.fit with |dlog Z| and ESS; sinkhorn vs POT, mmd vs NumPy)",
    )
    parser.add_argument(
        "--sampling-hard",
        action="store_true",
        help="also fit the sampler on the benchmark targets of the literature (many-well d=32, funnel d=10, "
        "double-well d=50, GMM-40): minutes each",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.repeat is None:
        args.repeat = 5 if args.quick else 7
    if args.min_time is None:
        args.min_time = 0.02 if args.quick else 0.1
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")

    print_header(args)
    rows = []
    start = time.perf_counter()
    for kernel in args.kernels:
        run_kernel(kernel, args, rows)
    check_targets(rows)
    if any(row["scipy_once"] for row in rows):
        print(f"* SciPy timed once: one call took more than {args.max_single:g} s.")
    if args.seriation:
        from benchmarks._seriation import compare as compare_seriation

        compare_seriation(args.seriation)
    if args.seriation_hard:
        from benchmarks._seriation import HARD_CURVES
        from benchmarks._seriation import compare as compare_seriation

        compare_seriation(args.seriation_hard, curves=tuple(HARD_CURVES))
    if args.counterfactual:
        from benchmarks._counterfactual import CASES, QUICK_CASES
        from benchmarks._counterfactual import compare as compare_counterfactual

        compare_counterfactual(QUICK_CASES if args.quick else CASES)
    if args.games:
        from benchmarks._games import compare as compare_games

        compare_games(quick=args.quick)
    if args.ftt:
        from benchmarks._ftt import compare as compare_ftt

        compare_ftt(quick=args.quick)
    if args.sampling:
        from benchmarks._sampling import compare as compare_sampling

        compare_sampling(quick=args.quick)
    if args.sampling_hard:
        from benchmarks._sampling import compare_hard as compare_sampling_hard

        compare_sampling_hard()
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
