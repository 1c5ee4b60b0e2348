"""asv benchmarks of numtk.seriation: STAGE and the spectral baselines on the same noisy curves."""

from benchmarks._seriation import CURVES, make_points, methods


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
