"""Test configuration shared by every area."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Oracles shared by the tests live in tests/reference/ (pure NumPy, independent of numtk).
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Derandomised by default (reproducible CI); `--hypothesis-profile=explore` searches afresh.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("NUMTK_HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    # CI runs the suite against the installed wheel; make sure that is what was imported.
    if os.environ.get("NUMTK_TEST_INSTALLED") == "1":
        import numtk

        checkout = Path(__file__).resolve().parents[1]
        where = Path(numtk.__file__).resolve()
        if checkout in where.parents:
            raise pytest.UsageError(f"NUMTK_TEST_INSTALLED=1 but numtk was imported from the source "
                                    f"tree ({where}), not from the installed package")


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)
