"""Side-by-side runs of numtk.torch.contrastive for ``bench/compare.py --contrastive``: the vMF sampler against
:class:`scipy.stats.vonmises_fisher` (SciPy >= 1.11).

For each dimension d (3, 10, 128) and concentration kappa, both samplers draw n unit vectors around one mean
direction: :func:`numtk.torch.contrastive.sample_vmf` (Wood's rejection sampler, vectorised in torch, float64;
torch on one intra-op thread, like SciPy, unless ``NUMTK_BENCH_TORCH_THREADS=all``) and
``scipy.stats.vonmises_fisher(mu, kappa).rvs(n)``. Interleaved rounds (:func:`benchmarks._timing.interleaved`),
medians; samples per second of each and their ratio (numtk / SciPy: > 1, numtk draws faster). The moments
column checks that both draw the same law: the mean resultant length mean(mu^T x) of each contestant's last
draw against the Bessel ratio I_{d/2}(kappa) / I_{d/2-1}(kappa) (``scipy.special.ive``), as a number of
standard errors.
"""

from __future__ import annotations

import math
import os

from benchmarks._timing import interleaved

__all__ = ["compare", "vmf_calls", "bessel_ratio", "CONFIGS", "QUICK_CONFIGS"]

#: (d, kappa) rows of the table
CONFIGS = ((3, 1.0), (3, 10.0), (3, 1e4), (10, 1.0), (10, 20.0), (10, 1e4), (128, 10.0), (128, 1e3), (128, 1e4))
QUICK_CONFIGS = ((3, 10.0), (10, 20.0), (128, 1e4))
N, QUICK_N = 100_000, 20_000


def bessel_ratio(d: int, kappa: float) -> float:
    """The mean resultant length I_{d/2}(kappa) / I_{d/2-1}(kappa) of vMF on S^(d-1) (exponentially scaled
    Bessel functions: no overflow at large kappa)."""
    from scipy.special import ive

    return float(ive(d / 2, kappa) / ive(d / 2 - 1, kappa))


def vmf_calls(d: int, kappa: float, n: int, *, seed: int = 0) -> tuple:
    """The two contestants (name -> callable returning the (n, d) draws as a NumPy array) and the mean direction."""
    import numpy as np
    import torch
    from scipy import stats

    from numtk.torch.contrastive import sample_vmf

    mu = np.zeros(d)
    mu[0], mu[-1] = 0.6, 0.8
    mu_t = torch.tensor(mu)
    gen = torch.Generator().manual_seed(seed)
    rs = np.random.default_rng(seed)
    calls = {"numtk": lambda: sample_vmf(mu_t, kappa, n, rng=gen).numpy()}
    if hasattr(stats, "vonmises_fisher"):
        law = stats.vonmises_fisher(mu, kappa)
        calls["scipy"] = lambda: law.rvs(n, random_state=rs)
    return calls, mu


def _moment(x, mu, d: int, kappa: float) -> str:
    import numpy as np

    c = x @ mu
    se = float(np.std(c)) / math.sqrt(len(c))
    want = bessel_ratio(d, kappa)
    z = (float(np.mean(c)) - want) / se if se > 0 else 0.0
    return f"{float(np.mean(c)):.6f} ({z:+.1f} se)"


def compare(*, quick: bool = False, options=None) -> None:
    """Print the sampler table (see the module docstring)."""
    import torch

    from numtk.torch._common import torch_threads

    repeat = 5 if quick else 7
    if options is not None and getattr(options, "repeat", None):
        repeat = options.repeat
    threads = None if os.environ.get("NUMTK_BENCH_TORCH_THREADS") == "all" else 1
    n = QUICK_N if quick else N
    import scipy

    with torch_threads(threads):
        print(f"vMF sampling: {n} draws per call around one mean direction; numtk.torch.contrastive.sample_vmf "
              f"(torch {torch.__version__}, {torch.get_num_threads()} thread(s), float64) against "
              f"scipy.stats.vonmises_fisher.rvs (SciPy {scipy.__version__}); medians of {repeat} interleaved "
              "rounds")
        print("     d      kappa   numtk (draws/s)   scipy (draws/s)   numtk/scipy   Bessel ratio   "
              "mean mu^T x: numtk            scipy")
        for d, kappa in (QUICK_CONFIGS if quick else CONFIGS):
            calls, mu = vmf_calls(d, kappa, n)
            t = interleaved(calls, repeat=repeat, errors="record")
            m = t.medians
            ours = n / m["numtk"]
            if "scipy" in m:
                theirs = f"{n / m['scipy']:17.3g}"
                ratio = f"{m['scipy'] / m['numtk']:12.2f}x"
                ref = _moment(t.results["scipy"], mu, d, kappa)
            else:
                why = t.errors.get("scipy")
                theirs = f"{'unavailable':>17}"
                ratio = f"{'-':>13}"
                ref = f"({type(why).__name__})" if why is not None else "(SciPy < 1.11)"
            print(f"  {d:4d}  {kappa:9.3g}   {ours:15.3g}   {theirs}   {ratio}   {bessel_ratio(d, kappa):12.6f}   "
                  f"{_moment(t.results['numtk'], mu, d, kappa):>24}   {ref:>24}")
        print("  (numtk/scipy: SciPy's time over numtk's, > 1: numtk draws faster; se: standard errors of the "
              "mean of the last draw from the Bessel ratio)")
