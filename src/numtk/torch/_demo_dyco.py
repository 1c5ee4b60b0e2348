"""The DyCo-CL demonstration, run by ``python -m numtk demo dyco`` and the tour.

Windows of the eleven RML2016.10a-like modulations (:func:`numtk.datasets.rml2016_like`, 2 x 128 float32,
channel on, true SNR) train one small encoder three ways from the same initialisation, on the same unlabelled
windows (SNR 0 to 18 dB) and the same batches:

- ``random``: not trained (the initialisation itself);
- ``simclr``: SimCLR's NT-Xent between two augmented views (:class:`~numtk.torch.dyco.DyCoCL` with
  ``lam_cons = 0`` and ``eps = 0``: no adversarial view, no consistency term);
- ``dyco``: the DyCo-CL objective (the second view perturbed by the virtual adversarial perturbation,
  ``eps = 0.05`` relative, one power step, plus the consistency term with ``lam_cons = 1``).

The encoder is a :class:`~numtk.torch.dyco.SignalSwin1D` (patch 8: 16 tokens, widths 32 and 64, one block
per stage, window 8) whose embedding is fused with the 14 :func:`~numtk.torch.dyco.expert_features` by a
:class:`~numtk.torch.dyco.HybridFusion`, on windows scaled to unit power; the projector is a two-layer MLP.
Everything is reconstructed (see :mod:`numtk.torch.dyco`).

Evaluation: frozen encoder outputs of held-out windows at each test SNR; 1-shot episodes (one labelled
window per class drawn from that SNR, every other window of that SNR a query) classified by cosine to the
prototypes (:func:`~numtk.torch.dyco.prototype_accuracy`), averaged over many episodes; the same episodes for
every encoder. Chance is 1/11.

Measured on two shared cores, six seeds (``demo(seeds=6)``, run as two halves of three seeds side by side,
about 240 s each), with the VAA step ``xi = 1e-3`` relative to each window's norm: 1-shot accuracy over the
test SNRs 0.201 (random), 0.341 (SimCLR), 0.352 (DyCo-CL), and 0.243, 0.451, 0.462 at SNR >= 0 dB; DyCo-CL
ahead of SimCLR on all six seeds, by 1.1 points on average (+0.01 to +2.3, standard error 0.3). A small margin
at this scale, reported as measured. ``eps = 0.05``, ``tau = 0.1`` and ``lam_cons = 1`` are the spec's
defaults; ``xi`` is set by the demo (``XI``): the spec's absolute 1e-6 is lost to float32 rounding on
windows of norm about 0.09, and 1e-3 relative keeps about the absolute step 1e-4 with which the demo was first
measured (the function's default, sqrt(eps) of float32 relative, is 3.5e-4).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int
from numtk.torch._common import numpy_rng, torch, torch_generator, torch_threads
from numtk.torch._dyco import DyCoCL, HybridFusion, SignalSwin1D, expert_features, prototype_accuracy

__all__ = ["demo", "run", "FusedEncoder", "plot_accuracy", "VARIANTS", "TEST_SNR"]

VARIANTS = ("random", "simclr", "dyco")
#: pre-training SNRs (dB) and test SNRs
TRAIN_SNR = tuple(range(0, 20, 2))
TEST_SNR = (-10, -6, -2, 2, 6, 10, 14, 18)
DEFAULT_STEPS, QUICK_STEPS = 200, 50
BATCH, QUICK_BATCH, LR = 128, 64, 1e-3
PRE_PER_CLASS, TEST_PER_CLASS = 20, 30
EPISODES, QUICK_EPISODES = 200, 60
#: the finite-difference step of the perturbation, relative to each window's Euclidean norm (about 0.09 for
#: the L1-normalised windows, so about the absolute 1e-4 of earlier versions): well above float32 rounding,
#: where the spec's 1e-6 drowns the power step in it (the numbers in the module docstring use this step)
XI = 1e-3
_LABELS = {"random": "random encoder", "simclr": "SimCLR (NT-Xent only)", "dyco": "DyCo-CL (VAA view + consistency)"}


class FusedEncoder(torch.nn.Module):
    """The demo's encoder: windows scaled to unit mean power, a :class:`SignalSwin1D`, and (with ``fusion``)
    a :class:`HybridFusion` with the :func:`expert_features` of the scaled window."""

    def __init__(self, *, fusion: bool = True, rng: Any = 0):
        super().__init__()
        self.swin = SignalSwin1D(length=128, patch=8, dims=(32, 64), depths=(1, 1), heads=(2, 4), window=8,
                                 rng=rng)
        if rng is None or isinstance(rng, (int, np.integer)):
            frng = None if rng is None else int(rng) + 1
        else:
            # a numpy or torch Generator: the Swin's initialisation has drawn from it; draw the next seed
            frng = torch_generator(rng)
        self.fusion = HybridFusion(64, 14, rng=frng) if fusion else None

    def forward(self, x: Any) -> Any:
        x = x / x.pow(2).mean((1, 2), keepdim=True).sqrt().clamp_min(torch.finfo(x.dtype).tiny)
        h = self.swin(x)
        return h if self.fusion is None else self.fusion(h, expert_features(x))


def _projector(seed: int) -> Any:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))


def _embed(encoder: Any, X: Any) -> Any:
    encoder.eval()
    with torch.no_grad():
        out = torch.cat([encoder(X[i:i + 512]) for i in range(0, len(X), 512)])
    encoder.train()
    return out


def _episodes(y: np.ndarray, snr: np.ndarray, n_classes: int, episodes: int, seed: int) -> dict:
    """Per test SNR, ``episodes`` support sets: one index per class drawn from that SNR."""
    gen = np.random.default_rng(seed)
    out = {}
    for s in np.unique(snr):
        pools = [np.flatnonzero((snr == s) & (y == c)) for c in range(n_classes)]
        out[float(s)] = np.stack([[gen.choice(p) for p in pools] for _ in range(episodes)])
    return out


def _one_shot(Z: Any, y: np.ndarray, snr: np.ndarray, supports: dict) -> dict:
    """Mean 1-shot prototype accuracy per SNR over the episodes (queries: every other window of that SNR)."""
    yt = torch.as_tensor(y)
    acc = {}
    for s, sup in supports.items():
        at = np.flatnonzero(snr == s)
        vals = []
        for idx in sup:
            q = np.setdiff1d(at, idx)
            vals.append(prototype_accuracy(Z[idx], yt[idx], Z[q], yt[q]))
        acc[s] = float(np.mean(vals))
    return acc


@constraints(steps="count", rng="rng", progress="bool", seeds="count", batch="count", episodes="count",
             fusion="bool")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, seeds: int = 1,
         batch: int = BATCH, episodes: int = EPISODES, fusion: bool = True) -> Result:
    """Pre-train the encoder with DyCo-CL and with SimCLR; 1-shot prototype accuracy against a random encoder.

    Parameters
    ----------
    steps : int, optional
        Adam steps per pre-training run (default 200).
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Seeds the data, the initialisations, the batches, the augmentations and the episodes (a torch.Generator
        gives one seed).
    progress : bool, default False
        Show a progress bar over the runs (seeds times variants; tqdm).
    seeds : int, default 1
        Independent repetitions (data, initialisation and episodes redrawn); the metrics average them.
    batch : int, default 128
    episodes : int, default 200
        1-shot episodes per test SNR.
    fusion : bool, default True
        Fuse the expert features into the embedding (:class:`~numtk.torch.dyco.HybridFusion`).

    Returns
    -------
    Result
        metrics : dict
            For each variant ``'<variant>_1shot'`` (mean over the test SNRs and seeds), ``'<variant>_1shot_high'``
            (SNR >= 0 dB), ``'<variant>_by_snr'`` (a list, one per test SNR), ``'<variant>_by_seed'`` (a list of
            the per-seed means); ``'time_per_step_simclr'`` and ``'time_per_step_dyco'`` (s); the settings
            ``'steps'``, ``'seeds'``, ``'batch'``, ``'episodes'``, ``'fusion'`` and the test SNRs ``'snr'``.
        history : dict
            The training loss per step of each trained variant and seed (``'simclr_loss'``, ``'dyco_loss'``:
            lists of lists) and DyCo-CL's two terms (``'dyco_nce'``, ``'dyco_cons'``).
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.dyco import demo
    >>> res = demo(steps=2, batch=16, episodes=2)          # a few seconds; the claim needs the default
    >>> sorted(k for k in res.metrics if k.endswith("_1shot"))
    ['dyco_1shot', 'random_1shot', 'simclr_1shot']
    >>> len(res.history["dyco_loss"][0]), 0.0 <= res.metrics["dyco_1shot"] <= 1.0
    (2, True)
    """
    from numtk._lib import progress_bar
    from numtk.datasets import rml2016_like

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=1, maximum=10**6)
    progress = check_bool(progress, "progress")
    seeds = check_int(seeds, "seeds", minimum=1, maximum=1000)
    batch = check_int(batch, "batch", minimum=2, maximum=2**16)
    episodes = check_int(episodes, "episodes", minimum=1, maximum=10**5)
    fusion = check_bool(fusion, "fusion")
    master = numpy_rng(rng, name="rng")
    t0 = time.perf_counter()
    by = {v: [] for v in VARIANTS}
    hist = {"simclr_loss": [], "dyco_loss": [], "dyco_nce": [], "dyco_cons": []}
    step_time = {"simclr": [], "dyco": []}
    seed_list = [int(master.integers(0, 2**31 - 1)) for _ in range(seeds)]
    bar = progress_bar(total=seeds * len(VARIANTS), progress=progress, desc="dyco demo")
    with torch_threads(1), bar:
        for seed in seed_list:
            pre = rml2016_like(PRE_PER_CLASS, snr_db=TRAIN_SNR, rng=seed)
            test = rml2016_like(TEST_PER_CLASS, snr_db=TEST_SNR, rng=seed + 1)
            Xp, Xt = torch.from_numpy(pre.X), torch.from_numpy(test.X)
            supports = _episodes(test.y, test.snr, len(test.classes), episodes, seed + 2)
            for v in VARIANTS:
                enc = FusedEncoder(fusion=fusion, rng=seed + 3)
                if v != "random":
                    kw = dict(lam_cons=0.0, eps=0.0) if v == "simclr" else dict(lam_cons=1.0, eps=0.05, xi=XI)
                    model = DyCoCL(enc, _projector(seed + 5), **kw)
                    opt = torch.optim.Adam(model.parameters(), lr=LR)
                    order = torch.Generator().manual_seed(seed + 6)
                    losses, nce, cons = [], [], []
                    t1 = time.perf_counter()
                    for i in range(steps):
                        idx = torch.randint(0, len(Xp), (batch,), generator=order)
                        loss, parts = model.loss(Xp[idx], rng=seed + 7 + i, parts=True)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        losses.append(float(loss.detach()))
                        nce.append(parts["nce"])
                        cons.append(parts["cons"])
                    step_time[v].append((time.perf_counter() - t1) / steps)
                    hist[f"{v}_loss"].append(losses)
                    if v == "dyco":
                        hist["dyco_nce"].append(nce)
                        hist["dyco_cons"].append(cons)
                acc = _one_shot(_embed(enc, Xt), test.y, test.snr, supports)
                by[v].append([acc[float(s)] for s in TEST_SNR])
                bar.update(1)
    snr = np.array(TEST_SNR)
    metrics: dict = {"steps": steps, "seeds": seeds, "batch": batch, "episodes": episodes, "snr": list(TEST_SNR),
                     "fusion": fusion}
    for v in VARIANTS:
        a = np.array(by[v])
        metrics[f"{v}_1shot"] = float(a.mean())
        metrics[f"{v}_1shot_high"] = float(a[:, snr >= 0].mean())
        metrics[f"{v}_by_snr"] = a.mean(0).tolist()
        metrics[f"{v}_by_seed"] = a.mean(1).tolist()
    metrics["time_per_step_simclr"] = float(np.mean(step_time["simclr"]))
    metrics["time_per_step_dyco"] = float(np.mean(step_time["dyco"]))
    return Result(metrics=metrics, history=hist, wall_time=time.perf_counter() - t0)


def plot_accuracy(res: Result, path: str) -> None:
    """1-shot accuracy against SNR for the three encoders (left) and the NT-Xent term of the two trainings
    (right; DyCo-CL's on its harder, adversarial pairs)."""
    from numtk._lib._optional import pyplot

    plt = pyplot()

    m = res.metrics
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for v, style in zip(VARIANTS, (":", "--", "-")):
        ax.plot(m["snr"], m[f"{v}_by_snr"], style, marker="o", label=f"{_LABELS[v]} ({m[f'{v}_1shot']:.3f})")
    ax.axhline(1 / 11, color="grey", lw=0.8)
    ax.set_xlabel("SNR (dB, true)")
    ax.set_ylabel("1-shot prototype accuracy")
    ax.set_title(f"11 RML2016.10a-like classes, {m['episodes']} episodes per SNR")
    ax.legend(fontsize=8)
    for key, v, style in (("simclr_loss", "simclr", "--"), ("dyco_nce", "dyco", "-")):
        curve = np.mean(np.array(res.history[key]), axis=0)
        bx.plot(np.arange(1, len(curve) + 1), curve, style, label=_LABELS[v])
    cons = np.mean(np.array(res.history["dyco_cons"]), axis=0)
    bx.plot(np.arange(1, len(cons) + 1), cons, ":", label="DyCo-CL consistency term")
    bx.set_xlabel("step")
    bx.set_ylabel("NT-Xent (tau 0.1)")
    bx.set_title(f"{m['steps']} steps of batch {m['batch']}, {m['seeds']} seed(s)")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Pre-train with DyCo-CL and SimCLR, compare 1-shot accuracy with a random encoder; print the table.

    Quick (the tour): 50 steps of batch 64, 60 episodes per SNR; otherwise the default :func:`demo` (200
    steps of batch 128, 200 episodes).
    """
    if quick:
        res = demo(steps=QUICK_STEPS, batch=QUICK_BATCH, episodes=QUICK_EPISODES)
    else:
        res = demo()
    m = res.metrics
    out(f"RML2016.10a-like windows (11 classes, channel on), {PRE_PER_CLASS * 11 * len(TRAIN_SNR)} unlabelled "
        f"pre-training windows at SNR 0..18 dB; small signal Swin + expert-feature fusion; {m['steps']} Adam steps "
        f"of batch {m['batch']}, {m['seeds']} seed(s), {res.wall_time:.1f} s")
    out("  encoder                            1-shot (all SNR)  1-shot (SNR >= 0)  s/step")
    for v in VARIANTS:
        t = m.get(f"time_per_step_{v}")
        ts = f"{t:.3f}" if t is not None else "-"
        out(f"  {_LABELS[v]:<34} {m[f'{v}_1shot']:.3f}             {m[f'{v}_1shot_high']:.3f}              {ts}")
    out("  by SNR (dB): " + "  ".join(f"{s:+d}" for s in m["snr"]))
    for v in VARIANTS:
        out(f"  {v:<7} " + " ".join(f"{a:.3f}" for a in m[f"{v}_by_snr"]))
    out(f"  (1-shot: one labelled window per class, cosine to the prototype, {m['episodes']} episodes per SNR; "
        "chance 0.091)")
    if plot:
        plot_accuracy(res, plot)
        out(f"figure saved to {plot}")
    d, s, r = m["dyco_1shot"], m["simclr_1shot"], m["random_1shot"]
    return [{"area": "torch", "method": f"DyCo-CL pre-training, 1-shot on RML2016.10a-like ({m['steps']} steps)",
             "n": m["steps"], "result": f"1-shot {d:.3f} (SimCLR {s:.3f}, random {r:.3f})",
             "vs anchor": f"{100 * (d - s):+.1f} points over SimCLR, {100 * (d - r):+.1f} over random "
                          "(paper: +6.27 over prior methods)",
             "speed": f"{m['time_per_step_dyco'] / m['time_per_step_simclr']:.2f}x SimCLR's time per step"}]
