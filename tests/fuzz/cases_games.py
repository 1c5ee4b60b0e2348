"""Fuzz cases of numtk.games (see _harness.py for the catalogue and the outcomes).

Games are small (rock-paper-scissors, Kuhn poker, Goofspiel(3), 3 x 3 or 6 x 3 matrices) and the
iterative methods run few iterations, so that every call takes well under a second. ``game`` is
declared with the 'option' category: its catalogue values ('no-such-option', 3, None) are all
objects that are not games.
"""

import numpy as np

from _harness import Case


def _g():
    import numtk.games as g
    return g


def _rps():
    return _g().rock_paper_scissors(bias=(0.5, 0.25, 0.05))


def _payoff63():
    return np.arange(18.0).reshape(6, 3) - 8.0


# --- games ----------------------------------------------------------------------------------------
def _matrix_game():
    return _g().MatrixGame, (_payoff63(),), {"payoff_col": -_payoff63() + 1.0}


def _rps_make():
    return _g().rock_paper_scissors, (), {"bias": (0.5, 0.25, 0.05)}


def _skill():
    return _g().random_game_of_skill, (5,), {"rng": 0}


def _disc():
    return _g().disc_game, (5,), {"rng": 0}


def _elo():
    return _g().elo_game, (5,), {"rng": 0, "noise": 0.1}


def _blotto():
    return _g().colonel_blotto, (3, 3), {}


def _goofspiel():
    return _g().Goofspiel, (3,), {}


def _kuhn_random_policy():
    return _g().KuhnPoker().random_policy, (), {"rng": 0, "deterministic": False}


def _leduc_random_policy():
    return _g().LeducPoker().random_policy, (), {"rng": 0, "deterministic": True}


def _kuhn_check_policy():
    game = _g().KuhnPoker()
    return game.check_policy, (game.uniform_policy(),), {}


def _kuhn_policy_to_sequence():
    game = _g().KuhnPoker()
    return game.policy_to_sequence, (game.uniform_policy(),), {}


def _kuhn_sequence_to_policy():
    game = _g().KuhnPoker()
    r0, r1 = game.policy_to_sequence(game.uniform_policy())
    return game.sequence_to_policy, (r0, r1), {}


# --- evaluation -----------------------------------------------------------------------------------
def _eval_matrix(fname):
    def make():
        return getattr(_g(), fname), (_rps(), np.full(3, 1.0 / 3)), {}
    return make


def _eval_kuhn(fname):
    def make():
        game = _g().KuhnPoker()
        return getattr(_g(), fname), (game, game.uniform_policy()), {}
    return make


def _br_matrix():
    return _g().best_response, (_rps(), np.full(3, 1.0 / 3), 0), {}


def _br_kuhn():
    game = _g().KuhnPoker()
    return _g().best_response, (game, game.uniform_policy(), 1), {}


def _pe_lp():
    return _g().population_exploitability, (_rps(), np.array([0, 1])), {}


def _pe_do():
    game = _g().KuhnPoker()
    pop = np.stack([game.uniform_policy(), game.random_policy(rng=0, deterministic=True)])
    return _g().population_exploitability, (game, pop), {"method": "double_oracle", "tol": 1e-6, "max_iter": 50}


# --- solvers --------------------------------------------------------------------------------------
def _nash(method, game="rps", **kw):
    def make():
        g = _rps() if game == "rps" else _g().KuhnPoker()
        return _g().nash_equilibrium, (g,), {"method": method, **kw}
    return make


def _meta(method, G=None, **kw):
    def make():
        M = _rps().payoffs[0] if G is None else G
        return _g().meta_strategy, (M,), {"method": method, **kw}
    return make



def _psro(game="rps", **kw):
    def make():
        g = _rps() if game == "rps" else (_g().KuhnPoker() if game == "kuhn" else _g().Goofspiel(3))
        return _g().psro, (g,), {"iterations": 3, "rng": 0, **kw}
    return make


def _uniform_solver(G):
    """Uniform, shaped for the populations meta_strategy decides from G (shared iff antisymmetric)."""
    x, y = np.full(G.shape[0], 1.0 / G.shape[0]), np.full(G.shape[1], 1.0 / G.shape[1])
    shared = G.shape[0] == G.shape[1] and np.max(np.abs(G + G.T)) <= 1e-12 * max(1.0, np.max(np.abs(G)))
    return x if shared else (x, y)


_GAME = {"game": "option"}
_NASH_KW = {"method": "option", "tol": "real>=0", "max_iter": "int>=1", "rng": "rng", "callback": "callable",
            "options": "option"}
_PSRO_KW = {"variant": "option", "meta_solver": ("option", "callable"), "oracle": ("option", "callable"),
            "iterations": "int>=0", "n_candidates": "int>=0", "rng": "rng", "progress": "bool", "callback": "callable",
            "workers": "workers", "convention": "option", "populations": "option", "options": "option"}
_NO_OPTIONS = {"options": ("None",)}  # options=None is the documented default (no options)

CASES = {c.name: c for c in [
    # --- games
    Case("numtk.games.MatrixGame", _matrix_game, {"payoff_row": "array2d", "payoff_col": "array2d",
                                                  "labels": "option"},
         positional={"payoff_row": 0}, skip={"labels": ("None",)}),  # labels=None: the documented default
    Case("numtk.games.MatrixGame[zero_sum]", lambda: (_g().MatrixGame, (_payoff63(),), {}),
         {"payoff_row": "array2d"}, positional={"payoff_row": 0}),
    Case("numtk.games.rock_paper_scissors", _rps_make, {"bias": "array1d"}),
    Case("numtk.games.random_game_of_skill", _skill, {"n": "count", "rng": "rng"}, positional={"n": 0}),
    Case("numtk.games.disc_game", _disc, {"n": "count", "rng": "rng"}, positional={"n": 0}),
    Case("numtk.games.elo_game", _elo, {"n": "count", "rng": "rng", "noise": "real>=0"}, positional={"n": 0}),
    Case("numtk.games.colonel_blotto", _blotto, {"coins": "count", "fields": "int>=2"},
         positional={"coins": 0, "fields": 1}),
    Case("numtk.games.Goofspiel", _goofspiel, {"n_cards": "int>=2"}, positional={"n_cards": 0}),
    Case("numtk.games.KuhnPoker.random_policy", _kuhn_random_policy, {"rng": "rng", "deterministic": "bool"}),
    Case("numtk.games.LeducPoker.random_policy", _leduc_random_policy, {"rng": "rng", "deterministic": "bool"}),
    Case("numtk.games.KuhnPoker.check_policy", _kuhn_check_policy, {"policy": "array2d"}, positional={"policy": 0}),
    Case("numtk.games.KuhnPoker.policy_to_sequence", _kuhn_policy_to_sequence, {"policy": "array2d"},
         positional={"policy": 0}),
    Case("numtk.games.KuhnPoker.sequence_to_policy", _kuhn_sequence_to_policy, {"r0": "array1d", "r1": "array1d"},
         positional={"r0": 0, "r1": 1}),
    # --- evaluation
    *[Case(f"numtk.games.{f}[matrix]", _eval_matrix(f), {**_GAME, "policies" if f == "expected_payoff" else "policy":
                                                         "array1d"},
           positional={"game": 0, "policies" if f == "expected_payoff" else "policy": 1})
      for f in ("expected_payoff", "nash_conv", "exploitability")],
    *[Case(f"numtk.games.{f}[kuhn]", _eval_kuhn(f), {**_GAME, "policies" if f == "expected_payoff" else "policy":
                                                     "array2d"},
           positional={"game": 0, "policies" if f == "expected_payoff" else "policy": 1})
      for f in ("expected_payoff", "nash_conv", "exploitability")],
    Case("numtk.games.best_response[matrix]", _br_matrix, {**_GAME, "policy": "array1d", "player": "int>=0"},
         positional={"game": 0, "policy": 1, "player": 2}),
    Case("numtk.games.best_response[kuhn]", _br_kuhn, {**_GAME, "policy": "array2d", "player": "int>=0"},
         positional={"game": 0, "policy": 1, "player": 2}),
    Case("numtk.games.population_exploitability", _pe_lp,
         {**_GAME, "population": ("array1d", "array2d"), "populations": "option", "method": "option",
          "convention": "option", "tol": "real>=0", "max_iter": "int>=1", "options": "option",
          "options.highs_method": "option"},
         positional={"game": 0, "population": 1},
         # np.ones(6), refused as a 2-D stack, is a valid 1-D population: six copies of strategy 1 (ids given as
         # floats with integral values are accepted)
         skip={"population": ("np.ones(6)",), **_NO_OPTIONS}),
    Case("numtk.games.population_exploitability[double_oracle]", _pe_do,
         {"population": "array2d", "tol": "real>=0", "max_iter": "int>=1"}, positional={"population": 1}),
    # --- solvers
    Case("numtk.games.nash_equilibrium[lp]", _nash("lp"), {**_GAME, **_NASH_KW, "options.highs_method": "option"},
         positional={"game": 0}, skip=_NO_OPTIONS),
    Case("numtk.games.nash_equilibrium[rm+]", _nash("rm+", max_iter=200),
         {**_NASH_KW, "options.predictive": "bool", "options.check_every": "count", "options.x0": "array1d",
          "options.y0": "array1d"}, skip=_NO_OPTIONS),
    Case("numtk.games.nash_equilibrium[cfr+]", _nash("cfr+", game="kuhn", max_iter=50),
         {**_NASH_KW, "options.delay": "int>=0", "options.check_every": "count"}, skip=_NO_OPTIONS),
    Case("numtk.games.nash_equilibrium[double_oracle]", _nash("double_oracle", game="kuhn"),
         {**_NASH_KW, "options.highs_method": "option"}, skip=_NO_OPTIONS),
    Case("numtk.games.meta_strategy[nash]", _meta("nash"),
         {"meta_game": "array2d", "method": ("option", "callable"), "populations": "option", "rng": "rng",
          "options": "option"},
         positional={"meta_game": 0},
         # populations=None is the documented default: decide shared/per-player from the meta-game; options=None
         # is the documented default (no options)
         skip={"populations": ("None",), "options": ("None",)}),
    Case("numtk.games.meta_strategy[per_player]", _meta("nash", G=_payoff63()),
         {"meta_game": "array2d"}, positional={"meta_game": 0}),
    Case("numtk.games.meta_strategy[uniform]", _meta("uniform"), {"meta_game": "array2d", "rng": "rng"},
         positional={"meta_game": 0}),
    Case("numtk.games.meta_strategy[prd]", _meta("prd", options={"iterations": 100}),
         {"meta_game": "array2d", "rng": "rng", "options.iterations": "count", "options.dt": "real>0",
          "options.gamma": "real>=0"}, positional={"meta_game": 0}),
    Case("numtk.games.meta_strategy[alpha_rank]", _meta("alpha_rank"),
         {"meta_game": "array2d", "options.alpha": "real>=0", "options.m": "int>=2", "options.inf_alpha": "bool",
          "options.epsilon": "prob_open"}, positional={"meta_game": 0}),
    Case("numtk.games.meta_strategy[alpha_rank,per_player]", _meta("alpha_rank", G=_payoff63()),
         {"meta_game": "array2d", "options.alpha": "real>=0", "options.m": "int>=2"}, positional={"meta_game": 0}),
    Case("numtk.games.meta_strategy[rm+]", _meta("rm+", options={"iterations": 100}),
         {"meta_game": "array2d", "options.iterations": "count", "options.tol": "real>=0",
          "options.predictive": "bool", "options.check_every": "count"}, positional={"meta_game": 0}),
    Case("numtk.games.meta_strategy[callable]", _meta(_uniform_solver),
         {"meta_game": "array2d", "rng": "rng"}, positional={"meta_game": 0}),
    Case("numtk.games.psro", _psro(), {**_GAME, **_PSRO_KW}, positional={"game": 0}, skip=_NO_OPTIONS),
    Case("numtk.games.psro[options]", _psro("kuhn"),
         {"options.max_policies": "cap", "options.tol": "real>=0", "options.record_pe": "bool",
          "options.meta_options": "option", "options.n_learners": "count", "options.support_tol": "real>=0",
          "options.p_diversity": "prob", "options.lambda": "real>=0", "options.epsilon": "prob",
          "options.dirichlet_alpha": "real>0", "options.tie_tol": "real>=0", "options.rollout": "bool",
          "options.highs_method": "option"},
         # meta_options=None is the documented default (no meta-solver options)
         skip={"options.meta_options": ("None",)}),
    Case("numtk.games.psro[kuhn]", _psro("kuhn"), {**_PSRO_KW}, skip=_NO_OPTIONS),
    Case("numtk.games.psro[global]", _psro("kuhn", variant="global", n_candidates=2), {**_PSRO_KW},
         # n_candidates=0 is valid; the candidates (BR to Nash, uniform, PE mixture) then coincide on the first
         # step and history['candidate_pe'] holds NaN for the duplicates, its documented meaning ("not scored")
         skip={"n_candidates": ("0",), **_NO_OPTIONS}),
    Case("numtk.games.psro[goofspiel,per_player]", _psro("goofspiel", populations="per_player"),
         {"iterations": "int>=0", "meta_solver": "option", "rng": "rng", "callback": "callable",
          "workers": "workers"}),
]}
