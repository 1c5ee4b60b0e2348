"""Fuzz cases of numtk.sampling (see _harness.py for the catalogue and the outcomes)."""

import numpy as np

from _harness import Case

_SAMPLER = None
_TINY = dict(n_steps=5, degree=4, refine=0, n_paths=200, rng=0, options=dict(pilot_steps=5, refine_paths=50))


def _sampler():
    """One tiny fitted sampler (1-D Gaussian), built once per child and reused by every call."""
    global _SAMPLER
    if _SAMPLER is None:
        import warnings

        from numtk.sampling import ScoreBasedSampler, gaussian

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _SAMPLER = ScoreBasedSampler(gaussian([0.0], [1.0]), **_TINY).fit()
    return _SAMPLER


def _logp(x):
    return -0.5 * np.sum(x ** 2, axis=1)


def _target_ctor():
    from numtk.sampling import Target

    return Target, (3,), {"name": "t"}


def _from_callable():
    from numtk.sampling import Target

    return Target.from_callable, (_logp, 3), {}


def _log_density():
    from numtk.sampling import gaussian

    return gaussian(np.zeros(3), np.ones(3)).log_density, (np.zeros((2, 3)),), {}


def _target_method(name, *args, **kw):
    def make():
        from numtk.sampling import gaussian

        return getattr(gaussian(np.zeros(3), np.ones(3)), name), args, kw
    return make


def _target_sample():
    from numtk.sampling import gaussian

    return gaussian(np.zeros(3), np.ones(3)).sample, (4,), {"rng": 0}


def _as_target():
    from numtk.sampling import as_target

    return as_target, (_logp,), {"dim": 3}


def _gaussian():
    from numtk.sampling import gaussian

    return gaussian, (np.zeros(5), np.ones(5)), {}


def _gmm():
    from numtk.sampling import gaussian_mixture

    means = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]] * 3)
    return gaussian_mixture, (means,), {"covs": 1.0, "weights": np.ones(6)}


def _gmm_preset():
    from numtk.sampling import gaussian_mixture

    return gaussian_mixture, (), {"name": "9gmm"}


def _factory(name, *args, **kw):
    def make():
        import numtk.sampling as s

        return getattr(s, name), args, kw
    return make


def _sinh_log_det():
    from numtk.sampling import SinhTransform

    return SinhTransform(0.5).log_abs_det_jacobian, (np.zeros((6, 3)),), {}


def _sinh_forward():
    from numtk.sampling import SinhTransform

    T = SinhTransform(0.5)
    return T.forward, (np.zeros((6, 3)),), {}


def _exp_inverse():
    from numtk.sampling import ExpTransform

    return ExpTransform().inverse, (np.ones((6, 3)),), {}


def _transform_target():
    from numtk.sampling import ExpTransform, gaussian, transform_target

    return transform_target, (gaussian([1.0, 2.0], [0.1, 0.1]), ExpTransform()), {}


def _solve_hjb():
    from numtk.sampling import gaussian, solve_hjb

    return solve_hjb, (gaussian([0.0], [1.0]),), dict(_TINY)


def _solve_hjb_hermite():
    from numtk.sampling import gaussian, solve_hjb

    return solve_hjb, (gaussian([0.0], [1.0]),), dict(n_steps=5, method="hermite", options={"hermite_degree": 20})


def _value_function():
    from numtk.sampling import value_function

    sol = _sampler().solution_
    return value_function, (sol.W[-1],), {"loc": 0.0, "scale": 1.0}


def _sampler_ctor():
    """The estimator checks its parameters in fit (scikit-learn's convention): construct and fit."""
    from numtk.sampling import ScoreBasedSampler, gaussian

    def build_and_fit(target, **kw):
        return ScoreBasedSampler(target, **kw).fit().times_

    return build_and_fit, (gaussian([0.0], [1.0]),), dict(_TINY)


def _sampler_fit():
    import warnings

    from numtk.sampling import ScoreBasedSampler, gaussian

    warnings.simplefilter("ignore")
    return ScoreBasedSampler(gaussian([0.0], [1.0]), **_TINY).fit, (), {}


def _sample():
    return _sampler().sample, (5,), {"rng": 0}


def _log_Z():
    return _sampler().log_Z, (), {"n": 100, "rng": 0}


def _ess():
    return _sampler().ess, (), {"n": 100, "rng": 0}


def _hermite_solution():
    from numtk.sampling import gaussian, hermite_solution

    return hermite_solution, (gaussian([1.0], [0.5]),), {"degree": 20}


def _hermite_ctor():
    from numtk.sampling import HermiteOUSolution

    core = np.zeros((1, 3, 1))
    core[0, 0, 0], core[0, 2, 0] = 2.0, 0.5
    return HermiteOUSolution, ([core],), {"loc": 0.0, "scale": 1.0}


def _hermite_method(name, *args):
    def make():
        from numtk.sampling import HermiteOUSolution

        core = np.zeros((1, 3, 1))
        core[0, 0, 0], core[0, 2, 0] = 2.0, 0.5
        sol = HermiteOUSolution([core, core, core], loc=0.0, scale=1.0)
        return getattr(sol, name), args, {}
    return make


def _clouds(name, **kw):
    def make():
        import numtk.sampling as s

        rng = np.random.default_rng(0)
        return getattr(s, name), (rng.normal(size=(6, 3)), rng.normal(size=(6, 3)) + 1.0), kw
    return make


_XY = {"X": "array2d", "Y": "array2d"}
_XY_POS = {"X": 0, "Y": 1}
CASES = {c.name: c for c in [
    Case("numtk.sampling.Target", _target_ctor,
         {"dim": "int>=1", "log_Z": "real", "bounds": "array2d"}, positional={"dim": 0}),
    Case("numtk.sampling.Target.from_callable", _from_callable,
         {"log_density": "callable", "dim": "int>=1", "grad_log_density": "callable", "log_Z": "real",
          "bounds": "array2d", "jit": "bool"}, positional={"log_density": 0, "dim": 1}),
    Case("numtk.sampling.Target.log_density", _log_density, {"x": "array2d"}, positional={"x": 0},
         # documented: -inf where the density underflows to zero (a Gaussian at 1e308 from its mean)
         skip={"x": ("np.full((6, 3), 1e308)",)}),
    # n = 0 is documented (n >= 0: an empty (0, d) array)
    Case("numtk.sampling.Target.grad_log_density", _target_method("grad_log_density", np.zeros((2, 3))),
         {"x": "array2d"}, positional={"x": 0}),
    Case("numtk.sampling.Target.log_noised_density", _target_method("log_noised_density", np.zeros((2, 3)), 0.5),
         {"x": "array2d", "tau": "real>=0"}, positional={"x": 0, "tau": 1},
         skip={"x": ("np.full((6, 3), 1e308)",)}),  # documented: -inf where the density underflows
    Case("numtk.sampling.Target.noised_score", _target_method("noised_score", np.zeros((2, 3)), 0.5),
         {"x": "array2d", "tau": "real>=0"}, positional={"x": 0, "tau": 1}),
    Case("numtk.sampling.Target.V", _target_method("V", np.zeros((2, 3)), 0.5, T=1.0),
         {"x": "array2d", "t": "real>=0", "T": "real>=0"}, positional={"x": 0, "t": 1},
         skip={"x": ("np.full((6, 3), 1e308)",)}),
    Case("numtk.sampling.Target.score", _target_method("score", np.zeros((2, 3)), 0.5, T=1.0),
         {"x": "array2d", "t": "real>=0", "T": "real>=0"}, positional={"x": 0, "t": 1}),
    Case("numtk.sampling.Target.sample", _target_sample, {"n": "int>=0", "rng": "rng"}, positional={"n": 0}),
    Case("numtk.sampling.as_target", _as_target, {"obj": "callable", "dim": "int>=1"}, positional={"obj": 0}),
    Case("numtk.sampling.gaussian", _gaussian, {"mean": "array1d", "cov": "array1d"},
         positional={"mean": 0, "cov": 1}),
    Case("numtk.sampling.gaussian[cov2d]", _gaussian, {"cov": "array2d"}, positional={"cov": 1}),
    Case("numtk.sampling.gaussian_mixture", _gmm,
         {"means": "array2d", "covs": ("real>0", "array1d"), "weights": "array1d"}, positional={"means": 0},
         skip={"name": ("None",)}),  # None (no preset) is the default, valid with `means` given
    Case("numtk.sampling.gaussian_mixture[preset]", _gmm_preset, {"name": "option", "dim": "int>=1"},
         # None (no preset) is valid, with `means` given; here it is refused for the missing `means`
         ),
    Case("numtk.sampling.funnel", _factory("funnel", 3), {"d": "int>=2", "sigma": "real>0"},
         positional={"d": 0}),
    Case("numtk.sampling.many_well", _factory("many_well", 4), {"d": "int>=2"}, positional={"d": 0}),
    Case("numtk.sampling.double_well", _factory("double_well", 3, 2),
         {"d": "int>=1", "m": "int>=0", "delta": "real>0"}, positional={"d": 0, "m": 1}),
    Case("numtk.sampling.SinhTransform", _factory("SinhTransform", 0.5),
         {"width": ("real>0", "array1d"), "loc": ("real", "array1d"), "dims": "index"},
         positional={"width": 0}),
    Case("numtk.sampling.SinhTransform.forward", _sinh_forward, {"u": "array2d"}, positional={"u": 0}),
    Case("numtk.sampling.ExpTransform", _factory("ExpTransform"), {"dims": "index"}),
    # the base class: constructing it checks dims like its subclasses (its hooks are abstract)
    Case("numtk.sampling.Transform", _factory("Transform"), {"dims": "index"}),
    Case("numtk.sampling.SinhTransform.log_abs_det_jacobian", _sinh_log_det, {"u": "array2d"},
         positional={"u": 0}),
    Case("numtk.sampling.ExpTransform.inverse", _exp_inverse, {"x": "array2d"}, positional={"x": 0}),
    Case("numtk.sampling.transform_target", _transform_target,
         {"target": "callable", "transform": "callable", "dim": "int>=1"},
         positional={"target": 0, "transform": 1}),
    Case("numtk.sampling.time_grid", _factory("time_grid", T=1.0, n_steps=4),
         {"T": "real>0", "n_steps": "count", "grading": "real"}),
    # the parameters and the options' keys come from solve_hjb's declaration
    Case("numtk.sampling.solve_hjb", _solve_hjb, {}, positional={"target": 0}, timeout=60),
    Case("numtk.sampling.solve_hjb[hermite]", _solve_hjb_hermite,
         {"options.hermite_degree": "int>=0", "options.hermite_tol": "prob_open", "loc": "real", "scale": "real>0"}),
    Case("numtk.sampling.value_function", _value_function,
         {"W": "callable", "loc": "real", "scale": "real>0"}, positional={"W": 0}),
    # the constructor's declaration, checked by fit
    Case("numtk.sampling.ScoreBasedSampler", _sampler_ctor, {}, positional={"target": 0}, timeout=60),
    # fit takes no data: X and y must be None (their default)
    Case("numtk.sampling.ScoreBasedSampler.fit", _sampler_fit, {}, skip={"X": ("None",), "y": ("None",)},
         timeout=60),
    Case("numtk.sampling.ScoreBasedSampler.sample", _sample,
         {"n": "count", "rng": "rng", "return_log_weights": "bool", "workers": "workers"}, positional={"n": 0},
         timeout=60),
    Case("numtk.sampling.ScoreBasedSampler.log_Z", _log_Z, {"n": "count", "rng": "rng", "workers": "workers"},
         timeout=60),
    Case("numtk.sampling.ScoreBasedSampler.ess", _ess, {"n": "count", "rng": "rng"}, timeout=60),
    Case("numtk.sampling.hermite_solution", _hermite_solution,
         {"target": "callable", "degree": "int>=0", "loc": "real", "scale": "real>0", "hermite_tol": "prob_open",
          "eps": "prob"}, positional={"target": 0}),
    Case("numtk.sampling.HermiteOUSolution", _hermite_ctor,
         {"cores": "array2d", "loc": "real", "scale": "real>0", "hermite_tol": "prob_open", "T": "real>=0",
          "times": "array1d", "eps": "prob"}, positional={"cores": 0}),
    Case("numtk.sampling.HermiteOUSolution.log_f_and_grad", _hermite_method("log_f_and_grad", np.zeros((4, 3)), 0.5),
         {"y": "array2d", "tau": "real>=0"}, positional={"y": 0, "tau": 1}),
    Case("numtk.sampling.HermiteOUSolution.phi", _hermite_method("phi", 0.5), {"tau": "real>=0"},
         positional={"tau": 0}),
    Case("numtk.sampling.HermiteOUSolution.W", _hermite_method("W", np.zeros((4, 3)), 0.5),
         {"y": "array2d", "tau": "real>=0"}, positional={"y": 0, "tau": 1}),
    Case("numtk.sampling.HermiteOUSolution.grad_W", _hermite_method("grad_W", np.zeros((4, 3)), 0.5),
         {"y": "array2d", "tau": "real>=0"}, positional={"y": 0, "tau": 1}),
    Case("numtk.sampling.HermiteOUSolution.score", _hermite_method("score", np.zeros((4, 3)), 0.5),
         {"y": "array2d", "tau": "real>=0"}, positional={"y": 0, "tau": 1}),
    Case("numtk.sampling.HermiteOUSolution.tail_energy", _hermite_method("tail_energy", 0.5),
         {"tau": "real>=0", "degree_frac": "prob", "criterion": "option"}, positional={"tau": 0}),
    Case("numtk.sampling.HermiteOUSolution.tau_min", _hermite_method("tau_min"),
         {"degree_frac": "prob", "criterion": "option", "grid": "array1d"},
         # documented: tau_min is inf when no grid time has a small enough tail energy (these grids hold no
         # time late enough for the test solution's slowly decaying coefficients)
         skip={"grid": ("np.array([1.0])", "np.zeros(5)", "np.full(5, 1e-308)",
                        "np.arange(5, dtype='>f8')", "np.arange(5, dtype=np.int32)")}),
    Case("numtk.sampling.log_Z_error", _factory("log_Z_error", 1.25, 1.0),
         {"estimate": "real", "reference": "real"}, positional={"estimate": 0, "reference": 1},
         # documented: a non-finite estimate (a failed sampler's log Z = -inf) gives a non-finite error
         skip={"estimate": ("float('nan')", "float('inf')")}),
    Case("numtk.sampling.w2", _clouds("w2"), _XY, positional=_XY_POS),
    Case("numtk.sampling.sinkhorn_distance", _clouds("sinkhorn_distance"),
         {**_XY, "epsilon": "real>0", "relative_epsilon": "bool", "cost": "option", "debiased": "bool",
          "a": "array1d", "b": "array1d", "max_iter": "count", "tol": "real>=0", "workers": "workers"},
         positional=_XY_POS),
    Case("numtk.sampling.mmd", _clouds("mmd"),
         {**_XY, "kernel": "option", "bandwidth": "real>0", "unbiased": "bool", "workers": "workers"},
         positional=_XY_POS),
]}
