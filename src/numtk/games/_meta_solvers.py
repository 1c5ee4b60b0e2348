"""Meta-solvers: the mixture over a population that PSRO plays next, computed from the meta-game.

Two kinds of meta-game (spec §5):

- **shared** populations (each member plays both seats): ``G`` is square and antisymmetric,
  ``G[i, j]`` = member ``i``'s expected payoff against member ``j`` with random seats; one mixture
  ``sigma`` serves both seats;
- **per-player** populations (OpenSpiel's ``psro_v2`` default): ``G = R0' A R1`` is ``(k0, k1)``, the
  payoff to player 0 (the row player) of a zero-sum game; the result is ``(sigma0, sigma1)``.

The payoff tables the dynamics need are built here from ``G`` (``[G, -G]``, both laid out
``[row member, column member]``), never taken from the caller, so the sign error of passing
``[G, -G^T]`` cannot happen through this API.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Union

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg as sla

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_options, check_real
from numtk.games import _games_ext
from numtk.games._lp import payoff_scale, solve_matrix_game
from numtk.games._model import MAX_ITER
from numtk.games._matrix_games import MatrixGame, _payoff_matrix, as_zero_sum

__all__ = ["meta_strategy", "META_SOLVERS"]

META_SOLVERS = ("nash", "uniform", "prd", "alpha_rank", "rm+")

_POPULATIONS = ("shared", "per_player")
_HIGHS = ("auto", "highs", "highs-ds", "highs-ipm")
_DEFAULTS: dict[str, dict[str, Any]] = {
    "nash": {"highs_method": "auto"},
    "uniform": {},
    "prd": {"iterations": 100_000, "dt": 1e-3, "gamma": 1e-6},
    "alpha_rank": {"alpha": 100.0, "m": 50, "inf_alpha": False, "epsilon": 0.01},
    "rm+": {"iterations": 1000, "tol": 0.0, "predictive": False, "check_every": 10},
}
_REL_TOL = 1e-12          # antisymmetry test, relative to max(1, max|G|)
_SIMPLEX_TOL = 1e-6       # what a callable meta-solver's output may miss the simplex by
_MAX_M = 10**9            # alpha-rank's population size m
_MAX_PROFILES = 10_000    # alpha-rank, per-player: the dense chain on k0 * k1 profiles (800 MB at the cap)

Strategy = Union[np.ndarray, "tuple[np.ndarray, np.ndarray]"]


def _opt(name: str) -> str:
    """How the messages name an option: ``options['name']``."""
    return f"options['{name}']"


# --------------------------------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------------------------------
def _is_antisymmetric(G: np.ndarray) -> bool:
    if G.shape[0] != G.shape[1]:
        return False
    tol = _REL_TOL * max(1.0, float(np.max(np.abs(G))))
    return bool(np.max(np.abs(G + G.T)) <= tol)


def _prepare(meta_game: Any, populations: str | None) -> tuple[np.ndarray, bool]:
    """The zero-sum row matrix (antisymmetrised when shared) and whether the populations are shared."""
    if populations is not None:
        check_option(populations, "populations", _POPULATIONS)
    if isinstance(meta_game, MatrixGame):
        G = np.array(as_zero_sum(meta_game, "meta_game"))
    else:
        G = _payoff_matrix(meta_game, "meta_game")
    antisym = _is_antisymmetric(G)
    shared = antisym if populations is None else populations == "shared"
    if shared:
        if not antisym:
            raise ValueError(f"`meta_game` must be square and antisymmetric (G = -G.T) for "
                             f"populations='shared'; got shape {G.shape}"
                             + ("" if G.shape[0] != G.shape[1] else
                                f" with max|G + G.T| = {float(np.max(np.abs(G + G.T))):.3g}"))
        G = 0.5 * (G - G.T)  # exactly antisymmetric
    return G, shared


def _options(method: str, given: Any) -> dict[str, Any]:
    """The method's options: the defaults updated by ``given`` (a dict or None), unknown keys refused."""
    given = check_options(given)
    defaults = _DEFAULTS[method]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        accepted = ", ".join(repr(k) for k in defaults) or "none"
        raise ValueError(f"`options`: unknown key(s) {', '.join(repr(k) for k in unknown)} for "
                         f"method={method!r}; it accepts {accepted}")
    return {**defaults, **given}


def _clean(sigma: Any, length: int, what: str) -> np.ndarray:
    """A probability vector of the given length, within _SIMPLEX_TOL, clipped and renormalised."""
    try:
        s = np.asarray(sigma, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a probability vector; got {type(sigma).__name__}") from None
    if s.shape != (length,):
        raise ValueError(f"{what} must have shape ({length},); got {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError(f"{what} must be finite")
    if s.min() < -_SIMPLEX_TOL or abs(s.sum() - 1.0) > _SIMPLEX_TOL:
        raise ValueError(f"{what} must be a probability vector (entries >= 0 summing to 1 within "
                         f"{_SIMPLEX_TOL:g}); got min {s.min():.3g}, sum {s.sum():.12g}")
    s = np.clip(s, 0.0, None)
    return s / s.sum()


# --------------------------------------------------------------------------------------------------
# the methods
# --------------------------------------------------------------------------------------------------
def _prd(G: np.ndarray, iterations: Any, dt: Any, gamma: Any):
    iterations = check_int(iterations, _opt("iterations"), minimum=1, maximum=MAX_ITER)
    dt = check_real(dt, _opt("dt"), low=0.0, low_open=True)
    gamma = check_real(gamma, _opt("gamma"), low=0.0)
    k0, k1 = G.shape
    if gamma * max(k0, k1) >= 1.0:
        raise ValueError(f"`{_opt('gamma')}` must be < 1 / {max(k0, k1)} (one over the number of strategies); "
                         f"got {gamma}")
    x0, x1 = np.full(k0, 1.0 / k0), np.full(k1, 1.0 / k1)
    # Both tables [row member, column member]: player 1's payoff in a zero-sum game is -G, not -G.T.
    avg0, avg1, _, _ = _games_ext.projected_replicator_dynamics(G, -G, x0, x1, iterations, dt, gamma)
    return avg0, avg1, iterations


def _fixation(u: np.ndarray, m: int) -> np.ndarray:
    """rho(u) = (1 - e^-u) / (1 - e^-mu) without overflow; 1/m where |u| < 1e-14."""
    u = np.asarray(u, dtype=np.float64)
    rho = np.full(u.shape, 1.0 / m)
    pos = u >= 1e-14
    neg = u <= -1e-14
    with np.errstate(under="ignore"):
        rho[pos] = np.expm1(-u[pos]) / np.expm1(-m * u[pos])
        un = u[neg]  # multiply through by e^{mu}: e^{(m-1)u} (e^u - 1) / (e^{mu} - 1)
        rho[neg] = np.exp((m - 1) * un) * (np.expm1(un) / np.expm1(m * un))
    return rho


def _jump(d: np.ndarray, alpha: float, m: int, inf_alpha: bool, epsilon: float, tie: float) -> np.ndarray:
    """Fixation probabilities of payoff differences d = f(mutant) - f(resident) (finite alpha), or the
    infinite-alpha rule (1 - eps if d > 0, 1/2 on a tie, eps if d < 0)."""
    if inf_alpha:
        return np.where(np.abs(d) <= tie, 0.5, np.where(d > 0, 1.0 - epsilon, epsilon))
    return _fixation(alpha * d, m)


def _stationary(C: np.ndarray) -> np.ndarray:
    """Stationary distribution of the row-stochastic C: pi'(C - I) = 0, sum(pi) = 1, by a dense solve.

    The chain has a single closed class (every pair of states is joined in at least one direction
    with probability >= eta / m), so replacing one balance equation by sum(pi) = 1 leaves a
    non-singular system. A sparse LU is no help: on the per-player chain its fill-in is dense.
    """
    K = C.shape[0]
    M = (C - np.eye(K)).T
    M[-1, :] = 1.0
    rhs = np.zeros(K)
    rhs[-1] = 1.0
    try:
        pi = sla.solve(M, rhs, check_finite=False)
    except (np.linalg.LinAlgError, sla.LinAlgError):
        pi = np.full(K, np.nan)
    if not np.isfinite(pi).all() or pi.min() < -1e-8:
        # Ill-conditioned: least squares on all K + 1 equations.
        M = np.vstack([(C - np.eye(K)).T, np.ones((1, K))])
        rhs = np.zeros(K + 1)
        rhs[-1] = 1.0
        try:
            pi = np.linalg.lstsq(M, rhs, rcond=None)[0]
        except (np.linalg.LinAlgError, ValueError):
            raise ValueError("`meta_game`: alpha-rank's Markov chain could not be solved (SVD did not "
                             "converge); rescale the payoffs or lower `alpha`") from None
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def _alpha_rank_single(G: np.ndarray, alpha: float, m: int, inf_alpha: bool, epsilon: float) -> np.ndarray:
    k = G.shape[0]
    if k == 1:
        return np.ones(1)
    tie = _REL_TOL * max(1.0, float(np.max(np.abs(G))))
    D = G - G.T                                        # D[r, s] = G_rs - G_sr (mutant r, resident s)
    rho = _jump(D, alpha, m, inf_alpha, epsilon, tie)  # rho[r, s]
    C = rho.T / (k - 1)                                # C[s, r] = eta * rho_{r,s}
    np.fill_diagonal(C, 0.0)
    np.fill_diagonal(C, 1.0 - C.sum(axis=1))
    return _stationary(C)


def _alpha_rank_multi(G: np.ndarray, alpha: float, m: int, inf_alpha: bool,
                      epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    k0, k1 = G.shape
    if k0 + k1 == 2:
        return np.ones(1), np.ones(1)
    K = k0 * k1                                  # profile (i, j) is state i * k1 + j
    if K > _MAX_PROFILES:
        raise ValueError(f"alpha_rank on per-player populations solves a dense Markov chain on k0 * k1 "
                         f"profiles; {k0} * {k1} = {K} exceeds {_MAX_PROFILES}")
    eta = 1.0 / ((k0 - 1) + (k1 - 1))
    tie = _REL_TOL * max(1.0, float(np.max(np.abs(G))))
    A, B = G, -G                                 # both [row member, column member]
    I, J = np.meshgrid(np.arange(k0), np.arange(k1), indexing="ij")
    rows, cols, vals = [], [], []
    # Population 0 moves (i, j) -> (r, j): gain A[r, j] - A[i, j].
    for r in range(k0):
        d = A[r, :][None, :] - A                 # d[i, j]
        mask = I != r
        rows.append((I * k1 + J)[mask])
        cols.append((r * k1 + J)[mask])
        vals.append(eta * _jump(d[mask], alpha, m, inf_alpha, epsilon, tie))
    # Population 1 moves (i, j) -> (i, c): gain B[i, c] - B[i, j].
    for c in range(k1):
        d = B[:, c][:, None] - B
        mask = J != c
        rows.append((I * k1 + J)[mask])
        cols.append((I * k1 + c)[mask])
        vals.append(eta * _jump(d[mask], alpha, m, inf_alpha, epsilon, tie))
    rows_a, cols_a, vals_a = (np.concatenate(v) for v in (rows, cols, vals))
    C = np.zeros((K, K))
    C[rows_a, cols_a] = vals_a
    C[np.arange(K), np.arange(K)] = 1.0 - np.bincount(rows_a, weights=vals_a, minlength=K)
    pi = _stationary(C).reshape(k0, k1)
    s0, s1 = pi.sum(axis=1), pi.sum(axis=0)
    return s0 / s0.sum(), s1 / s1.sum()


def _alpha_rank(G: np.ndarray, shared: bool, alpha: Any, m: Any, inf_alpha: Any, epsilon: Any):
    alpha = check_real(alpha, _opt("alpha"), low=0.0)
    m = check_int(m, _opt("m"), minimum=2, maximum=_MAX_M)
    inf_alpha = check_bool(inf_alpha, _opt("inf_alpha"))
    epsilon = check_real(epsilon, _opt("epsilon"), low=0.0, high=1.0, low_open=True, high_open=True)
    if shared:
        return _alpha_rank_single(G, alpha, m, inf_alpha, epsilon)
    return _alpha_rank_multi(G, alpha, m, inf_alpha, epsilon)


def _rm_plus(G: np.ndarray, iterations: Any, tol: Any, predictive: Any, check_every: Any):
    iterations = check_int(iterations, _opt("iterations"), minimum=1, maximum=MAX_ITER)
    tol = check_real(tol, _opt("tol"), low=0.0)
    predictive = check_bool(predictive, _opt("predictive"))
    check_every = check_int(check_every, _opt("check_every"), minimum=1, maximum=MAX_ITER)
    # RM+ is invariant under scaling the payoffs; tiny (denormal) or huge ones are scaled first.
    scale = payoff_scale(G)
    x, y, n_iter, gap, _ = _games_ext.rm_plus(G if scale == 1.0 else G / scale, max_iter=iterations,
                                              tol=tol / scale, check_every=check_every, predictive=predictive)
    return x, y, int(n_iter), float(gap) * scale, tol


def _call(method: Callable, G: np.ndarray, shared: bool, rng: Any, options: dict[str, Any]) -> Strategy:
    kwargs = dict(options)
    try:
        params = inspect.signature(method).parameters.values()
        takes_rng = any(p.name == "rng" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    except (TypeError, ValueError):  # builtins without a signature
        takes_rng = False
    gen = normalize_rng(rng)  # validated even when the callable does not take it
    if takes_rng:
        kwargs["rng"] = gen
    view = G.copy()
    view.flags.writeable = False
    out = method(view, **kwargs)
    k0, k1 = G.shape
    if shared:
        return _clean(out, k0, "the meta-solver callable's output")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError("the meta-solver callable must return a pair (sigma0, sigma1) for per-player "
                         f"populations; got {type(out).__name__}")
    return (_clean(out[0], k0, "the meta-solver callable's sigma0"),
            _clean(out[1], k1, "the meta-solver callable's sigma1"))


# --------------------------------------------------------------------------------------------------
# public
# --------------------------------------------------------------------------------------------------
@constraints(meta_game="array2d", method=("option", "callable"), populations="option", rng="rng",
             options="option")
def meta_strategy(meta_game: ArrayLike | MatrixGame, method: str | Callable = "nash", *,
                  populations: str | None = None, rng: Any = None, options: dict | None = None) -> Result:
    r"""The meta-strategy of a population: the mixture a PSRO iteration plays, from the meta-game.

    Parameters
    ----------
    meta_game : array_like, shape (k, k) or (k0, k1), or MatrixGame
        The meta-game's payoffs to player 0 (the row player) of a zero-sum game. For **shared**
        populations, ``G[i, j]`` is member ``i``'s expected payoff against member ``j`` with random
        seats, and ``G`` is antisymmetric. For **per-player** populations, ``G = R0' A R1`` is
        ``(k0, k1)``: rows are player 0's members, columns player 1's. A zero-sum (or constant-sum,
        then shifted) :class:`MatrixGame` is accepted too.
    method : {'nash', 'uniform', 'prd', 'alpha_rank', 'rm+'} or callable, optional
        - ``'nash'`` (default): a Nash equilibrium of ``G`` from one HiGHS LP (the simplex vertex,
          deterministic; *a* Nash equilibrium when there are several). Option ``highs_method``
          (``'auto'``, ``'highs'``, ``'highs-ds'``, ``'highs-ipm'``).
        - ``'uniform'``: ``1 / k``. No options.
        - ``'prd'``: projected replicator dynamics, the average of the iterates (OpenSpiel's
          defaults). Options ``iterations=100000``, ``dt=1e-3``, ``gamma=1e-6`` (the floor of every
          probability). Not an exact solver.
        - ``'alpha_rank'``: the stationary distribution of alpha-Rank's Markov chain (single
          population on members when shared; multi-population on profiles when per-player, whose
          marginals are returned). Options ``alpha=100``, ``m=50`` (population size),
          ``inf_alpha=False`` and ``epsilon=0.01`` (the infinite-alpha variant's noise). Not a Nash
          solver.
        - ``'rm+'``: RM+ with alternating updates and linear averaging, for ``iterations=1000``
          iterations or until the NashConv of the averages is ``<= tol`` (``tol=0.0``: run them all);
          options ``predictive=False`` (PRM+), ``check_every=10``.
        - a callable ``f(G, **options)`` returning ``sigma`` (shared) or ``(sigma0, sigma1)``
          (per-player). Its output is checked (shape; a probability vector within 1e-6) and
          renormalised. It receives ``rng`` too if its signature takes it.
    populations : {None, 'shared', 'per_player'}, optional
        ``None`` (default) decides from ``G``: shared when it is square and antisymmetric (within
        1e-12 relative), per-player otherwise. The field ``populations`` of the result says which
        was used.
    rng : {None, int, numpy.random.Generator}, optional
        Passed to a callable ``method`` that accepts it; the built-in methods are deterministic.
    options : dict, optional
        The method's options listed above (for a callable, the keywords it is called with); an
        unknown key raises ``ValueError``. Iteration counts (``iterations``, ``check_every``) are at
        most 1e8 and alpha-Rank's ``m`` at most 1e9.

    Returns
    -------
    res : Result
        With fields

        strategies : tuple of ndarray, shapes (k0,) and (k1,)
            ``(sigma0, sigma1)``, the mixtures of players 0 and 1 over their members. For shared
            populations both are the same mixture (over the members, for both seats), as two
            arrays.
        populations : str
            ``'shared'`` or ``'per_player'``: how the meta-game was read.
        method : str or callable
            The method used.
        n_iter : int or None
            Iterations run by ``'prd'`` and ``'rm+'``; None for the other methods.
        success : bool
            False only when ``'rm+'`` with ``tol > 0`` used all its iterations without reaching it.
        status : str
            ``'optimal'`` (``'nash'``: HiGHS solved the LP), ``'done'`` (a method without a
            tolerance ran to completion: ``'uniform'``, ``'prd'``, ``'alpha_rank'``, ``'rm+'`` with
            ``tol=0``, a callable), ``'converged'`` (``'rm+'`` reached ``tol``) or
            ``'max_iterations'`` (``'rm+'`` did not).
        message : str
            A sentence describing ``status``.

    Raises
    ------
    ValueError
        An unknown ``method``, ``populations`` or option, an invalid meta-game (not 2-D, empty,
        non-finite, not antisymmetric with ``populations='shared'``, general-sum), an option out of
        range, or a callable whose output is not a probability vector of the right length.
    TypeError
        An option, ``options`` or ``meta_game`` of the wrong type.

    Notes
    -----
    Player 0 is the row player and values are player 0's. PRD and alpha-Rank need both players'
    payoff tables; they are built here as ``[G, -G]``, both laid out ``[row member, column member]``
    (OpenSpiel's layout), so the GlobalPSRO sign error (``[G, -G^T]``, which makes player 1 maximise
    player 0's payoff when ``G`` is antisymmetric) cannot be made through this function.

    For shared populations, ``'rm+'`` returns the average of the row and column averages; with
    ``gap`` their NashConv, every member's payoff against that mixture is at most ``gap / 2``
    (its exploitability in the symmetric game, ``max_i (G sigma)_i``).

    alpha-Rank's fixation probability ``rho(u) = (1 - e^{-u}) / (1 - e^{-m u})`` is evaluated as
    ``e^{(m-1)u} expm1(u) / expm1(m u)`` for ``u < 0``, which does not overflow at large ``alpha``.
    The chain is solved by a dense linear solve: k states when shared, k0 * k1 profiles (at most
    10000) when per-player, O((k0 k1)^3) time.

    References
    ----------
    .. [1] M. Lanctot et al., "A Unified Game-Theoretic Approach to Multiagent Reinforcement
       Learning", NeurIPS 2017, arXiv:1711.00832 (PSRO, PRD).
    .. [2] S. Omidshafiei et al., "alpha-Rank: Multi-Agent Evaluation by Evolution", Scientific
       Reports 9, 2019, arXiv:1903.01373.
    .. [3] O. Tammelin, "Solving Large Imperfect Information Games Using CFR+", arXiv:1407.5042.
    .. [4] C. Wang et al., "Global Policy-Space Response Oracles for Two-Player Zero-Sum Games",
       ICML 2026, arXiv:2605.28273.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games._matrix_games import rock_paper_scissors
    >>> from numtk.games._meta_solvers import meta_strategy
    >>> G = rock_paper_scissors(bias=(0.5, 0.25, 0.05)).payoffs[0]
    >>> res = meta_strategy(G, "nash")                     # shared: G is antisymmetric
    >>> res.populations, res.strategies[0] * 16            # the NE (1, 10, 5) / 16
    ('shared', array([ 1., 10.,  5.]))
    >>> np.round(meta_strategy(G, "prd").strategies[0], 4)     # PRD is close, not exact
    array([0.0547, 0.6374, 0.308 ])
    >>> np.round(meta_strategy(G, "alpha_rank", options={"alpha": 1.0}).strategies[0], 5)
    array([0.1744 , 0.71704, 0.10856])
    >>> res = meta_strategy([[2, 1, 5], [-3, -4, -2]])    # per-player: (sigma0, sigma1)
    >>> res.populations, res.strategies
    ('per_player', (array([1., 0.]), array([0., 1., 0.])))
    >>> meta_strategy(G, lambda G: np.ones(3) / 3).strategies[0]
    array([0.33333333, 0.33333333, 0.33333333])
    """
    G, shared = _prepare(meta_game, populations)
    kind = "shared" if shared else "per_player"
    k0, k1 = G.shape

    def result(x, y, status, message, n_iter=None, success=True):
        return Result(strategies=(x, y.copy() if y is x else y), populations=kind, method=method,
                      n_iter=n_iter, success=bool(success), status=status, message=message)

    if callable(method):
        out = _call(method, G, shared, rng, check_options(options))
        x, y = (out, out) if shared else out
        return result(x, y, "done", "the callable's mixture, checked and renormalised")
    if not isinstance(method, str) or method not in META_SOLVERS:
        listed = ", ".join(repr(s) for s in META_SOLVERS)
        raise ValueError(f"`method` must be one of {listed} or a callable; got {method!r}")
    normalize_rng(rng)  # validated for a uniform interface, unused by the built-in methods
    opts = _options(method, options)

    if method == "nash":
        check_option(opts["highs_method"], _opt("highs_method"), _HIGHS)
        x, y, _ = solve_matrix_game(G, highs_method=opts["highs_method"])
        return result(x, x if shared else y, "optimal", "optimal (HiGHS)")
    if method == "uniform":
        x, y = np.full(k0, 1.0 / k0), np.full(k1, 1.0 / k1)
        return result(x, x if shared else y, "done", "the uniform mixture")
    if method == "alpha_rank":
        out = _alpha_rank(G, shared, **opts)
        x, y = (out, out) if shared else out
        return result(x, y, "done", "the stationary distribution of alpha-Rank's Markov chain")
    if method == "prd":
        x, y, n_iter = _prd(G, **opts)
        status, message, success = "done", f"ran {n_iter} iterations of projected replicator dynamics", True
    else:  # "rm+"
        x, y, n_iter, gap, tol = _rm_plus(G, **opts)
        if tol == 0.0:
            status, message, success = "done", f"ran {n_iter} iterations (tol = 0)", True
        elif gap <= tol:
            status, message, success = "converged", "the NashConv of the averages is below tol", True
        else:
            status, message, success = ("max_iterations", f"maximum number of iterations reached; the NashConv "
                                        f"of the averages is {gap:.3g} > tol = {tol:g}", False)
    if shared:
        s = 0.5 * (x + y)
        s = s / s.sum()
        return result(s, s, status, message, n_iter, success)
    return result(x / x.sum(), y / y.sum(), status, message, n_iter, success)
