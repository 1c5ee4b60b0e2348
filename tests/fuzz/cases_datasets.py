"""Fuzz cases of numtk.datasets (see _harness.py for the catalogue and the outcomes)."""

from _harness import Case


def _adult():
    from numtk.datasets import load_adult
    return load_adult, (), {"subset": "test"}


def _compas():
    from numtk.datasets import load_compas
    return load_compas, (), {"path": "/nonexistent/compas.csv"}


CASES = {c.name: c for c in [
    Case("numtk.datasets.load_adult", _adult, {"subset": "option"}),
    # a path that does not exist is a FileNotFoundError naming it (the documented behaviour); the
    # invalid values here are of the wrong type
    Case("numtk.datasets.load_compas", _compas, {"path": ("callable",)}),
]}
