"""
Data-mixture laws (:mod:`numtk.mixture`)
========================================

.. currentmodule:: numtk.mixture

CAMEL (Li, Gu and Zhang, ICML 2026): a capacity-aware mixture law that predicts the validation losses of a
language model from its size and its training-data mixture, so that the mixture of a large target model can be
chosen from cheap proxy runs; a law from losses to benchmark scores; and the split of a compute budget across
proxy sizes that makes the prediction at the target most precise. CAMEL's exact forms were not published with
code: numtk's ``'camel'`` law, its benchmark law and its allocation are reconstructions (each docstring says
what is reconstructed), beside the prior laws they are compared with (Chinchilla, Data Mixing Laws, the
capacity-KKT law), which are implemented exactly.

Laws
----

.. autosummary::
   :toctree: generated/

   MixtureLaw          -- losses from model size and mixture: 'camel', 'separable', 'additive', 'data_mixing', 'capacity_kkt'.
   LossToBenchmarkLaw  -- benchmark scores from validation losses (sigmoid, OLMo's log-sigmoid).
   chinchilla_fit      -- L(N, D) = E + A N^-alpha + B D^-beta, Huber on log residuals (Hoffmann et al.).
   mixture_features    -- the design matrix ``X`` the laws read, from sizes, mixtures and tokens (broadcast).

Decisions
---------

.. autosummary::
   :toctree: generated/

   optimal_mixture  -- the mixture that minimises a fitted law's loss (or maximises benchmarks) at a size.
   allocate_budget  -- proxy runs per size and mixture that make the target prediction most precise.

Planted worlds
--------------

.. autosummary::
   :toctree: generated/

   planted_law    -- a capacity-aware law whose best mixture moves with model size.
   simulate_runs  -- proxy runs of a law with log-normal noise: ``X``, losses.
"""

from numtk.mixture._mixture_law import MixtureLaw, mixture_features
from numtk.mixture._benchmark_law import LossToBenchmarkLaw
from numtk.mixture._chinchilla import chinchilla_fit
from numtk.mixture._optimal_mixture import optimal_mixture
from numtk.mixture._allocation import allocate_budget
from numtk.mixture._simulate import planted_law, simulate_runs

__all__ = ["MixtureLaw", "mixture_features", "LossToBenchmarkLaw", "chinchilla_fit", "optimal_mixture",
           "allocate_budget", "planted_law", "simulate_runs"]
