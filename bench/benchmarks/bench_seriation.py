"""asv benchmarks of numtk.seriation: STAGE and the spectral baselines on the same noisy curves."""

from benchmarks._seriation import CURVES, DIM, SCALING_CURVES, SCALING_NOISE, make_points, methods


class Seriation:
    """Time and |tau| (``track_``) of each method; d = 100, noise as in ``_seriation.CURVES``."""

    params = ([1_000, 10_000], list(CURVES))
    param_names = ["n", "curve"]
    timeout = 600
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, n, curve):
        self.X, self.t = make_points(n, curve)
        self.fns = methods()

    def time_stage(self, n, curve):
        self.fns["stage"](self.X)

    def time_spectral(self, n, curve):
        self.fns["spectral"](self.X)

    def time_recanati(self, n, curve):
        self.fns["recanati"](self.X)

    def _tau(self, name):
        from numtk.seriation import order_agreement

        return order_agreement(self.fns[name](self.X).order, self.t)

    def track_tau_stage(self, n, curve):
        return self._tau("stage")

    def track_tau_spectral(self, n, curve):
        return self._tau("spectral")

    def track_tau_recanati(self, n, curve):
        return self._tau("recanati")


class SeriationScaling:
    """``stage`` (all cores) against n on the scaling table's curves (make_curve defaults, d = 100, noise 0.05):
    time, and (``track_``) the Laplacian solve's CG iterations, which must not grow with n."""

    params = ([10_000, 100_000], list(SCALING_CURVES))
    param_names = ["n", "curve"]
    timeout = 900
    number = 1
    repeat = (1, 3, 120.0)

    def setup(self, n, curve):
        from numtk.seriation import make_curve

        self.X, self.t = make_curve(curve, n, DIM, noise=SCALING_NOISE, rng=20261203)

    def _run(self):
        from numtk.seriation import stage

        return stage(self.X, rng=0, workers=-1)

    def time_stage(self, n, curve):
        self._run()

    def track_cg_iterations(self, n, curve):
        return self._run().n_iter

    def track_tau(self, n, curve):
        from numtk.seriation import order_agreement

        return order_agreement(self._run().order, self.t)
