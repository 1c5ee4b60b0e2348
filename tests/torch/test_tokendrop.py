"""numtk.torch.tokendrop: TokenDrop's scores, nested selection, token-split block and model wrapper, the DropBP
baseline, the saved-activation measurement, and the tiny llama.

Oracles: brute-force selection by Python sorting; the dense block itself (forward values, bit for bit); a
"masked-detach" dense recomputation written here from torch primitives (every token with autograd, the
unselected tokens' branch outputs and keys/values detached), whose gradient is TokenDrop's by definition;
plain backpropagation at rho = 1; transformers' LlamaForCausalLM (logits of copied weights, and the wrapper on
it); scores from forward hooks recomputed in NumPy float64; saved bytes summed by hand.
"""

import copy
import math
import types

import numpy as np
import pytest
import torch

from numtk.torch._common import torch_threads
from numtk.torch.tokendrop import (LayerDropBlock, TinyLlamaConfig, TinyLlamaForCausalLM, TokenDropBlock,
                                   apply_lora, copy_task, cumulative_topk, demo, keep_count, lm_loss,
                                   residual_update_scores, saved_activation_bytes, unwrap_model, wrap_model)

try:  # a pinned test dependency, but the bridge must not need it: only the tests that use it are skipped without it
    import transformers
except ImportError:  # pragma: no cover
    transformers = None
needs_transformers = pytest.mark.skipif(transformers is None, reason="transformers is not installed")

F64 = torch.float64
CFG = dict(vocab_size=40, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
           num_key_value_heads=2)
ALL_PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # tiny models: on busy shared cores a second intra-op thread costs far more in synchronisation than it gains
    with torch_threads(1):
        yield


def tiny(dtype=F64, lora=True, layers=4, seed=0, **kw):
    """A tiny llama with LoRA on every projection and non-zero B matrices (so every LoRA gradient is non-zero)."""
    model = TinyLlamaForCausalLM(TinyLlamaConfig(**{**CFG, "num_hidden_layers": layers, **kw}), rng=seed)
    if lora:
        apply_lora(model, r=4, targets=ALL_PROJ, rng=seed + 1)
        randomize_lora(model, seed)
    return model.to(dtype)


def randomize_lora(model, seed):
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("lora_B"):
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.05)


def hf_model(impl="sdpa", dtype=F64, seed=0):
    cfg = transformers.LlamaConfig(**CFG, max_position_embeddings=256, attn_implementation=impl,
                                   rms_norm_eps=1e-6, attention_bias=False, mlp_bias=False)
    model = transformers.LlamaForCausalLM(cfg)
    model.load_state_dict(TinyLlamaForCausalLM(TinyLlamaConfig(**CFG), rng=seed).state_dict())
    apply_lora(model, r=4, targets=ALL_PROJ, rng=seed + 1)
    randomize_lora(model, seed)
    return model.to(dtype).train()


def lora_grads(model):
    return [p.grad.clone() for p in model.parameters() if p.requires_grad]


def step(model, ids, labels):
    model.zero_grad()
    out = model(ids)
    logits = out if isinstance(out, torch.Tensor) else out.logits
    lm_loss(logits, labels).backward()
    return logits.detach(), lora_grads(model)


def random_mask(B, T, k, gen):
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b in range(B):
        mask[b, torch.randperm(T, generator=gen)[:k]] = True
    return mask


def block_inputs(model, B=2, T=64, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, model.config.hidden_size, generator=g, dtype=dtype).requires_grad_()
    return x, model.model.rotary_emb(x, torch.arange(T)[None])


# --------------------------------------------------------------------------------------------------
# scores and selection
# --------------------------------------------------------------------------------------------------
def test_residual_update_scores_are_norms_of_the_update(rng):
    x_in = torch.from_numpy(rng.normal(size=(3, 5, 7)))
    x_out = torch.from_numpy(rng.normal(size=(3, 5, 7)))
    expected = np.linalg.norm(x_out.numpy() - x_in.numpy(), axis=-1)
    np.testing.assert_allclose(residual_update_scores(x_in, x_out).numpy(), expected, rtol=1e-14)
    s = residual_update_scores(x_in.requires_grad_(), x_out)
    assert not s.requires_grad and s.dtype == F64


def test_keep_count():
    assert [keep_count(r, 10) for r in (0.1, 0.3, 0.25, 0.01, 1.0)] == [1, 3, 3, 1, 10]
    assert keep_count(0.5, 0) == 0 and keep_count(0.5, 7) == 4
    for T in range(1, 40):
        for rho in (0.125, 0.2, 0.5, 0.7, 1.0):
            assert keep_count(rho, T) == min(T, max(1, math.ceil(round(rho * T, 9))))


def brute_topk(scores, k, prev=None):
    """Per row: prev's tokens, then the others by decreasing score, ties to the earlier position."""
    out = np.zeros(scores.shape, dtype=bool)
    for b, row in enumerate(scores):
        keyed = sorted(range(len(row)), key=lambda t: (not (prev is not None and prev[b, t]), -row[t], t))
        out[b, keyed[:k]] = True
    return out


@pytest.mark.parametrize("rho", [0.1, 0.25, 0.5, 0.8, 1.0])
def test_cumulative_topk_matches_brute_force_with_ties(rng, rho):
    scores = rng.integers(0, 4, size=(6, 13)).astype(np.float64)  # many ties
    k = keep_count(rho, 13)
    got = cumulative_topk(torch.from_numpy(scores), rho)
    assert np.array_equal(got.numpy(), brute_topk(scores, k))
    assert got.sum(1).tolist() == [k] * 6
    prev = brute_topk(rng.normal(size=(6, 13)), max(1, k // 2))
    got = cumulative_topk(torch.from_numpy(scores), rho, prev_mask=torch.from_numpy(prev))
    assert np.array_equal(got.numpy(), brute_topk(scores, k, prev))
    assert np.all(got.numpy()[prev])  # nesting: the shallower set is contained
    one = cumulative_topk(torch.from_numpy(scores[0]), rho)  # a single sequence
    assert one.shape == (13,) and np.array_equal(one.numpy(), brute_topk(scores[:1], k)[0])


def test_cumulative_topk_enforces_nesting():
    scores = torch.arange(8.0).reshape(1, 8)
    prev = torch.tensor([[True, True, True, False, False, False, False, False]])
    assert cumulative_topk(scores, 3 / 8, prev_mask=prev).tolist() == prev.tolist()
    with pytest.raises(ValueError, match="prev_mask.*must contain"):
        cumulative_topk(scores, 0.25, prev_mask=prev)  # 2 places for 3 shallower tokens


def test_selection_validation():
    s = torch.rand(2, 5)
    with pytest.raises(ValueError, match="`rho`"):
        cumulative_topk(s, 0.0)
    with pytest.raises(ValueError, match="`rho`"):
        cumulative_topk(s, 1.5)
    with pytest.raises(TypeError, match="`rho`"):
        cumulative_topk(s, "half")
    with pytest.raises(ValueError, match="`scores`"):
        cumulative_topk(torch.rand(2, 3, 4), 0.5)
    with pytest.raises(ValueError, match="`scores`"):
        cumulative_topk(torch.tensor([[1.0, float("nan")]]), 0.5)
    with pytest.raises(ValueError, match="`prev_mask`"):
        cumulative_topk(s, 0.5, prev_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="`prev_mask`"):
        cumulative_topk(s, 0.5, prev_mask=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="`x_in` and `x_out`"):
        residual_update_scores(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5))
    with pytest.raises(TypeError, match="`x_out`"):
        residual_update_scores(torch.zeros(2, 3), np.zeros((2, 3)))


# --------------------------------------------------------------------------------------------------
# the block: forward values
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_block_is_bit_identical_for_any_selection_by_default(dtype):
    model = tiny(dtype, layers=1)
    layer = model.model.layers[0]
    x, cos_sin = block_inputs(model, dtype=dtype)
    dense = layer(x, position_embeddings=cos_sin)
    block = TokenDropBlock(layer)
    assert block.exact
    g = torch.Generator().manual_seed(1)
    for k in (0, 1, 5, 32, 63, 64):
        y = block(x, position_embeddings=cos_sin, token_mask=random_mask(2, 64, k, g))
        assert torch.equal(y, dense), k
        assert y.requires_grad


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fast_split_block_equals_the_dense_block_to_rounding(dtype):
    """exact=False recomputes the block in two row groups: equal to the dense block up to rounding."""
    model = tiny(dtype, layers=1)
    layer = model.model.layers[0]
    x, cos_sin = block_inputs(model, dtype=dtype)
    dense = layer(x, position_embeddings=cos_sin)
    block = TokenDropBlock(layer, exact=False)
    g = torch.Generator().manual_seed(2)
    tol = 1e-12 if dtype == F64 else 1e-5
    for k in (1, 5, 16, 32, 48, 63):
        y = block(x, position_embeddings=cos_sin, token_mask=random_mask(2, 64, k, g))
        torch.testing.assert_close(y, dense, rtol=tol, atol=tol)


def test_wrapped_model_logits_are_the_dense_models():
    ids, labels = copy_task(2, 65, 40, rng=0)
    dense = tiny()(ids)
    for rho in (0.25, 0.5, 1.0):
        for lazy in (0, 1):
            assert torch.equal(wrap_model(tiny(), rho=rho, lazy_layers=lazy)(ids), dense)
            torch.testing.assert_close(wrap_model(tiny(), rho=rho, lazy_layers=lazy, exact=False)(ids), dense,
                                       rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# the block: gradients
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("forced", [False, True])
def test_rho_one_gives_the_gradients_of_full_backprop(forced, request):
    """forced: the selecting blocks run the split with every token selected (not the dense block itself)."""
    calls = request.getfixturevalue("force_split") if forced else []
    ids, labels = copy_task(2, 33, 40, rng=1)
    logits0, g0 = step(tiny(), ids, labels)
    for exact in (False, True):
        for lazy in (0, 2):
            before = len(calls)
            logits1, g1 = step(wrap_model(tiny(), rho=1.0, lazy_layers=lazy, exact=exact), ids, labels)
            assert len(calls) - before == (4 - lazy if forced else 0)
            if exact or not forced:
                assert torch.equal(logits1, logits0)
            else:
                torch.testing.assert_close(logits1, logits0, rtol=1e-12, atol=1e-12)
            assert len(g1) == len(g0) == 4 * 7 * 2
            for a, b in zip(g0, g1):
                torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-13)


def _rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def masked_detach_block(layer, x, cos, sin, mask, additive=None, own_norms=True):
    """The dense block with every token under autograd, the unselected tokens' branch outputs and keys/values
    detached: by definition the gradient TokenDrop computes (written independently of numtk's attention, with an
    explicit softmax). ``additive``: a (B, 1, T, T) additive attention mask (None: causal). ``own_norms``: RMSNorm
    and the SwiGLU MLP written here too (False: the layer's own modules, for transformers' layers, whose RMSNorm
    runs in float32)."""
    attn = layer.self_attn
    B, T, D = x.shape
    hd = attn.head_dim
    H, Hkv = attn.q_proj.out_features // hd, attn.k_proj.out_features // hd
    sel = mask[:, :, None]

    def keep(t, m):  # selected: t; unselected: t detached
        return torch.where(m, t, t.detach())

    def rot(t):
        c, s = cos[:, None], sin[:, None]
        half = t.shape[-1] // 2
        return t * c + torch.cat([-t[..., half:], t[..., :half]], -1) * s

    def norm(module, t):
        return _rms(t, module.weight, module.variance_epsilon) if own_norms else module(t)

    h = norm(layer.input_layernorm, x)
    q = rot(attn.q_proj(h).view(B, T, H, hd).transpose(1, 2))
    k = rot(attn.k_proj(h).view(B, T, Hkv, hd).transpose(1, 2))
    v = attn.v_proj(h).view(B, T, Hkv, hd).transpose(1, 2)
    m4 = mask[:, None, :, None]
    k, v = keep(k, m4), keep(v, m4)
    k = k.repeat_interleave(H // Hkv, dim=1)
    v = v.repeat_interleave(H // Hkv, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    if additive is None:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    else:
        s = s + additive
    a = attn.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * hd))
    y = x + keep(a, sel)
    mlp = layer.mlp
    if own_norms:
        hm = norm(layer.post_attention_layernorm, y)
        m = mlp.down_proj(torch.nn.functional.silu(mlp.gate_proj(hm)) * mlp.up_proj(hm))
    else:
        m = mlp(layer.post_attention_layernorm(y))
    return y + keep(m, sel)


@pytest.fixture
def force_split(monkeypatch):
    """Blocks that keep every token run the split too (not the dense block itself); counts the splits run."""
    import numtk.torch._tokendrop as room

    calls = []
    split = room.TokenDropBlock._split

    def counted(self, *args, **kwargs):
        calls.append(self)
        return split(self, *args, **kwargs)

    monkeypatch.setattr(room, "_DENSE_WHEN_ALL_KEPT", False)
    monkeypatch.setattr(room.TokenDropBlock, "_split", counted)
    return calls


@pytest.mark.parametrize("exact", [False, True])
def test_split_with_every_token_selected_gives_the_dense_gradient(exact, force_split):
    model = tiny(layers=1)
    layer = model.model.layers[0]
    x, cos_sin = block_inputs(model, T=24)
    w = torch.randn(2, 24, 64, generator=torch.Generator().manual_seed(6), dtype=F64)

    def grads(fn):
        model.zero_grad()
        x.grad = None
        y = fn()
        (y * w).sum().backward()
        return y.detach(), [x.grad.clone()] + lora_grads(model)

    y0, want = grads(lambda: layer(x, position_embeddings=cos_sin))
    block = TokenDropBlock(layer, exact=exact)
    y1, got = grads(lambda: block(x, position_embeddings=cos_sin, token_mask=torch.ones(2, 24, dtype=torch.bool)))
    assert len(force_split) == 1  # the split ran
    if exact:
        assert torch.equal(y1, y0)
    else:
        torch.testing.assert_close(y1, y0, rtol=1e-12, atol=1e-12)
    assert len(got) == 1 + 7 * 2
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("exact", [False, True])
def test_split_gradient_is_the_masked_detach_gradient(exact):
    model = tiny(layers=1)
    layer = model.model.layers[0]
    x, (cos, sin) = block_inputs(model, T=24)
    mask = random_mask(2, 24, 9, torch.Generator().manual_seed(4))
    w = torch.randn(2, 24, 64, generator=torch.Generator().manual_seed(5), dtype=F64)

    def grads(fn):
        model.zero_grad()
        x.grad = None
        (fn() * w).sum().backward()
        return [x.grad.clone()] + lora_grads(model)

    block = TokenDropBlock(layer, exact=exact)
    got = grads(lambda: block(x, position_embeddings=(cos, sin), token_mask=mask))
    want = grads(lambda: masked_detach_block(layer, x, cos, sin, mask))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("exact", [False, True])
def test_a_dropped_position_sends_no_gradient_through_its_branch(exact):
    model = tiny(layers=1)
    layer = model.model.layers[0]
    x, cos_sin = block_inputs(model, T=20)
    mask = torch.ones(2, 20, dtype=torch.bool)
    mask[:, 7] = False  # position 7 dropped in both sequences
    out = TokenDropBlock(layer, exact=exact)(x, position_embeddings=cos_sin, token_mask=mask)
    out[1, 7].sum().backward()  # a loss on the dropped position only
    assert all(float(g.abs().max()) == 0.0 for g in lora_grads(model))  # nothing reaches the adapters
    expected = torch.zeros_like(x)
    expected[1, 7] = 1.0  # the residual connection only
    assert torch.equal(x.grad, expected)


def test_unselected_keys_and_values_get_no_gradient():
    """A loss on the selected tokens reaches an unselected token only through nothing: its keys and values were
    computed without autograd (no leak through mixed grad/no-grad attention)."""
    model = tiny(layers=1)
    layer = model.model.layers[0]
    x, cos_sin = block_inputs(model, T=16)
    mask = torch.zeros(2, 16, dtype=torch.bool)
    mask[:, 8:] = True  # the later tokens attend over the earlier, unselected ones
    out = TokenDropBlock(layer)(x, position_embeddings=cos_sin, token_mask=mask)
    out[:, 8:].sum().backward()
    assert float(x.grad[:, :8].abs().max()) == 0.0
    assert float(x.grad[:, 8:].abs().min()) > 0.0


# --------------------------------------------------------------------------------------------------
# saved activations
# --------------------------------------------------------------------------------------------------
def test_saved_activation_bytes_counts_storages_once_and_skips_parameters():
    w = torch.nn.Parameter(torch.randn(8, 8, dtype=F64))
    x = torch.randn(4, 8, dtype=F64, requires_grad=True)

    def fn():
        h = x @ w  # saves x (and w: a parameter)
        t = torch.tanh(h)  # saves its output
        return (t * t).sum()  # saves t twice: one storage

    assert saved_activation_bytes(fn) == 2 * 4 * 8 * 8
    with torch.no_grad():
        assert saved_activation_bytes(fn) == 0
    assert saved_activation_bytes(lambda a, b=1: (x * a * b).sum(), 2.0, b=3) == 0  # scalars: nothing saved
    with pytest.raises(TypeError, match="`fn`"):
        saved_activation_bytes(5)


def test_saved_activation_bytes_frees_the_graph_and_keeps_backward():
    import weakref

    x = torch.randn(50, 40, dtype=F64, requires_grad=True)
    refs = []

    def fn():
        h = torch.tanh(x)  # tanh saves its own output: the case that can close a reference cycle
        refs.append(weakref.ref(h))
        return (h * h).sum()

    assert saved_activation_bytes(fn) == 50 * 40 * 8
    assert refs[0]() is None  # the graph, and what it saved, is gone once nothing refers to it
    held = {}
    saved_activation_bytes(lambda: held.setdefault("loss", fn()))
    held["loss"].backward()
    want = 2 * torch.tanh(x) * (1 - torch.tanh(x) ** 2)
    torch.testing.assert_close(x.grad, want, rtol=1e-12, atol=1e-15)


def test_saved_bytes_fall_linearly_with_rho():
    ids, labels = copy_task(4, 65, 40, rng=0)

    def measure(model):
        return saved_activation_bytes(lambda: lm_loss(model(ids), labels))

    dense = measure(tiny())
    rhos = np.array([0.125, 0.25, 0.5, 0.75, 1.0])
    ratios = np.array([measure(wrap_model(tiny(), rho=r, lazy_layers=0)) / dense for r in rhos])  # exact
    assert ratios[-1] == 1.0 and np.all(np.diff(ratios) > 0)
    slope, icpt = np.polyfit(rhos, ratios, 1)
    assert np.max(np.abs(icpt + slope * rhos - ratios)) < 0.02  # linear in rho
    assert 0.75 < slope < 1.0 and ratios[0] < 0.35  # most of the saved memory scales with rho
    fast = [measure(wrap_model(tiny(), rho=r, lazy_layers=0, exact=False)) / dense for r in rhos]
    np.testing.assert_allclose(fast, ratios, rtol=1e-12)  # the exact forward saves nothing more than the split
    lazy = measure(wrap_model(tiny(), rho=0.25, lazy_layers=1)) / dense  # block 0 dense
    assert ratios[1] < lazy < ratios[1] + 0.3


def test_the_detach_pitfall_saves_nothing():
    """DropBP's x + f(x).detach() after a grad-mode forward saves every tensor of f; under no_grad nothing."""
    ids, labels = copy_task(2, 33, 40, rng=0)

    def measure(model):
        return saved_activation_bytes(lambda: lm_loss(model(ids), labels))

    dense = measure(tiny())
    # rho tiny: every block dropped (the first draw of this generator is far above 1e-9)
    detached = wrap_model(tiny(), rho=1e-9, mode="layerdrop", rng=0)
    for b in detached.model.layers:
        b.skip = "detach"
    assert measure(detached) == dense
    skipped = measure(wrap_model(tiny(), rho=1e-9, mode="layerdrop", rng=0))
    assert skipped < 0.05 * dense  # the embeddings' indices and the head's input remain
    manual = tiny()
    layer = manual.model.layers[0]
    x, cos_sin = block_inputs(manual, T=16)
    pitfall = saved_activation_bytes(lambda: x + (layer(x, position_embeddings=cos_sin) - x).detach())
    assert pitfall == saved_activation_bytes(lambda: layer(x, position_embeddings=cos_sin)) > 0


def test_layer_drop_block_values_and_gradients():
    model = tiny(layers=1)
    layer = model.model.layers[0]
    x, cos_sin = block_inputs(model, T=12)
    dense = layer(x, position_embeddings=cos_sin)
    for skip in ("no_grad", "detach"):
        block = LayerDropBlock(layer, rho=1e-9, skip=skip, rng=0)
        x.grad = None
        model.zero_grad()
        y = block(x, position_embeddings=cos_sin)
        assert block.last_kept is False and torch.equal(y, dense)
        y.sum().backward()
        assert torch.equal(x.grad, torch.ones_like(x))  # the residual connection only
        assert all(p.grad is None for p in model.parameters())
    kept = LayerDropBlock(layer, rho=1.0, rng=0)
    assert torch.equal(kept(x, position_embeddings=cos_sin), dense) and kept.last_kept
    draws = LayerDropBlock(layer, rho=0.5, rng=3)
    kept = []
    for _ in range(400):
        draws(x, position_embeddings=cos_sin)
        kept.append(draws.last_kept)
    assert 0.4 < np.mean(kept) < 0.6
    with pytest.raises(ValueError, match="`skip`"):
        LayerDropBlock(layer, skip="free")


# --------------------------------------------------------------------------------------------------
# the model wrapper: scores, lazy selection, nesting
# --------------------------------------------------------------------------------------------------
def test_scores_equal_the_residual_updates_seen_by_hooks():
    ids, _ = copy_task(3, 33, 40, rng=2)
    plain = tiny()
    seen = []
    hooks = [layer.register_forward_hook(lambda m, args, kw, out: seen.append((kw.get("hidden_states", args[0] if
                                                                                        args else None), out)),
                                         with_kwargs=True) for layer in plain.model.layers]
    plain(ids)
    for h in hooks:
        h.remove()
    oracle = [np.linalg.norm(o.detach().numpy() - i.detach().numpy(), axis=-1) for i, o in seen]
    model = wrap_model(tiny(), rho=0.25, lazy_layers=2)
    model(ids)
    for block, s in zip(model.model.layers, oracle):
        np.testing.assert_allclose(block.last_scores.numpy(), s, rtol=1e-12)
    masks = [b.last_mask for b in model.model.layers]
    assert masks[0] is None and masks[1] is None  # the lazy blocks run dense
    want = brute_topk(oracle[0] + oracle[1], keep_count(0.25, 33))  # the cumulative scores of the lazy blocks
    for m in masks[2:]:
        assert np.array_equal(m.numpy(), want)


def test_first_selecting_block_scores_itself_without_lazy_blocks():
    ids, _ = copy_task(2, 33, 40, rng=3)
    plain = tiny()
    x0 = plain.model.embed_tokens(ids)
    cos_sin = plain.model.rotary_emb(x0, torch.arange(33)[None])
    own = residual_update_scores(x0, plain.model.layers[0](x0, position_embeddings=cos_sin))
    model = wrap_model(tiny(), rho=0.5, lazy_layers=0)
    model(ids)
    assert np.array_equal(model.model.layers[0].last_mask.numpy(), brute_topk(own.detach().numpy(), 17))


def test_growing_keep_ratios_give_nested_sets():
    ids, _ = copy_task(2, 41, 40, rng=4)
    rhos = [1.0, 0.25, 0.5, 0.5, 0.75, 1.0]
    model = wrap_model(tiny(layers=6), rho=rhos, lazy_layers=1)
    model(ids)
    masks = [b.last_mask for b in model.model.layers[1:]]
    assert [int(m[0].sum()) for m in masks] == [keep_count(r, 41) for r in rhos[1:]]
    for shallow, deep in zip(masks, masks[1:]):
        assert bool((deep | ~shallow).all())  # shallow is a subset of deep
    with pytest.raises(ValueError, match="`rho` must not decrease"):
        wrap_model(tiny(layers=3), rho=[0.5, 0.5, 0.25], lazy_layers=0)


def test_wrap_and_unwrap_keep_the_state_dict():
    model = tiny(layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    wrap_model(model, rho=0.5)
    assert isinstance(model.model.layers[0], TokenDropBlock)
    after = model.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], before[k]) for k in before)
    fresh = wrap_model(tiny(layers=2, seed=9), rho=0.5)
    fresh.load_state_dict(before)
    assert all(torch.equal(fresh.state_dict()[k], before[k]) for k in before)
    with pytest.raises(ValueError, match="already wrapped"):
        wrap_model(model)
    unwrap_model(model)
    assert type(model.model.layers[0]).__name__ == "TinyLlamaDecoderLayer"
    assert unwrap_model(model) is model


@needs_transformers
def test_nothing_of_a_forward_is_held_after_it():
    """The shared plan (gathered masks, rotary tables, and the model's 4-D mask it refers to) is dropped after the
    last block: after backward the model's mask is freed, not held until the next step."""
    import gc
    import weakref

    ids, labels = copy_task(2, 33, 40, rng=7)
    pad = torch.ones(2, 33, dtype=torch.long)
    pad[1, :5] = 0
    model = wrap_model(hf_model("sdpa"), rho=0.5, lazy_layers=1)
    seen = []
    model.model.layers[2].register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(weakref.ref(kwargs["attention_mask"])), with_kwargs=True)
    plans = []
    model.model.layers[3].register_forward_pre_hook(lambda module, args: plans.append(
        weakref.ref(module._state.plan)))
    loss = lm_loss(model(ids, attention_mask=pad).logits, labels)
    state = model.model.layers[0]._state
    assert state.plan is None and state.scores is None and state.mask is None
    assert all(b._state is state for b in model.model.layers)
    assert int(model.model.layers[3].last_mask[0].sum()) == 17  # what a user inspects stays
    loss.backward()
    del loss
    gc.collect()
    assert seen[0]() is None and plans[0]() is None
    tiny_model = wrap_model(tiny(), rho=0.5, lazy_layers=0)
    lm_loss(tiny_model(ids), labels).backward()
    assert tiny_model.model.layers[0]._state.plan is None
    block = TokenDropBlock(tiny(layers=1).model.layers[0])  # alone: its own last block
    x, cos_sin = block_inputs(tiny_model, T=8)
    block(x, position_embeddings=cos_sin).sum().backward()
    assert block._state.plan is None


def test_non_finite_hidden_states_are_named():
    ids, labels = copy_task(2, 17, 40, rng=5)
    for lazy in (0, 2):
        model = wrap_model(tiny(), rho=0.5, lazy_layers=lazy)
        with torch.no_grad():
            model.model.embed_tokens.weight[ids[1, 3]] = float("nan")
        with pytest.raises(ValueError, match=f"hidden states of decoder block {lazy} .* not finite") as info:
            model(ids)
        assert "`scores`" not in str(info.value)


def test_layer_drop_blocks_of_a_model_share_one_generator():
    ids, _ = copy_task(2, 17, 40, rng=5)
    runs = []
    for _ in range(2):
        model = wrap_model(tiny(), rho=0.5, mode="layerdrop", rng=3)
        assert all(b._gen is model.model.layers[0]._gen for b in model.model.layers)
        kept = []
        for _ in range(5):
            model(ids)
            kept.append([b.last_kept for b in model.model.layers])
        runs.append(kept)
    assert runs[0] == runs[1] and len({tuple(k) for k in runs[0]}) > 1


def test_blocks_run_dense_outside_training():
    ids, _ = copy_task(2, 17, 40, rng=5)
    dense = tiny()(ids)
    model = wrap_model(tiny(), rho=0.25, lazy_layers=0)
    with torch.no_grad():
        assert torch.equal(model(ids), dense)
    assert all(b.last_mask is None for b in model.model.layers)
    model.eval()
    assert torch.equal(model(ids), dense)
    assert all(b.last_mask is None for b in model.model.layers)


def test_wrapper_validation():
    model = tiny(layers=2)
    with pytest.raises(TypeError, match="`model`"):
        wrap_model("llama")
    with pytest.raises(ValueError, match="`model`"):
        wrap_model(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="`mode`"):
        wrap_model(model, mode="dropout")
    with pytest.raises(ValueError, match="`rho`"):
        wrap_model(model, rho=[0.5])
    with pytest.raises(ValueError, match="`rho`"):
        wrap_model(model, rho=-0.5)
    with pytest.raises(ValueError, match="`lazy_layers`"):
        wrap_model(model, lazy_layers=-1)
    with pytest.raises(ValueError, match="`block`"):
        TokenDropBlock(torch.nn.Linear(3, 3))
    with pytest.raises(TypeError, match="`exact`"):
        TokenDropBlock(model.model.layers[0], exact="yes")
    block = TokenDropBlock(model.model.layers[0])
    x, cos_sin = block_inputs(model, T=8)
    with pytest.raises(ValueError, match="`hidden_states`"):
        block(x[0], position_embeddings=cos_sin)
    with pytest.raises(ValueError, match="`token_mask`"):
        block(x, position_embeddings=cos_sin, token_mask=torch.ones(2, 7, dtype=torch.bool))
    uneven = torch.zeros(2, 8, dtype=torch.bool)
    uneven[0, :3] = True
    uneven[1, :2] = True
    with pytest.raises(ValueError, match="`token_mask` must select the same number"):
        block(x, position_embeddings=cos_sin, token_mask=uneven)
    with pytest.raises(ValueError, match="position_embeddings"):
        block(x)


# --------------------------------------------------------------------------------------------------
# transformers' LlamaForCausalLM
# --------------------------------------------------------------------------------------------------
@needs_transformers
def test_tiny_llama_matches_transformers():
    ids = torch.randint(0, 40, (2, 19), generator=torch.Generator().manual_seed(0))
    for tie in (False, True):
        ours = TinyLlamaForCausalLM(TinyLlamaConfig(**CFG, rope_theta=500.0, tie_word_embeddings=tie), rng=1)
        cfg = transformers.LlamaConfig(**CFG, rope_theta=500.0, tie_word_embeddings=tie, rms_norm_eps=1e-6,
                                       max_position_embeddings=64, attn_implementation="eager")
        theirs = transformers.LlamaForCausalLM(cfg)
        theirs.load_state_dict(ours.state_dict())
        # float32: the same operations; float64: transformers keeps RMSNorm, RoPE and softmax in float32
        torch.testing.assert_close(ours(ids), theirs(ids).logits, rtol=1e-5, atol=1e-6)
        ours, theirs = ours.double(), theirs.double()
        torch.testing.assert_close(ours(ids), theirs(ids).logits, rtol=1e-6, atol=1e-6)


@needs_transformers
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_wrap_model_on_transformers_llama(impl):
    ids, labels = copy_task(2, 33, 40, rng=6)
    logits0, g0 = step(hf_model(impl), ids, labels)
    logits1, g1 = step(wrap_model(hf_model(impl), rho=1.0), ids, labels)
    assert torch.equal(logits1, logits0)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-14)
    model = wrap_model(hf_model(impl), rho=0.5)
    logits2, _ = step(model, ids, labels)
    assert torch.equal(logits2, logits0)
    assert [None if b.last_mask is None else int(b.last_mask[0].sum()) for b in model.model.layers] == \
        [None, 17, 17, 17]
    model = wrap_model(hf_model(impl), rho=0.5, exact=False)
    out = model(ids)
    torch.testing.assert_close(out.logits, logits0, rtol=1e-6, atol=1e-6)  # eager's float32 softmax
    assert out.past_key_values.get_seq_length() == 33  # the cache the dense model would fill
    # the split's gradient is the masked-detach one (checked above on the tiny block); here only its presence
    lm_loss(out.logits, labels).backward()
    assert all(g is not None for g in lora_grads(model))


@needs_transformers
def test_split_saves_no_attention_probabilities_on_transformers_sdpa():
    """On an sdpa model plain backprop saves no (T, T) probabilities; the split must not either (it attends
    through scaled_dot_product_attention with one gathered mask, saved once for all blocks), so that its saved
    bytes fall with rho rather than grow with T^2."""
    T, H = 256, CFG["num_attention_heads"]
    ids, labels = copy_task(2, T, 40, rng=0)
    model = hf_model("sdpa", dtype=torch.float32)
    fwd = lambda: lm_loss(model(ids).logits, labels)  # noqa: E731
    dense = saved_activation_bytes(fwd)
    ratios = []
    for rho in (0.5, 0.25, 0.125):
        wrap_model(model, rho=rho, lazy_layers=0)
        ratios.append(saved_activation_bytes(fwd) / dense)
        square = []

        def pack(t):
            if t.ndim == 4 and t.shape[-1] == T:
                square.append((tuple(t.shape), t.untyped_storage().data_ptr()))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fwd()
        k = keep_count(rho, T)
        assert {shape for shape, _ in square} == {(2, 1, k, T)}  # the mask only: no (B, H, k, T) probabilities
        assert len({ptr for _, ptr in square}) == 1  # one mask for the four blocks
        assert all(shape[1] != H for shape, _ in square)
        unwrap_model(model)
    assert ratios[0] < 0.7 and ratios[1] < 0.45 and ratios[2] < 0.3, ratios
    assert ratios[0] > ratios[1] > ratios[2]


@needs_transformers
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_transformers_padding_mask(impl):
    """Left padding: the split's padded rows (queries with no allowed key) are the dense block's too: zeros under
    sdpa's boolean mask, the average of all values under eager's additive one. (Eager in float32: transformers'
    eager softmax runs in float32, where float64's most negative float is -inf and the padded rows NaN.)"""
    dtype, tol = (F64, 1e-12) if impl == "sdpa" else (torch.float32, 1e-5)
    ids, labels = copy_task(2, 33, 40, rng=7)
    pad = torch.ones(2, 33, dtype=torch.long)
    pad[1, :5] = 0
    dense = hf_model(impl, dtype=dtype)(ids, attention_mask=pad).logits
    exact = wrap_model(hf_model(impl, dtype=dtype), rho=0.5)(ids, attention_mask=pad).logits
    split = wrap_model(hf_model(impl, dtype=dtype), rho=0.5, exact=False, lazy_layers=0)(ids, attention_mask=pad)
    assert torch.equal(exact, dense)
    torch.testing.assert_close(split.logits, dense, rtol=tol, atol=tol)  # the padded rows included


@needs_transformers
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_transformers_block_gradient_with_padding_is_the_masked_detach_gradient(impl):
    """A transformers LlamaDecoderLayer with a left-padding mask as the model passes it (eager: additive, the most
    negative float; sdpa: boolean), a random selection: the split's gradient is the masked-detach oracle's. The
    padded rows (no allowed key) are left out of the loss, as the labels leave them out."""
    model = hf_model(impl)
    layer = model.model.layers[0]
    B, T, pad = 2, 24, 4
    x, (cos, sin) = block_inputs(model, T=T)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None].repeat(B, 1, 1, 1)
    allowed[1, :, :, :pad] = False  # sequence 1: its first 4 tokens are padding
    additive = torch.zeros(B, 1, T, T, dtype=F64).masked_fill(~allowed, torch.finfo(F64).min)
    passed = additive if impl == "eager" else allowed
    mask = random_mask(B, T, 9, torch.Generator().manual_seed(4))
    w = torch.randn(B, T, 64, generator=torch.Generator().manual_seed(5), dtype=F64)

    def grads(fn):
        model.zero_grad()
        x.grad = None
        (fn() * w)[:, pad:].sum().backward()
        return [x.grad.clone()] + lora_grads(layer)

    for exact in (True, False):
        block = TokenDropBlock(layer, exact=exact)
        got = grads(lambda: block(x, attention_mask=passed, position_embeddings=(cos, sin), token_mask=mask))
        want = grads(lambda: masked_detach_block(layer, x, cos, sin, mask, additive, own_norms=False))
        assert len(got) == 1 + 7 * 2
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@needs_transformers
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_transformers_split_at_rho_one_gives_full_backprop_gradients_with_padding(impl, force_split):
    # eager in float32: transformers' eager softmax runs in float32, where float64's most negative float of the
    # padded rows becomes -inf, and the dense float64 model's padded rows NaN
    dtype, tol = (torch.float32, dict(rtol=1e-4, atol=1e-6)) if impl == "eager" else (F64, dict(rtol=1e-9,
                                                                                             atol=1e-12))
    ids, labels = copy_task(2, 33, 40, rng=7)
    pad = torch.ones(2, 33, dtype=torch.long)
    pad[1, :5] = 0
    model = hf_model(impl, dtype=dtype)
    model.zero_grad()
    dense = model(ids, attention_mask=pad).logits
    lm_loss(dense, labels).backward()
    g0 = lora_grads(model)
    model = wrap_model(hf_model(impl, dtype=dtype), rho=1.0)
    model.zero_grad()
    logits = model(ids, attention_mask=pad).logits
    lm_loss(logits, labels).backward()
    assert len(force_split) == 3  # the three blocks after the lazy one
    assert torch.equal(logits, dense)
    for a, b in zip(g0, lora_grads(model)):
        torch.testing.assert_close(b, a, **tol)


def other_llama(name, impl, **extra):
    """A tiny transformers causal LM of llama layout but another family, with LoRA on every projection."""
    Config = getattr(transformers, f"{name}Config")
    Model = getattr(transformers, f"{name}ForCausalLM")
    torch.manual_seed(0)  # transformers draws its initial weights from torch's global generator
    model = Model(Config(**{**CFG, "num_hidden_layers": 2}, attn_implementation=impl, **extra))
    apply_lora(model, r=4, targets=ALL_PROJ, rng=1)
    randomize_lora(model, 0)
    return model.to(F64).train()


@needs_transformers
@pytest.mark.parametrize("name, impl, extra", [("Qwen2", "sdpa", {}), ("Mistral", "eager", {"sliding_window": 8})])
def test_wrap_model_on_qwen2_and_mistral(name, impl, extra):
    """Qwen2's model reads decoder_layer.attention_type: the wrappers read what they lack from the block. Mistral
    with a window shorter than the sequence: the model's masks carry it."""
    ids, labels = copy_task(2, 33, 40, rng=8)
    logits0, _ = step(other_llama(name, impl, **extra), ids, labels)
    dropped = wrap_model(other_llama(name, impl, **extra), rho=0.5, mode="layerdrop", rng=0)
    assert torch.equal(dropped(ids).logits, logits0)
    model = wrap_model(other_llama(name, impl, **extra), rho=0.5, lazy_layers=0)
    logits1, grads = step(model, ids, labels)
    assert torch.equal(logits1, logits0)
    assert [int(b.last_mask[0].sum()) for b in model.model.layers] == [17, 17]
    assert len(grads) == 2 * 7 * 2 and all(bool(torch.isfinite(g).all()) and float(g.abs().max()) > 0 for g in grads)
    for layer in dropped.model.layers:
        assert layer.self_attn is layer.block.self_attn
    layer = model.model.layers[0]
    assert layer.self_attn is layer.block.self_attn
    if name == "Qwen2":
        assert layer.attention_type == layer.block.attention_type == "full_attention"
    with pytest.raises(AttributeError, match="nor has its wrapped block"):
        layer.no_such_attribute
    copy.deepcopy(model)  # copying (no __init__ run) does not recurse through the fallback


@needs_transformers
def test_sliding_window_without_a_mask_is_followed():
    """A Mistral block with a window of 8 called with attention_mask=None (as sdpa models may call it): the
    split's gradient is the oracle's with transformers' sliding-window mask (the 8 latest keys)."""
    model = other_llama("Mistral", "eager", sliding_window=8)
    layer = model.model.layers[0]
    B, T = 2, 24
    x, (cos, sin) = block_inputs(model, T=T)
    q, k = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (k <= q) & (k > q - 8)
    additive = torch.zeros(T, T, dtype=F64).masked_fill(~allowed, float("-inf"))[None, None]
    mask = random_mask(B, T, 9, torch.Generator().manual_seed(4))
    w = torch.randn(B, T, 64, generator=torch.Generator().manual_seed(5), dtype=F64)

    def grads(fn):
        model.zero_grad()
        x.grad = None
        (fn() * w).sum().backward()
        return [x.grad.clone()] + lora_grads(layer)

    got = grads(lambda: TokenDropBlock(layer, exact=False)(x, attention_mask=None, position_embeddings=(cos, sin),
                                                           token_mask=mask))
    want = grads(lambda: masked_detach_block(layer, x, cos, sin, mask, additive, own_norms=False))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@needs_transformers
def test_layouts_the_split_cannot_recompute_are_refused():
    gemma = transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**{**CFG, "num_hidden_layers": 2}, head_dim=16))
    with pytest.raises(ValueError, match=r"`model.model.layers\[0\]` \(Gemma2DecoderLayer\).*pre_feedforward"):
        wrap_model(gemma)
    cases = [("self_attn", dict(is_causal=False), "is_causal = False"),
             ("self_attn", dict(attn_logit_softcapping=50.0), "attn_logit_softcapping"),
             ("self_attn", dict(config=types.SimpleNamespace(clip_qkv=8.0)), "clip_qkv"),
             ("", dict(residual_multiplier=0.2), "residual_multiplier"),
             ("", dict(post_feedforward_layernorm=torch.nn.LayerNorm(64)), "post_feedforward_layernorm"),
             ("self_attn", dict(q_norm=torch.nn.LayerNorm(16)), "q_norm"),
             ("self_attn", dict(attention_dropout=0.1), "attention dropout")]
    for where, attrs, message in cases:
        with pytest.raises(ValueError, match=f"`block`.*{message}"):
            TokenDropBlock(_with(tiny(layers=1).model.layers[0], where, **attrs))
    model = tiny(layers=2)
    model.model.layers[1].self_attn.is_causal = False
    with pytest.raises(ValueError, match=r"`model.model.layers\[1\]`.*is_causal"):
        wrap_model(model)
    TokenDropBlock(_with(tiny(layers=1).model.layers[0], "", residual_multiplier=1.0))  # a multiplier of 1 is fine


def _with(layer, where, **attrs):
    target = getattr(layer, where) if where else layer
    for key, value in attrs.items():
        setattr(target, key, value)
    return layer


# --------------------------------------------------------------------------------------------------
# LoRA, the copy task, the loss
# --------------------------------------------------------------------------------------------------
def test_apply_lora():
    model = TinyLlamaForCausalLM(TinyLlamaConfig(**CFG), rng=0).double()
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(1))
    before = model(ids)
    apply_lora(model, r=3, alpha=6.0, rng=0)
    assert torch.equal(model(ids), before)  # B starts at zero
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert len(trainable) == 4 * 2 * 2 and all(n.endswith(("lora_A", "lora_B")) for n in trainable)
    q = model.model.layers[1].self_attn.q_proj
    with torch.no_grad():
        q.lora_B.normal_()
    x = torch.randn(5, 64, dtype=F64)
    torch.testing.assert_close(q(x), x @ q.weight.T + 2.0 * (x @ q.lora_A.T) @ q.lora_B.T)
    with pytest.raises(ValueError, match="already has LoRA"):
        apply_lora(model, rng=0)
    with pytest.raises(ValueError, match="`targets`"):
        apply_lora(TinyLlamaForCausalLM(TinyLlamaConfig(**CFG), rng=0), targets=("w_q",))
    with pytest.raises(ValueError, match="`r`"):
        apply_lora(TinyLlamaForCausalLM(TinyLlamaConfig(**CFG), rng=0), r=0)


def test_copy_task_and_loss(rng):
    ids, labels = copy_task(5, 12, 9, rng=rng)
    m, n = 6, 5
    assert ids.shape == labels.shape == (5, 12) and ids.dtype == torch.int64
    assert torch.equal(ids[:, m + 1:], ids[:, :n]) and bool((ids[:, m] == 0).all())
    assert bool((ids[:, :m] >= 1).all() and (ids[:, :m] < 9).all())
    assert bool((labels[:, :m + 1] == -100).all()) and torch.equal(labels[:, m + 1:], ids[:, m + 1:])
    a, _ = copy_task(2, 7, 9, rng=3)
    b, _ = copy_task(2, 7, 9, rng=3)
    assert torch.equal(a, b)
    logits = torch.from_numpy(rng.normal(size=(5, 12, 9)))
    lp = torch.log_softmax(logits, -1).numpy()
    want = [-lp[b, t - 1, int(ids[b, t])] for b in range(5) for t in range(m + 1, 12)]
    assert math.isclose(float(lm_loss(logits, labels)), np.mean(want), rel_tol=1e-12)
    assert math.isclose(float(lm_loss(logits, labels, reduction="sum")), np.sum(want), rel_tol=1e-12)
    assert lm_loss(logits, labels, reduction="none").shape == (5, 11)
    with pytest.raises(ValueError, match="`length`"):
        copy_task(2, 2, 9)
    with pytest.raises(ValueError, match="`vocab`"):
        copy_task(2, 9, 1)
    with pytest.raises(ValueError, match="`labels`"):
        lm_loss(logits, labels + 20)
    with pytest.raises(ValueError, match="`reduction`"):
        lm_loss(logits, labels, reduction="avg")


def test_config_validation():
    cfg = TinyLlamaConfig(hidden_size=48, num_attention_heads=6, num_key_value_heads=3)
    assert (cfg.head_dim, cfg.num_key_value_heads) == (8, 3)
    with pytest.raises(ValueError, match="`num_key_value_heads`"):
        TinyLlamaConfig(num_attention_heads=4, num_key_value_heads=3)
    with pytest.raises(ValueError, match="`head_dim`"):
        TinyLlamaConfig(hidden_size=12, num_attention_heads=4)
    with pytest.raises(TypeError, match="`tie_word_embeddings`"):
        TinyLlamaConfig(tie_word_embeddings=1)
    with pytest.raises(TypeError, match="`config`"):
        TinyLlamaForCausalLM({"hidden_size": 8})
    model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=1), rng=0)
    with pytest.raises(ValueError, match="`input_ids`"):
        model(torch.tensor([[0, 32]]))
    with pytest.raises(TypeError, match="`input_ids`"):
        model(torch.zeros(1, 3))


# --------------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------------
def test_demo_orderings():
    res = demo(steps=4, rng=0)
    m = res.metrics
    assert m["backprop"]["memory_ratio"] == 1.0
    assert m["TokenDrop rho=0.25"]["memory_ratio"] < m["TokenDrop rho=0.5"]["memory_ratio"] < 0.85
    first = res.history["backprop"]["loss"][0]
    for name, h in res.history.items():
        assert len(h["loss"]) == 4
        assert h["loss"][0] == first, name  # the same weights and batch, and forwards bit-identical to backprop's
        assert h["loss"][-1] < first - 0.01, name  # every run learns
    for name in ("backprop", "TokenDrop rho=0.5", "TokenDrop rho=0.25"):
        assert len(set(res.history[name]["saved_bytes"])) == 1  # the same every step
    sweep = np.asarray(res.sweep["saved_bytes"]) / res.sweep["backprop_bytes"]
    assert np.all(np.diff(sweep) > 0) and sweep[-1] == 1.0
    assert res.wall_time > 0 and res.steps == 4


def test_demo_measures_each_steps_bytes_in_a_separate_pass():
    """The demo times its steps without the saved-tensor hooks and measures a second copy of the model, which
    draws DropBP's decisions alike: its bytes are those of the trained model's own forwards."""
    from numtk.torch._demo_tokendrop import DEMO_CONFIG, LENGTH, train

    steps, batch = 6, 4
    got = train(dict(rho=0.5, mode="layerdrop"), steps=steps, batch=batch, rng=0)["saved_bytes"]
    model = wrap_model(TinyLlamaForCausalLM(TinyLlamaConfig(**DEMO_CONFIG), rng=0), rho=0.5, mode="layerdrop", rng=2)
    gen = torch.Generator().manual_seed(1)
    want = []
    for _ in range(steps):
        ids, labels = copy_task(batch, LENGTH, DEMO_CONFIG["vocab_size"], rng=gen)
        want.append(saved_activation_bytes(lambda: lm_loss(model(ids), labels)))
    assert got == want and len(set(want)) > 1  # the random skips vary, and match step by step
