"""Fuzz cases of numtk.seriation (see _harness.py for the catalogue and the outcomes)."""

import numpy as np

from _harness import Case


def _curve(n=60, d=3, kind="helix", noise=0.01):
    from numtk.seriation import make_curve

    return make_curve(kind, n, d, noise=noise, rng=0)[0]


def _stage():
    from numtk.seriation import stage

    return stage, (_curve(),), {"n_neighbors": 8}


def _spectral():
    from numtk.seriation import spectral_seriation

    return spectral_seriation, (_curve(),), {"n_neighbors": 8}


def _recanati():
    from numtk.seriation import recanati_seriation

    return recanati_seriation, (_curve(),), {"n_neighbors": 8, "n_components": 4, "k_local": 8}


def _ltsa():
    from numtk.seriation import ltsa_seriation

    return ltsa_seriation, (_curve(),), {"n_neighbors": 8}


def _tsne():
    from numtk.seriation import tsne_seriation

    return tsne_seriation, (_curve(40),), {"perplexity": 10.0, "max_iter": 250, "rng": 0}


def _umap():
    from numtk.seriation import umap_seriation

    return umap_seriation, (_curve(40),), {"n_neighbors": 8, "rng": 0}


def _bound():
    from numtk.seriation import recovery_bound

    return recovery_bound, (), dict(n_samples=1000, length=1.0, noise=0.001, curvature=0.0, n_features=3,
                                    n_neighbors=15, tangent_neighbors=45)


def _make_curve():
    from numtk.seriation import make_curve

    return make_curve, ("helix", 50, 3, 0.01), {"rng": 0}


def _noise_floor():
    from numtk.seriation import make_curve, noise_floor

    X, t, info = make_curve("spiral", 40, 3, noise=0.01, return_info=True, rng=0)
    return noise_floor, (X, t, info), {}


def _short_circuits():
    from numtk.seriation import short_circuits, stage

    X = _curve()
    return short_circuits, (X, stage(X, n_neighbors=8)), {"factor": 10.0}


def _agreement():
    from numtk.seriation import order_agreement

    return order_agreement, (np.array([3, 0, 4, 1, 2]), np.array([0.1, 0.3, 0.5, 0.2, 0.4])), {}


_GRAPH = {"X": "array2d", "n_neighbors": "int>=1", "allow_disconnected": "bool", "root": "int>=0", "rng": "rng"}

CASES = {c.name: c for c in [
    Case("numtk.seriation.stage", _stage,
         {"X": "array2d", "n_neighbors": "int>=1", "weights": "option", "bandwidth": "real>0",
          "tangent_neighbors": "int>=2", "pca_components": "int>=1", "max_sync_iter": "int>=0",
          "solver": "option", "preconditioner": "option", "tol": "real>0", "max_iter": "int>=1", "loss": "option",
          "split_strands": ("bool", "option"), "allow_disconnected": "bool", "root": "int>=0",
          # `neighbors` must be a (distances, indices) pair: any array (or other value) is refused
          "neighbors": "array2d", "workers": "workers", "rng": "rng"},
         positional={"X": 0}),
    Case("numtk.seriation.spectral_seriation", _spectral,
         {**_GRAPH, "affinity": "option", "weights": "option", "bandwidth": "real>0", "laplacian": "option",
          "eigen_solver": "option"}, positional={"X": 0}),
    Case("numtk.seriation.recanati_seriation", _recanati,
         {**_GRAPH, "affinity": "option", "n_components": "int>=1", "k_local": "int>=2",
          "norm_adjacency": "option", "laplacian": "option", "scale_embedding": "option"},
         positional={"X": 0},
         # None is documented as the same as 'none' for these two
         skip={"norm_adjacency": ("None",), "scale_embedding": ("None",)}),
    Case("numtk.seriation.ltsa_seriation", _ltsa,
         {"X": "array2d", "n_neighbors": "int>=2", "eigen_solver": "option", "root": "int>=0", "rng": "rng"},
         positional={"X": 0}),
    Case("numtk.seriation.tsne_seriation", _tsne,
         {"X": "array2d", "perplexity": "real>0", "init": ("option", "array1d"), "root": "int>=0", "rng": "rng",
          "max_iter": "int>=1"},
         positional={"X": 0}),
    Case("numtk.seriation.umap_seriation", _umap,
         {"X": "array2d", "n_neighbors": "int>=2", "min_dist": "real>=0", "root": "int>=0", "rng": "rng"},
         positional={"X": 0}),
    Case("numtk.seriation.recovery_bound", _bound,
         {"result": "option", "X": "array2d", "length": "real>0", "noise": "real>=0", "curvature": "real>=0",
          "n_samples": "int>=2", "n_features": "int>=1", "n_neighbors": "int>=1", "tangent_neighbors": "int>=2", "bandwidth": "real>0",
          "density_max": "real>0", "density_min": "real>0", "tangent_error": "real>=0", "edge_error": "real>=0",
          "fiedler_value": "real>0", "total_weight": "real>0", "confidence": "prob_open"},
         # n_samples and n_features only enter the closed-form bound (nothing is allocated; documented as any
         # size): a bound for 10**12 points in 2**63 dimensions is a valid, finite evaluation
         # result=None is the documented default (a bound without a fitted result)
         skip={"n_samples": ("2**63", "10**12"), "n_features": ("2**63", "10**12"), "result": ("None",)}),
    Case("numtk.seriation.make_curve", _make_curve,
         {"kind": "option", "n_samples": "count", "n_features": "int>=1", "noise": "real>=0",
          "sampling": "option", "params": "option", "return_info": "bool", "rng": "rng"},
         positional={"kind": 0, "n_samples": 1, "n_features": 2, "noise": 3},
         # None is the documented default of `params` (the kind's default shape)
         skip={"params": ("None",)}),
    Case("numtk.seriation.noise_floor", _noise_floor, {"X": "array2d", "t": "array1d", "info": "option"},
         positional={"X": 0, "t": 1, "info": 2}),
    Case("numtk.seriation.short_circuits", _short_circuits, {"X": "array2d", "result": "option", "factor": "real>0"},
         positional={"X": 0, "result": 1}),
    Case("numtk.seriation.order_agreement", _agreement, {"order": "array1d", "t": "array1d"},
         positional={"order": 0, "t": 1}),
]}
