"""
Mixture-of-experts systems (:mod:`numtk.moe`)
=============================================

.. currentmodule:: numtk.moe

Least-loaded expert parallelism (LLEP; Nguyen et al., ICML 2026): per layer and per step, spill the routing
slots of overloaded experts, with a copy of their weights, to the least-loaded devices; its baselines
(standard expert parallelism, DeepSeek's EPLB), an exact MILP optimum, a latency and memory simulator, an
executor that carries a plan out, and synthetic routing-load generators.

Planning
--------

.. autosummary::
   :toctree: generated/

   llep_plan         -- the least-loaded assignment (compiled), with its imbalance gate and memory limit.
   standard_ep_plan  -- every expert's tokens on its native device.
   eplb_rebalance    -- DeepSeek's EPLB: replicas and their placement from historical loads.
   eplb_device_loads -- the GPU loads of current loads under an EPLB placement (even replica shares).
   optimal_plan      -- the exact optimum by a lexicographic MILP (HiGHS).

Simulation and execution
------------------------

.. autosummary::
   :toctree: generated/

   simulate_ep  -- per-device latency and peak memory of a plan under a cost model.
   moe_forward  -- an MoE layer computed by a plan's chunks on simulated devices (NumPy).
   routing_loads -- the routing-slot counts of top-k routing, per expert (and per source device).
   plan_layer   -- one layer of a plan, checked: its chunks, weight copies and expert loads.

Routing loads
-------------

.. autosummary::
   :toctree: generated/

   hot_expert_loads  -- a few hot experts take a given share of the routing slots.
   zipf_loads        -- multinomial loads with Zipf popularities.
   dirichlet_loads   -- multinomial loads with Dirichlet popularities, optionally drifting.

Merging and bf16 packing
------------------------

PuzzleMoE (Zhao, Wang and Zhang, ICML 2026): experts merged in pairs element by element, with masks and signs
stored in the spare exponent bits of bf16 words; the merging baselines and the error measure.

.. autosummary::
   :toctree: generated/

   puzzle_merge          -- one pair (or a batch of pairs) merged into a shared magnitude, two masks, two signs.
   merge_experts         -- the experts of a layer paired, merged and packed, with per-pair reports.
   pack_bf16             -- a merged pair as bf16 words: magnitude, both masks and both signs in 16 bits.
   unpack_bf16           -- the parts of packed words, or one expert's weights.
   packed_matvec         -- one expert of packed words times vectors, decoded on the fly (compiled).
   average_merge         -- the (weighted) average of experts.
   ties_merge            -- TIES-merging: trim, elect a sign, disjoint mean.
   dare_merge            -- DARE: random drop and rescale, then a linear or TIES combination.
   reconstruction_error  -- the relative error of merged weights, or of a layer's outputs.
"""

# Each room adds its public names here as it lands.
from numtk.moe._llep import llep_plan, standard_ep_plan
from numtk.moe._llep_milp import optimal_plan
from numtk.moe._eplb import eplb_rebalance, eplb_device_loads
from numtk.moe._loads import hot_expert_loads, zipf_loads, dirichlet_loads
from numtk.moe._simulate import simulate_ep
from numtk.moe._executor import moe_forward, routing_loads
from numtk.moe._plan import plan_layer
from numtk.moe._puzzle import puzzle_merge, merge_experts, average_merge, ties_merge, dare_merge, reconstruction_error
from numtk.moe._bf16 import pack_bf16, unpack_bf16, packed_matvec

__all__: list[str] = ["llep_plan", "standard_ep_plan", "optimal_plan", "eplb_rebalance", "eplb_device_loads",
                      "hot_expert_loads", "zipf_loads", "dirichlet_loads",
                      "simulate_ep", "moe_forward", "plan_layer", "routing_loads",
                      "puzzle_merge", "merge_experts", "average_merge", "ties_merge", "dare_merge",
                      "reconstruction_error", "pack_bf16", "unpack_bf16", "packed_matvec"]
