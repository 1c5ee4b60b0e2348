"""Fuzz cases of numtk.algebra (see _harness.py for the catalogue and the outcomes)."""

from _harness import Case  # noqa: F401

CASES: dict = {}
