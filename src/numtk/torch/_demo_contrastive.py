"""The contrastive identifiability demonstration, run by ``python -m numtk demo contrastive`` and the tour.

Latents z are uniform on the sphere S^2 (d = 3); a positive z~ is drawn from a von Mises-Fisher conditional around
z (kappa = 3), possibly restricted; observations are x = g(z) with g a frozen random invertible map
(:func:`~numtk.torch.contrastive.invertible_mlp`); an encoder h is trained with InfoNCE at the matched temperature
tau = 1 / kappa, and the sphere-normalised h(x) is scored against z by :func:`~numtk.torch.contrastive.linear_r2`
(recovery up to a linear map) and :func:`~numtk.torch.contrastive.orthogonal_r2` (up to an orthogonal map).

Per cap angle theta (pi: no cap), four runs from the same initialisation and on the same draws:

- ``cap``: the vMF truncated to the cap <z~, z> >= cos(theta), plain InfoNCE;
- ``axes``: the same conditional moving only the axes (0, 1) (the third coordinate, the "content", is preserved
  by the positive pair, as semantic content is by augmentations), plain InfoNCE;
- ``reweight``: the ``axes`` conditional with the support-corrected InfoNCE, off-support negatives weighted by 0.1;
- ``restrict``: the same with the normaliser restricted to the support.

The support of the ``axes`` conditional (the circle through z with the same third coordinate) holds no other
in-batch draw, so the corrected runs count a candidate as on the support when its third coordinate is within 0.2
of the anchor's (:func:`~numtk.torch.contrastive.support_mask`); both corrections are **reconstructed**.

By default g is a random well-conditioned linear map and the encoder linear (no bias): the family
h(z) = normalize(A z) in which the paper's statement lives (an anisotropic A against an orthogonal one) and which
trains to its optimum in a few hundred steps. ``encoder='mlp'`` uses a three-layer leaky-ReLU generator (re-derived
from cl-ica's) and a two-hidden-layer MLP encoder instead; at this CPU budget those runs depend on the seed.

The demo also evaluates the loss landscape by Monte Carlo: InfoNCE (and the corrected forms) of
h = normalize(diag(1, 1, a) z) under the ``axes`` conditional for stretches a of the preserved axis, on common
draws; a = 1 is the orthogonal map.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import numpy_rng, torch, torch_threads
from numtk.torch._contrastive import (info_nce, invertible_mlp, linear_r2, orthogonal_r2, sample_restricted_vmf,
                                      support_corrected_info_nce, support_mask)

__all__ = ["demo", "run", "plot_r2", "VARIANTS"]

DIM, KAPPA, BATCH, LR = 3, 3.0, 256, 1e-2
TAU = 1.0 / KAPPA
#: the axes the restricted positives move along; the others are preserved
AXES = (0, 1)
#: the tolerance that stands for the support of the axes conditional, and the reweighting of off-support negatives
TOL, OMEGA = 0.2, 0.1
ANGLES = (math.pi, 1.0, 0.5, 0.3)
QUICK_ANGLES = (math.pi, 0.5)
DEFAULT_STEPS, QUICK_STEPS = 300, 100
N_EVAL = 4000
#: stretches of the preserved axis in the loss landscape
STRETCHES = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
VARIANTS = ("cap", "axes", "reweight", "restrict")
_LABELS = {"cap": "cap only, InfoNCE", "axes": "axes + cap, InfoNCE",
           "reweight": f"axes + cap, corrected (reweight {OMEGA})", "restrict": "axes + cap, corrected (restrict)"}
_ENCODERS = ("linear", "mlp")


def _latents(n: int, gen: "torch.Generator", dtype: Any = torch.float32) -> "torch.Tensor":
    return torch.nn.functional.normalize(torch.randn(n, DIM, generator=gen, dtype=dtype), dim=1)


def _models(encoder: str, seed: int) -> tuple:
    """The frozen generator and a freshly initialised encoder (seeded without touching torch's global state)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if encoder == "linear":
            g = invertible_mlp(DIM, layers=1, rng=seed)
            enc = torch.nn.Linear(DIM, DIM, bias=False)
        else:
            g = invertible_mlp(DIM, layers=3, rng=seed)
            enc = torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.LeakyReLU(), torch.nn.Linear(64, 64),
                                      torch.nn.LeakyReLU(), torch.nn.Linear(64, DIM))
    return g, enc


def _train(variant: str, angle: float, encoder: str, steps: int, seed: int) -> dict:
    g, enc = _models(encoder, seed)
    opt = torch.optim.Adam(enc.parameters(), lr=LR if encoder == "linear" else 3e-3)
    gen = torch.Generator().manual_seed(seed + 1)
    axes = None if variant == "cap" else list(AXES)
    for _ in range(steps):
        z = _latents(BATCH, gen)
        zt = sample_restricted_vmf(z, KAPPA, angle, rng=gen, axes=axes)
        h1, h2 = enc(g(z)), enc(g(zt))
        if variant in ("cap", "axes"):
            loss = info_nce(h1, h2, TAU)
        else:
            mask = support_mask(z, zt, angle, axes=axes, tol=TOL)
            loss = support_corrected_info_nce(h1, h2, mask, TAU, correction=variant, off_support_weight=OMEGA)
        opt.zero_grad()
        loss.backward()
        opt.step()
    z = _latents(N_EVAL, torch.Generator().manual_seed(seed + 2))
    with torch.no_grad():
        h = torch.nn.functional.normalize(enc(g(z)), dim=1)
    return {"linear_r2": linear_r2(h, z), "orthogonal_r2": orthogonal_r2(h, z), "loss": float(loss.detach())}


def _landscape(seed: int, batch: int = 1024, reps: int = 3) -> dict:
    """Monte-Carlo losses of h = normalize(diag(1, 1, a) z) under the axes conditional (no cap), common draws."""
    gen = torch.Generator().manual_seed(seed + 3)
    out = {"plain": np.zeros(len(STRETCHES)), "reweight": np.zeros(len(STRETCHES)),
           "restrict": np.zeros(len(STRETCHES))}
    for _ in range(reps):
        z = _latents(batch, gen, torch.float64)
        zt = sample_restricted_vmf(z, KAPPA, math.pi, rng=gen, axes=list(AXES))
        mask = support_mask(z, zt, axes=list(AXES), tol=TOL)
        for k, a in enumerate(STRETCHES):
            scale = torch.ones(DIM, dtype=torch.float64)
            scale[[i for i in range(DIM) if i not in AXES]] = a
            h1, h2 = z * scale, zt * scale
            out["plain"][k] += float(info_nce(h1, h2, TAU)) / reps
            for c in ("reweight", "restrict"):
                out[c][k] += float(support_corrected_info_nce(h1, h2, mask, TAU, correction=c,
                                                              off_support_weight=OMEGA)) / reps
    return {k: [float(x) for x in v] for k, v in out.items()}


@constraints(steps="count", rng="rng", progress="bool", angles="option", encoder="option")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, angles: Any = None,
         encoder: str = "linear") -> Any:
    """Full-support, cap-restricted and axis-restricted conditionals: linear and orthogonal R2 of InfoNCE encoders
    against the cap angle, and the support-corrected InfoNCE on the axis restriction.

    Parameters
    ----------
    steps : int, optional
        Adam steps per run (default 300), batches of 256.
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Seeds the generator, the initialisation and the draws (one base seed for every run; a torch.Generator
        gives one seed).
    progress : bool, default False
        Show a progress bar over the runs.
    angles : sequence of float, optional
        The cap angles in radians, each in (0, pi] (default pi, 1.0, 0.5, 0.3; pi: no cap).
    encoder : {'linear', 'mlp'}, default 'linear'
        A linear encoder on a random linear mixing, or an MLP encoder on a three-layer leaky-ReLU generator.

    Returns
    -------
    Result
        metrics : dict
            ``steps``, ``encoder``, ``angles``; per variant (``cap``, ``axes``, ``reweight``, ``restrict``) a dict
            with the lists ``linear_r2``, ``orthogonal_r2`` and ``loss`` (one entry per angle);
            ``full_linear_r2`` and ``full_orthogonal_r2`` (the ``cap`` run at the first angle, pi by default: the
            full-support vMF); ``landscape_best_stretch`` (per loss: the stretch a of the preserved axis with the
            lowest Monte-Carlo loss; 1 is orthogonal).
        history : dict
            ``angle``; ``<variant>/linear_r2`` and ``<variant>/orthogonal_r2`` per angle; ``stretch`` and
            ``landscape/<loss>`` (plain, reweight, restrict: the Monte-Carlo losses per stretch).
        wall_time : float
            Seconds.

    Examples
    --------
    >>> import math
    >>> from numtk.torch.contrastive import demo
    >>> res = demo(steps=20, angles=(math.pi,))               # a few seconds
    >>> sorted(res.metrics["axes"])
    ['linear_r2', 'loss', 'orthogonal_r2']
    >>> res.metrics["landscape_best_stretch"]["plain"] > 1.0  # stretching the preserved axis lowers InfoNCE
    True
    """
    from numtk._lib import Result, progress_bar
    from numtk._lib._validation import check_bool, check_int, check_option, check_real

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=1, maximum=10**6)
    progress = check_bool(progress, "progress")
    encoder = check_option(encoder, "encoder", _ENCODERS)
    if angles is None:
        angles = ANGLES
    if isinstance(angles, (str, bytes)) or not isinstance(angles, (tuple, list)) or not angles:
        raise TypeError(f"`angles` must be a non-empty tuple of cap angles in (0, pi]; got {angles!r}")
    angles = tuple(check_real(a, "angles", low=0.0, high=math.pi, low_open=True) for a in angles)
    base = int(numpy_rng(rng, name="rng").integers(0, 2**31 - 1))
    t_start = time.perf_counter()
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    jobs = [(a, v) for a in angles for v in VARIANTS]
    with torch_threads(1):  # 3 x 3 maps: thread hand-offs cost more than they save
        for a, v in progress_bar(jobs, progress=progress, desc="contrastive demo"):
            runs[v].append(_train(v, a, encoder, steps, base))
        land = _landscape(base)
    metrics: dict[str, Any] = {"steps": steps, "encoder": encoder, "angles": list(angles)}
    history: dict[str, list] = {"angle": list(angles), "stretch": list(STRETCHES)}
    for v, rs in runs.items():
        metrics[v] = {k: [r[k] for r in rs] for k in ("linear_r2", "orthogonal_r2", "loss")}
        history[f"{v}/linear_r2"] = metrics[v]["linear_r2"]
        history[f"{v}/orthogonal_r2"] = metrics[v]["orthogonal_r2"]
    metrics["full_linear_r2"] = metrics["cap"]["linear_r2"][0]
    metrics["full_orthogonal_r2"] = metrics["cap"]["orthogonal_r2"][0]
    for k, vals in land.items():
        history[f"landscape/{k}"] = vals
    metrics["landscape_best_stretch"] = {k: STRETCHES[int(np.argmin(vals))] for k, vals in land.items()}
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t_start)


# --------------------------------------------------------------------------------------------------
# figure and table
# --------------------------------------------------------------------------------------------------
def plot_r2(res: Any, path: str) -> None:
    """The R2 of a :func:`demo` Result against the cap angle, and the Monte-Carlo loss landscape."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    h = res.history
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    x = [math.degrees(a) for a in h["angle"]]
    for i, v in enumerate(VARIANTS):
        left.plot(x, h[f"{v}/orthogonal_r2"], "-o", ms=4, color=f"C{i}", label=f"{_LABELS[v]}: orthogonal")
        left.plot(x, h[f"{v}/linear_r2"], "--s", ms=3, color=f"C{i}", alpha=0.6, label=f"{_LABELS[v]}: linear")
    left.set_xlabel("cap angle (degrees; 180: no cap)")
    left.set_ylabel("R2 of the latents from h")
    left.invert_xaxis()
    left.set_title(f"{res.metrics['encoder']} encoder, {res.metrics['steps']} steps", fontsize=9)
    left.legend(fontsize=6, loc="lower left")
    for i, (k, label) in enumerate((("plain", "InfoNCE"), ("reweight", f"corrected, reweight {OMEGA}"),
                                    ("restrict", "corrected, restrict"))):
        vals = np.asarray(h[f"landscape/{k}"])
        right.plot(h["stretch"], vals - vals[list(h["stretch"]).index(1.0)], "-o", ms=3, color=f"C{i + 1}",
                   label=label)
    right.axvline(1.0, color="grey", lw=0.8, ls="--")
    right.set_xlabel("stretch a of the preserved axis (1: orthogonal)")
    right.set_ylabel("loss - loss at a = 1")
    right.set_title("Monte-Carlo loss of normalize(diag(1, 1, a) z), axes conditional", fontsize=9)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Train the encoders under each conditional and print the table (quick: 100 steps, angles pi and 0.5)."""
    res = demo(steps=QUICK_STEPS, angles=QUICK_ANGLES) if quick else demo()
    m = res.metrics
    out(f"latents uniform on S^2, vMF conditionals (kappa {KAPPA:g}, tau 1/kappa), {m['encoder']} encoder, "
        f"{m['steps']} Adam steps of batch {BATCH}, {res.wall_time:.1f} s")
    out("  cap angle   " + "  ".join(f"{_LABELS[v]:>38}" for v in VARIANTS))
    out("              " + "  ".join(f"{'linear R2 / orthogonal R2':>38}" for _ in VARIANTS))
    for i, a in enumerate(m["angles"]):
        cells = "  ".join(f"{m[v]['linear_r2'][i]:>28.3f} / {m[v]['orthogonal_r2'][i]:.3f}" for v in VARIANTS)
        out(f"  {math.degrees(a):7.1f} deg  {cells}")
    best = m["landscape_best_stretch"]
    out(f"  loss landscape (axes conditional, h = normalize(diag(1, 1, a) z)): lowest at a = {best['plain']:g} for "
        f"InfoNCE, {best['reweight']:g} reweighted, {best['restrict']:g} restricted (a = 1: orthogonal)")
    if plot:
        plot_r2(res, plot)
        out(f"figure saved to {plot}")
    ax = m["axes"]
    return [{"area": "torch", "method": "contrastive identifiability (vMF, InfoNCE, d = 3)", "n": m["steps"],
             "result": f"orthogonal R2 {m['full_orthogonal_r2']:.3f} full support, {ax['orthogonal_r2'][0]:.3f} "
                       f"axis-restricted (linear R2 {ax['linear_r2'][0]:.3f}), "
                       f"{m['reweight']['orthogonal_r2'][0]:.3f} corrected",
             "vs anchor": "cl-ica: linear R2 ~ 0.99 in the matched setting; "
                          f"here {m['full_linear_r2']:.3f}",
             "speed": f"{res.wall_time:.1f} s for {len(VARIANTS) * len(m['angles'])} runs"}]
