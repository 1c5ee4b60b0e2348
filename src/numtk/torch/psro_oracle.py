"""
Deep-RL best-response oracles for PSRO (:mod:`numtk.torch.psro_oracle`)
=======================================================================

.. currentmodule:: numtk.torch.psro_oracle

Global PSRO (Wang, Yang, Wang, Zhang, Zhang, "Global Policy-Space Response Oracles for Two-Player Zero-Sum Games",
ICML 2026, arXiv 2605.28273; code Zhangjy1997/GlobalPSRO, MIT) expands a PSRO population by minimising the
Population Exploitability directly. :func:`numtk.games.psro` runs it with exact best responses; this module supplies
the deep-RL oracles of the paper, callables of the driver's oracle protocol
``oracle(game, population, targets, *, rng) -> list[policy]``, so the same driver runs with learned responses
(verified against the authors' code: realization-weighted opponents, seats drawn per episode, deterministic
tabularised members, the conditional network pi(a | o, sigma) with sigma zero-padded and ``simplex_eps`` = 0.8).

Opponents are pure members drawn per episode with the mixture's weights (realization-equivalent to the mixture,
never a per-infoset behavioural mix), the learner's seat is drawn per episode, and the trained network is read back
as a deterministic tabular policy in numtk.games' format (the argmax over the legal actions at every infoset), so
:func:`numtk.games.exploitability` and the PE linear programs evaluate it exactly. Exploitability is NashConv / 2
throughout, as in numtk.games and OpenSpiel.

Episodes run on a vectorised chain built from the game's sequence form (:class:`RolloutEnv`), a few million
environment steps a second on one core for Kuhn and Leduc poker.

Importing this module imports torch (``pip install "numtk[torch]"``).

.. autosummary::
   :toctree: generated/

   RLBestResponseOracle  -- PPO best responses to target mixtures, one network per target (parallel over workers).
   ConditionalBROracle   -- Global PSRO's exploration oracle: one network pi(a | o, sigma) for all candidates.
   RolloutEnv            -- vectorised episodes of a numtk.games game on its sequence-pair chain.
   demo                  -- Kuhn poker: PSRO-Nash and Global PSRO with exact and with RL oracles, exact PE.
   ALGORITHMS            -- the policy-optimisation algorithms: 'ppo', 'pg'.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_psro_oracle import demo
from numtk.torch._psro_oracle import ALGORITHMS, ConditionalBROracle, RLBestResponseOracle, RolloutEnv

__all__ = ["RLBestResponseOracle", "ConditionalBROracle", "RolloutEnv", "demo", "ALGORITHMS"]
