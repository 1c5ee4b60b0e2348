"""Sampler benchmark problems and the side-by-side run for ``bench/compare.py --sampling``.

Two small problems, solved by :class:`numtk.sampling.ScoreBasedSampler` (BSDE regression, implicit
Newton scheme, cubic B-splines) from scratch, without exact samples in the design:

- ``mixture-1d``: the 1-D two-mode mixture 0.3 N(-1.5, 0.3) + 0.7 N(1.5, 0.3), given as a plain callable
  (``Target.from_callable``); log Z = log sqrt(2 pi 0.3);
- ``gaussian-3d``: :func:`numtk.sampling.gaussian` with a diagonal covariance in d = 3.

Each row is ``(name, fit seconds, |log Z^ - log Z|, stderr, ESS, ELBO gap)``: the importance-weighted
estimate from ``n_paths`` generative paths against the exact log Z. The metric rows (Sinkhorn against POT,
MMD² against NumPy) come from :mod:`benchmarks._sampling_metrics`.
"""

import math
import warnings

import numpy as np

from benchmarks._timing import interleaved
from numtk.sampling import SinhTransform

#: x = 0.3 sinh(u) on every coordinate but the first (the funnel's x_0)
_FUNNEL_WARP = SinhTransform(0.3, dims=slice(1, None))

#: name -> ScoreBasedSampler keyword arguments (small settings: seconds per fit).
SETTINGS = {
    "mixture-1d": dict(solver="bsde", n_steps=40, degree=31, refine=1),
    "gaussian-3d": dict(solver="bsde", n_steps=30, degree=15, refine=0),
}
#: the literature's benchmark targets (``--sampling-hard``): minutes per fit on 2 cores.
HARD_SETTINGS = {
    "many-well-32": dict(solver="bsde", n_steps=100, refine=1, options=dict(design_mix=(1.0, 0.0, 0.0))),
    # the terminal condition interpolated by tt_cross (an ALS fit on the design failed: dlogZ ~ -1e4)
    "funnel-10": dict(solver="bsde", n_steps=50, refine=1, options=dict(design_mix=(1.0, 0.0, 0.0), terminal="cross")),
    # the same with x_1..x_9 warped by x = 0.3 sinh(u) (numtk.sampling.SinhTransform): the neck gets resolved
    # (48 functions per coordinate and 8000 design points: -0.09 / -0.03 / -0.07 / -0.17 on seeds 0-3, against
    # -0.11 / -0.11 / -0.06 / -0.19 with the defaults, in twice the time)
    "funnel-10-sinh": dict(solver="bsde", n_steps=50, refine=1, degree=47, n_paths=8000, warp=_FUNNEL_WARP,
                           options=dict(design_mix=(1.0, 0.0, 0.0), terminal="cross")),
    # gfn-diffusion's "easy" funnel (sigma = 1): conditional variances over a 20-fold range instead of 8000
    "funnel-10-easy": dict(solver="bsde", n_steps=50, refine=0,
                           options=dict(design_mix=(1.0, 0.0, 0.0), terminal="cross")),
    "funnel-10-easy-sinh": dict(solver="bsde", n_steps=50, refine=0, warp=_FUNNEL_WARP,
                                options=dict(design_mix=(1.0, 0.0, 0.0), terminal="cross")),
    "double-well-50": dict(solver="bsde", n_steps=100, refine=1),
    # 40 unit-variance modes over [-40, 40]^2: preconditioned, 128 functions, a terminal fit of up to 30
    # sweeps (one rank per sweep) and ranks up to 16
    "gmm-40": dict(solver="bsde", n_steps=100, refine=1, degree=127, scale=12.0,
                   options=dict(max_rank=16, terminal_sweeps=30)),
}
#: published Delta log Z to compare with (DDS, PIS as quoted by Sendera et al. 2024; to be confirmed)
PUBLISHED = {"many-well-32": "DDS 7.36, PIS 13.2", "funnel-10": "DDS 0.42, PIS 0.53",
             "funnel-10-sinh": "DDS 0.42, PIS 0.53",
             "funnel-10-easy": "- (sigma = 1; target < 0.1)", "funnel-10-easy-sinh": "- (sigma = 1; target < 0.1)",
             "double-well-50": "- (m = 5, delta = 2; target < 0.1)", "gmm-40": "- (target < 0.1)"}
QUICK_SETTINGS = {
    "mixture-1d": dict(solver="bsde", n_steps=20, degree=23, refine=0),
    "gaussian-3d": dict(solver="bsde", n_steps=20, degree=11, refine=0),
}


def _mixture_log_rho(x):
    x = np.asarray(x)[:, 0]
    return np.logaddexp(math.log(0.3) - (x + 1.5) ** 2 / 0.6, math.log(0.7) - (x - 1.5) ** 2 / 0.6)


def make_target(name):
    """The target of problem ``name`` (its ``log_Z`` is exact)."""
    from numtk.sampling import Target, double_well, funnel, gaussian, gaussian_mixture, many_well

    if name == "double-well-50":
        return double_well(50, 5, 2.0)
    if name == "many-well-32":
        return many_well(32)
    if name in ("funnel-10", "funnel-10-sinh"):
        return funnel(10)
    if name in ("funnel-10-easy", "funnel-10-easy-sinh"):
        return funnel(10, sigma=1.0)
    if name == "gmm-40":
        return gaussian_mixture(name="gmm40")
    if name == "mixture-1d":
        return Target.from_callable(_mixture_log_rho, 1, log_Z=0.5 * math.log(2 * math.pi * 0.3))
    if name == "gaussian-3d":
        return gaussian(mean=[1.0, -0.5, 0.0], cov=np.diag([0.5, 1.5, 1.0]))
    raise ValueError(f"unknown problem {name!r}")


def fit_sampler(name, settings=None, seed=0):
    """A fitted ScoreBasedSampler on problem ``name`` (warnings silenced)."""
    from numtk.sampling import ScoreBasedSampler

    kw = dict((settings or SETTINGS)[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ScoreBasedSampler(make_target(name), rng=seed, **kw).fit()


def sampler_row(name, settings=None, n_paths=20000, seed=0):
    """``(name, fit seconds, |dlog Z|, stderr, ESS, ELBO gap)`` of one fit from scratch."""
    target = make_target(name)
    t = interleaved({"fit": lambda: fit_sampler(name, settings, seed)}, 1, warmup=False)
    t_fit, sampler = t.medians["fit"], t.results["fit"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = sampler.log_Z(n=n_paths, rng=seed + 1)
    return (name, t_fit, abs(est.value - target.log_Z), est.stderr, est.ess, target.log_Z - est.elbo)


def sampler_rows(quick=False, n_paths=None):
    """One row per problem."""
    settings = QUICK_SETTINGS if quick else SETTINGS
    n_paths = n_paths or (5000 if quick else 20000)
    return [sampler_row(name, settings, n_paths) for name in settings]


def compare(quick=False, out=print):
    """Print the sampler rows and the metric rows (used by bench/compare.py); returns both lists."""
    from benchmarks._sampling_metrics import compare as compare_metrics

    settings = QUICK_SETTINGS if quick else SETTINGS
    out("\n== sampling: ScoreBasedSampler.fit (BSDE, no exact samples) and the sample metrics")
    out(f"{'problem':<14} {'fit [s]':>8} {'|dlogZ|':>9} {'stderr':>9} {'ESS':>6} {'ELBO gap':>9}  settings")
    rows = sampler_rows(quick)
    for name, t, err, se, ess, gap in rows:
        kw = ", ".join(f"{k}={v}" for k, v in settings[name].items())
        out(f"{name:<14} {t:8.2f} {err:9.2e} {se:9.2e} {ess:6.3f} {gap:9.2e}  {kw}")
    metric_rows = compare_metrics(quick=quick)
    return rows, metric_rows


def compare_hard(out=print, n_paths=10000):
    """The many-well (d = 32), funnel (d = 10; sigma = 3 and the easy sigma = 1), double-well (d = 50) and
    GMM-40 rows against the published numbers."""
    out("\n== sampling, benchmark targets: ScoreBasedSampler.fit (BSDE, no exact samples)")
    out(f"{'problem':<14} {'fit [s]':>8} {'|dlogZ|':>9} {'stderr':>9} {'ESS':>6} {'ELBO gap':>9}  published dlogZ")
    rows = [sampler_row(name, HARD_SETTINGS, n_paths) for name in HARD_SETTINGS]
    for name, t, err, se, ess, gap in rows:
        out(f"{name:<14} {t:8.1f} {err:9.2e} {se:9.2e} {ess:6.3f} {gap:9.2e}  {PUBLISHED[name]}")
    return rows


if __name__ == "__main__":
    compare()
