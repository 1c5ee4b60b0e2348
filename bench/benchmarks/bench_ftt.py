"""asv benchmarks of numtk.ftt: FTT evaluation against the NumPy einsum reference, ALS sweeps, cross."""

import numpy as np

from benchmarks._ftt import (ALS_CASE, CROSS_CASE, als_grid_problem, als_problem, constant_start, make_tt,
                             numpy_evaluate, numtk_als_grid, numtk_als_sweep, numtk_cross, numtk_evaluate, numtk_tt,
                             teneva_als_grid, teneva_cross)


class Evaluate:
    """Values + gradient + Laplacian of a random rank-r Legendre FTT (spec case: M = 1e5, d = 32, n = 16, r = 4)."""

    params = ([10_000, 100_000], [8, 32], [4])
    param_names = ["M", "d", "r"]
    timeout = 300

    def setup(self, M, d, r):
        self.cores = make_tt(d, 16, r)
        self.f = numtk_tt(self.cores)
        self.f_all = numtk_tt(self.cores, workers=-1)
        self.X = np.random.default_rng(1).uniform(-1, 1, (M, d))

    def time_numtk(self, M, d, r):
        numtk_evaluate(self.f, self.X)

    def time_numtk_all_cores(self, M, d, r):
        numtk_evaluate(self.f_all, self.X)

    def time_numtk_predict(self, M, d, r):
        self.f.predict(self.X)

    def time_numpy_einsum(self, M, d, r):
        numpy_evaluate(self.X, self.cores)


class ALSSweep:
    """One ALS sweep (spec case: M = 2e4, d = 32, n = 12, r = 4)."""

    params = ([5_000, 20_000], [32], [2, 4], ["legendre", "bspline"])
    param_names = ["M", "d", "r", "basis"]
    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, M, d, r, basis):
        self.X, self.y = als_problem(M, d, 12, r)

    def time_sweep(self, M, d, r, basis):
        numtk_als_sweep(self.X, self.y, 12, r, basis)

    def time_sweep_all_cores(self, M, d, r, basis):
        numtk_als_sweep(self.X, self.y, 12, r, basis, workers=-1)

    def track_val_rmse(self, M, d, r, basis):
        return numtk_als_sweep(self.X, self.y, 12, r, basis).history_[-1]["val_rmse"]


class ALSVersusTeneva:
    """ALS sweeps against ``teneva.als`` on the same grid rows from the same constant-mean start (spec case:
    M = 2e4, d = 32, n = 12, r = 4); ``track_*_error``: relative error on held-out grid points."""

    params = ([1, 10],)
    param_names = ["sweeps"]
    timeout = 600
    number = 1
    repeat = (1, 3, 120.0)

    def setup(self, sweeps):
        M, d, n, r = ALS_CASE
        self.nodes, self.I, self.y, self.It, self.yt = als_grid_problem(M, d, n)
        self.cores0 = constant_start(d, n, r, float(np.mean(self.y)))

    def time_numtk(self, sweeps):
        numtk_als_grid(self.nodes[self.I], self.y, self.cores0, sweeps)

    def time_teneva(self, sweeps):
        teneva_als_grid(self.nodes, self.I, self.y, self.cores0, sweeps)

    def track_numtk_error(self, sweeps):
        f = numtk_als_grid(self.nodes[self.I], self.y, self.cores0, sweeps)
        return float(np.linalg.norm(f.predict(self.nodes[self.It]) - self.yt) / np.linalg.norm(self.yt))

    def track_teneva_error(self, sweeps):
        import teneva

        Y = teneva_als_grid(self.nodes, self.I, self.y, self.cores0, sweeps)
        return float(np.linalg.norm(teneva.get_many(Y, self.It) - self.yt) / np.linalg.norm(self.yt))


class Cross:
    """Cross interpolation of a rank-3 function on a 16^10 grid: numtk.ftt.tt_cross against teneva.cross."""

    timeout = 300

    def time_numtk(self):
        numtk_cross(*CROSS_CASE)

    def time_teneva(self):
        teneva_cross(*CROSS_CASE)

    def track_numtk_evaluations(self):
        return numtk_cross(*CROSS_CASE).n_evals

    def track_teneva_evaluations(self):
        return teneva_cross(*CROSS_CASE)[1]["m"]
