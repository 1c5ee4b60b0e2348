"""asv benchmarks of numtk.mixture: chinchilla_fit, MixtureLaw('camel').fit, predict, optimal_mixture and
allocate_budget on the problems of ``compare.py --mixture`` (``_mixture.py``), at small sizes, beside the plain
SciPy anchors written there (run, like there, with BLAS on one thread)."""

import numpy as np

from benchmarks._mixture import (TARGET_SIZE, _one_thread, allocation_problem, chinchilla_rows, mixture_problem,
                                 numpy_predict, replication_grid, scipy_camel_fit, scipy_chinchilla,
                                 scipy_optimal_mixture)


class ChinchillaFit:
    """245 planted rows: the variable-projection default, 50 of the replication's grid starts with the
    analytic gradient, and the replication's recipe (finite-difference L-BFGS-B) from the same 50 starts."""

    timeout = 300

    def setup(self):
        self.N, self.D, self.L = chinchilla_rows()
        self.starts = replication_grid()[np.sort(np.random.default_rng(0).choice(4500, 50, replace=False))]

    def time_chinchilla_fit(self):
        from numtk.mixture import chinchilla_fit

        chinchilla_fit(self.N, self.D, self.L)

    def peakmem_chinchilla_fit(self):
        from numtk.mixture import chinchilla_fit

        chinchilla_fit(self.N, self.D, self.L)

    def time_chinchilla_fit_grid_50_starts(self):
        from numtk.mixture import chinchilla_fit

        chinchilla_fit(self.N, self.D, self.L, init="grid", grid=self.starts)

    def time_scipy_replication_50_starts(self):
        _one_thread(lambda: scipy_chinchilla(self.N, self.D, self.L, self.starts))()


class CamelFit:
    """MixtureLaw('camel').fit on the demo's planted world: 5 sizes x 20 mixtures, M = V = 5 (the target case
    with 32 starts)."""

    params = [8, 32]
    param_names = ["n_starts"]
    timeout = 300

    def setup(self, n_starts):
        _, self.X, self.y = mixture_problem()

    def time_fit(self, n_starts):
        from numtk.mixture import MixtureLaw

        MixtureLaw("camel", n_starts=n_starts, rng=0).fit(self.X, self.y)

    def peakmem_fit(self, n_starts):
        from numtk.mixture import MixtureLaw

        MixtureLaw("camel", n_starts=n_starts, rng=0).fit(self.X, self.y)


class CamelFitAnchor:
    """The SciPy anchor (least_squares, Huber, finite-difference Jacobian) on the same problem, 8 starts."""

    timeout = 300

    def setup(self):
        _, self.X, self.y = mixture_problem()

    def time_scipy_least_squares_8_starts(self):
        _one_thread(lambda: scipy_camel_fit(self.X, self.y, n_starts=8))()


class CamelFitRegMixSize:
    """M = 17, V = 13 at a fifth of RegMix's size (5 sizes x 40 mixtures), 8 starts."""

    timeout = 300

    def setup(self):
        _, self.X, self.y = mixture_problem(17, 13, 5, 40)

    def time_fit(self):
        from numtk.mixture import MixtureLaw

        MixtureLaw("camel", n_starts=8, rng=0).fit(self.X, self.y)

    def peakmem_fit(self):
        from numtk.mixture import MixtureLaw

        MixtureLaw("camel", n_starts=8, rng=0).fit(self.X, self.y)


class Predict:
    params = [10**4, 10**6]
    param_names = ["n"]

    def setup(self, n):
        from numtk.mixture import mixture_features

        self.law, _, _ = mixture_problem()
        g = np.random.default_rng(3)
        self.N = np.exp(g.uniform(np.log(1e7), np.log(1e10), n))
        self.R = g.dirichlet(np.ones(5), n)
        self.X = mixture_features(self.N, self.R)

    def time_predict(self, n):
        self.law.predict(self.X)

    def peakmem_predict(self, n):
        self.law.predict(self.X)

    def time_numpy_expression(self, n):
        numpy_predict(self.law.params_, self.law.reference_size_, self.N, self.R)


class OptimalMixture:
    params = [[(5, 5), (17, 13)]]
    param_names = ["M, V"]

    def setup(self, size):
        from numtk.mixture import planted_law

        self.law = planted_law(*size, rng=0)

    def time_optimal_mixture(self, size):
        from numtk.mixture import optimal_mixture

        optimal_mixture(self.law, TARGET_SIZE)

    def peakmem_optimal_mixture(self, size):
        from numtk.mixture import optimal_mixture

        optimal_mixture(self.law, TARGET_SIZE)

    def time_scipy_slsqp(self, size):
        _one_thread(lambda: scipy_optimal_mixture(self.law.params_, self.law.reference_size_, TARGET_SIZE))()


class AllocateBudget:
    """500 candidates (sizes x mixtures), p = 55, the LP path; and a quarter of it."""

    params = [[(10, 50), (5, 25)]]
    param_names = ["S, m"]
    timeout = 120

    def setup(self, size):
        self.kw = allocation_problem(*size)

    def time_allocate_budget(self, size):
        from numtk.mixture import allocate_budget

        allocate_budget(**self.kw)

    def peakmem_allocate_budget(self, size):
        from numtk.mixture import allocate_budget

        allocate_budget(**self.kw)
