"""Fuzz cases of numtk.torch.contrastive (collected by cases_torch.py; see _harness.py for the catalogue)."""

from _harness import Case  # noqa: F401

CONTRASTIVE: list = []
