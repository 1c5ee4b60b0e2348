"""Fuzz cases of numtk.mixture (see _harness.py for the catalogue and the outcomes).

Laws are fitted on a few dozen planted runs with few starts, so that every call takes well under a second.
Each room of the area keeps its cases in its own section below.
"""

import numpy as np

from _harness import Case


def _m():
    import numtk.mixture as m
    return m


# --- laws: MixtureLaw, mixture_features -------------------------------------------------------------
def _law_data(tokens=False):
    """30 planted runs: 5 sizes x 6 mixtures of 3 domains, 2 validation sets (a camel law, small noise)."""
    rng = np.random.default_rng(0)
    mixes = rng.dirichlet(np.ones(3), 6)
    N = np.repeat(np.geomspace(1e7, 1e8, 5), 6)
    R = np.tile(mixes, (5, 1))
    D = np.exp(rng.uniform(np.log(1e9), np.log(1e10), N.size)) if tokens else None
    params = {"E": [1.6, 1.8], "theta": [[0.2, 0.5, 0.1], [0.4, 0.0, 0.3]], "alpha": [[0.2, 0.3, 0.1], [0.1, 0.4, 0.2]]}
    if tokens:
        params.update(zeta=[-1.5, -2.0], beta=[0.3, 0.2])
    planted = _m().MixtureLaw.from_params("camel", params, reference_size=3e7, reference_tokens=3e9)
    X = _m().mixture_features(N, R, tokens=D)
    return X, planted.predict(X) * np.exp(1e-3 * rng.standard_normal((N.size, 2)))


_LAW = None


def _law():
    global _LAW
    if _LAW is None:
        X, y = _law_data()
        _LAW = _m().MixtureLaw(n_starts=2, rng=0).fit(X, y)
    return _LAW


def _law_ctor():
    """Constructor parameters are validated by ``fit``: build with the fuzzed parameter, then fit."""
    X, y = _law_data()

    def build_and_fit(**kw):
        return _m().MixtureLaw(**{"n_starts": 2, "rng": 0, **kw}).fit(X, y).coef_

    return build_and_fit, (), {"form": "camel"}


def _law_ctor_tokens():
    X, y = _law_data(tokens=True)

    def build_and_fit(**kw):
        return _m().MixtureLaw(**{"n_starts": 2, "rng": 0, "data_term": True, **kw}).fit(X, y).coef_

    return build_and_fit, (), {"reference_tokens": 3e9}


def _law_fit():
    X, y = _law_data()
    return _m().MixtureLaw(n_starts=2, rng=0).fit, (X, y[:, 0]), {"sample_weight": np.ones(len(y))}


def _law_method(name, **kw):
    def make():
        X, _ = _law_data()
        return getattr(_law(), name), (X[:4],), kw
    return make


def _law_score():
    X, y = _law_data()
    return _law().score, (X, y), {"sample_weight": np.ones(len(y))}


def _law_bootstrap():
    return _law().bootstrap, (), {"n_resamples": 2, "rng": 0}


def _law_interval_bootstrap():
    X, _ = _law_data()
    return _law().predict_interval, (X[:4],), {"method": "bootstrap", "n_resamples": 2, "rng": 0}


def _law_gradient():
    return _law().mixture_gradient, (1e9, np.array([0.2, 0.3, 0.5])), {}


def _law_from_params():
    params = {"E": [1.6], "theta": [[0.2, 0.5, 0.1]], "alpha": [[0.2, 0.3, 0.1]]}
    return _m().MixtureLaw.from_params, ("camel", params), {"reference_size": 3e7}


def _law_from_params_dml():
    params = {"sizes": [1e7, 3e7, 1e8], "E": np.full((3, 1), 1.5), "theta": np.zeros((3, 1, 2))}
    return _m().MixtureLaw.from_params, ("data_mixing", params), {}


def _features():
    return _m().mixture_features, (np.array([1e7, 1e8]), np.array([[0.5, 0.5], [0.2, 0.8]])), {"tokens": 1e9}


LAW: list = [
    Case("numtk.mixture.MixtureLaw", _law_ctor,
         {"form": "option", "loss": "option", "space": "option", "delta": "real>0", "n_starts": "count",
          "reference_size": "real>0", "fixed": "mapping", "rng": "rng", "workers": "workers", "progress": "bool",
          "data_term": "bool"}, timeout=60),
    Case("numtk.mixture.MixtureLaw[tokens]", _law_ctor_tokens, {"reference_tokens": "real>0"}, timeout=60),
    Case("numtk.mixture.MixtureLaw.fit", _law_fit,
         {"X": "array2d", "y": ("array1d", "array2d"), "sample_weight": "array1d"}, positional={"X": 0, "y": 1}),
    Case("numtk.mixture.MixtureLaw.predict", _law_method("predict"), {"X": "array2d"}, positional={"X": 0}),
    Case("numtk.mixture.MixtureLaw.jacobian", _law_method("jacobian"), {"X": "array2d"}, positional={"X": 0}),
    Case("numtk.mixture.MixtureLaw.predict_interval", _law_method("predict_interval"),
         {"X": "array2d", "level": "prob_open", "method": "option", "n_resamples": "count", "rng": "rng"},
         positional={"X": 0}, skip={"method": ("None",)}),
    Case("numtk.mixture.MixtureLaw.predict_interval[bootstrap]", _law_interval_bootstrap,
         {"n_resamples": "count", "rng": "rng"}),
    Case("numtk.mixture.MixtureLaw.bootstrap", _law_bootstrap, {"n_resamples": "count", "rng": "rng"}),
    Case("numtk.mixture.MixtureLaw.score", _law_score,
         {"X": "array2d", "y": ("array1d", "array2d"), "sample_weight": "array1d"}, positional={"X": 0, "y": 1}),
    Case("numtk.mixture.MixtureLaw.mixture_gradient", _law_gradient,
         {"model_size": "real>0", "mixture": "array1d", "tokens": "real>0"},
         positional={"model_size": 0, "mixture": 1}),
    Case("numtk.mixture.MixtureLaw.from_params", _law_from_params,
         {"form": "option", "params": "mapping", "reference_size": "real>0", "reference_tokens": "real>0"},
         positional={"form": 0, "params": 1}),
    Case("numtk.mixture.MixtureLaw.from_params[data_mixing]", _law_from_params_dml, {"params": "mapping"},
         positional={"params": 1}),
    Case("numtk.mixture.mixture_features", _features,
         {"model_sizes": ("real>0", "array1d"), "mixtures": ("array1d", "array2d"), "tokens": ("real>0", "array1d")},
         positional={"model_sizes": 0, "mixtures": 1}),
]

# --- capacity-KKT law and Chinchilla ----------------------------------------------------------------
def _chinchilla():
    # eight runs of Hoffmann et al.'s published law: more runs than the law's 5 parameters, so the
    # covariance is finite (the catalogue's 5-entry arrays then give a length error naming the parameter;
    # the case below fuzzes their values)
    N = np.array([1e8, 1e8, 1e9, 1e9, 3e9, 3e8, 2e9, 5e9])
    D = np.array([2e9, 2e10, 2e10, 1e11, 6e10, 5e9, 3e11, 1e10])
    L = 1.69 + 406.4 * N**-0.34 + 410.7 * D**-0.28
    return _m().chinchilla_fit, (N, D, L), {}


def _chinchilla_five():
    # five runs (the catalogue's 1-D edge arrays have five entries, so each replaces one argument whole);
    # two distinct sizes and token counts suffice for the point estimates, while the covariance of five
    # runs is NaN by its documented rule (no residual degrees of freedom), so only the point fields are read
    N = np.array([1e8, 1e8, 1e9, 1e9, 3e9])
    D = np.array([2e9, 2e10, 2e10, 1e11, 6e10])
    L = 1.69 + 406.4 * N**-0.34 + 410.7 * D**-0.28

    def point_fit(*args, **kwargs):
        res = _m().chinchilla_fit(*args, **kwargs)
        return {k: res[k] for k in ("A", "B", "E", "alpha", "beta", "value")}

    return point_fit, (N, D, L), {}


KKT_CHINCHILLA: list = [
    Case("numtk.mixture.chinchilla_fit", _chinchilla, {"n_resamples": "int>=0", "rng": "rng"},
         positional={"model_sizes": 0, "tokens": 1, "losses": 2},
         # no run lies inside a Huber threshold of 1e-308: the covariance is NaN with a warning (documented)
         skip={"delta": ("1e-308",)}),
    Case("numtk.mixture.chinchilla_fit[five runs]", _chinchilla_five,
         {"model_sizes": "array1d", "tokens": "array1d", "losses": "array1d", "delta": "real>0"},
         positional={"model_sizes": 0, "tokens": 1, "losses": 2}),
]

# --- optimal mixture and the loss-to-benchmark law --------------------------------------------------
def _bench_data():
    x = np.linspace(1.5, 3.5, 12)
    return x, 0.25 + 0.65 / (1.0 + np.exp(6.0 * (x - 2.5)))


_BENCH = None


def _bench():
    global _BENCH
    if _BENCH is None:
        x, y = _bench_data()
        _BENCH = _m().LossToBenchmarkLaw(floor=0.25).fit(x, y + 0.01 * np.sin(7 * x))
    return _BENCH


def _bench_ctor():
    """Constructor parameters are validated by ``fit``: build with the fuzzed parameter, then fit."""
    x, y = _bench_data()

    def build_and_fit(**kw):
        return _m().LossToBenchmarkLaw(**kw).fit(x, y).coef_

    return build_and_fit, (), {"form": "sigmoid"}


def _bench_ctor_columns():
    # three loss columns combined by loss_weights
    x, y = _bench_data()
    X = np.c_[x, x + 0.1, x - 0.1]

    def build_and_fit(**kw):
        return _m().LossToBenchmarkLaw(**kw).fit(X, y).coef_

    return build_and_fit, (), {"loss_weights": np.array([0.2, 0.3, 0.5])}


def _bench_fit():
    x, y = _bench_data()
    return _m().LossToBenchmarkLaw().fit, (x, y), {"sample_weight": np.ones(12)}


def _bench_method(name, **kw):
    def make():
        return getattr(_bench(), name), (np.array([1.8, 2.4, 3.1]),), kw
    return make


def _bench_score():
    x, y = _bench_data()
    return _bench().score, (x, y), {"sample_weight": np.ones(12)}


def _bench_inverse():
    return _bench().inverse, (np.array([0.3, 0.5, 0.8]),), {}


def _bench_bootstrap():
    return _bench().bootstrap, (), {"n_resamples": 3, "rng": 0}


def _bench_from_params():
    return _m().LossToBenchmarkLaw.from_params, ("sigmoid",), {"floor": 0.25, "ceiling": 0.9, "slope": 6.0,
                                                              "midpoint": 2.5}


# a 1-D array is one column of losses (valid X), not the mistake the catalogue's 2-D category expects
_X_SKIP = {"X": ("np.ones(6)",)}
# scores outside the open range (floor, ceiling) of the curve give NaN with a NumtkWarning (documented)
_SCORES_SKIP = {"scores": ("np.array([])", "np.zeros(5)", "np.full(5, 1e308)", "np.full(5, 1e-308)",
                           "np.arange(10.0)[::2]", "np.arange(5, dtype='>f8')", "np.arange(5, dtype=np.int32)",
                           "np.array([1.0])")}

def _om_law():
    # alpha <= 0.3 keeps the losses finite for every size of the catalogue (1e-308 .. 1e308)
    return _m().MixtureLaw.from_params("camel", {"E": [1.0, 1.2], "theta": [[0.0, 0.8, 0.4], [0.9, 0.0, 0.3]],
                                                 "alpha": [[0.1, 0.2, 0.3], [0.3, 0.1, 0.2]]}, reference_size=1e8)


def _optimal():
    return _m().optimal_mixture, (_om_law(), 1e9), {"constraints": {"upper": 0.8}}


def _optimal_benchmarks():
    bench = _m().LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=4.0, midpoint=2.5,
                                                loss_weights=[0.5, 0.5])
    return _m().optimal_mixture, (_om_law(), 1e9), {"benchmarks": [bench, bench], "benchmark_weights": [0.4, 0.6],
                                                    "n_starts": 2, "rng": 0}


# None is the documented default of `constraints` and `benchmarks` (no constraints, the loss objective)
_OM_SKIP = {"constraints": ("None",), "benchmarks": ("None",)}

OPTIMUM_BENCHMARK: list = [
    Case("numtk.mixture.optimal_mixture", _optimal, {}, positional={"law": 0, "model_size": 1},
         skip=_OM_SKIP),
    Case("numtk.mixture.optimal_mixture[benchmarks]", _optimal_benchmarks,
         {"benchmark_weights": "array1d", "n_starts": "int>=0", "rng": "rng"}),
    Case("numtk.mixture.LossToBenchmarkLaw", _bench_ctor, {}, skip={"loss_weights": ("None",)}),  # the default
    Case("numtk.mixture.LossToBenchmarkLaw[columns]", _bench_ctor_columns, {"loss_weights": "array1d"}),
    Case("numtk.mixture.LossToBenchmarkLaw.fit", _bench_fit, {}, positional={"X": 0, "y": 1}, skip=_X_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.predict", _bench_method("predict"), {}, positional={"X": 0},
         skip=_X_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.derivative", _bench_method("derivative"), {}, positional={"X": 0},
         skip=_X_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.jacobian", _bench_method("jacobian"), {}, positional={"X": 0},
         skip=_X_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.predict_interval", _bench_method("predict_interval", n_resamples=3),
         {}, positional={"X": 0}, skip=_X_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.predict_interval[bootstrap]",
         _bench_method("predict_interval", method="bootstrap", n_resamples=3, rng=0),
         {"n_resamples": "count", "rng": "rng", "level": "prob_open"}),
    Case("numtk.mixture.LossToBenchmarkLaw.score", _bench_score, {}, positional={"X": 0, "y": 1}, skip=_X_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.inverse", _bench_inverse, {}, positional={"scores": 0},
         skip=_SCORES_SKIP),
    Case("numtk.mixture.LossToBenchmarkLaw.bootstrap", _bench_bootstrap, {}),
    Case("numtk.mixture.LossToBenchmarkLaw.from_params", _bench_from_params, {}, positional={"form": 0}),
]

# --- budget allocation ------------------------------------------------------------------------------
_ALLOC_SIZES = np.geomspace(1e7, 2e8, 4)
_ALLOC_MIX = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])


def _alloc_law(V=1):
    return _m().MixtureLaw.from_params("camel", {"E": np.full(V, 1.8), "theta": np.tile([0.3, 0.0], (V, 1)),
                                                 "alpha": np.tile([0.3, 0.4], (V, 1))}, reference_size=1e8)


def _allocate():
    # four sizes (so that the catalogue's 1-, 5- and 0-long arrays do not fit) and three mixtures; the default
    # reserve runs the Frank-Wolfe solver, so its options are reached
    return _m().allocate_budget, (300.0, _ALLOC_SIZES, lambda N: N / 1e7, _alloc_law()), \
        {"target_size": 1e9, "target_mixture": np.array([0.5, 0.5]), "mixtures": _ALLOC_MIX, "noise": 0.01,
         "rng": 0}


def _allocate_defaults():
    # two outputs, the optimal mixture as target, Dirichlet candidate mixtures, bootstrap-like samples
    law = _alloc_law(2)
    return _m().allocate_budget, (300.0, _ALLOC_SIZES, _ALLOC_SIZES / 1e7, law), \
        {"target_size": 1e9, "n_mixtures": 3, "noise": 0.01, "theta_samples": [law, _alloc_law(2)],
         "weights": np.array([0.3, 0.7]), "rng": 0}


_ALLOC_POS = {"budget": 0, "candidate_sizes": 1, "cost_fn": 2, "law": 3}
ALLOCATION: list = [
    # None is the documented default of benchmark and theta_samples
    Case("numtk.mixture.allocate_budget", _allocate, {}, positional=_ALLOC_POS,
         skip={"benchmark": ("None",), "theta_samples": ("None",)}),
    Case("numtk.mixture.allocate_budget[defaults]", _allocate_defaults,
         {"n_mixtures": "count", "weights": "array1d", "theta_samples": "option", "target_size": "real>0",
          "rng": "rng"}, positional=_ALLOC_POS, skip={"theta_samples": ("None",)}),
]

# --- planted worlds ---------------------------------------------------------------------------------
def _planted():
    return _m().planted_law, (3, 2), {"reference_size": 1e8, "drift": 0.5, "rng": 0}


def _simulate():
    law = _m().planted_law(3, 2, rng=0)
    return _m().simulate_runs, (law, np.array([1e7, 3e7, 1e8]), np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])), \
        {"noise": 1e-3, "rng": 0}


def _simulate_dirichlet():
    # an int m: m Dirichlet(1) mixtures drawn from rng
    law = _m().planted_law(3, 2, rng=0)
    return _m().simulate_runs, (law, 5e7, 4), {"noise": 0.0, "rng": 1}


PLANTED: list = [
    Case("numtk.mixture.planted_law", _planted, {}, positional={"n_domains": 0, "n_outputs": 1}),
    Case("numtk.mixture.simulate_runs", _simulate, {},
         positional={"law": 0, "model_sizes": 1, "mixtures": 2}),
    Case("numtk.mixture.simulate_runs[dirichlet]", _simulate_dirichlet, {"mixtures": "count"},
         positional={"law": 0, "model_sizes": 1, "mixtures": 2}),
]

CASES = {c.name: c for c in LAW + KKT_CHINCHILLA + OPTIMUM_BENCHMARK + ALLOCATION + PLANTED}
