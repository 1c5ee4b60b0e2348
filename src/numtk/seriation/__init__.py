"""
Seriation (:mod:`numtk.seriation`)
==================================

.. currentmodule:: numtk.seriation

Ordering points sampled near an unknown curve by their position along it. STAGE's heavy steps are
compiled (batched local PCA, the sign synchronisation, the signed increments, the Laplacian products
and the preconditioned conjugate-gradient solve); the neighbour search is scikit-learn's.

Methods
-------

.. autosummary::
   :toctree: generated/

   stage                -- STAGE: tangent synchronisation and a Laplacian solve.
   spectral_seriation   -- Fiedler-vector ordering of a similarity graph (Atkins et al.).
   recanati_seriation   -- spectral ordering with a multidimensional embedding (Recanati et al.).
   ltsa_seriation       -- 1-D local tangent space alignment (scikit-learn).
   tsne_seriation       -- 1-D t-SNE (scikit-learn).
   umap_seriation       -- 1-D UMAP (optional: umap-learn).

Guarantees
----------

.. autosummary::
   :toctree: generated/

   recovery_bound       -- a finite-sample lower bound on the expected Kendall agreement (derived here).
   short_circuits       -- graph edges a STAGE embedding stretches (arms short-circuited).

Data and scores
---------------

.. autosummary::
   :toctree: generated/

   make_curve           -- points near a known curve (line, arc, helix, spiral, nested arcs, random Fourier).
   noise_floor          -- the agreement of the nearest-point projection on the known curve.
   order_agreement      -- Kendall agreement of an order with the truth, up to reversal.
"""

from numtk.seriation._agreement import order_agreement
from numtk.seriation._baselines import recanati_seriation, spectral_seriation
from numtk.seriation._bound import recovery_bound
from numtk.seriation._manifold import ltsa_seriation, tsne_seriation, umap_seriation
from numtk.seriation._curves import make_curve, noise_floor
from numtk.seriation._diagnostics import short_circuits
from numtk.seriation._stage import stage

__all__ = ["stage", "spectral_seriation", "recanati_seriation", "ltsa_seriation", "tsne_seriation",
           "umap_seriation", "recovery_bound", "make_curve", "noise_floor", "order_agreement",
           "short_circuits"]
