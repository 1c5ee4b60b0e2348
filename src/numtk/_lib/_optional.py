"""Optional dependencies: import them where they are used, and say which extra installs them.

numtk requires numpy, scipy and scikit-learn; everything else is imported only by the feature that
needs it. :func:`import_optional` turns a missing package into an ImportError that names the feature,
the package and the ``pip install "numtk[extra]"`` that provides it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

__all__ = ["import_optional", "has_module", "EXTRAS"]

# module -> (distribution, extra of numtk that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "cvxpy": ("cvxpy", "cvxpy"),
    "matplotlib": ("matplotlib", "plot"),
    "tqdm": ("tqdm", "progress"),
    "torch": ("torch", "torch"),
    "transformers": ("transformers", "transformers"),
    "gymnasium": ("gymnasium", "rl"),
}


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported (without importing it).

    A directory that holds nothing but ``__pycache__`` (what an uninstall can leave behind) imports as an
    empty namespace package; it is not the package, so it counts as absent.
    """
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    return spec.origin is not None or not _only_caches(spec.submodule_search_locations)


def _only_caches(locations) -> bool:
    """Whether the directories of a namespace package hold nothing but ``__pycache__``."""
    for where in locations or ():
        try:
            if any(entry != "__pycache__" for entry in os.listdir(where)):
                return False
        except OSError:
            continue
    return True


def import_optional(name: str, *, purpose: str) -> ModuleType:
    """Import the optional module ``name``, or raise an ImportError that says how to install it.

    Parameters
    ----------
    name : str
        A key of :data:`EXTRAS` (the module's import name, e.g. ``"cvxpy"``).
    purpose : str
        What needs it, for the message (``"family='psd'"``).

    Examples
    --------
    >>> from numtk._lib._optional import import_optional
    >>> import_optional("numtk_no_such_module", purpose="this example")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ImportError: this example needs the optional package numtk_no_such_module...
    """
    try:
        if not has_module(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return importlib.import_module(name)
    except ImportError as exc:
        dist, extra = EXTRAS.get(name, (name, None))
        how = (f'pip install "numtk[{extra}]" (or pip install {dist})' if extra
               else f"pip install {dist}")
        raise ImportError(f"{purpose} needs the optional package {dist}, which is not installed: "
                          f"{how}") from exc


def pyplot():
    """``matplotlib.pyplot`` on the file-only Agg backend, for the demonstrations' ``--plot FILE``."""
    matplotlib = import_optional("matplotlib", purpose="--plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
