"""Argument checks of numtk.algebra: subsets of [n] as int bitmasks, generator sets, the field."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from numtk._lib._validation import check_int, check_option

__all__ = ["MAX_N", "FIELDS", "check_n", "check_field", "as_masks", "popcount", "check_degree", "as_generators"]

#: subsets are Python ints with one bit per element of [n]; 62 keeps them within a signed int64
MAX_N = 62
FIELDS = ("Q", "GF2")


def popcount(x: int) -> int:
    """The number of set bits of a non-negative int."""
    return int(x).bit_count()


def check_n(n: Any, name: str = "n") -> int:
    """``n`` must be an int in [1, 62]."""
    return check_int(n, name, minimum=1, maximum=MAX_N)


def check_field(field: Any, name: str = "field") -> str:
    """``field`` must be ``'Q'`` or ``'GF2'``."""
    return check_option(field, name, FIELDS)


def as_masks(G: Any, name: str = "G", *, n: int | None = None, distinct: bool = True) -> list[int]:
    """``G`` as a list of Python ints: a sequence (or 1-D integer array) of non-negative int bitmasks below
    ``2**n`` (below ``2**62`` when ``n`` is None), pairwise distinct when ``distinct``."""
    if isinstance(G, (str, bytes, dict)) or isinstance(G, numbers.Number):
        raise TypeError(f"`{name}` must be a sequence of int bitmasks; got {type(G).__name__}")
    if isinstance(G, np.ndarray):
        if G.ndim != 1:
            raise ValueError(f"`{name}` must be one-dimensional; got an array of shape {G.shape}")
        if G.size and G.dtype.kind not in "iu":
            raise TypeError(f"`{name}` must hold integers (bitmasks); got dtype {G.dtype}")
        items = G.tolist()
    else:
        try:
            items = list(G)
        except TypeError:
            raise TypeError(f"`{name}` must be a sequence of int bitmasks; got {type(G).__name__}") from None
    limit = MAX_N if n is None else n
    out = []
    for x in items:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Integral, np.integer)):
            hint = " (convert subsets given as tuples with numtk.algebra.subsets_to_masks)" \
                if isinstance(x, (tuple, list, set, frozenset)) else ""
            raise TypeError(f"`{name}` must hold int bitmasks; got an element of type {type(x).__name__}{hint}")
        x = int(x)
        if x < 0:
            raise ValueError(f"`{name}` must hold non-negative bitmasks; got {x}")
        if x >> limit:
            where = f"[n] = {{0, ..., {n - 1}}} (n = {n})" if n is not None else f"[{MAX_N}]"
            raise ValueError(f"`{name}` holds the subset {_fmt(x)}, which is not inside {where}")
        out.append(x)
    if distinct and len(set(out)) != len(out):
        seen = set()
        dup = next(x for x in out if x in seen or seen.add(x))
        raise ValueError(f"`{name}` must hold distinct subsets; {_fmt(dup)} appears more than once")
    return out


def check_degree(G: list[int], d: Any, name: str = "G") -> int:
    """The common popcount of the masks ``G`` (``d``, checked when given, inferred when None; >= 1)."""
    if d is not None:
        d = check_int(d, "d", minimum=1, maximum=MAX_N)
    if not G:
        return 1 if d is None else d
    sizes = {popcount(x) for x in G}
    if d is None:
        if len(sizes) > 1:
            raise ValueError(f"`{name}` must hold subsets of one size d (an equigenerated ideal); "
                             f"got sizes {sorted(sizes)}")
        d = sizes.pop()
        if d < 1:
            raise ValueError(f"`{name}` holds the empty set (the unit ideal); generators need d >= 1 elements")
        return d
    bad = next((x for x in G if popcount(x) != d), None)
    if bad is not None:
        raise ValueError(f"`d` = {d} but `{name}` holds {_fmt(bad)} with {popcount(bad)} elements")
    return d


def as_generators(G: Any, d: Any, name: str = "G", *, n: int | None = None) -> tuple[list[int], int]:
    """The generators of an equigenerated squarefree ideal: ``G`` as distinct int bitmasks (inside [n] when
    ``n`` is given) and their common degree ``d`` (checked when given, inferred when None)."""
    G = as_masks(G, name, n=n)
    return G, check_degree(G, d, name)


def _fmt(x: int) -> str:
    return "{" + ", ".join(str(i) for i in range(x.bit_length()) if x >> i & 1) + "}"
