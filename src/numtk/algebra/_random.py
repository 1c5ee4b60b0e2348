"""Random sets of squarefree monomials of one degree, optionally rejection-sampled until linear."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib import normalize_rng
from numtk._lib._validation import check_bool, check_int
from numtk.algebra._ideals import _check_d, squarefree_veronese
from numtk.algebra._reisner import has_linear_resolution
from numtk.algebra._validation import check_field, check_n

__all__ = ["random_generators"]


# ------------------------------------------------------------------------------------------------------------
# random generator sets
# ------------------------------------------------------------------------------------------------------------
@constraints(n="int>=1", d="int>=1", m="count", linear="bool", field="option", rng="rng", max_tries="cap")
def random_generators(n: int, d: int, m: int, *, linear: bool = False, field: str = "Q", rng: Any = None,
                      max_tries: int = 10_000) -> list[int]:
    """m distinct random d-subsets of [n], uniformly among all such sets; optionally only linear ones.

    With ``linear=True`` sets are drawn until one has a linear resolution over ``field``
    (:func:`has_linear_resolution`), as in Eisenbud's random search for Bigdeli's question: random sets of
    squarefree monomials of degree d kept when their regularity is d.

    Parameters
    ----------
    n : int
        The number of variables, 1 <= n <= 62.
    d : int
        The degree, 1 <= d <= n.
    m : int
        The number of generators, 1 <= m <= C(n, d).
    linear : bool, optional
        Rejection-sample until the ideal has a linear resolution.
    field : {'Q', 'GF2'}, optional
        The field of the linearity test (``linear=True`` only).
    rng : None, int or numpy.random.Generator, optional
        The source of randomness.
    max_tries : int, optional
        The number of draws ``linear=True`` may make before it gives up.

    Returns
    -------
    list of int
        m distinct bitmasks with d elements each, in random order.

    Raises
    ------
    RuntimeError
        When ``linear=True`` found no linear set within ``max_tries`` draws.

    Examples
    --------
    >>> from numtk.algebra import random_generators, has_linear_resolution
    >>> G = random_generators(7, 3, 10, linear=True, rng=0)
    >>> len(G), has_linear_resolution(G, 7)
    (10, True)
    """
    n = check_n(n)
    d = _check_d(d, n)
    total = math.comb(n, d)
    m = check_int(m, "m", minimum=1)
    if m > total:
        raise ValueError(f"`m` must be at most C(n, d) = C({n}, {d}) = {total}; got {m}")
    linear = check_bool(linear, "linear")
    field = check_field(field)
    max_tries = check_int(max_tries, "max_tries", minimum=1)
    g = normalize_rng(rng)
    if linear:
        for _ in range(max_tries):
            G = _draw(g, n, d, m, total)
            if has_linear_resolution(G, n, field=field):
                return G
        raise RuntimeError(f"random_generators found no linear set of m = {m} generators of degree d = {d} in "
                           f"n = {n} variables over {field} in max_tries = {max_tries} draws; linear sets are rare "
                           "for m far from C(n, d): raise max_tries or change m")
    return _draw(g, n, d, m, total)


def _draw(g: np.random.Generator, n: int, d: int, m: int, total: int) -> list[int]:
    if total <= 4096:
        pool = squarefree_veronese(n, d)
        return [pool[i] for i in g.choice(total, size=m, replace=False).tolist()]
    out: list[int] = []
    seen = set()
    while len(out) < m:
        x = sum(1 << v for v in g.choice(n, size=d, replace=False).tolist())
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out

