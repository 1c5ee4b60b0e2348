"""The PSRO family with exact oracles: PSRO, PSRO-rN, pipeline PSRO, anytime PSRO, PSD-PSRO, Global PSRO.

All variants share one loop over a *shared* population (each member plays both seats, the Global
PSRO paper's convention): a symmetric matrix game's members are pure strategy ids, an
extensive-form game's members are tabular policies. The population is kept as realization plans
(``R0``, ``R1``) and its meta-game ``G_ij = (u(i, j) - u(j, i)) / 2`` (member i against j with random
seats, antisymmetric) grows by one row and column per member.

``history`` entry ``t`` describes the population after ``t`` iterations (entry 0 is the initial
population), so curves are read against ``history['population_size']``, the number of oracle calls,
never against iterations.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from numtk._lib import Result, n_threads, normalize_rng, progress_bar
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_callback, check_int, check_option, check_options, check_real
from numtk.games._lp import clean_simplex
from numtk.games._matrix_games import MatrixGame
from numtk.games._meta_solvers import META_SOLVERS, meta_strategy
from numtk.games._model import GameModel, model_of
from numtk.games._population_exploitability import pe_lp
from numtk.games._psd import psd_response

__all__ = ["psro", "PSRO_VARIANTS", "Population"]

PSRO_VARIANTS = ("psro", "psro_rn", "pipeline", "anytime", "psd", "global")
_CONVENTIONS = ("exploitability", "nash_conv")
MAX_ITERATIONS = 100_000   # expansion steps: the meta-game is dense in the population size
MAX_CANDIDATES = 10_000    # Global PSRO's Dirichlet candidates (and pipeline learners) per iteration


class Population:
    """A shared population as plans, with its meta-game, duplicate detection and batched oracles."""

    def __init__(self, model: GameModel, game: Any) -> None:
        self.model = model
        self.game = game
        self.matrix = not model.extensive
        s0, s1 = model.n_sequences
        self.R0 = np.zeros((s0, 0))
        self.R1 = np.zeros((s1, 0))
        self.members: list = []
        self._keys: set[bytes] = set()
        self.G = np.zeros((0, 0))

    @property
    def size(self) -> int:
        return len(self.members)

    @staticmethod
    def key(r0: np.ndarray, r1: np.ndarray) -> bytes:
        return np.ascontiguousarray(r0).tobytes() + np.ascontiguousarray(r1).tobytes()

    def contains(self, r0: np.ndarray, r1: np.ndarray) -> bool:
        return self.key(r0, r1) in self._keys

    def add(self, r0: np.ndarray, r1: np.ndarray, member: Any) -> bool:
        """Append a member unless it is already present; update the meta-game incrementally."""
        key = self.key(r0, r1)
        if key in self._keys:
            return False
        a = self.model.A @ r1          # u(i, new) = R0_i' A r1_new
        b = self.model.AT @ r0         # u(new, i) = r0_new' A R1_i
        col = 0.5 * (self.R0.T @ a - self.R1.T @ b)
        k = self.size
        G = np.zeros((k + 1, k + 1))
        G[:k, :k] = self.G
        G[:k, k] = col
        G[k, :k] = -col
        self.G = G
        self.R0 = np.column_stack([self.R0, r0])
        self.R1 = np.column_stack([self.R1, r1])
        self.members.append(member)
        self._keys.add(key)
        return True

    def exact_responses(self, S: np.ndarray):
        """Exact best responses to the mixtures in the columns of ``S`` (k x K), both seats at once.

        Returns ``(exploitability (K,), candidates)`` where each candidate is ``(r0, r1, member)``:
        the seat-0 BR against the mixture's player-1 plan and the seat-1 BR against its player-0
        plan, combined into one member.
        """
        model = self.model
        v0, B0, L0 = model.best_response(0, self.R1 @ S)
        v1, B1, L1 = model.best_response(1, self.R0 @ S)
        expl = np.maximum(0.5 * (v0 + v1), 0.0)
        if self.matrix:
            ids = model.action_ids(0, L0)[0]
            P0 = model.pure_plans(ids, 0)
            P1 = model.pure_plans(ids, 1)
            cands = [(P0[:, j], P1[:, j], int(ids[j])) for j in range(S.shape[1])]
        else:
            policies = model.policies_from_actions(L0, L1)
            cands = [(B0[:, j], B1[:, j], policies[j]) for j in range(S.shape[1])]
        return expl, cands

    def exploitability(self, S: np.ndarray) -> np.ndarray:
        """Exploitability (NashConv/2) of the mixtures in the columns of ``S``."""
        v0 = self.model.best_response(0, self.R1 @ S)[0]
        v1 = self.model.best_response(1, self.R0 @ S)[0]
        return np.maximum(0.5 * (v0 + v1), 0.0)

    def callable_responses(self, oracle: Callable, S: np.ndarray, rng: np.random.Generator):
        """Policies from a user oracle, as candidates ``(r0, r1, member)``."""
        targets = [S[:, j].copy() for j in range(S.shape[1])]
        out = oracle(self.game, self.export_members(), targets, rng=rng)
        out = list(out)
        if len(out) != len(targets):
            raise ValueError(f"`oracle` must return one policy per target ({len(targets)}), got {len(out)}")
        cands = []
        for pol in out:
            if self.matrix:
                i = int(pol)
                n = self.model.n_sequences[0] - 1
                if not 0 <= i < n:
                    raise ValueError(f"`oracle` returned strategy id {i}, outside [0, {n})")
                cands.append((self.model.pure_plans([i], 0)[:, 0], self.model.pure_plans([i], 1)[:, 0], i))
            else:
                p = self.game.check_policy(pol, name="oracle output")
                r0, r1 = self.game.policy_to_sequence(p)
                cands.append((np.asarray(r0, float), np.asarray(r1, float), p))
        return cands

    def export_members(self):
        if self.matrix:
            return np.asarray(self.members, dtype=np.int64)
        return np.stack(self.members) if self.members else np.zeros((0,) + self.game.legal_mask.shape)


def _initial_population(pop: Population, options: dict, rng: np.random.Generator) -> None:
    init = options.pop("init", None)
    game, model = pop.game, pop.model
    if pop.matrix:
        n = model.n_sequences[0] - 1
        ids = [int(rng.integers(n))] if init is None else np.atleast_1d(np.asarray(init)).tolist()
        for i in ids:
            if not (isinstance(i, (int, np.integer)) and 0 <= i < n):
                raise ValueError(f"`options['init']` must hold strategy ids in [0, {n})")
            pop.add(model.pure_plans([i], 0)[:, 0], model.pure_plans([i], 1)[:, 0], int(i))
        return
    stack = game.uniform_policy()[None] if init is None else game.check_policy(init, name="options['init']")
    if stack.ndim == 2:
        stack = stack[None]
    R0, R1 = game.policy_to_sequence(stack)
    for j in range(stack.shape[0]):
        pop.add(np.asarray(R0)[:, j].copy(), np.asarray(R1)[:, j].copy(), stack[j])


def _meta(pop: Population, meta_solver: Any, rng: np.random.Generator, meta_options: dict) -> np.ndarray:
    if pop.size == 1:
        return np.ones(1)
    sigma = meta_strategy(pop.G, meta_solver, populations="shared", rng=rng, options=meta_options).strategies[0]
    return clean_simplex(np.asarray(sigma, dtype=np.float64))


def _nash(pop: Population, meta_solver: Any, sigma_meta: np.ndarray) -> np.ndarray:
    if isinstance(meta_solver, str) and meta_solver == "nash":
        return sigma_meta
    if pop.size == 1:
        return np.ones(1)
    return clean_simplex(np.asarray(meta_strategy(pop.G, "nash", populations="shared").strategies[0],
                                    dtype=np.float64))


@constraints(game="option", variant="option", meta_solver=("option", "callable"), oracle=("option", "callable"),
             iterations="int>=0", n_candidates="int>=0", rng="rng", progress="bool", callback="callable",
             workers="workers", convention="option", populations="option", options="option")
def psro(game: Any, *, variant: str = "psro", meta_solver: Any = "nash", oracle: Any = "exact",
         iterations: int = 50, n_candidates: int = 16, rng: Any = None, progress: bool = False,
         callback: Callable | None = None, workers: Any = 1, convention: str = "exploitability",
         populations: str = "shared", options: dict | None = None) -> Result:
    """Policy-Space Response Oracles and its variants, with exact best responses and exact PE.

    Parameters
    ----------
    game : MatrixGame or extensive-form game
        Zero-sum; a matrix game must be symmetric (members play both seats).
    variant : {'psro', 'psro_rn', 'pipeline', 'anytime', 'psd', 'global'}
        ``'psro'``: add BR(meta-strategy); with ``'nash'`` this is double oracle (finite
        termination, PE 0 at the end). In every variant but ``'global'`` and ``'psd'``, when all
        the variant's responses are already members, BR(restricted Nash) is added instead; the run
        stops when that too is a member, which certifies the restricted Nash as an equilibrium.
        ``'psro_rn'``: rectified Nash (Balduzzi et al. 2019), one BR per support member to the Nash
        restricted to the members it beats or ties; BR(Nash) when none is new. ``'pipeline'``: P-PSRO (McAleer et al. 2020) with ``options['n_learners']`` (2)
        learners; with exact oracles training is instant and it adds the PSRO-Nash sequence
        ``n_learners`` at a time. ``'anytime'``: the restricted distribution is the PE mixture
        (anytime double oracle, McAleer et al. 2022); add BR to it, or BR(restricted Nash) when that
        BR is already present. ``'psd'``: PSD-PSRO (Yao et al. 2023): with probability
        ``options['p_diversity']`` (0.15) add the diversity-regularised BR to the restricted Nash,
        maximising ``u + lambda * min_k sum_I reach(I) KL(pi(.|I) || pi~_k(.|I))`` over the members
        ``k``, with ``pi~_k = (1 - epsilon) pi_k + epsilon * uniform`` (``'lambda'`` 0.1,
        ``'epsilon'`` 1e-3) and ``reach(I)`` the probability that pi reaches infoset I against the
        Nash (own reach times opponent-and-chance reach); otherwise, or when that response is already
        a member, BR(Nash). On extensive-form games it is the exact anchored reduction: one BR per
        anchor k to the utilities plus ``lambda * w(I) * (-log pi~_k(a|I))`` (linear for pure pi),
        keeping the candidate with the largest true objective, each seat separately; on matrix
        games with pure members it is the exact novelty-bonus maximiser. ``'global'``: Global
        PSRO (Wang et al., ICML 2026): exploration by exact BRs to several meta-strategies,
        selection by the exact post-expansion PE, plus the rollout exploiter; see
        :mod:`numtk.games` and the tutorial.
    meta_solver : str or callable
        ``'nash'``, ``'uniform'``, ``'prd'``, ``'alpha_rank'``, ``'rm+'``, or ``f(G) -> sigma``.
    oracle : 'exact' or callable
        ``'exact'``: the sequence-form best response (members are pure). A callable
        ``oracle(game, population, targets, *, rng) -> list[policy]`` gets the members and a list of
        weight vectors over them and returns one policy (strategy id for matrix games) per target.
    iterations : int
        Number of expansion steps, 0 to 100000 (the run also stops at ``options['max_policies']``, at PE <=
        ``options['tol']`` (1e-10), when no new policy can be added, or on ``StopIteration`` from
        ``callback``).
    n_candidates : int
        Global PSRO: the number of Dirichlet meta-strategies explored per iteration, 0 to 10000
        (checked with every variant).
    rng : None, int or numpy.random.Generator
        Initial pure strategy of a matrix game, Dirichlet draws, PSD coin flips.
    progress : bool
        A tqdm bar over iterations.
    callback : callable, optional
        ``callback(intermediate_result)``, called after each iteration with a Result of the same
        fields as the returned one, describing the run so far (``status='running'``, ``success``
        False, ``message`` empty). Raising ``StopIteration`` stops the run, which then returns
        normally with ``status='callback'``.
    workers : int or map-like callable
        Global PSRO: spreads the candidate PE LPs (an int count is checked with every variant).
    convention : {'exploitability', 'nash_conv'}
        Units of ``history['exploitability']``, ``['nash_exploitability']`` and ``['pe']``.
    populations : {'shared', 'per_player'}
        ``'shared'`` (default; the paper's setting): each member plays both seats, and a matrix game
        must be symmetric. ``'per_player'`` (OpenSpiel's ``psro_v2`` default; any zero-sum game,
        variant ``'psro'`` with the exact oracle): one population per player, the meta-game
        ``R0' A R1`` and one best response per player per iteration; ``population`` is then a pair
        and ``history['pe']`` the per-player PE.
    options : dict, optional
        ``init`` (initial members), ``max_policies``, ``tol`` (1e-10), ``record_pe`` (True),
        ``meta_options`` (dict passed to the meta-solver), and the variant options above; Global
        PSRO: ``dirichlet_alpha`` (1.0), ``tie_tol`` (1e-9), ``rollout`` (True), ``highs_method``.

    Returns
    -------
    res : Result
        With fields

        population : ndarray or tuple of ndarray
            The members: int strategy ids (matrix game) or a stack of tabular policies
            (extensive-form game); for per-player populations a pair, one per player.
        plans : tuple of ndarray
            ``(R0, R1)``: the members' realization plans as columns (per-player: player 0's
            members in ``R0``, player 1's in ``R1``).
        meta_game : ndarray
            The final meta-game: ``G`` (k, k), antisymmetric, for shared populations;
            ``R0' A R1`` (k0, k1) for per-player populations.
        meta_strategies : list
            The reported mixture of each history entry (a pair of mixtures for per-player
            populations).
        strategy : Result
            The final reported mixture: fields ``mixture`` (the weights over the members, a pair
            for per-player populations) and ``policy`` (the mixed strategy it plays: a matrix
            game's strategy vector, or the tabular policy of the mixed realization plans; a pair
            of vectors for a per-player matrix game).
        history : dict of ndarray
            One entry per population (entry 0: the initial one): ``population_size``,
            ``exploitability`` (of the reported mixture), ``nash_exploitability`` (of the
            restricted Nash), ``pe`` (Population Exploitability; NaN with
            ``options['record_pe']=False``), ``n_added`` (members added by the step that made
            the entry), ``time`` (seconds since the start), and ``candidate_pe``: for Global
            PSRO, per iteration, every candidate's post-expansion PE (NaN for a candidate that was
            not scored because it is already a member or duplicates an earlier candidate); None
            for the other variants.
        n_iter : int
            Expansion steps run.
        success : bool
            True when ``status`` is ``'equilibrium'``.
        status : str
            ``'equilibrium'`` (the PE reached ``options['tol']``, or no new best response
            exists: the span of the population holds an equilibrium; with the exact oracle only),
            ``'no_new_response'`` (a callable oracle returned only policies already in the population
            while the PE is above tol: an approximate oracle certifies nothing), ``'max_iterations'``
            (``iterations`` spent), ``'max_policies'`` (``options['max_policies']`` reached) or
            ``'callback'`` (stopped by the callback); ``'running'`` in the callback's
            intermediate results.
        message : str
            A sentence describing ``status``.
        variant : str
            The variant run.
        populations : str
            ``'shared'`` or ``'per_player'``.

    References
    ----------
    .. [1] M. Lanctot et al., "A Unified Game-Theoretic Approach to Multiagent Reinforcement
       Learning", NeurIPS 2017.
    .. [2] C. Wang, F. Yang, J. Wang, J. Zhang, X. Zhang, "Global Policy-Space Response Oracles for
       Two-Player Zero-Sum Games", ICML 2026, arXiv:2605.28273.

    Examples
    --------
    >>> from numtk.games import psro, rock_paper_scissors
    >>> res = psro(rock_paper_scissors(), options={"init": [0]})
    >>> res.history["population_size"].tolist(), res.history["pe"].round(6).tolist()
    ([1, 2, 3], [1.0, 0.333333, 0.0])
    >>> res.status
    'equilibrium'
    """
    from numtk.games._global_psro import global_step

    # Every argument is checked before any work, whether or not the variant uses it.
    variant = check_option(variant, "variant", PSRO_VARIANTS)
    convention = check_option(convention, "convention", _CONVENTIONS)
    iterations = check_int(iterations, "iterations", minimum=0, maximum=MAX_ITERATIONS)
    n_candidates = check_int(n_candidates, "n_candidates", minimum=0, maximum=MAX_CANDIDATES)
    progress = check_bool(progress, "progress") if not isinstance(progress, dict) else progress
    if isinstance(meta_solver, str):
        check_option(meta_solver, "meta_solver", META_SOLVERS)
    elif not callable(meta_solver):
        raise TypeError("`meta_solver` must be a name or a callable f(G) -> sigma")
    if not (callable(oracle) or (isinstance(oracle, str) and oracle == "exact")):
        raise ValueError("`oracle` must be 'exact' or a callable oracle(game, population, targets, *, rng)")
    populations = check_option(populations, "populations", ("shared", "per_player"))
    check_callback(callback)
    if not callable(workers):
        n_threads(workers)  # validates the count (a map-like callable is checked when it is called)
    options = check_options(options)
    gen = normalize_rng(rng)
    if populations == "per_player":
        if variant not in ("psro", "pipeline") or oracle != "exact":
            raise ValueError("`populations='per_player'` runs variant='psro' with the exact oracle (double oracle "
                             "with the 'nash' meta-solver); the other variants use shared populations")
        return _psro_per_player(game, model_of(game), meta_solver, iterations, gen, progress, callback, convention,
                                options)
    max_policies = options.pop("max_policies", None)
    if max_policies is not None:
        max_policies = check_int(max_policies, "options['max_policies']", minimum=1)
    tol = check_real(options.pop("tol", 1e-10), "options['tol']", low=0.0)
    record_pe = check_bool(options.pop("record_pe", True), "options['record_pe']")
    meta_options = check_options(options.pop("meta_options", None), "options['meta_options']")
    n_learners = check_int(options.pop("n_learners", 2), "options['n_learners']", minimum=1,
                           maximum=MAX_CANDIDATES)
    support_tol = check_real(options.pop("support_tol", 1e-9), "options['support_tol']", low=0.0)
    p_diversity = check_real(options.pop("p_diversity", 0.15), "options['p_diversity']", low=0.0, high=1.0)
    lam = check_real(options.pop("lambda", 0.1), "options['lambda']", low=0.0)
    eps = check_real(options.pop("epsilon", 1e-3), "options['epsilon']", low=0.0, high=1.0)
    global_options = {k: options.pop(k) for k in ("dirichlet_alpha", "tie_tol", "rollout", "highs_method")
                      if k in options}
    if "dirichlet_alpha" in global_options:
        check_real(global_options["dirichlet_alpha"], "options['dirichlet_alpha']", low=0.0, low_open=True)
    if "tie_tol" in global_options:
        check_real(global_options["tie_tol"], "options['tie_tol']", low=0.0)
    if "rollout" in global_options:
        check_bool(global_options["rollout"], "options['rollout']")
    highs_method = check_option(global_options.get("highs_method", "auto"), "options['highs_method']",
                                ("auto", "highs", "highs-ds", "highs-ipm"))
    model = model_of(game)
    if isinstance(game, MatrixGame) and not game.is_symmetric:
        raise ValueError("`game`: shared populations (each member plays both seats) need a symmetric matrix "
                         "game; use populations='per_player'")
    pop = Population(model, game)
    _initial_population(pop, options, gen)
    if options:
        raise ValueError(f"`options`: unknown keys {sorted(options)}")

    scale = 2.0 if convention == "nash_conv" else 1.0
    hist = {k: [] for k in _HISTORY_KEYS}
    candidate_pe: list[np.ndarray] = []
    meta_strategies: list[np.ndarray] = []
    t0 = time.perf_counter()
    status, message = "max_iterations", "the iteration budget is spent"
    n_added = 0
    bar = progress_bar(total=iterations, progress=progress, desc=f"psro[{variant}]")

    def respond(S: np.ndarray):
        if oracle == "exact":
            return pop.exact_responses(S)[1]
        return pop.callable_responses(oracle, S, gen)

    def add_first_new(cands) -> int:
        for r0, r1, member in cands:
            if pop.add(r0, r1, member):
                return 1
        return 0

    it = 0
    try:
        while True:
            # ---- describe the current population ------------------------------------------------
            sigma = _meta(pop, meta_solver, gen, meta_options)
            nash = _nash(pop, meta_solver, sigma)
            need_pe = record_pe or variant in ("anytime", "global")
            if need_pe:
                pe, x_pe, _ = pe_lp(model, pop.R0, pop.R1, highs_method=highs_method)
            else:
                pe, x_pe = np.nan, None
            reported = x_pe if variant in ("anytime", "global") else sigma
            expl = pop.exploitability(np.column_stack([reported, nash]))
            _record(hist, pop.size, scale * expl, scale * pe, n_added, time.perf_counter() - t0)
            meta_strategies.append(reported)
            if callback is not None and it > 0:
                callback(_result(pop, model, meta_strategies, hist, candidate_pe, it, "running", "", variant))
            if need_pe and pe <= tol:
                status, message = "equilibrium", "PE reached tol: the population's span holds an equilibrium"
                break
            if it >= iterations:
                break
            if max_policies is not None and pop.size >= max_policies:
                status, message = "max_policies", "the policy budget is spent"
                break
            # ---- expand -------------------------------------------------------------------------
            before = pop.size
            room = None if max_policies is None else max_policies - pop.size
            if variant == "psro":
                add_first_new(respond(sigma[:, None]))
            elif variant == "pipeline":
                for j in range(n_learners if room is None else min(n_learners, room)):
                    s = sigma if j == 0 else _meta(pop, meta_solver, gen, meta_options)
                    if not add_first_new(respond(s[:, None])):
                        break
            elif variant == "psro_rn":
                support = np.flatnonzero(nash > support_tol)
                targets = []
                for i in support:
                    w = nash * (pop.G[i] >= 0)
                    targets.append(w / w.sum())
                for cand in respond(np.column_stack(targets)):
                    if room is not None and pop.size - before >= room:
                        break
                    pop.add(*cand)
            elif variant == "anytime":
                add_first_new(respond(x_pe[:, None]))
            elif variant == "psd":
                if gen.random() < p_diversity:
                    pop.add(*psd_response(pop, nash, lam, eps))
                if pop.size == before:
                    add_first_new(respond(nash[:, None]))
            else:  # global
                scores = global_step(pop, nash=nash, x_pe=x_pe, n_candidates=n_candidates, rng=gen,
                                     respond=respond, workers=workers, room=room, **global_options)
                candidate_pe.append(scale * scores)
            if pop.size == before and variant not in ("global", "psd"):
                # The variant's responses are all present: fall back to BR(restricted Nash), which is new
                # unless the restricted Nash is already a full-game equilibrium.
                add_first_new(respond(nash[:, None]))
            n_added = pop.size - before
            it += 1
            bar.update(1)
            if n_added == 0:
                if oracle == "exact":
                    # Nothing new: BR(restricted Nash) is in the population, so its Nash is an equilibrium.
                    status, message = "equilibrium", "no new best response: the restricted Nash is an equilibrium"
                else:
                    # An approximate (e.g. RL) oracle that finds nothing new certifies nothing: the PE above
                    # tol says the population is still exploitable.
                    status, message = ("no_new_response", "the oracle returned no new policy; with an approximate "
                                       "oracle this is not an equilibrium certificate (see history['pe'])")
                break
    except StopIteration:
        status, message = "callback", "stopped by the callback"
    finally:
        bar.close()
    return _result(pop, model, meta_strategies, hist, candidate_pe, it, status, message, variant)


_HISTORY_KEYS = ("population_size", "exploitability", "nash_exploitability", "pe", "n_added", "time")


def _record(hist: dict, size: int, expl: np.ndarray, pe: float, n_added: int, elapsed: float) -> None:
    """Append one population's entry: ``expl`` holds the reported mixture's and the restricted Nash's."""
    for key, value in zip(_HISTORY_KEYS, (size, expl[0], expl[1], pe, n_added, elapsed)):
        hist[key].append(value)


def _history_arrays(hist: dict) -> dict:
    return {k: np.asarray(v, dtype=np.int64 if k in ("population_size", "n_added") else np.float64)
            for k, v in hist.items()}


def _result(pop: Population, model: GameModel, meta_strategies, hist, candidate_pe, it, status, message, variant):
    history = _history_arrays(hist)
    history["candidate_pe"] = list(candidate_pe) if variant == "global" else None
    final = meta_strategies[-1]
    k_final = final.size
    strategy = Result(mixture=final, policy=_mixture_of(pop, final, k_final))
    return Result(population=pop.export_members(), plans=(pop.R0.copy(), pop.R1.copy()), meta_game=pop.G.copy(),
                  meta_strategies=list(meta_strategies), strategy=strategy, history=history, n_iter=it,
                  success=status == "equilibrium", status=status, message=message, variant=variant,
                  populations="shared")


def _mixture_of(pop: Population, x: np.ndarray, k: int):
    if pop.matrix:
        return clean_simplex(pop.R0[1:, :k] @ x)
    return pop.game.sequence_to_policy(pop.R0[:, :k] @ x, pop.R1[:, :k] @ x)


def _psro_per_player(game: Any, model: GameModel, meta_solver: Any, iterations: int, gen: np.random.Generator,
                     progress: Any, callback: Callable | None, convention: str, options: dict) -> Result:
    """PSRO with one population per player (double oracle with the Nash meta-solver)."""
    from numtk.games._population_exploitability import pe_lp

    max_policies = options.pop("max_policies", None)
    if max_policies is not None:
        max_policies = check_int(max_policies, "options['max_policies']", minimum=2)
    tol = check_real(options.pop("tol", 1e-10), "options['tol']", low=0.0)
    record_pe = check_bool(options.pop("record_pe", True), "options['record_pe']")
    meta_options = check_options(options.pop("meta_options", None), "options['meta_options']")
    init = options.pop("init", None)
    if options:
        raise ValueError(f"`options`: unknown keys {sorted(options)} (per-player PSRO takes init, max_policies, "
                         f"tol, record_pe, meta_options)")
    matrix = not model.extensive
    if matrix:
        m, n = model.n_sequences[0] - 1, model.n_sequences[1] - 1
        if init is None:
            ids = (int(gen.integers(m)), int(gen.integers(n)))
        else:
            if isinstance(init, (str, bytes)) or not hasattr(init, "__len__") or len(init) != 2:
                raise TypeError("`options['init']` must be a pair of strategy ids (player 0's, player 1's)")
            ids = tuple(check_int(i, "options['init']") for i in init)
        if not (0 <= ids[0] < m and 0 <= ids[1] < n):
            raise ValueError(f"`options['init']` must be a pair of strategy ids in [0, {m}) x [0, {n})")
        R = [model.pure_plans([ids[0]], 0), model.pure_plans([ids[1]], 1)]
        members: list[list] = [[ids[0]], [ids[1]]]
    else:
        start = game.uniform_policy() if init is None else game.check_policy(init, name="options['init']")
        r0, r1 = game.policy_to_sequence(start)
        R = [np.asarray(r0, float)[:, None], np.asarray(r1, float)[:, None]]
        members = [[start], [start]]
    keys = [{R[p][:, 0].tobytes()} for p in (0, 1)]
    scale = 2.0 if convention == "nash_conv" else 1.0
    hist = {k: [] for k in _HISTORY_KEYS}
    metas: list = []
    t0 = time.perf_counter()
    status, message, n_added, it = "max_iterations", "the iteration budget is spent", 0, 0
    bar = progress_bar(total=iterations, progress=progress, desc="psro[per_player]")
    try:
        while True:
            G = R[0].T @ (model.A @ R[1])
            s0, s1 = (np.ones(1), np.ones(1)) if G.size == 1 else meta_strategy(
                G, meta_solver, populations="per_player", rng=gen, options=meta_options).strategies
            s0, s1 = clean_simplex(np.asarray(s0, float)), clean_simplex(np.asarray(s1, float))
            if isinstance(meta_solver, str) and meta_solver == "nash" or G.size == 1:
                n0, n1 = s0, s1
            else:
                n0, n1 = (clean_simplex(np.asarray(v, float))
                          for v in meta_strategy(G, "nash", populations="per_player").strategies)
            v0, b0, l0 = model.best_response(0, R[1] @ np.column_stack([s1, n1]))
            v1, b1, l1 = model.best_response(1, R[0] @ np.column_stack([s0, n0]))
            expl = np.maximum(0.5 * (v0 + v1), 0.0)
            pe = pe_lp(model, R[0], R[1], populations="per_player")[0] if record_pe else np.nan
            size = R[0].shape[1] + R[1].shape[1]
            _record(hist, size, scale * expl, scale * pe, n_added, time.perf_counter() - t0)
            metas.append((s0, s1))
            if callback is not None and it > 0:
                callback(_per_player_result(game, model, R, members, metas, hist, it, "running", ""))
            if record_pe and pe <= tol:
                status, message = "equilibrium", "PE reached tol: the populations' spans hold an equilibrium"
                break
            if it >= iterations:
                break
            if max_policies is not None and size >= max_policies:
                status, message = "max_policies", "the policy budget is spent"
                break
            n_added = 0
            for p, plans, local in ((0, b0, l0), (1, b1, l1)):
                if max_policies is not None and size + n_added >= max_policies:
                    break
                for col in (0, 1):               # BR(meta-strategy), else BR(restricted Nash)
                    r = plans[:, col]
                    if r.tobytes() in keys[p]:
                        continue
                    keys[p].add(r.tobytes())
                    R[p] = np.column_stack([R[p], r])
                    if matrix:
                        members[p].append(int(model.action_ids(p, local[:, col:col + 1])[0, 0]))
                    else:
                        members[p].append(_one_player_policy(game, model, p, local[:, col]))
                    n_added += 1
                    break
            it += 1
            bar.update(1)
            if n_added == 0:
                status, message = "equilibrium", "no new best response: the restricted Nash is an equilibrium"
                break
    except StopIteration:
        status, message = "callback", "stopped by the callback"
    finally:
        bar.close()
    return _per_player_result(game, model, R, members, metas, hist, it, status, message)


def _per_player_result(game: Any, model: GameModel, R: list, members: list, metas: list, hist: dict, it: int,
                       status: str, message: str) -> Result:
    """The Result of per-player PSRO (also the callback's intermediate result): the fields of :func:`psro`."""
    history = _history_arrays(hist)
    history["candidate_pe"] = None
    s0, s1 = metas[-1]
    if not model.extensive:
        population = (np.asarray(members[0]), np.asarray(members[1]))
        policy = (clean_simplex(R[0][1:] @ s0), clean_simplex(R[1][1:] @ s1))
    else:
        population = (np.stack(members[0]), np.stack(members[1]))
        policy = game.sequence_to_policy(R[0] @ s0, R[1] @ s1)
    return Result(population=population, plans=(R[0].copy(), R[1].copy()), meta_game=R[0].T @ (model.A @ R[1]),
                  meta_strategies=list(metas), strategy=Result(mixture=(s0, s1), policy=policy), history=history,
                  n_iter=it, success=status == "equilibrium", status=status, message=message, variant="psro",
                  populations="per_player")


def _one_player_policy(game: Any, model: GameModel, player: int, local: np.ndarray) -> np.ndarray:
    """A tabular policy whose ``player`` rows are the pure response ``local``; the other rows uniform."""
    pol = game.uniform_policy()
    rows = np.arange(model.n_infosets[player]) + (0 if player == 0 else model.n_infosets[0])
    pol[rows] = 0.0
    pol[rows, model.action_ids(player, local)] = 1.0
    return pol
