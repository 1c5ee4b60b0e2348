"""Package-level contracts: public API index, import hygiene, command line, native headers."""

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import numtk

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("area", numtk.submodules)
def test_every_public_name_resolves_and_is_indexed(area):
    mod = importlib.import_module(f"numtk.{area}")
    assert mod.__all__, area
    for name in mod.__all__:
        assert hasattr(mod, name), f"numtk.{area}.{name} is in __all__ but missing"
        # the module docstring is the API index (autosummary): every public name is listed
        assert re.search(rf"^\s+{name}\b", mod.__doc__, re.M), f"{name} missing from the docstring index"
        obj = getattr(mod, name)
        if callable(obj) and not isinstance(obj, type):
            doc = obj.__doc__ or ""
            sections = ("Parameters", "Returns", "Examples") if inspect.signature(obj).parameters else (
                "Returns", "Examples")
            for section in sections:
                assert section in doc, f"numtk.{area}.{name} docstring lacks {section}"


def _fresh(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_numtk_is_light():
    # `import numtk` must not pull in optional or heavy modules; areas load on first access.
    out = _fresh("import sys, numtk; print(sorted(m for m in sys.modules if m.split('.')[0] in "
                 "{'torch','cvxpy','numba','sklearn','tqdm','dask','scipy','numtk'}))")
    loaded = eval(out)
    assert not [m for m in loaded if m.split(".")[0] in {"torch", "cvxpy", "numba", "sklearn", "tqdm", "dask"}]
    assert "numtk.stats" not in loaded and not any(m.startswith("scipy") for m in loaded)
    out = _fresh("import sys, numtk.stats; print(sorted(m for m in sys.modules if m.startswith('scipy.stats') "
                 "or m.split('.')[0] in {'torch','cvxpy','numba','sklearn'}))")
    assert eval(out) == []


@pytest.mark.parametrize("area", numtk.submodules)
def test_each_area_imports_in_a_fresh_interpreter(area):
    _fresh(f"import numtk.{area}")


def test_lazy_attribute_access():
    assert numtk.stats.kendall_tau is importlib.import_module("numtk.stats").kendall_tau
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        numtk.nope
    assert set(numtk.submodules) <= set(dir(numtk))


def test_cli_info_and_demo():
    info = subprocess.run([sys.executable, "-m", "numtk", "info"], capture_output=True, text=True, check=True)
    assert f"numtk {numtk.__version__}" in info.stdout
    assert "numtk.stats._stats_ext" in info.stdout and "MISSING" not in info.stdout
    demo = subprocess.run([sys.executable, "-m", "numtk", "demo", "kendall"], capture_output=True, text=True,
                          check=True)
    assert "rel.diff 0.0e+00 (SciPy)" in demo.stdout  # identical to SciPy on both datasets
    assert demo.stdout.count("kendall_tau") >= 2
    bad = subprocess.run([sys.executable, "-m", "numtk", "demo", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_native_headers_do_not_include_python():
    headers = list((ROOT / "native").rglob("*.hpp"))
    assert headers
    include = re.compile(r'^\s*#\s*include\s*[<"](Python\.h|pybind11/|numpy/)', re.M)
    for header in headers:
        assert not include.search(header.read_text()), header
