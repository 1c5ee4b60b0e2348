"""What ``python -m numtk info`` and :func:`numtk.show_config` print: the version, the compiled modules
and the optional dependencies found."""

from __future__ import annotations

import importlib
import importlib.util
import sys

from numtk._lib._registry import compiled_modules

__all__ = ["info_text"]

_OPTIONAL = ("scipy", "sklearn", "tqdm", "torch", "cvxpy", "numba", "dask", "open_spiel", "umap",
             "hypothesis", "asv")


def info_text() -> str:
    import numpy

    import numtk

    lines = [f"numtk {numtk.__version__}", f"python {sys.version.split()[0]}, numpy {numpy.__version__}",
             "compiled modules:"]
    for name in compiled_modules():  # every area's, from the registry
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
