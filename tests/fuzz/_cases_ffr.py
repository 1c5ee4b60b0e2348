"""Fuzz cases of numtk.torch.ffr (collected by cases_torch.py; see _harness.py for the catalogue).

The catalogue's tensors are (6, 3): the valid calls use (6, 3) rewards for :func:`rir_rewards` (any shape) and
(6, 3) per-token log-probabilities (six sequences of three tokens) for the loss; the advantages are (6,) and the
masks bool. Parameters declared ``any`` (masks that may be bool or 0/1 tensors, sequences of strings, models,
optimizers) are fuzzed with the ``option`` catalogue here (3 and None must be refused with their name); the string
``'no-such-option'`` is skipped where a string is a valid value. The model functions run a tiny random llama of
``transformers`` (vocabulary 16). ``Teacher`` (a protocol) is fuzzed through the rule-based stub's call.
"""

from _harness import Case

_STR = ("'no-such-option'",)


def _m():
    import numtk.torch.ffr as ffr

    return ffr


def _t(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _mask(*shape, seed=0):
    import torch

    m = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < 0.5
    m.view(-1)[0] = True
    m.view(-1)[1] = False
    return m


def _tiny():
    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(cfg).eval()


def _ids():
    import torch

    ids = torch.tensor([[0, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13]])
    attn = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    comp = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    return ids, attn, comp


def _rir():
    return _m().rir_rewards, (_t(6, 3), _t(6, 3, seed=1), _mask(6, 3), 0.3), {"has_patch": _mask(6, 3, seed=2)}


def _adv():
    return _m().group_normalized_advantages, (_t(6), 3, 1e-4, 1), {}


def _k3():
    return _m().k3_kl, (_t(6, 3), _t(6, 3, seed=1)), {"clamp": 10.0}


def _loss():
    return _m().grpo_token_loss, (_t(6, 3), _t(6, 3, seed=1), _t(6, seed=2), _mask(6, 3), 0.04), {
        "kl_clamp": 10.0, "reduction": "mean"}


def _chosen():
    return _m().chosen_rollout, (_t(6, 3), _t(6, 3, seed=1), _mask(6)), {"score": "repaired",
                                                                         "has_patch": _mask(6, seed=1)}


def _extract():
    return _m().extract_answer, ("<think>a</think><answer>4</answer>",), {}


def _format():
    return _m().format_reward, (["<think>a</think><answer>4</answer>", "4"],), {"dtype": None}


def _accuracy():
    return _m().accuracy_reward, (["<answer>4</answer>", "<answer>5</answer>"], ["4", "4"]), {"numeric": True,
                                                                                            "dtype": None}


def _teacher():
    return _m().ArithmeticTeacher(), ("What is 12 + 30?", "<think>..</think><answer>41</answer>"), {}


def _leaks():
    return _m().ArithmeticTeacher.leaks, ("the sum is 42.", 42), {}


def _patched():
    return _m().patched_prompt, ("What is 2 + 2?", "Count."), {}


def _logprobs():
    ids, attn, comp = _ids()
    return _m().completion_logprobs, (_tiny(), ids, attn, comp), {}


def _sample():
    ids, attn, _ = _ids()
    return _m().sample_group, (_tiny(), ids, attn, 2), {"max_new_tokens": 2, "temperature": 1.0, "top_p": 0.9,
                                                        "eos_token_id": 1, "pad_token_id": 0, "rng": 0}


def _step():
    import torch

    ids, attn, comp = _ids()
    policy, ref = _tiny(), _tiny()
    opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
    return _m().grpo_step, (policy, ref, opt, ids, attn, comp, torch.tensor([1.0, -1.0])), {
        "beta": 0.04, "kl_clamp": 10.0, "max_grad_norm": 1.0}


def _demo():
    return _m().demo, (), dict(steps=2, seeds=1, rng=0, progress=False, variants=("ffr",))


FFR: list = [
    Case("numtk.torch.ffr.rir_rewards", _rir, {"correct": "option", "has_patch": "option"},
         positional={"rewards": 0, "repaired_rewards": 1, "correct": 2, "kappa": 3}, skip={"has_patch": ("None",)}),
    Case("numtk.torch.ffr.group_normalized_advantages", _adv, {},
         positional={"rewards": 0, "group_size": 1, "eps": 2, "ddof": 3}),
    Case("numtk.torch.ffr.k3_kl", _k3, {}, positional={"logp": 0, "ref_logp": 1}),
    Case("numtk.torch.ffr.grpo_token_loss", _loss, {"mask": "option"},
         positional={"logp": 0, "ref_logp": 1, "advantages": 2, "mask": 3, "beta": 4}),
    Case("numtk.torch.ffr.chosen_rollout", _chosen, {"original": "option", "repaired": "option", "correct": "option",
                                                      "has_patch": "option"},
         positional={"original": 0, "repaired": 1, "correct": 2}, skip={"has_patch": ("None",)}),
    Case("numtk.torch.ffr.extract_answer", _extract, {"text": "option"}, positional={"text": 0},
         skip={"text": _STR}),
    Case("numtk.torch.ffr.format_reward", _format, {"completions": "option"}, positional={"completions": 0},
         skip={"completions": _STR, "dtype": ("None",)}),
    Case("numtk.torch.ffr.accuracy_reward", _accuracy, {"completions": "option", "answers": "option"},
         positional={"completions": 0, "answers": 1}, skip={"dtype": ("None",)}),
    Case("numtk.torch.ffr.Teacher", _teacher, {"prompt": "option", "completion": "option"},
         positional={"prompt": 0, "completion": 1}, skip={"prompt": _STR, "completion": _STR}),
    Case("numtk.torch.ffr.ArithmeticTeacher.leaks", _leaks, {"patch": "option"}, positional={"patch": 0, "answer": 1},
         skip={"patch": _STR}),
    Case("numtk.torch.ffr.patched_prompt", _patched, {"prompt": "option", "patch": "option"},
         positional={"prompt": 0, "patch": 1}, skip={"prompt": _STR, "patch": _STR}),
    Case("numtk.torch.ffr.completion_logprobs", _logprobs,
         {"model": "option", "input_ids": ("option", "tensor"), "attention_mask": "tensor",
          "completion_mask": "tensor"},
         positional={"model": 0, "input_ids": 1, "attention_mask": 2, "completion_mask": 3}),
    Case("numtk.torch.ffr.sample_group", _sample, {"model": "option", "input_ids": "tensor"},
         positional={"model": 0, "input_ids": 1, "attention_mask": 2, "group_size": 3}, timeout=60.0),
    Case("numtk.torch.ffr.grpo_step", _step, {"model": "option", "optimizer": "option", "input_ids": "tensor",
                                              "completion_mask": "tensor"},
         positional={"model": 0, "ref_model": 1, "optimizer": 2, "input_ids": 3, "attention_mask": 4,
                     "completion_mask": 5, "advantages": 6}, timeout=60.0),
    Case("numtk.torch.ffr.demo", _demo, {}, timeout=60.0),
]
