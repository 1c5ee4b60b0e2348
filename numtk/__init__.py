"""
numtk: the methods of nineteen ICML 2026 papers as fast, tested library code.

Subpackages are imported on first access (``numtk.stats``), so ``import numtk`` stays cheap and
imports no optional dependency.

=========================  ==========================================================
``numtk.stats``            Kendall's tau (a SciPy drop-in), Kendall distance, bounds
=========================  ==========================================================
"""

from __future__ import annotations

import importlib
from typing import Any

from numtk._version import version as __version__

# Areas that exist (later areas add themselves here as they land).
submodules = ["stats"]

__all__ = submodules + ["__version__", "show_config"]


def __getattr__(name: str) -> Any:
    if name in submodules:
        try:
            return importlib.import_module(f"numtk.{name}")
        except ImportError as e:
            if "_ext" in str(e) or "_kendall_pointwise" in str(e):
                raise ImportError(
                    f"numtk.{name} could not load its compiled extension ({e}). The install is "
                    "broken or you are importing numtk from its source tree; reinstall numtk "
                    "(pip install .) and import it from outside the checkout."
                ) from e
            raise
    raise AttributeError(f"module 'numtk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)


def show_config() -> None:
    """Print the version, the compiled modules and the optional dependencies found."""
    from numtk.__main__ import info_text

    print(info_text())
