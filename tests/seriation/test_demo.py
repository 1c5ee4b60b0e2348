"""The STAGE demonstration's figure and the command line's --plot option."""

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from numtk.seriation._demo import plot_orders


def test_plot_orders_writes_the_figure(tmp_path):
    image = pytest.importorskip("matplotlib.image")  # a test extra: installed in CI
    t = np.linspace(0, 1, 50)
    order = np.argsort(-t)
    path = tmp_path / "orders.png"
    plot_orders([("a", t, order, 1.0), ("b", t, order[::-1], 1.0), ("c", t, order, 1.0)], str(path))
    pixels = image.imread(str(path))
    # 2 columns x 2 rows of 5.5 x 3.6 inch panels at 110 dpi
    assert_array_equal(pixels.shape[:2], (round(2 * 3.6 * 110), round(2 * 5.5 * 110)))
    assert pixels.std() > 0  # not blank


def test_cli_refuses_plot_for_a_demo_without_figure():
    res = subprocess.run([sys.executable, "-m", "numtk", "demo", "kendall", "--plot", "x.png"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "has no figure" in res.stderr
