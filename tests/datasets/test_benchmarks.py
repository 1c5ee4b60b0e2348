"""numtk.datasets.load_gmm40: the shipped GMM-40 table and the sampling preset built from it."""

import hashlib
import importlib.resources
import math

import numpy as np

from numtk.datasets import load_gmm40


def test_gmm40_table_is_the_documented_file():
    data = (importlib.resources.files("numtk.datasets") / "data" / "gmm40_means.csv").read_bytes()
    notes = (importlib.resources.files("numtk.datasets") / "data" / "gmm40_means.txt").read_text("ascii")
    assert hashlib.sha256(data).hexdigest() in notes
    g = load_gmm40()
    assert g.means.shape == (40, 2) and g.means.dtype == np.float64
    assert np.all(np.abs(g.means) <= 40.0)                      # (U(0, 1) - 0.5) * 80
    assert np.all(g.means.astype(np.float32) == g.means)       # float32 values, read exactly
    assert g.std == math.log1p(math.e)                          # softplus(1)
    np.testing.assert_array_equal(g.weights, np.full(40, 1 / 40))


def test_the_sampling_preset_reads_the_loader():
    from numtk.sampling import gaussian_mixture

    t = gaussian_mixture(name="gmm40")
    g = load_gmm40()
    np.testing.assert_array_equal(t.params["means"], g.means)
    np.testing.assert_array_equal(t.params["covs"], np.full((40, 2), g.std ** 2))
