"""asv benchmarks of numtk.torch.privcode: one DP-SGD step of numtk and of Opacus (GradSampleModule + DPOptimizer)
beside a non-private step on the demo's character LM (the problems of ``compare.py --privcode``,
``_torch_privcode.py``, at a small batch), ghost clipping (numtk's and Opacus's) on the MLP classifier, and the
accountant (uncached), torch on one thread. Skipped (NotImplementedError in setup) where torch, or Opacus for its
contestant, is not installed."""

from benchmarks._torch_privcode import accountant_calls, step_calls


class DPSGDStep:
    """One training step of the demo's character LM, batch 32 lines: numtk's dp_sgd_step, Opacus's, non-private."""

    params = [["numtk", "opacus", "non-private"]]
    param_names = ["contestant"]
    timeout = 300
    problem, options, missing = "char LM (demo)", {"batch": 32}, "Opacus is not installed"

    def setup(self, contestant):
        import warnings

        try:
            import torch  # noqa: F401
        except ImportError:  # pragma: no cover - asv skips the benchmark
            raise NotImplementedError("torch is not installed")
        from numtk.torch._common import torch_threads

        warnings.simplefilter("ignore")
        calls = step_calls(self.problem, **self.options)
        if contestant not in calls:
            raise NotImplementedError(self.missing)
        self.threads = torch_threads(1)
        self.threads.__enter__()
        self.call = calls[contestant]

    def teardown(self, contestant):
        self.threads.__exit__(None, None, None)

    def time_step(self, contestant):
        self.call()


class GhostStep(DPSGDStep):
    """One training step of the MLP classifier (256 -> 512 -> 512 -> 10, batch 256): numtk's dp_sgd_step with
    method='ghost', Opacus's ghost clipping (GradSampleModuleFastGradientClipping), non-private."""

    params = [["numtk ghost", "opacus ghost", "non-private"]]
    problem, options, missing = "MLP classifier", {}, "Opacus (with ghost clipping) is not installed"


class Accountant:
    """epsilon of q = 0.01, sigma = 1, 1000 steps, delta = 1e-5: numtk uncached on both grids and cached, Opacus."""

    params = [["numtk, integer orders", "numtk, Opacus grid", "numtk, cached", "opacus, integer orders",
               "opacus, Opacus grid"]]
    param_names = ["accountant"]
    timeout = 120

    def setup(self, accountant):
        try:
            import torch  # noqa: F401
        except ImportError:  # pragma: no cover
            raise NotImplementedError("torch is not installed")
        calls = accountant_calls()
        if accountant not in calls:
            raise NotImplementedError("Opacus is not installed")
        self.call = calls[accountant]

    def time_epsilon(self, accountant):
        self.call()
