"""Fuzz cases of numtk.ftt (see _harness.py for the catalogue and the outcomes)."""

import numpy as np

from _harness import Case

_FITTED = None


def _data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(40, 3))
    y = X[:, 0] + X[:, 1] * X[:, 2]
    return X, y


def _fitted():
    global _FITTED
    if _FITTED is None:
        from numtk.ftt import FunctionalTT

        X, y = _data()
        _FITTED = FunctionalTT(degree=3, ranks=2, sweeps=2, rng=0).fit(X, y)
    return _FITTED


def _ctor():
    """Constructor parameters are validated by ``fit`` (scikit-learn's convention: ``__init__`` only stores
    them): the case builds the estimator with the fuzzed parameter and fits it."""
    from numtk.ftt import FunctionalTT

    X, y = _data()

    def build_and_fit(**kw):
        return FunctionalTT(**{"sweeps": 1, "rng": 0, **kw}).fit(X, y).cores_

    return build_and_fit, (), {"degree": 3}


def _ctor_fitted_init():
    from numtk.ftt import FunctionalTT

    X, y = _data()

    def build_and_fit(init="random", **kw):
        return FunctionalTT(degree=3, sweeps=1, rng=0, init=init, **kw).fit(X, y).cores_

    return build_and_fit, (), {"init": _fitted()}


def _fit():
    from numtk.ftt import FunctionalTT

    X, y = _data()
    return FunctionalTT(degree=3, sweeps=2, rng=0).fit, (X, y), {}


def _score():
    X, y = _data()
    return _fitted().score, (X[:6], y[:6]), {}


def _additive():
    return _fitted().additive, ([np.sin, np.cos, np.tanh],), {"constant": 1.0}


def _method(name, **kw):
    def make():
        f = _fitted()
        X = np.random.default_rng(1).uniform(-1, 1, size=(6, 3))
        return getattr(f, name), (X,), kw
    return make


def _workers(name):
    def make():
        f = _fitted()
        X = np.random.default_rng(1).uniform(-1, 1, size=(6, 3))

        def call(X, workers=1):
            return getattr(f.set_params(workers=workers), name)(X)

        def guarded(*a, **k):
            try:
                return call(*a, **k)
            finally:
                f.set_params(workers=1)
        return guarded, (X,), {}
    return make


def _round():
    return _fitted().round, (), {"tol": 1e-8}


def _integrate():
    return _fitted().integrate, (), {}


def _from_cores():
    from numtk.ftt import FunctionalTT

    cores = [np.ones((1, 3, 2)), np.ones((2, 3, 1))]
    return FunctionalTT.from_cores, (cores,), {"basis": "hermite"}


def _from_cores_bounded():
    from numtk.ftt import FunctionalTT

    cores = [np.ones((1, 3, 2)), np.ones((2, 3, 1))]
    return FunctionalTT.from_cores, (cores,), {"basis": "legendre", "domain": [[-1, 1], [-1, 1]]}


def _nodes():
    from numtk.ftt import interpolation_nodes

    return interpolation_nodes, (), {"basis": "legendre", "degree": 4, "domain": (-1, 1)}


def _nodes_hermite():
    from numtk.ftt import interpolation_nodes

    return interpolation_nodes, (), {"basis": "hermite", "degree": 4}


def _cross():
    from numtk.ftt import tt_cross

    f = lambda x: np.sin(x[:, 0]) + x[:, 1] * x[:, 2]  # noqa: E731
    return tt_cross, (f, 3), {"degree": 4, "domain": [[-1, 1]] * 3, "sweeps": 2, "rng": 0}


def _cross_callback():
    from numtk.ftt import tt_cross

    f = lambda x: np.sin(x[:, 0]) + x[:, 1] * x[:, 2]  # noqa: E731

    def callback(intermediate_result):
        raise StopIteration

    return tt_cross, (f, 3), {"degree": 4, "domain": [[-1, 1]] * 3, "sweeps": 2, "rng": 0, "callback": callback}


def _cross_hermite():
    from numtk.ftt import tt_cross

    f = lambda x: np.sin(x[:, 0]) + x[:, 1] * x[:, 2]  # noqa: E731
    return tt_cross, (f, 3), {"basis": "hermite", "degree": 4, "sweeps": 2, "rng": 0}


CASES = {c.name: c for c in [
    Case("numtk.ftt.FunctionalTT", _ctor,
         {"basis": "option", "degree": "int>=0", "ranks": "int>=1", "domain": "array2d", "loc": "real",
          "scale": "real>0", "extrapolate": "option", "workers": "workers"},
         # 5: a valid ridge weight (regularization is a number or a {'ridge', 'h2'} dict)
         skip={"regularization": ("5",)}),
    # a fitted train as `init` (a warm start); every other parameter fuzzed around it
    Case("numtk.ftt.FunctionalTT[init]", _ctor_fitted_init,
         {"sweeps": "count", "tol": "real>=0", "rank_adaptive": "bool", "max_rank": "int>=1",
          "rank_tol": "real>=0", "rng": "rng", "progress": "bool", "callback": "callable"}),
    Case("numtk.ftt.FunctionalTT.fit", _fit,
         {"X": "array2d", "y": "array1d", "sample_weight": "array1d", "directional": "array2d"},
         positional={"X": 0, "y": 1}),
    Case("numtk.ftt.FunctionalTT.score", _score,
         {"X": "array2d", "y": "array1d", "sample_weight": "array1d"}, positional={"X": 0, "y": 1}),
    Case("numtk.ftt.FunctionalTT.additive", _additive, {"functions": "option", "constant": "real"},
         positional={"functions": 0}),
    Case("numtk.ftt.FunctionalTT.predict", _method("predict"), {"X": "array2d"}, positional={"X": 0}),
    Case("numtk.ftt.FunctionalTT.predict[workers]", _workers("predict"), {"workers": "workers"}),
    Case("numtk.ftt.FunctionalTT.gradient", _method("gradient"), {"X": "array2d"}, positional={"X": 0}),
    Case("numtk.ftt.FunctionalTT.gradient[workers]", _workers("gradient"), {"workers": "workers"}),
    Case("numtk.ftt.FunctionalTT.laplacian", _method("laplacian"), {"X": "array2d"}, positional={"X": 0}),
    Case("numtk.ftt.FunctionalTT.evaluate", _method("evaluate"),
         {"X": "array2d", "gradient": "bool", "laplacian": "bool", "overflow": "option"}, positional={"X": 0}),
    Case("numtk.ftt.FunctionalTT.round", _round, {"tol": "real>=0", "max_rank": "cap"}),
    Case("numtk.ftt.FunctionalTT.integrate", _integrate, {"weight": "option"},
         # None is the documented default (the natural measure of the bases)
         skip={"weight": ("None",)}),
    Case("numtk.ftt.FunctionalTT.from_cores", _from_cores,
         {"cores": "array2d", "basis": "option", "degree": "int>=0", "loc": "real", "scale": "real>0",
          "extrapolate": "option", "workers": "workers"}, positional={"cores": 0}),
    Case("numtk.ftt.FunctionalTT.from_cores[domain]", _from_cores_bounded, {"domain": "array2d"}),
    Case("numtk.ftt.interpolation_nodes", _nodes,
         {"basis": "option", "degree": "int>=0", "domain": "array1d"}),
    Case("numtk.ftt.interpolation_nodes[hermite]", _nodes_hermite, {"loc": "real", "scale": "real>0"}),
    Case("numtk.ftt.tt_cross", _cross,
         {"f": "callable", "d": "int>=1", "basis": "option", "degree": "int>=0", "domain": "array2d",
          "max_rank": "int>=1", "tol": "real>=0", "sweeps": "count", "kick": "int>=0", "rng": "rng",
          "workers": "workers", "progress": "bool", "callback": "callable"}, positional={"f": 0, "d": 1},
         timeout=60),
    Case("numtk.ftt.tt_cross[callback]", _cross_callback, {"sweeps": "count", "rng": "rng"}),
    Case("numtk.ftt.tt_cross[hermite]", _cross_hermite, {"loc": "real", "scale": "real>0"}),
]}
