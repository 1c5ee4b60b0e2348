"""
Least-loaded expert parallelism under torch.distributed (:mod:`numtk.torch.llep`)
=================================================================================

.. currentmodule:: numtk.torch.llep

An MoE layer of SwiGLU experts run across the ranks of a process group by an expert-parallel plan of
:mod:`numtk.moe` (:func:`numtk.moe.llep_plan`, :func:`numtk.moe.standard_ep_plan`,
:func:`numtk.moe.optimal_plan`): each rank holds its tokens and its native experts' weights; tokens move by
all-to-all, the weights of spilled experts point to point, and the gradients of foreign-computed chunks
return to each expert's native rank (Nguyen et al., "Least-Loaded Expert Parallelism", ICML 2026). Tested
with the gloo backend on CPU processes of one machine; NCCL runs the same code untested.

Importing this module imports torch (``pip install "numtk[torch]"``).

Layer
-----

.. autosummary::
   :toctree: generated/

   llep_moe_forward  -- the MoE layer across the ranks, computed by a plan's chunks (differentiable).

Running and timing
------------------

.. autosummary::
   :toctree: generated/

   run_distributed  -- run a function on P spawned processes joined by a process group.
   benchmark_llep   -- wall-clock of LLEP against standard EP under hot-expert routing.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._distributed import run_distributed
from numtk.torch._llep import benchmark_llep, llep_moe_forward

__all__ = ["llep_moe_forward", "run_distributed", "benchmark_llep"]
