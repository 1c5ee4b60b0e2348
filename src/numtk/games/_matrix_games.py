"""Two-player normal-form (matrix) games and the generators of the games used by the PSRO literature.

Conventions (the same in every function of :mod:`numtk.games`): player 0 is the row player, player 1
the column player; ``payoffs[p][i, j]`` is player ``p``'s payoff when the row player plays ``i`` and the
column player plays ``j``; game values are reported for player 0. A generator returns a *symmetric*
zero-sum game, whose row matrix ``M`` is antisymmetric: ``M[i, j]`` is the payoff of strategy ``i``
against strategy ``j``. NashConv of a profile is the sum of both players' best-response gains;
exploitability (OpenSpiel's convention) is NashConv / 2.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_int, check_real

__all__ = [
    "MatrixGame",
    "as_zero_sum",
    "rock_paper_scissors",
    "random_game_of_skill",
    "disc_game",
    "elo_game",
    "colonel_blotto",
]

_REL_TOL = 1e-12  # zero-sum / constant-sum / symmetry tolerance, relative to max(1, max|A|)
_MAX_BLOTTO = 20_000     # strategies of colonel_blotto's game
_MAX_GENERATED = 10_000  # strategies of a random generator's game: its dense n x n matrices (800 MB each)


def _payoff_matrix(value: Any, name: str) -> np.ndarray:
    """A finite, non-empty 2-D payoff matrix as a C-contiguous float64 copy."""
    arr = as_array(value, name, ndim=2)
    if arr.size == 0:
        raise ValueError(f"`{name}` must not be empty; got an array of shape {arr.shape}")
    check_finite(arr, name)
    out = np.array(arr, dtype=np.float64, order="C", copy=True)
    if not np.isfinite(out).all():  # e.g. integers or long doubles beyond the float64 range
        raise ValueError(f"`{name}` must be finite in float64")
    return out


def _labels(labels: Any, m: int, n: int) -> tuple | None:
    if labels is None:
        return None
    if isinstance(labels, str):
        raise TypeError("`labels` must be a sequence of str (or a pair of them), not a single str")
    try:
        labels = tuple(labels)
    except TypeError:
        raise TypeError(f"`labels` must be a sequence of str (or a pair of them); got {type(labels).__name__}") from None
    if m == n and len(labels) == m and all(isinstance(s, str) for s in labels):
        return labels
    if len(labels) == 2 and not all(isinstance(s, str) for s in labels):
        rows, cols = (tuple(part) if not isinstance(part, str) else None for part in labels)
        if (rows is not None and cols is not None and len(rows) == m and len(cols) == n
                and all(isinstance(s, str) for s in rows + cols)):
            return (rows, cols)
    raise ValueError(f"`labels` must be {m} str (one per strategy of a square game) or a pair "
                     f"(row labels of length {m}, column labels of length {n}); got {labels!r}")


@constraints(payoff_row="array2d", payoff_col="array2d", labels="option")
class MatrixGame:
    r"""A two-player normal-form game given by its payoff matrices.

    Parameters
    ----------
    payoff_row : array_like, shape (m, n)
        Player 0's (the row player's) payoffs: ``payoff_row[i, j]`` when player 0 plays ``i`` and
        player 1 plays ``j``. Real and finite; copied to a C-contiguous float64 array.
    payoff_col : array_like, shape (m, n), optional
        Player 1's payoffs, laid out the same way (``[row action, column action]``). ``None`` (the
        default) makes the game zero-sum: ``payoff_col = -payoff_row``.
    labels : sequence of str, optional
        Strategy names: ``m`` names for a square game (both players share them), or a pair
        ``(row_labels, column_labels)``.

    Attributes
    ----------
    payoffs : ndarray, shape (2, m, n)
        ``payoffs[p]`` is player ``p``'s payoff matrix (read-only).
    shape : tuple of int
        ``(m, n)``: the numbers of strategies of players 0 and 1.
    n_players : int
        Always 2.
    is_zero_sum : bool
        ``max|A + B| <= 1e-12 * max(1, max|A|)``.
    is_constant_sum : bool
        ``A + B`` is constant within the same tolerance.
    constant : float or None
        The constant ``A + B`` of a constant-sum game (0.0 when zero-sum), else None.
    is_symmetric : bool
        ``m == n`` and ``B = A^T`` within the tolerance; for a zero-sum game, ``A = -A^T``.
    labels : tuple or None
        The strategy names.
    params : dict
        Parameters of the generator that made the game (``'bias'``, ``'ratings'``, ``'points'``,
        ``'allocations'``, ``'skill'``); empty for a user-built game.

    Raises
    ------
    ValueError
        A matrix that is not 2-D, is empty or holds a non-finite entry, or shapes that differ.
    TypeError
        Non-numeric input.

    See Also
    --------
    as_zero_sum : the zero-sum row matrix that the solvers use.

    Notes
    -----
    Player 0 is the row player; values are reported for player 0. Nash solvers, population
    exploitability and PSRO need a zero-sum game; a constant-sum game is shifted to zero-sum
    (:attr:`zero_sum_payoff`). NashConv is the sum of both players' best-response gains, and
    exploitability (OpenSpiel's convention) is NashConv / 2.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games._matrix_games import MatrixGame
    >>> g = MatrixGame([[2, 1, 5], [-3, -4, -2]])
    >>> g.shape, g.is_zero_sum, g.is_symmetric
    ((2, 3), True, False)
    >>> g.payoffs[1]
    array([[-2., -1., -5.],
           [ 3.,  4.,  2.]])
    >>> pd = MatrixGame([[3, 0], [5, 1]], [[3, 5], [0, 1]], labels=["cooperate", "defect"])
    >>> pd.is_symmetric, pd.is_constant_sum
    (True, False)
    >>> MatrixGame([[1, 0], [0, 1]], [[0, 1], [1, 0]]).constant  # constant-sum: A + B = 1
    1.0
    """

    n_players = 2

    def __init__(self, payoff_row: ArrayLike, payoff_col: ArrayLike | None = None, *,
                 labels: Sequence[str] | None = None) -> None:
        A = _payoff_matrix(payoff_row, "payoff_row")
        if payoff_col is None:
            B = -A
        else:
            B = _payoff_matrix(payoff_col, "payoff_col")
            if B.shape != A.shape:
                raise ValueError(f"`payoff_col` must have the shape of `payoff_row` {A.shape}; got {B.shape}")
        payoffs = np.stack([A, B])
        payoffs.flags.writeable = False
        self._payoffs = payoffs
        m, n = A.shape
        self._labels = _labels(labels, m, n)
        self.params: dict[str, Any] = {}

        tol = _REL_TOL * max(1.0, float(np.max(np.abs(A))))
        S = A + B
        self._is_zero_sum = bool(np.max(np.abs(S)) <= tol)
        if self._is_zero_sum:
            self._constant: float | None = 0.0
        else:
            c = 0.5 * (float(S.max()) + float(S.min()))
            self._constant = c if float(S.max() - S.min()) <= 2 * tol else None
        self._is_symmetric = bool(m == n and np.max(np.abs(B - A.T)) <= tol)

    # -- attributes -------------------------------------------------------------------------------
    @property
    def payoffs(self) -> np.ndarray:
        """The payoff matrices, shape (2, m, n) (read-only): ``payoffs[p][i, j]`` for player ``p``."""
        return self._payoffs

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)``: the numbers of strategies of player 0 (rows) and player 1 (columns)."""
        return (int(self._payoffs.shape[1]), int(self._payoffs.shape[2]))

    @property
    def is_zero_sum(self) -> bool:
        """Whether ``payoffs[0] + payoffs[1] == 0`` (within 1e-12 relative)."""
        return self._is_zero_sum

    @property
    def is_constant_sum(self) -> bool:
        """Whether ``payoffs[0] + payoffs[1]`` is constant (within 1e-12 relative)."""
        return self._constant is not None

    @property
    def constant(self) -> float | None:
        """The constant sum of a constant-sum game (0.0 for zero-sum), else None."""
        return self._constant

    @property
    def is_symmetric(self) -> bool:
        """Whether the game is square with ``payoffs[1] == payoffs[0].T`` (``A = -A.T`` if zero-sum)."""
        return self._is_symmetric

    @property
    def labels(self) -> tuple | None:
        """The strategy names: m str for a square game, a pair (rows, columns), or None."""
        return self._labels

    @property
    def zero_sum_payoff(self) -> np.ndarray:
        """The row payoff of the equivalent zero-sum game, ``A - constant / 2`` (read-only).

        The same strategies are optimal in both games; the value shifts by ``constant / 2``.
        A general-sum game raises ``ValueError``.
        """
        if self._constant is None:
            raise ValueError("`zero_sum_payoff` requires a zero-sum game (or a constant-sum one); "
                             "this game is general-sum")
        if self._constant == 0.0:
            return self._payoffs[0]
        Z = self._payoffs[0] - 0.5 * self._constant
        Z.flags.writeable = False
        return Z

    def __repr__(self) -> str:
        kind = ("zero-sum" if self._is_zero_sum else
                f"constant-sum ({self._constant!r})" if self._constant is not None else "general-sum")
        parts = [f"shape={self.shape}", kind]
        if self._is_symmetric:
            parts.append("symmetric")
        if self._labels is not None:
            parts.append(f"labels={self._labels!r}")
        if self.params:
            parts.append(f"params=[{', '.join(self.params)}]")
        return f"MatrixGame({', '.join(parts)})"


def as_zero_sum(game: Any, name: str = "game") -> np.ndarray:
    """The row payoff matrix of a zero-sum game, for the solvers that need one.

    Parameters
    ----------
    game : MatrixGame or array_like, shape (m, n)
        A :class:`MatrixGame` (zero-sum, or constant-sum: shifted to zero-sum), or the row player's
        payoff matrix of a zero-sum game.
    name : str, optional
        The parameter name used in error messages.

    Returns
    -------
    A : ndarray, shape (m, n)
        The zero-sum row payoffs (float64, C-contiguous; read-only when taken from a game).

    Raises
    ------
    ValueError
        A general-sum game ("... requires a zero-sum game"), or an invalid matrix.
    TypeError
        Anything else.

    Notes
    -----
    Player 0 is the row player; the values of the returned matrix are player 0's.

    Examples
    --------
    >>> from numtk.games._matrix_games import MatrixGame, as_zero_sum
    >>> as_zero_sum(MatrixGame([[1, 0], [0, 1]], [[0, 1], [1, 0]]))  # constant-sum, shifted by 1/2
    array([[ 0.5, -0.5],
           [-0.5,  0.5]])
    >>> as_zero_sum(MatrixGame([[3, 0], [5, 1]], [[3, 5], [0, 1]]))
    Traceback (most recent call last):
    ...
    ValueError: `game` is a general-sum game; this function requires a zero-sum game (or a constant-sum one)
    """
    if isinstance(game, MatrixGame):
        if game.constant is None:
            raise ValueError(f"`{name}` is a general-sum game; this function requires a zero-sum game "
                             "(or a constant-sum one)")
        return game.zero_sum_payoff
    if isinstance(game, (str, bytes, dict)) or game is None:
        raise TypeError(f"`{name}` must be a MatrixGame or a 2-D payoff array; got {type(game).__name__}")
    return _payoff_matrix(game, name)


def _check_n(n: Any) -> int:
    return check_int(n, "n", minimum=1, maximum=_MAX_GENERATED)


def _symmetric_game(M: np.ndarray, params: dict, labels=None) -> MatrixGame:
    game = MatrixGame(M, labels=labels)
    game.params = params
    return game


@constraints(bias="array1d")
def rock_paper_scissors(bias: Sequence[float] | None = None) -> MatrixGame:
    """Rock-paper-scissors, optionally biased.

    Parameters
    ----------
    bias : sequence of 3 positive floats, optional
        ``(a, b, c)``: the winner's gain for rock beats scissors, paper beats rock and scissors beats
        paper. ``None`` means ``(1, 1, 1)``.

    Returns
    -------
    game : MatrixGame
        Symmetric zero-sum with strategies (rock, paper, scissors) and
        ``M = [[0, -b, a], [b, 0, -c], [-a, c, 0]]``; ``params['bias'] = (a, b, c)``.

    Notes
    -----
    The unique Nash equilibrium is ``(c, a, b) / (a + b + c)`` for both players, with value 0.
    ``bias=(0.5, 0.25, 0.05)`` is the biased RPS of OpenSpiel and Bošanský et al. (2016), with
    equilibrium (1/16, 10/16, 5/16).
    Player 0 is the row player and values are player 0's; NashConv sums both players' best-response
    gains and exploitability (OpenSpiel's convention) is NashConv / 2.

    Examples
    --------
    >>> from numtk.games._matrix_games import rock_paper_scissors
    >>> g = rock_paper_scissors(bias=(0.5, 0.25, 0.05))
    >>> g.payoffs[0]
    array([[ 0.  , -0.25,  0.5 ],
           [ 0.25,  0.  , -0.05],
           [-0.5 ,  0.05,  0.  ]])
    >>> g.labels, g.is_symmetric
    (('rock', 'paper', 'scissors'), True)
    """
    if bias is None:
        a = b = c = 1.0
    else:
        if isinstance(bias, str):
            raise TypeError("`bias` must be a sequence of 3 positive numbers")
        try:
            values = tuple(bias)
        except TypeError:
            raise TypeError(f"`bias` must be a sequence of 3 positive numbers; got {type(bias).__name__}") from None
        if len(values) != 3:
            raise ValueError(f"`bias` must hold 3 numbers (a, b, c); got {len(values)}")
        a, b, c = (check_real(v, "bias", low=0.0, low_open=True) for v in values)
    M = np.array([[0.0, -b, a], [b, 0.0, -c], [-a, c, 0.0]])
    return _symmetric_game(M, {"bias": (a, b, c)}, labels=("rock", "paper", "scissors"))


@constraints(n="count", rng="rng")
def random_game_of_skill(n: int, *, rng: Any = None) -> MatrixGame:
    r"""A random game of skill: a random transitive part plus a random cyclic part.

    Parameters
    ----------
    n : int
        Number of strategies, 1 to 10000 (the payoff matrix is dense).
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness. ``None`` draws fresh OS entropy, an int seeds a new generator, and a
        Generator is used as it is (and advanced).

    Returns
    -------
    game : MatrixGame
        Symmetric zero-sum with ``M[i, j] = (W[i, j] - W[j, i]) / 2 + s[i] - s[j]``, where
        ``W ~ N(0, 1)^{n x n}`` is drawn first and the skills ``s ~ N(0, 1)^n`` second;
        ``params['skill'] = s``.

    Notes
    -----
    Matching the legacy ``RandomState`` streams of the published generators is not a goal.
    Player 0 is the row player and values are player 0's; NashConv sums both players' best-response
    gains and exploitability (OpenSpiel's convention) is NashConv / 2.

    References
    ----------
    .. [1] W. M. Czarnecki et al., "Real World Games Look Like Spinning Tops", NeurIPS 2020,
       arXiv:2004.09468.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games._matrix_games import random_game_of_skill
    >>> g = random_game_of_skill(5, rng=0)
    >>> g.shape, g.is_symmetric
    ((5, 5), True)
    >>> bool(np.array_equal(g.payoffs[0], -g.payoffs[0].T))
    True
    """
    n = _check_n(n)
    gen = normalize_rng(rng)
    W = gen.standard_normal((n, n))
    s = gen.standard_normal(n)
    M = 0.5 * (W - W.T) + (s[:, None] - s[None, :])
    return _symmetric_game(M, {"skill": s})


@constraints(n="count", rng="rng")
def disc_game(n: int, *, rng: Any = None) -> MatrixGame:
    r"""The disc game: a purely cyclic game on random points of the unit disc.

    Parameters
    ----------
    n : int
        Number of strategies, 1 to 10000 (the payoff matrix is dense).
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness. ``None`` draws fresh OS entropy, an int seeds a new generator, and a
        Generator is used as it is (and advanced).

    Returns
    -------
    game : MatrixGame
        Symmetric zero-sum with ``M[i, j] = u_i^T [[0, -1], [1, 0]] u_j = u_i2 u_j1 - u_i1 u_j2`` for
        points ``u_i`` uniform in the unit disc (radius ``sqrt(U)`` and angle ``2 pi V``, with ``U``
        then ``V`` drawn uniform on [0, 1)); ``params['points']`` holds them, shape (n, 2).

    Notes
    -----
    ``M`` is antisymmetric with rank 2 (for n >= 2 non-collinear points) and ``|M| <= 1``. A
    population whose points have the origin in their convex hull has population exploitability 0.
    Player 0 is the row player and values are player 0's; NashConv sums both players' best-response
    gains and exploitability (OpenSpiel's convention) is NashConv / 2.

    References
    ----------
    .. [1] D. Balduzzi et al., "Open-ended Learning in Symmetric Zero-sum Games", ICML 2019,
       arXiv:1901.08106.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games._matrix_games import disc_game
    >>> g = disc_game(6, rng=1)
    >>> int(np.linalg.matrix_rank(g.payoffs[0])), bool(np.abs(g.payoffs[0]).max() <= 1)
    (2, True)
    """
    n = _check_n(n)
    gen = normalize_rng(rng)
    radius = np.sqrt(gen.random(n))
    angle = 2.0 * np.pi * gen.random(n)
    points = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    u1, u2 = points[:, 0], points[:, 1]
    M = np.outer(u2, u1) - np.outer(u1, u2)
    return _symmetric_game(M, {"points": points})


@constraints(n="count", rng="rng", noise="real>=0")
def elo_game(n: int, *, rng: Any = None, noise: float = 0.0) -> MatrixGame:
    r"""A transitive game from Elo-style ratings, optionally with antisymmetric noise.

    Parameters
    ----------
    n : int
        Number of strategies, 1 to 10000 (the payoff matrix is dense).
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness. ``None`` draws fresh OS entropy, an int seeds a new generator, and a
        Generator is used as it is (and advanced).
    noise : float, optional
        Scale (>= 0) of the antisymmetric noise ``noise * (N - N^T) / sqrt(2)``, ``N ~ N(0, 1)^{n x n}``
        drawn after the ratings. 0 (the default) keeps the game transitive.

    Returns
    -------
    game : MatrixGame
        Symmetric zero-sum with ``M[i, j] = 2 sigma(r_i - r_j) - 1 = tanh((r_i - r_j) / 2)`` for
        ratings ``r ~ N(0, 1)^n`` in natural units (Elo points are ``r * 400 / ln 10``), plus the
        noise; ``params['ratings'] = r``.

    Notes
    -----
    Without noise the strategy of highest rating is a pure Nash equilibrium, and the population
    exploitability of a population is ``tanh((r_max - max_{k in pop} r_k) / 2)``.
    Player 0 is the row player and values are player 0's; NashConv sums both players' best-response
    gains and exploitability (OpenSpiel's convention) is NashConv / 2.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games._matrix_games import elo_game
    >>> g = elo_game(4, rng=2)
    >>> r = g.params["ratings"]
    >>> bool(np.allclose(g.payoffs[0], np.tanh((r[:, None] - r[None, :]) / 2)))
    True
    """
    n = _check_n(n)
    noise = check_real(noise, "noise", low=0.0)
    gen = normalize_rng(rng)
    r = gen.standard_normal(n)
    T = np.tanh(0.5 * (r[:, None] - r[None, :]))
    M = 0.5 * (T - T.T)  # exactly antisymmetric whatever the rounding of tanh
    if noise > 0.0:
        N = gen.standard_normal((n, n))
        with np.errstate(over="ignore", invalid="ignore"):
            M = M + (noise / math.sqrt(2.0)) * (N - N.T)
        if not np.isfinite(M).all():
            raise ValueError(f"`noise` is too large: the noisy payoffs overflow float64; got {noise!r}")
    return _symmetric_game(M, {"ratings": r})


def _compositions(coins: int, fields: int) -> np.ndarray:
    """All ordered ways to split ``coins`` into ``fields`` non-negative parts, lexicographically."""
    out: list[tuple[int, ...]] = []

    def rec(prefix: tuple[int, ...], left: int, slots: int) -> None:
        if slots == 1:
            out.append(prefix + (left,))
            return
        for a in range(left + 1):
            rec(prefix + (a,), left - a, slots - 1)

    rec((), coins, fields)
    return np.array(out, dtype=np.int64)


@constraints(coins="count", fields="int>=2")
def colonel_blotto(coins: int, fields: int) -> MatrixGame:
    r"""Colonel Blotto: split ``coins`` over ``fields`` battlefields; win more fields than the opponent.

    Parameters
    ----------
    coins : int
        Number of coins each player allocates (>= 1).
    fields : int
        Number of battlefields (>= 3; with fewer, every pair of different allocations ties). The game
        may have at most 20000 strategies (so ``coins < 20000`` and ``fields <= 20000``).

    Returns
    -------
    game : MatrixGame
        Symmetric zero-sum whose strategies are the ``C(coins + fields - 1, fields - 1)`` allocations
        in lexicographic order (``(0, ..., 0, coins)`` first, ``(coins, 0, ..., 0)`` last), with
        ``M[i, j] = sum_f sign(a_if - a_jf) / (fields - 2)`` in [-1, 1];
        ``params['allocations']`` holds the allocations, shape (size, fields).

    Notes
    -----
    The matrices for (coins, fields) = (5, 3), (5, 4), (5, 5), (10, 3) and (10, 4) (sizes 21, 56, 126,
    66 and 286) are the "c,f-Blotto" games of the spinning-top payoff set of Czarnecki et al. (2020),
    same order and values.
    Player 0 is the row player and values are player 0's; NashConv sums both players' best-response
    gains and exploitability (OpenSpiel's convention) is NashConv / 2.

    Examples
    --------
    >>> from numtk.games._matrix_games import colonel_blotto
    >>> g = colonel_blotto(5, 3)
    >>> g.shape
    (21, 21)
    >>> g.params["allocations"][[0, -1]]
    array([[0, 0, 5],
           [5, 0, 0]])
    """
    # There are at least coins + 1 and at least fields allocations: bound both before counting them.
    coins = check_int(coins, "coins", minimum=1, maximum=_MAX_BLOTTO - 1)
    fields = check_int(fields, "fields")
    if fields < 3:
        raise ValueError(f"`fields` must be >= 3 (with fewer fields every pair of allocations ties); got {fields}")
    if fields > _MAX_BLOTTO:
        raise ValueError(f"`fields` must be <= {_MAX_BLOTTO} (the game has at least `fields` strategies and its "
                         f"payoff matrix is dense); got {fields}")
    size = math.comb(coins + fields - 1, fields - 1)
    if size > _MAX_BLOTTO:
        count = str(size) if size < 10**15 else f"about 10^{math.log10(size):.1f}"
        raise ValueError(f"`coins` and `fields`: colonel_blotto({coins}, {fields}) would have {count} strategies; "
                         f"at most {_MAX_BLOTTO} are supported (the payoff matrix is dense)")
    alloc = _compositions(coins, fields)
    wins = np.zeros((size, size), dtype=np.int64)
    for f in range(fields):
        col = alloc[:, f]
        wins += np.sign(col[:, None] - col[None, :])
    M = wins / float(fields - 2)
    return _symmetric_game(M, {"allocations": alloc})
