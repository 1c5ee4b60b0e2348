"""Side-by-side timing of numtk kernels against their anchors, in one process.

Usage::

    python bench/compare.py                        # n = 1e3 .. 1e7, continuous and ties data
    python bench/compare.py --quick                # n = 1e3 .. 1e6, 5 repetitions (< 1 minute)
    python bench/compare.py --sizes 1e6 --data continuous,ties,heavy_ties --repeat 9
    python bench/compare.py --kernels none --counterfactual   # group maps vs cvxpy and DAQP only
    python bench/compare.py --kernels none --sampling         # sampler fit, log Z, ESS; Sinkhorn, MMD
    python bench/compare.py --kernels none --sampling-hard    # many-well, funnel, double well, GMM-40 (minutes each)
    python bench/compare.py --kernels none --threads          # thread crossovers of the compiled kernels

The sections and their flags come from the registry of areas (``numtk._lib._registry``): each area
names its flag and the function of ``bench/benchmarks/`` that runs it. ``--kernels`` (on by default)
times the Kendall kernels: for every kernel, data kind and size, the median time of numtk with
``workers=1`` and ``workers=-1`` and of the SciPy anchor, the ratios anchor/numtk (> 1: numtk faster),
and whether the results agree (``exact`` when statistic and p-value are identical floats, otherwise the
largest relative difference); spec targets (seriation.md A1.7) are checked at the end. Every section
times its contestants with one helper (``benchmarks._timing.interleaved``): each repetition times every
contestant once, in a rotating order, so that changes in machine load hit all of them alike.
"""

import argparse
import inspect
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy

import numtk
from numtk._lib import _registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmarks._data import DATA_KINDS  # noqa: E402

FULL_SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)
QUICK_SIZES = (10**3, 10**4, 10**5, 10**6)


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


def fmt_n(n):
    exp = len(str(n)) - 1
    mantissa, rest = divmod(n, 10**exp)
    return f"{mantissa}e{exp}" if rest == 0 and exp >= 3 else str(n)


def print_header(args):
    print("numtk against its anchors, medians of interleaved repetitions")
    print(
        f"cores: {os.cpu_count()} logical, {usable_cores()} usable"
        f" | python {platform.python_version()} ({platform.machine()}, {platform.system()})"
    )
    print(f"numtk {numtk.__version__} | numpy {np.__version__} | scipy {scipy.__version__}")
    print(f"sizes: {', '.join(fmt_n(n) for n in args.sizes)} | data: {', '.join(args.data)}"
          f" | repetitions: {args.repeat}")
    print()


def dest(section):
    """The attribute of the parsed arguments that holds a section's flag."""
    return section.flag.replace("-", "_")


def add_section(parser, section):
    """The flag of one registry section."""
    flag = f"--{section.flag}"
    if section.takes == "switch":
        parser.add_argument(flag, action="store_true", help=f"also time {section.help}")
    elif section.takes == "sizes":
        parser.add_argument(flag, type=parse_sizes, default=None, metavar="SIZES", help=f"also time {section.help}")
    else:
        default = ",".join(section.default) if section.default else "none"
        parser.add_argument(
            flag,
            type=parse_list(section.choices),
            default=tuple(section.default or ()),
            help=f"{section.help}; comma-separated from {', '.join(section.choices)}, or none (default: {default})",
        )


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, help="comma-separated, e.g. 1e3,1e4,1e6")
    parser.add_argument(
        "--data",
        type=parse_list(DATA_KINDS),
        default=("continuous", "ties"),
        help=f"comma-separated data kinds from {', '.join(DATA_KINDS)} (default: continuous,ties)",
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
    parser.add_argument("--quick", action="store_true", help="n <= 1e6, 5 repetitions; smaller area problems")
    for section in _registry.compare_sections():
        add_section(parser, section)
    return parser


def run_section(section, value, args):
    """Call a section's entry point: its flag's value first (sizes or choices), then the keywords it takes."""
    fn = _registry.load(section.entry)
    params = inspect.signature(fn).parameters
    positional = () if section.takes == "switch" else (value,)
    keywords = {k: v for k, v in (("quick", args.quick), ("options", args)) if k in params}
    return fn(*positional, **keywords)


def main(argv=None):
    parser = build_parser()
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
    start = time.perf_counter()
    for section in _registry.compare_sections():
        value = getattr(args, dest(section))
        if value:  # a switch given, sizes given, a non-empty choice
            run_section(section, value, args)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
