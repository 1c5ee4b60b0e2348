"""Fuzz cases of numtk.stats (see _harness.py for the catalogue and the outcomes)."""

import numpy as np

from _harness import Case


def _xy(func, **kw):
    x = np.random.default_rng(0).normal(size=30)
    y = x + np.random.default_rng(1).normal(size=30)
    return lambda: (func(), (x, y), kw)


def _tau():
    from numtk.stats import kendall_tau
    return kendall_tau


def _dist():
    from numtk.stats import kendall_distance
    return kendall_distance


def _interval():
    from numtk.stats import kendall_tau_interval
    return kendall_tau_interval


_ARRAYS = {"x": "array1d", "y": "array1d"}
CASES = {c.name: c for c in [
    Case("numtk.stats.kendall_tau", _xy(_tau),
         {**_ARRAYS, "variant": "option", "alternative": "option", "method": "option", "nan_policy": "option",
          "workers": "workers"}, positional={"x": 0, "y": 1},
         # NaN with nan_policy='propagate' (the default) is SciPy's stated result: tau and p are NaN
         skip={"x": ("np.full(5, np.nan)",), "y": ("np.full(5, np.nan)",)}),
    Case("numtk.stats.kendall_tau[nan_policy=raise]", _xy(_tau, nan_policy="raise"),
         {"x": "array1d", "y": "array1d"}, positional={"x": 0, "y": 1}),
    Case("numtk.stats.kendall_distance", _xy(_dist),
         {"a": "array1d", "b": "array1d", "normalize": "bool", "penalty": "prob", "nan_policy": "option",
          "workers": "workers"}, positional={"a": 0, "b": 1}),
    Case("numtk.stats.kendall_tau_interval", _xy(_interval),
         {**_ARRAYS, "confidence": "prob_open", "method": "option", "alternative": "option",
          "nan_policy": "option", "workers": "workers"}, positional={"x": 0, "y": 1},
         skip={"x": ("np.full(5, np.nan)",), "y": ("np.full(5, np.nan)",)}),
]}
