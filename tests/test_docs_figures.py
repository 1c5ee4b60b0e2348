"""The tutorials' figures are drawn by the docs build from the demos' code (docs/_ext/numtk_demo_figures.py).

No figure is committed: the pages use ``.. numtk-demo-figure:: NAME``, NAME a demonstration of the
registry of areas, and the extension knows how to draw each. One figure is drawn here through a small
sphinx build with warnings as errors (the way CI builds the docs).
"""

import importlib
import re
import sys
from pathlib import Path

import pytest

from numtk._lib import _registry

DOCS = Path(__file__).resolve().parents[1] / "docs"

pytestmark = pytest.mark.skipif(not (DOCS / "_ext" / "numtk_demo_figures.py").is_file(),
                                reason="docs/ is not in this checkout")


@pytest.fixture(scope="module")
def ext():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        yield importlib.import_module("numtk_demo_figures")
    finally:
        sys.path.remove(str(DOCS / "_ext"))


def _directives():
    """(page, demo name) of every numtk-demo-figure directive of the docs."""
    for page in sorted(DOCS.rglob("*.rst")):
        for name in re.findall(r"^\s*\.\. numtk-demo-figure::\s*(\S+)", page.read_text(encoding="utf-8"), re.M):
            yield page, name


def test_no_figure_is_committed():
    pngs = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.png")
                  if "_build" not in p.parts and "generated" not in p.parts)
    assert not pngs, f"figures are drawn by the build, not committed: {pngs}"


def test_every_page_figure_is_a_registry_demo_the_extension_draws(ext):
    used = {name for _, name in _directives()}
    assert used >= {"psro", "stage", "counterfactual"}  # the tutorials of games, seriation, counterfactual
    assert used <= set(ext.FIGURES)
    assert set(ext.FIGURES) <= set(_registry.demos())


def test_the_functions_each_figure_calls_exist_in_the_demo(ext):
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert '"numtk_demo_figures"' in conf
    for name, figure in ext.FIGURES.items():
        module = ext.demo_module(name)
        assert module.__name__ == _registry.demos()[name].entry.partition(":")[0]
        for function in figure.uses:
            assert callable(getattr(module, function, None)), f"{module.__name__}.{function} (figure {name})"
        assert figure.settings  # stated under the figure
    with pytest.raises(KeyError, match="not a demonstration"):
        ext.demo_module("nope")


def test_a_figure_is_drawn_by_a_warnings_as_errors_build(ext, tmp_path):
    pytest.importorskip("matplotlib")
    sphinx_build = pytest.importorskip("sphinx.cmd.build")
    src = tmp_path / "src"
    (src / "tutorial").mkdir(parents=True)
    (src / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
                                 "extensions = ['numtk_demo_figures']\n")
    (src / "index.rst").write_text("Figures\n=======\n\n.. toctree::\n\n   tutorial/page\n")
    (src / "tutorial" / "page.rst").write_text(
        "Page\n====\n\n.. numtk-demo-figure:: counterfactual\n   :alt: a group and its counterfactuals\n\n"
        "   The caption.\n\n.. numtk-demo-figure:: nope\n")
    out = tmp_path / "out"
    status = sphinx_build.build_main(["-q", "-W", "--keep-going", "-b", "html", str(src), str(out)])
    assert status != 0  # 'nope' is no demo: an error, which fails a -W build
    (src / "tutorial" / "page.rst").write_text(
        (src / "tutorial" / "page.rst").read_text().replace(".. numtk-demo-figure:: nope\n", ""))
    status = sphinx_build.build_main(["-q", "-W", "-E", "-b", "html", str(src), str(out)])
    assert status == 0
    png = out / "_images" / "counterfactual.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "tutorial" / "page.html").read_text(encoding="utf-8")
    assert 'src="../_images/counterfactual.png"' in html and "The caption." in html
    assert "Drawn by the documentation build" in html
