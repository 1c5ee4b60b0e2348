"""
Rank statistics (:mod:`numtk.stats`)
====================================

.. currentmodule:: numtk.stats

Kendall's tau, the Kendall distance and confidence intervals for tau, on a compiled O(n log n)
core. :func:`kendall_tau` is a drop-in for :func:`scipy.stats.kendalltau` (identical numbers).

Correlation and distance
------------------------

.. autosummary::
   :toctree: generated/

   kendall_tau          -- Kendall's tau-b / tau-c with SciPy's p-values.
   kendall_distance     -- number of discordant pairs (exact int), optional Fagin penalty.

Confidence intervals
--------------------

.. autosummary::
   :toctree: generated/

   kendall_tau_interval -- Hoeffding, empirical-Bernstein and asymptotic intervals for tau.

Warnings
--------

.. autosummary::
   :toctree: generated/

   SmallSampleWarning   -- too few observations; the result is NaN.
"""

from numtk._lib._warnings import SmallSampleWarning
from numtk.stats._kendall import kendall_distance, kendall_tau
from numtk.stats._kendall_interval import kendall_tau_interval

__all__ = ["kendall_tau", "kendall_distance", "kendall_tau_interval", "SmallSampleWarning"]
