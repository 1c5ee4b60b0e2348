"""Bad input to numtk.ftt is refused before any work, with a message naming the parameter."""

import numpy as np
import pytest

from numtk.ftt import FunctionalTT, interpolation_nodes, tt_cross


def _fitted():
    X = np.random.default_rng(0).uniform(-1, 1, size=(40, 2))
    return FunctionalTT(degree=3, sweeps=2, rng=0).fit(X, X[:, 0] * X[:, 1])


@pytest.mark.parametrize("method", ["predict", "gradient", "laplacian"])
def test_huge_workers_at_evaluation_is_refused(method):
    f = _fitted().set_params(workers=4096)
    with pytest.raises(ValueError, match="`workers`"):
        getattr(f, method)(np.zeros((3, 2)))


def test_from_cores_validates_workers():
    with pytest.raises(ValueError, match="`workers`"):
        FunctionalTT.from_cores([np.ones((1, 3, 1))], "hermite", workers=4096)
    with pytest.raises(TypeError, match="`workers`"):
        FunctionalTT.from_cores([np.ones((1, 3, 1))], "hermite", workers="x")


def test_tt_cross_refuses_complex_function_values():
    with pytest.raises(TypeError, match="`f`"):
        tt_cross(lambda x: x[:, 0] + 1j, 2, degree=3, domain=[[-1, 1]] * 2, rng=0)


def test_tt_cross_refuses_bool_workers():
    with pytest.raises(TypeError, match="`workers`"):
        tt_cross(lambda x: x[:, 0], 2, degree=3, domain=[[-1, 1]] * 2, rng=0, workers=True)


@pytest.mark.parametrize("name", ["d", "max_rank", "sweeps", "kick"])
def test_tt_cross_huge_counts_are_refused_before_allocating(name):
    kw = {"d": 2, "degree": 3, "domain": None, "basis": "hermite"}
    kw[name] = 10**12
    d = kw.pop("d")
    with pytest.raises(ValueError, match=f"`{name}`"):
        tt_cross(lambda x: x[:, 0], d, **kw)


def test_tt_cross_nodes_beyond_float_range_are_refused():
    with pytest.raises(ValueError, match="`loc` and `scale`"):
        tt_cross(lambda x: x[:, 0], 1, basis="hermite", degree=4, scale=1e308)
    with pytest.raises(ValueError, match="`loc` and `scale`"):
        tt_cross(lambda x: x[:, 0], 1, basis="hermite", degree=4, loc=1e308)


def test_interpolation_nodes_domain_must_be_numeric():
    with pytest.raises(TypeError, match="`domain`"):
        interpolation_nodes("legendre", 4, ["a", "b"])
    with pytest.raises(TypeError, match="`domain`"):
        interpolation_nodes("legendre", 4, (1 + 1j, 2))


def test_huge_ranks_and_sweeps_are_refused():
    X = np.zeros((30, 2))
    with pytest.raises(ValueError, match="`ranks`"):
        FunctionalTT(ranks=10**12).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="`sweeps`"):
        FunctionalTT(sweeps=2**63).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="`max_rank`"):
        _fitted().round(max_rank=0)


def test_round_takes_any_rank_cap():
    # round only truncates: a cap above the train's ranks (sums of trains add ranks) keeps them
    f = _fitted()
    g = (f + f).round(max_rank=2**63)
    X = np.random.default_rng(0).uniform(-1, 1, (50, f.n_features_in_))
    np.testing.assert_allclose(g.predict(X), 2 * f.predict(X), rtol=1e-10, atol=1e-12)


def test_overflowing_evaluation_is_refused_not_returned_as_nan():
    f = _fitted()
    with pytest.raises(ValueError, match="`X`"):
        f.predict(np.full((2, 2), 1e308))
    with pytest.raises(ValueError, match="`X`"):
        f.gradient(np.full((2, 2), 1e308))
    # overflow='keep' hands the overflowing rows back (a sampler's fallback), the others unchanged
    X = np.array([[1e308, 1e308], [0.1, -0.2]])
    v, g = f.evaluate(X, gradient=True, overflow="keep")
    assert not np.all(np.isfinite(v[0])) or not np.all(np.isfinite(g[0]))
    np.testing.assert_allclose(v[1:], f.predict(X[1:]), rtol=1e-14)
    np.testing.assert_allclose(g[1:], f.gradient(X[1:]), rtol=1e-14)
    with pytest.raises(ValueError, match="`overflow`"):
        f.evaluate(X, overflow="ignore")
