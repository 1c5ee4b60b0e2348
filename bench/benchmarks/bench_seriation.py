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


class CloseArms:
    """The close-arm target (issue: within 0.01 of the noise floor while the arm gap is at least 5 noise widths)
    at its hardest measured sampling: make_curve's spiral and nested arcs, n = 2000, gap 0.6 = 5 noise widths,
    data seeds 1-8, ``stage(X, rng=0)``. ``track_`` the seeds within 0.01 of ``noise_floor`` and the worst
    |tau| - floor (measured: spiral 6 of 8 in d = 20 and 100, nested arcs 8 of 8)."""

    params = ([20, 100], ["spiral", "nested_arcs"])
    param_names = ["dim", "curve"]
    timeout = 600
    number = 1
    repeat = 1

    def setup(self, dim, curve):
        from numtk.seriation import make_curve, noise_floor, order_agreement, stage

        self.gaps = []
        for seed in range(1, 9):
            X, t, info = make_curve(curve, 2000, dim, noise=0.12, params={"gap": 0.6}, return_info=True, rng=seed)
            self.gaps.append(order_agreement(stage(X, rng=0).order, t) - noise_floor(X, t, info).agreement)

    def track_seeds_at_floor(self, dim, curve):
        return sum(g >= -0.01 for g in self.gaps)

    def track_worst_gap(self, dim, curve):
        return min(self.gaps)
