"""Fuzz cases of numtk.torch.privcode (collected by cases_torch.py; see _harness.py for the catalogue)."""

from _harness import Case  # noqa: F401

PRIVCODE: list = []
