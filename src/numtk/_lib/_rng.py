"""The ``rng`` keyword: None, an int seed, a SeedSequence or a numpy.random.Generator (SPEC 7)."""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["normalize_rng", "spawn_rngs"]


def normalize_rng(rng=None, *, name: str = "rng") -> np.random.Generator:
    """Turn the ``rng`` argument into a :class:`numpy.random.Generator`.

    Follows SPEC 7: ``None`` gives a freshly seeded generator, an int (or
    :class:`numpy.random.SeedSequence`) seeds one, a Generator passes through unchanged.
    The legacy :class:`numpy.random.RandomState` is refused with a TypeError that says what to use.

    Examples
    --------
    >>> from numtk._lib import normalize_rng
    >>> g = normalize_rng(42)
    >>> normalize_rng(g) is g
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be None, an int or a numpy.random.Generator; got a bool")
    if isinstance(rng, numbers.Integral):
        if int(rng) < 0:
            raise ValueError(f"`{name}` must be a non-negative int seed; got {int(rng)}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, np.random.RandomState):
        raise TypeError(f"`{name}` must be None, an int or a numpy.random.Generator; the legacy "
                        "RandomState is not accepted (use numpy.random.default_rng(seed))")
    raise TypeError(f"`{name}` must be None, an int or a numpy.random.Generator; "
                    f"got {type(rng).__name__}")


def spawn_rngs(rng, n: int) -> list[np.random.Generator]:
    """``n`` statistically independent child generators of ``rng`` (for parallel tasks)."""
    return list(normalize_rng(rng).spawn(n))
