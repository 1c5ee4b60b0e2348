"""The CAMEL demonstration: its printed rows and tables against facts recomputed independently."""

import re

import numpy as np
import pytest
from scipy.stats import spearmanr

from numtk.mixture import _demo as demo


@pytest.fixture(scope="module")
def ran():
    """One quick run of the demo; what its steps returned is recorded on the way (no second run)."""
    seen = {}
    mp = pytest.MonkeyPatch()
    for name in ("planted_world", "allocation_table", "regmix_table"):
        def record(*args, _name=name, _f=getattr(demo, name), **kwargs):
            seen[_name] = _f(*args, **kwargs)
            return seen[_name]
        mp.setattr(demo, name, record)
    lines = []
    try:
        rows = demo.run(quick=True, out=lines.append)
    finally:
        mp.undo()
    return rows, "\n".join(lines), seen


@pytest.fixture(scope="module")
def world(ran):
    return ran[2]["planted_world"]


def _camel_average(params, N0, size, R):
    """The average over validation sets of the 'camel' law, plain NumPy (the planted law's closed form)."""
    R = np.atleast_2d(R)
    ell = np.log(size / N0)
    return (params["E"][None, :] + np.exp(R @ params["theta"].T - ell * (R @ params["alpha"].T))).mean(axis=1)


def test_rows_are_the_tour_table(ran):
    rows, text, _ = ran
    assert len(rows) == 2
    for r in rows:
        assert set(r) == {"area", "method", "n", "result", "vs anchor", "speed"} and r["area"] == "mixture"
    assert rows[0]["n"] == 100 and rows[1]["n"] == 512
    for form in demo.FORMS:
        assert re.search(rf"^  {form}\s+\d+\s", text, re.M), form


def test_the_printed_planted_table_is_the_world(ran, world):
    text = ran[1]
    for form, d in world["laws"].items():
        line = re.search(rf"^  {form}\s+(\d+)\s+[\d.]+ s\s+([\d.]+)% /\s+([\d.]+)%.*\s([\d.e+-]+)$", text, re.M)
        assert line, form
        assert int(line.group(1)) == d["law"].n_params_
        assert float(line.group(2)) == pytest.approx(100 * d["error"].mean(), abs=6e-4)
        assert float(line.group(4)) == pytest.approx(d["regret"], rel=6e-3, abs=1e-12)


def test_extrapolation_errors_against_the_true_law(world):
    truth = world["truth"]
    X_test = world["X_test"]
    assert np.allclose(X_test[:, 0], demo.TARGET_SIZE)
    y_true = _camel_average(truth.params_, truth.reference_size_, demo.TARGET_SIZE, X_test[:, 1:])
    errors = {}
    for form, d in world["laws"].items():
        pred = d["law"].predict(X_test)
        # the recorded errors are those of the law against the planted closed form
        assert np.allclose(d["error"], np.abs(pred / world["y_test"] - 1), rtol=1e-12, atol=0)
        assert np.allclose(world["y_test"].mean(axis=1), y_true, rtol=1e-12, atol=0)
        errors[form] = float(np.mean(np.abs(pred / world["y_test"] - 1)))
    # CAMEL, the law the world was drawn from, extrapolates best; the others miss the size interaction
    assert errors["camel"] < 0.002
    for form in ("separable", "additive", "data_mixing"):
        assert errors["camel"] < errors[form] / 5, (form, errors)


def test_regret_is_recomputed_from_the_returned_mixture(world):
    truth = world["truth"]
    p, N0 = truth.params_, truth.reference_size_
    best = world["best"]
    # the true optimum: no better point among 1e5 Dirichlet mixtures, and its value is the closed form's
    R = np.random.default_rng(7).dirichlet(np.ones(5), 100_000)
    F = _camel_average(p, N0, demo.TARGET_SIZE, R)
    F_star = float(_camel_average(p, N0, demo.TARGET_SIZE, best.mixture)[0])
    assert F_star == pytest.approx(best.value, rel=1e-12)
    assert F_star <= F.min() + 1e-12
    for form, d in world["laws"].items():
        r = d["mixture"]
        assert r.shape == (5,) and np.all(r >= -1e-12) and abs(r.sum() - 1) < 1e-9
        regret = float(_camel_average(p, N0, demo.TARGET_SIZE, r)[0]) - F_star
        assert d["regret"] >= 0 and regret >= 0
        assert d["regret"] == pytest.approx(regret, rel=1e-9, abs=1e-14)
    # CAMEL's choice is nearly the optimum; the separable law, blind to the interaction, keeps the small-model mix
    assert world["laws"]["camel"]["regret"] < 1e-3 < world["laws"]["separable"]["regret"]
    assert np.abs(world["laws"]["camel"]["mixture"] - best.mixture).sum() < 0.1


def test_allocation_fits_the_budget(ran):
    alloc = ran[2]["allocation_table"]
    res = alloc["result"]
    cand = alloc["candidates"]
    cost = np.array([6 * 20 * s * s for s in cand])
    assert alloc["budget"] == pytest.approx(20 * sum(6 * 20 * s * s for s in demo.FIT_SIZES), rel=1e-12)
    spent = float(res.runs.sum(axis=1) @ cost)
    assert spent == pytest.approx(res.cost, rel=1e-12) and spent <= alloc["budget"] * (1 + 1e-12)
    assert np.array_equal(res.runs_per_size, res.runs.sum(axis=1))
    assert len(alloc["errors"]["allocate_budget"]) == len(alloc["errors"]["uniform"]) == 6
    assert np.all(np.isfinite(alloc["errors"]["allocate_budget"])) and np.all(alloc["errors"]["uniform"] >= 0)


def test_regmix_table_against_an_independent_baseline(ran):
    from numtk.datasets import load_regmix

    table = ran[2]["regmix_table"]
    rm = load_regmix()
    one, big = rm.blocks["1M"], rm.blocks["1B"]
    train = one.split == "train"
    # RegMix's linear regression by least squares (the weights sum to 1: no separate intercept)
    coef, *_ = np.linalg.lstsq(one.mixtures[train], one.losses[train, rm.target], rcond=None)
    rho = spearmanr(big.mixtures @ coef, big.losses[:, rm.target]).statistic
    assert table["RegMix linear (1M)"]["spearman"] == pytest.approx(rho, abs=1e-12)
    assert rho == pytest.approx(0.8789, abs=5e-4)  # as tests/mixture/test_real_data.py measured it
    for form in ("camel", "separable", "additive"):
        assert -1 <= table[form]["spearman"] <= 1 and table[form]["mae"] > 0
    assert re.search(rf"RegMix linear \(1M\)\s+{table['RegMix linear (1M)']['spearman']:.3f}", ran[1])


def test_the_figure_is_drawn(world, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "camel.png"
    demo.plot_world(world, str(path), sizes=np.geomspace(1e7, 1e10, 5))
    assert path.stat().st_size > 10_000 and path.read_bytes()[:4] == b"\x89PNG"
