import numpy as np
import pytest

from numtk.counterfactual import GroupCounterfactualMap, InfeasibleRecourseError
from numtk.counterfactual._counterfactual_ext import diag_qp
from reference.counterfactual import TIGHT, diag_qp_kkt, logit, pair_ratios, unreduced_affine

TAU = logit(0.8)


def make_problem(n=40, d=5, seed=0, offset=-2.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0, d)
    w = rng.normal(size=d)
    b = offset - float(np.max(X @ w))  # every member starts invalid
    return X, w, b


def fit(family, X, w, b, **kw):
    return GroupCounterfactualMap(family, **kw).fit(X, (w, b))


def scores(m, X):
    return m.transform(X) @ m.w_ + m.b_


# ----------------------------------------------------------------------------- closed forms
def test_translation_closed_form():
    X, w, b = make_problem(seed=1)
    m = fit("translation", X, w, b)
    Mstar = TAU - b - np.min(X @ w)
    c = Mstar * w / (w @ w)
    np.testing.assert_allclose(m.c_, c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.A_, np.eye(5))
    assert m.cost_ == pytest.approx(len(X) * c @ c, rel=1e-12)
    assert m.problem_class_ == "QP" and m.status_ == "optimal"
    # held-out validity: a new x is valid iff s(x) >= min_i s_i (the map is a translation)
    rng = np.random.default_rng(2)
    Xn = rng.normal(size=(500, 5)) * 2
    s = X @ w + b
    expected = (Xn @ w + b >= s.min() - 1e-12).mean()
    assert m.score(Xn) == pytest.approx(expected, abs=2 / 500)
    r = pair_ratios(X, m.transform(X))
    np.testing.assert_allclose(r, 1.0, atol=1e-12)


def test_translation_bounded_matches_cvxpy():
    pytest.importorskip("cvxpy")
    X, w, b = make_problem(n=30, d=4, seed=3)
    lo = X.min(0) - 0.3
    hi = X.max(0) + np.array([0.1, 5.0, 0.05, np.inf])
    m = fit("translation", X, w, b, bounds=(lo, hi), immutable=[2])
    ref, status = unreduced_affine(X, w, b, TAU, "translation", 1.0, immutable=[2], bounds=(lo, hi))
    assert status == "optimal"
    assert m.cost_ == pytest.approx(ref, rel=1e-6)
    Z = m.transform(X)
    assert np.all(Z[:, [0, 1, 3]] >= lo[[0, 1, 3]] - 1e-9) and np.all(Z[:, [0, 1, 3]] <= hi[[0, 1, 3]] + 1e-9)
    np.testing.assert_array_equal(Z[:, 2], X[:, 2])
    assert np.all(scores(m, X) >= TAU)


# ----------------------------------------------------------------------------- native QP vs cvxpy
@pytest.mark.parametrize("n,d,K,seed", [(1, 3, 2.0, 0), (2, 2, 1.5, 1), (5, 10, 1.5, 2), (50, 10, 1.01, 3),
                                        (200, 20, 2.0, 4), (200, 20, 5.0, 5), (60, 8, 1e6, 6)])
def test_diagonal_matches_unreduced_cvxpy(n, d, K, seed):
    pytest.importorskip("cvxpy")
    X, w, b = make_problem(n, d, seed)
    m = fit("diagonal", X, w, b, distortion=K)
    ref, status = unreduced_affine(X, w, b, TAU, "diagonal", K)
    assert status == "optimal"
    assert m.cost_ == pytest.approx(ref, rel=1e-6, abs=1e-9)
    assert np.all(scores(m, X) >= TAU)
    assert 1 / K - 1e-12 <= m.a_.min() and m.a_.max() <= K + 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_diagonal_immutable_bounds_weights_match_cvxpy(seed):
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(10 + seed)
    X, w, b = make_problem(30, 6, 10 + seed, offset=-0.5)
    lo = X.min(0) - rng.uniform(0.0, 1.0, 6)
    hi = X.max(0) + rng.uniform(0.5, 3.0, 6)
    hi[rng.integers(6)] = np.inf
    weights = rng.uniform(0.1, 2.0, 30)
    imm = [int(rng.integers(6))]
    m = fit("diagonal", X, w, b, distortion=1.7, immutable=imm, bounds=(lo, hi))
    m.fit(X, (w, b), sample_weight=weights)
    ref, status = unreduced_affine(X, w, b, TAU, "diagonal", 1.7, immutable=imm, bounds=(lo, hi), weights=weights)
    assert status == "optimal"
    assert m.cost_ == pytest.approx(ref, rel=1e-6)
    Z = m.transform(X)
    mut = np.setdiff1d(np.arange(6), imm)
    assert np.all(Z[:, mut] >= lo[mut] - 1e-8) and np.all(Z[:, mut] <= hi[mut] + 1e-8)
    np.testing.assert_array_equal(Z[:, imm], X[:, imm])
    assert np.all(scores(m, X) >= TAU)
    # routing the same reduced QP through cvxpy gives the same map
    m2 = fit("diagonal", X, w, b, distortion=1.7, immutable=imm, bounds=(lo, hi), solver="CLARABEL",
             solver_options=TIGHT).fit(X, (w, b), sample_weight=weights)
    np.testing.assert_allclose(m2.A_, m.A_, atol=1e-5)
    assert m2.cost_ == pytest.approx(m.cost_, rel=1e-6)


@pytest.mark.parametrize("n,d", [(25, 4), (5, 8), (2, 6)])
def test_psd_matches_unreduced_cvxpy(n, d):
    """n + 1 < d exercises the exact compression of U to span{x_i - xbar, w}."""
    pytest.importorskip("cvxpy")
    X, w, b = make_problem(n, d, 7)
    for K in (1.3, 3.0):
        m = fit("psd", X, w, b, distortion=K, solver_options=TIGHT)
        ref, status = unreduced_affine(X, w, b, TAU, "psd", K)
        assert status == "optimal"
        assert m.cost_ == pytest.approx(ref, rel=1e-5, abs=1e-8)
        assert m.problem_class_ == "SDP"
        sv = np.linalg.svd(m.A_, compute_uv=False)
        assert 1 / K - 1e-7 <= sv.min() and sv.max() <= K + 1e-7
        assert np.all(scores(m, X) >= TAU)


# ----------------------------------------------------------------------------- the kernel itself
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(6))
def test_diag_qp_kernel_kkt(dtype, seed):
    """The native solver's output is a KKT point (an optimality certificate: the QP is strictly convex)."""
    rng = np.random.default_rng(seed)
    n, f, t = int(rng.integers(1, 300)), int(rng.integers(1, 30)), int(rng.integers(1, 4))
    X = rng.normal(size=(n, 2 * f)).astype(dtype)[:, ::2]  # non-contiguous
    scale, centre, tail = rng.normal(size=f), rng.normal(size=f) * 0.1, rng.normal(size=t)
    m = rng.normal(size=n) + 1.0
    p = f + t
    h = rng.uniform(0.1, 3.0, p)
    K = float(rng.choice([1.01, 1.5, 3.0]))
    lo = np.r_[np.full(f, 1 / K - 1), np.full(t, -np.inf)]
    hi = np.r_[np.full(f, K - 1), np.full(t, np.inf)]
    ne = int(rng.integers(0, 4))
    E, e = rng.normal(size=(ne, p)), rng.normal(size=ne) - 3.0
    z, act, mult, it, status, passes = diag_qp(X, scale, centre, tail, m, E, e, h, lo, hi, 1e-12, 100000)
    assert status == 0
    stat, viol, umin, aslack = diag_qp_kkt(X.astype(np.float64), scale, centre, tail, m, E, e, h, lo, hi,
                                           z, act, mult)
    assert stat <= 1e-8 * max(1, np.abs(h * z).max())
    assert viol <= 1e-9 and umin >= 0 and aslack <= 1e-9
    assert len(set(act.tolist())) == len(act) <= p


def test_diag_qp_kernel_edge_cases():
    h = np.ones(2)
    none = np.zeros((0, 2))
    # empty group: z = 0
    z, act, mult, it, st, _ = diag_qp(np.zeros((0, 1)), np.ones(1), np.zeros(1), np.ones(1), np.zeros(0), none,
                                   np.zeros(0), h, np.full(2, -np.inf), np.full(2, np.inf), 1e-12, 10)
    assert st == 0 and np.all(z == 0) and act.size == 0
    # infeasible: z_0 >= 1 and z_0 <= 0.5
    z, act, mult, it, st, _ = diag_qp(np.ones((1, 1)), np.ones(1), np.zeros(1), np.zeros(1), np.ones(1), none,
                                   np.zeros(0), h, np.full(2, -np.inf), np.array([0.5, np.inf]), 1e-12, 100)
    assert st == 1
    with pytest.raises(ValueError, match="h"):
        diag_qp(np.ones((1, 1)), np.ones(1), np.zeros(1), np.zeros(1), np.ones(1), none, np.zeros(0),
                np.array([1.0, 0.0]), np.zeros(2), np.ones(2), 1e-12, 10)
    with pytest.raises(ValueError, match="scale"):
        diag_qp(np.ones((1, 2)), np.ones(1), np.zeros(1), np.zeros(1), np.ones(1), none, np.zeros(0),
                h, np.zeros(2), np.ones(2), 1e-12, 10)
    with pytest.raises(ValueError, match="float32 or float64"):
        diag_qp(np.ones((1, 1), dtype=np.int64), np.ones(1), np.zeros(1), np.zeros(1), np.ones(1), none,
                np.zeros(0), h, np.zeros(2), np.ones(2), 1e-12, 10)


# ----------------------------------------------------------------------------- structural oracles
def test_cost_ordering_and_monotone_in_K():
    pytest.importorskip("cvxpy")
    X, w, b = make_problem(30, 4, 11)
    wachter = np.sum(np.maximum(0, TAU - (X @ w + b)) ** 2) / (w @ w)
    tr = fit("translation", X, w, b).cost_
    prev_d = prev_p = np.inf
    for K in (1.01, 1.5, 2.0, 5.0):
        cd = fit("diagonal", X, w, b, distortion=K).cost_
        cp_ = fit("psd", X, w, b, distortion=K, solver_options=TIGHT).cost_
        assert wachter <= cp_ * (1 + 1e-7)
        assert cp_ <= cd * (1 + 1e-6)
        assert cd <= tr * (1 + 1e-12)
        assert cd <= prev_d * (1 + 1e-12) and cp_ <= prev_p * (1 + 1e-6)
        prev_d, prev_p = cd, cp_


def test_K_to_one_limit_and_saturation():
    X, w, b = make_problem(80, 6, 12)
    tr = fit("translation", X, w, b)
    one = fit("diagonal", X, w, b, distortion=1.0)
    np.testing.assert_allclose(one.A_, np.eye(6), atol=1e-15)
    np.testing.assert_allclose(one.c_, tr.c_, rtol=1e-9, atol=1e-12)
    eps = 1e-4
    near = fit("diagonal", X, w, b, distortion=1 + eps)
    assert np.max(np.abs(near.a_ - 1)) <= eps * (1 + 1e-9)
    assert near.cost_ <= tr.cost_ and near.cost_ == pytest.approx(tr.cost_, rel=1e-2)
    X, w, b = make_problem(80, 6, 2)  # a group whose K = 1e6 map lies inside the box
    big = fit("diagonal", X, w, b, distortion=1e6)
    Ksat = float(np.max(np.maximum(big.a_, 1 / big.a_)))
    assert Ksat < 100
    for K in (Ksat * 1.0001, Ksat * 1.5, 2 * Ksat):
        assert fit("diagonal", X, w, b, distortion=K).cost_ == pytest.approx(big.cost_, rel=1e-9)
    assert fit("diagonal", X, w, b, distortion=Ksat * 0.9).cost_ > big.cost_ * (1 + 1e-9)


@pytest.mark.parametrize("family", ["translation", "diagonal", "scale", "gaussian_commuting", "psd", "gaussian_ot"])
def test_distortion_and_convex_hull_generalisation(family):
    if family in ("psd", "gaussian_ot"):
        pytest.importorskip("cvxpy")
    X, w, b = make_problem(30, 4, 13)
    K = 1.5
    m = fit(family, X, w, b, distortion=K)
    rng = np.random.default_rng(0)
    Xn = rng.dirichlet(np.ones(len(X)), size=200) @ X
    assert np.all(scores(m, Xn) >= TAU - 1e-9)
    lo, hi = m.distortion_bounds_
    for P in (X, Xn[:40]):
        r = pair_ratios(P, m.transform(P))
        assert r.min() >= lo - 1e-9 and r.max() <= hi + 1e-9
        assert r.min() >= 1 / K - 1e-9 and r.max() <= K + 1e-9
    sv = np.linalg.svd(m.A_, compute_uv=False)
    assert sv.min() >= 1 / K - 1e-9 and sv.max() <= K + 1e-9


def test_bounded_hull_generalisation():
    X, w, b = make_problem(40, 5, 14, offset=-0.5)
    lo, hi = X.min(0) - 0.5, X.max(0) + 3.0
    m = fit("diagonal", X, w, b, distortion=2.0, bounds=(lo, hi))
    assert np.all(m.transform(X) <= hi + 1e-9) and np.all(m.transform(X) >= lo - 1e-9)
    rng = np.random.default_rng(1)
    Xn = rng.dirichlet(np.ones(len(X)), size=300) @ X
    Z = m.transform(Xn)
    assert np.all(Z >= lo - 1e-9) and np.all(Z <= hi + 1e-9)
    assert np.all(Z @ w + b >= TAU - 1e-9)


def test_equivariances():
    X, w, b = make_problem(40, 5, 15)
    base = fit("diagonal", X, w, b, distortion=2.0)
    rng = np.random.default_rng(3)
    perm = rng.permutation(40)
    np.testing.assert_allclose(fit("diagonal", X[perm], w, b, distortion=2.0).A_, base.A_, atol=1e-10)
    # coordinate permutation and sign flips: a unchanged (permuted), c_k -> -c_k
    cols = rng.permutation(5)
    sign = np.where(rng.random(5) < 0.5, -1.0, 1.0)
    m2 = fit("diagonal", X[:, cols] * sign, w[cols] * sign, b, distortion=2.0)
    np.testing.assert_allclose(m2.a_, base.a_[cols], atol=1e-9)
    np.testing.assert_allclose(m2.c_, base.c_[cols] * sign, atol=1e-8)
    # shift: same A, c -> c + (I - A) t, same cost; scale: same A, c -> lambda c, cost * lambda^2
    t = rng.normal(size=5)
    m3 = fit("diagonal", X + t, w, b - w @ t, distortion=2.0)
    np.testing.assert_allclose(m3.A_, base.A_, atol=1e-9)
    np.testing.assert_allclose(m3.c_, base.c_ + (np.eye(5) - base.A_) @ t, atol=1e-8)
    assert m3.cost_ == pytest.approx(base.cost_, rel=1e-9)
    m4 = fit("diagonal", 3.0 * X, w / 3.0, b, distortion=2.0)
    np.testing.assert_allclose(m4.A_, base.A_, atol=1e-9)
    assert m4.cost_ == pytest.approx(9 * base.cost_, rel=1e-9)
    # rotation: translation equivariant, A -> Q A Q^T
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    tr, trQ = fit("translation", X, w, b), fit("translation", X @ Q.T, Q @ w, b)
    np.testing.assert_allclose(trQ.c_, Q @ tr.c_, atol=1e-10)


def test_psd_rotation_equivariance():
    pytest.importorskip("cvxpy")
    X, w, b = make_problem(20, 3, 16)
    Q, _ = np.linalg.qr(np.random.default_rng(4).normal(size=(3, 3)))
    m = fit("psd", X, w, b, distortion=2.0, solver_options=TIGHT)
    mQ = fit("psd", X @ Q.T, Q @ w, b, distortion=2.0, solver_options=TIGHT)
    np.testing.assert_allclose(mQ.A_, Q @ m.A_ @ Q.T, atol=1e-5)
    assert mQ.cost_ == pytest.approx(m.cost_, rel=1e-6)


def test_gaussian_ot_against_psd_and_pot():
    pytest.importorskip("cvxpy")
    ot = pytest.importorskip("ot")
    X, w, b = make_problem(30, 4, 17)
    g0 = fit("gaussian_ot", X, w, b, distortion=2.0, covariance_ddof=0, covariance_ridge=0.0,
             solver_options=TIGHT)
    p = fit("psd", X, w, b, distortion=2.0, solver_options=TIGHT)
    np.testing.assert_allclose(g0.A_, p.A_, atol=1e-5)
    assert g0.cost_ == pytest.approx(p.cost_ / len(X), rel=1e-5)
    g = fit("gaussian_ot", X, w, b, distortion=2.0, solver_options=TIGHT)
    A, c = ot.gaussian.bures_wasserstein_mapping(g.mean_, g.target_mean_, g.covariance_, g.target_covariance_)
    np.testing.assert_allclose(A, g.A_, atol=1e-6)
    np.testing.assert_allclose(np.ravel(c), g.c_, atol=1e-6)
    W = ot.gaussian.bures_wasserstein_distance(g.mean_, g.target_mean_, g.covariance_, g.target_covariance_)
    assert float(W) ** 2 == pytest.approx(g.cost_, rel=1e-6)
    np.testing.assert_allclose(g.covariance_, np.cov(X.T) + 1e-6 * np.eye(4), rtol=1e-12)


def test_one_member_is_wachter_and_valid_group_is_identity():
    X, w, b = make_problem(1, 4, 18)
    wachter = X[0] + (TAU - (X[0] @ w + b)) * w / (w @ w)
    for family in ("translation", "diagonal", "scale", "gaussian_commuting"):
        np.testing.assert_allclose(fit(family, X, w, b).transform(X)[0], wachter, atol=1e-10)
    if pytest.importorskip("cvxpy"):
        for family in ("psd", "gaussian_ot"):
            np.testing.assert_allclose(fit(family, X, w, b).transform(X)[0], wachter, atol=1e-6)
    Xv, wv, bv = make_problem(10, 3, 19)
    m = fit("diagonal", Xv, wv, bv + 100.0)
    assert m.status_ == "trivial" and m.cost_ == 0.0
    np.testing.assert_array_equal(m.A_, np.eye(3))
    np.testing.assert_array_equal(m.c_, np.zeros(3))


def test_degenerate_data():
    X, w, b = make_problem(30, 5, 20)
    X[:, 2] = 1.5                      # constant feature: a_k = 1 (tie-break toward isometry)
    X[5] = X[6]                        # duplicated members
    w[4] = 0.0                         # a feature the classifier ignores is untouched
    m = fit("diagonal", X, w, b, distortion=3.0)
    assert m.a_[2] == 1.0 and m.a_[4] == 1.0 and m.c_[4] == 0.0
    assert np.all(scores(m, X) >= TAU)


def test_psd_minimum_norm_tie_break_is_reproducible():
    pytest.importorskip("cvxpy")
    X, w, b = make_problem(4, 8, 21)   # n <= d: C is singular
    m1 = fit("psd", X, w, b, distortion=2.0)
    m2 = fit("psd", X, w, b, distortion=2.0)
    np.testing.assert_array_equal(m1.A_, m2.A_)
    assert np.all(scores(m1, X) >= TAU)


def test_sklearn_model_target_flip_and_clone():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(n_samples=400, n_features=6, random_state=1)
    clf = LogisticRegression().fit(X, y)
    grp0 = X[clf.predict(X) == 1][:30]          # accepted members, moved to class 0
    m = GroupCounterfactualMap("diagonal", target=0).fit(grp0, clf)
    assert np.all(clf.predict_proba(m.transform(grp0))[:, 0] >= 0.8)
    c = clone(m)
    assert c.get_params() == m.get_params() and not hasattr(c, "A_")
    c.set_params(distortion=3.0)
    assert c.distortion == 3.0
    with pytest.raises(ValueError, match="invalid parameter"):
        c.set_params(bogus=1)
    assert "target=0" in repr(m)
    del sklearn


def test_input_validation():
    X, w, b = make_problem(10, 3, 22)
    with pytest.raises(ValueError, match="distortion"):
        fit("diagonal", X, w, b, distortion=0.5)
    with pytest.raises(ValueError, match="confidence"):
        fit("diagonal", X, w, b, confidence=1.0)
    with pytest.raises(ValueError, match="family"):
        fit("affine", X, w, b)
    with pytest.raises(ValueError, match="`X` has 2 features"):
        fit("diagonal", X[:, :2], w, b)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit("diagonal", Xn, w, b)
    with pytest.raises(ValueError, match="at least 1 row"):
        fit("diagonal", X[:0], w, b)
    with pytest.raises(ValueError, match="multiclass"):
        class Multi:
            coef_ = np.ones((3, 3))
            intercept_ = np.zeros(3)
            classes_ = np.arange(3)
        GroupCounterfactualMap().fit(X, Multi())
    with pytest.raises(ValueError, match="lo > hi"):
        fit("diagonal", X, w, b, bounds=(1.0, 0.0))
    with pytest.raises(ValueError, match="sample_weight"):
        GroupCounterfactualMap().fit(X, (w, b), sample_weight=-np.ones(10))
    with pytest.raises(ValueError, match="native"):
        fit("psd", X, w, b, solver="native")
    with pytest.raises(ValueError, match="gaussian_commuting"):
        fit("gaussian_commuting", X, w, b, bounds=(-10.0, 10.0))
    with pytest.raises(AttributeError, match="not fitted"):
        GroupCounterfactualMap().transform(X)
    m = fit("diagonal", X, w, b)
    with pytest.raises(ValueError, match="features"):
        m.transform(X[:, :2])
    assert m.transform(X[:0]).shape == (0, 3)


def test_infeasible_recourse():
    X, w, b = make_problem(10, 3, 23)
    # every feature immutable: nothing can change the score
    with pytest.raises(InfeasibleRecourseError, match="mutable"):
        fit("diagonal", X, w, b, immutable=[0, 1, 2])
    # a box in which even its best corner scores below tau: unreachable for every member
    lo, hi = X.min(0) - 1e-3, X.max(0) + 1e-3
    b = TAU - 1.0 - float(np.sum(np.maximum(w * lo, w * hi)))
    with pytest.raises(InfeasibleRecourseError) as exc:
        fit("diagonal", X, w, b, bounds=(lo, hi))
    np.testing.assert_array_equal(exc.value.rows, np.arange(10))
    with pytest.raises(InfeasibleRecourseError):
        fit("translation", X, w, b, bounds=(lo, hi))
    # reachable member by member, but not by one common translation (the group is wider than the box)
    X2 = np.array([[0.0, 0.0], [5.0, 0.0]])
    with pytest.raises(InfeasibleRecourseError, match="wider"):
        fit("translation", X2, np.array([0.0, 1.0]), 0.0, bounds=(-1.0, 3.0))
    assert issubclass(InfeasibleRecourseError, ValueError)


@pytest.mark.parametrize("family", ["diagonal", "psd"])
def test_fit_path_equals_separate_fits(family):
    if family == "psd":
        pytest.importorskip("cvxpy")
    X, w, b = make_problem(25, 4, 24)
    Ks = [1.0, 1.3, 2.0, 5.0]
    opts = dict(solver_options=TIGHT) if family == "psd" else {}
    path = GroupCounterfactualMap(family, **opts).fit_path(X, (w, b), Ks)
    assert [m.distortion for m in path] == Ks
    for K, m in zip(Ks, path):
        ref = fit(family, X, w, b, distortion=K, **opts)
        assert m.cost_ == pytest.approx(ref.cost_, rel=1e-6, abs=1e-9)
        np.testing.assert_allclose(m.A_, ref.A_, atol=1e-5)
        assert np.all(scores(m, X) >= TAU)
    with pytest.raises(ValueError, match="distortions"):
        GroupCounterfactualMap(family).fit_path(X, (w, b), [2.0, 0.5])


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (7, 5), (300, 40)])
def test_group_statistics_kernels(shape):
    from numtk.counterfactual._counterfactual_ext import scores as cscores, weighted_moments

    rng = np.random.default_rng(shape[0])
    X = rng.normal(size=(shape[0], 2 * shape[1]))[:, ::2]      # non-contiguous
    v = rng.normal(size=shape[1])
    np.testing.assert_allclose(cscores(X, v, 0.5), X @ v + 0.5, rtol=1e-12, atol=1e-12)
    out, m = cscores(X, v, 0.5, True)
    np.testing.assert_allclose(out, X @ v + 0.5, rtol=1e-12, atol=1e-12)
    assert m == (np.abs(X).max() if X.size else 0.0)
    p = rng.uniform(0.1, 2.0, shape[0])
    mean, scatter = weighted_moments(X, p)
    if shape[0]:
        ref_mean = p @ X / p.sum()
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(scatter, p @ (X - ref_mean) ** 2, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="length"):
        cscores(X, np.ones(shape[1] + 1), 0.0)


def test_validity_polish_survives_reevaluation():
    """Regression: a member on the active constraint must stay valid however its score is evaluated."""
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression

    from numtk.counterfactual import make_groups, protocol_split

    X, y = load_breast_cancer(return_X_y=True)
    Xg, yg, Xt, yt = protocol_split(X, y)
    clf = LogisticRegression(max_iter=10_000).fit(Xt, yt)
    for members in make_groups(Xg, yg, n_clusters=10, rng=0, labels=[0]).groups:
        for K in (1.5, 5.0):
            m = GroupCounterfactualMap("diagonal", K).fit(Xg[members], clf)
            assert m.predict_valid(Xg[members]).all()
            for i in members:
                assert m.predict_valid(Xg[[i]]).all()
            assert np.all(clf.decision_function(m.transform(Xg[members])) >= m.threshold_)


def test_pair_and_bounds_edge_inputs():
    X, w, b = make_problem(10, 3, 25)
    m1 = fit("diagonal", X, w, b)
    m2 = fit("diagonal", X, w, np.array(b))        # a 0-d array intercept
    np.testing.assert_array_equal(m1.A_, m2.A_)
    with pytest.raises(TypeError, match="b"):
        fit("diagonal", X, w, "1.0")
    with pytest.raises(ValueError, match="inf"):
        fit("diagonal", X, w, b, bounds=(np.inf, np.inf))
