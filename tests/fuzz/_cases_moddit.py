"""Fuzz cases of numtk.torch.moddit (collected by cases_torch.py; see _harness.py for the catalogue)."""

import numpy as np  # noqa: F401

from _harness import Case  # noqa: F401

MODDIT: list = []
