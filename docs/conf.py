"""Sphinx configuration of the numtk documentation.

Build from the repository root (warnings are errors)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

The build needs no network. Set ``NUMTK_DOCS_INTERSPHINX=1`` to link names of NumPy, SciPy and
Python to their own documentation (that fetches their inventories).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numtk

# docs/_ext: numtk_demo_figures, the ``.. numtk-demo-figure:: NAME`` directive that draws the tutorials'
# figures from the demos' code during the build (nothing is committed as a PNG).
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

# -- Project -------------------------------------------------------------------------------------

project = "numtk"
author = "The numtk developers"
copyright = f"2026, {author}"
release = numtk.__version__
version = ".".join(release.split(".")[:2])

# -- General -------------------------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "numpydoc",
    "numtk_demo_figures",
]

root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []
default_role = "autolink"
pygments_style = "sphinx"

# -- autodoc / autosummary / numpydoc ------------------------------------------------------------

# The stub pages under api/generated/ are git-ignored and written afresh by every build, from the
# autosummary tables in the module docstrings (``.. automodule:: numtk.stats`` in api/stats.rst).
# Clearing them first keeps a renamed or removed function from leaving a stale page behind.
shutil.rmtree(Path(__file__).parent / "api" / "generated", ignore_errors=True)
autosummary_generate = True
autosummary_generate_overwrite = True
autodoc_typehints = "none"          # the numpydoc Parameters section already gives the types

numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_use_plots = False
numpydoc_xref_param_type = False

# -- intersphinx (off by default: no network at build time) --------------------------------------

if os.environ.get("NUMTK_DOCS_INTERSPHINX", "") not in ("", "0"):
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
    }

# -- doctest (`sphinx-build -b doctest docs docs/_build/doctest`) --------------------------------

doctest_global_setup = """
import numpy as np
"""

# -- HTML ----------------------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"numtk {release}"
html_static_path: list[str] = []
html_theme_options = {
    "github_url": "https://github.com/numtk/numtk",
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_context = {"default_mode": "auto"}
html_show_sourcelink = False
