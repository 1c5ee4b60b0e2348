"""Command line: ``python -m numtk info | tour | demo NAME``."""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Callable

from numtk._lib import _registry
from numtk._lib._config import info_text

# name -> "module:function", from the registry of areas (numtk._lib._registry), where an area adds its
# demos. Each demo prints its details and returns table rows (dicts with the keys of _COLUMNS); the tour
# runs them all.
DEMOS: dict[str, str] = {name: demo.entry for name, demo in _registry.demos().items()}

_COLUMNS = ("area", "method", "n", "result", "vs anchor", "speed")


def _load(name: str) -> Callable:
    return _registry.load(DEMOS[name])


def _install_hint(name: str) -> str | None:
    """None when demo ``name`` can run here; else what to install for it (``pip install "numtk[torch]"``)."""
    from numtk._lib._optional import EXTRAS

    missing = _registry.demos()[name].missing()
    if not missing:
        return None
    extras = sorted({EXTRAS[m][1] if m in EXTRAS else m for m in missing})
    return f"needs {', '.join(missing)}: pip install \"numtk[{','.join(extras)}]\""


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
    if plot and _install_hint(args.name) is None and "plot" not in inspect.signature(_load(args.name)).parameters:
        parser.error(f"demo {args.name!r} has no figure")
    rows: list[dict] = []
    for name in names:
        print(f"== {name}")
        hint = _install_hint(name)
        if hint is not None:  # an optional package is missing: the tour says so and goes on
            print(f"skipped: demo {name!r} {hint}", file=sys.stderr if args.command == "demo" else sys.stdout)
            if args.command == "demo":
                return 1
            area = next(a.name for a in _registry.AREAS if any(d.name == name for d in a.demos))
            rows.append({"area": area, "method": name, "result": f"skipped ({hint})"})
            continue
        rows.extend(_load(name)(quick=not args.full, **({"plot": plot} if plot else {})))
    print()
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
