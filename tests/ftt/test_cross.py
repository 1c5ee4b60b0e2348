"""tt_cross: ranks and accuracy on closed forms of known TT rank, nodes, maxvol, argument checks."""

import itertools

import numpy as np
import pytest

from numtk.ftt import FunctionalTT, interpolation_nodes, tt_cross
from numtk.ftt._basis import Basis1D, evaluate
from numtk.ftt._cross import _maxvol
from numtk.sampling import funnel


def _sum_of_cubics(X):
    # a sum of univariate cubics: rank 2, and in the span of every basis of degree >= 3
    return sum((k + 1) * X[:, k] ** 3 - X[:, k] + 0.5 * k for k in range(X.shape[1]))


def _rank3(X):
    # sin(x0) + x1 x2^2 + cos(x3): ranks (1, 2, 3, 2, 1) -- the middle bond separates {1, x1, sin x0}
    return np.sin(X[:, 0]) + X[:, 1] * X[:, 2] ** 2 + np.cos(X[:, 3])


@pytest.mark.parametrize("basis", ["legendre", "bspline", "hermite"])
def test_sum_of_univariates_reaches_rank_two_exactly(basis):
    d = 6
    dom = None if basis == "hermite" else [[-2.0, 2.0]] * d
    tt = tt_cross(_sum_of_cubics, d, basis=basis, degree=5, domain=dom, rng=0).tt
    assert tt.ranks_ == (1,) + (2,) * (d - 1) + (1,)
    X = np.random.default_rng(1).uniform(-2, 2, (500, d))
    y = _sum_of_cubics(X)
    assert np.max(np.abs(tt.predict(X) - y)) < 1e-10 * np.max(np.abs(y))


def test_rank_three_closed_form():
    tt = tt_cross(_rank3, 4, degree=24, domain=[[-1.0, 1.0]] * 4, rng=0).tt
    assert tt.ranks_ == (1, 2, 3, 2, 1)
    X = np.random.default_rng(2).uniform(-1, 1, (1000, 4))
    # degree 24 interpolates sin and cos on [-1, 1] to rounding
    assert np.max(np.abs(tt.predict(X) - _rank3(X))) < 1e-10


def test_product_has_rank_one():
    f = lambda X: np.prod(np.exp(0.3 * X) * (1 + X ** 2), axis=1)  # noqa: E731
    tt = tt_cross(f, 5, degree=30, domain=[[-1.0, 1.0]] * 5, rng=3).tt
    assert tt.ranks_ == (1,) * 6
    X = np.random.default_rng(4).uniform(-1, 1, (500, 5))
    assert np.max(np.abs(tt.predict(X) / f(X) - 1.0)) < 1e-10


def test_funnel_log_density_rank_two():
    # spec: the funnel log-density (x_0 first) has rank 2; b(x_0) = -e^{-x_0}/2 needs degree ~ 40 on [-9, 9]
    t = funnel(10)
    box = np.array([[-9.0, 9.0]] + [[-20.0, 20.0]] * 9)
    res = tt_cross(t.log_density, 10, degree=[48] + [2] * 9, domain=box, rng=0)
    tt = res.tt
    assert tt.ranks_ == (1,) + (2,) * 9 + (1,)
    S = np.clip(t.sample(2000, rng=1), box[:, 0], box[:, 1])
    assert np.max(np.abs(tt.predict(S) - t.log_density(S))) < 1e-6
    assert res.n_evals < 5000  # a few fibers, never the 49 * 3^9 grid


def test_interpolates_at_the_sampled_nodes_and_matches_fit_class():
    # a non-low-rank function at a capped rank: still a FunctionalTT with the requested bases
    f = lambda X: np.exp(-np.sum(X ** 2, axis=1)) + np.sin(X @ np.arange(1.0, 5.0))  # noqa: E731
    res = tt_cross(f, 4, basis="bspline", degree=9, domain=[[-1.0, 1.0]] * 4, max_rank=3, rng=0)
    tt = res.tt
    assert isinstance(tt, FunctionalTT)
    assert max(tt.ranks_) <= 3 and res.ranks == tt.ranks_
    assert [c.shape[1] for c in tt.cores_] == [10] * 4
    assert res.n_iter == len(res.history) >= 1


def test_history_counts_evaluations():
    calls = []

    def f(X):
        calls.append(len(X))
        return _sum_of_cubics(X)

    res = tt_cross(f, 3, degree=4, domain=[[-1.0, 1.0]] * 3, rng=0)
    assert res.history[-1]["n_evals"] == res.n_evals == sum(calls)


def test_workers_map_gives_the_same_train():
    a = tt_cross(_rank3, 4, degree=12, domain=[[-1.0, 1.0]] * 4, rng=5).tt
    b = tt_cross(_rank3, 4, degree=12, domain=[[-1.0, 1.0]] * 4, rng=5, workers=map).tt
    for ca, cb in zip(a.cores_, b.cores_):
        np.testing.assert_array_equal(ca, cb)


def test_one_dimension():
    tt = tt_cross(lambda X: np.cos(3 * X[:, 0]), 1, degree=30, domain=[[0.0, 2.0]]).tt
    x = np.linspace(0, 2, 50)[:, None]
    np.testing.assert_allclose(tt.predict(x), np.cos(3 * x[:, 0]), atol=1e-10)


@pytest.mark.parametrize("kind,p0,p1", [("legendre", -1.0, 3.0), ("bspline", -2.0, 2.0), ("hermite", 1.0, 2.0)])
@pytest.mark.parametrize("n", [1, 2, 4, 17])
def test_interpolation_nodes_give_nonsingular_collocation(kind, p0, p1, n):
    if kind == "bspline" and n < 4:
        return  # cubic B-splines need at least four functions
    b = Basis1D(kind, n, p0, p1)
    x = (interpolation_nodes(kind, n - 1, loc=p0, scale=p1) if kind == "hermite"
         else interpolation_nodes(kind, n - 1, (p0, p1)))
    assert x.shape == (n,) and np.all(np.diff(x) > 0) if n > 1 else x.shape == (1,)
    if kind != "hermite":
        assert x[0] >= p0 and x[-1] <= p1
    V = evaluate(b, x)[0]
    assert np.linalg.cond(V) < 1e6


def test_interpolation_nodes_closed_forms_and_errors():
    np.testing.assert_allclose(interpolation_nodes("legendre", 2, (0.0, 2.0)), [0.0, 1.0, 2.0])
    # Gauss-Hermite (probabilists'): the roots of He_3 = x^3 - 3x, mapped by loc + scale * t
    np.testing.assert_allclose(interpolation_nodes("hermite", 2, loc=1.0, scale=2.0),
                               1.0 + 2.0 * np.array([-np.sqrt(3.0), 0.0, np.sqrt(3.0)]), atol=1e-14)
    # Greville abscissae (t_{i+1} + t_{i+2} + t_{i+3}) / 3 of the clamped cubic knots 0, 0, 0, 0, 1, 2, 3, 3, 3, 3
    np.testing.assert_allclose(interpolation_nodes("bspline", 5, (0.0, 3.0)), [0, 1 / 3, 1, 2, 8 / 3, 3])
    with pytest.raises(ValueError, match="domain"):
        interpolation_nodes("legendre", 4)
    with pytest.raises(ValueError, match="domain"):
        interpolation_nodes("legendre", 4, (0.0, 1.0, 2.0))
    with pytest.raises(ValueError, match="degree"):
        interpolation_nodes("bspline", 2, (0.0, 1.0))


def test_maxvol_dominance_and_brute_force():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 4))
    idx = _maxvol(A)
    assert len(set(idx.tolist())) == 4
    B = np.linalg.solve(A[idx].T, A.T).T
    assert np.max(np.abs(B)) <= 1.05 + 1e-12
    # the chosen volume is within the local-maxvol bound of the best of all C(12, 3) choices
    A = rng.standard_normal((12, 3))
    best = max(abs(np.linalg.det(A[list(c)])) for c in itertools.combinations(range(12), 3))
    got = abs(np.linalg.det(A[_maxvol(A)]))
    assert got >= best / (1.05 ** 3 * 3 ** 1.5)
    # rank one: the entry of largest modulus
    a = rng.standard_normal((30, 1))
    assert _maxvol(a)[0] == np.argmax(np.abs(a[:, 0]))


def test_bad_input():
    dom = [[-1.0, 1.0]] * 3
    with pytest.raises(TypeError, match="`f`"):
        tt_cross(np.ones(3), 3, domain=dom)
    with pytest.raises(ValueError, match="shape"):
        tt_cross(lambda X: X, 3, domain=dom)
    with pytest.raises(ValueError, match="non-finite"):
        tt_cross(lambda X: np.full(len(X), np.nan), 3, domain=dom)
    with pytest.raises(ValueError, match="domain"):
        tt_cross(_sum_of_cubics, 3)
    with pytest.raises(ValueError, match="max_rank"):
        tt_cross(_sum_of_cubics, 3, domain=dom, max_rank=0)
    with pytest.raises(ValueError, match="`d`"):
        tt_cross(_sum_of_cubics, 0, domain=dom)
    with pytest.raises(ValueError, match="degree"):
        tt_cross(_sum_of_cubics, 3, basis="bspline", degree=2, domain=dom)
    with pytest.raises(ValueError, match="tol"):
        tt_cross(_sum_of_cubics, 3, domain=dom, tol=-1.0)


def test_result_schema_status_and_callback():
    dom = [[-1.0, 1.0]] * 4
    res = tt_cross(_rank3, 4, degree=12, domain=dom, rng=0)
    assert set(res.keys()) == {"tt", "n_iter", "success", "status", "message", "ranks", "error", "n_evals",
                               "history"}
    assert res.success and res.status == "converged" and res.error <= 1e-8
    assert res.error == res.history[-1]["test_error"] and res.ranks == res.tt.ranks_
    # the sweep budget spent: not a success (the rank-3 function needs a second sweep to confirm the first)
    one = tt_cross(_rank3, 4, degree=12, domain=dom, rng=0, sweeps=1, tol=0.0)
    assert one.n_iter == 1 and one.status == "max_iterations" and not one.success and one.message
    # callback(intermediate_result): the current interpolant each sweep; StopIteration ends the run normally
    seen = []

    def callback(intermediate_result):
        r = intermediate_result
        seen.append(r.n_iter)
        X = np.random.default_rng(r.n_iter).uniform(-1, 1, (20, 4))
        # the intermediate interpolant is the train the history describes (its error at random points too)
        assert r.tt.ranks_ == r.ranks and r.n_evals > 0
        assert np.sqrt(np.mean((r.tt.predict(X) - _rank3(X)) ** 2)) < 1e-6
        raise StopIteration

    stopped = tt_cross(_rank3, 4, degree=12, domain=dom, rng=0, tol=0.0, callback=callback)
    assert seen == [1] and stopped.n_iter == 1 and stopped.status == "callback" and not stopped.success
    assert "callback" in stopped.message
    np.testing.assert_array_equal(stopped.tt.cores_[0], one.tt.cores_[0])
    with pytest.raises(TypeError, match="`callback`"):
        tt_cross(_rank3, 4, degree=4, domain=dom, callback=3)
