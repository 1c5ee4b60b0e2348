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

from _harness import (BAD_OUTCOMES, EDGE, INVALID, base_name, calls_of, failures, params_of,  # noqa: E402
                      report, run_case)

MODULES = sorted(p.stem for p in HERE.glob("cases_*.py"))


def _load(module):
    spec = importlib.util.spec_from_file_location(f"fuzz_{module}", HERE / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = set()
    for name, case in mod.CASES.items():  # the first case of each callable fuzzes its declaration
        if case.declared is None:
            case.declared = base_name(name) not in seen
        seen.add(base_name(name))
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
        for p, cats in params_of(case).items():
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


def _public_names():
    """(full name, object) of every name in an area's __all__; an area whose __all__ lists modules (the
    torch bridge: numtk.torch.llep, ...) contributes the names of their __all__ instead."""
    import types

    import numtk

    for area in numtk.submodules:
        mod = importlib.import_module(f"numtk.{area}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, types.ModuleType):
                for sub in obj.__all__:
                    yield f"numtk.{area}.{name}.{sub}", getattr(obj, sub)
            else:
                yield f"numtk.{area}.{name}", obj


def test_every_public_callable_has_a_case():
    # every callable in an area's __all__ that takes a parameter (exceptions and warnings aside)
    import inspect

    covered = {name.split("[")[0] for _, name in ALL}
    missing = []
    for full, obj in _public_names():
        if not callable(obj) or (isinstance(obj, type) and issubclass(obj, (Exception, Warning))):
            continue
        if not inspect.signature(obj).parameters:
            continue  # nothing to pass badly (load_krumsiek11, KuhnPoker, ...)
        if not any(c == full or c.startswith(full + ".") for c in covered):
            missing.append(full)
    assert not missing, f"public callables without a fuzz case in tests/fuzz/cases_<area>.py: {missing}"
    assert all(calls_of(_load(m)[n]) for m, n in ALL)


# --------------------------------------------------------------------------------------------------
# Constraints as data: every public callable declares its parameters (numtk._lib._constraints), the
# declarations use the catalogue's vocabulary, and every declaration is fuzzed by some case.
# --------------------------------------------------------------------------------------------------
def _public_callables():
    """name -> object for every public function, class and public method of a class of every area.

    Methods come from the area's own classes (shared bases such as numtk._lib's Estimator are
    declared and checked where they are defined, not once per subclass)."""
    import inspect

    out = {}
    for full, obj in _public_names():
        if not callable(obj) or (isinstance(obj, type) and issubclass(obj, (Exception, Warning))):
            continue
        out[full] = obj
        if not isinstance(obj, type):
            continue
        for mname in dir(obj):
            if mname.startswith("_"):
                continue
            raw = inspect.getattr_static(obj, mname)
            func = getattr(raw, "__func__", raw)  # classmethod, staticmethod
            if not inspect.isfunction(func) or not func.__module__.startswith("numtk."):
                continue
            if func.__module__.startswith("numtk._lib"):
                continue
            out[f"{full}.{mname}"] = func
    return out


def _declaration(obj):
    import inspect

    from numtk._lib._constraints import declared_constraints

    decl = dict(declared_constraints(obj))
    if not decl and not isinstance(obj, type):
        raw = getattr(obj, "__func__", obj)
        decl = dict(declared_constraints(raw))
    sig = inspect.signature(obj)
    named = [p.name for p in sig.parameters.values()
             if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return decl, named


def test_the_constraint_vocabulary_is_the_catalogue():
    from numtk._lib._constraints import CATEGORIES

    assert set(INVALID) == set(CATEGORIES)
    assert set(EDGE) <= set(CATEGORIES)
    assert all(INVALID[c] for c in CATEGORIES if c != "any"), "every category but 'any' has invalid values"


def test_every_public_callable_declares_its_parameters():
    problems = []
    for name, obj in _public_callables().items():
        decl, named = _declaration(obj)
        missing = [p for p in named if p not in decl]
        extra = [p for p in decl if p not in named and not p.startswith("options.")]
        if missing or extra:
            problems.append(f"{name}: undeclared {missing}, declared but not parameters {extra}")
    assert not problems, "declare with numtk._lib._constraints.constraints:\n" + "\n".join(problems)


def test_every_declaration_is_fuzzed():
    public = _public_callables()
    # an inherited method is one function under several names: one case serves them all
    fuzzed = {id(public[base_name(name)]) for _, name in ALL if base_name(name) in public}
    unknown = sorted({base_name(name) for _, name in ALL} - set(public))
    assert not unknown, f"fuzz cases named after no public callable: {unknown}"
    unfuzzed = []
    for name, obj in public.items():
        decl, _ = _declaration(obj)
        if any(cats != ("any",) for cats in decl.values()) and id(obj) not in fuzzed:
            unfuzzed.append(name)
    assert not unfuzzed, f"declared callables without a fuzz case in tests/fuzz/cases_<area>.py: {unfuzzed}"
