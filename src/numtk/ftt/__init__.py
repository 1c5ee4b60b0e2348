"""
Functional tensor trains (:mod:`numtk.ftt`)
===========================================

.. currentmodule:: numtk.ftt

A function of d variables stored as a product of matrix-valued univariate functions,
``f(x) = G_1(x_1) G_2(x_2) ... G_d(x_d)``, each expanded in a univariate basis (orthonormal Legendre,
orthonormal Hermite or cubic B-splines). :class:`FunctionalTT`, a scikit-learn regressor, fits the
coefficient cores to scattered data by alternating least squares with rank adaptation (from the
least-squares additive model) and evaluates values, gradients and Laplacians in one compiled pass; it
also integrates, rounds (TT-SVD) and adds trains. It is the ansatz space of
the HJB/BSDE score-based sampler (ICML 2026, "Leveraging Low-Rank Structures for High-Dimensional
Score-Based Sampling").

Estimator
---------

.. autosummary::
   :toctree: generated/

   FunctionalTT -- low-rank regression, derivatives, integrals and rounding in the FTT format.

Cross interpolation
-------------------

.. autosummary::
   :toctree: generated/

   tt_cross -- a FunctionalTT from function evaluations on a node grid (maxvol cross), in a Result.
   interpolation_nodes -- the nodes a univariate basis interpolates at.
"""

from numtk.ftt._cross import interpolation_nodes, tt_cross
from numtk.ftt._functional_tt import FunctionalTT

__all__ = ["FunctionalTT", "interpolation_nodes", "tt_cross"]
