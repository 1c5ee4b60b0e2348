"""bench/'s one timing helper: interleaved rounds, per-contestant medians and ratios (no timed assertion).

The helper lives in ``bench/benchmarks/_timing.py`` (outside the package); it is loaded from the
checkout. A fake clock makes every duration known in advance, so the medians are checked exactly
against ``statistics.median`` of those durations.
"""

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "bench" / "benchmarks" / "_timing.py"

pytestmark = pytest.mark.skipif(not PATH.is_file(), reason="bench/ is not in this checkout")


@pytest.fixture(scope="module")
def timing():
    spec = importlib.util.spec_from_file_location("numtk_bench_timing", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is created
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod


class FakeClock:
    """A clock that only moves when a contestant runs: contestant ``name`` takes ``durations[name][k]``
    seconds on its k-th call."""

    def __init__(self, durations):
        self.now = 0.0
        self.durations = durations
        self.calls = []

    def __call__(self):
        return self.now

    def contestant(self, name):
        def run():
            k = sum(1 for c in self.calls if c == name)
            self.calls.append(name)
            self.now += self.durations[name][k]
            return (name, k)

        return run


def test_rounds_interleave_and_rotate(timing):
    order = []
    calls = {name: (lambda name=name: order.append(name)) for name in "abc"}
    timing.interleaved(calls, 4, warmup=False)
    # each round calls every contestant once, starting one further on each round
    assert order == list("abc" "bca" "cab" "abc")


def test_medians_results_and_ratio(timing):
    durations = {"numtk": [0.5, 1.0, 3.0, 2.0, 9.0], "anchor": [4.0, 6.0, 5.0, 30.0, 7.0]}
    clock = FakeClock(durations)
    t = timing.interleaved({name: clock.contestant(name) for name in durations}, 5, warmup=False, clock=clock)
    assert t.samples == durations
    assert t.medians == {name: statistics.median(d) for name, d in durations.items()}
    assert t.medians == {"numtk": 2.0, "anchor": 6.0}
    assert t.ratio("anchor", "numtk") == 3.0
    assert t.results == {"numtk": ("numtk", 4), "anchor": ("anchor", 4)}  # the last call's value
    assert t.counts == {"numtk": 5, "anchor": 5} and not t.single and not t.errors


def test_warmup_is_untimed_and_sets_the_loop_count(timing):
    # warm-up calls take 0.25 s; min_time 1 -> every sample loops 4 calls and reports their mean
    durations = {"a": [0.25] + [0.25, 0.75] * 4, "b": [0.25] * 9}
    clock = FakeClock(durations)
    t = timing.interleaved({name: clock.contestant(name) for name in durations}, 2, min_time=1.0, clock=clock)
    assert clock.calls[:2] == ["a", "b"]  # the warm-ups, then rounds of 4-call samples
    assert clock.calls[2:] == ["a"] * 4 + ["b"] * 4 + ["b"] * 4 + ["a"] * 4
    assert t.samples == {"a": [0.5, 0.5], "b": [0.25, 0.25]}
    assert t.ratio("a", "b") == 2.0


def test_per_contestant_repeats_max_single_budget_and_errors(timing):
    durations = {"fast": [1.0] * 9, "slow": [50.0, 50.0], "capped": [4.0] * 9, "broken": []}
    clock = FakeClock(durations)
    calls = {name: clock.contestant(name) for name in ("fast", "slow", "capped")}

    def broken():
        raise RuntimeError("no solver")

    calls["broken"] = broken
    t = timing.interleaved(calls, {"fast": 6, "slow": 3, "capped": 9, "broken": 3}, warmup=False, max_single=10.0,
                           budget=10.0, errors="record", clock=clock)
    assert t.counts == {"fast": 6, "slow": 1, "capped": 3, "broken": 0}  # capped: 4 + 4 + 4 > 10 s
    assert t.single == {"slow"} and t.medians["slow"] == 50.0
    assert set(t.errors) == {"broken"} and "broken" not in t.medians
    with pytest.raises(RuntimeError, match="no solver"):
        timing.interleaved({"broken": broken}, 2)
    with pytest.raises(ValueError, match="repeat"):
        timing.interleaved({"a": lambda: None}, 0)
