"""Fuzz cases of numtk.moe (see _harness.py for the catalogue and the outcomes).

Plans are of a few experts on two to four devices, so that every call takes well under a second. Each room
of the area keeps its cases in its own section below.
"""

import numpy as np

from _harness import Case


def _m():
    import numtk.moe as m
    return m


def _loads8():
    return np.array([40, 3, 0, 9, 1, 1, 30, 4], dtype=np.int64)


# --- planning: llep_plan, standard_ep_plan ----------------------------------------------------------
PLANNING: list = []

# --- eplb_rebalance and the load generators ---------------------------------------------------------
EPLB_LOADS: list = []

# --- optimal_plan -----------------------------------------------------------------------------------
MILP: list = []

# --- simulate_ep, moe_forward -----------------------------------------------------------------------
SIMULATION: list = []

CASES = {c.name: c for c in PLANNING + EPLB_LOADS + MILP + SIMULATION}
