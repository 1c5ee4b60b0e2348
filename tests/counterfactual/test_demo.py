"""The counterfactual demonstration: registered for the tour, prints its table, returns tour rows,
draws its figure. The protocol it runs is tested in test_protocol.py."""

import ast
import inspect
from pathlib import Path

import pytest
from numpy.testing import assert_array_equal

import numtk.counterfactual as cf
from numtk.counterfactual._demo import run


# ------------------------------------------------------------------------------- the demonstration

def test_demo_is_registered_for_the_tour():
    from numtk.__main__ import DEMOS, _load

    assert DEMOS["counterfactual"] == "numtk.counterfactual._demo:run"
    assert _load("counterfactual") is run
    assert "plot" in inspect.signature(run).parameters  # so `demo counterfactual --plot FILE` is allowed


def test_demo_quick_prints_a_table_returns_rows_and_plots(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("cvxpy")
    image = pytest.importorskip("matplotlib.image")
    from numtk.__main__ import _COLUMNS, format_table

    lines = []
    path = tmp_path / "counterfactual.png"
    rows = run(quick=True, out=lines.append, plot=str(path))
    text = "\n".join(lines)
    for name in ("synthetic_2d", "breast_cancer", "adult"):
        assert f"{name}: per method and K" in text
    assert "fit valid  held-out" in text
    assert rows and all(set(r) == set(_COLUMNS) and r["area"] == "counterfactual" for r in rows)
    methods = [r["method"] for r in rows]
    for expected in ("translation, breast_cancer", "diagonal K=2, breast_cancer", "psd K=2, synthetic_2d",
                     "wachter, adult", "diagonal K=2, immutable, adult"):
        assert expected in methods
    for r in rows:  # every fitted member is valid, for every map and baseline
        assert r["result"].startswith("valid 100.0%"), r
    assert "counterfactual" in format_table(rows)
    pixels = image.imread(str(path))
    assert_array_equal(pixels.shape[:2], (round(4.6 * 110), round(3 * 4.6 * 110)))
    assert pixels.std() > 0


def test_demo_calls_only_public_api():
    # the demonstration prints; the protocol, the problems and the maps are the library's
    tree = ast.parse(Path(inspect.getfile(run)).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("numtk.counterfactual"):
            assert node.module == "numtk.counterfactual", node.module
            assert all(alias.name in cf.__all__ for alias in node.names)
