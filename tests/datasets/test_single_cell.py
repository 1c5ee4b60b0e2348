"""numtk.datasets.load_krumsiek11 / load_toggleswitch against independent facts.

Oracles: scanpy's documentation and loader (640 x 11 cells x genes, 200 x 2, the row ranges of
the cell-type labels), the Krumsiek et al. (2011) marker genes of each fate, the sha256 recorded
in data/LICENSES.md, and independent parses of the shipped files (numpy.loadtxt, plain Python).
"""

import hashlib
import importlib.resources
import re

import numpy as np
import pytest

from numtk._lib import Result
from numtk.datasets import load_krumsiek11, load_toggleswitch

DATA = importlib.resources.files("numtk.datasets") / "data"
KRUMSIEK_GENES = ["Gata2", "Gata1", "Fog1", "EKLF", "Fli1", "SCL", "Cebpa", "Pu.1", "cJun",
                  "EgrNab", "Gfi1"]
FILES = ["krumsiek11.txt", "toggleswitch.txt"]


@pytest.fixture(scope="module")
def k11():
    return load_krumsiek11()


@pytest.fixture(scope="module")
def ts():
    return load_toggleswitch()


def _recorded_sha256():
    text = (DATA / "LICENSES.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+)` \| `[\w/.]+` \| (\d+) \| `([0-9a-f]{64})` \|$", text, re.M)
    return {name: (int(size), digest) for name, size, digest in rows}


# --- files, provenance -----------------------------------------------------------------------

@pytest.mark.parametrize("name", FILES)
def test_checksum_matches_licenses_md(name):
    recorded = _recorded_sha256()
    assert set(recorded) == set(FILES)
    raw = (DATA / name).read_bytes()
    size, digest = recorded[name]
    assert len(raw) == size
    assert hashlib.sha256(raw).hexdigest() == digest


def test_licenses_md_has_licence_and_citations():
    text = (DATA / "LICENSES.md").read_text(encoding="utf-8")
    assert "BSD 3-Clause License" in text
    assert "Copyright (c) 2017 F. Alexander Wolf, P. Angerer, Theis Lab" in text
    assert "Neither the name of the copyright holder" in text
    assert "THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS" in text
    for needle in ("10.1371/journal.pone.0022649", "10.1186/s13059-017-1382-0",
                   "10.1038/35002131", "scanpy/datasets/krumsiek11.txt"):
        assert needle in text


# --- krumsiek11 ------------------------------------------------------------------------------

def test_krumsiek11_fields(k11):
    assert isinstance(k11, Result)
    for key in ("X", "genes", "lineage", "step", "realization", "fate", "root", "metadata",
                "description"):
        assert key in k11
    assert k11.X.shape == (640, 11) and k11.X.dtype == np.float64
    assert k11.genes == KRUMSIEK_GENES
    assert k11.step.shape == (640,) and k11.step.dtype.kind == "i"
    assert k11.realization.shape == (640,) and k11.realization.dtype.kind == "i"
    assert k11.lineage.shape == (640,) and k11.lineage.dtype.kind == "U"
    assert isinstance(k11.description, str) and k11.description
    assert k11.root == 0
    assert np.all(np.isfinite(k11.X))
    assert -0.1 < k11.X.min() and k11.X.max() < 1.1  # Hill dynamics in [0, 1] plus small noise


def test_krumsiek11_steps_and_realizations(k11):
    np.testing.assert_array_equal(k11.step, np.tile(np.arange(160), 4))
    np.testing.assert_array_equal(k11.realization, np.repeat(np.arange(4), 160))
    assert len(np.unique(k11.X, axis=0)) == 640  # no duplicated cells


def test_krumsiek11_lineage_as_scanpy(k11):
    # scanpy.datasets.krumsiek11: cell_type[80:160]="Mo", [240:320]="Ery", [400:480]="Mk",
    # [560:640]="Neu", else "progenitor".
    expected = np.full(640, "progenitor", dtype=object)
    expected[80:160], expected[240:320] = "Mo", "Ery"
    expected[400:480], expected[560:640] = "Mk", "Neu"
    assert k11.lineage.tolist() == expected.tolist()
    labels, counts = np.unique(k11.lineage, return_counts=True)
    assert dict(zip(labels.tolist(), counts.tolist())) == {
        "Ery": 80, "Mk": 80, "Mo": 80, "Neu": 80, "progenitor": 320}
    assert k11.fate.tolist() == np.repeat(["Mo", "Ery", "Mk", "Neu"], 160).tolist()
    late = k11.lineage != "progenitor"
    assert np.all(k11.lineage[late] == k11.fate[late])


def test_krumsiek11_fates_match_marker_genes(k11):
    # Krumsiek et al. 2011: erythrocytes Gata1+ EKLF+; megakaryocytes Gata1+ Fli1+; monocytes
    # Pu.1+ cJun+ EgrNab+; neutrophils Cebpa+ Gfi1+ (EgrNab-). Check the final cell of each
    # realization against the fate the loader gives it.
    g = {name: j for j, name in enumerate(KRUMSIEK_GENES)}
    for r in range(4):
        end = k11.X[(k11.realization == r) & (k11.step == 159)][0]
        fate = k11.fate[k11.realization == r][0]
        on = {name for name in KRUMSIEK_GENES if end[g[name]] > 0.5}
        markers = {"Ery": {"Gata1", "EKLF"}, "Mk": {"Gata1", "Fli1"},
                   "Mo": {"Pu.1", "cJun", "EgrNab"}, "Neu": {"Cebpa", "Gfi1"}}[fate]
        assert markers <= on, (r, fate, on)
        others = set().union(*({"Ery": {"EKLF"}, "Mk": {"Fli1"}, "Mo": {"EgrNab"},
                                "Neu": {"Gfi1"}}[f] for f in ("Ery", "Mk", "Mo", "Neu") if f != fate))
        assert not (others & on), (r, fate, on)


def test_krumsiek11_start_state(k11):
    # scanpy.tl.sim starts krumsiek11 at Gata2 = Pu.1 = Cebpa = 0.8, the rest 0, plus N(0, 0.001^2).
    start = k11.X[k11.step == 0]
    expected = np.zeros(11)
    expected[[0, 6, 7]] = 0.8
    np.testing.assert_allclose(start, np.tile(expected, (4, 1)), atol=0.01)


def test_krumsiek11_metadata(k11):
    md = k11.metadata
    assert md["tmax"] == 160 and md["nrRealizations"] == 4 and md["seed"] == 0
    assert md["branching"] is True
    assert md["noiseObs"] == 0 and md["noiseDyn"] == pytest.approx(0.001)
    assert md["model"].endswith("krumsiek11.txt")


# --- toggleswitch ----------------------------------------------------------------------------

def test_toggleswitch(ts):
    assert isinstance(ts, Result)
    assert ts.X.shape == (200, 2) and ts.X.dtype == np.float64
    assert ts.genes == ["0", "1"]
    assert ts.lineage is None and ts.fate is None
    assert ts.root == 0 and ts.metadata == {}
    assert isinstance(ts.description, str) and ts.description
    np.testing.assert_array_equal(ts.step, np.tile(np.arange(100), 2))
    np.testing.assert_array_equal(ts.realization, np.repeat(np.arange(2), 100))
    assert ts.step.dtype.kind == "i" and ts.realization.dtype.kind == "i"
    assert np.all(np.isfinite(ts.X))
    # both start near (0.8, 0.8); realization 0 ends with gene 0 on, realization 1 with gene 1 on
    np.testing.assert_allclose(ts.X[ts.step == 0], 0.8, atol=0.05)
    end0, end1 = ts.X[ts.step == 99]
    assert end0[0] > 0.9 > 0.1 > end0[1]
    assert end1[1] > 0.9 > 0.1 > end1[0]


# --- independent parses ----------------------------------------------------------------------

@pytest.mark.parametrize("name, load", [("krumsiek11.txt", load_krumsiek11),
                                        ("toggleswitch.txt", load_toggleswitch)])
def test_equals_numpy_loadtxt(name, load):
    with importlib.resources.as_file(DATA / name) as path:
        table = np.loadtxt(path)  # '#' comments by default
    res = load()
    np.testing.assert_array_equal(res.X, table[:, 1:])
    np.testing.assert_array_equal(res.step, table[:, 0])


@pytest.mark.parametrize("name, load", [("krumsiek11.txt", load_krumsiek11),
                                        ("toggleswitch.txt", load_toggleswitch)])
def test_equals_plain_python_parse(name, load):
    lines = (DATA / name).read_text(encoding="ascii").splitlines()
    header = [line for line in lines if line.startswith("#")]
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    res = load()
    if header:
        assert res.genes == header[-1].lstrip("# ").split()[1:]
    assert res.step.tolist() == [int(r[0]) for r in rows]
    assert res.X.tolist() == [[float(v) for v in r[1:]] for r in rows]


def test_fresh_arrays_each_call():
    a = load_krumsiek11()
    a.X[0, 0] = 123.0
    assert load_krumsiek11().X[0, 0] != 123.0
