"""Bad input to numtk.sampling is refused before any work, with a message naming the parameter."""

import re
import warnings

import numpy as np
import pytest

from numtk.sampling import (ExpTransform, HermiteOUSolution, ScoreBasedSampler, SinhTransform, Target, double_well,
                            funnel, gaussian, many_well, mmd, sinkhorn_distance, solve_hjb, time_grid, w2)

_TINY = dict(n_steps=5, degree=4, refine=0, n_paths=200, rng=0, options=dict(pilot_steps=5, refine_paths=50))


@pytest.fixture(scope="module")
def sampler():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ScoreBasedSampler(gaussian([0.0], [1.0]), **_TINY).fit()


@pytest.mark.parametrize("dim", [0, -1, 10**12])
def test_target_constructor_validates_dim(dim):
    with pytest.raises(ValueError, match="`dim`"):
        Target(dim, name="t")


def test_target_constructor_validates_dim_type_name_log_Z_and_bounds():
    with pytest.raises(TypeError, match="`dim`"):
        Target(1.5, name="t")
    with pytest.raises(TypeError, match="`name`"):
        Target(2, name=3)
    with pytest.raises(ValueError, match="`log_Z`"):
        Target(2, name="t", log_Z=float("nan"))
    with pytest.raises(ValueError, match="`bounds`"):
        Target(2, name="t", bounds=np.ones(6))
    with pytest.raises(ValueError, match="`bounds`"):
        Target(2, name="t", bounds=[[1.0, 0.0], [0.0, 1.0]])


def test_unsupported_operations_are_type_errors_and_not_implemented_errors():
    t = Target(2, name="t")
    with pytest.raises(TypeError, match="base class"):
        t.log_density(np.zeros((1, 2)))
    with pytest.raises(NotImplementedError):
        t.sample(3)


def test_huge_sample_counts_are_refused_before_allocating(sampler):
    with pytest.raises(ValueError, match="`n`"):
        sampler.sample(2**63)
    with pytest.raises(ValueError, match="`n`"):
        sampler.log_Z(n=10**12)
    with pytest.raises(ValueError, match="`n`"):
        gaussian([0.0], [1.0]).sample(10**12)


def test_sampler_workers_are_validated_even_when_unused(sampler):
    with pytest.raises(ValueError, match="`workers`"):
        sampler.sample(5, workers=4096)
    with pytest.raises(TypeError, match="`workers`"):
        sampler.log_Z(n=10, workers="x")


def test_sampler_fit_validates_its_parameters():
    # the constructor stores its parameters unchanged (scikit-learn's convention); fit checks them
    with pytest.raises(ValueError, match="`solver`"):
        ScoreBasedSampler(gaussian([0.0], [1.0]), solver="nope").fit()
    with pytest.raises(TypeError, match="`warp`"):
        ScoreBasedSampler(gaussian([0.0], [1.0]), warp=5).fit()
    with pytest.raises(TypeError, match="`options`"):
        ScoreBasedSampler(gaussian([0.0], [1.0]), options=[("sweeps", 2)]).fit()
    with pytest.raises(ValueError, match=re.escape("`options['integrator']`")):
        ScoreBasedSampler(gaussian([0.0], [1.0]), options={"integrator": "euler"}).fit()
    with pytest.raises(ValueError, match="`X`"):
        ScoreBasedSampler(gaussian([0.0], [1.0])).fit(np.zeros((3, 1)))


@pytest.mark.parametrize("factory", [many_well, funnel, double_well])
def test_huge_dimensions_are_refused_before_allocating(factory):
    with pytest.raises(ValueError, match="`d`"):
        factory(10**12)


def test_out_of_range_funnel_sigma_and_double_well_delta_are_refused():
    with pytest.raises(ValueError, match="`sigma`"):
        funnel(3, 1e308)
    with pytest.raises(ValueError, match="`delta`"):
        double_well(2, 2, 1e308)


@pytest.mark.parametrize("name", ["n_steps", "n_paths", "degree"])
def test_solve_hjb_huge_counts_are_refused(name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        solve_hjb(gaussian([0.0], [1.0]), **{**_TINY, name: 10**12})


@pytest.mark.parametrize("key", ["sweeps", "terminal_sweeps", "newton_iter", "pilot_steps", "ranks", "hermite_degree",
                                 "refine_paths"])
def test_solve_hjb_huge_option_counts_are_refused(key):
    with pytest.raises(ValueError, match=re.escape(f"`options['{key}']`")):
        solve_hjb(gaussian([0.0], [1.0]), **{**_TINY, "options": {**_TINY["options"], key: 10**12}})


def test_solve_hjb_options_are_checked_by_key_and_method():
    with pytest.raises(ValueError, match="unknown keys"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY | {"options": {"swepes": 2}})
    # a valid key of the other method is refused after its value was checked
    with pytest.raises(ValueError, match="hermite_degree"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY | {"options": {"hermite_degree": 20}})
    with pytest.raises(ValueError, match="terminal"):
        solve_hjb(gaussian([0.0], [1.0]), n_steps=5, method="hermite", options={"terminal": "cross"})
    with pytest.raises(TypeError, match="`options`"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY | {"options": {1: 2}})


def test_solve_hjb_refuses_overflowing_preconditioning_and_horizon():
    with pytest.raises(ValueError, match="`scale`"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY, scale=1e308)
    with pytest.raises(ValueError, match="`T`"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY, T=1e308)
    with pytest.raises(TypeError, match="`loc`"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY, loc=1 + 1j)
    with pytest.raises(TypeError, match="design_mix"):
        solve_hjb(gaussian([0.0], [1.0]), **_TINY | {"options": {"design_mix": ["a", "b", "c"]}})


def test_time_grid_with_coinciding_times_is_refused():
    with pytest.raises(ValueError, match="`grading`"):
        time_grid(1.0, 10, 1e308)
    with pytest.raises(ValueError, match="`n_steps`"):
        time_grid(1.0, 10**12)


def test_transforms_validate_parameters_and_refuse_non_finite_results():
    with pytest.raises(TypeError, match="`width`"):
        SinhTransform(np.ones(3, complex))
    with pytest.raises(TypeError, match="`dims`"):
        ExpTransform(dims="x")
    with pytest.raises(ValueError, match="`u`"):
        SinhTransform(1.0).forward(np.full((2, 2), 1e308))
    with pytest.raises(ValueError, match="`x`"):
        ExpTransform().inverse(np.zeros((2, 2)))


def test_hermite_tail_energy_refuses_non_numeric_tau_and_survives_huge_tau():
    core = np.zeros((1, 3, 1))
    core[0, 0, 0], core[0, 2, 0] = 2.0, 0.5
    sol = HermiteOUSolution([core], loc=0.0, scale=1.0)
    with pytest.raises(TypeError, match="`tau`"):
        sol.tail_energy(1 + 1j)
    assert np.isfinite(sol.tail_energy(1e308))


@pytest.mark.parametrize("metric", [w2, sinkhorn_distance, mmd])
def test_metrics_refuse_samples_whose_distances_overflow(metric):
    X = np.full((4, 2), 1e308)
    with pytest.raises(ValueError, match="`X`"):
        metric(X, -X)


def test_gaussian_whose_box_overflows_is_refused():
    with pytest.raises(ValueError, match="`mean`"):
        gaussian(np.full(2, 1e308), 1.0)
    with pytest.raises(ValueError, match="`cov`"):
        gaussian(np.full(2, 1e300), np.full(2, 1e300))
    # a huge but representable variance is fine: log Z is computed without overflow
    assert np.isfinite(gaussian(np.zeros(2), np.full(2, 1e308)).log_Z)
