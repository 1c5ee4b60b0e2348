"""The ``workers`` keyword: an int (native threads or a process pool) or a map-like callable.

SciPy's convention: ``1`` runs serially, ``-1`` uses every core available to this process, ``k > 1``
uses k workers, and any callable with the signature of the built-in ``map`` (``Pool.map``,
``concurrent.futures.Executor.map``, a ``dask.distributed`` client's ``map`` wrapped to gather) carries
the work instead.
"""

from __future__ import annotations

import numbers
import os
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["MapWrapper", "as_map", "n_threads", "available_cores", "max_workers", "blas_threads",
           "single_blas_thread", "map_rows"]


_CONTROLLER: list = []


def blas_threads(limit: int):
    """A context limiting BLAS/LAPACK to ``limit`` threads (when threadpoolctl is installed).

    One threadpoolctl controller is built on first use and kept: building one (as ``threadpool_limits`` does
    on every call) inspects every loaded library, milliseconds a call on busy cores, more than the small
    solves these contexts wrap. SciPy's BLAS is loaded before it is built; a BLAS library first loaded
    later (by another package) is not limited.
    """
    import contextlib

    if not _CONTROLLER:
        import scipy.linalg  # noqa: F401  (load SciPy's BLAS first: threadpoolctl limits only loaded libraries)

        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    controller = _CONTROLLER[0]
    if controller is None:  # pragma: no cover
        return contextlib.nullcontext()
    return controller.limit(limits=int(limit), user_api="blas")


def single_blas_thread():
    """A context limiting BLAS/LAPACK to one thread (when threadpoolctl is installed).

    Loops of many small BLAS/LAPACK calls (L-BFGS-B steps, ALS core solves of a few hundred unknowns) spend
    far more in thread synchronisation than in arithmetic once other processes share the cores: a 192 x 192
    Cholesky took 1 s instead of 1 ms on two busy cores. Outside such loops BLAS keeps its threads.
    """
    return blas_threads(1)


def map_rows(fn: Callable, X: Any, mapper: Callable | None = None, chunk: int = 8192):
    """``fn`` on the rows of ``X``, in chunks of ``chunk`` rows spread by the map-like ``mapper`` (None, or
    at most one chunk: a single call); the results' values concatenated into one flat float64 array."""
    import numpy as np

    if mapper is None or len(X) <= chunk:
        return np.asarray(fn(X), dtype=np.float64).reshape(-1)
    parts = list(mapper(fn, [X[i:i + chunk] for i in range(0, len(X), chunk)]))
    return np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts])


def available_cores() -> int:
    """Cores this process may run on (respects CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def max_workers() -> int:
    """The largest ``workers`` count accepted: 4 threads or processes per available core, at least 32
    and at most 1024 (the compiled kernels' own cap). More never pays, and far more can exhaust the
    threads a process may start."""
    return min(1024, max(32, 4 * available_cores()))


def _check_count(workers: Any, name: str) -> int:
    if isinstance(workers, (bool, np.bool_)) or not isinstance(workers, numbers.Integral):
        raise TypeError(f"`{name}` must be an int or a map-like callable; got {type(workers).__name__}")
    workers = int(workers)
    if workers == -1:
        return available_cores()
    if workers < 1:
        raise ValueError(f"`{name}` must be a positive int or -1 (all cores); got {workers}")
    limit = max_workers()
    if workers > limit:
        raise ValueError(f"`{name}` must be at most {limit} (4 per available core, at least 32; this "
                         f"process may run on {available_cores()}); got {workers}")
    return workers


def n_threads(workers: Any = 1, *, name: str = "workers", work: float | None = None,
              grain: float | None = None) -> int:
    """The thread count for a compiled kernel: ``workers`` as an int, ``-1`` meaning all cores.

    With ``work`` (the problem's size in the kernel's own unit: elements, pairs, rows x columns) and
    ``grain`` (the kernel's measured crossover: the work below which a second thread costs more than it
    saves), at most ``max(1, work // grain)`` threads are used, so ``workers=-1`` never slows a small call
    down. ``workers`` is validated either way.

    A map-like callable cannot drive threads inside one compiled call, so it is refused here with a
    TypeError that says so; functions that can split work across calls use :func:`as_map`.
    """
    if type(workers) is int and not _UNCAPPED:  # the common calls, without the checks' overhead (~2 us)
        if workers == 1:
            return 1
        if workers == -1 and work is not None and grain is not None and 0 <= work < 2 * grain:
            return 1
    if callable(workers):
        raise TypeError(f"`{name}` must be an int here (the number of native threads); a map-like "
                        "callable only applies where the work splits into independent tasks")
    threads = _check_count(workers, name)
    if work is not None and grain is not None and threads > 1 and not _UNCAPPED:
        if not grain > 0:
            raise ValueError(f"a kernel's grain must be positive; got {grain}")
        threads = max(1, min(threads, int(work // grain)))
    return threads


_UNCAPPED: list = []


class uncapped:
    """A context in which :func:`n_threads` ignores ``work`` and ``grain`` (the count asked for is used).

    For benchmarks that measure a kernel's crossover (the threaded path below its grain); not thread-safe:
    it changes a module-level switch for every caller while it is open.
    """

    def __enter__(self) -> "uncapped":
        _UNCAPPED.append(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        _UNCAPPED.pop()


class MapWrapper:
    """A map-like callable made from ``workers``; use as a context manager.

    ``1`` maps serially with the built-in ``map``; ``k > 1`` or ``-1`` opens a process pool (closed on
    exit; only pools made here are closed); a callable is used as given and must accept
    ``(func, iterable)``. ``func`` must be picklable when a process pool carries it.

    Examples
    --------
    >>> from numtk._lib import MapWrapper
    >>> with MapWrapper(1) as mapper:
    ...     list(mapper(abs, [-1, 2, -3]))
    [1, 2, 3]

    A ``dask.distributed`` client carries the work when its ``map`` is wrapped to gather the results::

        workers = lambda func, items: client.gather(client.map(func, list(items)))
    """

    def __init__(self, workers: Any = 1, *, name: str = "workers") -> None:
        self._pool = None
        self._own_pool = False
        if callable(workers):
            self._mapfunc = workers
            self.n_workers = None
            return
        k = _check_count(workers, name)
        self.n_workers = k
        if k == 1:
            self._mapfunc = map
        else:
            import multiprocessing

            # forkserver avoids forking a process that holds threads (BLAS, our kernels).
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ctx.Pool(k)
            self._own_pool = True
            self._mapfunc = self._pool.imap

    def __call__(self, func: Callable, iterable: Iterable) -> Iterable:
        try:
            return self._mapfunc(func, iterable)
        except TypeError as e:
            raise TypeError("`workers` must be a map-like callable with the signature "
                            "`workers(func, iterable)`") from e

    def close(self) -> None:
        if self._own_pool and self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __enter__(self) -> "MapWrapper":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def as_map(workers: Any = 1, *, name: str = "workers") -> MapWrapper:
    """Shorthand for :class:`MapWrapper` (``with as_map(workers) as mapper: ...``)."""
    return MapWrapper(workers, name=name)
