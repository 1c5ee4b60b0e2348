"""Argument checks shared by every area. Each error names the parameter, what was expected and what
was received, and is raised before any compiled code runs."""

from __future__ import annotations

import numbers
import operator
from typing import Any, Iterable

import numpy as np

__all__ = [
    "as_regression_target",
    "check_option",
    "check_bool",
    "check_int",
    "check_real",
    "as_1d_numeric",
    "as_array",
    "check_same_length",
    "check_finite",
    "nan_mask",
    "available_memory",
    "check_size",
    "check_callback",
    "per_coordinate",
    "check_options",
    "as_points",
    "C_INT_MAX",
    "NAN_POLICIES",
]

NAN_POLICIES = ("propagate", "raise", "omit")

C_INT_MAX = 2**31 - 1  # counts handed to compiled code or third-party estimators as C ints


def check_option(value: Any, name: str, options: Iterable[str]) -> str:
    """``value`` must be one of the strings ``options``."""
    options = tuple(options)
    if not isinstance(value, str) or value not in options:
        listed = ", ".join(repr(o) for o in options)
        raise ValueError(f"`{name}` must be one of {listed}; got {value!r}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """``value`` must be a bool (Python or NumPy); returns a Python bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be a bool; got {type(value).__name__}")
    return bool(value)


def check_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` must be an integer (not bool) within [minimum, maximum]; returns a Python int."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be an int; got a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"`{name}` must be an int; got {type(value).__name__}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}; got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}` must be <= {maximum}; got {value}")
    return value


def check_real(value: Any, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """``value`` must be a finite real number within the given interval; returns a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an int (or Fraction) beyond the float range
        raise ValueError(f"`{name}` must be finite; got a number too large for a float") from None
    if not np.isfinite(value):
        raise ValueError(f"`{name}` must be finite; got {value}")
    lo_bad = low is not None and (value <= low if low_open else value < low)
    hi_bad = high is not None and (value >= high if high_open else value > high)
    if lo_bad or hi_bad:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        interval = f"{lb}{'-inf' if low is None else low}, {'inf' if high is None else high}{hb}"
        raise ValueError(f"`{name}` must lie in {interval}; got {value}")
    return value


_NUMERIC_KINDS = "biuf"


def as_array(x: Any, name: str, *, ndim: int | None = None, kinds: str = _NUMERIC_KINDS) -> np.ndarray:
    """Convert ``x`` to an ndarray whose dtype kind is in ``kinds`` (NumPy's kind letters).

    Refuses sparse matrices, masked arrays, object/string/complex dtypes (TypeError) and the wrong
    number of dimensions (ValueError). The result shares memory with ``x`` where possible; byte-swapped
    or unaligned data and float16 are converted to a native type (float16 to float32, exactly);
    extended precision (``np.longdouble``) is kept.
    """
    if hasattr(x, "tocsr") and hasattr(x, "nnz"):
        raise TypeError(f"`{name}` must be a dense array; got a sparse {type(x).__name__} "
                        "(call .toarray() first)")
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"`{name}` must not be a masked array; drop masked entries or fill them "
                        "with NaN and pass nan_policy")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as e:
        raise TypeError(f"`{name}` must be array-like; {e}") from None
    if arr.dtype.kind not in kinds:
        expected = {"b": "boolean", "i": "integer", "u": "unsigned integer", "f": "float"}
        want = ", ".join(expected[k] for k in kinds if k in expected)
        raise TypeError(f"`{name}` must have a numeric ({want}) dtype; got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        hint = " (flatten it with numpy.ravel first)" if ndim == 1 and arr.ndim > 1 else ""
        raise ValueError(f"`{name}` must be {ndim}-D; got an array of shape {arr.shape}{hint}")
    if arr.dtype.kind == "f" and arr.dtype.itemsize < 4:
        arr = arr.astype(np.float32)  # float16: exact in float32
    if not arr.dtype.isnative or not arr.flags.aligned:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def as_1d_numeric(x: Any, name: str) -> np.ndarray:
    """:func:`as_array` with ``ndim=1`` and a boolean, integer or float dtype."""
    return as_array(x, name, ndim=1, kinds=_NUMERIC_KINDS)


def check_same_length(**arrays: np.ndarray) -> int:
    """All arrays must have the same length; returns it. The message lists every length."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"`{k}` has {n}" for k, n in lengths.items())
        raise ValueError(f"{' and '.join(f'`{k}`' for k in lengths)} must have the same length; {listed}")
    return next(iter(lengths.values()), 0)


def check_finite(x: np.ndarray, name: str, *, allow_nan: bool = False) -> None:
    """Raise ValueError if ``x`` holds inf (or NaN unless ``allow_nan``); O(1) extra memory when clean."""
    if x.dtype.kind != "f" or x.size == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(x, dtype=np.float64)
    if np.isfinite(total):
        return
    if np.isinf(x).any():
        raise ValueError(f"`{name}` must be finite; it contains infinite values")
    if not allow_nan and np.isnan(x).any():
        raise ValueError(f"`{name}` must not contain NaN")


def nan_mask(*arrays: np.ndarray) -> np.ndarray | None:
    """Positions where any of the (same-length) arrays is NaN, or None when none is (cheap check)."""
    mask = None
    for a in arrays:
        if a.dtype.kind != "f" or a.size == 0:
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            # No NaN unless the sum is NaN (inf + -inf gives NaN too: then look element-wise).
            if not np.isnan(np.sum(a, dtype=np.float64)):
                continue
        m = np.isnan(a)
        if m.any():
            mask = m if mask is None else (mask | m)
    return mask


def available_memory() -> int:
    """Bytes this process may still allocate: the kernel's MemAvailable (free physical memory when it is
    not reported), capped by a cgroup v2 memory limit (a container's ``memory.max`` less its
    ``memory.current``) and by the address-space limit (``RLIMIT_AS``). 2**40 when none is known."""
    import os
    import resource

    limits = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError):
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
            pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            cap = fh.read().strip()
        if cap != "max":
            with open("/sys/fs/cgroup/memory.current", encoding="ascii") as fh:
                limits.append(max(0, int(cap) - int(fh.read().strip())))
    except (OSError, ValueError):  # no cgroup v2 limit here
        pass
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limits.append(int(soft))
    except (ValueError, OSError):  # pragma: no cover - not POSIX
        pass
    return int(min(limits)) if limits else 1 << 40


def check_size(count: int, bytes_per_item: float, name: str) -> None:
    """Refuse ``count`` items of ``bytes_per_item`` bytes (temporaries included) beyond
    :func:`available_memory`, with a ValueError naming ``name``, before anything is allocated."""
    need = float(count) * float(bytes_per_item)
    avail = available_memory()
    if need > avail:
        raise ValueError(f"`{name}` = {count} needs about {need / 2**30:.3g} GiB, more than the "
                         f"{avail / 2**30:.3g} GiB this process may allocate")


def check_callback(callback: Any, name: str = "callback") -> None:
    """``callback`` must be None or callable (checked whether or not the method calls it)."""
    if callback is not None and not callable(callback):
        raise TypeError(f"`{name}` must be a callable or None; got {type(callback).__name__}")


def check_options(options: Any, name: str = "options") -> dict:
    """A copy of the ``options`` dict (None: empty) whose keys are str."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"`{name}` must be a dict or None; got {type(options).__name__}")
    bad = [k for k in options if not isinstance(k, str)]
    if bad:
        raise TypeError(f"`{name}` keys must be str; got {bad[0]!r}")
    return dict(options)


def per_coordinate(value: Any, d: int, name: str, *, real: bool = True) -> np.ndarray | list:
    """A finite real scalar broadcast to shape ``(d,)``, or a finite real array of that shape (float64).

    Strings and bools are refused (TypeError), as complex and object input are by :func:`as_array`.

    With ``real=False`` the entries are not converted: a scalar (a string counts as one) is repeated into
    a list of ``d`` entries and a sequence must have ``d`` entries (returned as a list); the caller checks
    each entry (a basis name, a degree).
    """
    if not real:
        try:
            scalar = isinstance(value, (str, bytes)) or np.ndim(value) == 0
        except (ValueError, TypeError):  # a ragged sequence: a sequence all the same
            scalar = False
        if scalar:
            return [value] * d
        try:
            values = list(value)
        except TypeError:
            raise TypeError(f"`{name}` must be a scalar or a sequence of {d} entries; "
                            f"got {type(value).__name__}") from None
        if len(values) != d:
            raise ValueError(f"`{name}` must be a scalar or have one entry per coordinate ({d}); "
                             f"got {len(values)} entries")
        return values
    if isinstance(value, (str, bytes, bool, np.bool_)):
        raise TypeError(f"`{name}` must be a real number or an array of shape ({d},); got {type(value).__name__}")
    arr = as_array(value, name).astype(np.float64)
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    if arr.shape != (d,):
        raise ValueError(f"`{name}` must be a scalar or have shape ({d},); got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite")
    return arr


def as_points(X: Any, name: str = "X", *, min_rows: int = 1) -> np.ndarray:
    """A point cloud: a dense numeric 2-D array (rows are samples) with at least ``min_rows`` rows and one
    column, finite in float64; returned as a C-contiguous float64 array (a copy only where needed).

    Refuses what :func:`as_array` refuses (TypeError), the wrong number of dimensions, infinite or NaN
    entries (also integers or long doubles beyond the float64 range) and too few rows or no column
    (ValueError).
    """
    arr = as_array(X, name, ndim=2)
    with np.errstate(over="ignore", invalid="ignore"):  # beyond the float64 range: inf, refused just below
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    check_finite(arr, name)
    if arr.shape[0] < min_rows:
        raise ValueError(f"`{name}` must hold at least {min_rows} sample(s) (rows); got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise ValueError(f"`{name}` must have at least one feature (column); got shape {arr.shape}")
    return arr


def as_regression_target(y: Any, estimator: str, *, what: str = "", stacklevel: int = 3) -> np.ndarray:
    """The target ``y`` of a single-output regressor's ``fit``: 1-D, finite, float64.

    Follows scikit-learn where its estimator checks read the behaviour: ``None`` is refused with its
    wording ("requires y to be passed"), and a column vector is raveled with its DataConversionWarning
    (``stacklevel`` points the warning at the caller of ``fit``). ``what`` is appended to the 1-D message
    ("one score per row").
    """
    if y is None:
        raise ValueError(f"`y` is required: {estimator} requires y to be passed, but the target y is None")
    arr = as_array(y, "y")
    if arr.ndim == 2 and arr.shape[1] == 1:
        import warnings

        from sklearn.exceptions import DataConversionWarning

        warnings.warn("A column-vector y was passed when a 1d array was expected: `y` is raveled to shape "
                      f"({arr.shape[0]},)", DataConversionWarning, stacklevel=stacklevel)
        arr = arr[:, 0]
    if arr.ndim != 1:
        detail = f" ({what})" if what else ""
        raise ValueError(f"`y` must be 1-D{detail}; got an array of shape {arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    check_finite(arr, "y")
    return arr
