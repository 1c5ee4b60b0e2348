"""Fuzz cases of numtk.torch.hirsch (collected by cases_torch.py; see _harness.py for the catalogue)."""

from _harness import Case  # noqa: F401

HIRSCH: list = []
