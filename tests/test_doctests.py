"""The Examples sections of the public docstrings and the tutorials run as doctests."""

import doctest
import importlib
import types
from pathlib import Path

import pytest

import numtk

ROOT = Path(__file__).resolve().parents[1]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules():
    names = ["numtk._lib._result", "numtk._lib._rng", "numtk._lib._workers", "numtk._lib._progress"]
    for area in numtk.submodules:
        mod = importlib.import_module(f"numtk.{area}")
        # an area whose __all__ lists modules (the torch bridge) is indexed by those modules' names
        mods = [getattr(mod, n) for n in mod.__all__ if isinstance(getattr(mod, n), types.ModuleType)] or [mod]
        names += sorted({getattr(m, n).__module__ for m in mods for n in m.__all__
                         if getattr(getattr(m, n), "__module__", "").startswith("numtk.")})
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.failed == 0


@pytest.mark.parametrize("page", sorted(p for p in (ROOT / "docs" / "tutorial").glob("*.rst") if p.name != "index.rst"), ids=lambda p: p.name)
def test_tutorial_examples(page):
    result = doctest.testfile(str(page), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0 and result.attempted > 0


def test_readme_examples():
    import re

    text = (ROOT / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```python\n(.*?)```", text, re.S))
    test = doctest.DocTestParser().get_doctest(blocks, {}, "README.md", str(ROOT / "README.md"), 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 0
