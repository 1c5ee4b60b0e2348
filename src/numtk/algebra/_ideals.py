"""Squarefree monomial ideals generated in one degree: generator sets, the generator graph and its diameter,
linear quotients and the squarefree Veronese."""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_int
from numtk.algebra._validation import MAX_N, as_generators, as_masks, check_n

__all__ = ["subsets_to_masks", "masks_to_subsets", "squarefree_veronese", "generator_graph", "dual_graph_diameter",
           "has_linear_quotients", "linear_quotient_order"]


def _check_d(d: Any, n: int) -> int:
    d = check_int(d, "d", minimum=1)
    if d > n:
        raise ValueError(f"`d` must be at most `n` = {n}; got d = {d}")
    return d


# ------------------------------------------------------------------------------------------------------------
# encodings
# ------------------------------------------------------------------------------------------------------------
@constraints(subsets="array2d", n="int>=1")
def subsets_to_masks(subsets: Any, n: int | None = None) -> list[int]:
    """Subsets of [n] = {0, ..., n-1}, given as collections of ints, as int bitmasks.

    Parameters
    ----------
    subsets : iterable of iterables of int
        The subsets, e.g. ``[(0, 1), (1, 2)]``; each element must lie in [n] (in [62] when ``n`` is None).
    n : int, optional
        The ground set's size, at most 62.

    Returns
    -------
    list of int
        ``sum(1 << v for v in S)`` for each subset ``S``, in the given order.

    Examples
    --------
    >>> from numtk.algebra import subsets_to_masks
    >>> subsets_to_masks([(0, 1), (1, 2), (0, 2)])
    [3, 6, 5]
    """
    limit = MAX_N if n is None else check_n(n)
    if isinstance(subsets, (str, bytes)) or np.isscalar(subsets):
        raise TypeError(f"`subsets` must be an iterable of subsets; got {type(subsets).__name__}")
    try:
        subsets = list(subsets)
    except TypeError:
        raise TypeError(f"`subsets` must be an iterable of subsets; got {type(subsets).__name__}") from None
    out = []
    for S in subsets:
        if isinstance(S, (str, bytes)) or np.isscalar(S) or not hasattr(S, "__iter__"):
            raise TypeError(f"`subsets` must hold collections of ints; got an element of type {type(S).__name__}")
        S = list(S)
        mask = 0
        for v in S:
            v = check_int(v, "subsets")
            if not 0 <= v < limit:
                raise ValueError(f"`subsets` holds the element {v}, which is not in [n] = {{0, ..., {limit - 1}}}")
            if mask >> v & 1:
                raise ValueError(f"`subsets` holds a subset that lists {v} twice")
            mask |= 1 << v
        out.append(mask)
    return out


@constraints(G="array1d")
def masks_to_subsets(G: Any) -> list[tuple[int, ...]]:
    """Int bitmasks as sorted tuples of their elements.

    Parameters
    ----------
    G : sequence of int
        Bitmasks of subsets of [62] (duplicates allowed).

    Returns
    -------
    list of tuple of int
        The elements of each subset in increasing order.

    Examples
    --------
    >>> from numtk.algebra import masks_to_subsets
    >>> masks_to_subsets([3, 6, 5])
    [(0, 1), (1, 2), (0, 2)]
    """
    return [tuple(i for i in range(x.bit_length()) if x >> i & 1) for x in as_masks(G, distinct=False)]


@constraints(n="int>=1", d="int>=1")
def squarefree_veronese(n: int, d: int) -> list[int]:
    """All d-subsets of [n]: the generators of the squarefree Veronese ideal I_{n,d}.

    Its generator graph is the Johnson graph J(n, d), of diameter ``min(d, n - d)``, and it has linear
    quotients in lexicographic order (so a linear resolution).

    Parameters
    ----------
    n : int
        The number of variables, 1 <= n <= 62.
    d : int
        The degree, 1 <= d <= n.

    Returns
    -------
    list of int
        The ``C(n, d)`` bitmasks in lexicographic order of the sorted subsets.

    Examples
    --------
    >>> from numtk.algebra import squarefree_veronese, masks_to_subsets
    >>> masks_to_subsets(squarefree_veronese(4, 2))
    [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    """
    n = check_n(n)
    d = _check_d(d, n)
    if math.comb(n, d) > 10**7:
        raise ValueError(f"the squarefree Veronese (n, d) = ({n}, {d}) has C(n, d) = {math.comb(n, d)} generators, "
                         "more than 10**7; choose smaller `n` or `d`")
    return [sum(1 << v for v in S) for S in combinations(range(n), d)]


# ------------------------------------------------------------------------------------------------------------
# the generator graph
# ------------------------------------------------------------------------------------------------------------
@constraints(G="array1d", d="int>=1")
def generator_graph(G: Sequence[int], d: int | None = None) -> np.ndarray:
    """The generator (dual) graph of a squarefree monomial ideal generated in degree d.

    Generators S and T (d-subsets of [n]) are adjacent when ``|S & T| = d - 1``: their lcm has degree d + 1,
    a linear first syzygy. It is the facet-ridge graph of the Alexander dual complex with facets ``[n] \\ S``.

    Parameters
    ----------
    G : sequence of int
        Distinct bitmasks, all with ``d`` elements (``int32``/``int64`` arrays are accepted).
    d : int, optional
        The degree; inferred from the generators when None.

    Returns
    -------
    numpy.ndarray
        A symmetric ``(m, m)`` bool adjacency matrix with a False diagonal, in the order of ``G``.

    Examples
    --------
    >>> from numtk.algebra import generator_graph, subsets_to_masks
    >>> generator_graph(subsets_to_masks([(0, 1), (1, 2), (2, 3)])).astype(int)
    array([[0, 1, 0],
           [1, 0, 1],
           [0, 1, 0]])
    """
    G, d = as_generators(G, d)
    a = np.asarray(G, dtype=np.uint64)
    return np.bitwise_count(a[:, None] & a[None, :]) == d - 1


def _neighbour_masks(G: list[int], d: int) -> list[int]:
    """Adjacency of the generator graph as one int bitmask of neighbours per generator."""
    if not G:
        return []
    packed = np.packbits(generator_graph(G, d), axis=1, bitorder="little")  # bit j of row i: i ~ j
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def _connected(G: list[int], d: int) -> bool:
    """Whether the generator graph is connected (one breadth-first search)."""
    if len(G) <= 1:
        return True
    adj = _neighbour_masks(G, d)
    everyone = (1 << len(G)) - 1
    seen = frontier = 1
    while frontier:
        nxt = 0
        while frontier:
            low = frontier & -frontier
            nxt |= adj[low.bit_length() - 1]
            frontier ^= low
        frontier = nxt & ~seen
        seen |= nxt
    return seen == everyone


@constraints(G="array1d", d="int>=1")
def dual_graph_diameter(G: Sequence[int], d: int | None = None) -> int | float:
    """The diameter of the generator graph (breadth-first search from every generator).

    Kalai's algebraic Hirsch conjecture asks whether ``diameter <= d`` whenever the ideal has a linear
    resolution; a linear ideal's graph is connected.

    Parameters
    ----------
    G : sequence of int
        Distinct bitmasks, all with ``d`` elements.
    d : int, optional
        The degree; inferred from the generators when None.

    Returns
    -------
    int or float
        The largest distance between two generators; ``0`` for zero or one generator, ``math.inf`` (a float)
        when the graph is disconnected.

    Examples
    --------
    >>> from numtk.algebra import dual_graph_diameter, squarefree_veronese
    >>> dual_graph_diameter(squarefree_veronese(6, 3))
    3
    >>> dual_graph_diameter([0b0011, 0b1100])
    inf
    """
    G, d = as_generators(G, d)
    m = len(G)
    if m <= 1:
        return 0
    if m > 256:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import shortest_path

        D = shortest_path(csr_matrix(generator_graph(G, d)), unweighted=True, directed=False)
        far = float(D.max())
        return math.inf if math.isinf(far) else int(far)
    adj = _neighbour_masks(G, d)
    everyone = (1 << m) - 1
    diameter = 0
    for s in range(m):
        seen = frontier = 1 << s
        ecc = 0
        while seen != everyone:
            nxt = 0
            f = frontier
            while f:
                low = f & -f
                nxt |= adj[low.bit_length() - 1]
                f ^= low
            nxt &= ~seen
            if not nxt:
                return math.inf
            seen |= nxt
            frontier = nxt
            ecc += 1
        diameter = max(diameter, ecc)
    return diameter


# ------------------------------------------------------------------------------------------------------------
# linear quotients
# ------------------------------------------------------------------------------------------------------------
def _lq_failure(G: list[int]) -> int:
    """The first position i >= 1 whose colon ideal (S_1..S_{i-1}) : S_i is not generated by variables; -1."""
    for i in range(1, len(G)):
        Si = G[i]
        inv = ~Si
        prev = G[:i]
        V = 0
        for Sk in prev:
            r = Sk & inv
            if r & (r - 1) == 0:  # |S_k \ S_i| = 1 (S_k != S_i, so r != 0)
                V |= r
        for Sj in prev:
            if not (Sj & inv & V):
                return i
    return -1


@constraints(G_ordered="array1d", d="int>=1")
def has_linear_quotients(G_ordered: Sequence[int], d: int | None = None) -> bool:
    """Whether the generators, in the given order, have linear quotients.

    For every i >= 2 and j < i there must be k < i with ``S_k \\ S_i = {v}`` and ``v`` in ``S_j \\ S_i``: the
    colon ideal ``(x^S_1, ..., x^S_{i-1}) : x^S_i`` is generated by variables. Linear quotients of an
    equigenerated ideal imply a linear resolution (the converse fails). This checks the *given* order only;
    deciding whether some order works is NP-hard in general (see :func:`linear_quotient_order`). Cost
    O(m^2) word operations.

    Parameters
    ----------
    G_ordered : sequence of int
        Distinct bitmasks, all with ``d`` elements, in the order to test.
    d : int, optional
        The degree; inferred from the generators when None.

    Returns
    -------
    bool
        True when the order has linear quotients (always for zero or one generator).

    Examples
    --------
    >>> from numtk.algebra import has_linear_quotients, subsets_to_masks
    >>> has_linear_quotients(subsets_to_masks([(0, 1), (1, 2), (2, 3)]))
    True
    >>> has_linear_quotients(subsets_to_masks([(0, 1), (2, 3), (1, 2)]))
    False
    """
    G, _ = as_generators(G_ordered, d, "G_ordered")
    return _lq_failure(G) < 0


@constraints(G="array1d", d="int>=1", max_starts="cap")
def linear_quotient_order(G: Sequence[int], d: int | None = None, *, max_starts: int | None = None) -> list[int] | None:
    """A heuristic search for an order of the generators with linear quotients.

    From each starting generator in turn (at most ``max_starts`` of them), generators are appended greedily:
    among those whose colon ideal with the current prefix is generated by variables, the one with the most
    neighbours in the prefix (ties: input order). The first complete order is returned. Deciding whether an
    order exists is NP-hard in general (shellability), so a None answer does not prove that no order exists.

    Parameters
    ----------
    G : sequence of int
        Distinct bitmasks, all with ``d`` elements.
    d : int, optional
        The degree; inferred from the generators when None.
    max_starts : int, optional
        How many starting generators to try (all when None).

    Returns
    -------
    list of int or None
        The generators in an order with linear quotients, or None when the heuristic found none.

    Examples
    --------
    >>> from numtk.algebra import linear_quotient_order, masks_to_subsets, subsets_to_masks
    >>> order = linear_quotient_order(subsets_to_masks([(0, 1), (2, 3), (1, 2)]))
    >>> masks_to_subsets(order)
    [(0, 1), (1, 2), (2, 3)]
    """
    G, _ = as_generators(G, d)
    m = len(G)
    if max_starts is not None:
        max_starts = check_int(max_starts, "max_starts", minimum=1)
    if m <= 1:
        return list(G)
    for start in range(m if max_starts is None else min(m, max_starts)):
        order = _greedy_from(G, start)
        if order is not None:
            return order
    return None


def _greedy_from(G: list[int], start: int) -> list[int] | None:
    m = len(G)
    placed = [G[start]]
    rest = [i for i in range(m) if i != start]
    # per candidate T: V_T (vertices v with S_k \ T = {v}, S_k placed) and the placed S_j not yet served
    V = {}
    pending = {}
    nbrs = {}
    for t in rest:
        T = G[t]
        r = G[start] & ~T
        single = r & (r - 1) == 0
        V[t] = r if single else 0
        pending[t] = [] if single else [r]
        nbrs[t] = 1 if single else 0
    while rest:
        ok = [t for t in rest if not pending[t]]
        if not ok:
            return None
        t = max(ok, key=lambda c: nbrs[c])  # max keeps the first of equals: input order
        rest.remove(t)
        S = G[t]
        placed.append(S)
        for u in rest:
            r = S & ~G[u]
            if r & (r - 1) == 0:
                V[u] |= r
                nbrs[u] += 1
                if pending[u]:
                    pending[u] = [q for q in pending[u] if not (q & V[u])]
            elif not (r & V[u]):
                pending[u].append(r)
    return placed
