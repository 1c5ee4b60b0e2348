"""
Seriation (:mod:`numtk.seriation`)
==================================

.. currentmodule:: numtk.seriation

Ordering points sampled near an unknown curve by their position along it. Work in progress: STAGE
runs on NumPy/SciPy/scikit-learn for now (the compiled kernels, the remaining baselines and the
recovery bound are still to come).

Methods
-------

.. autosummary::
   :toctree: generated/

   stage                -- STAGE: tangent synchronisation and a Laplacian solve.
   spectral_seriation   -- Fiedler-vector ordering of a similarity graph (Atkins et al.).
   recanati_seriation   -- spectral ordering with a multidimensional embedding (Recanati et al.).

Data and scores
---------------

.. autosummary::
   :toctree: generated/

   make_curve           -- points near a known curve (line, arc, helix, spiral, random Fourier).
   order_agreement      -- Kendall agreement of an order with the truth, up to reversal.
"""

from numtk.seriation._agreement import order_agreement
from numtk.seriation._baselines import recanati_seriation, spectral_seriation
from numtk.seriation._curves import make_curve
from numtk.seriation._stage import stage

__all__ = ["stage", "spectral_seriation", "recanati_seriation", "make_curve", "order_agreement"]
