"""Global PSRO's exploration and selection step, with exact best responses and exact PE LPs.

Exploration: best responses to several meta-strategies of the current population Pi, in the order
restricted Nash, uniform, the PE-minimising mixture, then ``n_candidates`` Dirichlet draws.
Selection: each new candidate c is scored by the exact post-expansion Population Exploitability
PE(Pi + {c}) (one LP each, spread over ``workers``) and the minimiser is added; ties (within
``tie_tol``) go to the Nash best response, which keeps double oracle's finite termination, then to
the earliest candidate. Rollout: the best response to the new population's PE mixture (or, when
that is already present, to its restricted Nash) is added too, as the paper's code adds the
estimator's exploiter of the chosen candidate.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from numtk._lib import as_map
from numtk._lib._validation import check_bool, check_real
from numtk.games._meta_solvers import meta_strategy
from numtk.games._population_exploitability import shared_pe_lp

__all__ = ["global_step"]


def _score(task: tuple) -> tuple[np.ndarray, float]:
    """One candidate's post-expansion PE LP (module level, so process pools can run it)."""
    AR1, ATR0, E, e, F, f, highs_method = task
    return shared_pe_lp(AR1, ATR0, E, e, F, f, highs_method)


def global_step(pop: Any, *, nash: np.ndarray, x_pe: np.ndarray, n_candidates: int, rng: np.random.Generator,
                respond: Callable, workers: Any = 1, room: int | None = None, dirichlet_alpha: float = 1.0,
                tie_tol: float = 1e-9, rollout: bool = True, highs_method: str = "auto") -> np.ndarray:
    """Expand ``pop`` in place by one Global PSRO step; returns the candidates' PE (NaN if dropped)."""
    dirichlet_alpha = check_real(dirichlet_alpha, "options['dirichlet_alpha']", low=0.0, low_open=True)
    tie_tol = check_real(tie_tol, "options['tie_tol']", low=0.0)
    rollout = check_bool(rollout, "options['rollout']")
    model = pop.model
    k = pop.size
    mixtures = [nash, np.full(k, 1.0 / k), x_pe]
    if k > 1:
        mixtures += list(rng.dirichlet(np.full(k, dirichlet_alpha), size=n_candidates))
    candidates = respond(np.column_stack(mixtures))
    scores = np.full(len(candidates), np.nan)
    seen: set[bytes] = set()
    keep = []
    for i, (r0, r1, _) in enumerate(candidates):
        key = pop.key(r0, r1)
        if pop.contains(r0, r1) or key in seen:
            continue
        seen.add(key)
        keep.append(i)
    if not keep:
        return scores
    AR1 = model.A @ pop.R1
    ATR0 = model.AT @ pop.R0
    tasks = [(np.column_stack([AR1, model.A @ candidates[i][1]]), np.column_stack([ATR0, model.AT @ candidates[i][0]]),
              model.E, model.e, model.F, model.f, highs_method) for i in keep]
    with as_map(workers) as mapper:
        solved = list(mapper(_score, tasks))
    values = np.array([v for _, v in solved])
    for i, v in zip(keep, values):
        scores[i] = max(v, 0.0)
    best = values.min()
    tied = np.flatnonzero(values <= best + tie_tol * max(1.0, abs(best)))
    choice = 0 if keep[0] == 0 and 0 in tied else int(tied[0])   # Nash-BR first, then the earliest
    r0, r1, member = candidates[keep[choice]]
    pop.add(r0, r1, member)
    if not rollout or (room is not None and room <= 1):
        return scores
    x_new = solved[choice][0]
    for target in (x_new, None):
        if target is None:
            target = np.asarray(meta_strategy(pop.G, "nash", populations="shared").strategies[0], dtype=np.float64)
        r0, r1, member = respond(target[:, None])[0]
        if pop.add(r0, r1, member):
            break
    return scores
