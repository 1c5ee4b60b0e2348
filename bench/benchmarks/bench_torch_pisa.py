"""asv benchmarks of numtk.torch.pisa: the split's mechanism (numtk and a naive two-pass version) and the
calibration functions, on the problems of ``compare.py --pisa`` (``_torch_pisa.py``) at small sizes, torch on
one thread."""

from benchmarks._torch_pisa import _threads, calibration_calls, clip_calls


class ClipAndNoise:
    """Per-token clipping and Gaussian noise of a (B, 128, d) float32 tensor: numtk and the naive two passes."""

    params = [[(8, 384), (32, 768)], ["numtk", "naive"]]
    param_names = ["B_d", "impl"]
    timeout = 120

    def setup(self, B_d, impl):
        self.threads = _threads(1)
        self.threads.__enter__()
        self.call = clip_calls(*B_d)[impl]
        self.call()

    def teardown(self, B_d, impl):
        self.threads.__exit__(None, None, None)

    def time_clip_and_noise(self, B_d, impl):
        self.call()

    def peakmem_clip_and_noise(self, B_d, impl):
        self.call()


class Calibration:
    """One call of gaussian_sigma, gaussian_delta, gaussian_epsilon and split_epsilon (T = 128, E = 10)."""

    params = [["gaussian_sigma", "gaussian_delta", "gaussian_epsilon", "split_epsilon"]]
    param_names = ["function"]
    timeout = 60

    def setup(self, function):
        self.call = calibration_calls()[function]

    def time_calibration(self, function):
        self.call()
