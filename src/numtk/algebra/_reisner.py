"""Simplicial homology, Reisner's Cohen-Macaulay criterion and the Eagon-Reiner linearity test.

A simplicial complex is given by its facets, int bitmasks over [n]. Reduced homology comes from the ranks of
the boundary matrices. Over GF(2) the ranks are exact bitset eliminations. Over Q they are exact too: the
rank over Q of an integer matrix is at least its rank modulo any prime, and a nonzero R x R minor is at most
the Hadamard bound B in absolute value, so once the product of the primes used exceeds B the largest of their
ranks is the rank over Q (no prime can divide the minor without all of them dividing it). The Reisner check
first works over GF(2): by the universal coefficient theorem ``dim H_i(K; Q) <= dim H_i(K; GF(2))`` in every
degree, so homology that vanishes over GF(2) vanishes over Q, and exact rational ranks are needed only where
GF(2) homology survives. The GF(2) pass of Reisner's criterion over every link is compiled
(``native/include/numtk/algebra/reisner.hpp``); ``_cm_python`` is the same criterion in Python, its reference.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_option
from numtk.algebra import _algebra_ext
from numtk.algebra._ideals import _connected, _lq_failure
from numtk.algebra._validation import as_generators, as_masks, check_field, check_n

__all__ = ["reduced_betti_numbers", "is_cohen_macaulay", "dual_complex_facets", "has_linear_resolution"]


# ------------------------------------------------------------------------------------------------------------
# exact ranks
# ------------------------------------------------------------------------------------------------------------
def rank_gf2(columns: Sequence[int]) -> int:
    """The GF(2) rank of vectors given as int bitmasks (XOR basis by leading bit)."""
    basis: dict[int, int] = {}
    for v in columns:
        while v:
            h = v.bit_length() - 1
            b = basis.get(h)
            if b is None:
                basis[h] = v
                break
            v ^= b
    return len(basis)


def _is_prime(q: int) -> bool:
    if q < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13):
        if q % p == 0:
            return q == p
    s, t = 0, q - 1
    while t % 2 == 0:
        s, t = s + 1, t // 2
    for a in (2, 3, 5, 7, 11, 13):  # deterministic for q < 3.4e12
        x = pow(a, t, q)
        if x in (1, q - 1):
            continue
        for _ in range(s - 1):
            x = x * x % q
            if x == q - 1:
                break
        else:
            return False
    return True


_PRIMES: list[int] = []


def _prime(i: int) -> int:
    """The i-th largest prime below 2**31 (products of two residues fit in an int64)."""
    q = _PRIMES[-1] - 2 if _PRIMES else 2**31 - 1
    while len(_PRIMES) <= i:
        if _is_prime(q):
            _PRIMES.append(q)
        q -= 2
    return _PRIMES[i]


def rank_mod_p(M: np.ndarray, p: int) -> int:
    """The rank of the integer matrix ``M`` over GF(p), p < 2**31 (Gaussian elimination in int64)."""
    A = np.array(M if M.shape[0] >= M.shape[1] else M.T, dtype=np.int64) % p
    rows, cols = A.shape
    r = 0
    for c in range(cols):
        if r == rows:
            break
        nz = np.flatnonzero(A[r:, c])
        if nz.size == 0:
            continue
        piv = r + int(nz[0])
        if piv != r:
            A[[r, piv]] = A[[piv, r]]
        A[r, c:] = A[r, c:] * pow(int(A[r, c]), p - 2, p) % p
        below = r + 1 + np.flatnonzero(A[r + 1:, c])
        if below.size:
            A[below, c:] = (A[below, c:] - A[below, c:c + 1] * A[r, c:] % p) % p
        r += 1
    return r


def rank_q(M: np.ndarray, lower: int = 0) -> int:
    """The exact rank over Q of an integer matrix with small entries (multi-prime, Hadamard-certified).

    ``lower`` is a known lower bound (e.g. the GF(2) rank of a 0/1/-1 matrix)."""
    M = np.asarray(M, dtype=np.int64)
    full = min(M.shape)
    if lower >= full:
        return full
    sq = M.astype(np.float64) ** 2
    # any R x R minor (R <= full) is at most the product of the R largest column (row) norms
    bounds = []
    for norms in (sq.sum(axis=0), sq.sum(axis=1)):
        top = np.sort(norms[norms > 0])[::-1][:full]
        bounds.append(0.5 * float(np.log2(top).sum()))
    log2_bound = min(bounds)
    r, log2_prod = lower, 0.0
    i = 0
    while True:
        p = _prime(i)
        r = max(r, rank_mod_p(M, p))
        log2_prod += math.log2(p)
        i += 1
        if r == full or log2_prod > log2_bound + 1.0:
            return r


# ------------------------------------------------------------------------------------------------------------
# complexes
# ------------------------------------------------------------------------------------------------------------
#: method='auto' tries the given order's linear quotients (O(m^2) in Python) up to this many generators, and
#: only when the dual complex may have more faces than this (below, the compiled criterion is as fast)
_LQ_SHORTCUT = 128
_LQ_FACES = 4096

#: the most faces the homology routines enumerate: 2**16, every face of a 16-vertex simplex (the compiled kernel's
#: dense GF(2) elimination then needs at most C(16, 8) x C(16, 7) bits, about 20 MB)
MAX_FACES = 2**16


def _face_bound(F: Sequence[int]) -> int:
    """An upper bound on the number of faces of the complex generated by ``F``."""
    union = 0
    for f in F:
        union |= f
    return min(sum(1 << f.bit_count() for f in F), 1 << union.bit_count())


def _check_faces(F: Sequence[int], name: str, what: str) -> None:
    bound = _face_bound(F)
    if bound > MAX_FACES:
        raise ValueError(f"`{name}`: {what} has up to {bound} faces, more than the {MAX_FACES} (2**16) the exact "
                         "homology computation enumerates")


def _all_faces(facets: Sequence[int]) -> set[int]:
    faces: set[int] = set()
    for f in facets:
        if f in faces:
            continue
        sub = f
        while True:
            faces.add(sub)
            if sub == 0:
                break
            sub = (sub - 1) & f
    return faces


def _levels(faces) -> list[list[int]]:
    """Faces grouped by size: ``levels[k]`` holds the faces with k vertices, sorted."""
    top = max(f.bit_count() for f in faces)
    levels: list[list[int]] = [[] for _ in range(top + 1)]
    for f in faces:
        levels[f.bit_count()].append(f)
    for lv in levels:
        lv.sort()
    return levels


def _boundary_gf2(upper: list[int], lower: list[int]) -> list[int]:
    index = {f: i for i, f in enumerate(lower)}
    cols = []
    for tau in upper:
        c = 0
        t = tau
        while t:
            low = t & -t
            c |= 1 << index[tau ^ low]
            t ^= low
        cols.append(c)
    return cols


def _boundary_int(upper: list[int], lower: list[int]) -> np.ndarray:
    """The signed boundary matrix from the faces ``upper`` to the faces ``lower`` (one vertex fewer)."""
    index = {f: i for i, f in enumerate(lower)}
    M = np.zeros((len(lower), len(upper)), dtype=np.int64)
    for j, tau in enumerate(upper):
        t, pos = tau, 0
        while t:
            low = t & -t
            M[index[tau ^ low], j] = 1 - 2 * (pos & 1)
            t ^= low
            pos += 1
    return M


class _Ranks:
    """Boundary ranks of one complex (given by its levels), computed on demand, over GF(2) and Q."""

    def __init__(self, levels: list[list[int]]):
        self.levels = levels
        self.gf2: dict[int, int] = {}
        self.q: dict[int, int] = {}

    def rank(self, k: int, field: str) -> int:
        """The rank of the boundary from the faces with k vertices to those with k - 1."""
        lv = self.levels
        if k <= 0 or k >= len(lv) or not lv[k]:
            return 0
        if k not in self.gf2:
            self.gf2[k] = rank_gf2(_boundary_gf2(lv[k], lv[k - 1])) if k > 1 else 1
        if field == "GF2" or k == 1:
            return self.gf2[k]
        if k not in self.q:
            self.q[k] = rank_q(_boundary_int(lv[k], lv[k - 1]), lower=self.gf2[k])
        return self.q[k]

    def betti(self, k: int, field: str) -> int:
        """The reduced Betti number in dimension k - 1 (faces with k vertices)."""
        return len(self.levels[k]) - self.rank(k, field) - self.rank(k + 1, field)


def _check_facets(facets: Any, n: Any) -> tuple[list[int], int | None]:
    if n is not None:
        n = check_n(n)
    F = as_masks(facets, "facets", n=n, distinct=False)
    if not F:
        raise ValueError("`facets` must hold at least one face (the empty face 0 gives the complex {})")
    return F, n


@constraints(facets="array1d", n="int>=1", field="option")
def reduced_betti_numbers(facets: Sequence[int], n: int | None = None, *, field: str = "Q") -> np.ndarray:
    """The reduced Betti numbers of the simplicial complex generated by ``facets``.

    Parameters
    ----------
    facets : sequence of int
        Faces as int bitmasks; the complex is every subset of one of them (non-maximal faces are allowed).
    n : int, optional
        The number of vertices of the ground set (only checks that the faces lie in [n]).
    field : {'Q', 'GF2'}, optional
        The coefficient field; over Q the ranks are exact (multi-prime, certified by the Hadamard bound).

    Returns
    -------
    numpy.ndarray
        ``betti[i]`` is the dimension of the reduced homology in dimension ``i``, for i = 0 .. dim, an int64
        array of length ``dim + 1`` (empty for the complex whose only face is the empty set).

    Examples
    --------
    The boundary of a tetrahedron is a 2-sphere; the 6-vertex real projective plane has homology only over
    GF(2):

    >>> from numtk.algebra import reduced_betti_numbers, squarefree_veronese, subsets_to_masks
    >>> reduced_betti_numbers(squarefree_veronese(4, 3)).tolist()
    [0, 0, 1]
    >>> rp2 = subsets_to_masks([(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5), (0, 5, 1), (1, 2, 4), (2, 3, 5),
    ...                         (3, 4, 1), (4, 5, 2), (5, 1, 3)])
    >>> reduced_betti_numbers(rp2, field="Q").tolist(), reduced_betti_numbers(rp2, field="GF2").tolist()
    ([0, 0, 0], [0, 1, 1])
    """
    F, _ = _check_facets(facets, n)
    field = check_field(field)
    _check_faces(F, "facets", "the complex")
    levels = _levels(_all_faces(F))
    R = _Ranks(levels)
    return np.array([R.betti(k, field) for k in range(1, len(levels))], dtype=np.int64)


def _maximal(F: list[int]) -> list[int]:
    F = sorted(set(F), key=lambda f: -f.bit_count())
    out: list[int] = []
    for f in F:
        if not any(f & g == f for g in out):
            out.append(f)
    return out


def _cm(F: list[int], field: str) -> bool:
    """Reisner's criterion for the pure complex with facets ``F`` (distinct, all of one size).

    The compiled kernel lists the faces whose links have GF(2) homology below their top; over Q only those are
    re-examined, with exact rational ranks."""
    sigmas, ks = _algebra_ext.reisner_gf2_failures(np.asarray(F, dtype=np.uint64), field == "GF2")
    if field == "GF2" or not sigmas.size:
        return not sigmas.size
    if ks[0] == 1:  # reduced H_0 (components - 1) is free: the same over every field
        return False
    by_size = _levels(_all_faces(F))
    for sigma, k in zip(sigmas.tolist(), ks.tolist()):
        if k == 1:
            return False
        s = sigma.bit_count()
        R = _Ranks([[f ^ sigma for f in lv if f & sigma == sigma] for lv in by_size[s:]])
        if R.betti(k, "Q"):
            return False
    return True


def _cm_python(F: list[int], field: str) -> bool:
    """The same criterion in Python alone (the reference of the compiled kernel)."""
    top = F[0].bit_count()
    by_size = _levels(_all_faces(F))
    # links of faces with top - 1 or top vertices are nonempty sets of points or {}: nothing to check;
    # the others from the smallest links (largest faces) up, so that a failure is found early
    for s in range(top - 2, -1, -1):
        for sigma in by_size[s]:
            # faces containing sigma, less sigma (f ^ sigma = f - sigma keeps each level sorted)
            link = [[f ^ sigma for f in lv if f & sigma == sigma] for lv in by_size[s:]]
            if not _link_ok(link, top - s, field):
                return False
    return True


def _link_ok(link_levels: list[list[int]], t: int, field: str) -> bool:
    """Whether the pure complex with these levels (facets with t vertices) has no reduced homology below t - 1."""
    R = _Ranks(link_levels)
    for k in range(1, t):  # dimensions 0 .. t - 2 (dimension -1 vanishes: the link has vertices)
        if R.betti(k, "GF2") and (field == "GF2" or R.betti(k, "Q")):
            return False
    return True


@constraints(facets="array1d", n="int>=1", field="option")
def is_cohen_macaulay(facets: Sequence[int], n: int | None = None, *, field: str = "Q") -> bool:
    """Whether the simplicial complex generated by ``facets`` is Cohen-Macaulay over ``field`` (Reisner).

    Reisner's criterion: the complex is pure and for every face sigma (the empty face included) the reduced
    homology of the link of sigma vanishes below the link's dimension. The answer depends on the field: the
    6-vertex real projective plane is Cohen-Macaulay over Q, not over GF(2).

    Parameters
    ----------
    facets : sequence of int
        Faces as int bitmasks; the complex is every subset of one of them.
    n : int, optional
        The number of vertices of the ground set (only checks that the faces lie in [n]).
    field : {'Q', 'GF2'}, optional
        The coefficient field (exact arithmetic in both).

    Returns
    -------
    bool
        True when the complex is Cohen-Macaulay over the field.

    Examples
    --------
    >>> from numtk.algebra import is_cohen_macaulay, subsets_to_masks
    >>> is_cohen_macaulay(subsets_to_masks([(0, 1), (1, 2), (2, 3)]))   # a path: connected, CM
    True
    >>> is_cohen_macaulay(subsets_to_masks([(0, 1), (2, 3)]))           # two edges: disconnected
    False
    """
    F, _ = _check_facets(facets, n)
    field = check_field(field)
    F = _maximal(F)
    if len({f.bit_count() for f in F}) > 1:
        return False
    _check_faces(F, "facets", "the complex")
    return _cm(F, field)


@constraints(G="array1d", n="int>=1")
def dual_complex_facets(G: Sequence[int], n: int) -> list[int]:
    """The facets ``[n] \\ S`` of the Alexander dual complex of Eagon and Reiner, one per generator S.

    Parameters
    ----------
    G : sequence of int
        Distinct bitmasks of subsets of [n].
    n : int
        The number of variables, 1 <= n <= 62.

    Returns
    -------
    list of int
        The complements in [n], in the order of ``G``.

    Examples
    --------
    >>> from numtk.algebra import dual_complex_facets, masks_to_subsets, subsets_to_masks
    >>> masks_to_subsets(dual_complex_facets(subsets_to_masks([(0, 1), (1, 2)]), 4))
    [(2, 3), (0, 3)]
    """
    n = check_n(n)
    G = as_masks(G, n=n)
    full = (1 << n) - 1
    return [full ^ S for S in G]


@constraints(G="array1d", n="int>=1", field="option", d="int>=1", method="option")
def has_linear_resolution(G: Sequence[int], n: int, *, field: str = "Q", d: int | None = None,
                          method: str = "auto") -> bool:
    """Whether the squarefree monomial ideal generated by ``x^S``, S in G, has a linear resolution.

    Eagon-Reiner: the ideal (generated in degree d) has a linear resolution over the field if and only if the
    Alexander dual complex with facets ``[n] \\ S`` is Cohen-Macaulay over the field, decided exactly by
    Reisner's criterion (:func:`is_cohen_macaulay`). The answer can depend on the field; a claim about the
    algebraic Hirsch conjecture must name it. Variables that no generator uses only cone the dual complex, so
    the check runs on the support of ``G``. The cost grows with the number of faces, at most ``2**k`` for the
    k variables used: below a millisecond for k <= 8, tens of milliseconds at k = 12; a ValueError names
    ``G`` beyond ``2**16`` faces.

    Parameters
    ----------
    G : sequence of int
        Distinct bitmasks of d-subsets of [n].
    n : int
        The number of variables, 1 <= n <= 62 (the Reisner check is practical when the generators use up to
        about 14 of them).
    field : {'Q', 'GF2'}, optional
        The field of coefficients.
    d : int, optional
        The degree; inferred from the generators when None.
    method : {'auto', 'reisner'}, optional
        ``'auto'`` answers False at once when the generator graph is disconnected (a Cohen-Macaulay complex is
        strongly connected) and, when the dual complex may have more than 4096 faces, True at once when ``G``
        (at most 128 generators) in the given order has linear quotients (these imply a linear resolution over
        every field); otherwise it runs Reisner's criterion; ``'reisner'`` always
        runs Reisner's criterion. Both give the same answer.

    Returns
    -------
    bool
        True when the resolution is linear over the field (True for zero or one generator).

    Examples
    --------
    Fröberg: the edge ideal of a graph is linear when the complement graph is chordal. The 4-cycle's
    complement is two disjoint edges (chordal); the 5-cycle is its own complement (not chordal):

    >>> from numtk.algebra import has_linear_resolution, subsets_to_masks
    >>> has_linear_resolution(subsets_to_masks([(0, 1), (1, 2), (2, 3), (3, 0)]), 4)
    True
    >>> has_linear_resolution(subsets_to_masks([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]), 5)
    False
    """
    n = check_n(n)
    G, d = as_generators(G, d, n=n)
    field = check_field(field)
    method = check_option(method, "method", ("auto", "reisner"))
    if d > n:
        raise ValueError(f"`d` must be at most `n` = {n}; got d = {d}")
    if len(G) <= 1:
        return True
    if method == "auto" and not _connected(G, d):
        return False
    # Variables in no generator make the dual complex a cone over the one on the support (a cone is
    # Cohen-Macaulay exactly when its base is): the support's complement suffices, whatever n is.
    support = 0
    for S in G:
        support |= S
    F = [support ^ S for S in G]
    if method == "auto" and len(G) <= _LQ_SHORTCUT and _face_bound(F) > _LQ_FACES and _lq_failure(G) < 0:
        return True
    _check_faces(F, "G", f"the Alexander dual complex on the {support.bit_count()} variables the generators use")
    return _cm(F, field)
