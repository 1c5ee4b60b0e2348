"""Fuzz cases of numtk.mixture (see _harness.py for the catalogue and the outcomes).

Laws are fitted on a few dozen planted runs with few starts, so that every call takes well under a second.
Each room of the area keeps its cases in its own section below.
"""

import numpy as np

from _harness import Case


def _m():
    import numtk.mixture as m
    return m


# --- laws: MixtureLaw, mixture_features -------------------------------------------------------------
LAW: list = []

# --- capacity-KKT law and Chinchilla ----------------------------------------------------------------
KKT_CHINCHILLA: list = []

# --- optimal mixture and the loss-to-benchmark law --------------------------------------------------
OPTIMUM_BENCHMARK: list = []

# --- budget allocation ------------------------------------------------------------------------------
ALLOCATION: list = []

# --- planted worlds ---------------------------------------------------------------------------------
PLANTED: list = []

CASES = {c.name: c for c in LAW + KKT_CHINCHILLA + OPTIMUM_BENCHMARK + ALLOCATION + PLANTED}
