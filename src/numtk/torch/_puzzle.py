"""A packed PuzzleMoE layer as an ``nn.Module``: the experts of one MoE layer run from their bf16 words.

The words are those of :func:`numtk.moe.merge_experts` (or :func:`numtk.moe.pack_bf16`): one uint16 per
position of each merged pair, holding the shared magnitude and both experts' masks and signs. On the CPU the
forward runs the compiled :func:`numtk.moe.packed_matvec` on the module's own buffers, without copying them;
elsewhere (or on request) the words are decoded in torch and multiplied by ``torch.matmul``.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterator

import numpy as np

from numtk._lib import n_threads
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_int, check_option
from numtk.moe import packed_matvec, unpack_bf16
from numtk.torch._common import check_tensor, torch

__all__ = ["PackedExperts"]

_GATED = ("w_gate", "w_up", "w_down")
_BACKENDS = ("auto", "kernel", "torch")
#: rows of words decoded at once by the backward pass and by the torch decode (about 4 Mi weights)
_DECODE_ELEMENTS = 1 << 22


# --------------------------------------------------------------------------------------------------
# decoding and the product
# --------------------------------------------------------------------------------------------------
def _decode_torch(words: "torch.Tensor", pos: int) -> "torch.Tensor":
    """Expert ``pos`` of int16 (or uint16) words as float32, decoded with torch integer operations on the words'
    device: sign << 31 | ((w & 0x0F80) + (112 << 7)) << 16 | (w & 0x7F) << 16, zero where the mask bit is clear."""
    w = words.to(torch.int32) & 0xFFFF
    mask = (w >> (13 - pos)) & 1
    sign = (w >> (15 - pos)) & 1
    bits = (sign << 31) | (((w & 0x0F80) + (112 << 7)) << 16) | ((w & 0x007F) << 16)
    return (bits & -mask).view(torch.float32)


def _decode_rows(words: "torch.Tensor", pos: int, r0: int, r1: int) -> "torch.Tensor":
    """Rows r0:r1 of expert ``pos`` as float32: by the compiled unpacking for CPU words, by torch elsewhere."""
    block = words[r0:r1]
    if block.device.type == "cpu" and block.is_contiguous():
        return torch.from_numpy(unpack_bf16(block.numpy().view(np.uint16), pos, as_float=True))
    return _decode_torch(block, pos)


class _PackedLinear(torch.autograd.Function):
    """y = x W^T with W expert ``pos`` of CPU words, through the compiled kernel; dx = dy W (W decoded by row
    blocks). No gradient reaches the words (frozen)."""

    @staticmethod
    def forward(ctx: Any, x: "torch.Tensor", words: "torch.Tensor", pos: int, threads: int) -> "torch.Tensor":
        xs = x.detach().contiguous()
        out = torch.empty((xs.shape[0], words.shape[0]), dtype=torch.float32)
        if xs.shape[0]:
            packed_matvec(words.numpy().view(np.uint16), xs.numpy(), pos, out=out.numpy(), workers=threads)
        else:
            out.zero_()
        ctx.save_for_backward(words)
        ctx.pos = pos
        return out

    @staticmethod
    def backward(ctx: Any, grad: "torch.Tensor") -> tuple:
        (words,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        d_out, d_in = words.shape
        gx = grad.new_zeros((grad.shape[0], d_in))
        rows = max(1, _DECODE_ELEMENTS // max(d_in, 1))
        for r0 in range(0, d_out, rows):
            r1 = min(d_out, r0 + rows)
            gx = gx + grad[:, r0:r1] @ _decode_rows(words, ctx.pos, r0, r1).to(grad.device)
        return gx, None, None, None


# --------------------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------------------
def _words(value: Any, name: str) -> "torch.Tensor":
    """A (P, rows, cols) int16 tensor sharing memory with ``value`` (a uint16/int16 ndarray or tensor, 2-D for one
    pair or 3-D), never copied."""
    if isinstance(value, np.ndarray):
        if value.dtype not in (np.dtype(np.uint16), np.dtype(np.int16)):
            raise TypeError(f"`{name}` must hold packed 16-bit words (uint16, as numtk.moe.pack_bf16 makes them, or "
                            f"int16); got dtype {value.dtype}")
        if not value.flags.c_contiguous:
            raise ValueError(f"`{name}` must be C-contiguous: the module shares the words' memory and does not copy "
                             f"a large layer; pass numpy.ascontiguousarray({name}) (one copy, made by you)")
        with warnings.catch_warnings():  # a read-only array: the module never writes its words
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            t = torch.from_numpy(value.view(np.int16))
    elif isinstance(value, torch.Tensor):
        if value.dtype not in (torch.uint16, torch.int16):
            raise TypeError(f"`{name}` must hold packed 16-bit words (torch.uint16 or torch.int16); got "
                            f"{value.dtype}")
        if not value.is_contiguous():
            raise ValueError(f"`{name}` must be contiguous: the module shares the words' memory and does not copy a "
                             f"large layer; pass {name}.contiguous() (one copy, made by you)")
        t = value.detach().view(torch.int16)
    else:
        raise TypeError(f"`{name}` must be a numpy.ndarray or torch.Tensor of uint16 words, a dict of them (gated "
                        f"experts) or a numtk.moe.merge_experts Result; got {type(value).__name__}")
    if t.ndim == 2:
        t = t.unsqueeze(0)
    if t.ndim != 3:
        raise ValueError(f"`{name}` must be (num_pairs, d_out, d_in) or (d_out, d_in) for one pair; got shape "
                         f"{tuple(t.shape)}")
    if min(t.shape) == 0:
        raise ValueError(f"`{name}` must not be empty; got shape {tuple(t.shape)}")
    return t


def _layer(packed: Any) -> tuple[dict[str, "torch.Tensor"], Any]:
    """{name: (P, rows, cols) int16} and the pairs of a Result (None for words given directly)."""
    pairs = None
    if hasattr(packed, "keys") and "packed" in packed and "pairs" in packed:  # a merge_experts Result
        pairs = packed["pairs"]
        packed = packed["packed"]
    if isinstance(packed, dict):
        unknown = sorted(str(k) for k in packed if k not in _GATED)
        missing = [k for k in _GATED if k not in packed]
        if unknown or missing:
            raise ValueError(f"`packed` as a dict (gated experts) needs exactly the keys {list(_GATED)}; unknown "
                             f"{unknown}, missing {missing}")
        mats = {k: _words(packed[k], f"packed['{k}']") for k in _GATED}
        g, u, d = (mats[k] for k in _GATED)
        if u.shape != g.shape or d.shape[0] != g.shape[0] or d.shape[2] != g.shape[1]:
            raise ValueError(f"`packed` must hold w_gate and w_up of shape (P, H, D) and w_down of shape (P, D_out, "
                             f"H); got {tuple(g.shape)}, {tuple(u.shape)} and {tuple(d.shape)}")
        devices = {t.device for t in mats.values()}
        if len(devices) > 1:
            raise ValueError(f"`packed` must have its three matrices on one device; got {sorted(map(str, devices))}")
        return mats, pairs
    return {"packed": _words(packed, "packed")}, pairs


def _pairs(pairs: Any, P: int) -> np.ndarray:
    if pairs is None:
        return np.arange(2 * P, dtype=np.int64).reshape(P, 2)
    if isinstance(pairs, torch.Tensor):
        pairs = pairs.detach().cpu().numpy()
    arr = as_array(pairs, "pairs", ndim=2, kinds="iu")
    if arr.shape != (P, 2):
        raise ValueError(f"`pairs` must have shape (num_pairs, 2) = ({P}, 2); got {arr.shape}")
    flat = arr.ravel()
    if flat.min() < 0 or flat.max() >= 2 * P or np.unique(flat).size != 2 * P:
        raise ValueError(f"`pairs` must name every expert 0..{2 * P - 1} exactly once")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _slots(pair_arr: np.ndarray) -> np.ndarray:
    """slot[e] = (p, position) of every expert e named by the pairs (P, 2)."""
    P = pair_arr.shape[0]
    slot = np.empty((2 * P, 2), dtype=np.int64)
    slot[pair_arr[:, 0]] = np.column_stack([np.arange(P), np.zeros(P, dtype=np.int64)])
    slot[pair_arr[:, 1]] = np.column_stack([np.arange(P), np.ones(P, dtype=np.int64)])
    return slot


def _reload_pairs(module: Any, incompatible_keys: Any) -> None:
    """After ``load_state_dict``: the selection follows the pairs loaded (checked as the constructor checks)."""
    module._slot = _slots(_pairs(module.pairs, module.num_pairs))


# --------------------------------------------------------------------------------------------------
# the module
# --------------------------------------------------------------------------------------------------
@constraints(packed=("option", "array2d", "tensor"), pairs="array2d", backend="option", workers="workers")
class PackedExperts(torch.nn.Module):
    r"""The experts of one MoE layer, merged in pairs by PuzzleMoE and run from their packed bf16 words.

    Holds the words of :func:`numtk.moe.merge_experts` as buffers (2 bytes per position of each pair: half the
    memory of the experts in bf16) and computes any expert's output from them: on the CPU through the compiled
    :func:`numtk.moe.packed_matvec`, which decodes each word in registers, reading the module's buffers in place.
    Experts are chosen by their index in the original layer (``module(x, e)``, ``module[e](x)``) or by pair and
    position; ``module[e]`` is a callable module, so the object stands in for the ``nn.ModuleList`` of experts
    of an MoE layer. Differentiable in the input; the words are frozen.

    Parameters
    ----------
    packed : Result, ndarray, torch.Tensor or dict
        A Result of :func:`numtk.moe.merge_experts` (its ``packed`` words and ``pairs``), or the words
        themselves: uint16 (or int16) of shape (P, d_out, d_in), or (d_out, d_in) for one pair, for experts that
        are one matrix (:math:`E(x) = W x`); a dict ``{'w_gate', 'w_up', 'w_down'}`` of (P, H, D), (P, H, D) and
        (P, D_out, H) words for gated FFN experts (SwiGLU, :math:`E(x) = W_{down}(\mathrm{silu}(W_{gate} x) \odot
        W_{up} x)`). Arrays and tensors must be contiguous: the module's buffers share their memory (Notes).
    pairs : array_like of int, shape (P, 2), optional
        ``pairs[p] = (e, f)``: pair p holds expert e at position 0 and expert f at position 1 (each expert of
        0..2P-1 once). Default: the Result's pairs, or (0, 1), (2, 3), ... for words given directly. Not with a
        Result.
    backend : {'auto', 'kernel', 'torch'}, default 'auto'
        'auto': the compiled kernel when the words are on the CPU, a torch decode elsewhere; 'kernel': the
        compiled kernel only (a forward on another device is an error); 'torch': decode the expert's words with
        torch integer operations and multiply with ``torch.matmul`` (any device).
    workers : int, default 1
        Threads of the compiled kernel (-1: every core); results do not depend on it.

    Attributes
    ----------
    num_experts : int
        2P, the experts of the layer.
    num_pairs : int
        P, the packed tensors per matrix.
    in_features, out_features : int
        D and D_out (d_in and d_out for one-matrix experts).
    hidden_features : int or None
        H, the intermediate size of gated experts (None otherwise).
    gated : bool
        Whether the experts are SwiGLU FFNs.
    pairs, slot : torch.Tensor of int64
        ``pairs`` (P, 2) as above and ``slot`` (2P, 2): ``slot[e] = (p, position)``.

    Raises
    ------
    ValueError
        Words of the wrong shape, empty or non-contiguous, gated matrices of mismatched shapes or devices, invalid
        ``pairs`` (or ``pairs`` with a Result), an unknown ``backend``.
    TypeError
        Words that are not uint16/int16 arrays or tensors, or a ``packed`` of another type.

    See Also
    --------
    numtk.moe.merge_experts : pairs, merges and packs the experts of a layer.
    numtk.moe.packed_matvec : the compiled product.

    Notes
    -----
    **Memory.** The words are never copied: a NumPy array becomes a tensor over the same memory
    (``torch.from_numpy``), a tensor is kept as an int16 view of itself, and the forward hands the buffers'
    memory to the kernel as NumPy views (``tensor.numpy()``). Writing to the array given changes the module.
    Non-contiguous words are refused (a ValueError suggesting ``numpy.ascontiguousarray`` or ``.contiguous()``)
    rather than copied, as :func:`numtk.moe.packed_matvec` refuses them.

    **Devices.** ``module.to(device)`` moves the words like any buffer. With ``backend='auto'`` a module on a
    non-CPU device decodes the selected expert's words there with torch integer operations (a float32 matrix
    of the expert, built for each call) and multiplies with ``torch.matmul``: the same weights, another
    summation order. The input must be on the words' device.

    **Numerics.** Products are float32 (the kernel's precision, whatever the input's floating dtype) and the
    output has the input's dtype. On the CPU each output is within :math:`d_{in} 2^{-23} \sum_c |w_{rc} x_c|`
    of the exact product with the decoded weights (:func:`numtk.moe.packed_matvec`).

    **Gradients.** The forward is differentiable with respect to ``x``: the backward multiplies the output
    gradient by the decoded weights, decoding a block of rows at a time (about 4 Mi weights, 16 MiB, per block).
    The packed weights are frozen: they are buffers, not parameters, so they get no gradient and no optimizer
    sees them (PuzzleMoE compresses a trained layer; fine-tune before merging).

    The decode of expert pos (0 or 1) of a word w is :math:`(-1)^{w_{15-pos}}\, w_{13-pos}\, m(w)` with
    :math:`m(w)` the bf16 value of exponent ``((w >> 7) & 31) + 112`` and mantissa ``w & 0x7F``
    (:func:`numtk.moe.pack_bf16`) [1]_.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE: Efficient Compression of Large Mixture-of-Experts Models via
       Sparse Expert Merging and Bit-packed Inference", ICML 2026, arXiv:2511.04805.

    Examples
    --------
    Four experts of one matrix each, merged in pairs and packed, then run as modules:

    >>> import numpy as np, torch
    >>> from numtk.moe import merge_experts, unpack_bf16
    >>> from numtk.torch.puzzle import PackedExperts
    >>> rng = np.random.default_rng(0)
    >>> experts = rng.normal(0, 0.05, (4, 6, 8)).astype(np.float32)
    >>> layer = PackedExperts(merge_experts(experts, pairs="sequential"))
    >>> layer
    PackedExperts(num_experts=4, in_features=8, out_features=6, backend='auto')
    >>> x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    >>> y = layer(x, 2)                     # expert 2: pair 1, position 0
    >>> y.shape, torch.equal(y, layer(x, pair=1, position=0)), torch.equal(y, layer[2](x))
    (torch.Size([3, 6]), True, True)

    The result is the product with the decoded weights (what the merge kept of expert 2):

    >>> W2 = torch.from_numpy(unpack_bf16(layer.packed[1].numpy().view(np.uint16), 0, as_float=True))
    >>> bool(torch.allclose(y, x @ W2.T, rtol=1e-5, atol=1e-6))
    True

    Gradients flow to the input only:

    >>> _ = x.requires_grad_(True)
    >>> layer(x, 0).sum().backward()
    >>> x.grad.shape, [name for name, _ in layer.named_parameters()]
    (torch.Size([3, 8]), [])
    """

    def __init__(self, packed: Any, pairs: Any = None, *, backend: str = "auto", workers: Any = 1) -> None:
        super().__init__()
        self.backend = check_option(backend, "backend", _BACKENDS)
        self.workers = n_threads(workers)  # each product caps it by its size (numtk.moe._bf16.BF16_MATVEC_GRAIN)
        mats, result_pairs = _layer(packed)
        if result_pairs is not None:
            if pairs is not None:
                raise ValueError("`pairs` must be None when `packed` is a merge_experts Result (its pairs are used)")
            pairs = result_pairs
        self.gated = "w_gate" in mats
        first = mats["w_gate" if self.gated else "packed"]
        P = first.shape[0]
        pair_arr = _pairs(pairs, P)
        for name, words in mats.items():
            self.register_buffer(name, words)
        self.register_buffer("pairs", torch.from_numpy(pair_arr))
        self._slot = _slots(pair_arr)  # host copy, for the selection; refreshed when a state dict is loaded
        self.register_load_state_dict_post_hook(_reload_pairs)
        self.num_pairs = P
        self.num_experts = 2 * P
        if self.gated:
            self.hidden_features = mats["w_gate"].shape[1]
            self.in_features = mats["w_gate"].shape[2]
            self.out_features = mats["w_down"].shape[1]
        else:
            self.hidden_features = None
            self.out_features, self.in_features = first.shape[1], first.shape[2]

    @property
    def slot(self) -> "torch.Tensor":
        """(num_experts, 2) int64: ``slot[e] = (pair, position)`` of expert e (from ``pairs``)."""
        return torch.from_numpy(self._slot.copy())

    # ----------------------------------------------------------------------------------------------
    def _select(self, expert: Any, pair: Any, position: Any) -> tuple[int, int]:
        N, P = self.num_experts, self.num_pairs
        if expert is not None:
            if pair is not None or position is not None:
                raise ValueError("`expert` selects an expert on its own; pass either `expert` or `pair` and "
                                 "`position`, not both")
            e = check_int(expert, "expert", minimum=-N, maximum=N - 1)
            p, pos = self._slot[e % N]
            return int(p), int(pos)
        if pair is None or position is None:
            missing = "`expert`" if pair is None and position is None else "`position`" if position is None \
                else "`pair`"
            raise TypeError(f"select an expert: pass `expert` (0..{N - 1}) or both `pair` and `position`; "
                            f"{missing} is missing")
        p = check_int(pair, "pair", minimum=-P, maximum=P - 1) % P
        if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
            raise TypeError(f"`position` must be 0 or 1 (the pair's first or second expert); got "
                            f"{type(position).__name__}")
        if position not in (0, 1):
            raise ValueError(f"`position` must be 0 or 1 (the pair's first or second expert); got {position}")
        return p, int(position)

    def _linear(self, x: "torch.Tensor", name: str, p: int, pos: int) -> "torch.Tensor":
        """x (b, d_in) float32 -> (b, d_out) float32 through matrix ``name`` of pair p, expert pos."""
        words = getattr(self, name)[p]
        on_cpu = words.device.type == "cpu"
        if self.backend == "torch" or (self.backend == "auto" and not on_cpu):
            W = _decode_torch(words, pos)
            return x @ W.T
        if not on_cpu:
            raise ValueError(f"`backend`='kernel' runs the compiled kernel on CPU words; the words are on "
                             f"{words.device} (use backend='auto' or 'torch' there)")
        if not words.is_contiguous():
            raise ValueError(f"the module's words `{name}` are not contiguous (a buffer was replaced by a view); "
                             "assign a contiguous tensor (.contiguous()) or use backend='torch'")
        return _PackedLinear.apply(x, words, pos, self.workers)

    @constraints(x="tensor", expert="index", pair="index", position="option")
    def forward(self, x: "torch.Tensor", expert: int | None = None, *, pair: int | None = None,
                position: int | None = None) -> "torch.Tensor":
        r"""One expert of the layer applied to every row of ``x``.

        Parameters
        ----------
        x : torch.Tensor, shape (..., in_features)
            Floating-point inputs, finite, on the device of the words.
        expert : int, optional
            The expert, by its index in the original layer (0..num_experts-1; negative values count from the
            end). Either this or ``pair`` and ``position``.
        pair : int, optional
            The pair (0..num_pairs-1; negative from the end), with ``position``.
        position : {0, 1}, optional
            The pair's first (0) or second (1) expert.

        Returns
        -------
        torch.Tensor, shape (..., out_features)
            :math:`E(x)` row by row (:math:`W x`, or :math:`W_{down}(\mathrm{silu}(W_{gate} x) \odot W_{up} x)`
            for gated experts), computed in float32, in the dtype of ``x``; differentiable in ``x``.

        Raises
        ------
        ValueError
            ``x`` of the wrong last dimension, not finite or on another device; an expert, pair or position out
            of range, or both ways of selecting given; ``backend='kernel'`` with words off the CPU.
        TypeError
            ``x`` not a floating tensor; indices that are not ints; no expert selected.

        Examples
        --------
        >>> import numpy as np, torch
        >>> from numtk.moe import merge_experts
        >>> from numtk.torch.puzzle import PackedExperts
        >>> experts = np.random.default_rng(1).normal(0, 0.05, (2, 3, 4)).astype(np.float32)
        >>> layer = PackedExperts(merge_experts(experts))
        >>> layer(torch.ones(5, 2, 4), expert=1).shape
        torch.Size([5, 2, 3])
        """
        x = check_tensor(x, "x", dtype="floating")
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"`x` must have shape (..., {self.in_features}) (in_features); got {tuple(x.shape)}")
        first = self.w_gate if self.gated else self.packed
        if x.device != first.device:
            raise ValueError(f"`x` must be on the device of the packed words ({first.device}); got {x.device}")
        p, pos = self._select(expert, pair, position)
        lead = x.shape[:-1]
        h = x.reshape(-1, self.in_features).to(torch.float32)
        if self.gated:
            g = self._linear(h, "w_gate", p, pos)
            u = self._linear(h, "w_up", p, pos)
            y = self._linear(torch.nn.functional.silu(g) * u, "w_down", p, pos)
        else:
            y = self._linear(h, "packed", p, pos)
        return y.to(x.dtype).reshape(*lead, self.out_features)

    @constraints(expert="index", pair="index", position="option")
    def unpack(self, expert: int | None = None, *, pair: int | None = None,
               position: int | None = None) -> "torch.Tensor | dict[str, torch.Tensor]":
        r"""The decoded weights of one expert, float32, on the words' device: what the forward multiplies by.

        Parameters
        ----------
        expert : int, optional
            The expert by its index in the original layer (negative from the end); or give ``pair`` and
            ``position``.
        pair : int, optional
            The pair, with ``position``.
        position : {0, 1}, optional
            The pair's first or second expert.

        Returns
        -------
        torch.Tensor or dict of torch.Tensor
            The (out_features, in_features) matrix, or for gated experts a dict ``{'w_gate', 'w_up', 'w_down'}``
            of (H, D), (H, D) and (D_out, H) matrices: an ordinary dense copy of the expert (it takes 4 bytes per
            weight), for comparison or to fine-tune the merged expert as a plain module.

        Raises
        ------
        ValueError
            An expert, pair or position out of range, or both ways of selecting given.
        TypeError
            Indices that are not ints; no expert selected.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.moe import merge_experts
        >>> from numtk.torch.puzzle import PackedExperts
        >>> W = np.array([[[0.5, -0.25]], [[0.4375, 0.75]]], dtype=np.float32)
        >>> layer = PackedExperts(merge_experts(W))
        >>> layer.unpack(0), layer.unpack(pair=0, position=1)
        (tensor([[0.4688, 0.0000]]), tensor([[0.4688, 0.7500]]))
        """
        p, pos = self._select(expert, pair, position)
        names = _GATED if self.gated else ("packed",)
        out = {}
        for name in names:
            words = getattr(self, name)[p]
            out[name] = _decode_rows(words, pos, 0, words.shape[0]).to(words.device)
        return out if self.gated else out["packed"]

    # ----------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.num_experts

    def __getitem__(self, expert: int) -> "_Expert":
        e = check_int(expert, "expert", minimum=-self.num_experts, maximum=self.num_experts - 1)
        return _Expert(self, e % self.num_experts)

    def __iter__(self) -> Iterator["_Expert"]:
        return (_Expert(self, e) for e in range(self.num_experts))

    def extra_repr(self) -> str:
        hidden = f", hidden_features={self.hidden_features}" if self.gated else ""
        return (f"num_experts={self.num_experts}, in_features={self.in_features}{hidden}, "
                f"out_features={self.out_features}, backend={self.backend!r}")


class _Expert(torch.nn.Module):
    """Expert e of a :class:`PackedExperts` as a module of its own (``layer[e](x)``); holds no weights."""

    def __init__(self, layer: PackedExperts, expert: int) -> None:
        super().__init__()
        object.__setattr__(self, "_layer", layer)  # not a submodule: the words stay the layer's
        self.expert = expert

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return self._layer(x, self.expert)

    def extra_repr(self) -> str:
        return f"expert={self.expert} of {type(self._layer).__name__}"
