"""The FFR demonstration, run by ``python -m numtk demo ffr`` and the tour: the bandit toy.

Each of ``prompts`` questions has ``options`` possible answers, one of them correct. The student is a categorical
policy per question (a table of logits, trained with Adam); at the start it puts little probability on the
correct answer of most questions (the correct answer's logit sits ``U(0, hardness)`` below the others, which are
standard normal). One GRPO step samples ``G`` answers per question, rewards a correct answer with 1, normalises
the rewards per question and takes the GRPO token loss (one token per answer; the k3 KL to the initial policy with
the anchor's beta = 0.04).

The teacher sees a failed answer and returns an evidence patch that does not state the answer: it rules out all
but ``keep`` wrong options (never the correct one, always the failed one). The re-answer is a draw from the
student's own policy restricted to the options left, so it succeeds with the student's relative preference for
the correct answer among them. Variants:

- ``grpo``: vanilla GRPO (a question whose G answers all fail gives no signal);
- ``ffr``: FFR as numtk runs it: RIR rewards (kappa = 0.3), the repaired answer scored as it was sampled (its
  log-probability under the policy restricted by the patch: the patch is part of the context);
- ``ffr_original``: the authors' trainer: the RIR reward on the original failed answer (``score='original'``);
- ``ffr_unpatched`` (not run by default): the repaired answer scored without the patch (its log-probability
  under the unrestricted policy).

Accuracy is the student's expected accuracy without any patch, ``mean_q pi_q(correct_q)``, computed exactly from the
logits after every step; the target is 90 %.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import torch, torch_threads
from numtk.torch._ffr import chosen_rollout, group_normalized_advantages, grpo_token_loss, rir_rewards

__all__ = ["demo", "run", "BanditToy", "train_bandit", "plot_accuracy", "VARIANTS", "DEFAULT_VARIANTS"]

#: the variants: name -> (uses the teacher, score, context of the repaired answer)
VARIANTS = {"grpo": (False, None, None), "ffr": (True, "repaired", "patched"),
            "ffr_original": (True, "original", None), "ffr_unpatched": (True, "repaired", "unpatched")}
#: the variants demo() runs by default
DEFAULT_VARIANTS = ("grpo", "ffr", "ffr_original")
PROMPTS, OPTIONS, GROUP, KEEP, HARDNESS = 32, 12, 8, 2, 6.0
LR, BETA, KAPPA, TARGET = 0.05, 0.04, 0.3, 0.9
DEFAULT_STEPS, QUICK_STEPS, SEEDS = 500, 250, 5
_LABELS = {"grpo": "vanilla GRPO", "ffr": "FFR (repaired rollout scored, numtk's default)",
           "ffr_original": "FFR, anchor's trainer (original failed answer scored)",
           "ffr_unpatched": "FFR, repaired answer scored without the patch"}


class BanditToy:
    """The bandit's questions: correct answers and the initial logits, drawn from ``seed``.

    Attributes
    ----------
    answer : torch.Tensor
        (P,) the correct option of each question.
    logits : torch.Tensor
        (P, K) the initial policy's logits (float64).
    """

    def __init__(self, seed: int, prompts: int = PROMPTS, options: int = OPTIONS, hardness: float = HARDNESS):
        g = torch.Generator().manual_seed(seed)
        self.prompts, self.options = prompts, options
        self.answer = torch.randint(0, options, (prompts,), generator=g)
        logits = torch.randn(prompts, options, generator=g, dtype=torch.float64)
        gap = hardness * torch.rand(prompts, generator=g, dtype=torch.float64)
        rows = torch.arange(prompts)
        logits[rows, self.answer] = logits.max(dim=1).values - gap - 0.5
        self.logits = logits

    def accuracy(self, logits: Any) -> float:
        """Expected accuracy without a patch: mean over questions of pi(correct)."""
        p = torch.softmax(logits.detach(), dim=1)
        return float(p[torch.arange(self.prompts), self.answer].mean())

    def patch(self, failed: Any, keep: int, gen: Any) -> Any:
        """The teacher's patches for the rollouts (B,) of questions ``failed`` (their question indices): a (B, K)
        bool mask of the options left (the correct one and ``keep`` random wrong ones)."""
        B, K = failed.shape[0], self.options
        ans = self.answer[failed]
        scores = torch.rand(B, K, generator=gen, dtype=torch.float64)
        scores[torch.arange(B), ans] = -1.0                 # the correct option is never among the wrong ones
        wrong_rank = scores.argsort(dim=1, descending=True)[:, :keep]
        left = torch.zeros(B, K, dtype=torch.bool)
        left[torch.arange(B)[:, None], wrong_rank] = True
        left[torch.arange(B), ans] = True
        return left


def train_bandit(variant: str, steps: int, seed: int, *, group: int = GROUP, keep: int = KEEP,
                 kappa: float = KAPPA, beta: float = BETA, lr: float = LR, prompts: int = PROMPTS,
                 options: int = OPTIONS, hardness: float = HARDNESS) -> dict:
    """Train one student with one variant (a key of :data:`VARIANTS`) for ``steps`` GRPO steps from ``seed``;
    returns ``{"accuracy": [...], "calls": [...]}``: the expected accuracy before the first and after every step,
    and the teacher calls (failed rollouts) of every step."""
    use_teacher, score, context = VARIANTS[variant]
    toy = BanditToy(seed, prompts, options, hardness)
    theta = toy.logits.clone().requires_grad_(True)
    ref = toy.logits.clone()
    opt = torch.optim.Adam([theta], lr=lr)
    gen = torch.Generator().manual_seed(seed * 7919 + 1)
    q = torch.arange(prompts).repeat_interleave(group)        # each question's G rollouts consecutive
    rows = torch.arange(q.shape[0])
    acc, calls = [toy.accuracy(theta)], []
    for _ in range(steps):
        with torch.no_grad():
            probs = torch.softmax(theta[q], dim=1)
            a = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        correct = a == toy.answer[q]
        rewards = correct.double()
        logp_all = torch.log_softmax(theta[q], dim=1)
        ref_all = torch.log_softmax(ref[q], dim=1)
        logp, ref_logp = logp_all[rows, a], ref_all[rows, a]
        if use_teacher:
            left = toy.patch(q, keep, gen)                     # a patch for every rollout; used where it failed
            masked = theta[q].masked_fill(~left, -math.inf)
            ref_masked = ref[q].masked_fill(~left, -math.inf)
            with torch.no_grad():
                a_star = torch.multinomial(torch.softmax(masked, dim=1), 1, generator=gen).squeeze(1)
            repaired = (a_star == toy.answer[q]).double()
            rewards = rir_rewards(rewards, repaired, correct, kappa)
            # the repaired answer's log-probability in its context (the policy restricted by the patch)
            if context == "patched":
                rep_logp = torch.log_softmax(masked, dim=1)[rows, a_star]
                rep_ref = torch.log_softmax(ref_masked, dim=1)[rows, a_star]
            else:
                rep_logp, rep_ref = logp_all[rows, a_star], ref_all[rows, a_star]
            logp = chosen_rollout(logp, rep_logp, correct, score=score)
            ref_logp = chosen_rollout(ref_logp, rep_ref, correct, score=score)
            calls.append(int((~correct).sum()))
        adv = group_normalized_advantages(rewards, group)
        loss = grpo_token_loss(logp[:, None], ref_logp[:, None].detach(), adv,
                               torch.ones(q.shape[0], 1, dtype=torch.bool), beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc.append(toy.accuracy(theta))
    return {"accuracy": acc, "calls": calls}


def _steps_to(curve: list[float], level: float) -> int | None:
    for step, v in enumerate(curve):
        if v >= level:
            return step
    return None


@constraints(steps="count", rng="rng", progress="bool", seeds="count", variants="option")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, seeds: int = SEEDS,
         variants: tuple[str, ...] = DEFAULT_VARIANTS) -> Any:
    """FFR against vanilla GRPO on the bandit toy: steps to 90 % expected accuracy, per seed.

    Parameters
    ----------
    steps : int, optional
        GRPO steps per run (default 500; the tour runs 250).
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Draws the seeds of the runs (a seed fixes the questions, the initial policy and the draws; every variant
        of one seed starts from the same questions and policy).
    progress : bool, default False
        Show a progress bar over the runs.
    seeds : int, default 5
        Runs per variant.
    variants : tuple of str
        Among 'grpo', 'ffr', 'ffr_original', 'ffr_unpatched' ('grpo' is always run: it is the reference; the
        default runs the first three).

    Returns
    -------
    Result
        metrics : dict
            ``methods`` (the variants run), ``steps``, ``seeds``, ``target`` (0.9), ``seed_values`` and per variant a
            dict: ``steps_to_target`` (per seed; None where not reached), ``reached`` (how many seeds),
            ``mean_steps`` (mean over the seeds that reached it; None if none), ``final_accuracy`` (mean over seeds),
            ``teacher_calls`` (per step, mean over seeds and steps; 0 for GRPO), ``calls_first``/``calls_last``
            (teacher calls per step over the first and last tenth of the steps) and, for the FFR variants,
            ``speedup`` (GRPO's mean steps over this variant's, over the seeds where both reached the target;
            None where there is none).
        history : dict of lists
            ``step`` (0 .. steps), per variant ``<variant>/accuracy`` (mean over seeds) and
            ``<variant>/accuracy/<k>`` (seed k).
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.ffr import demo
    >>> res = demo(steps=20, seeds=1, variants=("ffr",))
    >>> res.metrics["methods"]
    ['grpo', 'ffr']
    >>> len(res.history["ffr/accuracy"])                  # before the first step and after each
    21
    >>> 0.0 < res.metrics["ffr"]["final_accuracy"] < 1.0
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
    variants = ["grpo"] + [v for v in VARIANTS if v in variants and v != "grpo"]
    if isinstance(rng, torch.Generator):
        base = int(torch.randint(0, 2**31 - 1, (1,), generator=rng))
    else:
        base = int(normalize_rng(rng, name="rng").integers(0, 2**31 - 1))
    seed_values = [(base + 104729 * s) % (2**31 - 1) for s in range(seeds)]
    t0 = time.perf_counter()
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    jobs = [(s, v) for s in seed_values for v in variants]
    with torch_threads(1):  # (32 x 8) rollouts per step: thread hand-offs cost more than they save
        for s, v in progress_bar(jobs, progress=progress, desc="ffr demo"):
            runs[v].append(train_bandit(v, steps, s))
    history: dict[str, list] = {"step": list(range(steps + 1))}
    metrics: dict[str, Any] = {"methods": variants, "steps": steps, "seeds": seeds, "target": TARGET,
                               "seed_values": seed_values}
    tenth = max(1, steps // 10)
    for v, rs in runs.items():
        history[f"{v}/accuracy"] = [float(x) for x in np.mean([r["accuracy"] for r in rs], axis=0)]
        for k, r in enumerate(rs):
            history[f"{v}/accuracy/{k}"] = r["accuracy"]
        to = [_steps_to(r["accuracy"], TARGET) for r in rs]
        reached = [t for t in to if t is not None]
        calls = [r["calls"] for r in rs]
        metrics[v] = {"steps_to_target": to, "reached": len(reached),
                      "mean_steps": float(np.mean(reached)) if reached else None,
                      "final_accuracy": float(np.mean([r["accuracy"][-1] for r in rs])),
                      "teacher_calls": float(np.mean(calls)) if calls[0] else 0.0,
                      "calls_first": float(np.mean([c[:tenth] for c in calls])) if calls[0] else 0.0,
                      "calls_last": float(np.mean([c[-tenth:] for c in calls])) if calls[0] else 0.0}
    g = metrics["grpo"]["steps_to_target"]
    for v in variants[1:]:
        pairs = [(a, b) for a, b in zip(g, metrics[v]["steps_to_target"]) if a is not None and b is not None]
        metrics[v]["speedup"] = (float(np.mean([a for a, _ in pairs]) / np.mean([b for _, b in pairs]))
                                 if pairs else None)
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------------
# figure and table
# --------------------------------------------------------------------------------------------------
def plot_accuracy(res: Any, path: str) -> None:
    """Accuracy against step for every variant of a :func:`demo` Result: each seed thin, the mean thick."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    h, m = res.history, res.metrics
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, v in enumerate(m["methods"]):
        color = f"C{list(VARIANTS).index(v)}"
        for k in range(m["seeds"]):
            ax.plot(h["step"], h[f"{v}/accuracy/{k}"], color=color, lw=0.6, alpha=0.45)
        mean = m[v]["mean_steps"]
        label = (f"{_LABELS[v]}: 90 % at {mean:.0f} steps (mean of {m[v]['reached']}/{m['seeds']} seeds)"
                 if mean is not None else f"{_LABELS[v]}: 90 % not reached")
        ax.plot(h["step"], h[f"{v}/accuracy"], color=color, lw=2.0, label=label)
    ax.axhline(m["target"], color="grey", ls="--", lw=0.8)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("expected accuracy (no patch)")
    ax.set_ylim(0, 1)
    ax.set_title(f"bandit toy: {PROMPTS} questions x {OPTIONS} options, G = {GROUP}, kappa = {KAPPA}; "
                 f"{m['seeds']} seeds (thin) and their mean", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _fmt_steps(to: list) -> str:
    return ", ".join("-" if t is None else str(t) for t in to)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """FFR against vanilla GRPO on the bandit toy, five seeds; print the steps to 90 % per seed.

    Quick: 250 steps, vanilla GRPO and FFR (the tour); otherwise the default :func:`demo` (500 steps, with the
    anchor's variant too).
    """
    res = demo(steps=QUICK_STEPS, variants=("grpo", "ffr")) if quick else demo()
    m = res.metrics
    out(f"bandit toy: {PROMPTS} questions x {OPTIONS} options, G = {GROUP} answers per question, teacher patch "
        f"leaves the correct and {KEEP} wrong options, kappa = {KAPPA}, beta = {BETA}, Adam lr {LR}; {m['steps']} "
        f"steps, {m['seeds']} seeds, {res.wall_time:.1f} s")
    out(f"  {'variant':<54} {'steps to 90 % per seed':<26} {'mean':>12} {'final acc':>9} {'teacher calls/step':>20}")
    for v in m["methods"]:
        r = m[v]
        mean = "-" if r["mean_steps"] is None else f"{r['mean_steps']:.1f}"
        if r["reached"] < m["seeds"] and r["mean_steps"] is not None:
            mean += f" ({r['reached']}/{m['seeds']})"
        calls = f"{r['calls_first']:.0f} -> {r['calls_last']:.0f}" if VARIANTS[v][0] else "-"
        out(f"  {_LABELS[v]:<54} {_fmt_steps(r['steps_to_target']):<26} {mean:>12} {r['final_accuracy']:>9.3f} "
            f"{calls:>20}")
    out("  (accuracy: mean over questions of pi(correct) without a patch, exact; '-': not reached within the steps; "
        "teacher calls: failed rollouts per step, over the first and last tenth of the steps)")
    if plot:
        plot_accuracy(res, plot)
        out(f"figure saved to {plot}")
    g, f = m["grpo"], m["ffr"]
    both = sum(a is not None and b is not None for a, b in zip(g["steps_to_target"], f["steps_to_target"]))
    speed = (f"{f['speedup']:.2f}x fewer steps than GRPO (the {both} seed{'s' if both > 1 else ''} where both reach "
             f"90 %)" if f["speedup"] is not None else "no seed where both reach 90 %")
    return [{"area": "torch", "method": f"FFR vs GRPO, bandit toy ({m['seeds']} seeds)", "n": m["steps"],
             "result": (f"90 % at {f['mean_steps']:.0f} steps ({f['reached']}/{m['seeds']}), final "
                        f"{f['final_accuracy']:.3f}" if f["mean_steps"] is not None else
                        f"90 % not reached, final {f['final_accuracy']:.3f}"),
             "vs anchor": (f"GRPO {g['mean_steps']:.0f} steps ({g['reached']}/{m['seeds']}), final "
                           f"{g['final_accuracy']:.3f}" if g["mean_steps"] is not None else
                           f"GRPO: 90 % not reached in {m['steps']} steps, final {g['final_accuracy']:.3f}"),
             "speed": speed}]
