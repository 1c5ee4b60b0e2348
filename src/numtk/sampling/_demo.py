"""``python -m numtk demo sampler``: the score-based sampler on targets with exact log Z."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from numtk.sampling._transforms import SinhTransform

# (label, factory, sampler keyword arguments); quick runs use the first rows only
_CASES = [
    ("mixture 1-D (callable)", "mixture1d", dict(n_steps=60, degree=31, refine=1)),
    ("gaussian d=4 (rotated)", "gauss4", dict(n_steps=40, degree=15, refine=1, options=dict(terminal="cross"))),
    ("double-well d=2", "dw2", dict(n_steps=60, degree=31, refine=1)),
    ("many-well d=4", "mw4", dict(n_steps=100, degree=31, refine=1)),
    ("25-GMM d=2", "25gmm", dict(n_steps=100, degree=63, refine=1)),
    ("funnel d=10", "funnel10", dict(n_steps=50, refine=1, options=dict(design_mix=(1.0, 0.0, 0.0), terminal="cross"))),
    ("funnel d=10, sinh warp", "funnel10", dict(n_steps=50, refine=1, degree=47, n_paths=8000,
                                                 warp=SinhTransform(0.3, dims=slice(1, None)),
                                                 options=dict(design_mix=(1.0, 0.0, 0.0), terminal="cross"))),
]


def _target(key: str):
    from numtk.sampling import Target, double_well, funnel, gaussian, gaussian_mixture, many_well

    if key == "mixture1d":
        w, m, v = np.array([0.3, 0.7]), np.array([-1.5, 1.5]), 0.3

        def logp(x):
            comp = np.log(w) - 0.5 * (x[:, :1] - m) ** 2 / v - 0.5 * math.log(2 * math.pi * v)
            top = comp.max(axis=1, keepdims=True)
            return (top + np.log(np.exp(comp - top).sum(axis=1, keepdims=True)))[:, 0]

        # the sampler sees only the callable; the exact value (log Z = 0) is for the table
        return Target.from_callable(logp, 1, log_Z=0.0, name="mixture1d"), gaussian_mixture(
            means=m[:, None], covs=[v, v], weights=w)
    if key == "gauss4":
        rng = np.random.default_rng(7)
        q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
        cov = q @ np.diag([0.5, 0.8, 1.2, 1.6]) @ q.T
        t = gaussian(mean=[0.5, -0.5, 1.0, 0.0], cov=cov)
        return t, t
    if key == "25gmm":
        t = gaussian_mixture(name="25gmm")
        return t, t
    if key == "mw4":
        t = many_well(4)
        return t, t
    if key == "funnel10":
        t = funnel(10)
        return t, t
    if key == "dw2":
        t = double_well(2, 2, 4.0)
        return t, t
    raise KeyError(key)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Fit the sampler per target; print Delta log Z (importance-weighted, with its standard error), the
    ELBO gap, ESS, MMD against exact samples and the fit time. Returns one table row per target."""
    from numtk.sampling import ScoreBasedSampler, mmd

    cases = _CASES[:3] if quick else _CASES
    n_paths = 10000 if quick else 20000
    rows, figures = [], []
    out(f"{'target':<26} {'dlogZ':>9} {'SE':>7} {'ELBO gap':>9} {'ESS':>6} {'MMD^2':>9} {'fit s':>7}")
    for label, key, kw in cases:
        target, exact = _target(key)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sampler = ScoreBasedSampler(target, rng=0, **kw).fit()
            fit_s = time.perf_counter() - t0
            est = sampler.log_Z(n=n_paths, rng=1)
        X = sampler.sample(2000, rng=2)
        Y = exact.sample(2000, rng=3)
        m2 = mmd(X, Y)
        dlz = est.value - target.log_Z
        out(f"{label:<26} {dlz:>+9.4f} {est.stderr:>7.4f} {target.log_Z - est.elbo:>9.3f} {est.ess:>6.3f} "
            f"{m2:>9.1e} {fit_s:>7.1f}")
        rows.append({"area": "sampling", "method": f"ScoreBasedSampler {label}", "n": n_paths,
                     "result": f"dlogZ={dlz:+.3f}+-{est.stderr:.3f} ESS={est.ess:.2f}",
                     "vs anchor": "exact log Z", "speed": f"{fit_s:.1f} s"})
        figures.append((label, target, X, Y))
    out("dlogZ: importance-weighted log Z minus the exact value (unbiased in Z)")
    if plot:
        _plot(figures, plot)
        out(f"figure saved to {plot}")
    return rows


def _plot(figures, path: str) -> None:
    from numtk._lib._optional import pyplot

    plt = pyplot()

    ncols = min(3, len(figures))
    nrows = -(-len(figures) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.ravel()[len(figures):]:
        ax.set_axis_off()
    for ax, (label, target, X, Y) in zip(axes.ravel(), figures):
        if target.dim == 1:
            grid = np.linspace(min(X.min(), Y.min()), max(X.max(), Y.max()), 400)[:, None]
            dens = np.exp(target.log_density(grid) - target.log_Z)
            ax.hist(X[:, 0], bins=60, density=True, alpha=0.5, label="sampler")
            ax.plot(grid[:, 0], dens, "k", lw=1, label="target")
        else:
            # higher dimensions: the (x_0, x_1) marginal
            ax.scatter(Y[:, 0], Y[:, 1], s=2, alpha=0.3, label="exact")
            ax.scatter(X[:, 0], X[:, 1], s=2, alpha=0.3, label="sampler")
            if target.dim == 2:
                ax.set_aspect("equal")
            else:
                ax.set_xlabel("x_0", fontsize=8)
                ax.set_ylabel("x_1", fontsize=8)
                label = f"{label}: (x_0, x_1) marginal"
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7, markerscale=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
