"""Private helpers of the PyTorch bridge: the ``rng`` keyword as a :class:`torch.Generator`, tensor checks
whose messages name the argument (shape, dtype, device, finiteness), and the ``reduction=`` keyword of
:mod:`torch.nn.functional`.

Importing this module imports torch; a missing torch gives an ImportError that names the extra to install.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from typing import Any, Iterator, Sequence

import numpy as np

from numtk._lib._optional import import_optional
from numtk._lib._rng import normalize_rng

torch = import_optional("torch", purpose="numtk.torch (the PyTorch bridge)")

__all__ = ["torch", "torch_generator", "device_generator", "standard_gamma", "check_tensor", "check_reduction",
           "reduce_loss", "check_like", "check_same_device", "torch_threads", "check_callable", "numpy_rng"]

#: the values of ``reduction=``, as in torch.nn.functional
REDUCTIONS = ("mean", "sum", "none")


def torch_generator(rng: Any = None, *, device: Any = "cpu", name: str = "rng") -> "torch.Generator":
    """The ``rng`` keyword of the bridge as a :class:`torch.Generator` on ``device``.

    ``None`` gives a generator seeded from fresh operating-system entropy; an int ``>= 0`` seeds it with that
    int (``torch.Generator().manual_seed(rng)``); a :class:`numpy.random.Generator` (or a
    :class:`numpy.random.SeedSequence`) draws the seed from it, so one NumPy generator drives NumPy and torch
    reproducibly; a :class:`torch.Generator` is returned unchanged.

    Examples
    --------
    >>> from numtk.torch._common import torch_generator
    >>> a = torch.rand(3, generator=torch_generator(7))
    >>> b = torch.rand(3, generator=torch_generator(7))
    >>> bool((a == b).all())
    True
    >>> g = torch_generator(7)
    >>> torch_generator(g) is g
    True
    """
    if isinstance(rng, torch.Generator):
        return rng
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be None, an int, a numpy.random.Generator or a torch.Generator; "
                        "got a bool")
    if isinstance(rng, numbers.Integral):
        seed = int(rng)
        if seed < 0 or seed >= 2**64:
            raise ValueError(f"`{name}` must be an int seed in [0, 2**64); got {seed}")
    else:
        try:
            gen = normalize_rng(rng, name=name)
        except TypeError:
            raise TypeError(f"`{name}` must be None, an int, a numpy.random.Generator or a torch.Generator; "
                            f"got {type(rng).__name__}") from None
        seed = int(gen.integers(0, 2**63 - 1))
    return torch.Generator(device=device).manual_seed(seed)


def device_generator(rng: Any, device: Any, *, name: str = "rng", tensor: str = "the tensors") -> "torch.Generator":
    """:func:`torch_generator` on ``device``; a :class:`torch.Generator` passed in must live on that device
    (its type, and its index where both name one), else a ValueError naming ``name`` and ``tensor``."""
    gen = torch_generator(rng, device=device, name=name)
    device = torch.device(device)
    gd = torch.device(gen.device)
    if gd.type != device.type or (device.index is not None and gd.index is not None and gd.index != device.index):
        raise ValueError(f"`{name}` must be a torch.Generator on {device} (the device of {tensor}), or an int "
                         f"seed; got one on {gd}")
    return gen


_GAMMA_MAX_ROUNDS = 10_000


def standard_gamma(concentration: float, shape: Sequence[int], gen: "torch.Generator", *,
                   dtype: "torch.dtype", device: Any) -> "torch.Tensor":
    """Draws of Gamma(concentration, 1) of the given shape, every one from ``gen``: torch's own sampler (the one
    torch.distributions uses, with a generator), or, where a torch release does not offer it, Marsaglia and
    Tsang's rejection sampler in plain torch."""
    try:
        conc = torch.full(tuple(shape), concentration, dtype=dtype, device=device)
        return torch._standard_gamma(conc, generator=gen)
    except torch.OutOfMemoryError:
        raise
    except (AttributeError, TypeError, RuntimeError, NotImplementedError):  # older torch, or a device without it
        n = math.prod(shape)
        return _marsaglia_tsang_gamma(concentration, n, gen, dtype, torch.device(device)).reshape(tuple(shape))


def _marsaglia_tsang_gamma(shape: float, n: int, gen: "torch.Generator", dtype: "torch.dtype",
                           device: "torch.device") -> "torch.Tensor":
    """n draws of Gamma(shape, 1), shape > 0, by Marsaglia and Tsang's squeeze-free rejection (2000), with
    the boost G(a) = G(a + 1) U^(1/a) below 1; every draw comes from ``gen``."""
    a = shape + 1.0 if shape < 1.0 else shape
    dd = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * dd)
    out = torch.empty(n, dtype=dtype, device=device)
    filled = 0
    for _ in range(_GAMMA_MAX_ROUNDS):
        m = n - filled
        if m == 0:
            break
        # the draws are independent: propose a few more than needed and keep the first accepted ones in order
        p = m + m // 8 + 8
        x = torch.randn(p, generator=gen, dtype=dtype, device=device)
        u = torch.rand(p, generator=gen, dtype=dtype, device=device)
        v = (1.0 + c * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + dd - dd * v + dd * torch.log(v.clamp_min(1e-300)))
        got = (dd * v[ok])[:m]
        out[filled:filled + got.numel()] = got
        filled += got.numel()
    else:  # pragma: no cover - the acceptance rate is above 0.95
        raise RuntimeError("the gamma sampler did not finish")
    if shape < 1.0:
        out = out * torch.rand(n, generator=gen, dtype=dtype, device=device) ** (1.0 / shape)
    return out


def check_tensor(t: Any, name: str, *, ndim: int | None = None, shape: Sequence[int | None] | None = None,
                 dtype: Any = "floating", device: Any = None, finite: bool = True) -> "torch.Tensor":
    """Check a tensor argument; every message names it in backquotes.

    Parameters
    ----------
    t : object
        The argument; anything but a :class:`torch.Tensor` is a TypeError.
    name : str
        Its name, for the messages.
    ndim : int, optional
        The required number of dimensions.
    shape : sequence of int or None, optional
        The required shape; ``None`` entries match any size (implies ``ndim``).
    dtype : torch.dtype, "floating", "integer" or None
        A required dtype, a dtype family (``"floating"``: float16/bfloat16/float32/float64), or None (any).
    device : torch.device or str, optional
        The device the tensor must be on.
    finite : bool
        Refuse NaN and infinity (floating tensors only).

    Returns
    -------
    torch.Tensor
        ``t`` itself.

    Examples
    --------
    >>> from numtk.torch._common import check_tensor
    >>> check_tensor(torch.zeros(2, 3), "x", shape=(None, 3)).shape
    torch.Size([2, 3])
    >>> check_tensor(torch.zeros(2, 4), "x", shape=(None, 3))
    Traceback (most recent call last):
        ...
    ValueError: `x` must have shape (*, 3); got (2, 4)
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}")
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"`{name}` must be a {ndim}-D tensor; got {t.ndim}-D with shape {tuple(t.shape)}")
    if shape is not None and any(s is not None and s != n for s, n in zip(shape, t.shape)):
        want = ", ".join("*" if s is None else str(s) for s in shape)
        raise ValueError(f"`{name}` must have shape ({want}{',' if len(shape) == 1 else ''}); "
                         f"got {tuple(t.shape)}")
    if dtype == "floating":
        if not t.is_floating_point():
            raise TypeError(f"`{name}` must hold floating-point numbers; got dtype {t.dtype}")
    elif dtype == "integer":
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"`{name}` must hold integers; got dtype {t.dtype}")
    elif dtype is not None and t.dtype != dtype:
        raise TypeError(f"`{name}` must have dtype {dtype}; got {t.dtype}")
    if device is not None and t.device != torch.device(device):
        raise ValueError(f"`{name}` must be on device {torch.device(device)}; got {t.device}")
    if finite and t.is_floating_point() and t.numel() and not _all_finite(t):
        raise ValueError(f"`{name}` must be finite (it holds NaN or infinity)")
    return t


def _all_finite(t: "torch.Tensor") -> bool:
    # One reduction when the sum is finite (no temporary as large as ``t``); the element-wise check only when
    # it is not (a NaN or infinity, or a sum that overflows). Under no_grad: on a tensor that requires grad
    # the check would otherwise record a graph (and a saved-tensor hook would count it as an activation).
    with torch.no_grad():
        return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


def check_like(b: "torch.Tensor", a: "torch.Tensor", name_b: str, name_a: str) -> None:
    """``b`` matches ``a`` in shape, dtype and device; the messages name ``b`` and ``a`` in backquotes."""
    if b.shape != a.shape:
        raise ValueError(f"`{name_b}` must have the shape of `{name_a}`, {tuple(a.shape)}; got {tuple(b.shape)}")
    if b.dtype != a.dtype:
        raise TypeError(f"`{name_b}` must have the dtype of `{name_a}`, {a.dtype}; got {b.dtype}")
    if b.device != a.device:
        raise ValueError(f"`{name_b}` must be on the device of `{name_a}`, {a.device}; got {b.device}")


def check_same_device(**tensors: "torch.Tensor") -> "torch.device":
    """Every tensor on one device; returns it. The message lists each argument's device."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"`{name}` on {dev}" for name, dev in devices.items())
        raise ValueError(f"the tensors must be on one device; got {listed}")
    return next(iter(devices.values()))


def check_reduction(reduction: Any, name: str = "reduction") -> str:
    """``reduction`` must be ``"mean"``, ``"sum"`` or ``"none"``, as in :mod:`torch.nn.functional`.

    Examples
    --------
    >>> from numtk.torch._common import check_reduction
    >>> check_reduction("sum")
    'sum'
    >>> check_reduction("avg")
    Traceback (most recent call last):
        ...
    ValueError: `reduction` must be one of 'mean', 'sum', 'none'; got 'avg'
    """
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"`{name}` must be one of 'mean', 'sum', 'none'; got {reduction!r}")
    return reduction


def check_callable(fn: Any, name: str, *, optional: bool = False) -> Any:
    """``fn`` must be callable (an nn.Module or a function), or None where ``optional``; returns it.

    Examples
    --------
    >>> from numtk.torch._common import check_callable
    >>> check_callable(abs, "model") is abs
    True
    >>> check_callable(3, "model")
    Traceback (most recent call last):
        ...
    TypeError: `model` must be callable (an nn.Module or a function); got int
    """
    if fn is None and optional:
        return None
    if not callable(fn):
        raise TypeError(f"`{name}` must be callable (an nn.Module or a function){' or None' if optional else ''}; "
                        f"got {type(fn).__name__}")
    return fn


def reduce_loss(loss: "torch.Tensor", reduction: str) -> "torch.Tensor":
    """Per-element losses reduced as ``reduction`` says (checked): their mean, their sum, or unchanged."""
    reduction = check_reduction(reduction)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[int]:
    """Run the block with torch's intra-op threads set to ``n`` (None: unchanged); restores the count after.

    Used by the demonstrations (one thread, so that their timings are comparable from run to run) and by
    ``bench/`` (each contestant at the same thread count). Yields the count in force inside the block.

    Examples
    --------
    >>> from numtk.torch._common import torch_threads
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1) as n:
    ...     (n, torch.get_num_threads())
    (1, 1)
    >>> torch.get_num_threads() == before
    True
    """
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(int(n))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def numpy_rng(rng: Any = None, *, name: str = "rng") -> np.random.Generator:
    """The ``rng`` keyword of the bridge's demonstrations as a :class:`numpy.random.Generator`.

    None, an int and a NumPy generator as :func:`numtk._lib.normalize_rng` takes them (a NumPy generator passes
    through unchanged, an int seeds one); a :class:`torch.Generator` gives the seed of a fresh one (one draw
    from it, on its device), so every ``rng`` the bridge accepts drives a demonstration's NumPy and torch draws.

    Examples
    --------
    >>> from numtk.torch._common import numpy_rng
    >>> int(numpy_rng(3).integers(100)) == int(numpy_rng(3).integers(100))
    True
    >>> a = numpy_rng(torch.Generator().manual_seed(0)).integers(100)
    >>> b = numpy_rng(torch.Generator().manual_seed(0)).integers(100)
    >>> bool(a == b)
    True
    """
    if isinstance(rng, torch.Generator):
        seed = torch.randint(0, 2**62, (1,), generator=rng, device=rng.device)
        return np.random.default_rng(int(seed))
    try:
        return normalize_rng(rng, name=name)
    except TypeError:
        raise TypeError(f"`{name}` must be None, an int, a numpy.random.Generator or a torch.Generator; "
                        f"got {type(rng).__name__}") from None
