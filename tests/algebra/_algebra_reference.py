"""Independent oracles for numtk.algebra, written from the definitions with tuples and Fractions.

- ``homology``: reduced Betti numbers of a simplicial complex from signed boundary matrices (faces as sorted
  tuples), ranks by Gaussian elimination in :class:`fractions.Fraction` (Q) or mod 2 (GF2).
- ``hochster_linear``: linearity of a squarefree monomial ideal by Hochster's formula, on the Stanley-Reisner
  complex of the ideal itself (not on the Alexander dual numtk uses): I is linear iff every induced
  subcomplex Gamma_W has reduced homology only in dimension d - 2 (in the range of the formula).
- ``reisner_cm``: Reisner's criterion on tuples.
- ``lq_brute``: linear quotients from the colon-ideal definition (minimal generators of the colon ideal).
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations


def rank(rows: list[list[int]], field: str) -> int:
    """The rank of an integer matrix (list of rows) over Q or GF(2)."""
    if field == "GF2":
        A = [[x % 2 for x in r] for r in rows]
        mod = 2
    else:
        A = [[Fraction(x) for x in r] for r in rows]
        mod = None
    if not A or not A[0]:
        return 0
    r = 0
    ncols = len(A[0])
    for c in range(ncols):
        piv = next((i for i in range(r, len(A)) if A[i][c] != 0), None)
        if piv is None:
            continue
        A[r], A[piv] = A[piv], A[r]
        for i in range(len(A)):
            if i != r and A[i][c] != 0:
                if mod:
                    A[i] = [(a - b) % 2 for a, b in zip(A[i], A[r])]
                else:
                    f = A[i][c] / A[r][c]
                    A[i] = [a - f * b for a, b in zip(A[i], A[r])]
        r += 1
        if r == len(A):
            break
    return r


def faces_of(facets) -> set[tuple]:
    out = set()
    for F in facets:
        F = tuple(sorted(F))
        for k in range(len(F) + 1):
            out.update(combinations(F, k))
    return out


def homology(faces: set[tuple], field: str) -> dict[int, int]:
    """Reduced Betti numbers {dimension: rank} of the complex given by all its faces (the empty one included)."""
    if not faces:
        return {}
    top = max(len(f) for f in faces)
    by = {k: sorted(f for f in faces if len(f) == k) for k in range(top + 1)}

    def boundary_rank(k):  # faces with k vertices -> k - 1
        if k < 1 or k > top or not by[k]:
            return 0
        idx = {f: i for i, f in enumerate(by[k - 1])}
        rows = [[0] * len(by[k]) for _ in by[k - 1]]
        for j, f in enumerate(by[k]):
            for pos in range(len(f)):
                rows[idx[f[:pos] + f[pos + 1:]]][j] = (-1) ** pos
        return rank(rows, field)

    ranks = {k: boundary_rank(k) for k in range(1, top + 2)}
    return {k - 1: len(by[k]) - ranks.get(k, 0) - ranks.get(k + 1, 0) for k in range(top + 1)}


def reisner_cm(facets, field: str) -> bool:
    facets = [tuple(sorted(F)) for F in facets]
    if len({len(F) for F in facets}) > 1:
        return False
    faces = faces_of(facets)
    for s in faces:
        link = {tuple(v for v in f if v not in s) for f in faces if set(s) <= set(f)}
        dim = max(len(f) for f in link) - 1
        h = homology(link, field)
        if any(h[i] for i in h if i < dim):
            return False
    return True


def hochster_linear(G: list[tuple], n: int, field: str) -> bool:
    """Hochster: beta_{i, W}(I) = dim H~_{|W| - i - 2}(Gamma_W); linear iff nonzero only for |W| = i + d."""
    d = len(G[0])
    gens = [set(S) for S in G]
    for size in range(n + 1):
        for W in combinations(range(n), size):
            faces = {f for k in range(size + 1) for f in combinations(W, k) if not any(S <= set(f) for S in gens)}
            h = homology(faces, field)
            for i in range(0, size - 1 + 1):  # i >= 0, homological dimension |W| - i - 2 >= -1
                dim = size - i - 2
                if dim != d - 2 and h.get(dim, 0):
                    return False
    return True


def lq_brute(G: list[tuple]) -> bool:
    """Linear quotients from the definition: the minimal generators of (S_1..S_{i-1}) : S_i all have degree 1."""
    sets = [frozenset(S) for S in G]
    for i in range(1, len(sets)):
        quot = {S - sets[i] for S in sets[:i]}
        minimal = [q for q in quot if not any(p < q for p in quot)]
        if any(len(q) != 1 for q in minimal):
            return False
    return True
