"""Fuzz cases of numtk.datasets (see _harness.py for the catalogue and the outcomes)."""

from _harness import Case


def _adult():
    from numtk.datasets import load_adult
    return load_adult, (), {"subset": "test"}


def _compas():
    from numtk.datasets import load_compas
    return load_compas, (), {"path": "/nonexistent/compas.csv"}


def _lorenz96():
    # n = 5: the catalogue's 1-D arrays of 5 values are valid initial states (1e308 among them)
    from numtk.datasets import lorenz96
    return lorenz96, (), {"n": 5, "steps": 5, "burn_in": 5, "rng": 0}


def _kuramoto_sivashinsky():
    from numtk.datasets import kuramoto_sivashinsky
    return kuramoto_sivashinsky, (), {"n": 8, "steps": 5, "burn_in": 5, "rng": 0}


def _lyapunov_lorenz96():
    from numtk.datasets import lyapunov_exponent
    return lyapunov_exponent, (), {"system": "lorenz96", "n": 6, "steps": 20, "burn_in": 5, "n_exponents": 2,
                                   "rng": 0}


def _lyapunov_ks():
    from numtk.datasets import lyapunov_exponent
    return lyapunov_exponent, (), {"system": "kuramoto_sivashinsky", "n": 8, "steps": 20, "burn_in": 5,
                                   "n_exponents": 2, "rng": 0}


def _rml2016_like():
    # one class, one SNR, short windows: a fast valid call
    from numtk.datasets import rml2016_like
    return rml2016_like, (), {"n_per_class": 2, "snr_db": [0.0], "classes": ["QPSK"], "length": 16, "rng": 0}


CASES = {c.name: c for c in [
    Case("numtk.datasets.load_adult", _adult, {"subset": "option"}),
    # a path that does not exist is a FileNotFoundError naming it (the documented behaviour); the
    # invalid values here are of the wrong type
    Case("numtk.datasets.load_compas", _compas, {"path": ("callable",)}),
    Case("numtk.datasets.lorenz96", _lorenz96, {}),
    Case("numtk.datasets.kuramoto_sivashinsky", _kuramoto_sivashinsky, {}),
    Case("numtk.datasets.lyapunov_exponent", _lyapunov_lorenz96, {}),
    # the Kuramoto-Sivashinsky branch: its own grid, step and tangent space
    Case("numtk.datasets.lyapunov_exponent[kuramoto_sivashinsky]", _lyapunov_ks,
         {"n": "count", "length": "real>0", "dt": "real>0", "n_exponents": "count", "qr_every": "count"}),
    # classes=None is the documented default (all eleven classes)
    Case("numtk.datasets.rml2016_like", _rml2016_like, {}, skip={"classes": ("None",)}),
]}
