"""One sequence-form view of every zero-sum game numtk solves (private).

A matrix game is the one-infoset case of the sequence form: each player has the empty sequence and
one sequence per pure strategy, and a mixed strategy x is the plan ``(1, x)``. Best responses,
exploitability, Population Exploitability and the PSRO drivers therefore run one code path (the
compiled kernels in ``native/include/numtk/games/best_response.hpp``) for both kinds of game.

Populations are kept as plans: ``R0`` (|Σ0| x k) holds each member's player-0 plan in a column and
``R1`` (|Σ1| x k) its player-1 plan. Members of a matrix game are pure strategy ids; members of an
extensive-form game are tabular behavioural policies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from numtk.games import _games_ext
from numtk.games._matrix_games import MatrixGame

__all__ = ["GameModel", "model_of", "is_extensive_form", "MAX_ITER"]

MAX_ITER = 10**8  # iteration caps of the iterative solvers (their histories grow with it)


def is_extensive_form(game: Any) -> bool:
    return hasattr(game, "sequence_form") and hasattr(game, "policy_to_sequence")


def _check_game(game: Any, name: str = "game") -> None:
    if not (isinstance(game, MatrixGame) or is_extensive_form(game)):
        raise TypeError(f"`{name}` must be a MatrixGame or an extensive-form game (KuhnPoker(), LeducPoker(), "
                        f"Goofspiel(n)), got {type(game).__name__}")


class GameModel:
    """Sequence-form data of a zero-sum game and the compiled kernels over it (private)."""

    def __init__(self, game: Any) -> None:
        self.game = game
        self.extensive = is_extensive_form(game)
        if self.extensive:
            sf = game.sequence_form()
            self.A = sf.payoff
            self.AT = sf.payoff_T
            (self.E, self.e), (self.F, self.f) = sf.constraints
            self.parent_sequence = sf.parent_sequence
            self.first_sequence = sf.first_sequence
            self.n_actions = sf.n_actions
            self.sequence_action = sf.sequence_action
            self.n_infosets = tuple(int(n) for n in game.n_infosets)
        else:
            A = np.asarray(game.zero_sum_payoff, dtype=np.float64)
            m, n = A.shape
            self.dense = A
            full = np.zeros((m + 1, n + 1))
            full[1:, 1:] = A
            self.A = sparse.csr_array(full)
            self.AT = sparse.csr_array(full.T)
            self.E = sparse.csr_array(np.vstack([np.r_[1.0, np.zeros(m)], np.r_[-1.0, np.ones(m)]]))
            self.F = sparse.csr_array(np.vstack([np.r_[1.0, np.zeros(n)], np.r_[-1.0, np.ones(n)]]))
            self.e = np.array([1.0, 0.0])
            self.f = np.array([1.0, 0.0])
            one = np.zeros(1, dtype=np.int32)
            self.parent_sequence = (one, one)
            self.first_sequence = (one + 1, one + 1)
            self.n_actions = (np.array([m], np.int32), np.array([n], np.int32))
            self.sequence_action = (np.r_[-1, np.arange(m)].astype(np.int32), np.r_[-1, np.arange(n)].astype(np.int32))
            self.n_infosets = (1, 1)
        self.n_sequences = (self.A.shape[0], self.A.shape[1])
        A, AT = self.A, self.AT
        self.native = _games_ext.SequenceFormGame(
            A.indptr, A.indices, A.data, AT.indptr, AT.indices, AT.data,
            self.parent_sequence[0], self.first_sequence[0], self.n_actions[0],
            self.parent_sequence[1], self.first_sequence[1], self.n_actions[1],
            self.n_sequences[0], self.n_sequences[1])

    # ---- plans ---------------------------------------------------------------------------------
    def strategy_plan(self, x: np.ndarray) -> np.ndarray:
        """Plan(s) ``(1, x)`` of a matrix-game strategy (m,) or stack of columns (m, k)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            return np.r_[1.0, x]
        return np.vstack([np.ones((1, x.shape[1])), x])

    def pure_plans(self, ids: np.ndarray, player: int) -> np.ndarray:
        """Plans (|Σp| x k) of pure strategies ``ids`` of a matrix game."""
        ids = np.asarray(ids, dtype=np.intp)
        R = np.zeros((self.n_sequences[player], ids.size))
        R[0] = 1.0
        R[ids + 1, np.arange(ids.size)] = 1.0
        return R

    # ---- best responses ------------------------------------------------------------------------
    def best_response(self, player: int, opponent_plans: np.ndarray):
        """Values (K,), pure BR plans (|Σp| x K) and local actions (n_infosets x K) of ``player``."""
        P = np.ascontiguousarray(opponent_plans, dtype=np.float64)
        squeeze = P.ndim == 1
        if squeeze:
            P = P[:, None]
        values, plans, actions = self.native.best_response(player, P)
        if squeeze:
            return float(values[0]), plans[:, 0], actions[:, 0]
        return values, plans, actions

    def action_ids(self, player: int, local: np.ndarray) -> np.ndarray:
        """Action ids of local action indices (n_infosets x K) of ``player``."""
        fs = self.first_sequence[player]
        return self.sequence_action[player][fs[:, None] + local] if local.ndim == 2 else \
            self.sequence_action[player][fs + local]

    def policies_from_actions(self, local0: np.ndarray, local1: np.ndarray) -> np.ndarray:
        """Deterministic tabular policies (K, N_I, A) from both players' local BR actions."""
        game = self.game
        K = local0.shape[1]
        a0 = self.action_ids(0, local0)
        a1 = self.action_ids(1, local1)
        pol = np.zeros((K, self.n_infosets[0] + self.n_infosets[1], game.max_actions))
        rows0 = np.arange(self.n_infosets[0])
        rows1 = self.n_infosets[0] + np.arange(self.n_infosets[1])
        for k in range(K):
            pol[k, rows0, a0[:, k]] = 1.0
            pol[k, rows1, a1[:, k]] = 1.0
        return pol

    def nash_conv_of_plans(self, r0: np.ndarray, r1: np.ndarray) -> float:
        return float(self.native.nash_conv(np.ascontiguousarray(r0, dtype=np.float64),
                                           np.ascontiguousarray(r1, dtype=np.float64)))

    def expected_payoff(self, r0: np.ndarray, r1: np.ndarray) -> float:
        return float(r0 @ (self.A @ r1))


def model_of(game: Any, name: str = "game") -> GameModel:
    """The cached :class:`GameModel` of a zero-sum ``game`` (built once per game object)."""
    _check_game(game, name)
    if not game.is_zero_sum and not getattr(game, "is_constant_sum", False):
        raise ValueError(f"`{name}`: this function requires a zero-sum game (or a constant-sum one, which is "
                         f"shifted to zero-sum); the payoffs given sum to a non-constant")
    model = game.__dict__.get("_numtk_model")
    if model is None:
        model = GameModel(game)
        game.__dict__["_numtk_model"] = model
    return model

