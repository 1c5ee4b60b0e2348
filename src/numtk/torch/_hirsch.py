"""The algebraic Hirsch problem as a reinforcement-learning problem (arXiv 2606.22922): the environment, the
equivariant GNN policy, the options-based hierarchical agent and the two baselines (flat PPO and greedy search).

The exact mathematics (generator graphs, diameters, linear quotients, Reisner's criterion) lives in
:mod:`numtk.algebra`; this module keeps bitset versions of the pieces an environment step needs (the generator
graph over the C(n, d) candidate subsets as neighbour bitsets, a BFS diameter, the linear-quotients test of an
order and a greedy order finder) and calls :func:`numtk.algebra.has_linear_resolution` only where those cheap
tests do not decide. Subsets of [n] = {0, ..., n-1} are int bitmasks (bit v set: variable x_v divides the
monomial); the C(n, d) candidates are numbered in ``itertools.combinations`` order.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._optional import import_optional
from numtk._lib._validation import check_bool, check_int, check_option, check_real
from numtk.torch._common import numpy_rng, torch, torch_generator, torch_threads

gym = import_optional("gymnasium", purpose="numtk.torch.hirsch (its environment is a gymnasium.Env)")
from gymnasium import spaces  # noqa: E402  (after the optional import that names the extra)

nn = torch.nn

__all__ = ["HirschEnv", "EquivariantGNNPolicy", "PolicyOutput", "OptionsAgent", "FlatAgent", "greedy_search",
           "subset_index", "candidate_subsets", "is_induced_path", "FIELDS", "REWARDS", "MAX_N"]

#: the coefficient fields of the linearity check
FIELDS = ("Q", "GF2")
#: the reward modes of :class:`HirschEnv`
REWARDS = ("sparse", "shaped")
#: the largest number of variables of the environment (Reisner's check visits up to 2**n faces)
MAX_N = 12
_CACHE_MAX = 200_000


# --------------------------------------------------------------------------------------------------
# combinatorics on bitmasks
# --------------------------------------------------------------------------------------------------
def _check_nd(n: Any, d: Any) -> tuple[int, int]:
    n = check_int(n, "n", minimum=2, maximum=MAX_N)
    d = check_int(d, "d", minimum=1)
    if d >= n:
        raise ValueError(f"`d` must be < n = {n} (the generators are d-subsets of n variables); got {d}")
    return n, d


@dataclass(frozen=True)
class _Tables:
    n: int
    d: int
    subsets: tuple[int, ...]           # the C(n, d) candidates, combinations order
    index: dict                        # bitmask -> position
    nbr: tuple[int, ...]               # position -> bitset of the positions of its generator-graph neighbours
    incidence: np.ndarray              # (C, n) 0/1
    adjacency: np.ndarray              # (C, C) float32 0/1: the generator graph of all candidates (Johnson graph)


@functools.lru_cache(maxsize=32)
def _tables(n: int, d: int) -> _Tables:
    subsets = tuple(sum(1 << v for v in c) for c in itertools.combinations(range(n), d))
    inc = np.array([[(s >> v) & 1 for v in range(n)] for s in subsets], dtype=np.int64)
    adj = (inc @ inc.T) == d - 1
    weights = [1 << j for j in range(len(subsets))]
    nbr = tuple(sum(w for w, a in zip(weights, row) if a) for row in adj)
    return _Tables(n, d, subsets, {s: i for i, s in enumerate(subsets)}, nbr, inc, adj.astype(np.float32))


@constraints(n="int>=2", d="int>=1")
def candidate_subsets(n: int, d: int) -> tuple[int, ...]:
    """The C(n, d) candidate generators as bitmasks, in the order of the environment's actions.

    Parameters
    ----------
    n : int
        Number of variables, 2 <= n <= 12.
    d : int
        Degree of the generators, 1 <= d < n.

    Returns
    -------
    tuple of int
        Bitmask ``sum(1 << v for v in S)`` of every d-subset S of {0, ..., n-1}, in
        ``itertools.combinations(range(n), d)`` order.

    Examples
    --------
    >>> from numtk.torch.hirsch import candidate_subsets
    >>> [bin(s) for s in candidate_subsets(3, 2)]
    ['0b11', '0b101', '0b110']
    """
    n, d = _check_nd(n, d)
    return _tables(n, d).subsets


@constraints(subset="int>=1", n="int>=2", d="int>=1")
def subset_index(subset: int, n: int, d: int) -> int:
    """The position of a d-subset (a bitmask) among :func:`candidate_subsets` (its "add" action).

    Parameters
    ----------
    subset : int
        A bitmask with d bits set, all below bit n.
    n : int
        Number of variables.
    d : int
        Degree.

    Returns
    -------
    int
        Its index i in ``candidate_subsets(n, d)``: action i of :class:`HirschEnv` adds it, action
        ``C + i`` removes it.

    Examples
    --------
    >>> from numtk.torch.hirsch import subset_index
    >>> subset_index(0b101, 3, 2)
    1
    """
    n, d = _check_nd(n, d)
    s = check_int(subset, "subset", minimum=1)
    idx = _tables(n, d).index.get(s)
    if idx is None:
        raise ValueError(f"`subset` must be a bitmask of `d` = {d} variables among `n` = {n}; got {bin(s)}")
    return idx


def _bits(x: int):
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


def _diameter_np(members: int, adjacency: np.ndarray) -> float:
    """Diameter of the generator graph restricted to the positions in ``members``: a synchronous BFS from every
    vertex at once, one (m, m) matrix product per level; math.inf if disconnected, 0 for one vertex or none."""
    idx = list(_bits(members))
    m = len(idx)
    if m <= 1:
        return 0
    A = adjacency[np.ix_(idx, idx)]
    reached = np.eye(m, dtype=bool)
    frontier = np.eye(m, dtype=np.float32)
    level = 0
    while True:
        new = ((frontier @ A) > 0) & ~reached
        if not new.any():
            break
        reached |= new
        frontier = new.astype(np.float32)
        level += 1
    return level if reached.all() else math.inf


def _colon_ok(prefix: Sequence[int], u: int) -> bool:
    """Whether appending generator ``u`` to the order ``prefix`` keeps linear quotients: the colon ideal
    (S_1, ..., S_k) : x^u is generated by the variables v with S_j \\ u = {v}, and every S_j \\ u must meet them."""
    if not prefix:
        return True
    colon = 0
    for s in prefix:
        diff = s & ~u
        if diff & (diff - 1) == 0:
            colon |= diff
    if not colon:
        return False
    for s in prefix:
        if not (s & ~u & colon):
            return False
    return True


def _order_is_lq(order: Sequence[int]) -> bool:
    return all(_colon_ok(order[:i], order[i]) for i in range(1, len(order)))


def _greedy_lq_order(gens: Sequence[int], *, starts: int | None = 4, degrees: Sequence[int] | None = None
                     ) -> list[int] | None:
    """A linear-quotients order of ``gens`` found greedily (append any generator that keeps the property, the
    one with most generator-graph neighbours in the prefix first), from up to ``starts`` first generators; None
    if none was found (which does not prove that none exists)."""
    gens = list(dict.fromkeys(gens))
    m = len(gens)
    if m <= 1:
        return list(gens)
    if degrees is None:
        d = gens[0].bit_count()
        degrees = [sum((g & h).bit_count() == d - 1 for h in gens) for g in gens]
    deg = degrees
    firsts = sorted(range(m), key=lambda i: (-deg[i], gens[i]))
    for first in firsts[:starts] if starts else firsts:
        order = [gens[first]]
        left = [g for i, g in enumerate(gens) if i != first]
        while left:
            best = None
            for j, g in enumerate(left):
                if _colon_ok(order, g):
                    best = j
                    break
            if best is None:
                break
            order.append(left.pop(best))
        if not left:
            return order
    return None


@constraints(generators="any", d="int>=1")
def is_induced_path(generators: Sequence[int], d: int) -> bool:
    """Whether the generators, in the given order, form an induced path of the generator graph.

    Consecutive generators share d - 1 variables and no two non-consecutive ones do (the graph induced on
    them is exactly the path), the shape the options agent's "spine" grows.

    Parameters
    ----------
    generators : sequence of int
        Distinct d-subsets as bitmasks, in path order.
    d : int
        Their degree.

    Returns
    -------
    bool
        True for an induced path (a single generator is one).

    Examples
    --------
    >>> from numtk.torch.hirsch import is_induced_path
    >>> is_induced_path([0b0011, 0b0110, 0b1100], 2)       # edges 01, 12, 23: the path 0-1-2-3
    True
    >>> is_induced_path([0b0011, 0b0110, 0b0101], 2)       # a triangle
    False
    """
    d = check_int(d, "d", minimum=1, maximum=62)
    if isinstance(generators, (str, bytes)) or not hasattr(generators, "__iter__"):
        raise TypeError(f"`generators` must be a sequence of int bitmasks; got {type(generators).__name__}")
    gens = [check_int(g, "generators") for g in generators]
    if len(set(gens)) != len(gens):
        return False
    for i, a in enumerate(gens):
        for j in range(i + 1, len(gens)):
            adjacent = (a & gens[j]).bit_count() == d - 1
            if adjacent != (j == i + 1):
                return False
    return True


# --------------------------------------------------------------------------------------------------
# the environment
# --------------------------------------------------------------------------------------------------
@constraints(n="int>=2", d="int>=1", max_steps="count", field="option", reward="option", step_cost="real>=0",
             rng="rng", render_mode="option")
class HirschEnv(gym.Env):
    """The search for a counterexample to the algebraic Hirsch conjecture as a :class:`gymnasium.Env`.

    The state is a set G of d-subsets of [n], the generators x^S of a squarefree monomial ideal. An episode
    starts from the empty set (or from ``reset(options=...)``) and edits it one generator at a time.

    Spaces:

    * ``observation_space = MultiBinary(C)``, C = C(n, d): the membership vector of G over the candidates in
      :func:`candidate_subsets` order (int8 0/1);
    * ``action_space = Discrete(2 C + 1)``: action i < C adds candidate i, action C + i removes it, action 2 C
      stops the episode. ``info["action_mask"]`` (int8, length 2 C + 1) marks the legal ones: adding an absent
      generator, removing a present one, stopping once G is not empty. An illegal action leaves G unchanged
      (it still costs a step; ``info["illegal"]`` is True): gymnasium's checker steps random actions.

    Rewards (``field`` decides linearity, see :meth:`is_linear`):

    * ``"sparse"``: 1 on the step that reaches a counterexample, i.e. Gamma(G) connected, I linear over
      ``field`` and diam Gamma(G) > d; the episode then terminates. 0 otherwise.
    * ``"shaped"``: ``-step_cost`` on every step, plus phi(G) on the last step of the episode (stop,
      counterexample, or the step limit), where phi(G) = diam Gamma(G) - d if I is linear and -(d + 1) if not
      (or G is empty). A counterexample terminates with phi > 0.

    ``truncated`` is True on step ``max_steps``. Linearity is decided, in order of cost, by linear quotients of
    the insertion order (kept incrementally), a greedy linear-quotients order, and Reisner's criterion
    (:func:`numtk.algebra.has_linear_resolution`); Gamma must be connected first (linear ideals have connected
    generator graphs). Diameters and linearity are cached per state.

    Parameters
    ----------
    n : int
        Number of variables, 2 <= n <= 12.
    d : int
        Degree of the generators, 1 <= d < n.
    max_steps : int, default 64
        Steps per episode before truncation.
    field : {"Q", "GF2"}, default "Q"
        Coefficient field of the linearity check (linearity can depend on the characteristic; a
        counterexample must state its field).
    reward : {"sparse", "shaped"}, default "sparse"
        The reward above.
    step_cost : float, default 0.01
        Cost per step of the shaped reward.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Seeds ``np_random`` (random starts) until ``reset(seed=...)`` reseeds it.
    render_mode : {None, "ansi"}, optional
        ``"ansi"``: :meth:`render` returns the generators as text.

    Examples
    --------
    >>> from numtk.torch.hirsch import HirschEnv, subset_index
    >>> env = HirschEnv(5, 2, reward="shaped")
    >>> obs, info = env.reset(seed=0)
    >>> env.action_space, obs.sum(), info["action_mask"][-1]       # nothing to remove, nothing to stop yet
    (Discrete(21), np.int64(0), np.int8(0))
    >>> for edge in (0b00011, 0b00110, 0b01100, 0b11000):            # the path 0-1-2-3-4: edges 01, 12, 23, 34
    ...     obs, r, terminated, truncated, info = env.step(subset_index(edge, 5, 2))
    >>> info["diameter"], env.is_linear()       # diameter 3 > d, but the complement of P5 is not chordal
    (3, False)
    >>> obs, r, terminated, truncated, info = env.step(subset_index(0b01010, 5, 2))   # add edge 13
    >>> info["diameter"], env.is_linear(), terminated
    (2, True, False)
    >>> obs, r, terminated, truncated, info = env.step(env.stop_action)
    >>> round(r, 2), terminated                 # diam 2 - d 2, and the cost of the last step
    (-0.01, True)
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, n: int, d: int, *, max_steps: int = 64, field: str = "Q", reward: str = "sparse",
                 step_cost: float = 0.01, rng: Any = None, render_mode: str | None = None):
        self.n, self.d = _check_nd(n, d)
        self.max_steps = check_int(max_steps, "max_steps", minimum=1, maximum=10**6)
        self.field = check_option(field, "field", FIELDS)
        self.reward_mode = check_option(reward, "reward", REWARDS)
        self.step_cost = check_real(step_cost, "step_cost", low=0.0)
        if render_mode is not None:
            check_option(render_mode, "render_mode", self.metadata["render_modes"])
        self.render_mode = render_mode
        t = _tables(self.n, self.d)
        self._t = t
        self.subsets = t.subsets
        self.n_candidates = C = len(t.subsets)
        self.stop_action = 2 * C
        self.observation_space = spaces.MultiBinary(C)
        self.action_space = spaces.Discrete(2 * C + 1)
        self._np_random = numpy_rng(rng)
        self._diam_cache: dict[int, float] = {}
        self._lin_cache: dict[int, bool] = {}
        self.exact_checks = 0        # calls of Reisner's criterion (numtk.algebra), for the benchmarks
        self._members = 0
        self._order: list[int] = []  # positions, in insertion order
        self._order_lq = True
        self._steps = 0

    # state ----------------------------------------------------------------------------------------
    @property
    def generators(self) -> tuple[int, ...]:
        """The current generators as bitmasks, in insertion order."""
        return tuple(self.subsets[i] for i in self._order)

    @property
    def members(self) -> int:
        """The current state as a bitset over candidate positions (bit i: candidate i is a generator)."""
        return self._members

    @property
    def steps(self) -> int:
        """Steps taken in the current episode."""
        return self._steps

    def observation(self) -> np.ndarray:
        """The membership vector (int8, length C)."""
        m = self._members
        return np.array([(m >> i) & 1 for i in range(self.n_candidates)], dtype=np.int8)

    def action_mask(self) -> np.ndarray:
        """The legal actions (int8, length 2 C + 1): add absent, remove present, stop when G is not empty."""
        C, m = self.n_candidates, self._members
        present = np.array([(m >> i) & 1 for i in range(C)], dtype=np.int8)
        return np.concatenate([1 - present, present, np.array([1 if m else 0], dtype=np.int8)])

    def diameter(self) -> float:
        """Diameter of the generator graph of the current state; math.inf if disconnected, 0 for one generator
        or none."""
        return self._diameter(self._members)

    def is_linear(self) -> bool:
        """Whether the ideal of the current state has a linear resolution over ``field`` (False for the empty
        set)."""
        if self._members and self._order_lq:
            return True
        return self._linear(self._members)

    def is_counterexample(self) -> bool:
        """Gamma connected, linear over ``field`` and diameter > d (the diameter is tested first)."""
        return self._counterexample(self._members)

    def potential(self) -> float:
        """The shaped reward's terminal term: diam - d for a linear ideal, -(d + 1) otherwise."""
        if self.is_linear():
            return float(self.diameter() - self.d)
        return -(self.d + 1.0)

    def _diameter(self, m: int) -> float:
        got = self._diam_cache.get(m)
        if got is None:
            got = _diameter_np(m, self._t.adjacency)
            if len(self._diam_cache) >= _CACHE_MAX:
                self._diam_cache.clear()
            self._diam_cache[m] = got
        return got

    def _linear(self, m: int) -> bool:
        if m == 0:
            return False
        got = self._lin_cache.get(m)
        if got is None:
            got = self._decide_linear(m)
            if len(self._lin_cache) >= _CACHE_MAX:
                self._lin_cache.clear()
            self._lin_cache[m] = got
        return got

    def _decide_linear(self, m: int) -> bool:
        if self._diameter(m) == math.inf:
            return False
        pos = list(_bits(m))
        gens = [self.subsets[i] for i in pos]
        nbr = self._t.nbr
        if _greedy_lq_order(gens, degrees=[(nbr[i] & m).bit_count() for i in pos]) is not None:
            return True
        from numtk.algebra import has_linear_resolution

        self.exact_checks += 1    # connected, no linear-quotients order found: Reisner's criterion decides
        return bool(has_linear_resolution(gens, self.n, field=self.field, d=self.d, method="reisner"))

    def _counterexample(self, m: int) -> bool:
        diam = self._diameter(m)
        if not (m and self.d < diam < math.inf):
            return False
        return (m == self._members and self._order_lq) or self._linear(m)

    # gymnasium API --------------------------------------------------------------------------------
    @constraints(seed="rng", options="mapping")
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode.

        Parameters
        ----------
        seed : int, optional
            Reseeds ``np_random`` (gymnasium's convention).
        options : dict, optional
            ``{"generators": [bitmask, ...]}`` starts from those d-subsets (in that insertion order);
            ``{"random": m}`` from m distinct candidates drawn with ``np_random``; default: the empty set.

        Returns
        -------
        observation : numpy.ndarray
            The membership vector.
        info : dict
            ``action_mask``, ``diameter``, ``generators`` (insertion order), ``steps``.
        """
        if seed is not None:
            seed = check_int(seed, "seed", minimum=0)
        super().reset(seed=seed)
        order: list[int] = []
        if options:
            if not isinstance(options, dict) or not set(options) <= {"generators", "random"}:
                raise ValueError("`options` must be a dict with the key 'generators' or 'random'; "
                                 f"got {options!r}")
            if "generators" in options:
                gens = options["generators"]
                if isinstance(gens, (str, bytes)) or not hasattr(gens, "__iter__"):
                    raise TypeError("`options['generators']` must be a sequence of int bitmasks")
                for g in gens:
                    g = check_int(g, "options['generators']", minimum=1)
                    i = self._t.index.get(g)
                    if i is None:
                        raise ValueError(f"`options['generators']` must hold bitmasks of {self.d} variables among "
                                         f"{self.n}; got {bin(g)}")
                    if i not in order:
                        order.append(i)
            if "random" in options:
                k = check_int(options["random"], "options['random']", minimum=0, maximum=self.n_candidates)
                order = [int(i) for i in self.np_random.choice(self.n_candidates, size=k, replace=False)]
        self._order = order
        self._members = sum(1 << i for i in order)
        self._order_lq = bool(order) and _order_is_lq([self.subsets[i] for i in order])
        self._steps = 0
        return self.observation(), self._info()

    def _info(self, illegal: bool = False) -> dict:
        return {"action_mask": self.action_mask(), "diameter": self.diameter(), "generators": self.generators,
                "steps": self._steps, "illegal": illegal}

    @constraints(action="index")
    def step(self, action: Any):
        """Apply one action; returns ``(observation, reward, terminated, truncated, info)``.

        ``info`` holds ``action_mask``, ``diameter``, ``generators``, ``steps`` and ``illegal``; on the last step
        of an episode also ``linear`` (over ``field``) and ``counterexample``.
        """
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)) and not (
                isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu"):
            raise TypeError(f"`action` must be an int in [0, {self.stop_action}]; got {type(action).__name__}")
        a = int(action)
        if not 0 <= a <= self.stop_action:
            raise ValueError(f"`action` must be in [0, {self.stop_action}]; got {a}")
        C = self.n_candidates
        self._steps += 1
        illegal = False
        stop = False
        if a == self.stop_action:
            stop = bool(self._members)
            illegal = not stop
        elif a < C:
            if (self._members >> a) & 1:
                illegal = True
            else:
                if self._order_lq or not self._order:
                    self._order_lq = _colon_ok(self.generators, self.subsets[a])
                self._order.append(a)
                self._members |= 1 << a
        else:
            i = a - C
            if not (self._members >> i) & 1:
                illegal = True
            else:
                self._order.remove(i)
                self._members &= ~(1 << i)
                self._order_lq = bool(self._order) and _order_is_lq(self.generators)
        found = self.is_counterexample()
        terminated = stop or found
        truncated = not terminated and self._steps >= self.max_steps
        if self.reward_mode == "sparse":
            reward = 1.0 if found else 0.0
        else:
            reward = -self.step_cost
            if terminated or truncated:
                reward += self.potential()
        info = self._info(illegal)
        if terminated or truncated:
            info["linear"] = self.is_linear()
            info["counterexample"] = found
        return self.observation(), float(reward), bool(terminated), bool(truncated), info

    def render(self):
        """The generators as variable sets (``render_mode="ansi"``)."""
        gens = ["{" + ",".join(str(v) for v in _bits(g)) + "}" for g in self.generators]
        return f"G = [{', '.join(gens)}]  diam = {self.diameter()}  steps = {self._steps}"


# --------------------------------------------------------------------------------------------------
# the equivariant GNN
# --------------------------------------------------------------------------------------------------
class PolicyOutput(NamedTuple):
    """What :class:`EquivariantGNNPolicy` returns for a batch of B states."""

    #: (B, 2 C + 1) action logits in the environment's layout: add (C), remove (C; -inf where absent), stop
    logits: Any
    #: (B,) state values
    value: Any
    #: (B, M) remove logits of the generators in the order they were given (padding: -inf)
    remove: Any


def _mlp(i: int, h: int, o: int) -> "nn.Sequential":
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


class _Layer(nn.Module):
    def __init__(self, h: int):
        super().__init__()
        self.var = _mlp(2 * h, h, h)
        self.gen = _mlp(3 * h, h, h)


@constraints(hidden="count", layers="int>=1", rng="rng")
class EquivariantGNNPolicy(nn.Module):
    """The policy and value network: message passing on variables and generators, equivariant under S_n.

    Nodes are the n variables and the m generators of the state. Each layer updates the variables from the mean
    of the generators containing them (incidence), then the generators from the mean of their variables and the
    mean of their generator-graph neighbours (the linear first syzygies), all with residual MLPs. A global
    context (means of both node sets, m / C) feeds four heads:

    * "add U", for every candidate d-subset U: an MLP of the mean of U's variable embeddings, the context, the
      number of present generators adjacent to U (scaled) and whether U is present;
    * "remove S", for every generator: an MLP of its embedding and the context;
    * "stop" and the value: MLPs of the context.

    Only sums, means and per-node maps are used, so permuting the variables permutes the add logits as it
    permutes the candidate subsets, and permuting the order in which the generators are given permutes the
    remove logits the same way (both exact up to rounding).

    Parameters
    ----------
    hidden : int, default 64
        Width of the node embeddings.
    layers : int, default 3
        Rounds of message passing.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Seeds the initial weights (None: torch's global generator, as nn.Module does).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.hirsch import EquivariantGNNPolicy
    >>> policy = EquivariantGNNPolicy(hidden=16, layers=2, rng=0).double()
    >>> out = policy([[0b00111, 0b01110]], n=5, d=3)          # one state: generators {0,1,2} and {1,2,3}
    >>> out.logits.shape, out.value.shape, out.remove.shape    # 2 C(5, 3) + 1 actions
    (torch.Size([1, 21]), torch.Size([1]), torch.Size([1, 2]))
    >>> int(torch.isfinite(out.logits).sum())                  # 10 adds, 2 removes, stop
    13
    """

    def __init__(self, hidden: int = 64, layers: int = 3, *, rng: Any = None):
        super().__init__()
        self.hidden = check_int(hidden, "hidden", minimum=1, maximum=4096)
        self.n_layers = check_int(layers, "layers", minimum=1, maximum=64)
        gen = None if rng is None else torch_generator(rng)
        with torch.random.fork_rng(enabled=gen is not None):
            if gen is not None:
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
            h = self.hidden
            self.var_in = nn.Linear(2, h)
            self.gen_in = nn.Linear(2, h)
            self.layers = nn.ModuleList(_Layer(h) for _ in range(self.n_layers))
            self.ctx = _mlp(2 * h + 1, h, h)
            self.add_head = _mlp(2 * h + 2, h, 1)
            self.remove_head = _mlp(2 * h, h, 1)
            self.stop_head = _mlp(h, h, 1)
            self.value_head = _mlp(h, h, 1)

    def _featurize(self, states: Sequence[Sequence[int]], n: int, d: int) -> tuple:
        """The tensors of a batch of states: incidence (B, M, n), generator mask (B, M), candidate positions of
        the generators (B, M; -1 for padding), candidate incidence (C, n); float tensors in the module's dtype."""
        n, d = _check_nd(n, d)
        t = _tables(n, d)
        p = next(self.parameters())
        B = len(states)
        M = max([1] + [len(s) for s in states])
        inc = np.zeros((B, M, n), dtype=np.float64)
        pos = np.full((B, M), -1, dtype=np.int64)
        for b, gens in enumerate(states):
            k = len(gens)
            if k:
                arr = np.fromiter(gens, dtype=np.int64, count=k)
                inc[b, :k] = (arr[:, None] >> np.arange(n)) & 1
                try:
                    pos[b, :k] = [t.index[int(g)] for g in gens]
                except KeyError:
                    raise ValueError(f"`states` must hold bitmasks of `d` = {d} variables among `n` = {n}") from None
        as_t = functools.partial(torch.as_tensor, dtype=p.dtype, device=p.device)
        return as_t(inc), as_t(pos >= 0), torch.as_tensor(pos, device=p.device), as_t(t.incidence)

    @constraints(states="any", n="int>=2", d="int>=1")
    def forward(self, states: Sequence[Sequence[int]], n: int, d: int) -> PolicyOutput:
        """Logits and values of a batch of states.

        Parameters
        ----------
        states : sequence of sequences of int
            B states, each a sequence of d-subset bitmasks (its generators, any order, no repeats).
        n : int
            Number of variables.
        d : int
            Degree.

        Returns
        -------
        PolicyOutput
            ``logits`` (B, 2 C + 1) in :class:`HirschEnv`'s action layout, ``value`` (B,), ``remove`` (B, M).
        """
        if isinstance(states, (str, bytes)) or not hasattr(states, "__len__"):
            raise TypeError(f"`states` must be a sequence of sequences of int bitmasks; got {type(states).__name__}")
        inc, gmask, pos, cand = self._featurize(states, n, d)
        return self._forward_tensors(inc, gmask, pos, cand, d)

    def _forward_tensors(self, inc: Any, gmask: Any, pos: Any, cand: Any, d: int) -> PolicyOutput:
        """:meth:`forward` on the tensors of :meth:`_featurize`."""
        B, M, n = inc.shape
        C = cand.shape[0]
        g = gmask.to(inc.dtype)
        ov = inc @ inc.transpose(1, 2)
        adj = (ov == d - 1).to(inc.dtype) * g[:, :, None] * g[:, None, :]
        m = g.sum(1)
        var_deg = inc.sum(1)                                   # (B, n)
        gen_deg = adj.sum(2)                                   # (B, M)
        maxdeg = float(max(1, d * (n - d)))
        ones_v, ones_g = torch.ones_like(var_deg), torch.ones_like(gen_deg)
        hv = self.var_in(torch.stack([var_deg / m.clamp(min=1)[:, None], ones_v], -1))
        hg = self.gen_in(torch.stack([gen_deg / maxdeg, ones_g], -1)) * g[..., None]
        inc_t = inc.transpose(1, 2)
        for layer in self.layers:
            agg_v = (inc_t @ hg) / var_deg.clamp(min=1)[..., None]
            hv = hv + layer.var(torch.cat([hv, agg_v], -1))
            agg_gv = (inc @ hv) / d
            agg_gg = (adj @ hg) / gen_deg.clamp(min=1)[..., None]
            hg = (hg + layer.gen(torch.cat([hg, agg_gv, agg_gg], -1))) * g[..., None]
        pooled_g = hg.sum(1) / m.clamp(min=1)[:, None]
        ctx = self.ctx(torch.cat([hv.mean(1), pooled_g, (m / C)[:, None]], -1))     # (B, H)
        su = (cand @ hv) / d                                                         # (B, C, H)
        ovc = cand @ inc_t                                                           # (B, C, M)
        near = ((ovc == d - 1).to(inc.dtype) * g[:, None, :]).sum(-1) / maxdeg
        present = ((ovc == d).to(inc.dtype) * g[:, None, :]).sum(-1)
        add = self.add_head(torch.cat([su, ctx[:, None].expand(B, C, -1), near[..., None], present[..., None]],
                                      -1)).squeeze(-1)
        rem = self.remove_head(torch.cat([hg, ctx[:, None].expand(B, M, -1)], -1)).squeeze(-1)
        rem = rem.masked_fill(~gmask.bool(), -math.inf)
        rem_full = torch.full((B, C + 1), -math.inf, dtype=inc.dtype, device=inc.device)
        rem_full.scatter_(1, torch.where(pos >= 0, pos, C), rem)                    # padding -> column C
        logits = torch.cat([add, rem_full[:, :C], self.stop_head(ctx)], -1)
        return PolicyOutput(logits, self.value_head(ctx).squeeze(-1), rem)


# --------------------------------------------------------------------------------------------------
# PPO
# --------------------------------------------------------------------------------------------------
class _Step:
    __slots__ = ("net", "state", "mask", "action", "logp", "value", "reward", "adv", "ret")

    def __init__(self, net, state, mask, action, logp, value):
        self.net, self.state, self.mask, self.action = net, state, mask, action
        self.logp, self.value, self.reward = logp, value, 0.0
        self.adv = self.ret = 0.0


def _masked(logits, masks):
    return logits.masked_fill(~masks, -math.inf)


@torch.no_grad()
def _act(policy, states, masks_np, n, d, gen, greedy=False):
    """Sample actions of a batch of states under boolean masks; returns (actions, logps, values) as lists."""
    out = policy(states, n, d)
    masks = torch.as_tensor(np.asarray(masks_np, dtype=bool), device=out.logits.device)
    logits = _masked(out.logits, masks)
    if greedy:
        a = logits.argmax(-1)
    else:
        a = torch.multinomial(torch.softmax(logits.double(), -1), 1, generator=gen).squeeze(1)
    logp = torch.log_softmax(logits.double(), -1).gather(1, a[:, None]).squeeze(1)
    return a.tolist(), logp.tolist(), out.value.double().tolist()


def _finish(steps: list[_Step], gamma: float, lam: float) -> None:
    """GAE(gamma, lambda) advantages and returns over one episode's decisions (the last one is terminal)."""
    adv = 0.0
    next_v = 0.0
    for s in reversed(steps):
        delta = s.reward + gamma * next_v - s.value
        adv = delta + gamma * lam * adv
        s.adv, s.ret = adv, adv + s.value
        next_v = s.value


@dataclass
class _PPO:
    """Clipped-objective PPO on one policy network."""

    policy: Any
    lr: float = 3e-4
    clip: float = 0.2
    epochs: int = 4
    minibatch: int = 256
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    max_grad_norm: float = 0.5

    def __post_init__(self):
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=self.lr)

    def update(self, steps: list[_Step], n: int, d: int, gen) -> dict:
        if not steps:
            return {}
        adv = np.array([s.adv for s in steps])
        if len(steps) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        dtype = next(self.policy.parameters()).dtype
        losses = []
        for _ in range(self.epochs):
            perm = torch.randperm(len(steps), generator=gen).tolist()
            for lo in range(0, len(steps), self.minibatch):
                idx = perm[lo:lo + self.minibatch]
                batch = [steps[i] for i in idx]
                out = self.policy([s.state for s in batch], n, d)
                masks = torch.as_tensor(np.stack([s.mask for s in batch]), dtype=torch.bool)
                logits = _masked(out.logits, masks)
                logp_all = torch.log_softmax(logits, -1)
                a = torch.tensor([s.action for s in batch])
                logp = logp_all.gather(1, a[:, None]).squeeze(1)
                old = torch.tensor([s.logp for s in batch], dtype=dtype)
                A = torch.tensor(adv[idx], dtype=dtype)
                R = torch.tensor([s.ret for s in batch], dtype=dtype)
                ratio = torch.exp(logp - old)
                pg = -torch.min(ratio * A, ratio.clamp(1 - self.clip, 1 + self.clip) * A).mean()
                p = torch.softmax(logits, -1)
                ent = -(p * logp_all.masked_fill(~masks, 0.0)).sum(-1).mean()
                vloss = ((out.value - R) ** 2).mean()
                loss = pg + self.value_coef * vloss - self.entropy_coef * ent
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.opt.step()
                losses.append(float(loss.detach()))
        return {"loss": float(np.mean(losses))}


def _env_from(env: Any, d: Any, *, reward: str = "shaped", max_steps: int | None = None) -> HirschEnv:
    if isinstance(env, HirschEnv):
        if d is not None:
            raise ValueError("`d` must be None when `env` is a HirschEnv (it has its own d)")
        return env
    if isinstance(env, (bool, np.bool_)) or not isinstance(env, (int, np.integer)):
        raise TypeError(f"`env` must be a HirschEnv or the number of variables n (an int); got {type(env).__name__}")
    env = check_int(env, "env", minimum=2, maximum=MAX_N)
    if d is None:
        raise ValueError("`d` is required when `env` is the number of variables n")
    d = check_int(d, "d", minimum=1)
    if d >= env:
        raise ValueError(f"`d` must be < n = {env}; got {d}")
    kw = {} if max_steps is None else {"max_steps": max_steps}
    return HirschEnv(int(env), d, reward=reward, **kw)


class _Tracker:
    """The search curve: environment steps, the best diameter among the linear ideals reached so far."""

    def __init__(self, d: int):
        self.d = d
        self.env_steps = 0
        self.best = -math.inf
        self.best_step = 0
        self.best_generators: tuple[int, ...] = ()
        self.linear_found: dict[int, int] = {}       # members bitset -> diameter, every distinct linear ideal
        self.counterexamples: list[tuple[int, ...]] = []
        self.at_bound = 0                                # distinct linear ideals of diameter >= d
        self.curve_steps: list[int] = []
        self.curve_best: list[float | None] = []
        self.curve_bound: list[int] = []

    def linear(self, env: HirschEnv, members: int) -> None:
        diam = env._diameter(members)
        if members not in self.linear_found and diam >= self.d:
            self.at_bound += 1
        self.linear_found[members] = diam
        if diam > self.best:
            self.best = diam
            self.best_step = self.env_steps
            self.best_generators = tuple(env.subsets[i] for i in _bits(members))
            self.point()
        if diam > self.d:
            self.counterexamples.append(tuple(env.subsets[i] for i in _bits(members)))

    def point(self) -> None:
        self.curve_steps.append(self.env_steps)
        self.curve_best.append(float(self.best) if self.best > -math.inf else None)
        self.curve_bound.append(self.at_bound)

    def result(self, env: HirschEnv, t0: float, **extra) -> Any:
        from numtk._lib import Result

        diams = sorted(self.linear_found.values())
        hist = {int(k): diams.count(k) for k in sorted(set(diams))}
        return Result(best_diameter=float(self.best) if self.best > -math.inf else None,
                      best_generators=self.best_generators, linear_diameters=hist,
                      steps_to_best=self.best_step, n_linear=len(self.linear_found),
                      counterexamples=self.counterexamples, field=env.field, env_steps=self.env_steps,
                      history={"env_steps": self.curve_steps, "best_diameter": self.curve_best,
                               "linear_at_bound": self.curve_bound, **extra},
                      wall_time=time.perf_counter() - t0)


def _one_thread(fn):
    """Run ``fn`` with torch on one intra-op thread: the graphs are tiny, thread hand-offs cost more than they
    save (tenfold on two busy cores)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch_threads(1):
            return fn(*args, **kwargs)

    return wrapper


def _check_train(steps, batch_episodes, rng):
    steps = check_int(steps, "steps", minimum=1, maximum=10**8)
    batch_episodes = check_int(batch_episodes, "batch_episodes", minimum=1, maximum=4096)
    return steps, batch_episodes, numpy_rng(rng), torch_generator(rng if not isinstance(rng, np.random.Generator)
                                                                  else int(rng.integers(0, 2**62)))


def _training_setup(env, d, steps, batch_episodes, rng, lr, reward, max_steps=None):
    """The shared checks of the agents' ``train``: the environment (made from n and d when needed) and
    ``batch_episodes`` copies of it sharing one cache, the step budget, the generators and the learning rate."""
    check_option(reward, "reward", REWARDS)
    env = _env_from(env, d, reward=reward, max_steps=max_steps)
    steps, K, np_rng, gen = _check_train(steps, batch_episodes, rng)
    lr = check_real(lr, "lr", low=0.0, high=1.0, low_open=True)
    envs = [env] + [HirschEnv(env.n, env.d, max_steps=env.max_steps, field=env.field, reward=env.reward_mode,
                              step_cost=env.step_cost) for _ in range(K - 1)]
    for e in envs[1:]:            # one cache for all copies
        e._diam_cache, e._lin_cache = env._diam_cache, env._lin_cache
    return env, envs, steps, K, np_rng, gen, lr


# --------------------------------------------------------------------------------------------------
# the options agent
# --------------------------------------------------------------------------------------------------
@constraints(spine_policy="callable", complete_policy="callable", spine_length="int>=1", max_spine="int>=2")
class OptionsAgent:
    """The options-based hierarchical agent (reconstructed): grow a spine, then complete it to a linear ideal.

    An episode chains two constrained options on :class:`HirschEnv`'s primitive actions:

    * o1 "spine" (``spine_policy``): starts from any candidate, then adds only candidates adjacent in the
      generator graph to the path's end and to no other path vertex, so the generators form an induced path
      (diameter = length - 1); it stops at the target length L or when no extension exists;
    * o2 "complete" (``complete_policy``): adds candidates adjacent to at least one generator (Gamma stays
      connected) until the ideal is linear over the environment's field (linear quotients, else Reisner), under
      the environment's step budget (one step is kept for the final stop).

    The agent then stops the episode. The high-level policy picks L in 2 .. ``max_spine`` from a categorical
    distribution trained with REINFORCE (a running-mean baseline) on the episode return, unless ``spine_length``
    fixes it. Both low-level policies are trained with PPO (clipped objective, GAE with gamma = 1, lambda =
    0.95) on the environment's reward, each on its own option's decisions; the shaped reward is the default for
    training, since the sparse one is zero on every episode when no counterexample is reachable. The paper's
    agent is described only in outline; these choices are numtk's (see the tutorial).

    Parameters
    ----------
    spine_policy : EquivariantGNNPolicy
        The network of option o1 (any module with its call signature).
    complete_policy : EquivariantGNNPolicy
        The network of option o2 (may be the same object as ``spine_policy``: one network, one optimizer).
    spine_length : int or None, default None
        Fixed target spine length (generators); None: learned by the high-level policy.
    max_spine : int, optional
        Largest target length of the high-level policy (default 2 d + 2).

    Examples
    --------
    >>> from numtk.torch.hirsch import EquivariantGNNPolicy, OptionsAgent
    >>> agent = OptionsAgent(EquivariantGNNPolicy(16, 2, rng=0), EquivariantGNNPolicy(16, 2, rng=1))
    >>> res = agent.train(6, 2, steps=300, rng=0)
    >>> res.best_diameter <= 2          # Froeberg: linear edge ideals have generator graphs of diameter <= 2
    True
    >>> res.env_steps >= 300, res.counterexamples
    (True, [])
    """

    def __init__(self, spine_policy: Any, complete_policy: Any, *, spine_length: int | None = None,
                 max_spine: int | None = None):
        for name, p in (("spine_policy", spine_policy), ("complete_policy", complete_policy)):
            if not isinstance(p, nn.Module):
                raise TypeError(f"`{name}` must be an nn.Module such as EquivariantGNNPolicy; got {type(p).__name__}")
        self.spine_policy, self.complete_policy = spine_policy, complete_policy
        self.spine_length = None if spine_length is None else check_int(spine_length, "spine_length", minimum=1,
                                                                         maximum=10**6)
        self.max_spine = None if max_spine is None else check_int(max_spine, "max_spine", minimum=2, maximum=10**6)
        self.high_logits: Any = None

    def _lengths(self, d: int) -> list[int]:
        top = self.max_spine if self.max_spine is not None else 2 * d + 2
        return list(range(2, top + 1))

    # masks of the options ---------------------------------------------------------------------------
    @staticmethod
    def _spine_mask(env: HirschEnv, path: Sequence[int]) -> np.ndarray:
        """Legal actions of the spine option: adds of candidates adjacent only to the path's end (anything
        when the path is empty)."""
        C = env.n_candidates
        mask = np.zeros(2 * C + 1, dtype=bool)
        if not path:
            mask[:C] = True
            return mask
        nbr, members, end = env._t.nbr, env.members, path[-1]
        for i in _bits(nbr[end] & ~members):
            if nbr[i] & members == 1 << end:
                mask[i] = True
        return mask

    @staticmethod
    def _complete_mask(env: HirschEnv) -> np.ndarray:
        """Legal actions of the complete option: adds of absent candidates adjacent to some generator."""
        C = env.n_candidates
        mask = np.zeros(2 * C + 1, dtype=bool)
        members = env.members
        near = 0
        for i in _bits(members):
            near |= env._t.nbr[i]
        for i in _bits(near & ~members):
            mask[i] = True
        return mask

    # episodes ---------------------------------------------------------------------------------------
    def _run_batch(self, envs: list[HirschEnv], lengths: list[int], np_rng, gen, tracker: _Tracker | None,
                   greedy: bool = False):
        """Run one episode on each env in lockstep (batched forwards); returns per env a dict with the
        decisions ("steps"), the spine, the episode return and the final state."""
        n, d = envs[0].n, envs[0].d
        K = len(envs)
        eps = []
        for e in envs:
            e.reset(seed=int(np_rng.integers(0, 2**31 - 1)))
            eps.append({"steps": [], "spine": [], "phase": "spine", "return": 0.0, "done": False})
        while True:
            groups: dict[str, list[int]] = {"spine": [], "complete": []}
            masks: dict[int, np.ndarray] = {}
            for k in range(K):
                ep, env = eps[k], envs[k]
                if ep["done"]:
                    continue
                if ep["phase"] == "spine":
                    mask = self._spine_mask(env, ep["spine"]) if len(ep["spine"]) < lengths[k] else None
                    if mask is None or not mask.any():
                        ep["phase"] = "complete"
                if ep["phase"] == "complete":
                    mask = None
                    if not env.is_linear() and env.steps < env.max_steps - 1:
                        mask = self._complete_mask(env)
                        if not mask.any():
                            mask = None
                    if mask is None:            # done: linear, out of budget, or stuck -> stop the episode
                        self._env_step(envs[k], ep, env.stop_action, tracker)
                        continue
                masks[k] = mask
                groups[ep["phase"]].append(k)
            if not masks:
                break
            for phase, ks in groups.items():
                if not ks:
                    continue
                policy = self.spine_policy if phase == "spine" else self.complete_policy
                states = [envs[k].generators for k in ks]
                acts, logps, vals = _act(policy, states, [masks[k] for k in ks], n, d, gen, greedy)
                for k, a, lp, v in zip(ks, acts, logps, vals):
                    ep = eps[k]
                    ep["steps"].append(_Step(phase, states[ks.index(k)], masks[k], a, lp, v))
                    if phase == "spine":
                        ep["spine"].append(a)
                    self._env_step(envs[k], ep, a, tracker)
        return eps

    @staticmethod
    def _env_step(env: HirschEnv, ep: dict, a: int, tracker: _Tracker | None) -> None:
        _, r, term, trunc, info = env.step(a)
        ep["return"] += r
        if ep["steps"]:
            ep["steps"][-1].reward += r
        if tracker is not None:
            tracker.env_steps += 1
        if term or trunc:
            ep["done"] = True
            ep["final"] = env.generators
            ep["linear"] = info["linear"]
            ep["diameter"] = info["diameter"]
            if tracker is not None and info["linear"]:
                tracker.linear(env, env.members)

    @constraints(env="option", rng="rng", greedy="bool")
    def run_episode(self, env: HirschEnv, *, rng: Any = None, greedy: bool = False) -> Any:
        """One episode on ``env`` with the current policies (no training).

        Parameters
        ----------
        env : HirschEnv
            The environment (reset by the call).
        rng : None, int, numpy.random.Generator or torch.Generator, optional
            Seeds the reset and the sampled actions.
        greedy : bool, default False
            Take the most likely action instead of sampling (the spine length too).

        Returns
        -------
        Result
            ``spine`` (the spine's generators as bitmasks, in path order), ``generators`` (the final state),
            ``linear``, ``diameter``, ``spine_length`` (the target), ``return``.
        """
        from numtk._lib import Result

        if not isinstance(env, HirschEnv):
            raise TypeError(f"`env` must be a HirschEnv; got {type(env).__name__}")
        greedy = check_bool(greedy, "greedy")
        np_rng = numpy_rng(rng)
        gen = torch_generator(int(np_rng.integers(0, 2**62)))
        L = self._pick_lengths(1, env.d, np_rng, greedy)[0][0]
        ep = self._run_batch([env], [L], np_rng, gen, None, greedy)[0]
        return Result(spine=tuple(env.subsets[i] for i in ep["spine"]), generators=ep["final"],
                      linear=ep["linear"], diameter=ep["diameter"], spine_length=L, **{"return": ep["return"]})

    def _pick_lengths(self, K: int, d: int, np_rng, greedy: bool = False):
        lengths = self._lengths(d)
        if self.spine_length is not None:
            return [self.spine_length] * K, None
        if self.high_logits is None or self.high_logits.shape[0] != len(lengths):
            self.high_logits = torch.zeros(len(lengths), dtype=torch.float64, requires_grad=True)
        p = torch.softmax(self.high_logits.detach(), 0).numpy()
        if greedy:
            idx = np.full(K, int(p.argmax()))
        else:
            idx = np_rng.choice(len(lengths), size=K, p=p / p.sum())
        return [lengths[i] for i in idx], idx

    @constraints(env=("int>=2", "option"), d="int>=1", steps="count", rng="rng", batch_episodes="count",
                 lr="real>0", high_lr="real>0", reward="option")
    @_one_thread
    def train(self, env: Any, d: int | None = None, *, steps: int = 5000, rng: Any = None,
              batch_episodes: int = 16, lr: float = 3e-4, high_lr: float = 0.1, reward: str = "shaped") -> Any:
        """Train the agent for about ``steps`` environment steps; the search curve comes back.

        Parameters
        ----------
        env : HirschEnv or int
            The environment, or n (then ``d`` is required and a ``HirschEnv(n, d, reward=reward)`` is made).
        d : int, optional
            The degree, when ``env`` is n.
        steps : int, default 5000
            Environment steps to spend (the last batch of episodes is completed).
        rng : None, int, numpy.random.Generator or torch.Generator, optional
            Seeds the resets, the sampled actions and the minibatch order (the policies' initial weights are
            their own).
        batch_episodes : int, default 16
            Episodes per PPO update (run in lockstep, one batched forward per option and step).
        lr : float, default 3e-4
            Adam's learning rate of the low-level policies, in (0, 1].
        high_lr : float, default 0.1
            Adam's learning rate of the high-level categorical policy over spine lengths, in (0, 10].
        reward : {"shaped", "sparse"}, default "shaped"
            The reward of the environment made from n and d.

        Returns
        -------
        Result
            ``best_diameter`` (the largest diameter among the linear ideals the episodes ended in; None if none),
            ``steps_to_best`` (the environment steps when it was first reached), ``best_generators``,
            ``linear_diameters`` (diameter -> number of distinct linear ideals found),
            ``n_linear``, ``counterexamples`` (linear ideals of diameter > d: expected empty), ``field``,
            ``env_steps``, ``history`` and ``wall_time``. The history's search curve has a point after every PPO
            update and at every improvement: ``env_steps``, ``best_diameter`` and ``linear_at_bound`` (distinct
            linear ideals of diameter >= d so far); per update it has ``mean_return``, ``mean_spine`` and
            ``high_level_probs`` (over ``spine_lengths``).
        """
        env, envs, steps, K, np_rng, gen, lr = _training_setup(env, d, steps, batch_episodes, rng, lr, reward)
        high_lr = check_real(high_lr, "high_lr", low=0.0, high=10.0, low_open=True)
        shared = self.spine_policy is self.complete_policy
        ppo_s = _PPO(self.spine_policy, lr=lr)
        ppo_c = ppo_s if shared else _PPO(self.complete_policy, lr=lr)
        self._pick_lengths(1, env.d, np_rng)         # creates the high-level logits
        high_opt = None if self.spine_length is not None else torch.optim.Adam([self.high_logits], lr=high_lr)
        baseline = None
        tracker = _Tracker(env.d)
        rets, spines, probs = [], [], []
        t0 = time.perf_counter()
        while tracker.env_steps < steps:
            lengths, idx = self._pick_lengths(K, env.d, np_rng)
            eps = self._run_batch(envs, lengths, np_rng, gen, tracker)
            for ep in eps:
                _finish(ep["steps"], 1.0, 0.95)
            R = np.array([ep["return"] for ep in eps])
            spine_steps = [s for ep in eps for s in ep["steps"] if s.net == "spine"]
            complete_steps = [s for ep in eps for s in ep["steps"] if s.net == "complete"]
            if shared:
                ppo_s.update(spine_steps + complete_steps, env.n, env.d, gen)
            else:
                ppo_s.update(spine_steps, env.n, env.d, gen)
                ppo_c.update(complete_steps, env.n, env.d, gen)
            if high_opt is not None:
                baseline = float(R.mean()) if baseline is None else 0.9 * baseline + 0.1 * float(R.mean())
                logp = torch.log_softmax(self.high_logits, 0)[torch.as_tensor(idx)]
                loss = -(torch.as_tensor(R - baseline) * logp).mean()
                high_opt.zero_grad()
                loss.backward()
                high_opt.step()
            rets.append(float(R.mean()))
            spines.append(float(np.mean([len(ep["spine"]) for ep in eps])))
            probs.append(torch.softmax(self.high_logits.detach(), 0).tolist() if high_opt is not None else [])
            tracker.point()
        return tracker.result(env, t0, mean_return=rets, mean_spine=spines, high_level_probs=probs,
                              spine_lengths=self._lengths(env.d))


# --------------------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------------------
@constraints(policy="callable")
class FlatAgent:
    """The flat baseline: one policy on the environment's primitive actions (add, remove, stop), trained with
    the same PPO as :class:`OptionsAgent`.

    Parameters
    ----------
    policy : EquivariantGNNPolicy
        The network.

    Examples
    --------
    >>> from numtk.torch.hirsch import EquivariantGNNPolicy, FlatAgent
    >>> res = FlatAgent(EquivariantGNNPolicy(16, 2, rng=0)).train(5, 2, steps=200, rng=0)
    >>> res.env_steps >= 200, res.best_diameter <= 2 or res.n_linear == 0
    (True, True)
    """

    def __init__(self, policy: Any):
        if not isinstance(policy, nn.Module):
            raise TypeError(f"`policy` must be an nn.Module such as EquivariantGNNPolicy; got {type(policy).__name__}")
        self.policy = policy

    @constraints(env=("int>=2", "option"), d="int>=1", steps="count", rng="rng", batch_episodes="count",
                 lr="real>0", max_steps="count", reward="option")
    @_one_thread
    def train(self, env: Any, d: int | None = None, *, steps: int = 5000, rng: Any = None,
              batch_episodes: int = 16, lr: float = 3e-4, max_steps: int = 32, reward: str = "shaped") -> Any:
        """Train for about ``steps`` environment steps; the same Result as :meth:`OptionsAgent.train`.

        Parameters
        ----------
        env : HirschEnv or int
            The environment, or n (then ``d`` is required).
        d : int, optional
            The degree, when ``env`` is n.
        steps : int, default 5000
            Environment steps to spend.
        rng : None, int, numpy.random.Generator or torch.Generator, optional
            Seeds the resets, the actions and the minibatches.
        batch_episodes : int, default 16
            Episodes per PPO update.
        lr : float, default 3e-4
            Adam's learning rate, in (0, 1].
        max_steps : int, default 32
            The step limit of the environment made from n and d.
        reward : {"shaped", "sparse"}, default "shaped"
            The reward of the environment made from n and d.

        Returns
        -------
        Result
            As :meth:`OptionsAgent.train` (``history`` without the high-level entries).
        """
        max_steps = check_int(max_steps, "max_steps", minimum=1, maximum=10**6)
        env, envs, steps, K, np_rng, gen, lr = _training_setup(env, d, steps, batch_episodes, rng, lr, reward,
                                                               max_steps)
        ppo = _PPO(self.policy, lr=lr)
        tracker = _Tracker(env.d)
        rets = []
        t0 = time.perf_counter()
        while tracker.env_steps < steps:
            eps = []
            masks = []
            for e in envs:
                _, info = e.reset(seed=int(np_rng.integers(0, 2**31 - 1)))
                eps.append({"steps": [], "return": 0.0, "done": False})
                masks.append(info["action_mask"].astype(bool))
            while True:
                live = [k for k in range(K) if not eps[k]["done"]]
                if not live:
                    break
                states = [envs[k].generators for k in live]
                acts, logps, vals = _act(self.policy, states, [masks[k] for k in live], env.n, env.d, gen)
                for j, k in enumerate(live):
                    ep = eps[k]
                    ep["steps"].append(_Step("flat", states[j], masks[k], acts[j], logps[j], vals[j]))
                    OptionsAgent._env_step(envs[k], ep, acts[j], tracker)
                    masks[k] = envs[k].action_mask().astype(bool)
            for ep in eps:
                _finish(ep["steps"], 1.0, 0.95)
            ppo.update([s for ep in eps for s in ep["steps"]], env.n, env.d, gen)
            rets.append(float(np.mean([ep["return"] for ep in eps])))
            tracker.point()
        return tracker.result(env, t0, mean_return=rets)


@constraints(env=("int>=2", "option"), d="int>=1", steps="count", rng="rng", max_generators="count")
def greedy_search(env: Any, d: int | None = None, *, steps: int = 5000, rng: Any = None,
                  max_generators: int | None = None) -> Any:
    """The greedy baseline: grow linear-quotients orders, each step the candidate that maximises the diameter.

    From a random first generator, repeatedly append the candidate that keeps the order's linear quotients (so
    every state is a linear ideal, over every field) and gives the largest generator-graph diameter, ties broken
    at random; a run ends when no candidate keeps linear quotients (or at ``max_generators``), then a new run
    starts. Every candidate scored counts as one environment step (the greedy search looks one step ahead with
    the environment's oracle), so its budget is comparable with the agents'.

    Parameters
    ----------
    env : HirschEnv or int
        The environment (its n, d, field and caches are used), or n (then ``d`` is required).
    d : int, optional
        The degree, when ``env`` is n.
    steps : int, default 5000
        Candidate evaluations to spend.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Seeds the first generators and the tie-breaks.
    max_generators : int, optional
        Longest order (default: all C(n, d) candidates).

    Returns
    -------
    Result
        As :meth:`OptionsAgent.train`; ``history`` has the curve after every run and ``run_best`` (the last
        diameter of each run).

    Examples
    --------
    >>> from numtk.torch.hirsch import greedy_search
    >>> res = greedy_search(6, 3, steps=500, rng=0)
    >>> res.best_diameter, res.counterexamples                   # the Johnson graph's diameter min(d, n - d)
    (3.0, [])
    """
    env = _env_from(env, d)
    steps = check_int(steps, "steps", minimum=1, maximum=10**8)
    np_rng = numpy_rng(rng)
    C = env.n_candidates
    cap = C if max_generators is None else check_int(max_generators, "max_generators", minimum=1, maximum=10**6)
    tracker = _Tracker(env.d)
    run_best = []
    t0 = time.perf_counter()
    while tracker.env_steps < steps:
        first = int(np_rng.integers(C))
        order, members = [env.subsets[first]], 1 << first
        tracker.env_steps += 1
        tracker.linear(env, members)
        while len(order) < cap and tracker.env_steps < steps:
            best, best_d = [], -1.0
            for i in range(C):
                if (members >> i) & 1 or not _colon_ok(order, env.subsets[i]):
                    continue
                tracker.env_steps += 1
                dm = env._diameter(members | (1 << i))
                if dm > best_d:
                    best, best_d = [i], dm
                elif dm == best_d:
                    best.append(i)
            if not best:
                break
            i = best[int(np_rng.integers(len(best)))]
            order.append(env.subsets[i])
            members |= 1 << i
            tracker.linear(env, members)
        run_best.append(float(env._diameter(members)))
        tracker.point()
    return tracker.result(env, t0, run_best=run_best)
