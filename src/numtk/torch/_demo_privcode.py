"""The PrivCode++ demonstration, run by ``python -m numtk demo privcode`` and the tour: canary exposure of a tiny
character language model trained on code-like lines with and without DP-SGD.

The data are generated lines of Python-like code from six templates (loops, branches, definitions, assignments,
calls) with random names and numbers, plus *canaries* (Carlini et al. 2019): lines ``key = '####'`` with a random
4-digit secret, inserted 1, 2, 4 and 8 times (``CANARY_REPS``). The model reads the previous ``CONTEXT`` characters
(an embedding per character, concatenated, a two-layer MLP) and predicts the next one; a record is one line.

Two runs from the same initialisation and for the same number of steps: without privacy (Adam on uniformly drawn
batches) and with DP-SGD (:func:`~numtk.torch.privcode.dp_sgd_step`: Poisson sampling at rate q = batch / N,
per-line clipping at C = 1, the noise multiplier :func:`~numtk.torch.privcode.noise_multiplier_for` gives for the
target epsilon at delta = 1e-5, Adam on the noisy gradient). Each canary's exposure
(:func:`~numtk.torch.privcode.canary_exposure`) is computed by scoring all 10^4 secrets of its format; utility is
the held-out loss in nats per character on fresh lines of the same templates (no canaries).

DP-SGD's epsilon bounds what one record (one line) can change; a secret present in k lines is protected only by
group privacy (about k epsilon), and the measurements show it: the DP model's exposure grows with the copies.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import numpy_rng, torch, torch_threads
from numtk.torch._privcode import canary_exposure, dp_sgd_step, noise_multiplier_for, poisson_sample, rdp_epsilon

__all__ = ["demo", "run", "plot_exposure", "make_lines", "CharLM"]

ALPHABET = "\n abcdefghijklmnopqrstuvwxyz0123456789=+-*<>:()[],'_"
PAD, BOS = len(ALPHABET), len(ALPHABET) + 1   # the context's padding and start symbols (never predicted)
CONTEXT, EMBED, HIDDEN, MAXLEN = 8, 16, 128, 32
N_LINES, N_HELDOUT, BATCH, LR, CLIP, DELTA = 1000, 500, 64, 3e-3, 1.0, 1e-5
CANARY_REPS = (1, 2, 4, 8)
DEFAULT_STEPS, QUICK_STEPS = 800, 100
DEFAULT_EPSILON = 4.0
_NAMES = ("a", "b", "x", "y", "n", "k", "i", "total", "count")


def make_lines(n: int, rng: np.random.Generator) -> list[str]:
    """n code-like lines from six templates (each ends with a newline, at most MAXLEN characters)."""
    out = []
    for t in rng.integers(0, 6, size=n):
        v, w = rng.choice(_NAMES, 2)
        a, b = (int(z) for z in rng.integers(0, 100, size=2))
        line = (f"for {v} in range({a}):", f"if {v} > {a}: {w} = {b}", f"def f{a}({v}): return {v} + {b}",
                f"{v} = [{a}, {b}]", f"while {v} < {a}: {v} += 1", f"print({v} * {a})")[int(t)]
        out.append(line[:MAXLEN - 1] + "\n")
    return out


def canary_line(secret: int) -> str:
    return f"key = '{secret:04d}'\n"


_LOOKUP = np.full(256, -1, dtype=np.int64)
_LOOKUP[np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(len(ALPHABET))


def _encode(lines: list[str]) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Context windows (n, MAXLEN, CONTEXT) and targets (n, MAXLEN) (-100 past the end of each line): position p
    predicts character p from the CONTEXT symbols before it (the start symbol, then padding, before the line)."""
    n = len(lines)
    raw = np.frombuffer("".join(line.ljust(MAXLEN, "\0")[:MAXLEN] for line in lines).encode("ascii"),
                        dtype=np.uint8).reshape(n, MAXLEN)
    chars = _LOOKUP[raw]
    lengths = np.array([min(len(line), MAXLEN) for line in lines])
    valid = np.arange(MAXLEN)[None, :] < lengths[:, None]
    tgt = np.where(valid, chars, -100)
    seq = np.full((n, CONTEXT + MAXLEN), PAD, dtype=np.int64)
    seq[:, CONTEXT - 1] = BOS
    seq[:, CONTEXT:] = np.where(valid, chars, PAD)
    ctx = np.lib.stride_tricks.sliding_window_view(seq, CONTEXT, axis=1)[:, :MAXLEN]
    return torch.from_numpy(np.ascontiguousarray(ctx)), torch.from_numpy(tgt)


class CharLM(torch.nn.Module):
    """Next character from the previous CONTEXT characters: embeddings, concatenated, a two-layer MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(len(ALPHABET) + 2, EMBED)
        self.hidden = torch.nn.Linear(CONTEXT * EMBED, HIDDEN)
        self.out = torch.nn.Linear(HIDDEN, len(ALPHABET))

    def forward(self, ctx: "torch.Tensor") -> "torch.Tensor":
        h = self.emb(ctx).flatten(-2)
        return self.out(torch.tanh(self.hidden(h)))


def _loss(model: Any, batch: tuple) -> "torch.Tensor":
    """Mean next-character cross-entropy over the batch's characters (per line when the batch holds one)."""
    ctx, tgt = batch
    logits = model(ctx)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                             ignore_index=-100)


def _line_log_likelihoods(model: CharLM, lines: list[str], chunk: int = 2500) -> "torch.Tensor":
    out = []
    with torch.no_grad():
        for s in range(0, len(lines), chunk):
            ctx, tgt = _encode(lines[s:s + chunk])
            logp = torch.log_softmax(model(ctx), -1)
            valid = tgt >= 0
            ll = logp.gather(-1, tgt.clamp_min(0)[..., None])[..., 0]
            out.append((ll * valid).sum(1))
    return torch.cat(out)


def _exposures(model: CharLM, secrets: list[int]) -> list[float]:
    lls = _line_log_likelihoods(model, [canary_line(s) for s in range(10_000)])
    return [canary_exposure(lls, s).exposure for s in secrets]


def _heldout(model: CharLM, data: tuple) -> float:
    with torch.no_grad():
        return float(_loss(model, data))


def _train(private: bool, data: tuple, heldout: tuple, steps: int, sigma: float, seed: int,
           progress: bool, log_every: int) -> tuple:
    from numtk._lib import progress_bar

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CharLM()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(seed + 1 + int(private))
    n = data[0].shape[0]
    q = BATCH / n
    curve = []
    for t in progress_bar(range(steps), progress=progress, desc="DP-SGD" if private else "non-private"):
        if private:
            idx = poisson_sample(n, q, rng=gen)
            dp_sgd_step(model, _loss, (data[0][idx], data[1][idx]), opt, clip_norm=CLIP, noise_multiplier=sigma,
                        rng=gen, expected_batch_size=q * n)
        else:
            idx = torch.randint(0, n, (BATCH,), generator=gen)
            opt.zero_grad()
            _loss(model, (data[0][idx], data[1][idx])).backward()
            opt.step()
        if (t + 1) % log_every == 0 or t + 1 == steps:
            curve.append((t + 1, _heldout(model, heldout)))
    return model, curve


@constraints(steps="count", rng="rng", progress="bool", epsilon="real>0")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, epsilon: float = DEFAULT_EPSILON) -> Any:
    """Canary exposure and held-out loss of a character LM trained without and with DP-SGD at ``epsilon``.

    Parameters
    ----------
    steps : int, optional
        Steps of each run (default 800); batches of 64 lines (expected, for DP-SGD) out of 1015.
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Seeds the data, the canaries' secrets, the initialisation and the draws.
    progress : bool, default False
        Show progress bars.
    epsilon : float, default 4.0
        The DP-SGD run's epsilon at delta = 1e-5 (the noise multiplier is computed for it).

    Returns
    -------
    Result
        metrics : dict
            ``steps``, ``n_lines`` (records, canaries included), ``sample_rate``, ``noise_multiplier``,
            ``target_epsilon``, ``epsilon`` (of the run, by :func:`~numtk.torch.privcode.rdp_epsilon`), ``delta``,
            ``canary_reps``, ``exposure_nondp`` and ``exposure_dp`` (means over the canaries, bits; at most
            log2(10^4) = 13.3), ``exposures_nondp`` and ``exposures_dp`` (per canary), ``heldout_nondp``,
            ``heldout_dp`` and ``heldout_init`` (held-out loss in nats per character), ``time_nondp`` and
            ``time_dp`` (s).
        history : dict
            ``step``, ``loss_nondp``, ``loss_dp``: held-out loss during training.
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.privcode import demo
    >>> res = demo(steps=60)                                  # a few seconds
    >>> res.metrics["exposure_dp"] < res.metrics["exposure_nondp"]
    True
    """
    from numtk._lib import Result
    from numtk._lib._validation import check_bool, check_int, check_real

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=1, maximum=10**6)
    progress = check_bool(progress, "progress")
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
    gen = numpy_rng(rng, name="rng")
    t_start = time.perf_counter()
    lines = make_lines(N_LINES, gen)
    secrets = [int(s) for s in gen.choice(10_000, size=len(CANARY_REPS), replace=False)]
    for s, r in zip(secrets, CANARY_REPS):
        lines += [canary_line(s)] * r
    order = gen.permutation(len(lines))
    lines = [lines[i] for i in order]
    data = _encode(lines)
    heldout = _encode(make_lines(N_HELDOUT, gen))
    seed = int(gen.integers(0, 2**31 - 1))
    n = len(lines)
    q = BATCH / n
    sigma = noise_multiplier_for(epsilon, DELTA, q, steps)
    log_every = max(1, steps // 20)
    with torch_threads(1):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            init = CharLM()
        heldout_init = _heldout(init, heldout)
        # torch imports its compiler stack when the first optimizer is made: not a cost of either run
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
        t0 = time.perf_counter()
        plain, curve_plain = _train(False, data, heldout, steps, sigma, seed, progress, log_every)
        t1 = time.perf_counter()
        private, curve_dp = _train(True, data, heldout, steps, sigma, seed, progress, log_every)
        t2 = time.perf_counter()
        exp_plain, exp_dp = _exposures(plain, secrets), _exposures(private, secrets)
    metrics = {"steps": steps, "n_lines": n, "sample_rate": q, "noise_multiplier": sigma, "target_epsilon": epsilon,
               "epsilon": rdp_epsilon(q, sigma, steps, DELTA), "delta": DELTA, "canary_reps": list(CANARY_REPS),
               "exposure_nondp": float(np.mean(exp_plain)), "exposure_dp": float(np.mean(exp_dp)),
               "exposures_nondp": exp_plain, "exposures_dp": exp_dp, "heldout_nondp": curve_plain[-1][1],
               "heldout_dp": curve_dp[-1][1], "heldout_init": heldout_init, "time_nondp": t1 - t0,
               "time_dp": t2 - t1}
    history = {"step": [s for s, _ in curve_plain], "loss_nondp": [v for _, v in curve_plain],
               "loss_dp": [v for _, v in curve_dp]}
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t_start)


# --------------------------------------------------------------------------------------------------
# figure and table
# --------------------------------------------------------------------------------------------------
def plot_exposure(res: Any, path: str) -> None:
    """Held-out loss during training, and each canary's exposure without and with DP."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    m, h = res.metrics, res.history
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.plot(h["step"], h["loss_nondp"], "-o", ms=3, label="non-private")
    left.plot(h["step"], h["loss_dp"], "-s", ms=3, label=f"DP-SGD, epsilon {m['epsilon']:.2f}")
    left.axhline(m["heldout_init"], color="grey", lw=0.8, ls="--", label="initial model")
    left.set_xlabel("step")
    left.set_ylabel("held-out loss (nats / character)")
    left.legend(fontsize=8)
    x = np.arange(len(m["canary_reps"]))
    right.bar(x - 0.2, m["exposures_nondp"], 0.4, label="non-private")
    right.bar(x + 0.2, m["exposures_dp"], 0.4, label="DP-SGD")
    right.axhline(math.log2(10_000), color="grey", lw=0.8, ls="--")
    right.set_xticks(x, [f"{r} cop{'y' if r == 1 else 'ies'}" for r in m["canary_reps"]])
    right.set_ylabel("exposure (bits; max log2 10^4 = 13.3)")
    right.set_title(f"canaries key = '####', delta {m['delta']:g}, sigma {m['noise_multiplier']:.2f}", fontsize=9)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Train both models and print the table (quick: 100 steps each)."""
    res = demo(steps=QUICK_STEPS) if quick else demo()
    m = res.metrics
    out(f"character LM on {m['n_lines']} code-like lines with canaries key = '####' (copies {m['canary_reps']}), "
        f"{m['steps']} steps of batch {BATCH}, {res.wall_time:.1f} s")
    out(f"  DP-SGD: Poisson rate q = {m['sample_rate']:.4f}, clip {CLIP:g}, noise multiplier "
        f"{m['noise_multiplier']:.3f} -> epsilon {m['epsilon']:.3f} at delta {m['delta']:g} (RDP accountant)")
    out("  run           held-out loss (nats/char)   exposure per canary (bits)   mean exposure   time")
    for key, label in (("nondp", "non-private"), ("dp", "DP-SGD")):
        per = ", ".join(f"{e:5.2f}" for e in m[f"exposures_{key}"])
        out(f"  {label:<12}  {m[f'heldout_{key}']:25.3f}   {per:>28}   {m[f'exposure_{key}']:13.2f}   "
            f"{m[f'time_{key}']:.1f} s")
    out(f"  (initial model: held-out loss {m['heldout_init']:.3f}; exposure of an unlearned secret is about 1 bit, "
        f"its maximum log2(10^4) = {math.log2(10_000):.1f})")
    if plot:
        plot_exposure(res, plot)
        out(f"figure saved to {plot}")
    return [{"area": "torch", "method": "PrivCode++ DP-SGD (char LM, canaries)", "n": m["steps"],
             "result": f"exposure {m['exposure_nondp']:.1f} -> {m['exposure_dp']:.1f} bits at epsilon "
                       f"{m['epsilon']:.1f}; held-out loss {m['heldout_nondp']:.2f} -> {m['heldout_dp']:.2f}",
             "vs anchor": "PrivCode++ reports no canary leakage at epsilon 4 (secondary source)",
             "speed": f"DP-SGD {m['time_dp']:.1f} s vs {m['time_nondp']:.1f} s non-private"}]
