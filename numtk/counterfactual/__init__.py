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

Metrics and groups
------------------

.. autosummary::
   :toctree: generated/

   validity          -- fraction of counterfactuals that reach the target class.
   transport_cost    -- mean (or total, squared) displacement of the counterfactuals.
   distortion_ratios -- smallest and largest pairwise distance ratio (geometry preservation).
   make_groups       -- groups of members by clustering each class, as in the paper's protocol.
"""

from numtk.counterfactual._common import InfeasibleRecourseError
from numtk.counterfactual._group_map import GroupCounterfactualMap
from numtk.counterfactual._groups import make_groups
from numtk.counterfactual._metrics import distortion_ratios, transport_cost, validity

__all__ = [
    "GroupCounterfactualMap",
    "InfeasibleRecourseError",
    "validity",
    "transport_cost",
    "distortion_ratios",
    "make_groups",
]
