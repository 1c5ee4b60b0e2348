"""The one timing helper of ``bench/``: contestants timed in interleaved rounds, medians and ratios.

``bench/compare.py`` and every side-by-side run in ``bench/benchmarks/_*.py`` time numtk and its anchors
with :func:`interleaved`: each round calls every contestant once, starting with a different one each
round, so that a change of machine load (another process, a CPU frequency step) hits every contestant
alike instead of the one that happened to run last. Absolute times wander on a shared machine; the
ratios of medians taken this way much less.

Nothing here is a benchmark for asv (its names start with none of ``time_``, ``timeraw_``, ``mem_``,
``peakmem_`` or ``track_``).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Timings", "interleaved"]


@dataclass
class Timings:
    """What :func:`interleaved` measured.

    ``medians[name]`` is the median of ``samples[name]`` (seconds per call), ``results[name]`` the value
    the last call returned, ``single`` the contestants timed once because a call took longer than
    ``max_single``, ``errors[name]`` the exception of a contestant that raised (with ``errors="record"``;
    such a contestant has no median).
    """

    medians: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    single: set[str] = field(default_factory=set)
    errors: dict[str, BaseException] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """Timed samples per contestant."""
        return {name: len(s) for name, s in self.samples.items()}

    def ratio(self, numerator: str, denominator: str) -> float:
        """``medians[numerator] / medians[denominator]``: with an anchor over numtk, > 1 means numtk is faster."""
        return self.medians[numerator] / self.medians[denominator]


def interleaved(calls: Mapping[str, Callable[[], Any]], repeat: int | Mapping[str, int] = 5, *,
                warmup: bool = True, min_time: float = 0.0, max_single: float = math.inf,
                budget: float = math.inf, errors: str = "raise",
                clock: Callable[[], float] = time.perf_counter) -> Timings:
    """Time every callable of ``calls`` in interleaved rounds; per contestant, the median seconds per call.

    Parameters
    ----------
    calls : mapping of str to callable
        The contestants: name -> callable taking no argument.
    repeat : int or mapping of str to int, default 5
        Timed samples per contestant (a mapping gives each its own count). Round ``r`` times, once each,
        the contestants that still need a sample, starting at the ``r``-th of them (a rotation), so no
        contestant always runs first or last.
    warmup : bool, default True
        Call each contestant once, untimed, before the rounds (imports, caches, first-call costs). Its
        duration sets the inner loop count (see ``min_time``); if it exceeds ``max_single``, the
        contestant is not called again and that duration is its only sample.
    min_time : float, default 0
        With ``warmup``, a sample loops a call ``ceil(min_time / warm-up time)`` times and reports the
        mean, so that fast calls are not timed below the clock's resolution.
    max_single : float, default inf
        A contestant whose call (warm-up or first sample) took longer than this many seconds is timed
        once: that sample stands alone (its name is in ``Timings.single``).
    budget : float, default inf
        Seconds of timed calls per contestant: once its samples add up to more, it gets no further one
        (it always gets one).
    errors : {'raise', 'record'}, default 'raise'
        What a contestant raising an exception does: propagate it, or leave the contest with the
        exception kept in ``Timings.errors``.
    clock : callable, default time.perf_counter
        The clock, in seconds.

    Returns
    -------
    Timings
        Medians, samples, last results, the contestants timed once and the errors recorded.
    """
    if errors not in ("raise", "record"):
        raise ValueError(f"`errors` must be 'raise' or 'record', not {errors!r}")
    names = list(calls)
    wanted = {name: int(repeat[name] if isinstance(repeat, Mapping) else repeat) for name in names}
    if any(n < 1 for n in wanted.values()):
        raise ValueError("`repeat` must be >= 1")
    out = Timings(samples={name: [] for name in names})
    loops = dict.fromkeys(names, 1)
    spent = dict.fromkeys(names, 0.0)

    def call(name: str, number: int) -> float | None:
        try:
            t0 = clock()
            for _ in range(number):
                out.results[name] = calls[name]()
            return (clock() - t0) / number
        except Exception as exc:
            if errors == "raise":
                raise
            out.errors[name] = exc
            return None

    active = list(names)
    if warmup:
        for name in names:
            dt = call(name, 1)
            if dt is None:
                active.remove(name)
            elif dt > max_single:
                out.samples[name].append(dt)
                out.single.add(name)
                active.remove(name)
            else:
                loops[name] = max(1, math.ceil(min_time / max(dt, 1e-9)))
    r = 0
    while True:
        due = [name for name in active if len(out.samples[name]) < wanted[name]]
        if not due:
            break
        k = r % len(due)
        for name in due[k:] + due[:k]:
            dt = call(name, loops[name])
            if dt is None:
                active.remove(name)
                continue
            out.samples[name].append(dt)
            spent[name] += dt * loops[name]
            if dt > max_single or spent[name] > budget:
                if len(out.samples[name]) == 1 and dt > max_single:
                    out.single.add(name)
                active.remove(name)
        r += 1
    out.medians = {name: statistics.median(s) for name, s in out.samples.items() if s}
    return out
