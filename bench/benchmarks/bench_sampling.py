"""asv benchmarks of numtk.sampling: ScoreBasedSampler.fit (time, |dlog Z|, ESS) and the sample metrics."""

import warnings

import numpy as np

from benchmarks._sampling import SETTINGS, fit_sampler, make_target
from benchmarks._sampling_metrics import make_samples, numpy_mmd


class SamplerFit:
    """Fit from scratch (BSDE, no exact samples) on a 1-D two-mode mixture and a d = 3 Gaussian."""

    params = (list(SETTINGS),)
    param_names = ["problem"]
    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, problem):
        self.target = make_target(problem)

    def time_fit(self, problem):
        fit_sampler(problem)

    def _estimate(self, problem):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit_sampler(problem).log_Z(n=20000, rng=1)

    def track_abs_dlogZ(self, problem):
        return abs(self._estimate(problem).value - self.target.log_Z)

    def track_ess(self, problem):
        return self._estimate(problem).ess


class SamplerPaths:
    """Generative paths with importance weights (log Z estimate) of a fitted sampler."""

    params = ([2000, 20000],)
    param_names = ["n"]
    timeout = 300

    def setup(self, n):
        self.sampler = fit_sampler("mixture-1d")

    def time_log_Z(self, n):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.sampler.log_Z(n=n, rng=1)


class Sinkhorn:
    """sinkhorn_distance (debiased=False, absolute eps, 100 iterations) against POT's ot.sinkhorn2."""

    params = ([2000], [2, 32])
    param_names = ["n", "d"]
    timeout = 300

    def setup(self, n, d):
        self.X, self.Y = make_samples(n, d)
        self.a = np.full(n, 1.0 / n)
        X, Y = self.X, self.Y
        D2 = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2.0 * (X @ Y.T)  # as ot.dist
        self.eps = 0.05 * float(np.median(np.maximum(D2, 0.0)))

    def time_numtk(self, n, d):
        from numtk.sampling import sinkhorn_distance

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sinkhorn_distance(self.X, self.Y, epsilon=self.eps, relative_epsilon=False, debiased=False,
                              max_iter=100, tol=0.0)

    def time_pot_log(self, n, d):
        try:
            import ot
        except ImportError:
            raise NotImplementedError("POT is not installed")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ot.sinkhorn2(self.a, self.a, ot.dist(self.X, self.Y), reg=self.eps, method="sinkhorn_log",
                         numItermax=100, stopThr=0.0)


class MMD:
    """mmd (compiled pairwise sums) against the dense NumPy reference, same median bandwidth."""

    params = ([2000], [2, 32])
    param_names = ["n", "d"]
    timeout = 300

    def setup(self, n, d):
        from numtk.sampling._metrics import _median_distance

        self.X, self.Y = make_samples(n, d)
        self.h = _median_distance(self.X, self.Y)

    def time_numtk(self, n, d):
        from numtk.sampling import mmd

        mmd(self.X, self.Y, bandwidth=self.h)

    def time_numpy(self, n, d):
        numpy_mmd(self.X, self.Y, self.h)
