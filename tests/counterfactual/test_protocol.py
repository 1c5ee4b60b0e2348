"""The paper's protocol as library functions: evaluate_group_maps, protocol_split, synthetic_2d and
the catalogue protocol_problems.

Oracles: exact training validity of every fitted map (the validity polish), isometry of the
translation, the bi-Lipschitz range [1/K, K] of every fitted map, the closed form of the
translation's held-out validity (a new point x is valid iff s(x) >= min_i s(x_i) over the fitting
members, spec section 3.1), the cost ordering of spec section 8, oracle 4, the fold averages
recomputed by a loop written out here (NumPy metrics and brute-force pair ratios), and the
protocol's split written out in tests/reference.
"""

import inspect
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.counterfactual import (
    GroupCounterfactualMap,
    evaluate_group_maps,
    make_groups,
    protocol_problems,
    protocol_split,
    synthetic_2d,
)
from reference.counterfactual import logit, pair_ratios, zscore_shuffle_split

TAU = logit(0.8)


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
    from numtk.counterfactual import transport_cost, wachter_counterfactuals

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


def test_protocol_split_matches_the_reference():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(57, 4)) * [1.0, 1e-3, 1e3, 0.0] + [0.0, 5.0, -2.0, 7.0]  # a constant column
    y = np.array(["a", "b", "c"])[rng.integers(0, 3, 57)]
    for seed, fraction in ((0, 0.2), (7, 0.5), (11, 0.9)):
        got = protocol_split(X, y, group_fraction=fraction, rng=seed)
        ref = zscore_shuffle_split(X, y, seed, fraction)
        for a, b in zip(got, ref):
            if a.dtype.kind == "f":
                assert_allclose(a, b, rtol=1e-12, atol=1e-12)
            else:
                assert_array_equal(a, b)
    # a Generator is used as it is; the same seed gives the same split
    a = protocol_split(X, y, rng=np.random.default_rng(5))
    b = protocol_split(X, y, rng=5)
    for u, v in zip(a, b):
        assert_array_equal(u, v)


def test_protocol_split_refuses_empty_parts_and_bad_labels():
    X, y = synthetic_2d(10)
    with pytest.raises(ValueError, match="group_fraction"):
        protocol_split(X, y, group_fraction=0.05)      # int(0.5) = 0 rows for the groups
    with pytest.raises(ValueError, match="group_fraction"):
        protocol_split(X[:1], y[:1])
    with pytest.raises(ValueError, match="`y`"):
        protocol_split(X, y[:9])
    with pytest.raises(ValueError, match="`y`"):
        protocol_split(X, np.r_[y[:9], np.nan])


def test_rng_is_keyword_only():
    X, y = synthetic_2d(40)
    for func, args in ((synthetic_2d, (40, 0)), (protocol_split, (X, y, 0.2, 0)),
                       (make_groups, (X, y, 2, 10, 0)),
                       (evaluate_group_maps, (X, (np.ones(2), -1.0), ("translation",)))):
        assert inspect.signature(func).parameters["rng"].kind is inspect.Parameter.KEYWORD_ONLY
        with pytest.raises(TypeError):
            func(*args)


def test_fold_averages_match_a_loop_written_out():
    # the protocol's bookkeeping recomputed: contiguous folds, one map per fold, NumPy metrics,
    # brute-force pair ratios, plain means over the folds
    X, clf = _rejected_group(23)
    w, b = clf.coef_[0], clf.intercept_[0]
    (row,) = evaluate_group_maps(X, clf, families=("diagonal",), distortions=(1.5,), n_folds=4,
                                 baselines=())
    acc = {k: [] for k in ("fit", "held", "ctr", "cte", "lotr", "hitr", "lote", "hite")}
    for train, test in _folds(len(X), 4):
        m = GroupCounterfactualMap("diagonal", 1.5).fit(X[train], clf)
        Ttr, Tte = m.transform(X[train]), m.transform(X[test])
        acc["fit"].append(np.mean(Ttr @ w + b >= TAU))
        acc["held"].append(np.mean(Tte @ w + b >= TAU))
        acc["ctr"].append(np.mean(np.linalg.norm(Ttr - X[train], axis=1)))
        acc["cte"].append(np.mean(np.linalg.norm(Tte - X[test], axis=1)))
        rtr, rte = pair_ratios(X[train], Ttr), pair_ratios(X[test], Tte)
        acc["lotr"].append(rtr.min())
        acc["hitr"].append(rtr.max())
        acc["lote"].append(rte.min())
        acc["hite"].append(rte.max())
    assert row.n_folds == 4 and row.n == 23
    for field, key in (("fit_validity", "fit"), ("heldout_validity", "held"), ("cost_train", "ctr"),
                       ("cost_test", "cte"), ("min_ratio_train", "lotr"), ("max_ratio_train", "hitr"),
                       ("min_ratio_test", "lote"), ("max_ratio_test", "hite")):
        assert_allclose(getattr(row, field), np.mean(acc[key]), rtol=1e-9, err_msg=field)
    whole = GroupCounterfactualMap("diagonal", 1.5).fit(X, clf)
    T = whole.transform(X)
    assert_allclose(row.group_cost, np.sum((T - X) ** 2), rtol=1e-9)
    r = pair_ratios(X, T)
    assert_allclose(row.min_ratio, min(r.min(), *acc["lotr"], *acc["lote"]), rtol=1e-9)
    assert_allclose(row.max_ratio, max(r.max(), *acc["hitr"], *acc["hite"]), rtol=1e-9)


def test_every_row_has_one_schema():
    X, y = synthetic_2d()
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression().fit(X, y)
    rows = evaluate_group_maps(X[y == 0][:6], clf, families=("translation", "diagonal"), distortions=(2.0,),
                               rng=0, max_dp_size=6)
    assert [r.method for r in rows] == ["translation", "diagonal", "wachter", "distance_preserving"]
    keys = [list(r.keys()) for r in rows]
    assert all(k == keys[0] for k in keys)
    assert np.isnan(rows[0].lower_bound) and np.isnan(rows[2].gap)
    assert rows[3].lower_bound <= rows[3].group_cost * (1 + 1e-9)


def test_names_distortions_and_counts_are_validated():
    X, clf = np.zeros((4, 2)), (np.array([1.0, 0.0]), 0.0)
    (r,) = evaluate_group_maps(X, clf, families="diagonal", distortions=2.0, baselines=())  # one name, one K
    assert (r.method, r.distortion) == ("diagonal", 2.0)
    with pytest.raises(TypeError, match="families"):
        evaluate_group_maps(X, clf, families=3)
    with pytest.raises(ValueError, match="distortions"):
        evaluate_group_maps(X, clf, distortions=(0.5,))
    with pytest.raises(ValueError, match="n_folds"):
        evaluate_group_maps(X, clf, n_folds=2**40)
    with pytest.raises(ValueError, match="max_dp_size"):
        evaluate_group_maps(X, clf, max_dp_size=-1)
    with pytest.raises(ValueError, match="immutable"):
        evaluate_group_maps(X, clf, families=(), baselines=(), immutable=[5])
    with pytest.raises(ValueError, match="X_group"):
        evaluate_group_maps(np.zeros((4, 3)), clf)


# ------------------------------------------------------------------------------- the catalogue

def test_synthetic_problem_is_the_protocol_written_out():
    from sklearn.linear_model import LogisticRegression

    res = protocol_problems(datasets=("synthetic_2d",))
    (p,) = res.problems
    X, y = synthetic_2d(1000, rng=0)
    Xg, yg, Xt, yt = zscore_shuffle_split(X, y, 0, 0.2)
    assert_allclose(p.X, Xg, rtol=1e-12, atol=1e-12)
    assert_array_equal(p.y, yg)
    assert p.n_train == 800
    ref = LogisticRegression(max_iter=10_000).fit(Xt, yt)
    assert_allclose(p.classifier.coef_, ref.coef_, rtol=1e-6)
    assert p.accuracy == ref.score(Xg, yg)
    groups = make_groups(p.X, p.y, n_clusters=1, max_size=200, rng=0, labels=[0]).groups
    assert len(p.groups) == 1 and np.array_equal(p.groups[0], groups[0])
    assert p.targets == [1] and p.max_dp_size == 0 and p.distortions == (1.5, 2.0)
    full = protocol_problems(quick=False, datasets="synthetic_2d").problems[0]
    assert len(full.groups) == 6 and full.max_dp_size == 10
    assert full.targets == [1 if p.y[g[0]] == 0 else 0 for g in full.groups]
    assert all(np.all(full.y[g] == full.y[g[0]]) and g.size >= 2 for g in full.groups)


def test_adult_problem_fixes_the_documented_columns():
    from numtk.datasets import load_adult

    (p,) = protocol_problems(datasets="adult").problems
    names = [f for f in load_adult().feature_names if f != "fnlwgt"]
    assert p.X.shape == (600, len(names))                     # 20 % of 3000 rows
    fixed = [names[j] for j in p.immutable]
    assert "age" in fixed and not any(f.startswith(("education", "fnlwgt", "occupation")) for f in fixed)
    assert {f.split("=")[0] for f in fixed} == {"age", "sex", "race", "native-country"}
    assert p.families == ("translation", "diagonal") and set(p.targets) == {1}
    assert np.all(p.y[np.concatenate(p.groups)] == 0)


def test_catalogue_notes_what_is_left_out(monkeypatch):
    import numtk._lib._optional as optional
    import numtk.counterfactual._protocol as protocol
    import numtk.datasets

    def missing(*args, **kwargs):
        raise FileNotFoundError("no copy")

    monkeypatch.setattr(numtk.datasets, "load_compas", missing)
    real = optional.has_module
    monkeypatch.setattr(optional, "has_module", lambda name: False if name == "cvxpy" else real(name))
    # the default list, shortened (Adult and breast cancer take seconds): a missing COMPAS is a note
    monkeypatch.setattr(protocol, "_DATASETS", ("synthetic_2d", "compas"))
    res = protocol_problems()
    assert [p.name for p in res.problems] == ["synthetic_2d"]
    assert res.problems[0].families == ("translation", "diagonal")
    assert any("cvxpy" in note for note in res.notes) and any("compas" in note for note in res.notes)
    with pytest.raises(FileNotFoundError):
        protocol_problems(datasets=("compas",))
    with pytest.raises(ValueError, match="datasets"):
        protocol_problems(datasets=("mnist",))
    with pytest.raises(ValueError, match="datasets"):
        protocol_problems(datasets=())
    with pytest.raises(TypeError, match="quick"):
        protocol_problems(quick=1)


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
