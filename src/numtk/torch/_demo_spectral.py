"""The spectral alignment demonstration, run by ``python -m numtk demo spectral`` and the tour.

A 2-D Gaussian mixture (8 components of standard deviation 0.1 on a circle of radius 2) is learned by a small
v-prediction diffusion model: an MLP denoiser on (x_t, time features) whose hidden state h (32 features after
its second layer) is what the alignment terms read. The same model, from the same initialisation and on the
same data and noise, is trained for the same number of steps with

- ``plain``: the denoising loss alone;
- ``repa``: plus REPA's negative cosine to a frozen encoder's features of the clean sample (lam = 0.5);
- ``spectral``: plus the spectral alignment regulariser between two noisings of each clean sample at two
  independent noise levels (self-supervised; lam = 1);
- ``spectral_repa``: plus the spectral loss between the projected h and the frozen encoder's features (lam = 1).

The frozen encoder stands in for REPA's DINOv2: an MLP pretrained without labels on the clean mixture with the
spectral contrastive loss (two Gaussian jitters of each point as the positive pair).

Everything is measured against closed forms of the mixture: the denoising loss of the exact optimal velocity
E[eps - x0 | x_t] (the posterior over components is explicit), so the *excess error* ``||v_theta - v*||^2 / 2``
shows how far training has come, and the Bayes accuracy of the component given x_t bounds the probe. The probe
is linear (a multinomial logistic regression on h), fitted on h at t = 0.05 and tested on h at
t = 0.2, 0.3, 0.4: it asks whether h encodes the component the same way at every noise level, which is what
aligning two noise levels asks of it. (A probe fitted and tested at one t reaches the Bayes accuracy for every
variant: in two dimensions any rich hidden layer separates the components linearly; it is printed too.)
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import torch, torch_generator, torch_threads
from numtk.torch._spectral import build_projector, diffusion_loss, linear_interpolant, spectral_contrastive_loss

__all__ = ["demo", "run", "mixture_means", "sample_mixture", "optimal_velocity", "bayes_accuracy",
           "MixtureDenoiser", "pretrain_encoder", "plot_curves", "VARIANTS"]

#: the mixture: components, radius of the circle of means, standard deviation of each component
COMPONENTS, RADIUS, STD = 8, 2.0, 0.1
#: width of the denoiser, dimension of its hidden state h, embedding dimension of the alignment terms
WIDTH, HIDDEN, EMBED = 64, 32, 16
#: the variants and their weights lam
VARIANTS = {"plain": (None, 0.0), "repa": ("repa", 0.5), "spectral": ("spectral", 1.0),
            "spectral_repa": ("spectral_repa", 1.0)}
BATCH, LR = 256, 1e-3
PROBE_FIT_T, PROBE_TEST_T = 0.05, (0.2, 0.3, 0.4)
DEFAULT_STEPS, QUICK_STEPS = 800, 300


# --------------------------------------------------------------------------------------------------
# the mixture and its closed forms
# --------------------------------------------------------------------------------------------------
def mixture_means(dtype: Any = None) -> Any:
    """The (8, 2) means: equally spaced on the circle of radius 2."""
    angle = 2.0 * math.pi * torch.arange(COMPONENTS, dtype=torch.float64) / COMPONENTS
    return torch.stack([RADIUS * torch.cos(angle), RADIUS * torch.sin(angle)], dim=1).to(dtype or torch.float32)


def sample_mixture(n: int, gen: Any) -> tuple:
    """``n`` points of the mixture and their components, drawn with the torch generator ``gen``."""
    c = torch.randint(0, COMPONENTS, (n,), generator=gen)
    return mixture_means()[c] + STD * torch.randn(n, 2, generator=gen), c


def _posterior(x_t: Any, t: Any) -> tuple:
    """Responsibilities (n, K) of the components given x_t, and the per-component E[x0 | x_t, c] (n, K, 2)."""
    x, t = x_t.double(), t.double()[:, None]
    a, m = 1.0 - t, mixture_means(torch.float64)
    var = a ** 2 * STD ** 2 + t ** 2
    diff = x[:, None, :] - a[:, :, None] * m[None]
    resp = torch.softmax(-(diff ** 2).sum(-1) / (2.0 * var), dim=1)
    x0 = m[None] + (a * STD ** 2 / var)[:, :, None] * diff
    return resp, x0


def optimal_velocity(x_t: Any, t: Any) -> Any:
    """E[eps - x0 | x_t] for the linear path x_t = (1 - t) x0 + t eps (t > 0), in float64:
    (x_t - E[x0 | x_t]) / t, with the posterior over components in closed form."""
    resp, x0 = _posterior(x_t, t)
    x0_hat = (resp[:, :, None] * x0).sum(1)
    return (x_t.double() - x0_hat) / t.double()[:, None]


def bayes_accuracy(t: float, n: int = 20000, *, seed: int = 0) -> float:
    """Accuracy of the Bayes classifier of the component given x_t (the most probable component)."""
    gen = torch.Generator().manual_seed(seed)
    x0, c = sample_mixture(n, gen)
    x_t, _ = linear_interpolant(x0, torch.randn(n, 2, generator=gen), t)
    resp, _ = _posterior(x_t, torch.full((n,), float(t)))
    return float((resp.argmax(1) == c).double().mean())


# --------------------------------------------------------------------------------------------------
# the models
# --------------------------------------------------------------------------------------------------
def _linear(fan_in: int, fan_out: int, gen: Any) -> Any:
    """nn.Linear with PyTorch's default initialisation drawn from ``gen`` (not the global state)."""
    lin = torch.nn.utils.skip_init(torch.nn.Linear, fan_in, fan_out)
    with torch.no_grad():
        torch.nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5.0), generator=gen)
        lin.bias.uniform_(-1.0 / math.sqrt(fan_in), 1.0 / math.sqrt(fan_in), generator=gen)
    return lin


def _time_features(t: Any) -> Any:
    freq = math.pi * torch.arange(1, 5, dtype=t.dtype, device=t.device)
    return torch.cat([torch.sin(t[:, None] * freq), torch.cos(t[:, None] * freq)], dim=1)


class MixtureDenoiser(torch.nn.Module):
    """The demo's denoiser: (x_t, t) -> (v, h), an MLP with the hidden state h after its second layer.

    Layers: [x_t, time features] -> width -> hidden (h) -> [h, time features] -> width -> 2, SiLU between
    them; time features sin/cos(pi j t), j = 1..4. Initialised from ``rng`` (an int or a torch.Generator).
    """

    def __init__(self, *, width: int = WIDTH, hidden: int = HIDDEN, rng: Any = 0):
        super().__init__()
        gen = torch_generator(rng)
        self.l1, self.l2 = _linear(10, width, gen), _linear(width, hidden, gen)
        self.l3, self.l4 = _linear(hidden + 8, width, gen), _linear(width, 2, gen)

    def forward(self, x: Any, t: Any) -> tuple:
        act = torch.nn.functional.silu
        tf = _time_features(t)
        h = act(self.l2(act(self.l1(torch.cat([x, tf], dim=1)))))
        return self.l4(act(self.l3(torch.cat([h, tf], dim=1)))), h


def pretrain_encoder(*, steps: int = 200, jitter: float = 0.3, rng: Any = 0) -> Any:
    """A frozen encoder of clean points (2 -> 64 -> 64 -> 16, SiLU), pretrained without labels with the
    spectral contrastive loss on two Gaussian jitters (std ``jitter``) of each point: the demo's DINOv2."""
    gen = torch_generator(rng)
    enc = torch.nn.Sequential(_linear(2, 64, gen), torch.nn.SiLU(), _linear(64, 64, gen), torch.nn.SiLU(),
                              _linear(64, EMBED, gen))
    opt = torch.optim.Adam(enc.parameters(), lr=2e-3)
    for _ in range(steps):
        x0, _ = sample_mixture(BATCH, gen)
        v1 = x0 + jitter * torch.randn(x0.shape, generator=gen)
        v2 = x0 + jitter * torch.randn(x0.shape, generator=gen)
        loss = spectral_contrastive_loss(enc(v1), enc(v2))
        opt.zero_grad()
        loss.backward()
        opt.step()
    enc.requires_grad_(False)
    return enc.eval()


# --------------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------------
class _Evaluation:
    """Fixed held-out draws: the denoising set (t uniform on [0.02, 1]) with the optimal velocity, and the
    probe sets (h inputs at the probe times) with their components."""

    def __init__(self, n: int = 4000, seed: int = 12345):
        gen = torch.Generator().manual_seed(seed)
        x0, _ = sample_mixture(n, gen)
        eps = torch.randn(n, 2, generator=gen)
        self.t = 0.02 + 0.98 * torch.rand(n, generator=gen)
        self.x_t, self.v = linear_interpolant(x0, eps, self.t)
        self.v_star = optimal_velocity(self.x_t, self.t).float()
        self.optimal = float(((self.v_star - self.v) ** 2).sum(1).mean() / 2)
        self.probe = {}
        for t in (PROBE_FIT_T, *PROBE_TEST_T):
            x0, c = sample_mixture(2000, gen)
            x_t, _ = linear_interpolant(x0, torch.randn(2000, 2, generator=gen), t)
            self.probe[t] = (x_t, torch.full((2000,), float(t)), c.numpy())

    def errors(self, net) -> tuple[float, float]:
        """(held-out denoising loss, excess error ||v - v*||^2 / 2), both per coordinate as the training loss."""
        with torch.no_grad():
            pred, _ = net(self.x_t, self.t)
        return (float(((pred - self.v) ** 2).sum(1).mean() / 2), float(((pred - self.v_star) ** 2).sum(1).mean() / 2))

    def probes(self, net, *, same_t: bool = True) -> tuple[float, float]:
        """(transfer probe: a multinomial logistic regression fitted on h at t = 0.05, its mean accuracy at the
        test times; the same probe fitted and tested at t = 0.3 on two halves, NaN without ``same_t``)."""
        feats = {}
        with torch.no_grad():
            for t, (x_t, tt, c) in self.probe.items():
                feats[t] = (net(x_t, tt)[1].double(), c)
        W = _logistic_probe(*feats[PROBE_FIT_T])
        transfer = float(np.mean([_probe_accuracy(W, *feats[t]) for t in PROBE_TEST_T]))
        same = math.nan
        if same_t:
            H3, y3 = feats[0.3]
            same = _probe_accuracy(_logistic_probe(H3[:1000], y3[:1000]), H3[1000:], y3[1000:])
        return transfer, same


def _logistic_probe(H: Any, y: Any, l2: float = 1e-4) -> Any:
    """A linear probe: multinomial logistic regression (with a bias, an L2 penalty ``l2`` on the weights) on
    standardised features, fitted by L-BFGS in float64; returns (mean, std, weights)."""
    mean, std = H.mean(0), H.std(0).clamp_min(1e-8)
    X = torch.cat([(H - mean) / std, torch.ones(H.shape[0], 1, dtype=H.dtype)], dim=1)
    target = torch.as_tensor(y)
    W = torch.zeros(X.shape[1], COMPONENTS, dtype=H.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([W], lr=1.0, max_iter=50, tolerance_grad=1e-5, tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(X @ W, target) + l2 * (W[:-1] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return mean, std, W.detach()


def _probe_accuracy(probe: Any, H: Any, y: Any) -> float:
    mean, std, W = probe
    X = torch.cat([(H - mean) / std, torch.ones(H.shape[0], 1, dtype=H.dtype)], dim=1)
    return float(((X @ W).argmax(1) == torch.as_tensor(y)).double().mean())


def _sample_quality(net, n: int = 2000, ode_steps: int = 100, seed: int = 777) -> tuple[float, float, int]:
    """Euler integration of dx/dt = v(x, t) from t = 1 to 0 for ``n`` points: (MMD^2 against ``n`` mixture
    points, RBF bandwidth 0.2; share of samples within 3 std of a mean; components reached)."""
    from numtk.sampling import mmd

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=gen)
    grid = torch.linspace(1.0, 0.0, ode_steps + 1)
    with torch.no_grad():
        for i in range(ode_steps):
            v, _ = net(x, torch.full((n,), float(grid[i])))
            x = x + (grid[i + 1] - grid[i]) * v
    ref, _ = sample_mixture(n, gen)
    dist = torch.cdist(x.double(), mixture_means(torch.float64))
    near = dist.min(1).values < 3 * STD
    reached = len(set(dist.argmin(1)[near].tolist()))
    return float(mmd(x.numpy(), ref.numpy(), bandwidth=0.2)), float(near.double().mean()), reached


# --------------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------------
def _train(variant: str, steps: int, seed: int, encoder, ev: _Evaluation, checkpoints: list[int]) -> dict:
    """One run; the initialisation, the data and the first view's t and noise depend only on ``seed``."""
    regularizer, lam = VARIANTS[variant]
    net = MixtureDenoiser(rng=seed)
    proj = build_projector(HIDDEN, EMBED, hidden=64, rng=seed + 1)
    params = list(net.parameters()) + (list(proj.parameters()) if regularizer else [])
    opt = torch.optim.Adam(params, lr=LR)
    data = torch.Generator().manual_seed(seed + 2)
    out = {"step": [], "denoise": [], "excess": [], "align": [], "probe_step": [], "probe": []}
    align = float("nan")
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        x0, _ = sample_mixture(BATCH, data)
        noise = torch.Generator().manual_seed(seed * 1_000_003 + step)   # the same draws for every variant
        res = diffusion_loss(net, x0, regularizer=regularizer, lam=lam, projector=proj, target=encoder, rng=noise)
        opt.zero_grad()
        res.loss.backward()
        opt.step()
        if res.align is not None:
            align = float(res.align.detach())
        if step in checkpoints:
            d, e = ev.errors(net)
            for key, val in zip(("step", "denoise", "excess", "align"), (step, d, e, align)):
                out[key].append(val)
            if len(out["step"]) % 2 == 0 or step == steps:       # the probe at every other checkpoint
                p, q = ev.probes(net, same_t=step == steps)
                out["probe_step"].append(step)
                out["probe"].append(p)
    out["probe_same_t"] = q
    out["mmd"], out["near_mode"], out["modes"] = _sample_quality(net)
    out["wall"] = time.perf_counter() - t0
    return out


def _step_times(variants: tuple[str, ...], encoder: Any, *, rounds: int = 5, steps: int = 10) -> dict[str, float]:
    """Median seconds per training step of each variant, timed in interleaved rounds (each round runs every
    variant for ``steps`` steps, starting with a different one), so that the machine's load hits all alike."""
    setups = {}
    for v in variants:
        net, proj = MixtureDenoiser(rng=0), build_projector(HIDDEN, EMBED, hidden=64, rng=1)
        setups[v] = (net, proj, torch.optim.Adam(list(net.parameters()) + list(proj.parameters()), lr=LR))
    x0, _ = sample_mixture(BATCH, torch.Generator().manual_seed(0))
    samples: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds + 1):                      # round 0 warms up
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            net, proj, opt = setups[v]
            regularizer, lam = VARIANTS[v]
            t0 = time.perf_counter()
            for i in range(steps):
                res = diffusion_loss(net, x0, regularizer=regularizer, lam=lam, projector=proj, target=encoder,
                                     rng=i)
                opt.zero_grad()
                res.loss.backward()
                opt.step()
            if r:
                samples[v].append((time.perf_counter() - t0) / steps)
    return {v: float(np.median(x)) for v, x in samples.items()}


def _steps_to(steps: list[int], curve: list[float], level: float) -> float:
    """The first step at which ``curve`` reaches ``level`` (linear interpolation between checkpoints); inf if
    never."""
    prev_s, prev_v = 0, math.inf
    for s, v in zip(steps, curve):
        if v <= level:
            if not math.isfinite(prev_v):
                return float(s)
            return prev_s + (s - prev_s) * (prev_v - level) / (prev_v - v)
        prev_s, prev_v = s, v
    return math.inf


@constraints(steps="count", rng="rng", progress="bool", seeds="count", variants="option")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, seeds: int = 3,
         variants: tuple[str, ...] = tuple(VARIANTS)) -> Any:
    """Train the 2-D mixture diffusion model with the plain loss and with each alignment term, same steps.

    Parameters
    ----------
    steps : int, optional
        Training steps of every run (default 800; the tour runs 300).
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Seeds the runs (a run's initialisation, data and noise are shared by its variants).
    progress : bool, default False
        Show a progress bar over the runs.
    seeds : int, default 3
        Runs per variant.
    variants : tuple of str
        Among 'plain', 'repa', 'spectral', 'spectral_repa' ('plain' is always run: it is the reference).

    Returns
    -------
    Result
        metrics : dict
            Per variant (means over the seeds): ``denoise`` (final held-out denoising loss), ``denoise_ratio``
            (to plain's), ``excess`` (final ``||v - v*||^2 / 2``), ``probe`` (transfer probe accuracy),
            ``probe_same_t``, ``mmd``, ``near_mode``, ``modes``, ``steps_to_plain`` (steps at which the mean
            excess curve reaches plain's final excess error; None if it does not), ``step_ratio``
            (steps / steps_to_plain, None likewise: fewer steps, not less time),
            ``seconds_per_step`` and ``time_ratio`` (over plain's; timed apart from the runs, the variants
            interleaved), ``seconds_to_plain`` (steps_to_plain x seconds_per_step: the wall-clock time to
            reach plain's final excess error) and ``time_to_plain_ratio`` (that over plain's time for all its
            steps; above 1: slower than plain in wall-clock time, None if not reached), and the per-seed lists ``denoise_seeds``,
            ``excess_seeds``, ``probe_seeds``; also ``optimal_denoise`` (the loss of v*), ``bayes_probe`` (the Bayes
            accuracy at the probe's test times, averaged), ``steps``, ``seeds``.
        history : dict of lists
            ``step`` (the checkpoints), ``probe_step`` (those where the probe was fitted: every other one and
            the last) and, per variant, ``<variant>/excess``, ``/denoise``, ``/align`` (at ``step``; the
            alignment term before lam, for the variants that have one) and
            ``/probe`` (at ``probe_step``), means over the seeds.
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.spectral import demo
    >>> res = demo(steps=10, seeds=1, variants=("spectral",))         # a few seconds
    >>> sorted(k for k in res.metrics if isinstance(res.metrics[k], dict))
    ['plain', 'spectral']
    >>> res.history["step"]
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    >>> 0.0 < res.metrics["spectral"]["probe"] <= 1.0
    True
    """
    from numtk._lib import Result, normalize_rng, progress_bar
    from numtk._lib._validation import check_bool, check_int

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=1, maximum=10**6)
    seeds = check_int(seeds, "seeds", minimum=1, maximum=100)
    progress = check_bool(progress, "progress")
    if (not isinstance(variants, (tuple, list)) or not variants
            or not all(isinstance(v, str) and v in VARIANTS for v in variants)):
        raise ValueError(f"`variants` must be a non-empty tuple of names among {', '.join(map(repr, VARIANTS))}; "
                         f"got {variants!r}")
    variants = ("plain",) + tuple(v for v in VARIANTS if v in variants and v != "plain")
    if isinstance(rng, torch.Generator):
        base = int(torch.randint(0, 2**31 - 1, (1,), generator=rng))
    else:
        base = int(normalize_rng(rng, name="rng").integers(0, 2**31 - 1))
    t_start = time.perf_counter()
    n_checks = min(steps, 10)
    checkpoints = sorted({max(1, round(steps * (i + 1) / n_checks)) for i in range(n_checks)})
    with torch_threads(1):  # small matrices: thread hand-offs cost more than they save
        ev = _Evaluation()
        encoder = pretrain_encoder(rng=base) if any(v in ("repa", "spectral_repa") for v in variants) else None
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    jobs = [(s, v) for s in range(seeds) for v in variants]
    with torch_threads(1):  # small matrices: thread hand-offs cost more than they save
        for s, v in progress_bar(jobs, progress=progress, desc="spectral demo"):
            runs[v].append(_train(v, steps, base + 7919 * s, encoder, ev, checkpoints))
        step_time = _step_times(variants, encoder)

    history: dict[str, list] = {"step": list(checkpoints), "probe_step": runs["plain"][0]["probe_step"]}
    metrics: dict[str, Any] = {"steps": steps, "seeds": seeds, "optimal_denoise": ev.optimal,
                               "bayes_probe": float(np.mean([bayes_accuracy(t) for t in PROBE_TEST_T]))}
    for v, rs in runs.items():
        for key in ("excess", "denoise", "probe") + (("align",) if VARIANTS[v][0] else ()):
            history[f"{v}/{key}"] = [float(x) for x in np.mean([r[key] for r in rs], axis=0)]
    plain_final = history["plain/excess"][-1]
    for v, rs in runs.items():
        to_plain = _steps_to(checkpoints, history[f"{v}/excess"], plain_final)
        m = {key: float(np.mean([r[key][-1] for r in rs])) for key in ("denoise", "excess", "probe")}
        m.update({key: float(np.mean([r[key] for r in rs])) for key in ("probe_same_t", "mmd", "near_mode", "modes")})
        m.update(denoise_seeds=[r["denoise"][-1] for r in rs], excess_seeds=[r["excess"][-1] for r in rs],
                 probe_seeds=[r["probe"][-1] for r in rs],
                 steps_to_plain=to_plain if math.isfinite(to_plain) else None,
                 step_ratio=steps / to_plain if math.isfinite(to_plain) and to_plain > 0 else None,
                 seconds_per_step=step_time[v], time_ratio=step_time[v] / step_time["plain"],
                 seconds_to_plain=to_plain * step_time[v] if math.isfinite(to_plain) else None,
                 time_to_plain_ratio=(to_plain * step_time[v] / (steps * step_time["plain"])
                                      if math.isfinite(to_plain) else None))
        metrics[v] = m
    for v in runs:
        metrics[v]["denoise_ratio"] = metrics[v]["denoise"] / metrics["plain"]["denoise"]
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t_start)


# --------------------------------------------------------------------------------------------------
# figure and table
# --------------------------------------------------------------------------------------------------
_LABELS = {"plain": "plain denoising loss", "repa": "+ REPA (negative cosine, frozen encoder)",
           "spectral": "+ spectral alignment (two noise levels)",
           "spectral_repa": "+ spectral REPA (frozen encoder)"}


def plot_curves(res: Any, path: str) -> None:
    """The training curves of a :func:`demo` Result: excess error and transfer-probe accuracy against steps."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    h, m = res.history, res.metrics
    variants = [k.split("/")[0] for k in h if k.endswith("/excess")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for v in variants:
        color = f"C{list(VARIANTS).index(v)}"                     # one colour per variant in every figure
        left.plot(h["step"], h[f"{v}/excess"], "-o", ms=3, color=color, label=_LABELS[v])
        right.plot(h["probe_step"], h[f"{v}/probe"], "-o", ms=3, color=color, label=_LABELS[v])
    left.set_yscale("log")
    left.set_ylabel("excess denoising error ||v - v*||^2 / 2")
    seeds = "one seed" if m["seeds"] == 1 else f"mean of {m['seeds']} seeds"
    left.set_title(f"held-out error to the exact optimal velocity ({seeds})", fontsize=9)
    right.axhline(m["bayes_probe"], color="grey", ls="--", lw=0.8, label="Bayes accuracy")
    right.set_ylabel("probe accuracy (fit t = 0.05, test t = 0.2-0.4)")
    right.set_title("linear probe of h for the mixture component", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("training step")
    left.legend(fontsize=7, loc="upper right")
    right.legend(handles=[right.lines[-1]], labels=["Bayes accuracy"], fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Train the mixture diffusion model with and without the alignment terms; print the table.

    Quick: 300 steps, one seed, without REPA's variant (the tour); otherwise the default :func:`demo` (800
    steps, 3 seeds, the four variants).
    """
    if quick:
        res = demo(steps=QUICK_STEPS, seeds=1, variants=("plain", "spectral", "spectral_repa"))
    else:
        res = demo()
    m = res.metrics
    out(f"2-D Gaussian mixture ({COMPONENTS} components, std {STD}, radius {RADIUS}), MLP denoiser with a "
        f"{HIDDEN}-feature hidden state, {m['steps']} Adam steps of batch {BATCH}, {m['seeds']} seed(s), "
        f"{res.wall_time:.1f} s")
    out(f"  optimal denoising loss (exact v*) {m['optimal_denoise']:.4f}; Bayes accuracy at the probe's noise "
        f"levels {m['bayes_probe']:.3f}")
    out("  variant                                    denoise (/plain)  excess   probe  probe@t  MMD^2    near  "
        "steps to plain  time/step  time to plain")
    for v in (k for k in VARIANTS if k in m):
        r = m[v]
        reach = "not reached" if r["steps_to_plain"] is None else f"{r['steps_to_plain']:.0f}"
        wall = "-" if r["time_to_plain_ratio"] is None else f"{r['time_to_plain_ratio']:.2f}x"
        out(f"  {_LABELS[v]:<42} {r['denoise']:.4f} ({r['denoise_ratio']:.3f})  {r['excess']:.4f}  "
            f"{r['probe']:.3f}  {r['probe_same_t']:.3f}    {r['mmd']:.4f}  {r['near_mode']:.2f}  "
            f"{reach:>14}  {r['time_ratio']:>8.2f}x  {wall:>13}")
    out("  (excess: ||v - v*||^2 / 2 on held-out draws; probe: linear, fitted on h at t = 0.05, tested at "
        "t = 0.2, 0.3, 0.4; probe@t: fitted and tested at t = 0.3; steps to plain: when the mean excess curve "
        "reaches plain's final value; time to plain: the wall-clock time to get there (steps x time/step) "
        "over plain's for all its steps, above 1x meaning no wall-clock speed-up)")
    if plot:
        plot_curves(res, plot)
        out(f"figure saved to {plot}")
    rows = []
    p = m["plain"]
    for v in ("spectral", "spectral_repa"):
        if v not in m:
            continue
        r = m[v]
        seeds = f"{m['seeds']} seed{'s' if m['seeds'] > 1 else ''}"
        rows.append({"area": "torch", "method": f"{v} alignment, 2-D mixture diffusion ({seeds})", "n": m["steps"],
                     "result": f"excess {r['excess']:.3f} (plain {p['excess']:.3f}), probe {r['probe']:.3f} "
                               f"(plain {p['probe']:.3f})",
                     "vs anchor": f"denoise x{r['denoise_ratio']:.3f} of plain; REPA excess "
                                  f"{m['repa']['excess']:.3f}" if "repa" in m else
                                  f"denoise x{r['denoise_ratio']:.3f} of plain",
                     "speed": f"{r['time_ratio']:.2f}x time/step, plain's final error at step "
                              f"{r['steps_to_plain']:.0f} in {r['time_to_plain_ratio']:.2f}x plain's time"
                              if r["steps_to_plain"] is not None else
                              f"{r['time_ratio']:.2f}x time/step"})
    return rows
