"""asv benchmarks of numtk.torch.mswt: one level of dwt2d and idwt2d (forward, and forward with backward) beside
PyWavelets' dwt2 and idwt2, on the problem of ``compare.py --mswt`` (``_torch_mswt.py``) at a small batch
(8, 3, 128, 128), torch on one thread."""

from benchmarks._torch_mswt import CASES, _bands, images


class DWT2:
    """(8, 3, 128, 128) images: numtk's dwt2d / idwt2d forward and forward + backward, PyWavelets' dwt2 / idwt2."""

    params = [["float32", "float64"], [f"{w}-{m}" for w, m in CASES]]
    param_names = ["dtype", "case"]
    timeout = 300

    def setup(self, dtype, case):
        import pywt
        import torch

        from numtk.torch.mswt import dwt2d

        from numtk.torch._common import torch_threads

        self.threads = torch_threads(1)
        self.threads.__enter__()
        self.wavelet, self.mode = case.split("-")
        self.x = images((8, 3, 128, 128), dtype)
        self.X = torch.from_numpy(self.x)
        self.ref = pywt.dwt2(self.x, self.wavelet, mode=self.mode)
        self.coeffs = dwt2d(self.X, self.wavelet, self.mode)

    def teardown(self, dtype, case):
        self.threads.__exit__(None, None, None)

    def time_numtk_dwt2d(self, dtype, case):
        from numtk.torch.mswt import dwt2d

        dwt2d(self.X, self.wavelet, self.mode)

    def time_numtk_dwt2d_forward_backward(self, dtype, case):
        from numtk.torch.mswt import dwt2d

        x = self.X.clone().requires_grad_()
        sum(c.sum() for c in _bands(dwt2d(x, self.wavelet, self.mode))).backward()

    def time_pywt_dwt2(self, dtype, case):
        import pywt

        pywt.dwt2(self.x, self.wavelet, mode=self.mode)

    def time_numtk_idwt2d(self, dtype, case):
        from numtk.torch.mswt import idwt2d

        idwt2d(self.coeffs, self.wavelet, self.mode)

    def time_pywt_idwt2(self, dtype, case):
        import pywt

        pywt.idwt2(self.ref, self.wavelet, mode=self.mode)

    def peakmem_numtk_dwt2d_forward_backward(self, dtype, case):
        from numtk.torch.mswt import dwt2d

        x = self.X.clone().requires_grad_()
        sum(c.sum() for c in _bands(dwt2d(x, self.wavelet, self.mode))).backward()
