"""Command line: ``python -m numtk info | tour | demo NAME``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import sys
from typing import Callable

# name -> "module:function". Each demo prints its details and returns table rows (dicts with the keys
# of _COLUMNS). Areas add their demos here as they land; the tour runs them all.
DEMOS: dict[str, str] = {
    "kendall": "numtk.stats._demo:run",
    "stage": "numtk.seriation._demo:run",
    "counterfactual": "numtk.counterfactual._demo:run",
    "psro": "numtk.games._demo:run",
    "sampler": "numtk.sampling._demo:run",
}

_COLUMNS = ("area", "method", "n", "result", "vs anchor", "speed")
_COMPILED = ("numtk.stats._stats_ext", "numtk.stats._kendall_pointwise", "numtk.seriation._seriation_ext",
             "numtk.counterfactual._counterfactual_ext", "numtk.games._games_ext", "numtk.ftt._ftt_ext",
             "numtk.sampling._sampling_ext")
_OPTIONAL = ("scipy", "sklearn", "tqdm", "torch", "cvxpy", "numba", "dask", "open_spiel", "umap",
             "hypothesis", "asv")


def info_text() -> str:
    import numpy

    import numtk

    lines = [f"numtk {numtk.__version__}", f"python {sys.version.split()[0]}, numpy {numpy.__version__}",
             "compiled modules:"]
    for name in _COMPILED:
        try:
            mod = importlib.import_module(name)
            lines.append(f"  {name:<36} ok ({mod.__file__})")
        except ImportError as e:
            lines.append(f"  {name:<36} MISSING ({e})")
    lines.append("optional dependencies:")
    for name in _OPTIONAL:
        spec = importlib.util.find_spec(name)
        if spec is None:
            lines.append(f"  {name:<12} not installed")
            continue
        version = "?"
        try:
            from importlib.metadata import version as dist_version

            dist = {"sklearn": "scikit-learn", "open_spiel": "open_spiel", "umap": "umap-learn"}.get(name, name)
            version = dist_version(dist)
        except Exception:
            pass
        lines.append(f"  {name:<12} {version}")
    return "\n".join(lines)


def _load(name: str) -> Callable:
    mod, func = DEMOS[name].split(":")
    return getattr(importlib.import_module(mod), func)


def format_table(rows: list[dict]) -> str:
    widths = {c: max([len(c)] + [len(str(r.get(c, ""))) for r in rows]) for c in _COLUMNS}
    head = "  ".join(c.ljust(widths[c]) for c in _COLUMNS)
    rule = "  ".join("-" * widths[c] for c in _COLUMNS)
    body = ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in _COLUMNS) for r in rows]
    return "\n".join([head, rule, *body])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numtk", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, compiled modules and optional dependencies")
    tour = sub.add_parser("tour", help="run every area's demonstration and print one results table")
    tour.add_argument("--full", action="store_true", help="larger problems (slower)")
    demo = sub.add_parser("demo", help="run one demonstration")
    demo.add_argument("name", choices=sorted(DEMOS))
    demo.add_argument("--full", action="store_true", help="larger problems (slower)")
    demo.add_argument("--plot", metavar="FILE", help="save the demonstration's figure (needs matplotlib)")
    args = parser.parse_args(argv)

    if args.command == "info":
        print(info_text())
        return 0
    names = sorted(DEMOS) if args.command == "tour" else [args.name]
    plot = getattr(args, "plot", None)
    if plot and "plot" not in inspect.signature(_load(args.name)).parameters:
        parser.error(f"demo {args.name!r} has no figure")
    rows: list[dict] = []
    for name in names:
        print(f"== {name}")
        rows.extend(_load(name)(quick=not args.full, **({"plot": plot} if plot else {})))
    print()
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
