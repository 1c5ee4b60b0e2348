"""PSD-PSRO's diversity-regularised best response, exact among anchored candidates (private).

PSD-PSRO (Yao et al., NeurIPS 2023) adds, with some probability, the policy maximising

    J(pi) = u(pi, sigma) + lambda * min_k D_k(pi),
    D_k(pi) = sum_I rho_pi(I) * w_sigma(I) * KL(pi(.|I) || pi~_k(.|I)),
    pi~_k = (1 - eps) * pi_k + eps * uniform over the legal actions of I,

where sigma is the opponent's meta-Nash mixture, ``w_sigma(I)`` the probability that chance and the
opponent (playing sigma) lead into the player's infoset ``I``, and ``rho_pi(I)`` the player's own
reach of ``I``: the KL term is taken along the histories that ``pi`` actually visits against sigma
(the state-visitation weighting of the paper's policy-space divergence and of GlobalPSRO's per-step
KL reward), which the sequence form provides as follows.

Derivation (exact anchored reduction). Let ``r`` be the realization plan of a **pure** ``pi``, so
``r(I, a) = r(parent(I)) * 1[a = pi(I)]`` and ``r(parent(I)) = rho_pi(I)``. Then
``KL(e_a || pi~_k(.|I)) = -log pi~_k(a|I)``, hence

    sum_a r(I, a) * w_sigma(I) * (-log pi~_k(a|I)) = rho_pi(I) * w_sigma(I) * KL(pi(.|I) || pi~_k(.|I)),

and with ``d_k(I, a) = w_sigma(I) * (-log pi~_k(a|I))`` (0 on the empty sequence), ``D_k(pi) = r' d_k``.
The utility is ``u = r' c`` with ``c = A r_opp`` (player 0; ``c = -A' r_opp`` for player 1), whose
entry at ``(I, a)`` already carries the opponent-and-chance weight. So for a **fixed** anchor ``k``
the regularised objective is linear in ``r``:

    u + lambda * D_k = r' (c + lambda * d_k) = r' c_k,

and its maximiser over pure plans is the sequence-form best response to the utilities ``c_k`` (one
backward induction; ties to the lowest action id). ``w_sigma = W_p r_opp`` with ``W_p`` the
opponent-and-chance reach matrix of the sequence form (``sequence_form().infoset_reach``). The K
anchors give K candidates, computed in one batched call; each candidate's **true** objective
``u + lambda * min_k r' d_k`` is exact (a pure plan makes every KL a sum of ``-log`` terms), and the
candidate with the largest one is kept (ties to the lowest anchor index). This is exact among the
anchored candidates but need not maximise ``J`` over all pure policies: the min of linear functions is
concave, and its maximiser need not be the maximiser of any single term.

A shared member plays both seats. Each seat is chosen separately, with its own objective: seat 0
responds to ``R1 @ nash`` and its divergence uses the anchors' player-0 rows, seat 1 responds to
``R0 @ nash`` with their player-1 rows; the two chosen rows form one tabular policy.

Matrix games (one infoset per player, ``w = 1``, members pure ids) need no traversal: against the
anchors ``e_k``, ``min_k KL(e_a || pi~_k)`` is ``-log(1 - eps + eps/n)`` when ``a`` is a member
and ``-log(eps/n)`` otherwise, a novelty bonus, and the maximiser is exact.

With ``eps = 0`` a smoothed probability can be 0; probabilities are floored at the smallest normal
double (``-log`` at most about 708), so the bonus stays finite and ``lambda = 0`` gives the plain BR.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from numtk._lib import Result
from numtk.games._model import GameModel

__all__ = ["psd_response", "diversity_best_responses"]

_TINY = np.finfo(np.float64).tiny
_CHUNK_ELEMENTS = 1 << 22  # anchors are processed in chunks of about this many sequence x anchor entries


def _neg_log(p: Any) -> Any:
    """``-log(p)`` with ``p`` floored at the smallest normal double (finite for ``p = 0``)."""
    return -np.log(np.maximum(p, _TINY))


def _pick(score: np.ndarray) -> int:
    """Index of the largest score; ties (within 1e-12 * (1 + |max|)) to the lowest index."""
    best = float(score.max())
    return int(np.flatnonzero(score >= best - 1e-12 * (1.0 + abs(best)))[0])


def _seat_layout(model: GameModel, player: int):
    """Per non-empty sequence of ``player``: infoset, policy row, action id, 1 / n_actions."""
    na = np.asarray(model.n_actions[player], dtype=np.intp)
    infoset = np.repeat(np.arange(na.size), na)
    rows = infoset + (0 if player == 0 else model.n_infosets[0])
    actions = np.asarray(model.sequence_action[player][1:], dtype=np.intp)
    return infoset, rows, actions, 1.0 / na[infoset]


def _divergence_coefficients(layout, w: np.ndarray, anchors: Sequence[np.ndarray], cols: range,
                             eps: float) -> np.ndarray:
    """``d_k(I, a) = w(I) * (-log pi~_k(a|I))`` for the anchors ``cols``, shape (n_sequences, len(cols))."""
    infoset, rows, actions, inv_n = layout
    P = np.empty((infoset.size, len(cols)))
    for j, k in enumerate(cols):
        P[:, j] = np.asarray(anchors[k])[rows, actions]
    P *= 1.0 - eps
    P += (eps * inv_n)[:, None]
    D = np.zeros((infoset.size + 1, len(cols)))
    D[1:] = w[infoset][:, None] * _neg_log(P)
    return D


def diversity_best_responses(model: GameModel, player: int, opponent_plan: np.ndarray,
                             anchors: Sequence[np.ndarray], lam: float, eps: float) -> Result:
    """The anchored diversity-regularised best responses of one seat of an extensive-form game.

    For each anchor ``k``: the pure best response of ``player`` to the sequence utilities
    ``c + lam * d_k``, where ``c`` is the utility of each sequence against ``opponent_plan`` and
    ``d_k(I, a) = w(I) * (-log pi~_k(a|I))``, ``w = W_p @ opponent_plan`` the opponent-and-chance
    reach of ``I`` and ``pi~_k = (1 - eps) pi_k + eps * uniform``. Then the exact objective
    ``u + lam * min_k D_k`` of every candidate (see the module docstring for the derivation).

    Parameters
    ----------
    model : GameModel
        The model of an extensive-form game.
    player : {0, 1}
        The responding seat.
    opponent_plan : ndarray, shape (n_sequences[1 - player],)
        The opponent's realization plan (for a mixture of members, ``R @ x``).
    anchors : sequence of ndarray, each (N_I, max_actions)
        Tabular policies (the population members); only ``player``'s rows are read.
    lam : float
        Weight ``lambda >= 0`` of the diversity bonus.
    eps : float
        Smoothing ``0 <= eps <= 1`` of the anchors towards the uniform policy.

    Returns
    -------
    Result
        values : ndarray (K,)
            ``max_r r' (c + lam * d_k)``, the anchored objective of each best response.
        plans : ndarray (n_sequences[player], K)
            The pure best-response plans, one column per anchor.
        actions : ndarray of int32 (n_infosets[player], K)
            Their local action index at every infoset (reached or not).
        utility : ndarray (K,)
            ``u`` of each candidate against ``opponent_plan``.
        divergence : ndarray (K, K)
            ``divergence[j, k] = D_k`` of candidate ``j``: the reach-weighted KL against anchor ``k``.
        objective : ndarray (K,)
            ``utility + lam * divergence.min(axis=1)``, the true PSD objective of each candidate.
        best : int
            The candidate with the largest objective (ties to the lowest index).
        reach : ndarray (n_infosets[player],)
            ``w``, the opponent-and-chance reach of each infoset.
    """
    K = len(anchors)
    if K == 0:
        raise ValueError("`anchors` must hold at least one policy")
    q = np.ascontiguousarray(opponent_plan, dtype=np.float64)
    c = model.A @ q if player == 0 else -(model.AT @ q)
    w = model.game.sequence_form().infoset_reach[player] @ q
    layout = _seat_layout(model, player)
    n_seq = model.n_sequences[player]
    chunk = max(1, _CHUNK_ELEMENTS // n_seq)
    values = np.empty(K)
    plans = np.empty((n_seq, K))
    actions = np.empty((model.n_infosets[player], K), dtype=np.int32)
    kept = None
    for start in range(0, K, chunk):
        cols = range(start, min(K, start + chunk))
        D = _divergence_coefficients(layout, w, anchors, cols, eps)
        v, B, L = model.native.best_response_from_utilities(player, c[:, None] + lam * D)
        values[cols.start:cols.stop] = v
        plans[:, cols.start:cols.stop] = B
        actions[:, cols.start:cols.stop] = L
        kept = D if len(cols) == K else None
    # D_k of every candidate: plans' d_k (exact, the plans are pure); a second pass when chunked.
    divergence = np.empty((K, K))
    if kept is not None:
        divergence[:] = plans.T @ kept
    else:
        for start in range(0, K, chunk):
            cols = range(start, min(K, start + chunk))
            divergence[:, cols.start:cols.stop] = plans.T @ _divergence_coefficients(layout, w, anchors, cols, eps)
    utility = plans.T @ c
    objective = utility + lam * divergence.min(axis=1)
    return Result(values=values, plans=plans, actions=actions, utility=utility, divergence=divergence,
                  objective=objective, best=_pick(objective), reach=w)


def _matrix_response(pop: Any, nash: np.ndarray, lam: float, eps: float):
    """Novelty-bonus BR of a symmetric matrix game with pure members (exact min-KL maximiser)."""
    model = pop.model
    n = model.n_sequences[0] - 1
    u = model.dense @ (pop.R1[1:] @ nash)
    bonus = np.full(n, _neg_log(eps / n))
    bonus[np.asarray(pop.members, dtype=np.intp)] = _neg_log(1.0 - eps + eps / n)
    a = _pick(u + lam * bonus)
    return model.pure_plans([a], 0)[:, 0], model.pure_plans([a], 1)[:, 0], a


def psd_response(pop: Any, nash: np.ndarray, lam: float, eps: float):
    """PSD-PSRO's diversity-regularised best response to a shared population's meta-Nash.

    Seat 0 responds to ``pop.R1 @ nash`` and seat 1 to ``pop.R0 @ nash``, each maximising
    ``u + lam * min_k D_k`` over the population members ``k`` as anchors, where ``D_k`` is the
    KL divergence from the smoothed anchor ``(1 - eps) pi_k + eps * uniform`` summed over the
    seat's infosets weighted by their reach (own reach times the opponent-and-chance reach
    ``w_sigma``). Extensive-form games: the exact anchored reduction (one batched best response per
    seat over K anchor-specific utilities, then the candidate with the best true objective; see
    the module docstring). Matrix games with pure members: the exact novelty-bonus maximiser.

    Parameters
    ----------
    pop : Population
        The shared population (plans ``R0``, ``R1``, members, game model).
    nash : ndarray, shape (pop.size,)
        The meta-Nash weights over the members.
    lam : float
        ``lambda >= 0``, the weight of the diversity bonus.
    eps : float
        Smoothing ``0 <= eps <= 1`` of the anchors towards the uniform policy.

    Returns
    -------
    r0, r1 : ndarray
        The chosen member's plans of players 0 and 1.
    member : int or ndarray
        The strategy id (matrix game) or the deterministic tabular policy holding both seats'
        rows, shape (N_I, max_actions) (extensive-form game). It may already be in the population.
    """
    nash = np.asarray(nash, dtype=np.float64)
    if nash.shape != (pop.size,):
        raise ValueError(f"`nash` must have shape ({pop.size},); got {nash.shape}")
    if pop.matrix:
        return _matrix_response(pop, nash, lam, eps)
    model = pop.model
    seat0 = diversity_best_responses(model, 0, pop.R1 @ nash, pop.members, lam, eps)
    seat1 = diversity_best_responses(model, 1, pop.R0 @ nash, pop.members, lam, eps)
    j0, j1 = seat0.best, seat1.best
    member = model.policies_from_actions(seat0.actions[:, [j0]], seat1.actions[:, [j1]])[0]
    return seat0.plans[:, j0].copy(), seat1.plans[:, j1].copy(), member
