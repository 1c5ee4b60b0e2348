"""Nash equilibria of two-player zero-sum games: LP (HiGHS), RM+, CFR+ and double oracle."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
from scipy import optimize, sparse

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import (as_array, check_bool, check_callback, check_int,
                                     check_option, check_options, check_real)
from numtk.games import _games_ext
from numtk.games._exploitability import check_strategy
from numtk.games._lp import _HIGHS_METHODS, LPError, clean_simplex, highs_method_for, payoff_scale, solve_matrix_game
from numtk.games._matrix_games import MatrixGame
from numtk.games._model import MAX_ITER, GameModel, model_of

__all__ = ["nash_equilibrium", "NASH_METHODS", "sequence_form_lp"]

NASH_METHODS = ("lp", "rm+", "cfr+", "double_oracle")


# options['predictive'] = 'auto' in method 'rm+': PRM+ for tol <= _PRM_TOL on games of at most _PRM_ENTRIES entries.
# Iterations to a gap of 1e-6 on random normal games (seeds 0, 1), RM+ / PRM+: 200 x 200 27890 / 7800 and
# 15510 / 7140; 350: 9530 / 9670, 9590 / 7800; 500: 8590 / 8990, 14660 / 11060; 700: 9840 / 9050, 13530 / 9640.
# At 1e-5 and 1e-4 PRM+ took up to 38 % more iterations, and 5-30 % more at 1000 x 1000.
_PRM_TOL = 1e-6
_PRM_ENTRIES = 500_000


def sequence_form_lp(model: GameModel, highs_method: str = "highs") -> tuple[np.ndarray, np.ndarray, float]:
    """Both equilibrium plans and the value of a sequence-form game by one LP.

    ``max_{r0, v} f'v  s.t.  F'v <= A' r0,  E r0 = e,  r0 >= 0``: player 1's best response is
    dualised, and player 1's plan is minus the marginals of the ``<=`` rows.
    """
    s0, _ = model.n_sequences
    nF = model.F.shape[0]
    c = np.r_[np.zeros(s0), -model.f]
    A_ub = sparse.hstack([-model.AT, model.F.T], format="csr")
    A_eq = sparse.hstack([model.E, sparse.csr_array((model.E.shape[0], nF))], format="csr")
    bounds = [(0.0, None)] * s0 + [(None, None)] * nF
    res = optimize.linprog(c, A_ub=A_ub, b_ub=np.zeros(A_ub.shape[0]), A_eq=A_eq, b_eq=model.e, bounds=bounds,
                           method=highs_method_for(A_ub.shape[0] * 4, highs_method))
    if res.status != 0:
        raise LPError(f"HiGHS failed on the sequence-form LP: {res.message}")
    r0 = np.clip(res.x[:s0], 0.0, None)
    r1 = np.clip(-res.ineqlin.marginals, 0.0, None)
    return r0, r1, float(-res.fun)


def _restricted_value(model: GameModel, R0: np.ndarray, R1: np.ndarray, highs_method: str):
    G = R0.T @ (model.A @ R1)
    return solve_matrix_game(G, highs_method=highs_method)


# The double oracle's hand-over to the LP on the whole game. A dense k_r x k_c matrix-game LP costs
# about t0 + a (k_r k_c)^1.5 (dual simplex on random games, measured 25 <= k <= 400: t0 ~ 3 ms for the
# linprog call and the round's best responses, a ~ 1.3e-8 s; _LP_FIXED is t0 / a), and the LP of the
# whole game about the same function of its payoff entries. Once the restricted LPs solved so far
# have cost `lp_switch` times that (modelled, not timed, so that a run is reproducible), the double
# oracle stops and solves the whole game instead: on a dense random game, whose equilibrium support is
# about half the strategies, the double oracle needs ~n/2 rounds whose LPs are re-solved from scratch,
# and it took 610 s at 1000 x 1000 where the LP took 6.4 s. Games with small support (transitive,
# low-rank, spinning tops) finish long before the hand-over. Restricted games of at most
# _SWITCH_MIN_ENTRIES entries (LPs of a millisecond) never trigger it.
_LP_SWITCH = 0.25
_SWITCH_MIN_ENTRIES = 256
_LP_FIXED = 2.5e5


def _lp_cost(entries: float) -> float:
    return float(entries) ** 1.5 + _LP_FIXED


def _full_lp_entries(model: GameModel) -> int:
    if model.extensive:  # the sequence-form LP: A's non-zeros and one column per sequence
        return int(model.A.nnz) + model.n_sequences[0] + model.n_sequences[1]
    return model.dense.size


def _double_oracle(model: GameModel, R0: np.ndarray, R1: np.ndarray, tol: float, max_iter: int,
                   highs_method: str, callback: Callable | None, lp_switch: float | None = None):
    history = []
    matrix = not model.extensive
    if matrix:  # pure strategies as index lists: the restricted game is a sub-matrix, not a product
        ids = [list(np.flatnonzero(R0[1:, :].any(axis=1))), list(np.flatnonzero(R1[1:, :].any(axis=1)))]
        sets = [set(ids[0]), set(ids[1])]
    else:
        keys = [{R0[:, j].tobytes() for j in range(R0.shape[1])}, {R1[:, j].tobytes() for j in range(R1.shape[1])}]
    budget = None if lp_switch is None else lp_switch * _lp_cost(_full_lp_entries(model))
    work = 0.0
    status, message = "max_iterations", "maximum number of iterations reached"
    success, switched = False, False
    for it in range(1, max_iter + 1):
        if matrix:
            G = model.dense[np.ix_(ids[0], ids[1])]
            xs, ys, value = solve_matrix_game(G, highs_method=highs_method)
            x = np.zeros(model.dense.shape[0])
            y = np.zeros(model.dense.shape[1])
            x[ids[0]], y[ids[1]] = xs, ys
            r0, r1 = model.strategy_plan(x), model.strategy_plan(y)
            size = G.size
        else:
            x, y, value = _restricted_value(model, R0, R1, highs_method)
            r0, r1 = R0 @ x, R1 @ y
            size = x.size * y.size
        work += _lp_cost(size)
        v0, b0, _ = model.best_response(0, r1)
        v1, b1, _ = model.best_response(1, r0)
        gap = max(v0 + v1, 0.0)
        history.append(gap)
        if matrix:
            i_new, j_new = int(np.argmax(b0[1:])), int(np.argmax(b1[1:]))
            new0, new1 = i_new not in sets[0], j_new not in sets[1]
        else:
            new0 = b0.tobytes() not in keys[0]
            new1 = b1.tobytes() not in keys[1]
        if callback is not None:
            try:
                callback(Result(plans=(r0, r1), value=value, gap=gap, n_iter=it))
            except StopIteration:
                status, message = "callback", "stopped by the callback"
                break
        if gap <= tol:
            status, message, success = "converged", "gap below tol", True
            break
        if not (new0 or new1):
            status, message, success = ("equilibrium", "no new best response: the restricted equilibrium is an "
                                        "equilibrium", True)
            break
        if budget is not None and size > _SWITCH_MIN_ENTRIES and work > budget:
            switched = True
            break
        if matrix:
            for p, new, k in ((0, new0, i_new), (1, new1, j_new)):
                if new:
                    ids[p].append(k)
                    sets[p].add(k)
        else:
            if new0:
                R0 = np.column_stack([R0, b0])
                keys[0].add(b0.tobytes())
            if new1:
                R1 = np.column_stack([R1, b1])
                keys[1].add(b1.tobytes())
    sizes = (len(ids[0]), len(ids[1])) if matrix else (R0.shape[1], R1.shape[1])
    if switched:
        if matrix:
            x, y, value = solve_matrix_game(model.dense, highs_method=highs_method)
            r0, r1 = model.strategy_plan(x), model.strategy_plan(y)
        else:
            r0, r1, value = sequence_form_lp(model, "highs" if highs_method == "auto" else highs_method)
        status, success = "optimal", True
        message = (f"switched to the LP on the whole game after {it} double-oracle rounds (restricted game "
                   f"{sizes[0]} x {sizes[1]}, gap {gap:.3g}): the restricted LPs had cost more than "
                   f"options['lp_switch'] = {lp_switch:g} times the whole LP's modelled cost")
    return r0, r1, value, it, success, status, message, np.asarray(history), sizes


@constraints(game="option", method="option", tol="real>=0", max_iter="int>=1", rng="rng", callback="callable",
             options="option")
def nash_equilibrium(game: Any, method: str = "lp", *, tol: float | None = None, max_iter: int | None = None,
                     rng: Any = None, callback: Callable | None = None, options: dict | None = None) -> Result:
    """A Nash equilibrium of a two-player zero-sum game.

    Parameters
    ----------
    game : MatrixGame or extensive-form game
        Zero-sum (a constant-sum matrix game is shifted to zero-sum).
    method : {'lp', 'rm+', 'cfr+', 'double_oracle'}
        ``'lp'`` (default): exact, by HiGHS through :func:`scipy.optimize.linprog`; one LP gives
        both players' strategies (the second from the duals); extensive-form games use the
        sequence-form LP (Koller, Megiddo & von Stengel). ``'rm+'``: Regret Matching+ with
        alternating updates and linear averaging (matrix games; compiled; when ``tol`` is at least
        9.5e-7 max|A| it iterates on a float32 copy of the payoffs, half the memory traffic, and
        still certifies the gap on the float64 payoffs). ``'cfr+'``: CFR+ in
        sequence form (compiled; on a matrix game it is RM+). ``'double_oracle'``: McMahan, Gordon &
        Blum's restricted-game iteration with exact best responses (matrix and extensive-form); it
        hands over to the LP on the whole game when its restricted LPs grow too costly (see
        ``options`` and the Notes).
    tol : float, optional
        Target NashConv (payoff units, finite, >= 0) of the iterative methods. Defaults: 1e-6
        ('rm+', 'cfr+'), 1e-9 ('double_oracle').
    max_iter : int, optional
        Iteration cap (1 to 1e8): 100000 for 'rm+', 1000 for 'cfr+', 10000 for 'double_oracle'.
        ``tol``, ``max_iter``, ``rng`` and ``callback`` are validated whatever the method, also
        where it does not use them.
    rng : None, int or numpy.random.Generator
        Double oracle only: with an ``rng``, a matrix game's starting strategies are drawn at random
        (default: the first strategy of each player; extensive-form games start from uniform).
    callback : callable, optional
        ``callback(intermediate_result)``, called by double oracle after each iteration (the
        compiled methods and the LP do not call it) with a Result of fields ``plans`` (the
        restricted equilibrium's realization plans ``(r0, r1)``; ``(1, x)`` and ``(1, y)`` for a
        matrix game), ``value`` (the restricted game's value), ``gap`` (the NashConv of those
        plans) and ``n_iter``. Raising ``StopIteration`` stops the run, which then returns normally
        with ``status='callback'``.
    options : dict, optional
        'lp': ``highs_method`` ('auto' picks dual simplex up to 2.5e5 matrix entries and interior
        point above; extensive-form games default to 'highs'). 'rm+': ``predictive`` (PRM+; 'auto',
        the default, uses it for ``tol <= 1e-6`` on games of at most 5e5 entries, see the Notes),
        ``check_every`` (10), ``x0``, ``y0``. 'cfr+': ``delay`` (0), ``check_every`` (10).
        'double_oracle': ``highs_method`` (of the restricted LPs and of the LP it may hand over to)
        and ``lp_switch`` (0.25, a real >= 0, or None): once the restricted LPs solved so far have
        cost more than ``lp_switch`` times the LP on the whole game, by the cost model
        ``(payoff entries)**1.5`` plus a fixed cost per LP (modelled, not timed, so that runs are
        reproducible; restricted games of at most 256 entries never count), the double oracle
        stops and solves that LP instead (``status='optimal'``, and ``message`` says so). None
        never hands over.

    Returns
    -------
    res : Result
        With fields

        strategies : tuple of ndarray, or ndarray
            Matrix game: ``(x, y)``, the players' mixed strategies. Extensive-form game: one
            tabular policy holding both players' rows.
        plans : tuple of ndarray or None
            Extensive-form game: the realization plans ``(r0, r1)``. None for a matrix game.
        value : float
            The value of the returned profile for player 0.
        gap : float
            The NashConv of the returned profile, always recomputed exactly by best response.
        exploitability : float
            ``gap / 2``.
        n_iter : int
            Iterations run: 1 for ``'lp'`` (one LP solve); for the others, RM+/CFR+ iterations or
            double-oracle rounds.
        success : bool
            True when ``status`` is ``'optimal'``, ``'converged'`` or ``'equilibrium'``.
        status : str
            ``'optimal'`` (``'lp'``, or ``'double_oracle'`` after handing over: HiGHS solved the
            LP of the whole game), ``'converged'`` (the gap reached
            ``tol``), ``'equilibrium'`` (double oracle: no new best response, which certifies the
            restricted equilibrium), ``'max_iterations'`` (``max_iter`` reached first) or
            ``'callback'`` (stopped by the callback).
        message : str
            A sentence describing ``status``.
        method : str
            The method used.
        history : ndarray
            The gaps of the iterative methods (every ``check_every`` iterations for RM+ and CFR+,
            every round for double oracle); empty for ``'lp'``.
        time : float
            Wall-clock seconds.

    Notes
    -----
    The LP returns a vertex: when the equilibrium is not unique this is *an* equilibrium, not a
    canonical one.

    Which method: ``'lp'`` is exact and, on dense games up to a few hundred strategies, the
    fastest to a tight gap. ``'double_oracle'`` wins by orders of magnitude where the equilibrium
    support is small (transitive, low-rank and spinning-top games: 2 to 25 rounds and 0.05 to
    0.5 s at 1000 x 1000, where the LP takes 4 to 6 s), and loses where the support is about
    half the strategies (dense random games, poker): each round re-solves a restricted LP from
    scratch and adds one strategy per player, so it would need about n/2 rounds (610 s at 1000 x
    1000 against 6.4 s for the LP, 55 s against 0.16 s on Leduc poker). There, the hand-over to
    the LP (``options['lp_switch']``) bounds its time to about twice the LP's (1.3 to 3 times,
    measured at 200 to 1000 strategies). ``'rm+'`` (first order) beats the LP on large dense
    games: at 1000 x 1000 it reaches a gap of 1e-6 in about 5,000 iterations, 7 to 13 times
    sooner. On small games to a tight gap it needs far more iterations (15,000 to 33,000 at
    200 x 200 for 1e-6, 4 to 6 times the LP's time; each iteration costs about four
    matrix-vector products of the same matrix, so a faster kernel could not close the gap).
    PRM+ (``options={'predictive': True}``) needs 5,700 to 7,800 there and is level with the
    LP, but 5 to 30% more than RM+ at 1000 x 1000 or at a gap of 1e-4 or 1e-5 (up to 38% more at
    350 x 350, 1e-5). So 'auto' uses PRM+ for a gap of 1e-6 or less on games of at most 5e5
    entries (measured on random games of 200 to 700 strategies: at most 5% more iterations than
    RM+, up to 3.6 times fewer) and RM+ otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games import KuhnPoker, MatrixGame, nash_equilibrium, rock_paper_scissors
    >>> res = nash_equilibrium(rock_paper_scissors(bias=(0.5, 0.25, 0.05)))
    >>> (res.strategies[0] * 16).round(6)
    array([ 1., 10.,  5.])
    >>> res = nash_equilibrium(MatrixGame([[2, 1, 5], [-3, -4, -2]]))
    >>> round(res.value, 9), res.strategies[1]
    (1.0, array([0., 1., 0.]))
    >>> res = nash_equilibrium(KuhnPoker())
    >>> round(res.value, 9), res.gap < 1e-9                # -1/18
    (-0.055555556, True)
    """
    method = check_option(method, "method", NASH_METHODS)
    # Every keyword is checked when given, whether or not ``method`` uses it.
    if tol is not None:
        tol = check_real(tol, "tol", low=0.0)
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", minimum=1, maximum=MAX_ITER)
    gen = None if rng is None else normalize_rng(rng)
    check_callback(callback)
    options = check_options(options)
    model = model_of(game)
    matrix = isinstance(game, MatrixGame)
    t0 = time.perf_counter()
    history = np.empty(0)
    n_iter, success, status, message = 1, True, "optimal", "optimal (HiGHS)"
    r0 = r1 = None

    if method == "lp":
        highs_method = _highs(options.pop("highs_method", "auto" if matrix else "highs"))
        _no_options(options)
        if matrix:
            x, y, value = solve_matrix_game(model.dense, highs_method=highs_method)
            r0, r1 = model.strategy_plan(x), model.strategy_plan(y)
        else:
            r0, r1, value = sequence_form_lp(model, highs_method)
    elif method == "rm+" or (method == "cfr+" and matrix):
        if not matrix:
            raise ValueError("`method='rm+'` solves matrix games; use 'cfr+' for extensive-form games")
        tol = 1e-6 if tol is None else tol
        max_iter = 100_000 if max_iter is None else max_iter
        m, n = model.dense.shape
        predictive = options.pop("predictive", "auto")
        if isinstance(predictive, str) and predictive == "auto":
            predictive = tol <= _PRM_TOL and m * n <= _PRM_ENTRIES
        predictive = check_bool(predictive, "options['predictive']")
        check_every = check_int(options.pop("check_every", 10), "options['check_every']", minimum=1,
                                maximum=MAX_ITER)
        x0 = _start(options.pop("x0", None), m, "options['x0']")
        y0 = _start(options.pop("y0", None), n, "options['y0']")
        _no_options(options)
        # RM+ is invariant under scaling the payoffs; tiny (denormal) or huge ones are scaled first.
        scale = payoff_scale(model.dense)
        dense = model.dense if scale == 1.0 else model.dense / scale
        x, y, n_iter, gap, history = _games_ext.rm_plus(
            dense, max_iter=max_iter, tol=tol / scale, check_every=check_every, predictive=predictive,
            x0=x0, y0=y0)
        gap, history = gap * scale, np.asarray(history) * scale
        r0, r1 = model.strategy_plan(clean_simplex(x)), model.strategy_plan(clean_simplex(y))
        value = model.expected_payoff(r0, r1)
        success, status, message = _tol_status(gap <= tol)
    elif method == "cfr+":
        tol = 1e-6 if tol is None else tol
        max_iter = 1000 if max_iter is None else max_iter
        delay = check_int(options.pop("delay", 0), "options['delay']", minimum=0, maximum=MAX_ITER)
        check_every = check_int(options.pop("check_every", 10), "options['check_every']", minimum=1,
                                maximum=MAX_ITER)
        _no_options(options)
        r0, r1, n_iter, gap, history, _ = model.native.cfr_plus(max_iter, tol, check_every, delay)
        value = model.expected_payoff(r0, r1)
        success, status, message = _tol_status(gap <= tol)
    else:  # double oracle
        tol = 1e-9 if tol is None else tol
        max_iter = 10_000 if max_iter is None else max_iter
        highs_method = _highs(options.pop("highs_method", "auto"))
        lp_switch = options.pop("lp_switch", _LP_SWITCH)
        if lp_switch is not None:
            lp_switch = check_real(lp_switch, "options['lp_switch']", low=0.0)
        _no_options(options)
        if matrix:
            m, n = model.dense.shape
            if gen is None:
                i0, j0 = 0, 0
            else:
                i0, j0 = int(gen.integers(m)), int(gen.integers(n))
            R0, R1 = model.pure_plans([i0], 0), model.pure_plans([j0], 1)
        else:
            R0, R1 = (p[:, None] for p in game.policy_to_sequence(game.uniform_policy()))
        r0, r1, value, n_iter, success, status, message, history, sizes = _double_oracle(
            model, R0, R1, tol, max_iter, highs_method, callback, lp_switch)
    gap = max(model.nash_conv_of_plans(r0, r1), 0.0)
    if matrix:
        strategies, plans = (clean_simplex(r0[1:]), clean_simplex(r1[1:])), None
    else:
        strategies, plans = game.sequence_to_policy(r0, r1), (r0, r1)
    return Result(strategies=strategies, plans=plans, value=float(value), gap=gap, exploitability=gap / 2,
                  n_iter=int(n_iter), success=bool(success), status=status, message=message, method=method,
                  history=np.asarray(history), time=time.perf_counter() - t0)


def _tol_status(reached: bool) -> tuple[bool, str, str]:
    if reached:
        return True, "converged", "gap below tol"
    return False, "max_iterations", "maximum number of iterations reached"


def _highs(value: Any) -> str:
    return check_option(value, "options['highs_method']", _HIGHS_METHODS)


def _start(value: Any, length: int, name: str) -> np.ndarray | None:
    """A starting strategy of RM+ (None: uniform), as a float64 vector. Entries down to -1e-9 (rounding
    noise) are accepted and clipped to 0, as the compiled kernel does."""
    if value is None:
        return None
    arr = np.array(as_array(value, name), dtype=np.float64)
    return check_strategy(np.where(arr >= -1e-9, np.maximum(arr, 0.0), arr), length, name)


def _no_options(options: dict) -> None:
    if options:
        raise ValueError(f"`options`: unknown keys {sorted(options)} for this method")
