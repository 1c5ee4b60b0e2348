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
``numtk.moe``              expert-parallel load balancing (LLEP), its baselines, optimum, simulator
``numtk.mixture``          data-mixture laws (CAMEL), the optimal mixture, loss-to-benchmark laws
``numtk.algebra``          squarefree monomial ideals: generator graphs, linear resolutions (Hirsch)
``numtk.torch``            the PyTorch bridge: the deep methods' modules (needs ``numtk[torch]``)
=========================  ==========================================================
"""

from __future__ import annotations

import importlib
from typing import Any

# Areas that exist (later areas add themselves here as they land).
submodules = ["stats", "seriation", "counterfactual", "games", "ftt", "sampling", "datasets", "moe", "mixture", "algebra", "torch"]

__all__ = submodules + ["__version__", "show_config"]


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
    raise ImportError(
        "numtk was imported from a source tree that is not built (no numtk/_version.py). Install it "
        "with `python -m pip install .`, or for development `python -m pip install -e . "
        "--no-build-isolation`, and import it from there."
    ) from None
