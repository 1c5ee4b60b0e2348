"""The MSWT demonstration used by ``python -m numtk demo mswt`` and the tour.

Multi-scale dynamics: the Kuramoto-Sivashinsky equation on a periodic domain of length 44 sampled at 64 points
(:func:`numtk.datasets.kuramoto_sivashinsky`): chaotic, with its energy falling over eight decades from the
energetic wavenumbers (about 5 cycles per domain) to the dissipative ones (28). The task: learn the map from
``u(t)`` to ``u(t + 1)`` (four ETDRK4 steps of 0.25) on trajectories from random initial states, and predict
it on held-out trajectories. Two models with the same number of parameters (within 5 %) are trained from the
same seed on the same batches, with the same optimiser and schedule, both predicting the increment
(``u + net(u)``):

- :class:`~numtk.torch.mswt.MSWT1D` with two levels of widths 16 and 32 (Haar);
- a plain transformer (:class:`TokenTransformer1D`): one token per grid point (value and coordinate through a
  linear map, plus learned positions), two pre-LN encoder layers, a linear head; its width is chosen to match
  the parameter count.

The claim reproduced at CPU scale: MSWT beats the plain transformer of equal size, overall and at high
wavenumbers. Persistence (``u(t + 1) = u(t)``) is the floor any model must beat.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints

__all__ = ["demo", "run", "ks_pairs", "TokenTransformer1D", "train", "evaluate", "plot_spectra", "TASK",
           "DEFAULT", "QUICK"]

#: the Kuramoto-Sivashinsky task: grid points, domain length, ETDRK4 step, steps per sample, burn-in steps
TASK = dict(n=64, length=44.0, dt=0.25, save_every=4, burn_in=400)
#: sizes (trajectories for training and for testing, samples per trajectory, training steps, batch), default
#: and quick
DEFAULT = dict(train=32, test=8, samples=200, steps=200, batch=32)
QUICK = dict(train=16, test=4, samples=100, steps=100, batch=16)
#: MSWT1D's widths per level and heads; Adam's learning rate (cosine schedule to zero)
DIMS = (16, 32)
HEADS = 2
LR = 3e-3
#: wavenumbers (cycles per domain) of the high band and of the spectrum error; rollout length of the metrics
HIGH_K = 12
SPECTRUM_K = (12, 20)
ROLLOUT = 5


def ks_pairs(trajectories: int, samples: int, *, rng: Any = 0) -> tuple[np.ndarray, float]:
    """Kuramoto-Sivashinsky trajectories of :data:`TASK` (``samples + 1`` states each, one time unit apart) as a
    float32 array (trajectories, samples + 1, n) divided by its standard deviation, and that deviation."""
    from numtk.datasets import kuramoto_sivashinsky

    res = kuramoto_sivashinsky(TASK["n"], length=TASK["length"], dt=TASK["dt"], steps=samples,
                               burn_in=TASK["burn_in"], save_every=TASK["save_every"], batch=trajectories, rng=rng)
    u = res.trajectory
    scale = float(u.std())
    return (u / scale).astype(np.float32), scale


def _modules():
    import torch

    class TokenTransformer1D(torch.nn.Module):
        """A plain transformer on signals (N, in_ch, L) -> (N, out_ch, L): one token per grid point (the values
        and the coordinate in [0, 1] through a linear map, plus a learned position embedding), ``layers``
        pre-LN encoder layers (``torch.nn.TransformerEncoderLayer``, GELU, FFN 4 x width) and a
        ``Linear -> GELU -> Linear`` head."""

        def __init__(self, in_ch: int, out_ch: int, length: int, width: int, *, layers: int = 2,
                     heads: int = 2) -> None:
            super().__init__()
            self.length = length
            self.embed = torch.nn.Linear(in_ch + 1, width)
            self.pos = torch.nn.Parameter(torch.zeros(1, length, width))
            layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                                     batch_first=True, norm_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Sequential(torch.nn.Linear(width, width // 2), torch.nn.GELU(),
                                            torch.nn.Linear(width // 2, out_ch))

        def forward(self, u: "torch.Tensor") -> "torch.Tensor":
            grid = torch.linspace(0, 1, self.length, dtype=u.dtype, device=u.device).expand(u.shape[0], 1, -1)
            t = self.embed(torch.cat([u, grid], dim=1).transpose(1, 2)) + self.pos
            return self.head(self.encoder(t)).transpose(1, 2)

    return TokenTransformer1D


def __getattr__(name: str) -> Any:
    if name == "TokenTransformer1D":  # defined on first use: importing this module does not import torch
        return _modules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def _matched_transformer(target: int, length: int) -> Any:
    """The plain transformer whose width (a multiple of the heads) gives the parameter count nearest ``target``."""
    cls = _modules()
    best = min(range(2 * HEADS, 257, HEADS),
               key=lambda w: abs(_params(cls(1, 1, length, w, heads=HEADS)) - target))
    return cls(1, 1, length, best, heads=HEADS)


def train(model: Any, X: Any, Y: Any, *, steps: int, batch: int = 32, rng: int = 0, progress: bool = False,
          desc: str = "") -> list:
    """``steps`` Adam steps (learning rate :data:`LR`, cosine to zero, batches of ``batch`` pairs drawn with
    seed ``rng``) on the relative L2 error of ``X + model(X)`` against ``Y``; returns the loss of each step."""
    import torch

    from numtk._lib import progress_bar
    from numtk.torch._mswt import relative_l2

    g = torch.Generator().manual_seed(rng)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    losses = []
    for _ in progress_bar(range(steps), progress=progress, desc=desc):
        idx = torch.randint(0, X.shape[0], (batch,), generator=g)
        loss = relative_l2(X[idx] + model(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses


def evaluate(step: Any, test: Any) -> dict:
    """Metrics of a one-step map ``step`` (u -> next u) on held-out trajectories ``test`` (T, S + 1, n):
    ``relative_l2`` (one step, mean over pairs), ``high_k`` (relative L2 of the error restricted to wavenumbers
    >= :data:`HIGH_K`), ``spectrum`` (mean |log10| ratio of the predicted to the true energy spectrum over
    wavenumbers in :data:`SPECTRUM_K`), ``rollout`` (relative L2 after :data:`ROLLOUT` steps, from every
    :data:`ROLLOUT`-th state) and the mean predicted and true spectra."""
    import torch

    from numtk.torch._mswt import energy_spectrum, relative_l2, rollout

    n = test.shape[-1]
    with torch.no_grad():
        X = test[:, :-1].reshape(-1, 1, n)
        Y = test[:, 1:].reshape(-1, 1, n)
        P = step(X)
        err = torch.fft.rfft(P - Y, dim=-1)[..., HIGH_K:]
        ref = torch.fft.rfft(Y, dim=-1)[..., HIGH_K:]
        high = float(torch.linalg.vector_norm(err) / torch.linalg.vector_norm(ref))
        Ep = energy_spectrum(P[:, 0]).mean(0)
        Et = energy_spectrum(Y[:, 0]).mean(0)
        k0, k1 = SPECTRUM_K
        spec = float((torch.log10(Ep[k0:k1]) - torch.log10(Et[k0:k1])).abs().mean())
        starts = test[:, :-ROLLOUT:ROLLOUT].reshape(-1, 1, n)  # every fifth state starts a rollout
        ends = test[:, ROLLOUT::ROLLOUT].reshape(-1, 1, n)
        roll = float(relative_l2(rollout(step, starts, ROLLOUT)[-1], ends))
    return {"relative_l2": float(relative_l2(P, Y)), "high_k": high, "spectrum": spec, "rollout": roll,
            "energy": Ep.tolist(), "energy_true": Et.tolist()}


@constraints(steps="count", rng="rng", progress="bool", quick="bool")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, quick: bool = False) -> Result:
    """MSWT against a plain transformer of equal size on Kuramoto-Sivashinsky one-step prediction.

    Generates :data:`TASK` trajectories (train and test from different random initial states), trains
    ``MSWT1D(1, 1, dims=(16, 32), heads=2)`` and the parameter-matched :class:`TokenTransformer1D` for ``steps``
    Adam steps each on the same batches, and evaluates both and persistence on the held-out trajectories
    (:func:`evaluate`).

    Parameters
    ----------
    steps : int, optional
        Training steps per model (default 200 of 32 pairs; 100 of 16 pairs with ``quick``).
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Seeds the initial states of the trajectories, the weights and the batches.
    progress : bool, default False
        Show progress bars.
    quick : bool, default False
        The tour's setting: half the trajectories, 100 samples each, 100 steps of 16 pairs.

    Returns
    -------
    Result
        With fields ``metrics`` (per model ``'mswt'``, ``'transformer'``, ``'persistence'``: the metrics of
        :func:`evaluate`, ``params`` and training ``seconds``), ``history`` (the training loss per step of each
        model), ``wall_time`` (s) and ``config`` (the sizes used).

    Examples
    --------
    >>> from numtk.torch.mswt import demo
    >>> res = demo(steps=3, quick=True)
    >>> sorted(res.metrics), res.metrics["mswt"]["params"], res.metrics["transformer"]["params"]
    (['mswt', 'persistence', 'transformer'], 43057, 42961)
    >>> len(res.history["mswt"])
    3
    """
    import torch

    from numtk._lib._validation import check_bool, check_int
    from numtk.torch._common import torch_generator, torch_threads
    from numtk.torch._mswt import MSWT1D

    quick = check_bool(quick, "quick")
    progress = check_bool(progress, "progress")
    sizes = dict(QUICK if quick else DEFAULT)
    if steps is not None:
        sizes["steps"] = check_int(steps, "steps", minimum=1, maximum=10**6)
    seed = int(torch_generator(rng).initial_seed() % 2**31)
    t0 = time.perf_counter()
    u, scale = ks_pairs(sizes["train"] + sizes["test"], sizes["samples"], rng=seed)
    n = TASK["n"]
    train_u = torch.from_numpy(u[:sizes["train"]])
    test_u = torch.from_numpy(u[sizes["train"]:])
    X = train_u[:, :-1].reshape(-1, 1, n)
    Y = train_u[:, 1:].reshape(-1, 1, n)
    metrics: dict = {}
    history: dict = {}
    # one thread: the models are so small that a step is mostly thread synchronisation otherwise (a tenth of a
    # second a step on one thread, ten times that on two busy cores)
    with torch_threads(1):
        with torch.random.fork_rng(devices=[]):  # the modules initialise from torch's global state: restored
            torch.manual_seed(seed)
            mswt = MSWT1D(1, 1, dims=DIMS, heads=HEADS)
            torch.manual_seed(seed)
            plain = _matched_transformer(_params(mswt), n)
        for name, model in (("mswt", mswt), ("transformer", plain)):
            t = time.perf_counter()
            history[name] = train(model, X, Y, steps=sizes["steps"], batch=sizes["batch"], rng=seed + 1,
                                  progress=progress, desc=name)
            seconds = time.perf_counter() - t
            model.eval()
            metrics[name] = {**evaluate(lambda v, m=model: v + m(v), test_u), "params": _params(model),
                             "seconds": seconds}
        metrics["persistence"] = {**evaluate(lambda v: v, test_u), "params": 0, "seconds": 0.0}
    config = {**TASK, **sizes, "dims": DIMS, "heads": HEADS, "lr": LR, "scale": scale,
              "width": plain.embed.out_features}
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t0, config=config)


def plot_spectra(res: Result, path: str) -> None:
    """The held-out energy spectra (true, MSWT, transformer, persistence) and the training curves; saved to
    ``path``."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    m = res.metrics
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    k = np.arange(len(m["mswt"]["energy_true"]))
    ax1.semilogy(k[1:], m["mswt"]["energy_true"][1:], "k-", lw=2, label="truth")
    for key, style in (("mswt", "C0-"), ("transformer", "C3--"), ("persistence", "C7:")):
        ax1.semilogy(k[1:], m[key]["energy"][1:], style,
                     label=f"{key} (rel. L2 {m[key]['relative_l2']:.3f})")
    ax1.axvspan(*SPECTRUM_K, color="0.9", zorder=0)
    ax1.set_xlabel("wavenumber k (cycles per domain)")
    ax1.set_ylabel("energy E(k), held-out one-step predictions")
    ax1.set_ylim(bottom=max(1e-14, min(m["mswt"]["energy_true"][1:]) / 10))
    ax1.legend(fontsize=8)
    for key, style in (("mswt", "C0-"), ("transformer", "C3--")):
        ax2.plot(res.history[key], style, label=f"{key} ({m[key]['params']} parameters)")
    ax2.axhline(m["persistence"]["relative_l2"], color="0.5", ls=":", label="persistence (held out)")
    ax2.set_yscale("log")
    ax2.set_xlabel("training step")
    ax2.set_ylabel("training loss (relative L2)")
    ax2.legend(fontsize=8)
    fig.suptitle(f"Kuramoto-Sivashinsky, L = {TASK['length']:g}, {TASK['n']} points, one time unit ahead",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """MSWT against a plain transformer of equal size on Kuramoto-Sivashinsky dynamics.

    Prints the metrics table through ``out``; returns the tour's rows; with ``plot``, saves the spectra and the
    training curves there (needs matplotlib).
    """
    res = demo(quick=quick)
    m, c = res.metrics, res.config
    out(f"MSWT on Kuramoto-Sivashinsky (L = {c['length']:g}, {c['n']} points, one time unit ahead): "
        f"{c['train']} training and {c['test']} held-out trajectories, {c['steps']} steps per model")
    out(f"  {'model':<12} {'params':>7} {'rel. L2':>8} {'high-k':>7} {'spectrum':>9} "
        f"{f'{ROLLOUT}-step':>7} {'train s':>8}")
    for key in ("mswt", "transformer", "persistence"):
        r = m[key]
        out(f"  {key:<12} {r['params']:7d} {r['relative_l2']:8.4f} {r['high_k']:7.3f} {r['spectrum']:9.3f} "
            f"{r['rollout']:7.3f} {r['seconds']:8.1f}")
    out(f"  high-k: relative error at wavenumbers >= {HIGH_K}; spectrum: mean |log10 E_pred / E_true| over "
        f"k in [{SPECTRUM_K[0]}, {SPECTRUM_K[1]}); wall time {res.wall_time:.1f} s")
    if plot:
        plot_spectra(res, plot)
        out(f"figure saved to {plot}")
    return [{"area": "torch", "method": "MSWT1D vs plain transformer, Kuramoto-Sivashinsky", "n": c["n"],
             "result": f"rel. L2 {m['mswt']['relative_l2']:.3f}, high-k {m['mswt']['high_k']:.3f}",
             "vs anchor": f"transformer {m['transformer']['relative_l2']:.3f} (high-k "
                          f"{m['transformer']['high_k']:.3f}), persistence {m['persistence']['relative_l2']:.3f}",
             "speed": f"{m['mswt']['seconds'] / c['steps'] * 1e3:.0f} ms/step"}]
