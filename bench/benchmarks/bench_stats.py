"""numtk.stats benchmarks: numtk next to its SciPy anchor on identical, seeded data.

Targets (spec A1.7, n = 10^6): continuous data >= 2.0x SciPy with ``workers=1``, ties
(ints 0..99) >= 1.5x, n <= 10^3 not slower; ``workers=k`` >= 0.6 k times the ``workers=1``
throughput for k <= 8; <= 48 bytes per element of extra memory. ``bench/compare.py`` prints
the ratios in one run; these classes track them over commits.
"""

import scipy.stats

import numtk.stats

from ._data import kendall_tau_b_brute_force, make_data

# Largest n at which the O(n^2) brute force is timed (about 1 s on one core).
REFERENCE_MAX_N = 10_000

SIZES = [1_000, 10_000, 100_000, 1_000_000, 10_000_000]
DATA = ["continuous", "ties", "heavy_ties"]


class KendallTau:
    """numtk.stats.kendall_tau next to scipy.stats.kendalltau (tau-b, two-sided)."""

    params = (SIZES, DATA)
    param_names = ["n", "data"]
    # One SciPy call at n = 10^7 takes about 6 s on a small machine; asv repeats it.
    timeout = 600

    def setup(self, n, data):
        self.x, self.y = make_data(n, data)

    def time_numtk(self, n, data):
        numtk.stats.kendall_tau(self.x, self.y)

    def time_numtk_all_cores(self, n, data):
        numtk.stats.kendall_tau(self.x, self.y, workers=-1)

    def time_scipy(self, n, data):
        scipy.stats.kendalltau(self.x, self.y)

    def peakmem_numtk(self, n, data):
        # Includes the 16 n bytes of input; compare with peakmem_scipy.
        numtk.stats.kendall_tau(self.x, self.y)

    def peakmem_scipy(self, n, data):
        scipy.stats.kendalltau(self.x, self.y)


class KendallTauReference:
    """Pure-NumPy O(n^2) pair count: the oracle's cost, on the same grid as KendallTau.

    A separate class because an asv ``setup`` that raises ``NotImplementedError`` skips
    every method of its class for that parameter combination.
    """

    params = KendallTau.params
    param_names = KendallTau.param_names
    timeout = 600

    def setup(self, n, data):
        if n > REFERENCE_MAX_N:
            raise NotImplementedError(f"O(n^2) reference not run for n > {REFERENCE_MAX_N}")
        self.x, self.y = make_data(n, data)

    def time_reference(self, n, data):
        kendall_tau_b_brute_force(self.x, self.y)


class KendallDistance:
    """numtk.stats.kendall_distance: exact number of discordant pairs."""

    params = ([10_000, 1_000_000], ["continuous", "ties"])
    param_names = ["n", "data"]
    timeout = 300

    def setup(self, n, data):
        self.x, self.y = make_data(n, data)

    def time_kendall_distance(self, n, data):
        numtk.stats.kendall_distance(self.x, self.y)

    def time_kendall_distance_all_cores(self, n, data):
        numtk.stats.kendall_distance(self.x, self.y, workers=-1)


class KendallTauInterval:
    """numtk.stats.kendall_tau_interval, all three interval methods (95 %)."""

    params = (
        [10_000, 1_000_000],
        ["continuous", "ties"],
        ["bernstein", "hoeffding", "asymptotic"],
    )
    param_names = ["n", "data", "method"]
    timeout = 300

    def setup(self, n, data, method):
        self.x, self.y = make_data(n, data)

    def time_kendall_tau_interval(self, n, data, method):
        numtk.stats.kendall_tau_interval(self.x, self.y, confidence=0.95, method=method)


class KendallThreadCrossover:
    """kendall_tau with workers=1, -1 and 2 forced past the grain, at sizes around the grains (see _kendall_grain).

    ``workers=-1`` should track ``workers=1`` below twice the grain (one thread) and not fall behind it above;
    ``time_two_threads_forced`` is the threaded path where the grain would refuse it (the crossover).
    ``bench/compare.py --kernels none --threads`` prints the same as paired ratios.
    """

    params = ([30_000, 100_000, 300_000, 1_000_000], ["continuous", "ties", "heavy_ties"])
    param_names = ["n", "data"]
    timeout = 300

    def setup(self, n, data):
        self.x, self.y = make_data(n, data)

    def time_one_thread(self, n, data):
        numtk.stats.kendall_tau(self.x, self.y, workers=1)

    def time_all_cores(self, n, data):
        numtk.stats.kendall_tau(self.x, self.y, workers=-1)

    def time_two_threads_forced(self, n, data):
        from numtk._lib._workers import uncapped

        with uncapped():
            numtk.stats.kendall_tau(self.x, self.y, workers=2)


def timeraw_import_numtk():
    """``import numtk`` plus its first area, in a fresh interpreter, on top of numpy and scipy."""
    return "import numtk, numtk.stats", "import numpy, scipy"


def timeraw_import_numpy_scipy():
    """The baseline the import cost is measured against."""
    return "import numpy, scipy"
