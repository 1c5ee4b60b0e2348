"""Every public callable under bad input, each call in a child process: no crash, no hang, no
absurd allocation, no silent or non-finite result, and a ValueError/TypeError that names the
parameter. The cases live in ``cases_<area>.py``; the catalogue of values in ``_harness.py``."""

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import BAD_OUTCOMES, calls_of, failures, report, run_case  # noqa: E402

MODULES = sorted(p.stem for p in HERE.glob("cases_*.py"))


def _load(module):
    spec = importlib.util.spec_from_file_location(f"fuzz_{module}", HERE / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CASES


ALL = [(m, name) for m in MODULES for name in _load(m)]


@pytest.mark.parametrize(("module", "name"), ALL, ids=[n for _, n in ALL])
def test_catalogue(module, name):
    case = _load(module)[name]
    results = run_case(module, case)
    assert results, "no call was tried"
    bad = failures(results)
    assert not bad, f"{len(bad)} of {len(results)} calls failed:\n{report(results)}"


# Random bad numbers beyond the catalogue: out-of-range and non-finite values of every numeric
# parameter, drawn by hypothesis (one child process per example, so few examples).
_NUMERIC = {"int>=0": st.integers(max_value=-1), "int>=1": st.integers(max_value=0),
            "int>=2": st.integers(max_value=1), "count": st.integers(min_value=2**40) | st.integers(max_value=0),
            "workers": st.integers(min_value=1025) | st.integers(max_value=-2),
            "real>0": st.floats(max_value=0.0) | st.just(float("nan")),
            "real>=0": st.floats(max_value=-1e-300, allow_infinity=True),
            "prob": st.floats(min_value=1.0, exclude_min=True) | st.floats(max_value=0.0, exclude_max=True),
            "real": st.sampled_from([float("nan"), float("inf"), float("-inf")])}


def _numeric_calls():
    out = []
    for module, name in ALL:
        case = _load(module)[name]
        for p, cats in case.params.items():
            cats = (cats,) if isinstance(cats, str) else cats
            for cat in cats:
                if cat in _NUMERIC:
                    out.append((module, name, p, cat))
    return out


NUMERIC_CALLS = _numeric_calls()


@settings(max_examples=30)
@given(data=st.data())
def test_random_out_of_range_numbers(data):
    module, name, param, cat = data.draw(st.sampled_from(NUMERIC_CALLS))
    case = _load(module)[name]
    value = data.draw(_NUMERIC[cat].filter(lambda v: repr(v) not in case.skip.get(param, ())))
    results = run_case(module, case, [(param, repr(value), "invalid")])
    assert results[0]["outcome"] not in BAD_OUTCOMES, report(results)


def test_every_public_callable_has_a_case():
    # every callable in an area's __all__ that takes a parameter (exceptions and warnings aside)
    import inspect

    import numtk

    covered = {name.split("[")[0] for _, name in ALL}
    missing = []
    for area in numtk.submodules:
        mod = importlib.import_module(f"numtk.{area}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj) or (isinstance(obj, type) and issubclass(obj, (Exception, Warning))):
                continue
            if not inspect.signature(obj).parameters:
                continue  # nothing to pass badly (load_krumsiek11, KuhnPoker, ...)
            full = f"numtk.{area}.{name}"
            if not any(c == full or c.startswith(full + ".") for c in covered):
                missing.append(full)
    assert not missing, f"public callables without a fuzz case in tests/fuzz/cases_<area>.py: {missing}"
    assert all(calls_of(_load(m)[n]) for m, n in ALL)
