"""Shared helpers of every numtk area (private).

- :class:`Result`, :class:`SignificanceResult`: named outputs with attribute access.
- :func:`normalize_rng`, :func:`spawn_rngs`: the ``rng`` keyword (SPEC 7).
- :func:`as_map`, :func:`n_threads`: the ``workers`` keyword (int or map-like callable).
- :mod:`numtk._lib._validation`: argument checks that name the offending parameter.
- :func:`progress_bar`: tqdm behind ``progress=True``.
- :class:`NumtkWarning`, :class:`SmallSampleWarning`: warning categories.
"""
from numtk._lib._result import Result, SignificanceResult
from numtk._lib._rng import normalize_rng, spawn_rngs
from numtk._lib._workers import MapWrapper, as_map, n_threads, single_blas_thread
from numtk._lib._progress import progress_bar
from numtk._lib._warnings import NumtkWarning, SmallSampleWarning

__all__ = [
    "Result",
    "SignificanceResult",
    "normalize_rng",
    "spawn_rngs",
    "MapWrapper",
    "as_map",
    "n_threads",
    "single_blas_thread",
    "progress_bar",
    "NumtkWarning",
    "SmallSampleWarning",
]
