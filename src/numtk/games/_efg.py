"""Exact two-player zero-sum extensive-form games and their sequence form.

:class:`KuhnPoker`, :class:`LeducPoker` and :class:`Goofspiel` share the base class
:class:`ExtensiveFormGame`. The game tree is walked once, in C++ (``efg_tree.hpp``), the first time a
size or the sequence form is asked for; nothing of the tree is kept but the sequence form.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import scipy.sparse

from numtk._lib import Result, normalize_rng
from numtk._lib import _validation
from numtk._lib._constraints import constraints
from numtk.games import _games_ext

__all__ = ["ExtensiveFormGame", "KuhnPoker", "LeducPoker", "Goofspiel"]

_ROW_TOL = 1e-6      # policy rows must sum to 1 within this; closer rows are renormalised
_REACH_TINY = 1e-300  # a sequence reached with probability below this counts as unreached


class ExtensiveFormGame:
    """A two-player zero-sum extensive-form game with perfect recall, solved exactly.

    The base class of :class:`KuhnPoker`, :class:`LeducPoker` and :class:`Goofspiel`; it is not
    instantiated directly.

    Conventions
    -----------
    - Players 0 and 1; player 0 moves first (OpenSpiel's player 0). Payoffs and game values are
      player 0's; the game is zero-sum, so player 1 receives the negative.
    - Information sets ("infosets") of each player are numbered in depth-first discovery order, so a
      parent infoset (one on the path to another of the same player) has the smaller id. Rows of a
      **tabular behavioural policy** of shape ``(N_I, max_actions)``, ``N_I = n0 + n1``, are the
      infosets of player 0 (ids ``0 .. n0-1``) then those of player 1; column ``a`` holds the
      probability of action id ``a`` and is 0 on illegal actions (:attr:`legal_mask`).
    - Internally the game is in **sequence form** (Koller, Megiddo & von Stengel 1996): sequence 0
      of each player is the empty sequence; infoset ``I`` owns the sequences
      ``first_sequence[I] .. first_sequence[I] + n_actions[I] - 1``, one per legal action in
      ascending action id, and ``first_sequence[I] = 1 + sum(n_actions[:I])``. A realization plan
      ``r`` gives each sequence the probability that the player's own moves follow it:
      ``r(I, a) = r(parent_sequence(I)) * pi(a | I)``. Player 0's expected payoff is
      ``r0 @ A @ r1``.

    Attributes
    ----------
    name : str
        Short identifier (``'kuhn_poker'``, ``'leduc_poker'``, ``'goofspiel_<n>'``).
    n_players : int
        Always 2.
    is_zero_sum : bool
        Always True.
    n_infosets : tuple of int
        ``(n0, n1)``, infosets per player.
    n_sequences : tuple of int
        ``(s0, s1)``, sequences per player including the empty one.
    max_actions : int
        Number of action ids (columns of a policy).
    infoset_keys : tuple of list of str
        Key of every infoset, per player, in id order (read-only by convention).
    legal_mask : ndarray of bool, shape (N_I, max_actions)
        ``legal_mask[i, a]`` is True when action ``a`` is legal at infoset row ``i``.
    infoset_player : ndarray of int8, shape (N_I,)
        The player owning each infoset row.
    n_nodes, n_terminals : int
        Size of the game tree (all nodes including chance nodes; terminal histories).

    References
    ----------
    .. [1] D. Koller, N. Megiddo and B. von Stengel, "Efficient computation of equilibria for
       extensive two-person games", Games and Economic Behavior 14(2), 1996.
    .. [2] B. von Stengel, "Efficient computation of behavior strategies", Games and Economic
       Behavior 14(2), 1996.
    """

    n_players: int = 2
    is_zero_sum: bool = True
    _ext_name: str = ""
    _n_cards: int = 0

    def __init__(self) -> None:
        if not self._ext_name:
            raise TypeError("ExtensiveFormGame is a base class; use KuhnPoker(), LeducPoker() or "
                            "Goofspiel(n_cards)")
        self._lock = threading.Lock()
        self._tree: dict | None = None
        self._sf: Result | None = None
        self._keys: tuple[list[str], list[str]] | None = None

    # ------------------------------------------------------------------------------------------------
    # identity

    @property
    def name(self) -> str:
        """Short identifier of the game."""
        return self._ext_name

    def _params(self) -> tuple:
        return ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._params() == other._params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._params()))

    def __reduce__(self):
        # Pickles (for process pools) carry the parameters only; the tree is rebuilt on demand.
        return (type(self), self._params())

    def _repr_head(self) -> str:
        return ""

    def __repr__(self) -> str:
        head = self._repr_head()
        return (f"{type(self).__name__}({head}infosets={self.n_infosets}, "
                f"sequences={self.n_sequences})")

    # ------------------------------------------------------------------------------------------------
    # the tree, built once

    def _data(self) -> dict:
        tree = self._tree
        if tree is None:
            with self._lock:
                if self._tree is None:
                    self._tree = self._build()
                tree = self._tree
        return tree

    def _build(self) -> dict:
        raw = _games_ext.efg_build(self._ext_name, self._n_cards)
        players = raw["players"]
        n = tuple(int(p["parent_sequence"].shape[0]) for p in players)
        A = int(raw["max_actions"])
        mask = np.zeros((n[0] + n[1], A), dtype=bool)
        offset = 0
        for p in players:
            si, sa = p["sequence_infoset"], p["sequence_action"]
            mask[offset + si[1:], sa[1:]] = True
            offset += int(p["parent_sequence"].shape[0])
        player = np.concatenate([np.zeros(n[0], np.int8), np.ones(n[1], np.int8)])
        return {"players": players, "payoff": raw["payoff"], "payoff_T": raw["payoff_T"],
                "infoset_reach": raw["infoset_reach"],
                "n_nodes": int(raw["n_nodes"]), "n_terminals": int(raw["n_terminals"]),
                "max_actions": A, "n_infosets": n,
                "n_sequences": tuple(int(p["sequence_action"].shape[0]) for p in players),
                "legal_mask": mask, "infoset_player": player,
                "inv_n_actions": 1.0 / np.concatenate([p["n_actions"] for p in players]).astype(np.float64)}

    @property
    def n_infosets(self) -> tuple[int, int]:
        """``(n0, n1)``: the number of infosets of each player."""
        return self._data()["n_infosets"]

    @property
    def n_sequences(self) -> tuple[int, int]:
        """``(s0, s1)``: the number of sequences of each player, the empty sequence included."""
        return self._data()["n_sequences"]

    @property
    def max_actions(self) -> int:
        """Number of action ids, i.e. the number of columns of a tabular policy."""
        return self._data()["max_actions"]

    @property
    def n_nodes(self) -> int:
        """Number of nodes of the game tree (chance, decision and terminal)."""
        return self._data()["n_nodes"]

    @property
    def n_terminals(self) -> int:
        """Number of terminal histories."""
        return self._data()["n_terminals"]

    @property
    def legal_mask(self) -> np.ndarray:
        """bool ``(N_I, max_actions)``: legal actions of every infoset row (player 0's rows first)."""
        return self._data()["legal_mask"]

    @property
    def infoset_player(self) -> np.ndarray:
        """int8 ``(N_I,)``: the player (0 or 1) owning each infoset row."""
        return self._data()["infoset_player"]

    @property
    def infoset_keys(self) -> tuple[list[str], list[str]]:
        """``(keys0, keys1)``: the key string of every infoset of each player, in id order.

        Made from compact integer keys the first time they are asked for, then cached (do not modify
        the lists).
        """
        keys = self._keys
        if keys is None:
            players = self._data()["players"]
            keys = tuple(_games_ext.efg_key_strings(self._ext_name, self._n_cards, p, players[p]["keys"])
                         for p in (0, 1))
            self._keys = keys
        return keys

    def _row_label(self, row: int) -> str:
        n0 = self.n_infosets[0]
        p, i = (0, row) if row < n0 else (1, row - n0)
        key = _games_ext.efg_key_strings(self._ext_name, self._n_cards, p,
                                         self._data()["players"][p]["keys"][i:i + 1])[0]
        return f"row {row} (player {p}, infoset {key!r})"

    # ------------------------------------------------------------------------------------------------
    # sequence form

    @constraints()
    def sequence_form(self) -> Result:
        """The sequence form of the game, built once and cached (the same Result on every call).

        Returns
        -------
        res : numtk._lib.Result
            payoff : scipy.sparse.csr_array, shape (s0, s1), float64
                ``A[s0, s1]`` = sum over terminal histories whose sequences are ``s0`` and ``s1``
                of chance probability times player 0's payoff (explicit zeros kept: the pattern is
                every sequence pair that reaches a terminal). Player 0's expected payoff is
                ``r0 @ A @ r1``.
            payoff_T : scipy.sparse.csr_array, shape (s1, s0)
                ``A.T`` as its own CSR matrix (for player 1's products).
            constraints : ((E, e), (F, f))
                ``E`` (csr_array ``(n0 + 1, s0)``) and ``e``: row 0 says ``r(empty) = 1``, row
                ``1 + I`` says ``-r(parent_sequence[I]) + sum_a r(I, a) = 0``; ``e = (1, 0, ..., 0)``.
                The same for player 1 with ``F`` and ``f``. A plan is feasible iff ``E r0 = e``
                and ``r0 >= 0``.
            parent_sequence : (ndarray, ndarray) of int32, shapes (n0,), (n1,)
                The player's last own sequence before each infoset (0 = empty).
            first_sequence : (ndarray, ndarray) of int32
                The first sequence of each infoset.
            n_actions : (ndarray, ndarray) of int32
                The number of legal actions of each infoset.
            sequence_infoset : (ndarray, ndarray) of int32, shapes (s0,), (s1,)
                The infoset of each sequence, -1 for the empty sequence.
            sequence_action : (ndarray, ndarray) of int32
                The action id of each sequence, -1 for the empty sequence.
            infoset_reach : (W0, W1), scipy.sparse.csr_array, shapes (n0, s1) and (n1, s0)
                Opponent-and-chance reach of each infoset: ``Wp[I, s]`` = sum over the histories
                ``h`` in player ``p``'s infoset ``I`` at which the opponent's last sequence is
                ``s`` of the chance probability of ``h``. Against an opponent plan ``q`` (a
                column of the opponent's plans, or ``R @ x`` for a mixture), ``w = Wp @ q`` gives
                ``w[I]``, the probability that chance and the opponent lead into ``I`` when ``p``
                plays to reach it; the probability of reaching ``I`` under a profile is
                ``w[I] * r_p(parent_sequence[I])``.

        Examples
        --------
        >>> from numtk.games._efg import KuhnPoker
        >>> sf = KuhnPoker().sequence_form()
        >>> sf.payoff.shape, sf.payoff.nnz
        ((13, 13), 30)
        >>> (E, e), (F, f) = sf.constraints
        >>> E.shape, e[:3]
        ((7, 13), array([1., 0., 0.]))
        >>> sf.first_sequence[0]
        array([ 1,  3,  5,  7,  9, 11], dtype=int32)
        >>> W0, W1 = sf.infoset_reach
        >>> W0.shape, W1.shape
        ((6, 13), (6, 13))
        >>> game = KuhnPoker()
        >>> r0, r1 = game.policy_to_sequence(game.uniform_policy())
        >>> game.infoset_keys[0], (W0 @ r1).round(4)  # chance deals the card, player 1 bets after 'p'
        (['0', '0pb', '1', '1pb', '2', '2pb'], array([0.3333, 0.1667, 0.3333, 0.1667, 0.3333, 0.1667]))
        """
        sf = self._sf
        if sf is None:
            data = self._data()
            with self._lock:
                if self._sf is None:
                    self._sf = _assemble(data)
                sf = self._sf
        return sf

    # ------------------------------------------------------------------------------------------------
    # policies

    @constraints()
    def uniform_policy(self) -> np.ndarray:
        """The uniform policy: every legal action of every infoset equally likely.

        Returns
        -------
        policy : ndarray of float64, shape (N_I, max_actions)

        Examples
        --------
        >>> from numtk.games._efg import LeducPoker
        >>> LeducPoker().uniform_policy()[:2]
        array([[0. , 0.5, 0.5],
               [0. , 0.5, 0.5]])
        """
        data = self._data()
        return data["legal_mask"] * data["inv_n_actions"][:, None]

    @constraints(rng="rng", deterministic="bool")
    def random_policy(self, *, rng: Any = None, deterministic: bool = False) -> np.ndarray:
        """A random tabular policy.

        Parameters
        ----------
        rng : {None, int, numpy.random.Generator}, optional
            Source of randomness. ``None`` draws fresh OS entropy, an int seeds a new
            :class:`numpy.random.Generator`, and a Generator is used as it is (and advanced).
        deterministic : bool, default False
            False: each row is drawn from the flat Dirichlet(1, ..., 1) over the infoset's legal
            actions. True: each row puts probability 1 on one legal action drawn uniformly.

        Returns
        -------
        policy : ndarray of float64, shape (N_I, max_actions)

        Examples
        --------
        >>> from numtk.games._efg import KuhnPoker
        >>> pi = KuhnPoker().random_policy(rng=0, deterministic=True)
        >>> pi.shape, sorted(set(pi.ravel().tolist()))
        ((12, 2), [0.0, 1.0])
        """
        gen = normalize_rng(rng)
        deterministic = _validation.check_bool(deterministic, "deterministic")
        mask = self.legal_mask
        if deterministic:
            data = self._data()
            policy = np.zeros(mask.shape)
            offset = 0
            for p in data["players"]:
                fs, na, sa = p["first_sequence"], p["n_actions"], p["sequence_action"]
                k = np.minimum((gen.random(fs.shape[0]) * na).astype(np.int64), na - 1)
                policy[offset + np.arange(fs.shape[0]), sa[fs + k]] = 1.0
                offset += fs.shape[0]
            return policy
        policy = gen.standard_exponential(mask.shape)
        policy *= mask
        policy *= (1.0 / (policy @ np.ones(mask.shape[1])))[:, None]
        return policy

    @constraints(policy="array2d", name="any")
    def check_policy(self, policy: Any, name: str = "policy") -> np.ndarray:
        """Validate a tabular policy (or a stack of them) and return a float64 C-contiguous copy.

        Parameters
        ----------
        policy : array_like, shape (N_I, max_actions) or (k, N_I, max_actions)
            Rows are infosets (player 0's first), columns action ids.
        name : str, default 'policy'
            The parameter name used in error messages. Not checked: any object is accepted and is
            only formatted into the messages.

        Returns
        -------
        policy : ndarray of float64
            A copy; rows whose sum is within 1e-6 of 1 are renormalised (divided by their sum).

        Raises
        ------
        TypeError
            If ``policy`` is not numeric.
        ValueError
            On a wrong shape, non-finite or negative entries, probability on an illegal action, or
            a row not summing to 1 within 1e-6; the message names ``name`` and the offending row.

        Examples
        --------
        >>> from numtk.games._efg import KuhnPoker
        >>> game = KuhnPoker()
        >>> game.check_policy(game.uniform_policy() * (1 + 1e-9))[0]
        array([0.5, 0.5])
        >>> game.check_policy(game.uniform_policy()[:3])
        Traceback (most recent call last):
        ...
        ValueError: `policy` must have shape (12, 2) or (k, 12, 2) for KuhnPoker; got (3, 2)
        """
        arr = _validation.as_array(policy, name, kinds="biuf")
        mask = self.legal_mask
        shape = mask.shape
        if arr.ndim not in (2, 3) or arr.shape[-2:] != shape:
            raise ValueError(f"`{name}` must have shape {shape} or (k, {shape[0]}, {shape[1]}) for "
                             f"{type(self).__name__}; got {arr.shape}")
        out = np.array(arr, dtype=np.float64, order="C", copy=True)
        # One compiled pass: checks every row and renormalises rows off by rounding, in place.
        code, member, row, value = _games_ext.efg_check_policy(out.reshape(-1, *shape), mask, _ROW_TOL)
        if code:
            what = {1: "must be finite; it holds NaN or inf",
                    2: f"must be non-negative; it holds {value!r}",
                    3: f"puts probability {value!r} on an illegal action",
                    4: f"rows must sum to 1 within {_ROW_TOL:g}; a row sums to {value!r}"}[code]
            stack = f"member {member}, " if out.ndim == 3 else ""
            raise ValueError(f"`{name}` {what} (at {stack}{self._row_label(int(row))})")
        return out

    @constraints(policy="array2d")
    def policy_to_sequence(self, policy: Any) -> tuple[np.ndarray, np.ndarray]:
        """Realization plans of a behavioural policy: ``r(I, a) = r(parent(I)) * pi(a | I)``.

        Parameters
        ----------
        policy : array_like, shape (N_I, max_actions) or (k, N_I, max_actions)
            A tabular policy (validated by :meth:`check_policy`) or a stack of ``k`` of them.

        Returns
        -------
        r0, r1 : ndarray of float64
            Shapes ``(s0,)`` and ``(s1,)``, or ``(s0, k)`` and ``(s1, k)`` for a stack (one column
            per member). A mixture of policies with weights ``x`` is realization-equivalent to the
            plan ``R @ x`` (Kuhn's theorem), not to the average of the behaviour probabilities.

        Examples
        --------
        >>> from numtk.games._efg import KuhnPoker
        >>> game = KuhnPoker()
        >>> r0, r1 = game.policy_to_sequence(game.uniform_policy())
        >>> r0[:5]
        array([1.  , 0.5 , 0.5 , 0.25, 0.25])
        >>> round(float(r0 @ game.sequence_form().payoff @ r1), 12)  # player 0's expected payoff
        0.125
        """
        pol = self.check_policy(policy, "policy")
        single = pol.ndim == 2
        stack = pol[None] if single else pol
        data = self._data()
        out = []
        offset = 0
        for p in data["players"]:
            r = _games_ext.efg_policy_to_sequence(stack, offset, p["parent_sequence"], p["first_sequence"],
                                                  p["n_actions"], p["sequence_action"])
            out.append(np.ascontiguousarray(r[:, 0]) if single else r)
            offset += p["parent_sequence"].shape[0]
        return out[0], out[1]

    @constraints(r0="array1d", r1="array1d")
    def sequence_to_policy(self, r0: Any, r1: Any) -> np.ndarray:
        """Behavioural policy of a pair of realization plans: ``pi(a | I) = r(I, a) / r(parent(I))``.

        Parameters
        ----------
        r0, r1 : array_like, shapes (s0,) and (s1,), or (s0, k) and (s1, k)
            Realization plans (one column per member for a stack). Negative entries down to -1e-9
            (LP solvers return values such as -1e-17) are read as 0; more negative ones raise
            ValueError.

        Returns
        -------
        policy : ndarray of float64, shape (N_I, max_actions) or (k, N_I, max_actions)
            Each row is ``r(I, a)`` divided by ``sum_a r(I, a)`` (which equals ``r(parent(I))``
            for a feasible plan, and makes each row a distribution when a solver's plan is off by
            rounding); uniform over the legal actions where that sum is below 1e-300, i.e. at
            infosets the plan does not reach.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.games._efg import KuhnPoker
        >>> game = KuhnPoker()
        >>> pi = game.random_policy(rng=1)
        >>> bool(np.allclose(game.sequence_to_policy(*game.policy_to_sequence(pi)), pi))
        True
        """
        data = self._data()
        plans = []
        for p, (r, nm) in enumerate(((r0, "r0"), (r1, "r1"))):
            arr = _validation.as_array(r, nm, kinds="biuf")
            s = data["n_sequences"][p]
            if arr.ndim not in (1, 2) or arr.shape[0] != s:
                raise ValueError(f"`{nm}` must have shape ({s},) or ({s}, k) for {type(self).__name__}; "
                                 f"got {arr.shape}")
            arr = np.array(arr, dtype=np.float64, order="C", copy=True)
            with np.errstate(over="ignore", invalid="ignore"):
                finite = np.isfinite(arr.sum())
            if not finite and not np.isfinite(arr).all():
                raise ValueError(f"`{nm}` must be finite; it holds NaN or inf")
            low = arr.min() if arr.size else 0.0
            if low < -1e-9:
                raise ValueError(f"`{nm}` must be non-negative; its smallest entry is {low!r}")
            if low < 0:
                np.maximum(arr, 0.0, out=arr)
            plans.append(arr)
        if plans[0].ndim != plans[1].ndim or (plans[0].ndim == 2 and plans[0].shape[1] != plans[1].shape[1]):
            raise ValueError(f"`r0` and `r1` must both be vectors or both have k columns; got shapes "
                             f"{plans[0].shape} and {plans[1].shape}")
        single = plans[0].ndim == 1
        k = 1 if single else plans[0].shape[1]
        policy = np.zeros((k,) + data["legal_mask"].shape)
        offset = 0
        for p, r in zip(data["players"], plans):
            _games_ext.efg_sequence_to_policy(np.ascontiguousarray(r.reshape(r.shape[0], k)), policy, offset,
                                              p["first_sequence"], p["n_actions"], p["sequence_action"],
                                              _REACH_TINY)
            offset += p["first_sequence"].shape[0]
        return policy[0] if single else policy


def _constraint_matrix(p: dict) -> tuple[scipy.sparse.csr_array, np.ndarray]:
    """E (n + 1, s) in CSR with sorted columns, and e = (1, 0, ..., 0)."""
    ps, na = p["parent_sequence"], p["n_actions"]
    n, s = ps.shape[0], p["sequence_action"].shape[0]
    indptr = np.zeros(n + 2, dtype=np.int32)
    indptr[1] = 1
    indptr[2:] = 1 + np.cumsum(1 + na.astype(np.int64))
    nnz = int(indptr[-1])
    row_start = indptr[1:-1]
    indices = np.empty(nnz, dtype=np.int32)
    data = np.ones(nnz)
    is_sequence = np.ones(nnz, dtype=bool)
    is_sequence[0] = False
    is_sequence[row_start] = False
    indices[0] = 0
    indices[row_start] = ps
    data[row_start] = -1.0
    # Sequences are numbered infoset by infoset (first_sequence[I] = 1 + sum(n_actions[:I])), so the
    # non-parent entries of rows 1, 2, ... are simply the sequences 1, 2, ..., s - 1 in order.
    indices[is_sequence] = np.arange(1, s, dtype=np.int32)
    E = scipy.sparse.csr_array((data, indices, indptr), shape=(n + 1, s))
    e = np.zeros(n + 1)
    e[0] = 1.0
    return E, e


def _assemble(data: dict) -> Result:
    def csr(t):
        vals, idx, ptr, shape = t
        return scipy.sparse.csr_array((vals, idx, ptr), shape=tuple(int(x) for x in shape))

    players = data["players"]
    return Result(
        payoff=csr(data["payoff"]),
        payoff_T=csr(data["payoff_T"]),
        infoset_reach=tuple(csr(t) for t in data["infoset_reach"]),
        constraints=tuple(_constraint_matrix(p) for p in players),
        parent_sequence=tuple(p["parent_sequence"] for p in players),
        first_sequence=tuple(p["first_sequence"] for p in players),
        n_actions=tuple(p["n_actions"] for p in players),
        sequence_infoset=tuple(p["sequence_infoset"] for p in players),
        sequence_action=tuple(p["sequence_action"] for p in players),
    )


@constraints()
class KuhnPoker(ExtensiveFormGame):
    """Kuhn poker for two players, as OpenSpiel's ``kuhn_poker``.

    Cards J < Q < K (ids 0, 1, 2); each player antes 1 and chance deals one card to each (6 deals,
    probability 1/6 each). Player 0 passes or bets 1. After a pass, player 1 passes (showdown,
    +-1) or bets, and player 0 then folds (-1) or calls (showdown, +-2). After a bet, player 1
    folds (+1 for player 0) or calls (showdown, +-2).

    Actions: 0 = pass (check or fold), 1 = bet (bet or call). Player 0 moves first; payoffs are
    player 0's. Infoset keys are OpenSpiel's information-state strings: the card, then ``p``/``b``
    per action so far (``'0'``, ``'0pb'``, ``'1p'``, ...). Per player: 6 infosets and 13 sequences
    (7 constraint rows); 30 terminal histories.

    See :class:`ExtensiveFormGame` for the attributes and methods.

    References
    ----------
    .. [1] H. W. Kuhn, "A simplified two-person poker", Contributions to the Theory of Games I, 1950.

    Examples
    --------
    >>> from numtk.games._efg import KuhnPoker
    >>> game = KuhnPoker()
    >>> game
    KuhnPoker(infosets=(6, 6), sequences=(13, 13))
    >>> game.infoset_keys[0]
    ['0', '0pb', '1', '1pb', '2', '2pb']
    >>> game.max_actions, game.legal_mask.shape
    (2, (12, 2))
    """

    _ext_name = "kuhn_poker"

    def __init__(self) -> None:
        super().__init__()


@constraints()
class LeducPoker(ExtensiveFormGame):
    """Leduc poker for two players, as OpenSpiel's ``leduc_poker`` (Southey et al. 2005).

    Six cards, J, Q, K in two suits (ids 0..5, rank = id // 2). Each player antes 1 and gets one
    private card. Two betting rounds, player 0 opening both, with raise sizes 2 then 4 and at most
    two raises per round; a public card is dealt between the rounds. Showdown: a pair with the
    public card wins, otherwise the higher rank, otherwise the pot is split.

    Actions: 0 = fold (legal only when facing a bet), 1 = call (or check), 2 = raise. Player 0 moves
    first; payoffs are player 0's. Infoset keys equal OpenSpiel's information-state strings
    (``'[Observer: 0][Private: 0][Round 1][Player: 0][Pot: 2][Money: 99 99][Round1: ][Round2: ]'``).
    Per player: 468 infosets, 1093 sequences (469 constraint rows); nnz(A) = 5520.

    See :class:`ExtensiveFormGame` for the attributes and methods.

    References
    ----------
    .. [1] F. Southey et al., "Bayes' bluff: opponent modelling in poker", UAI 2005.

    Examples
    --------
    >>> from numtk.games._efg import LeducPoker
    >>> game = LeducPoker()
    >>> game
    LeducPoker(infosets=(468, 468), sequences=(1093, 1093))
    >>> r0, r1 = game.policy_to_sequence(game.uniform_policy())
    >>> round(float(r0 @ game.sequence_form().payoff @ r1), 12)  # -5/64
    -0.078125
    """

    _ext_name = "leduc_poker"

    def __init__(self) -> None:
        super().__init__()


@constraints(n_cards="int>=2")
class Goofspiel(ExtensiveFormGame):
    """Goofspiel with ``n_cards`` cards, as OpenSpiel's ``goofspiel`` turned turn-based.

    OpenSpiel's defaults: ``points_order='random'``, ``returns_type='win_loss'``,
    ``imp_info=False``. Prize cards 1..n are revealed one per round in uniformly random order. Both
    players bid one of their remaining cards 1..n; the higher bid takes the prize's points and
    equal bids discard the prize. Bids are public after each round. Player 0 wins (+1), loses (-1)
    or draws (0) on total points. The simultaneous bids are made turn-based: player 0 bids, then
    player 1 bids without seeing that bid. The last round (one card left each) plays itself.

    Actions: bid card ``v`` is action id ``v - 1``. Player 0 moves first; payoffs are player 0's.
    Infosets are keyed by the player's action-observation history (perfect recall; OpenSpiel's
    information-state strings are not): ``'p<player>|<prize>:<own bid>v<other bid>|...|<prize>'``,
    one ``prize:own v other`` group per finished round, then the current prize, e.g.
    ``'p1|3:1v2|2'``.

    ====  ===========  ==========  ================  ===================  ===========
    n     tree nodes   terminals   infosets/player   sequences/player     nnz(A)
    ====  ===========  ==========  ================  ===================  ===========
    3     418          216         57                118                  216
    4     26,773       13,824      3,652             7,505                13,824
    5     3,346,656    1,728,000   456,505           938,026              1,728,000
    ====  ===========  ==========  ================  ===================  ===========

    Parameters
    ----------
    n_cards : int, default 5
        Number of cards per suit, 2 to 5 (``n = 6`` would have (6!)^3 = 3.7e8 terminals).

    See :class:`ExtensiveFormGame` for the attributes and methods.

    References
    ----------
    .. [1] S. M. Ross, "Goofspiel -- the game of pure strategy", Journal of Applied Probability
       8(3), 1971.

    Examples
    --------
    >>> from numtk.games._efg import Goofspiel
    >>> game = Goofspiel(3)
    >>> game
    Goofspiel(n_cards=3, infosets=(57, 57), sequences=(118, 118))
    >>> game.infoset_keys[0][:3]
    ['p0|1', 'p0|1:1v1|2', 'p0|1:1v1|3']
    """

    _ext_name = "goofspiel"

    def __init__(self, n_cards: int = 5) -> None:
        n = _validation.check_int(n_cards, "n_cards", minimum=2)
        if n > 5:
            # O(1) in n: log10((n!)^3) = 3 lgamma(n + 1) / ln 10 (n may be huge).
            digits = 3.0 * math.lgamma(float(min(n, 10**300)) + 1.0) / math.log(10.0)
            count = f"{_fact(n) ** 3:.3g}" if n <= 20 else f"about 10^{digits:.3g}"
            raise ValueError(f"`n_cards` must be <= 5: Goofspiel({n}) has ({n}!)^3 = {count} "
                             f"terminal histories, too many for an exact sequence form; got {n}")
        self._n_cards = n
        super().__init__()

    @property
    def name(self) -> str:
        return f"goofspiel_{self._n_cards}"

    @property
    def n_cards(self) -> int:
        """Number of cards per suit."""
        return self._n_cards

    def _params(self) -> tuple:
        return (self._n_cards,)

    def _repr_head(self) -> str:
        return f"n_cards={self._n_cards}, "


def _fact(n: int) -> float:
    out = 1.0
    for i in range(2, n + 1):
        out *= i
    return out
