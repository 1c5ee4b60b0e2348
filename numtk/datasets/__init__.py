"""
Datasets (:mod:`numtk.datasets`)
================================

.. currentmodule:: numtk.datasets

Small data shipped with numtk, with their licences and citations (``data/LICENSES.md``). The
loaders read files inside the package: no network access, no optional dependency.

Simulated single-cell data
--------------------------

.. autosummary::
   :toctree: generated/

   load_krumsiek11   -- 640 simulated myeloid progenitors, 11 genes, 4 fates (Krumsiek et al. 2011).
   load_toggleswitch -- 200 cells of a simulated two-gene toggle switch (Gardner et al. 2000).
"""

from numtk.datasets._single_cell import load_krumsiek11, load_toggleswitch

__all__ = ["load_krumsiek11", "load_toggleswitch"]
