"""Pure-NumPy references of the game kernels: sequence-form best response, enumeration of pure
strategies, and mixtures evaluated by brute force. Independent of numtk's compiled code."""

from __future__ import annotations

import itertools

import numpy as np


def utilities(sf, player, opponent_plan):
    """Utility of each of ``player``'s sequences against the opponent's plan."""
    A = sf.payoff.toarray()
    return A @ opponent_plan if player == 0 else -(A.T @ opponent_plan)


def best_response_value(sf, player, opponent_plan):
    """Backward induction written with plain loops."""
    c = utilities(sf, player, opponent_plan).astype(float).copy()
    ps, fs, na = (np.asarray(sf.parent_sequence[player]), np.asarray(sf.first_sequence[player]),
                  np.asarray(sf.n_actions[player]))
    for I in range(len(ps) - 1, -1, -1):
        c[ps[I]] += max(c[fs[I] + a] for a in range(na[I]))
    return c[0]


def pure_plans(sf, player):
    """Every pure strategy of ``player`` as a realization plan (enumeration: small games only)."""
    ps, fs, na = (np.asarray(sf.parent_sequence[player]), np.asarray(sf.first_sequence[player]),
                  np.asarray(sf.n_actions[player]))
    n_seq = int(fs[-1] + na[-1]) if len(fs) else 1
    for choice in itertools.product(*[range(int(n)) for n in na]):
        r = np.zeros(n_seq)
        r[0] = 1.0
        for I in range(len(ps)):
            r[fs[I] + choice[I]] = r[ps[I]]
        yield r


def brute_force_best_response_value(sf, player, opponent_plan):
    c = utilities(sf, player, opponent_plan)
    return max(float(r @ c) for r in pure_plans(sf, player))


def matrix_exploitability(M, x, y):
    """NashConv/2 of (x, y) in the zero-sum game M."""
    return 0.5 * ((M @ y).max() - (x @ M).min())


def simplex_grid(k, steps):
    """All points of the k-simplex with coordinates in multiples of 1/steps."""
    for c in itertools.product(range(steps + 1), repeat=k - 1):
        if sum(c) <= steps:
            yield np.array(list(c) + [steps - sum(c)], dtype=float) / steps
