"""
Score-based sampling of unnormalised densities (:mod:`numtk.sampling`)
======================================================================

.. currentmodule:: numtk.sampling

Hand numtk an unnormalised log-density and get samples and a log-normalising-constant estimate: the
log-density of the Ornstein-Uhlenbeck-noised target solves a backward HJB equation, solved here by BSDE
regression with one functional tensor train per time step (:mod:`numtk.ftt`), or, for targets whose
density has a low-rank Hermite expansion, exactly by the Cole-Hopf/OU propagation. The fitted value
function drives the generative SDE; path importance weights give log Z, unbiased in Z whatever the
fit's errors (ICML 2026, "Leveraging Low-Rank Structures for High-Dimensional Score-Based Sampling").

Targets
-------

.. autosummary::
   :toctree: generated/

   Target            -- an unnormalised density, with exact log Z, samples and noised densities where known.
   as_target         -- a Target from a Target or a vectorised log-density callable.
   gaussian          -- a Gaussian N(mean, cov), unnormalised.
   gaussian_mixture  -- a Gaussian mixture; presets '25gmm', '9gmm', 'gmm40'.
   funnel            -- Neal's funnel.
   many_well         -- the many-well benchmark (products of quartic double wells and Gaussians).
   double_well       -- double wells in m of d coordinates.
   transform_target  -- a target in the coordinates of a bijection x = T(u) (same log Z).
   Transform         -- base class of coordinate-wise bijections.
   SinhTransform     -- x = loc + width sinh(u): for scales spanning orders of magnitude.
   ExpTransform      -- x = exp(u): for positive coordinates.

Solvers and sampler
-------------------

.. autosummary::
   :toctree: generated/

   solve_hjb          -- the backward HJB/BSDE solve (or the exact Hermite path).
   value_function     -- a step's value function in the original coordinates.
   time_grid          -- the graded time grid.
   ScoreBasedSampler  -- fit, sample, log Z with standard error, ESS.
   HermiteOUSolution  -- the exact Cole-Hopf/OU propagation in a Hermite tensor train.
   hermite_solution   -- build it from a target's Hermite coefficients.

Metrics
-------

.. autosummary::
   :toctree: generated/

   log_Z_error        -- absolute error of a log Z estimate.
   w2                 -- exact 2-Wasserstein distance between equal-size samples.
   sinkhorn_distance  -- (debiased) log-domain Sinkhorn divergence.
   mmd                -- squared maximum mean discrepancy.
"""

from numtk.sampling._funnel import funnel
from numtk.sampling._gaussian_mixture import gaussian, gaussian_mixture
from numtk.sampling._hermite_ou import HermiteOUSolution, hermite_solution
from numtk.sampling._hjb_bsde import solve_hjb, time_grid
from numtk.sampling._metrics import log_Z_error, mmd, sinkhorn_distance, w2
from numtk.sampling._product_targets import double_well, many_well
from numtk.sampling._sampler import ScoreBasedSampler
from numtk.sampling._target import Target, as_target
from numtk.sampling._transforms import ExpTransform, SinhTransform, Transform, transform_target
from numtk.sampling._value_function import value_function

__all__ = [
    "Target", "as_target", "gaussian", "gaussian_mixture", "funnel", "many_well", "double_well",
    "Transform", "SinhTransform", "ExpTransform", "transform_target",
    "solve_hjb", "time_grid", "value_function", "ScoreBasedSampler", "HermiteOUSolution", "hermite_solution",
    "log_Z_error", "w2", "sinkhorn_distance", "mmd",
]
