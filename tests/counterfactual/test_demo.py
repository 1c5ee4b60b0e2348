"""The counterfactual demonstration and its protocol helper ``evaluate_group_maps``.

Oracles: exact training validity of every fitted map (the validity polish), isometry of the
translation, the bi-Lipschitz range [1/K, K] of every fitted map, the closed form of the
translation's held-out validity (a new point x is valid iff s(x) >= min_i s(x_i) over the fitting
members, spec section 3.1), and the cost ordering of spec section 8, oracle 4.
"""

import inspect
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.counterfactual._common import threshold
from numtk.counterfactual._demo import evaluate_group_maps, protocol_split, run, synthetic_2d

TAU = threshold(0.8)


def _rejected_group(n_members=43, n_features=4, seed=0):
    """A group of members the classifier rejects (all below the threshold), in a fixed order."""
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(n_samples=400, n_features=n_features, n_informative=3, n_redundant=0,
                               random_state=seed)
    clf = LogisticRegression().fit(X, y)
    s = X @ clf.coef_[0] + clf.intercept_[0]
    return X[s < 0][:n_members], clf


def _folds(n, k=10):
    """Contiguous folds of n // k members, the last one taking the rest (written independently)."""
    k = min(k, n)
    size = n // k
    bounds = [(f * size, n if f == k - 1 else (f + 1) * size) for f in range(k)]
    return [(np.r_[0:a, b:n], np.arange(a, b)) for a, b in bounds]


def _by_method(rows):
    return {(r.method, r.distortion): r for r in rows}


@pytest.fixture(scope="module")
def protocol():
    pytest.importorskip("sklearn")
    pytest.importorskip("cvxpy")
    X, clf = _rejected_group()
    rows = evaluate_group_maps(X, clf, families=("translation", "diagonal", "psd", "gaussian_ot"),
                               distortions=(1.5, 2.0), n_folds=10, baselines=("wachter",))
    return X, clf, rows


def test_rows_cover_every_family_and_k(protocol):
    X, _, rows = protocol
    keys = [(r.method, r.distortion) for r in rows]
    assert keys == [("translation", None), ("diagonal", 1.5), ("diagonal", 2.0), ("psd", 1.5), ("psd", 2.0),
                    ("gaussian_ot", 1.5), ("gaussian_ot", 2.0), ("wachter", None)]
    for r in rows:
        assert r.n == X.shape[0] == 43
        assert r.n_folds == (0 if r.method == "wachter" else 10)


def test_training_validity_is_exact_for_every_family(protocol):
    _, _, rows = protocol
    for r in rows:
        assert r.group_validity == 1.0, (r.method, r.distortion)
        if r.method != "wachter":
            assert r.fit_validity == 1.0, (r.method, r.distortion)
            assert 0.0 <= r.heldout_validity <= 1.0


def test_translation_is_an_isometry(protocol):
    _, _, rows = protocol
    r = _by_method(rows)[("translation", None)]
    for field in ("min_ratio_train", "max_ratio_train", "min_ratio_test", "max_ratio_test", "min_ratio",
                  "max_ratio"):
        assert_allclose(getattr(r, field), 1.0, rtol=0, atol=1e-12, err_msg=field)


def test_ratios_lie_in_the_bilipschitz_range(protocol):
    _, _, rows = protocol
    for r in rows:
        if r.distortion is None:
            continue
        K = r.distortion
        lo, hi = 1 / K - 1e-9, K + 1e-9
        for a, b in (("min_ratio_train", "max_ratio_train"), ("min_ratio_test", "max_ratio_test"),
                     ("min_ratio", "max_ratio")):
            assert lo <= getattr(r, a) <= getattr(r, b) <= hi, (r.method, K, a, b)


def test_translation_heldout_validity_matches_the_closed_form(protocol):
    X, clf, rows = protocol
    s = X @ clf.coef_[0] + clf.intercept_[0]
    assert s.max() < TAU  # every member needs recourse, so c* != 0 on every fold
    expected = np.mean([np.mean(s[test] >= s[train].min()) for train, test in _folds(len(s))])
    assert _by_method(rows)[("translation", None)].heldout_validity == expected
    assert expected < 1.0  # the folds are not trivially inside the hull


def test_costs_are_ordered_and_wachter_is_a_lower_bound(protocol):
    _, _, rows = protocol
    cost = {k: r.group_cost for k, r in _by_method(rows).items()}
    rel = 1 + 1e-6
    for K in (1.5, 2.0):
        assert cost[("wachter", None)] <= cost[("psd", K)] * rel
        assert cost[("psd", K)] <= cost[("diagonal", K)] * rel
        assert cost[("diagonal", K)] <= cost[("translation", None)] * rel
    assert cost[("diagonal", 2.0)] <= cost[("diagonal", 1.5)] * rel


def test_wachter_row_is_the_whole_group():
    pytest.importorskip("sklearn")
    from numtk.counterfactual._baselines import wachter_counterfactuals
    from numtk.counterfactual._metrics import transport_cost

    X, clf = _rejected_group(20)
    (r,) = evaluate_group_maps(X, clf, families=(), baselines=("wachter",))
    w, b = clf.coef_[0], clf.intercept_[0]
    x_cf = X + np.maximum(0, TAU - (X @ w + b))[:, None] * w / (w @ w)  # the closed form
    assert_allclose(wachter_counterfactuals(X, w, b).x_cf, x_cf, rtol=1e-12, atol=1e-12)
    assert_allclose(r.group_cost, np.sum((x_cf - X) ** 2), rtol=1e-10)
    assert_allclose(r.cost_train, transport_cost(X, x_cf), rtol=1e-10)
    assert r.group_validity == 1.0 and np.isnan(r.heldout_validity) and r.n_folds == 0


def test_small_groups_and_no_cross_validation():
    pytest.importorskip("sklearn")
    X, clf = _rejected_group(3)
    (r,) = evaluate_group_maps(X, clf, families=("diagonal",), distortions=(2.0,), baselines=())
    assert r.n_folds == 3  # leave-one-out: one fold per member
    assert r.fit_validity == 1.0 and np.isnan(r.min_ratio_test)  # one held-out point: no pair
    (r,) = evaluate_group_maps(X[:1], clf, families=("translation",), baselines=())
    assert r.n_folds == 0 and np.isnan(r.fit_validity) and r.group_validity == 1.0
    (r,) = evaluate_group_maps(X, clf, families=("translation",), n_folds=None, baselines=())
    assert r.n_folds == 0 and np.isnan(r.heldout_validity) and np.isnan(r.cost_test)
    assert r.group_validity == 1.0


def test_gaussian_families_skip_single_member_fits():
    # the covariance (ddof 1) needs two members: leave-one-out on two members has no usable fold
    pytest.importorskip("sklearn")
    pytest.importorskip("cvxpy")
    X, clf = _rejected_group(3)
    (r,) = evaluate_group_maps(X[:2], clf, families=("gaussian_ot",), distortions=(2.0,), baselines=())
    assert r.n_folds == 0 and np.isnan(r.fit_validity) and r.group_validity == 1.0
    (r,) = evaluate_group_maps(X, clf, families=("gaussian_ot",), distortions=(2.0,), baselines=())
    assert r.n_folds == 3 and r.fit_validity == 1.0
    (r,) = evaluate_group_maps(X[:1], clf, families=("gaussian_ot",), distortions=(2.0,), baselines=())
    assert np.isnan(r.group_cost) and np.isnan(r.group_validity)


def test_bad_options_are_refused():
    X, clf = np.zeros((4, 2)), (np.array([1.0, 0.0]), 0.0)
    with pytest.raises(ValueError, match="families"):
        evaluate_group_maps(X, clf, families=("affine",))
    with pytest.raises(ValueError, match="n_folds"):
        evaluate_group_maps(X, clf, n_folds=1)
    with pytest.raises(ValueError, match="baselines"):
        evaluate_group_maps(X, clf, baselines=("dice",))


def test_missing_baselines_are_left_out(monkeypatch):
    # a baseline module that fails to import drops its rows; the maps are still evaluated
    X, clf = _rejected_group(12)
    monkeypatch.setitem(sys.modules, "numtk.counterfactual._baselines", None)
    monkeypatch.setitem(sys.modules, "numtk.counterfactual._distance_preserving", None)
    rows = evaluate_group_maps(X, clf, families=("translation",), max_dp_size=20)
    assert [r.method for r in rows] == ["translation"]


def test_distance_preserving_row_on_a_small_group():
    pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    X, y = synthetic_2d()
    clf = LogisticRegression().fit(X, y)
    G = X[y == 0][:5]
    rows = _by_method(evaluate_group_maps(G, clf, families=("diagonal",), distortions=(2.0,), rng=0,
                                          max_dp_size=5))
    dp, wachter = rows[("distance_preserving", 2.0)], rows[("wachter", None)]
    assert dp.group_validity == 1.0
    assert dp.lower_bound <= dp.group_cost * (1 + 1e-9)
    assert wachter.group_cost <= dp.group_cost * (1 + 1e-9)
    assert dp.group_cost <= rows[("diagonal", 2.0)].group_cost * (1 + 1e-6)  # a diagonal map is feasible
    assert 1 / 2 * (1 - 1e-6) <= dp.min_ratio <= dp.max_ratio <= 2 * (1 + 1e-6)


def test_docstring_examples():
    # a private module: tests/test_doctests.py collects only the public areas' modules
    import doctest

    import numtk.counterfactual._demo as demo

    pytest.importorskip("sklearn")
    result = doctest.testmod(demo, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_protocol_split_and_synthetic_2d():
    X, y = synthetic_2d(1000, rng=0)
    gen = np.random.default_rng(0)  # the definition: U[0, 1]^2, y = 1[x1 + x2 + N(0, 0.05^2) > 1]
    X0 = gen.uniform(size=(1000, 2))
    assert_array_equal(X, X0)
    assert_array_equal(y, (X0[:, 0] + X0[:, 1] + 0.05 * gen.standard_normal(1000) > 1).astype(int))
    X[:, 1] = 3.0  # a constant column stays finite (0 after centring)
    Xg, yg, Xt, yt = protocol_split(X, y)
    assert Xg.shape == (200, 2) and Xt.shape == (800, 2)
    Z = np.vstack([Xg, Xt])
    assert_allclose(Z.mean(0), 0, atol=1e-12)
    assert_allclose(Z.std(0), [1, 0], atol=1e-12)


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


# ------------------------------------------------------------------------------- reproduction

@pytest.mark.slow
def test_breast_cancer_protocol_reproduction():
    """Spec section 9 on breast cancer: the rejected class's KMeans groups, K in (1.01, 1.5, 2, 5).

    The cross-validated protocol for the QP families (100 % validity of the fitted members in every
    fold), one whole-group fit per family for the ordering
    cost(Wachter) <= cost(psd, K) <= cost(diagonal, K) <= cost(translation) on every group.
    """
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    pytest.importorskip("cvxpy")
    from sklearn.linear_model import LogisticRegression

    from numtk.counterfactual import make_groups

    X, y = sklearn_datasets.load_breast_cancer(return_X_y=True)
    Xg, yg, Xt, yt = protocol_split(X, y)
    clf = LogisticRegression(max_iter=10_000).fit(Xt, yt)
    groups = make_groups(Xg, yg, n_clusters=3, rng=0, labels=[0]).groups
    assert len(groups) == 3 and all(len(g) >= 2 for g in groups)
    Ks = (1.01, 1.5, 2.0, 5.0)
    rel = 1 + 1e-6
    for g in groups:
        cv = evaluate_group_maps(Xg[g], clf, families=("translation", "diagonal"), distortions=Ks, target=1,
                                 baselines=())
        for r in cv:
            assert r.fit_validity == 1.0 and r.group_validity == 1.0, (len(g), r.method, r.distortion)
            assert np.isfinite(r.heldout_validity)
        whole = _by_method(evaluate_group_maps(Xg[g], clf, families=("translation", "diagonal", "psd"),
                                               distortions=Ks, n_folds=None, target=1, baselines=("wachter",)))
        assert all(r.group_validity == 1.0 for r in whole.values())
        cost = {k: r.group_cost for k, r in whole.items()}
        for K in Ks:
            assert cost[("wachter", None)] <= cost[("psd", K)] * rel, (len(g), K)
            assert cost[("psd", K)] <= cost[("diagonal", K)] * rel, (len(g), K)
            assert cost[("diagonal", K)] <= cost[("translation", None)] * rel, (len(g), K)
