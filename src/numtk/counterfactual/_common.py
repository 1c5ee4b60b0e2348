"""Shared input handling of numtk.counterfactual: the classifier, the threshold, immutables, bounds.

Every public function of the area normalises its inputs here, so that a score ``s(x) = w @ x + b``
with the target class on the positive side and one threshold ``tau`` is all the solvers see.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from numtk._lib._validation import as_array, check_finite, check_options, check_real
from numtk._lib._warnings import NumtkWarning

__all__ = [
    "InfeasibleRecourseError",
    "linear_score",
    "threshold",
    "mutable_mask",
    "output_bounds",
    "as_points",
    "coefficients",
    "mutable_bounds",
    "row_norms",
    "check_solver",
    "check_solver_options",
    "check_magnitude",
    "scores_and_deficits",
    "check_finite_result",
    "MAX_COUNT",
    "MAX_DISTORTION",
]

# Iteration limits and other counts are capped here (the compiled kernels count in C ints).
MAX_COUNT = 2**31 - 1
# The largest distortion bound K: above it, 1/K - 1 rounds to -1 and the lower singular-value
# bound 1/K is lost to rounding (1/K = 1e-8 keeps it to about 1e-8 relative).
MAX_DISTORTION = 1e8
# Inputs whose entries (or margin deficits) exceed this cannot be fitted by the solvers without
# squares overflowing float64 (2**500 ~ 3.3e150; its square is far below the float64 maximum).
_HUGE = 2.0**500


class InfeasibleRecourseError(ValueError):
    """No counterfactual satisfies the validity constraint within ``immutable`` and ``bounds``.

    A :class:`ValueError`; ``rows`` (when set) holds the positions of the group members whose best
    reachable score stays below the threshold.
    """

    def __init__(self, message: str, rows: np.ndarray | None = None) -> None:
        super().__init__(message)
        self.rows = rows


def as_points(X: Any, name: str = "X", *, min_rows: int = 1, n_features: int | None = None,
              source: str = "the classifier") -> np.ndarray:
    """A finite 2-D float64 array with at least ``min_rows`` rows (and ``n_features`` columns).

    ``source`` names where ``n_features`` comes from (e.g. "`w`"), for the message of a mismatch.
    """
    arr = as_array(X, name, ndim=2, kinds="biuf")
    arr = np.asarray(arr, dtype=np.float64)
    if arr.shape[0] < min_rows:
        raise ValueError(f"`{name}` must have at least {min_rows} row(s); got shape {arr.shape}")
    if arr.shape[1] < 1:
        raise ValueError(f"`{name}` must have at least one column (feature); got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"`{name}` has {arr.shape[1]} features; {source} has {n_features} coefficients")
    check_finite(arr, name)
    return arr


def coefficients(w: Any, b: Any, n_features: int | None = None, *, data: str = "X") -> tuple[np.ndarray, float]:
    """``w`` as a finite float64 vector (a (1, d) ``coef_`` is accepted) and ``b`` as a real number.

    With ``n_features``, ``w`` must have that many coefficients (``data`` names the array they come from).
    """
    w = as_array(w, "w", ndim=None, kinds="biuf")
    if w.ndim == 2 and w.shape[0] == 1:  # a scikit-learn coef_ of a binary model
        w = w[0]
    if w.ndim != 1:
        raise ValueError(f"`w` must be 1-D of length n_features (or a (1, n_features) coef_); "
                         f"got shape {w.shape}")
    if n_features is not None and w.shape[0] != n_features:
        raise ValueError(f"`w` has {w.shape[0]} coefficients but `{data}` has {n_features} features")
    w = np.asarray(w, dtype=np.float64)
    if not np.all(np.isfinite(w)):
        raise ValueError("`w` must be finite (no NaN or inf)")
    bb = as_array(b, "b", ndim=None, kinds="iuf")
    if bb.size != 1:
        raise ValueError(f"`b` must be a scalar (or an array of one element); got shape {bb.shape}")
    return w, check_real(bb.reshape(-1)[0].item(), "b")


def linear_score(classifier: Any, target: Any = None, *, name: str = "classifier"):
    """Return ``(w, b, target)`` with the target class on the side ``w @ x + b >= tau``.

    ``classifier`` is a fitted binary scikit-learn linear model (``coef_``, ``intercept_``,
    ``classes_``) or a pair ``(w, b)``. For a model the score is that of ``classes_[1]``, so a target
    equal to ``classes_[0]`` flips the signs; ``target=None`` means ``classes_[1]`` (1 for a pair).
    """
    if hasattr(classifier, "coef_"):
        coef = np.asarray(classifier.coef_, dtype=np.float64)
        if coef.ndim == 2 and coef.shape[0] != 1:
            raise ValueError(f"`{name}` must be a binary linear model; its coef_ has {coef.shape[0]} rows "
                             "(multiclass models are not supported)")
        w = coef.reshape(-1).copy()
        b = float(np.ravel(np.asarray(getattr(classifier, "intercept_", 0.0), dtype=np.float64))[0]
                  if np.size(getattr(classifier, "intercept_", 0.0)) else 0.0)
        classes = getattr(classifier, "classes_", None)
        if classes is not None:
            classes = list(np.asarray(classes).tolist())
            if len(classes) != 2:
                raise ValueError(f"`{name}` must be a binary classifier; it has {len(classes)} classes")
            if target is None:
                target = classes[1]
            try:
                known = any(bool(target == c) for c in classes)
            except (ValueError, TypeError):  # an array or an object without a scalar ==
                known = False
            if not known:
                raise ValueError(f"`target` must be one of the classifier's classes {classes}; got {target!r}")
            sign = 1.0 if target == classes[1] else -1.0
        else:
            target, sign = _pair_target(target)
    elif isinstance(classifier, (tuple, list)) and len(classifier) == 2:
        w, b = coefficients(*classifier)
        target, sign = _pair_target(target)
    else:
        raise TypeError(f"`{name}` must be a fitted binary linear model (with coef_ and intercept_) or a "
                        f"pair (w, b); got {type(classifier).__name__}")
    if w.size == 0:
        raise ValueError(f"`{name}` has no coefficients")
    if not (np.all(np.isfinite(w)) and np.isfinite(b)):
        raise ValueError(f"`{name}` has non-finite coefficients or intercept")
    return sign * w, sign * float(b), target


def _pair_target(target):
    if target is None:
        return 1, 1.0
    if isinstance(target, (bool, np.bool_)):
        return (1, 1.0) if target else (0, -1.0)
    if isinstance(target, numbers.Real) and not isinstance(target, complex) and target in (0, 1):
        return (1, 1.0) if target == 1 else (0, -1.0)
    shown = repr(target) if not isinstance(target, np.ndarray) else f"an array of shape {target.shape}"
    raise ValueError(f"`target` must be 0 or 1 for a (w, b) pair; got {shown[:80]}")


def threshold(confidence: Any, margin: Any = None, *, name: str = "confidence") -> float:
    """The score threshold tau: ``margin`` if given, else ``log(confidence / (1 - confidence))``.

    ``confidence`` (named ``name`` in messages) is validated even when ``margin`` replaces it;
    ``None`` is accepted for it only together with a ``margin``.
    """
    if margin is None or confidence is not None:
        alpha = check_real(confidence, name, low=0.0, high=1.0, low_open=True, high_open=True)
    if margin is not None:
        return check_real(margin, "margin")
    return float(np.log(alpha) - np.log1p(-alpha))


def mutable_mask(immutable: Any, n_features: int, feature_names: Any = None) -> np.ndarray:
    """Boolean mask of the mutable features from ``immutable`` (indices, names or a boolean mask)."""
    mask = np.ones(n_features, dtype=bool)
    if immutable is None:
        return mask
    if isinstance(immutable, str):
        immutable = [immutable]
    try:
        imm = np.asarray(immutable)
    except (ValueError, TypeError) as e:
        raise TypeError(f"`immutable` must be a 1-D array of integer indices, feature names or a boolean "
                        f"mask; {e}") from None
    if imm.dtype.kind in "fc" and imm.size:
        raise TypeError(f"`immutable` must hold integer indices, feature names or a boolean mask; "
                        f"got dtype {imm.dtype}")
    if imm.ndim > 1:
        raise ValueError(f"`immutable` must be 1-D (indices, names or a mask); got shape {imm.shape}")
    if imm.size == 0:
        return mask
    if imm.dtype == bool:
        if imm.shape != (n_features,):
            raise ValueError(f"`immutable` as a boolean mask must have shape ({n_features},); got {imm.shape}")
        return ~imm
    if imm.dtype.kind in "US" or imm.dtype == object:
        if feature_names is None:
            raise ValueError("`immutable` holds names but the data has no feature names; pass indices")
        names = list(np.asarray(feature_names).tolist())
        idx = []
        for nm in imm.ravel().tolist():
            if not isinstance(nm, str) or nm not in names:
                raise ValueError(f"`immutable` names an unknown feature {nm!r}")
            idx.append(names.index(nm))
        imm = np.asarray(idx, dtype=np.intp)
    if imm.dtype.kind not in "iu":
        raise TypeError(f"`immutable` must hold integer indices, feature names or a boolean mask; "
                        f"got dtype {imm.dtype}")
    if imm.dtype.kind == "u" and np.any(imm > np.iinfo(np.int64).max):
        raise ValueError(f"`immutable` holds an index outside [0, {n_features})")
    imm = imm.ravel().astype(np.int64)
    if np.any(imm < -n_features) or np.any(imm >= n_features):
        raise ValueError(f"`immutable` holds an index outside [0, {n_features})")
    imm = np.where(imm < 0, imm + n_features, imm)
    mask[imm] = False  # a repeated index (concatenated lists) fixes the same feature once
    return mask


def output_bounds(bounds: Any, n_features: int):
    """``(lo, hi)`` as float64 arrays of shape (n_features,), or ``None`` when ``bounds`` is None.

    Scalars broadcast; ``None`` entries mean unbounded; ``lo > hi`` anywhere is an error.
    """
    if bounds is None:
        return None
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise TypeError("`bounds` must be a pair (lo, hi) of scalars or arrays of length n_features")
    out = []
    for side, default, label in ((bounds[0], -np.inf, "lo"), (bounds[1], np.inf, "hi")):
        if side is None:
            v = np.full(n_features, default)
        else:
            v = np.asarray(as_array(side, f"bounds ({label})", ndim=None, kinds="iuf"), dtype=np.float64)
        if v.ndim == 0:
            v = np.full(n_features, float(v))
        if v.shape != (n_features,):
            raise ValueError(f"`bounds` ({label}) must be a scalar or have shape ({n_features},); got {v.shape}")
        if np.isnan(v).any():
            raise ValueError(f"`bounds` ({label}) must not contain NaN (use -inf/inf for no bound)")
        out.append(v.copy())
    lo, hi = out
    if np.any(np.isposinf(lo)) or np.any(np.isneginf(hi)):
        raise ValueError("`bounds` must not have lo = +inf or hi = -inf (no point lies in such a box)")
    if np.any(lo > hi):
        k = int(np.flatnonzero(lo > hi)[0])
        raise ValueError(f"`bounds` has lo > hi at feature {k} ({lo[k]} > {hi[k]})")
    if np.all(np.isneginf(lo)) and np.all(np.isposinf(hi)):
        return None
    return lo, hi


def mutable_bounds(bounds: Any, X: np.ndarray, mutable: np.ndarray, *, stacklevel: int = 3):
    """:func:`output_bounds` with the bounds of immutable features dropped (they cannot move).

    Warns when the data already violate a bound on an immutable feature. Returns ``(lo, hi)`` or
    ``None`` when nothing mutable is bounded.
    """
    ob = output_bounds(bounds, X.shape[1])
    if ob is None:
        return None
    lo, hi = ob
    imm = ~mutable
    if imm.any():
        bad = imm & ((X.min(0, initial=np.inf) < lo) | (X.max(0, initial=-np.inf) > hi))
        if bad.any():
            warnings.warn("`bounds` on immutable features are ignored; the group violates them at "
                          f"features {np.flatnonzero(bad).tolist()}", NumtkWarning, stacklevel=stacklevel)
        lo = np.where(mutable, lo, -np.inf)
        hi = np.where(mutable, hi, np.inf)
    if np.all(np.isneginf(lo)) and np.all(np.isposinf(hi)):
        return None
    return lo, hi


# --------------------------------------------------------------------------------------------
# overflow-safe arithmetic and shared checks
# --------------------------------------------------------------------------------------------

def row_norms(A: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows of ``A`` without overflow or underflow of the squares.

    Each row is divided by a power of two near its largest magnitude (exact), squared, summed and
    scaled back, like ``hypot``: finite whenever the norm itself is representable.
    """
    if A.shape[0] == 0 or A.shape[1] == 0:
        return np.zeros(A.shape[0])
    amax = np.max(np.abs(A), axis=1)
    _, e = np.frexp(np.where(amax > 0, amax, 1.0))
    scale = np.ldexp(1.0, e)
    S = A / scale[:, None]
    with np.errstate(over="ignore"):
        return np.sqrt(np.einsum("ij,ij->i", S, S)) * scale


def check_solver(solver: Any, name: str = "solver", *, allow_none: bool = False,
                 default: str | None = None) -> str | None:
    """``solver`` must be a string (or None); a name other than ``default``/'native' must be a
    cvxpy solver installed here (checked only when cvxpy is installed: else the ImportError of the
    feature that needs it says how to install it)."""
    if solver is None and allow_none:
        return None
    if not isinstance(solver, str):
        raise TypeError(f"`{name}` must be a cvxpy solver name (str){' or None' if allow_none else ''}; "
                        f"got {type(solver).__name__}")
    up = solver.upper()
    if up == "NATIVE" or (default is not None and up == default.upper()):
        return solver
    from numtk._lib._optional import has_module

    if has_module("cvxpy"):
        from numtk._lib._optional import import_optional

        cp = import_optional("cvxpy", purpose=f"`{name}`={solver!r}")
        try:
            installed = [s.upper() for s in cp.installed_solvers()]
        except Exception:  # a broken optional solver package: leave the check to cvxpy's solve
            return solver
        if up not in installed:
            raise ValueError(f"`{name}` must be 'native' or a cvxpy solver installed here "
                             f"({', '.join(sorted(installed))}); got {solver!r}")
    return solver


def scores_and_deficits(X: np.ndarray, w: np.ndarray, b: float, tau: float, message: str):
    """``s = X @ w + b`` and the deficits ``tau - s``; a ValueError with ``message`` when either overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = X @ w + b
        m = tau - s
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(m))):
        raise ValueError(message)
    return s, m


def check_solver_options(options: Any, name: str = "solver_options") -> dict | None:
    """``options`` must be a dict with string keys, or None."""
    return None if options is None else check_options(options, name)


def check_magnitude(X: np.ndarray, deficits: np.ndarray, *, names: str = "`X`, `w` and `b`") -> None:
    """Refuse data whose entries or margin deficits are too large (above 2**500 ~ 3e150) for the
    solvers: their squared distances and costs would overflow float64."""
    big_x = X.size and float(np.max(np.abs(X))) > _HUGE
    big_m = deficits.size and float(np.max(deficits, initial=0.0)) > _HUGE
    if big_x or big_m:
        what = "entries of `X`" if big_x else "margin deficits tau - (w @ x + b)"
        raise ValueError(f"the {what} exceed 2**500 (~3e150): squared distances and costs would overflow "
                         f"float64; rescale {names} (and `margin`/`confidence`)")


def check_finite_result(names: str, **arrays: Any) -> None:
    """Raise a ValueError naming the inputs when a computed result overflowed."""
    for label, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            raise ValueError(f"the {label} overflow float64 for these inputs; rescale {names}")
