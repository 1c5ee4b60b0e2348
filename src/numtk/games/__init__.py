"""
Games (:mod:`numtk.games`)
==========================

.. currentmodule:: numtk.games

Exact solvers for two-player zero-sum games: Nash equilibria, exploitability, Population
Exploitability and the PSRO family, Global PSRO included (Wang et al., ICML 2026).

Conventions: two players, 0 (the row player and first mover) and 1; values are player 0's.
``NashConv(pi) = sum_i [max_{pi_i'} u_i(pi_i', pi_-i) - u_i(pi)]`` and
``exploitability = NashConv / 2`` (OpenSpiel's convention, the one the Global PSRO paper reports).
Mixtures of extensive-form policies mix realization plans (a mixed strategy), never behaviour
probabilities per infoset.

Games
-----

.. autosummary::
   :toctree: generated/

   MatrixGame            -- a two-player normal-form game.
   rock_paper_scissors   -- RPS, optionally biased.
   random_game_of_skill  -- transitive skill plus a random cyclic part.
   disc_game             -- the rank-2 cyclic disc game.
   elo_game              -- a transitive Elo game, optionally noisy.
   colonel_blotto        -- Colonel Blotto with lexicographically ordered allocations.
   KuhnPoker             -- Kuhn poker, exact sequence form.
   LeducPoker            -- Leduc poker, exact sequence form.
   Goofspiel             -- Goofspiel(n) with random prize order, exact sequence form.

Evaluation
----------

.. autosummary::
   :toctree: generated/

   expected_payoff            -- both players' expected payoffs.
   best_response              -- a pure best response (compiled backward induction).
   nash_conv                  -- the sum of the players' best-response gains.
   exploitability             -- NashConv / 2.
   population_exploitability  -- the least exploitability of a population's mixtures, by one LP.

Solvers
-------

.. autosummary::
   :toctree: generated/

   nash_equilibrium  -- LP (HiGHS), RM+, CFR+ or double oracle.
   meta_strategy     -- the PSRO meta-solvers: Nash, uniform, PRD, alpha-rank, RM+.
   psro              -- PSRO, PSRO-rN, pipeline, anytime, PSD and Global PSRO with exact oracles.
"""

from numtk.games._efg import Goofspiel, KuhnPoker, LeducPoker
from numtk.games._exploitability import best_response, expected_payoff, exploitability, nash_conv
from numtk.games._matrix_games import (MatrixGame, colonel_blotto, disc_game, elo_game, random_game_of_skill,
                                       rock_paper_scissors)
from numtk.games._meta_solvers import meta_strategy
from numtk.games._nash_equilibrium import nash_equilibrium
from numtk.games._population_exploitability import population_exploitability
from numtk.games._psro import psro

__all__ = ["MatrixGame", "rock_paper_scissors", "random_game_of_skill", "disc_game", "elo_game", "colonel_blotto",
           "KuhnPoker", "LeducPoker", "Goofspiel", "expected_payoff", "best_response", "nash_conv",
           "exploitability", "population_exploitability", "nash_equilibrium", "meta_strategy", "psro"]
