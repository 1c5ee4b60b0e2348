"""
Options-based hierarchical RL for the algebraic Hirsch problem (:mod:`numtk.torch.hirsch`)
==========================================================================================

.. currentmodule:: numtk.torch.hirsch

Kalai's algebraic Hirsch conjecture: a squarefree monomial ideal generated in degree d with a linear resolution
has a generator graph of diameter at most d. Butbaia, Orland, ..., Dao, Eisenbud, Shehper, Gukov (arXiv
2606.22922) search for counterexamples with reinforcement learning: the state is a set of d-subsets of [n], the
reward is sparse (a linear ideal of diameter > d), and a constrained options-based hierarchical agent (grow a
"spine", an induced path of the generator graph, then complete it to a linear ideal) with an equivariant GNN
policy beats flat RL and greedy search. The mathematical objects are verified (they are :mod:`numtk.algebra`,
re-exported here); the agent's details are reconstructed from the paper's outline (see the tutorial).

Subsets of [n] = {0, ..., n-1} are int bitmasks; the environment's actions index the C(n, d) candidates in
``itertools.combinations`` order (:func:`candidate_subsets`). Importing this module imports torch and
gymnasium (``pip install "numtk[rl]"``).

Environment and agents
----------------------

.. autosummary::
   :toctree: generated/

   HirschEnv             -- the gymnasium.Env: add/remove a generator or stop, masks, sparse or shaped reward.
   EquivariantGNNPolicy  -- variable/generator message passing (incidence and syzygy edges), S_n-equivariant.
   OptionsAgent          -- the hierarchical agent: a spine option, a completion option, PPO, a high-level policy.
   FlatAgent             -- the flat baseline: PPO on primitive actions with the same GNN.
   greedy_search         -- the greedy baseline: linear-quotient extensions that maximise the diameter.
   candidate_subsets     -- the C(n, d) candidate generators in action order.
   subset_index          -- a candidate's position (its add action).
   is_induced_path       -- whether generators form an induced path of the generator graph (a spine).
   demo                  -- options agent vs flat RL vs greedy on n = 7, d = 3.

The exact mathematics (from :mod:`numtk.algebra`)
-------------------------------------------------

.. autosummary::

   generator_graph        -- the adjacency of the generator graph: S ~ T when they share d - 1 elements.
   dual_graph_diameter    -- its diameter (math.inf when disconnected).
   has_linear_quotients   -- the sufficient condition for a given order.
   linear_quotient_order  -- a greedy search for a linear-quotients order.
   has_linear_resolution  -- Eagon-Reiner + Reisner, exact over Q or GF(2).
   random_generators      -- random generator sets, optionally rejection-sampled until linear.
   squarefree_veronese    -- all d-subsets (the Johnson graph J(n, d)).
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.algebra import (dual_graph_diameter, generator_graph, has_linear_quotients, has_linear_resolution,
                           linear_quotient_order, random_generators, squarefree_veronese)
from numtk.torch._demo_hirsch import demo
from numtk.torch._hirsch import (EquivariantGNNPolicy, FlatAgent, HirschEnv, OptionsAgent, candidate_subsets,
                                 greedy_search, is_induced_path, subset_index)

__all__ = ["HirschEnv", "EquivariantGNNPolicy", "OptionsAgent", "FlatAgent", "greedy_search",
           "candidate_subsets", "subset_index", "is_induced_path", "demo", "generator_graph", "dual_graph_diameter",
           "has_linear_quotients", "linear_quotient_order", "has_linear_resolution", "random_generators",
           "squarefree_veronese"]
