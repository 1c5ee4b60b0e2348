"""Fuzz cases of numtk.counterfactual (see _harness.py for the catalogue and the outcomes).

Small inputs: a 12 x 3 group ``X`` and a fixed linear classifier ``(w, b)`` that rejects most of it.
"""

import numpy as np

from _harness import Case

_W = np.array([1.0, -0.5, 0.25])
_B = -1.0


def _X():
    return np.random.default_rng(0).normal(size=(12, 3))


def _cf():
    import numtk.counterfactual as cf
    return cf


# -- GroupCounterfactualMap -------------------------------------------------------------------

def _map_fit_with(**params):
    """Constructor parameters are validated by ``fit`` (scikit-learn convention: ``__init__`` only
    stores them); the case builds the estimator with the fuzzed parameter and fits it."""
    from numtk.counterfactual import GroupCounterfactualMap

    est = GroupCounterfactualMap(**params).fit(_X(), (_W, _B))
    return est.A_, est.c_, est.cost_, est.distortion_bounds_


def _ctor():
    return _map_fit_with, (), {"family": "diagonal"}


def _fit():
    from numtk.counterfactual import GroupCounterfactualMap

    def fit(X, classifier, sample_weight=None):
        est = GroupCounterfactualMap("diagonal").fit(X, classifier, sample_weight=sample_weight)
        return est.A_, est.c_, est.cost_
    return fit, (_X(), (_W, _B)), {}


def _fit_path():
    from numtk.counterfactual import GroupCounterfactualMap

    def fit_path(X, classifier, distortions, sample_weight=None):
        maps = GroupCounterfactualMap("diagonal").fit_path(X, classifier, distortions, sample_weight=sample_weight)
        return [(m.A_, m.c_, m.cost_) for m in maps]
    return fit_path, (_X(), (_W, _B), [1.5, 2.0]), {}


def _fit_transform():
    from numtk.counterfactual import GroupCounterfactualMap

    return GroupCounterfactualMap("diagonal").fit_transform, (_X(), (_W, _B)), {}


def _fitted():
    from numtk.counterfactual import GroupCounterfactualMap
    return GroupCounterfactualMap("diagonal").fit(_X(), (_W, _B))


def _transform():
    return _fitted().transform, (_X(),), {}


def _score():
    return _fitted().score, (_X(),), {}


def _predict_valid():
    return _fitted().predict_valid, (_X(),), {}


# -- the protocol -------------------------------------------------------------------------

def _synthetic():
    return _cf().synthetic_2d, (50,), {"rng": 0}


def _split():
    return _cf().protocol_split, (_X(), np.array([0, 1] * 6)), {}


def _evaluate():
    # Two QP families, one K, three folds and Wachter's baseline: a valid call of a few milliseconds.
    # Every row has every field, NaN where it does not apply (documented: the baselines have no
    # held-out members, a one-member group no folds); the finiteness check reads the fields every
    # row has: the whole-group fit's validity and cost.
    from numtk._lib._constraints import declared_constraints

    evaluate = _cf().evaluate_group_maps

    def evaluate_group_maps(*args, **kwargs):
        return [(r.method, r.n, r.n_folds, r.group_validity, r.group_cost) for r in evaluate(*args, **kwargs)]

    evaluate_group_maps.__numtk_constraints__ = declared_constraints(evaluate)
    return evaluate_group_maps, (_X(), (_W, _B)), {
        "families": ("translation", "diagonal"), "distortions": (2.0,), "n_folds": 3, "baselines": ("wachter",)}


def _problems():
    return _cf().protocol_problems, (), {"datasets": ("synthetic_2d",)}


# -- per-point baselines --------------------------------------------------------------------

def _wachter():
    return _cf().wachter_counterfactuals, (_X(), _W, _B), {}


def _lipschitz():
    # lipschitz >= 1 without immutables: the shortcut (no SOCP) keeps the valid call fast
    return _cf().lipschitz_counterfactuals, (_X(), _W, _B), {}


def _dp():
    # a large distortion: Wachter's point set already keeps every ratio, so the valid call returns
    # at once (the catalogue's values then exercise the checks, not the local solver)
    X = _X()[:6]
    return _cf().distance_preserving_counterfactuals, (X, _W, _B), {"distortion": 1e3}


# -- metrics and groups ---------------------------------------------------------------------

def _validity():
    return _cf().validity, (_X(), _W, _B), {}


def _transport():
    X = _X()
    return _cf().transport_cost, (X, X + 1.0), {}


def _distortion():
    X = _X()
    return _cf().distortion_ratios, (X, X * 1.5), {}


def _make_groups():
    X = _X()
    y = np.array([0, 1] * 6)
    return _cf().make_groups, (X, y), {"n_clusters": 2, "max_size": 5, "rng": 0}


_CLS = {"X": "array2d", "w": "array1d", "b": "real", "confidence": "prob_open", "margin": "real",
        "target": "option", "immutable": "array1d", "bounds": "option"}
_POS = {"X": 0, "w": 1, "b": 2}
# `target=None` is documented: the positive class (1 for a pair (w, b), classes_[1] for a model);
# `bounds=None` too: no bounds
_SKIP_TARGET = {"target": ("None",), "bounds": ("None",)}
# The classifier is a fitted binary linear model or a pair (w, b): objects of a documented type
# A pair of pure numbers is not a solver: `solver_options` must be a dict or None; the catalogue's
# 'callable' category holds non-dict values (5, 'x') that must be refused naming it.
_OPTS = ("callable",)

CASES = {c.name: c for c in [
    Case("numtk.counterfactual.GroupCounterfactualMap", _ctor,
         {"family": "option", "distortion": "real>0", "confidence": "prob_open", "target": "option",
          "margin": "real", "immutable": "array1d", "bounds": "option", "solver": "option",
          "solver_options": _OPTS, "covariance_ddof": "real>=0", "covariance_ridge": "real>=0",
          "tol": "real>=0", "max_iter": "int>=1"},
         # target=None, bounds=None: documented defaults; solver=None: documented default
         # ('native' / 'CLARABEL')
         skip={"target": ("None",), "bounds": ("None",), "solver": ("None",)}),
    Case("numtk.counterfactual.GroupCounterfactualMap.fit", _fit,
         {"X": "array2d", "classifier": "option", "sample_weight": "array1d"},
         positional={"X": 0, "classifier": 1}),
    Case("numtk.counterfactual.GroupCounterfactualMap.fit_path", _fit_path,
         {"X": "array2d", "classifier": "option", "distortions": "array1d", "sample_weight": "array1d"},
         positional={"X": 0, "classifier": 1, "distortions": 2}),
    Case("numtk.counterfactual.GroupCounterfactualMap.fit_transform", _fit_transform,
         {"X": "array2d", "classifier": "option", "sample_weight": "array1d"},
         positional={"X": 0, "classifier": 1}),
    Case("numtk.counterfactual.GroupCounterfactualMap.transform", _transform, {"X": "array2d"},
         positional={"X": 0}),
    Case("numtk.counterfactual.GroupCounterfactualMap.predict_valid", _predict_valid, {"X": "array2d"},
         positional={"X": 0}),
    Case("numtk.counterfactual.GroupCounterfactualMap.score", _score, {"X": "array2d"},
         positional={"X": 0},
         # documented: the score of no rows is nan (as for `validity`)
         skip={"X": ("np.zeros((0, 3))",)}),
    Case("numtk.counterfactual.wachter_counterfactuals", _wachter, _CLS, positional=_POS,
         skip=_SKIP_TARGET),
    Case("numtk.counterfactual.lipschitz_counterfactuals", _lipschitz,
         {**_CLS, "lipschitz": "real>0", "pairs": "option", "shortcut": "bool", "solver": "option",
          "solver_options": _OPTS, "n_landmarks": "int>=1", "rng": "rng"},
         positional=_POS, skip=_SKIP_TARGET),
    Case("numtk.counterfactual.distance_preserving_counterfactuals", _dp,
         {**_CLS, "distortion": "real>0", "pairs": "option", "n_landmarks": "int>=1",
          "method": "option", "local_solver": "option", "max_iter": "int>=1", "tol": "real>0",
          "solver": "option", "solver_options": _OPTS, "n_random_starts": "int>=0", "rng": "rng",
          "progress": "bool"},
         positional=_POS, skip=_SKIP_TARGET, timeout=60.0),
    Case("numtk.counterfactual.validity", _validity,
         {"X_cf": "array2d", "w": "array1d", "b": "real", "threshold": "prob_open", "target": "option",
          "margin": "real", "tol": "real>=0"},
         positional={"X_cf": 0, "w": 1, "b": 2},
         # documented: the validity of no rows is nan
         skip={"X_cf": ("np.zeros((0, 3))",)}),
    Case("numtk.counterfactual.transport_cost", _transport,
         {"X": "array2d", "X_cf": "array2d", "squared": "bool", "reduce": "option"},
         positional={"X": 0, "X_cf": 1}),
    Case("numtk.counterfactual.distortion_ratios", _distortion,
         {"X": "array2d", "X_cf": "array2d", "pairs": "option", "max_pairs": "cap", "rng": "rng",
          "eps": "real>=0"},
         positional={"X": 0, "X_cf": 1},
         # pairs=None: documented default (all pairs); eps=1e308 excludes every pair, whose documented
         # result is nan ratios with n_pairs=0 and n_excluded counting them
         skip={"pairs": ("None",), "eps": ("1e308",)}),
    Case("numtk.counterfactual.make_groups", _make_groups,
         {"X": "array2d", "y": "array1d", "n_clusters": "count", "max_size": "int>=1", "rng": "rng",
          "method": "option", "min_size": "int>=1", "pad_to": "count", "labels": "array1d"},
         positional={"X": 0, "y": 1}),
    Case("numtk.counterfactual.synthetic_2d", _synthetic, {"n": "count", "rng": "rng"}, positional={"n": 0}),
    Case("numtk.counterfactual.protocol_split", _split,
         {"X": "array2d", "y": "array1d", "group_fraction": "prob_open", "rng": "rng"},
         positional={"X": 0, "y": 1}),
    Case("numtk.counterfactual.evaluate_group_maps", _evaluate,
         {"X_group": "array2d", "classifier": "option", "families": "option", "distortions": "array1d",
          "n_folds": "int>=2", "confidence": "prob_open", "target": "option", "immutable": "array1d",
          "baselines": "option", "max_dp_size": "int>=0", "solver_options": _OPTS, "rng": "rng"},
         positional={"X_group": 0, "classifier": 1},
         # target=None: documented default (the positive class)
         skip={"target": ("None",)}),
    Case("numtk.counterfactual.protocol_problems", _problems, {"quick": "bool", "datasets": "option"},
         # datasets=None: documented default (every dataset available here)
         skip={"datasets": ("None",)}),
]}
