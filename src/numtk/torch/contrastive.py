"""
Contrastive identifiability and the support-corrected InfoNCE (:mod:`numtk.torch.contrastive`)
==============================================================================================

.. currentmodule:: numtk.torch.contrastive

(Module in progress.)
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._contrastive import cap_support_mask, info_nce, support_corrected_info_nce

__all__ = ["info_nce", "support_corrected_info_nce", "cap_support_mask"]
