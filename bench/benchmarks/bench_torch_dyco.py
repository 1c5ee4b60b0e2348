"""asv benchmarks of numtk.torch.dyco: the RML2016.10a-like generator (channel on and off), the expert
features, and one training step of SimCLR against DyCo-CL on the demo's model, as ``compare.py --dyco``
(``_torch_dyco.py``) at small sizes, torch on one thread."""

from benchmarks._torch_dyco import _blas_one_thread, _threads, generator_calls, step_calls


class Generator:
    """rml2016_like(100, snr_db=[0, 10]): 2200 windows, channel on or off; expert_features of them. BLAS held
    to one thread (threadpoolctl, where installed) and torch on one thread, as compare.py."""

    params = [["channel", "no channel", "expert_features"]]
    param_names = ["call"]
    timeout = 120

    def setup(self, call):
        self.blas = _blas_one_thread()[0]
        self.blas.__enter__()
        self.threads = _threads(1)
        self.threads.__enter__()
        self.call = generator_calls()[call]

    def teardown(self, call):
        self.threads.__exit__(None, None, None)
        self.blas.__exit__(None, None, None)

    def time_call(self, call):
        self.call()


class TrainingStep:
    """One step (loss, backward, Adam) at batch 64: SimCLR, DyCo-CL with one and two power steps, and the
    virtual adversarial perturbation alone."""

    params = [["simclr", "dyco", "dyco n_power=2", "perturbation alone"]]
    param_names = ["step"]
    timeout = 300

    def setup(self, step):
        self.threads = _threads(1)
        self.threads.__enter__()
        self.call = step_calls(64)[step]
        self.call()

    def teardown(self, step):
        self.threads.__exit__(None, None, None)

    def time_step(self, step):
        self.call()
