"""
numtk: the methods of nineteen ICML 2026 papers as fast, tested library code.

Subpackages are imported on first access (``numtk.stats``), so ``import numtk`` stays cheap and
imports no optional dependency.

=========================  ==========================================================
``numtk.stats``            Kendall's tau (a SciPy drop-in), Kendall distance, bounds
``numtk.seriation``        STAGE ordering of point clouds along curves, baselines, recovery bound
``numtk.counterfactual``   group counterfactual maps for linear classifiers
``numtk.games``            zero-sum solvers, exploitability, Population Exploitability, PSRO
``numtk.ftt``              functional tensor trains: low-rank regression, derivatives, integrals
``numtk.sampling``         the HJB/BSDE score-based sampler, target densities, metrics
``numtk.datasets``         small shipped datasets with their licences
=========================  ==========================================================
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# Areas that exist (later areas add themselves here as they land).
submodules = ["stats", "seriation", "counterfactual", "games", "ftt", "sampling", "datasets"]

__all__ = submodules + ["__version__", "show_config"]


def _installed_copy():
    """Return the installed numtk when this file was imported from an unbuilt source checkout.

    ``python -m numtk`` run inside the checkout puts the checkout first on sys.path, where the
    compiled modules and the generated ``_version.py`` do not exist. Rather than fail, import the copy
    that ``pip install .`` placed in site-packages, and say clearly what to do when there is none.
    """
    import os

    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != checkout]
    for name in [m for m in sys.modules if m == "numtk" or m.startswith("numtk.")]:
        del sys.modules[name]
    try:
        return importlib.import_module("numtk")
    except ImportError:
        raise ImportError(
            "numtk is imported from its source checkout, which is not built, and no installed copy "
            "was found. Install it with `pip install .` (or, for development, "
            "`pip install -e . --no-build-isolation`)."
        ) from None


def __getattr__(name: str) -> Any:
    if name in submodules:
        return importlib.import_module(f"numtk.{name}")
    raise AttributeError(f"module 'numtk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)


def show_config() -> None:
    """Print the version, the compiled modules and the optional dependencies found."""
    from numtk._lib._config import info_text

    print(info_text())


try:
    from numtk._version import version as __version__
except ImportError:
    # The import statement that loaded this file now receives the installed module instead.
    sys.modules[__name__] = _installed_copy()
