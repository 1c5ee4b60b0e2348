"""
Group counterfactual maps (:mod:`numtk.counterfactual`)
=======================================================

.. currentmodule:: numtk.counterfactual

Counterfactual explanations for binary linear classifiers: what change moves a rejected applicant
(or a whole group of them) to the accepted class at minimal cost? :class:`GroupCounterfactualMap`
fits one explicit affine map T for a group (Valero-Leal et al., ICML 2026) that sends every member,
and new members, to the target class with bounded distortion of distances; the per-point baselines
move each point separately.

Group maps
----------

.. autosummary::
   :toctree: generated/

   GroupCounterfactualMap -- one affine map (translation, diagonal, psd, gaussian_ot) for a group.
   InfeasibleRecourseError -- no counterfactual within ``immutable`` and ``bounds``.

Per-point baselines
-------------------

.. autosummary::
   :toctree: generated/

   wachter_counterfactuals             -- the per-point optimum: projection onto the target half-space.
   lipschitz_counterfactuals           -- per-point counterfactuals with Lipschitz pair bounds (SOCP).
   distance_preserving_counterfactuals -- two-sided pair bounds (non-convex QCQP): local solve and gap.

Metrics and groups
------------------

.. autosummary::
   :toctree: generated/

   validity          -- fraction of counterfactuals that reach the target class.
   transport_cost    -- mean (or total, squared) displacement of the counterfactuals.
   distortion_ratios -- smallest and largest pairwise distance ratio (geometry preservation).
   make_groups       -- groups of members by clustering each class, as in the paper's protocol.

The paper's protocol
--------------------

.. autosummary::
   :toctree: generated/

   evaluate_group_maps -- cross-validated group maps and per-point baselines on one group (step 5).
   protocol_split      -- z-score, shuffle and split into a group part and a training part.
   synthetic_2d        -- the paper's two-feature synthetic data.
   protocol_problems   -- the datasets, classifiers, groups and settings the demonstration runs.
"""

from numtk.counterfactual._baselines import lipschitz_counterfactuals, wachter_counterfactuals
from numtk.counterfactual._common import InfeasibleRecourseError
from numtk.counterfactual._distance_preserving import distance_preserving_counterfactuals
from numtk.counterfactual._group_map import GroupCounterfactualMap
from numtk.counterfactual._groups import make_groups
from numtk.counterfactual._metrics import distortion_ratios, transport_cost, validity
from numtk.counterfactual._protocol import evaluate_group_maps, protocol_problems, protocol_split, synthetic_2d

__all__ = [
    "GroupCounterfactualMap",
    "InfeasibleRecourseError",
    "wachter_counterfactuals",
    "lipschitz_counterfactuals",
    "distance_preserving_counterfactuals",
    "validity",
    "transport_cost",
    "distortion_ratios",
    "make_groups",
    "evaluate_group_maps",
    "protocol_split",
    "synthetic_2d",
    "protocol_problems",
]
