"""Fuzz cases of numtk.torch.psro_oracle (collected by cases_torch.py; see _harness.py for the catalogue)."""

from _harness import Case  # noqa: F401

PSRO_ORACLE: list = []
