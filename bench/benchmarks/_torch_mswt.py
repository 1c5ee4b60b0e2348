"""Side-by-side runs of numtk.torch.mswt for ``bench/compare.py --mswt``: the 2-D DWT and inverse in torch against
PyWavelets on the CPU.

The problem of the issue: a batch of images (64, 3, 256, 256) (``--quick``: (8, 3, 128, 128)), standard normal, in
float32 and float64, one level of :func:`~numtk.torch.mswt.dwt2d` / :func:`~numtk.torch.mswt.idwt2d` in
``'periodization'`` mode (the lossless halving) for Haar and db4, and db4 in ``'symmetric'`` mode (PyWavelets'
default, with its longer outputs). PyWavelets (``pywt.dwt2``, ``pywt.idwt2``) is the anchor: one C loop per row, one
thread, on the same arrays.

Per row, in interleaved rounds (:func:`benchmarks._timing.interleaved`), medians in seconds: PyWavelets' forward,
numtk's forward, and numtk's forward plus the backward of the sum of the outputs (PyWavelets has no backward:
the issue's "forward and backward" is reported as torch's forward + backward beside PyWavelets' forward), with
torch on one intra-op thread, like for like with PyWavelets' one thread (``NUMTK_BENCH_TORCH_THREADS=all`` adds
rows with all of torch's threads: on cores shared with other processes these measure the contention more than
the transform). Ratio = PyWavelets / numtk (> 1: numtk faster). ``max |diff|`` is the largest absolute difference of
numtk's coefficients (or reconstruction) from PyWavelets' on the timed arrays.
"""

from __future__ import annotations

import os
import time

import numpy as np

from benchmarks._timing import interleaved

__all__ = ["compare", "images", "CASES"]

#: (wavelet, mode) of the table's rows
CASES = (("haar", "periodization"), ("db4", "periodization"), ("db4", "symmetric"))


def images(shape, dtype, *, seed: int = 0) -> np.ndarray:
    """Standard normal images of ``shape`` in ``dtype``."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _bands(c):
    return (c[0], *c[1])


def _calls(x: np.ndarray, wavelet: str, mode: str):
    """The contestants of one row: name -> callable, and the max |diff| of the forward and of the inverse."""
    import pywt
    import torch

    from numtk.torch.mswt import dwt2d, idwt2d

    X = torch.from_numpy(x)
    Xg = X.clone().requires_grad_()
    ref = pywt.dwt2(x, wavelet, mode=mode)
    ours = dwt2d(X, wavelet, mode)
    diff_fwd = max(float(np.abs(a.numpy() - b).max()) for a, b in zip(_bands(ours), _bands(ref)))
    rec_ref = pywt.idwt2(ref, wavelet, mode=mode)
    rec = idwt2d(ours, wavelet, mode)
    diff_inv = float(np.abs(rec.numpy() - rec_ref).max())
    coeffs = tuple(c.detach().clone().requires_grad_() for c in _bands(ours))

    def fwd_bwd():
        Xg.grad = None
        sum(c.sum() for c in _bands(dwt2d(Xg, wavelet, mode))).backward()

    def inv_bwd():
        for c in coeffs:
            c.grad = None
        idwt2d((coeffs[0], coeffs[1:]), wavelet, mode).sum().backward()

    fwd = {"pywt": lambda: pywt.dwt2(x, wavelet, mode=mode), "numtk": lambda: dwt2d(X, wavelet, mode),
           "numtk f+b": fwd_bwd}
    inv = {"pywt": lambda: pywt.idwt2(ref, wavelet, mode=mode), "numtk": lambda: idwt2d(ours, wavelet, mode),
           "numtk f+b": inv_bwd}
    return fwd, inv, diff_fwd, diff_inv


def compare(*, quick: bool = False, options=None) -> None:
    """Print the comparison table (see the module docstring)."""
    import pywt
    import torch

    from numtk.torch._common import torch_threads

    shape = (8, 3, 128, 128) if quick else (64, 3, 256, 256)
    repeat = 3 if quick else 5
    if options is not None and getattr(options, "repeat", None):
        repeat = min(options.repeat, repeat)
    out = print
    default = torch.get_num_threads()
    threads_list = [1] if default == 1 or os.environ.get("NUMTK_BENCH_TORCH_THREADS") != "all" else [1, None]
    out("\n== mswt: DWT/IDWT in torch against PyWavelets (CPU) ==")
    out(f"batch {shape}, one level; torch {torch.__version__}, PyWavelets {pywt.__version__}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}. Medians of {repeat} interleaved rounds (seconds); ratio = "
        f"PyWavelets / numtk (> 1: numtk faster); f+b = numtk's forward and backward (PyWavelets has no backward); "
        f"torch on 1 thread" + ("" if len(threads_list) == 1 else f" and on its {default}") + ".")
    head = (f"  {'dtype':<8} {'wavelet':<7} {'mode':<13} {'op':<5} {'threads':>7} {'pywt s':>8} {'numtk s':>8} "
            f"{'ratio':>6} {'f+b s':>8} {'f+b/pywt':>9} {'max |diff|':>10}")
    out(head)
    t0 = time.perf_counter()
    for dtype in (np.float32, np.float64):
        x = images(shape, dtype)
        for wavelet, mode in CASES:
            fwd, inv, d_fwd, d_inv = _calls(x, wavelet, mode)
            for op, calls, diff in (("dwt2", fwd, d_fwd), ("idwt2", inv, d_inv)):
                for threads in threads_list:
                    with torch_threads(threads):
                        t = interleaved(calls, repeat=repeat)
                    med = t.medians
                    out(f"  {np.dtype(dtype).name:<8} {wavelet:<7} {mode:<13} {op:<5} "
                        f"{default if threads is None else threads:>7d} {med['pywt']:8.4f} {med['numtk']:8.4f} "
                        f"{t.ratio('pywt', 'numtk'):6.2f} {med['numtk f+b']:8.4f} "
                        f"{med['numtk f+b'] / med['pywt']:9.2f} {diff:10.1e}")
    out(f"({time.perf_counter() - t0:.1f} s)")
