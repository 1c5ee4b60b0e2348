"""LossToBenchmarkLaw: benchmark scores from validation losses, a decreasing sigmoid (spec §5, §2.7).

Reconstructed: CAMEL's own loss-to-benchmark law was not recovered; the forms are the OLMo ladder's step 2
(Bhagia et al. 2024), re-parametrised by floor, ceiling, slope and midpoint.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import least_squares
from scipy.special import expit, ndtri

from numtk._lib import NumtkWarning, Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._estimator import Estimator, check_is_fitted
from numtk._lib._validation import as_array, as_regression_target, check_finite, check_int, check_option, check_real

__all__ = ["LossToBenchmarkLaw"]

_FORMS = ("sigmoid", "log_sigmoid")
_METHODS = ("delta", "bootstrap")
_NAMES = ("floor", "ceiling", "log_slope", "midpoint")
_TOL = 1e-15          # least_squares' ftol, xtol and gtol (just above machine epsilon)
_MAX_NFEV = 2000      # function evaluations per start
_MAX_RESAMPLES = 100_000
_LOGK_MAX = 50.0      # bound on |log k| in the fit
_LOGIT_MAX = 50.0     # bound on |log(u_j / u_0)| when the loss weights are fitted
_ALONE = 0.95         # a start of fitted weights with "one column alone": that column's weight
_WEIGHT_OPTIONS = ("fit",)


def _softmax_weights(logits: np.ndarray) -> np.ndarray:
    """u = softmax((0, logits)): k weights, positive, summing to 1 (u_0's logit fixed at 0)."""
    a = np.concatenate(([0.0], np.asarray(logits, dtype=float)))
    e = np.exp(a - a.max())
    return e / e.sum()


def _weight_columns(Xk: np.ndarray, u: np.ndarray, dx: np.ndarray) -> np.ndarray:
    """d score / d logit_j (n, k-1): the chain rule dx/dlogit_j = u_j (X_j - x), times d score / dx."""
    x = Xk @ u
    return dx[:, None] * u[None, 1:] * (Xk[:, 1:] - x[:, None])


# ------------------------------------------------------------------------------------------------------
# the two curves: values, derivatives w.r.t. (f, c, log k, x0) and w.r.t. the loss x
# ------------------------------------------------------------------------------------------------------
def _softplus(u: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, u)


def _curve(form: str, theta: np.ndarray, x: np.ndarray, *, jac: bool = False):
    """Scores at losses ``x``; with ``jac`` also d/d(f, c, log k, x0) (n, 4) and d/dx (n,)."""
    f, c, logk, x0 = theta
    k = np.exp(logk)
    with np.errstate(over="ignore", invalid="ignore"):
        u = k * (x - x0)
    if form == "sigmoid":
        s = expit(-u)                       # 1 / (1 + exp(u)): 1 at low loss, 0 at high loss
        value = f + (c - f) * s
        if not jac:
            return value
        g = s * expit(u)                    # s (1 - s) without cancellation
        with np.errstate(over="ignore", invalid="ignore"):
            gu = np.where(g == 0.0, 0.0, g * u)
        J = np.empty((x.size, 4))
        J[:, 0] = 1.0 - s
        J[:, 1] = s
        J[:, 2] = -(c - f) * gu
        J[:, 3] = (c - f) * k * g
        return value, J, -(c - f) * k * g
    # 'log_sigmoid': c + (f - c) softplus(u), OLMo's 1 + a softplus(k (x - x0)) with c = 1, a = f - c
    sp = _softplus(u)
    with np.errstate(over="ignore", invalid="ignore"):
        value = c + (f - c) * sp
    if not jac:
        return value
    e = expit(u)
    with np.errstate(over="ignore", invalid="ignore"):
        eu = np.where(e == 0.0, 0.0, e * u)
    J = np.empty((x.size, 4))
    J[:, 0] = sp
    J[:, 1] = 1.0 - sp
    J[:, 2] = (f - c) * eu
    J[:, 3] = -(f - c) * k * e
    return value, J, (f - c) * k * e


def _inverse(form: str, theta: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Losses with those scores, and the mask of scores the curve never takes (NaN there)."""
    f, c, logk, x0 = theta
    k = np.exp(logk)
    out = np.full(s.shape, np.nan)
    if form == "sigmoid":
        ok = (s > f) & (s < c)
        out[ok] = x0 + (np.log(c - s[ok]) - np.log(s[ok] - f)) / k
    else:
        ok = (s < c) & (f < c)
        t = (c - s[ok]) / (c - f)          # softplus(u) = t > 0  <=>  u = log(expm1(t))
        out[ok] = x0 + (t + np.log(-np.expm1(-t))) / k
    with np.errstate(invalid="ignore"):
        bad = ~ok | ~np.isfinite(out)
    out[bad] = np.nan
    return out, bad


# ------------------------------------------------------------------------------------------------------
# the free parameters of a fit: a box in z that maps onto {lo <= f <= c <= hi} (see the class Notes)
# ------------------------------------------------------------------------------------------------------
class _Layout:
    """Maps the least-squares variables z (a box) to theta = (f, c, log k, x0) and back."""

    def __init__(self, form: str, lo: float, hi: float, floor: float | None, ceiling: float | None):
        self.form, self.lo, self.hi, self.floor, self.ceiling = form, lo, hi, floor, ceiling
        self.free = [floor is None, ceiling is None, True, True]
        if floor is None and ceiling is None:
            # sigmoid with a finite lower score bound: (c, s), f = lo + s (c - lo); else (c, d), f = c - d
            self.kind = "cs" if (form == "sigmoid" and np.isfinite(lo)) else "cd"
            self.lb = [lo, 0.0]
            self.ub = [hi, 1.0 if self.kind == "cs" else np.inf]
        elif floor is None:                        # f free below the fixed ceiling
            self.kind = "f"
            self.lb, self.ub = [lo if form == "sigmoid" else -np.inf], [ceiling]
        elif ceiling is None:                      # c free above the fixed floor
            self.kind = "c"
            self.lb, self.ub = [max(floor, lo)], [hi]
        else:
            self.kind = "none"
            self.lb, self.ub = [], []
        # |log k| <= 50: a step in the data drives k up without bound; this keeps k x finite
        self.lb = np.array(self.lb + [-_LOGK_MAX, -np.inf])
        self.ub = np.array(self.ub + [_LOGK_MAX, np.inf])

    def theta(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """theta (4,) and d theta / d z (4, q)."""
        q = z.size
        T = np.zeros((4, q))
        T[2, q - 2] = T[3, q - 1] = 1.0
        if self.kind == "cs":
            c, s = z[0], z[1]
            f = self.lo + s * (c - self.lo)
            T[0, 0], T[0, 1], T[1, 0] = s, c - self.lo, 1.0
        elif self.kind == "cd":
            c, d = z[0], z[1]
            f = c - d
            T[0, 0], T[0, 1], T[1, 0] = 1.0, -1.0, 1.0
        elif self.kind == "f":
            f, c = z[0], self.ceiling
            T[0, 0] = 1.0
        elif self.kind == "c":
            f, c = self.floor, z[0]
            T[1, 0] = 1.0
        else:
            f, c = self.floor, self.ceiling
        return np.array([f, c, z[q - 2], z[q - 1]]), T

    def z(self, f: float, c: float, logk: float, x0: float) -> np.ndarray:
        """The variables of a start (clipped into the box)."""
        if self.kind == "cs":
            c = float(np.clip(c, self.lo, self.hi))
            s = (f - self.lo) / (c - self.lo) if c > self.lo else 0.0
            head = [c, float(np.clip(s, 0.0, 1.0))]
        elif self.kind == "cd":
            head = [c, max(c - f, 0.0)]
        elif self.kind == "f":
            head = [f]
        elif self.kind == "c":
            head = [c]
        else:
            head = []
        z = np.array(head + [logk, x0], dtype=float)
        return np.clip(z, self.lb, self.ub)


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles of x under weights w > 0 (a weight k counts as k repetitions)."""
    order = np.argsort(x, kind="stable")
    xs, cw = x[order], np.cumsum(w[order])
    return xs[np.minimum(np.searchsorted(cw, q * cw[-1], side="left"), xs.size - 1)]


@constraints(form="option", floor="real", ceiling="real", loss_weights=("array1d", "option"),
             score_range="array1d")
class LossToBenchmarkLaw(Estimator):
    r"""Benchmark score from validation loss: a decreasing sigmoid between a floor and a ceiling.

    The law maps a validation loss x (or a weighted sum of several, ``loss_weights``) to a benchmark
    score (an accuracy, a pass rate) that falls from the ceiling c at low loss to the floor f at high loss:

    .. math::

        \text{'sigmoid'}:\quad a(x) = f + \frac{c - f}{1 + e^{k (x - x_0)}}, \qquad
        \text{'log_sigmoid'}:\quad a(x) = c + (f - c)\,\operatorname{softplus}(k (x - x_0)),

    with slope k > 0 and midpoint x0. It is the second step of the CAMEL pipeline (the score of a mixture
    chosen by :func:`~numtk.mixture.optimal_mixture`) and of the OLMo ladder. A scikit-learn regressor:
    every parameter is stored unchanged by the constructor and checked by :meth:`fit`.

    Parameters
    ----------
    form : {'sigmoid', 'log_sigmoid'}, default 'sigmoid'
        The curve. ``'log_sigmoid'`` is OLMo's variant ``1 + a softplus(k (x - x0))`` (with
        ``ceiling=1.0``): it has no lower limit and falls linearly at high loss; there `floor` is
        ``c + a``, the score where ``softplus = 1``, not a limit.
    floor : float, optional
        Hold f at this value (default: fitted). The chance level of a multiple-choice benchmark (0.25 for
        four choices: MMLU, ARC-C, C-Eval), 0 for generated answers (MATH, HumanEval). Strongly recommended
        when few points lie near chance (see Notes).
    ceiling : float, optional
        Hold c at this value (default: fitted), e.g. 1.0 as in OLMo's log-sigmoid.
    loss_weights : array_like of shape (k,) or 'fit', optional
        Non-negative weights u (not all zero) that combine the k columns of ``X`` into the loss the curve
        reads, ``x = X @ u``. None: a single column is used as it is, k > 1 columns are averaged
        (``u = 1/k``). ``'fit'``: learn u (positive, summing to 1) jointly with the curve, for k >= 2
        columns (an open choice of the reconstruction, off by default; see Notes). With
        :func:`~numtk.mixture.optimal_mixture` the k columns are the validation sets of the mixture law, in
        its order.
    score_range : array_like of shape (2,) or None, default (0.0, 1.0)
        Bounds ``[lo, hi]`` of the scores: the fit keeps ``lo <= f <= c <= hi`` (for ``'log_sigmoid'``
        only ``lo <= c <= hi`` and ``f <= c``), and the training scores must lie in it. Scores are fractions
        by default; pass ``(0, 100)`` for percentages, or None for scores without bounds (``f <= c`` only).

    Attributes
    ----------
    floor_, ceiling_, slope_, midpoint_ : float
        The fitted f, c, k and x0.
    coef_ : ndarray of shape (p,)
        The fitted free parameters, in the order of ``param_names_``: ``f, c, log k, x0`` less those held
        by `floor` and `ceiling`, then, with ``loss_weights='fit'`` only, the k - 1 log weight ratios
        :math:`\log(u_j / u_0)`, j = 1, ..., k-1. :meth:`jacobian` differentiates with respect to them.
    param_names_ : list of str
        ``'floor'``, ``'ceiling'``, ``'log_slope'``, ``'midpoint'`` (the free ones), then
        ``'log_weight_ratio_1'``, ..., ``'log_weight_ratio_{k-1}'`` when the weights are fitted.
    loss_weights_ : ndarray of shape (k,)
        The weights that combine the columns of ``X``: the given ones (not rescaled), the average (None),
        or the fitted ones (``'fit'``; summing to 1).
    n_features_in_ : int
        k, the columns of ``X``.
    residual_std_ : float
        :math:`\hat\sigma = \sqrt{\sum_n w_n r_n^2 / (\sum_n w_n - p)}` of the score residuals (frequency
        weights: a weight k counts as k rows); NaN when the weights sum to no more than the free parameters.
        With the default unit weights, the usual :math:`\sqrt{\mathrm{RSS}/(n - p)}`.
    cost_ : float
        Half the weighted sum of squared residuals at the fit.
    success_ : bool
        Whether the best start's least squares reported convergence.
    n_iter_ : int
        Function evaluations of the best start.

    See Also
    --------
    optimal_mixture : the mixture that maximises predicted scores through these laws.
    MixtureLaw : the validation losses of a mixture, the input of this law.

    Notes
    -----
    **Reconstructed.** CAMEL's loss-to-benchmark law could not be recovered (only the abstract of the paper
    was available). This estimator is the OLMo ladder's step 2 [2]_ (``src/scaling/fitting_functions.py``),
    whose sigmoid :math:`a/(1 + e^{-k(x - x_0)}) + b` is the same function as ``'sigmoid'`` with
    :math:`a = f - c`, :math:`b = c` (the OLMo bounds :math:`a \in [-1, 0]`, :math:`b \in [0, 1]` are
    :math:`0 \le f \le c \le 1` when f stays above 0), and whose log-sigmoid
    :math:`1 + a\,\mathrm{softplus}(k(x - x_0))` is ``'log_sigmoid'`` with c = 1, a = f - c. The open
    choices are parameters: the floor and ceiling (fixed or fitted), the loss combination
    (``loss_weights``) and the score bounds (``score_range``).

    Learning the loss weights (``loss_weights='fit'``) is the open choice the CAMEL pipeline leaves
    (:math:`\mathrm{acc}_b = g_b(\sum_i u_{bi} L_i)` with :math:`u_b \ge 0`, :math:`\sum_i u_{bi} = 1`
    learned jointly with :math:`g_b`); it is off by default, since k - 1 more parameters need more runs and
    columns that do not move together. The weights are :math:`u = \mathrm{softmax}(0, w_1, \dots,
    w_{k-1})` (the first logit fixed at 0, so u is identified), :math:`|w_j| \le 50`, fitted by the same
    least squares as the curve; the starts are the nine of the curve (below) for each of k + 1 weight starts: equal
    weights, and each column alone (its weight 0.95, the rest sharing 0.05, where the softmax still has a
    slope). A weight the data drive to 0 is approached, never reached.

    Fit: :func:`scipy.optimize.least_squares` (trust-region reflective) on the weighted residuals
    :math:`\sqrt{w_n}(a(x_n) - y_n)`, over (f, c, log k, x0) less the fixed ones, written as a box: with f
    and c both free and finite bounds, :math:`c \in [lo, hi]` and :math:`f = lo + s(c - lo)`,
    :math:`s \in [0, 1]`; without bounds (and for ``'log_sigmoid'``) :math:`f = c - d`, :math:`d \ge 0`. Nine
    starts: x0 at the weighted quartiles of x, k in {1, 4, 16}/IQR(x), f just below the lowest score, c just
    above the highest (by 1% of the score range); the lowest sum of squares is kept and polished by the
    dogleg box method (which lands exactly on an active bound, such as a floor at 0).

    Saturation (spec pitfall 10): a sigmoid fitted to points far from its transition is ill-posed (the floor
    or ceiling and the midpoint trade off); fix the floor at chance level, and do not read scores beyond the
    fitted ceiling. The curve never exceeds c, and :meth:`inverse` is defined only strictly between f and c.

    Intervals: :meth:`predict_interval` with ``method='delta'`` uses
    :math:`\mathrm{Cov}(\hat\theta) = \hat\sigma^2 (J^\top W J)^{+}` over ``coef_`` (the band of the fitted
    curve, as the OLMo ladder reports it; fitted weights included); ``'bootstrap'`` refits on rows resampled
    with replacement (fitted weights refitted too).

    References
    ----------
    .. [1] J. Li, X. Gu, J. Zhang, "Capacity-Aware Mixture Law Enables Efficient LLM Data Optimization",
       ICML 2026, arXiv:2603.08022.
    .. [2] A. Bhagia et al., "Establishing Task Scaling Laws via Compute-Efficient Model Ladders",
       arXiv:2412.04403 (2024).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.mixture import LossToBenchmarkLaw
    >>> law = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=6.0, midpoint=2.5)
    >>> x = np.linspace(1.5, 3.5, 12)
    >>> fit = LossToBenchmarkLaw(floor=0.25).fit(x, law.predict(x))
    >>> round(fit.ceiling_, 6), round(fit.slope_, 6), round(fit.midpoint_, 6)
    (0.9, 6.0, 2.5)
    >>> float(np.round(fit.inverse(np.array([0.575]))[0], 6))
    2.5
    """

    _estimator_kind = "regressor"

    def __init__(self, form: str = "sigmoid", *, floor: float | None = None, ceiling: float | None = None,
                 loss_weights: ArrayLike | None = None, score_range: ArrayLike | None = (0.0, 1.0)) -> None:
        self.form = form
        self.floor = floor
        self.ceiling = ceiling
        self.loss_weights = loss_weights
        self.score_range = score_range

    # --------------------------------------------------------------------------------------------------
    # validation
    # --------------------------------------------------------------------------------------------------
    def _checked_params(self) -> tuple[str, float, float, float | None, float | None]:
        form = check_option(self.form, "form", _FORMS)
        if self.score_range is None:
            lo, hi = -np.inf, np.inf
        else:
            sr = as_array(self.score_range, "score_range", ndim=1, kinds="iuf").astype(float)
            if sr.shape != (2,):
                raise ValueError(f"`score_range` must be None or (lo, hi); got shape {sr.shape}")
            if not np.isfinite(sr).all() or not sr[0] < sr[1]:
                raise ValueError(f"`score_range` must hold finite lo < hi; got {sr.tolist()}")
            lo, hi = float(sr[0]), float(sr[1])
        floor = ceiling = None
        if self.floor is not None:
            floor = check_real(self.floor, "floor")
            # 'log_sigmoid' bounds only the ceiling: f - c scales a softplus, so f may lie below `score_range`
            if form == "sigmoid" and not lo <= floor < hi:
                raise ValueError(f"`floor` must lie in [{lo}, {hi}) (`score_range`); got {floor}")
        if self.ceiling is not None:
            ceiling = check_real(self.ceiling, "ceiling")
            if not lo < ceiling <= hi:
                raise ValueError(f"`ceiling` must lie in ({lo}, {hi}] (`score_range`); got {ceiling}")
        if floor is not None and ceiling is not None and not floor < ceiling:
            raise ValueError(f"`floor` must be below `ceiling`; got floor={floor}, ceiling={ceiling}")
        return form, lo, hi, floor, ceiling

    @staticmethod
    def _checked_weights(loss_weights: Any, k: int | None, name: str = "loss_weights", *,
                         allow_fit: bool = False) -> np.ndarray | str | None:
        if loss_weights is None:
            return None
        if isinstance(loss_weights, str):
            if not allow_fit:
                raise ValueError(f"`{name}` of a planted law must be the weights themselves (array_like); "
                                 f"got {loss_weights!r} ('fit' learns them in LossToBenchmarkLaw.fit)")
            check_option(loss_weights, name, _WEIGHT_OPTIONS)
            if k is not None and k < 2:
                raise ValueError(f"`{name}`='fit' needs at least two loss columns in `X` to weigh; got {k} "
                                 "(pass loss_weights=None for a single loss)")
            return loss_weights
        u = as_array(loss_weights, name, ndim=1, kinds="iuf").astype(float)
        check_finite(u, name)
        if u.size == 0:
            raise ValueError(f"`{name}` must hold at least one weight")
        if (u < 0).any() or not (u > 0).any():
            raise ValueError(f"`{name}` must be non-negative and not all zero")
        if k is not None and u.size != k:
            raise ValueError(f"`{name}` must have one weight per column of `X` ({k}); got {u.size}")
        return u

    @staticmethod
    def _as_losses(X: Any, name: str = "X") -> np.ndarray:
        """``X`` as a float (n, k) array: a 1-D array is one column."""
        arr = as_array(X, name, kinds="biuf")
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise ValueError(f"`{name}` must be 1-D (losses) or 2-D (n, k) (k losses combined by "
                             f"`loss_weights`); got shape {arr.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            arr = np.asarray(arr, dtype=np.float64)
        check_finite(arr, name)
        if arr.shape[1] == 0:
            raise ValueError(f"`{name}` has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required: it "
                             "must have at least one column of losses")
        return arr

    def _columns(self, X: Any, name: str = "X") -> np.ndarray:
        """``X`` as the (n, k) loss columns this law combines."""
        check_is_fitted(self, "coef_")
        raw_ndim = np.ndim(X) if isinstance(X, np.ndarray) else None
        arr = self._as_losses(X, name)
        if arr.shape[1] != self.n_features_in_:
            hint = (" Reshape your data: a 1-D `X` is one column of losses, this law combines "
                    f"{self.n_features_in_}") if raw_ndim == 1 or arr.shape[1] == 1 else ""
            raise ValueError(f"X has {arr.shape[1]} features, but LossToBenchmarkLaw is expecting "
                             f"{self.n_features_in_} features as input (`{name}` needs one column per loss "
                             f"combined by `loss_weights`).{hint}")
        return arr

    def _combined(self, X: Any, name: str = "X") -> np.ndarray:
        arr = self._columns(X, name)
        with np.errstate(over="ignore", invalid="ignore"):
            x = arr @ self.loss_weights_
        if not np.isfinite(x).all():
            raise ValueError(f"`{name}`: the weighted sum of the losses overflows")
        return x

    # --------------------------------------------------------------------------------------------------
    # fit
    # --------------------------------------------------------------------------------------------------
    @constraints(X=("array1d", "array2d"), y="array1d", sample_weight="array1d")
    def fit(self, X: ArrayLike, y: ArrayLike, *, sample_weight: ArrayLike | None = None) -> "LossToBenchmarkLaw":
        """Fit the curve to losses ``X`` and scores ``y`` by weighted least squares.

        Parameters
        ----------
        X : array_like of shape (n,) or (n, k)
            Validation losses (any finite values); k columns are combined with `loss_weights`.
        y : array_like of shape (n,)
            Benchmark scores, within `score_range`.
        sample_weight : array_like of shape (n,), optional
            Non-negative weights of the rows, not all zero (a weight k counts as k repetitions).

        Returns
        -------
        self : LossToBenchmarkLaw

        Raises
        ------
        ValueError
            Shapes that disagree, non-finite values, scores outside `score_range`, invalid parameters,
            ``loss_weights='fit'`` with a single column of losses.

        Warns
        -----
        NumtkWarning
            Fewer distinct losses (of positive weight) than free parameters + 1: the curve is not identified.
        """
        form, lo, hi, floor, ceiling = self._checked_params()
        Xa = self._as_losses(X, "X")
        n, k = Xa.shape
        if n == 0:
            raise ValueError("`X` must hold at least one row")
        u = self._checked_weights(self.loss_weights, k, allow_fit=True)
        fit_weights = isinstance(u, str)
        if u is None or fit_weights:
            u = np.full(k, 1.0 / k)           # with 'fit': the first start, and the overflow check below
        ya = as_regression_target(y, "LossToBenchmarkLaw", what="one score per row")
        if ya.size != n:
            raise ValueError(f"`X` and `y` must have the same number of rows; got {n} and {ya.size}")
        if ((ya < lo) | (ya > hi)).any():
            raise ValueError(f"`y` (scores) must lie in `score_range` [{lo}, {hi}]; got values in "
                             f"[{ya.min()}, {ya.max()}] (pass score_range=(0, 100) for percentages, or None)")
        if sample_weight is None:
            w = np.ones(n)
        else:
            w = as_array(sample_weight, "sample_weight", kinds="biuf")
            if w.ndim != 1 or w.size != n:
                raise ValueError(f"`sample_weight` must have shape ({n},); got {w.shape}")
            w = np.asarray(w, dtype=np.float64)
            check_finite(w, "sample_weight")
            if (w < 0).any() or not (w > 0).any():
                raise ValueError("`sample_weight` must be non-negative and not all zero")
        with np.errstate(over="ignore", invalid="ignore"):
            x = Xa @ u
        if not np.isfinite(x).all():
            raise ValueError("`X`: the weighted sum of the losses overflows")
        keep = w > 0
        Xk, x, ya, w = Xa[keep], x[keep], ya[keep], w[keep]

        layout = _Layout(form, lo, hi, floor, ceiling)
        p = int(sum(layout.free)) + (k - 1 if fit_weights else 0)
        distinct = (np.unique(Xk, axis=0) if fit_weights else np.unique(x)).shape[0]
        if distinct < p + 1:
            warnings.warn(f"LossToBenchmarkLaw: {distinct} distinct losses for {p} free parameters; "
                          "the curve is not identified (fix `floor` or `ceiling`)", NumtkWarning, stacklevel=2)
        if fit_weights:
            # starts: equal weights, then each column (almost) alone; the curve's starts on each combination
            alone = np.full((k, k), (1.0 - _ALONE) / (k - 1)) + np.eye(k) * (_ALONE - (1.0 - _ALONE) / (k - 1))
            starts = []
            for uu in np.vstack([u[None, :], alone]):
                logits = np.log(uu[1:] / uu[0])
                starts += [np.concatenate([z, logits]) for z in self._starts(form, layout, Xk @ uu, ya, w)]
            theta, logits, res = self._solve(form, layout, x, ya, w, starts, Xk=Xk)
            u = _softmax_weights(logits)
        else:
            theta, logits, res = self._solve(form, layout, x, ya, w, self._starts(form, layout, x, ya, w))
            logits = None
        self._store(form, layout, theta, u, k, logits)
        self.success_ = bool(res.success)
        self.n_iter_ = int(res.nfev)
        self.cost_ = float(res.cost)
        self._set_uncertainty(Xk, ya, w)
        return self

    @staticmethod
    def _starts(form: str, layout: _Layout, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        lo, hi = layout.lo, layout.hi
        ymin, ymax = float(y.min()), float(y.max())
        step = 0.01 * ((hi - lo) if np.isfinite(hi - lo) else max(ymax - ymin, 1e-12))
        c0 = layout.ceiling if layout.ceiling is not None else min(hi, ymax + step)
        f0 = layout.floor if layout.floor is not None else max(lo, ymin - step)
        if form == "sigmoid" and layout.ceiling is None and c0 <= f0:
            c0 = min(hi, f0 + step)
        q25, q50, q75 = _weighted_quantile(x, w, np.array([0.25, 0.5, 0.75]))
        iqr = q75 - q25
        if not iqr > 0:
            iqr = 0.5 * (x.max() - x.min())
        if not iqr > 0:
            iqr = 1.0
        starts = []
        for mid in (q25, q50, q75):
            for kk in (1.0, 4.0, 16.0):
                slope = kk / iqr
                f = f0
                if form == "log_sigmoid" and layout.floor is None:
                    # the curve reaches the lowest score at the largest loss
                    reach = float(_softplus(np.array(slope * (x.max() - mid))))
                    f = c0 - max(c0 - ymin, step) / max(reach, 1e-3)
                starts.append(layout.z(f, c0, float(np.log(slope)), float(mid)))
        return starts

    @staticmethod
    def _solve(form: str, layout: _Layout, x, y, w, starts, Xk=None):
        """Best least squares over ``starts``: (theta, logits, result). With the loss columns ``Xk`` the
        weights are fitted too, z = (layout's variables, k - 1 logits), and ``x`` is ``Xk @ softmax``."""
        sw = np.sqrt(w / w.mean())
        q = layout.lb.size
        lb, ub = layout.lb, layout.ub
        if Xk is not None:
            m = Xk.shape[1] - 1
            lb, ub = np.r_[lb, np.full(m, -_LOGIT_MAX)], np.r_[ub, np.full(m, _LOGIT_MAX)]

        def combined(z):
            return x if Xk is None else Xk @ _softmax_weights(z[q:])

        def resid(z):
            theta, _ = layout.theta(z[:q])
            return sw * (_curve(form, theta, combined(z)) - y)

        def jac(z):
            theta, T = layout.theta(z[:q])
            _, J, dx = _curve(form, theta, combined(z), jac=True)
            Jz = J @ T
            if Xk is not None:
                Jz = np.hstack([Jz, _weight_columns(Xk, _softmax_weights(z[q:]), dx)])
            return sw[:, None] * Jz

        best = None
        for z0 in starts:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                res = least_squares(resid, np.clip(z0, lb, ub), jac=jac, bounds=(lb, ub), method="trf",
                                    ftol=_TOL, xtol=_TOL, gtol=_TOL, max_nfev=_MAX_NFEV)
            if np.isfinite(res.cost) and (best is None or res.cost < best.cost):
                best = res
        if best is None:  # pragma: no cover - every start diverged
            raise ValueError("`X`, `y`: no start of the least squares reached a finite fit")
        # polish: trust-region reflective only approaches an active bound (a floor at 0) geometrically;
        # the dogleg box method fixes active variables and lands on it
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            polish = least_squares(resid, best.x, jac=jac, bounds=(lb, ub), method="dogbox",
                                   ftol=_TOL, xtol=_TOL, gtol=_TOL, max_nfev=_MAX_NFEV)
        if np.isfinite(polish.cost) and polish.cost <= best.cost:
            polish.nfev += best.nfev
            best = polish
        theta, _ = layout.theta(best.x[:q])
        return theta, best.x[q:].copy(), best

    def _store(self, form: str, layout: _Layout, theta: np.ndarray, u: np.ndarray, k: int,
               logits: np.ndarray | None = None) -> None:
        self._form = form
        self._theta = np.array(theta, dtype=float)
        self._free = np.array(layout.free)
        self._logits = None if logits is None else np.array(logits, dtype=float)
        self.floor_, self.ceiling_ = float(theta[0]), float(theta[1])
        self.slope_, self.midpoint_ = float(np.exp(theta[2])), float(theta[3])
        self.param_names_ = [n for n, free in zip(_NAMES, layout.free) if free]
        self.coef_ = self._theta[self._free].copy()
        if self._logits is not None:
            self.param_names_ += [f"log_weight_ratio_{j}" for j in range(1, int(k))]
            self.coef_ = np.concatenate([self.coef_, self._logits])
        self.loss_weights_ = np.array(u, dtype=float)
        self.n_features_in_ = int(k)

    def _value_and_jacobian(self, Xk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scores at the loss columns ``Xk`` and their derivatives w.r.t. ``coef_`` (n, p)."""
        value, J, dx = _curve(self._form, self._theta, Xk @ self.loss_weights_, jac=True)
        J = J[:, self._free]
        if self._logits is not None:
            J = np.hstack([J, _weight_columns(Xk, self.loss_weights_, dx)])
        return value, J

    def _set_uncertainty(self, Xk: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        self._data = (Xk.copy(), y.copy(), w.copy())
        value, J = self._value_and_jacobian(Xk)
        r = value - y
        p = int(self.coef_.size)
        n = float(np.sum(w))          # frequency weights: a weight k counts as k rows
        self.residual_std_ = float(np.sqrt(np.sum(w * r * r) / (n - p))) if n > p else float("nan")
        self._cov = (self.residual_std_ ** 2) * np.linalg.pinv((J * w[:, None]).T @ J)

    # --------------------------------------------------------------------------------------------------
    # evaluation
    # --------------------------------------------------------------------------------------------------
    @constraints(X=("array1d", "array2d"))
    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predicted scores at the losses ``X``.

        Parameters
        ----------
        X : array_like of shape (n,) or (n, k)
            Losses (k columns combined with ``loss_weights_``).

        Returns
        -------
        scores : ndarray of shape (n,)
        """
        x = self._combined(X)
        value = _curve(self._form, self._theta, x)
        if not np.isfinite(value).all():
            raise ValueError("`X`: losses this large overflow the log-sigmoid")
        return value

    @constraints(X=("array1d", "array2d"))
    def derivative(self, X: ArrayLike) -> np.ndarray:
        """The slope d score / d x of the curve at the combined losses x of ``X`` (negative or zero).

        The derivative with respect to column j of ``X`` is this times ``loss_weights_[j]`` (the chain rule
        :func:`~numtk.mixture.optimal_mixture` uses).

        Parameters
        ----------
        X : array_like of shape (n,) or (n, k)

        Returns
        -------
        slope : ndarray of shape (n,)
        """
        x = self._combined(X)
        _, _, dx = _curve(self._form, self._theta, x, jac=True)
        return dx

    @constraints(X=("array1d", "array2d"))
    def jacobian(self, X: ArrayLike) -> np.ndarray:
        r"""Derivatives of the predictions with respect to ``coef_``.

        ``coef_`` is the free f, c, log k, x0, followed, with ``loss_weights='fit'``, by the k - 1 log weight
        ratios :math:`\log(u_j / u_0)`, j = 1..k-1 (see ``param_names_``).

        Parameters
        ----------
        X : array_like of shape (n,) or (n, k)

        Returns
        -------
        J : ndarray of shape (n, p)
            ``J[i, j] = d predict(X)[i] / d coef_[j]``.
        """
        Xk = self._columns(X)
        self._combined(Xk)                    # refuses a weighted sum that overflows
        value, J = self._value_and_jacobian(Xk)
        if not (np.isfinite(value).all() and np.isfinite(J).all()):
            raise ValueError("`X`: losses this large overflow the log-sigmoid")
        return J

    @constraints(scores="array1d")
    def inverse(self, scores: ArrayLike) -> np.ndarray:
        """The combined loss at which the curve takes each score.

        ``x0 + log((c - s) / (s - f)) / k`` for the sigmoid, for s strictly between the floor and the
        ceiling; ``x0 + log(expm1((c - s)/(c - f))) / k`` for the log-sigmoid, for s below the ceiling.

        Parameters
        ----------
        scores : array_like of shape (n,)

        Returns
        -------
        losses : ndarray of shape (n,)
            NaN where the curve never takes the score.

        Warns
        -----
        NumtkWarning
            When some score lies outside the range of the curve (those entries are NaN).
        """
        check_is_fitted(self, "coef_")
        s = as_array(scores, "scores", kinds="biuf")
        if s.ndim > 1:
            raise ValueError(f"`scores` must be a number or 1-D; got shape {s.shape}")
        s = np.atleast_1d(np.asarray(s, dtype=np.float64))
        check_finite(s, "scores")
        out, bad = _inverse(self._form, self._theta, s)
        if bad.any():
            lim = (f"({self.floor_:.6g}, {self.ceiling_:.6g})" if self._form == "sigmoid"
                   else f"(-inf, {self.ceiling_:.6g})")
            warnings.warn(f"LossToBenchmarkLaw.inverse: {int(bad.sum())} score(s) outside {lim}, the range "
                          "of the curve; their losses are NaN", NumtkWarning, stacklevel=2)
        return out

    @constraints(X=("array1d", "array2d"), y="array1d", sample_weight="array1d")
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        r"""The coefficient of determination :math:`R^2` of the predicted scores on ``(X, y)``.

        :math:`1 - \sum w (y - \hat y)^2 / \sum w (y - \bar y)^2` (weighted mean :math:`\bar y`), as
        :func:`sklearn.metrics.r2_score`.

        Parameters
        ----------
        X : array_like of shape (n,) or (n, k)
        y : array_like of shape (n,)
        sample_weight : array_like of shape (n,), optional
            Non-negative weights, not all zero.

        Returns
        -------
        score : float
        """
        pred = self.predict(X)
        ya = as_array(y, "y", kinds="biuf")
        if ya.ndim == 2 and ya.shape[1] == 1:
            ya = ya[:, 0]
        ya = np.asarray(ya, dtype=np.float64)
        check_finite(ya, "y")
        if ya.shape != pred.shape:
            raise ValueError(f"`X` and `y` must have the same number of rows; got {pred.size} and {ya.shape}")
        if sample_weight is None:
            w = np.ones_like(pred)
        else:
            w = np.asarray(as_array(sample_weight, "sample_weight", kinds="biuf"), dtype=np.float64)
            check_finite(w, "sample_weight")
            if w.shape != pred.shape or (w < 0).any() or not (w > 0).any():
                raise ValueError(f"`sample_weight` must be non-negative, not all zero, of shape {pred.shape}")
        ybar = np.sum(w * ya) / np.sum(w)
        ss_res = np.sum(w * (ya - pred) ** 2)
        ss_tot = np.sum(w * (ya - ybar) ** 2)
        if ss_tot == 0:
            return 1.0 if ss_res == 0 else 0.0
        return float(1.0 - ss_res / ss_tot)

    # --------------------------------------------------------------------------------------------------
    # uncertainty
    # --------------------------------------------------------------------------------------------------
    @constraints(n_resamples="count", rng="rng")
    def bootstrap(self, n_resamples: int = 200, *, rng: Any = None) -> list["LossToBenchmarkLaw"]:
        """Refits of the law on rows resampled with replacement (a case bootstrap).

        Each refit starts from the fitted parameters (one start), with the same `floor`, `ceiling` and
        weights; the resampled rows keep their sample weights.

        Parameters
        ----------
        n_resamples : int, default 200
            Number of refits.
        rng : {None, int, numpy.random.Generator}, optional
            Draws the resamples.

        Returns
        -------
        laws : list of LossToBenchmarkLaw
            Fitted laws (attributes as after :meth:`fit`).

        Raises
        ------
        ValueError
            For a law made by :meth:`from_params` (it has no data).
        """
        check_is_fitted(self, "coef_")
        n_resamples = check_int(n_resamples, "n_resamples", minimum=1, maximum=_MAX_RESAMPLES)
        gen = normalize_rng(rng)
        if getattr(self, "_data", None) is None:
            raise ValueError("`n_resamples`: a law made by from_params has no data to resample")
        Xk, y, w = self._data
        form, lo, hi, floor, ceiling = self._checked_params()
        layout = _Layout(form, lo, hi, floor, ceiling)
        # the fitted parameters (and fitted weights' logits) as the one start, clipped into the box
        fit_weights = self._logits is not None
        start = layout.z(*self._theta)
        if fit_weights:
            start = np.concatenate([start, self._logits])
        laws = []
        n = y.size
        for _ in range(n_resamples):
            idx = gen.integers(0, n, n)
            Xb, yb, wb = Xk[idx], y[idx], w[idx]
            theta, logits, res = self._solve(form, layout, Xb @ self.loss_weights_, yb, wb, [start],
                                             Xk=Xb if fit_weights else None)
            u = _softmax_weights(logits) if fit_weights else self.loss_weights_
            law = LossToBenchmarkLaw(**self.get_params())
            law._store(form, layout, theta, u, self.n_features_in_, logits if fit_weights else None)
            law.success_, law.n_iter_, law.cost_ = bool(res.success), int(res.nfev), float(res.cost)
            law._set_uncertainty(Xb, yb, wb)
            laws.append(law)
        return laws

    @constraints(X=("array1d", "array2d"), level="prob_open", method="option", n_resamples="count", rng="rng")
    def predict_interval(self, X: ArrayLike, *, level: float = 0.95, method: str = "delta",
                         n_resamples: int = 200, rng: Any = None) -> Result:
        r"""Predicted scores with an interval for the fitted curve at ``X``.

        Parameters
        ----------
        X : array_like of shape (n,) or (n, k)
        level : float, default 0.95
            Coverage of the two-sided interval, in (0, 1).
        method : {'delta', 'bootstrap'}, default 'delta'
            ``'delta'``: prediction :math:`\pm z_{(1+level)/2}\,\mathrm{std}` with
            :math:`\mathrm{std}^2 = J\,\mathrm{Cov}(\hat\theta) J^\top` (see the class Notes).
            ``'bootstrap'``: the percentiles of `n_resamples` refits
            (:meth:`bootstrap`), and their standard deviation.
        n_resamples : int, default 200
            Refits of the bootstrap (ignored by the delta method).
        rng : {None, int, numpy.random.Generator}, optional
            Draws the bootstrap resamples.

        Returns
        -------
        Result
            prediction : ndarray of shape (n,)
                :meth:`predict` at ``X``.
            lower, upper : ndarray of shape (n,)
                The interval.
            std : ndarray of shape (n,)
                Standard error of the prediction (NaN for the delta method when ``residual_std_`` is).
            level : float
            method : str

        Raises
        ------
        ValueError
            For a law made by :meth:`from_params` (it has no data), or invalid arguments.
        """
        check_is_fitted(self, "coef_")
        level = check_real(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
        method = check_option(method, "method", _METHODS)
        n_resamples = check_int(n_resamples, "n_resamples", minimum=1, maximum=_MAX_RESAMPLES)
        gen = normalize_rng(rng)
        pred = self.predict(X)
        if getattr(self, "_data", None) is None:
            raise ValueError(f"`method`={method!r} needs the fitted data; this law was made by from_params")
        z = float(ndtri(0.5 + 0.5 * level))
        if method == "delta":
            J = self.jacobian(X)
            std = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", J, self._cov, J), 0.0))
            lower, upper = pred - z * std, pred + z * std
        else:
            Xk = self._columns(X)       # each refit combines the columns with its own weights
            draws = np.array([_curve(law._form, law._theta, Xk @ law.loss_weights_)
                              for law in self.bootstrap(n_resamples, rng=gen)])
            std = draws.std(axis=0, ddof=1) if n_resamples > 1 else np.zeros_like(pred)
            lower = np.quantile(draws, 0.5 - 0.5 * level, axis=0)
            upper = np.quantile(draws, 0.5 + 0.5 * level, axis=0)
        return Result(prediction=pred, lower=lower, upper=upper, std=std, level=level, method=method)

    # --------------------------------------------------------------------------------------------------
    # planted laws
    # --------------------------------------------------------------------------------------------------
    @classmethod
    @constraints(form="option", floor="real", ceiling="real", slope="real>0", midpoint="real",
                 loss_weights="array1d", score_range="array1d")
    def from_params(cls, form: str, *, floor: float, ceiling: float, slope: float, midpoint: float,
                    loss_weights: ArrayLike | None = None,
                    score_range: ArrayLike | None = (0.0, 1.0)) -> "LossToBenchmarkLaw":
        """A law with the given parameters, ready to predict (a planted law; nothing is fitted).

        Parameters
        ----------
        form : {'sigmoid', 'log_sigmoid'}
        floor, ceiling : float
            f < c, within `score_range` (for ``'log_sigmoid'`` only c is: f may lie below it).
        slope : float
            k > 0.
        midpoint : float
            x0.
        loss_weights : array_like of shape (k,), optional
            As for the constructor (None: one loss), but the weights themselves: ``'fit'`` is refused.
        score_range : array_like of shape (2,) or None, default (0.0, 1.0)
            As for the constructor.

        Returns
        -------
        law : LossToBenchmarkLaw
            ``coef_`` holds all four parameters (f, c, log k, x0); the law has no data, so
            :meth:`predict_interval` and :meth:`bootstrap` refuse it.

        Examples
        --------
        >>> from numtk.mixture import LossToBenchmarkLaw
        >>> law = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.75, slope=2.0, midpoint=3.0)
        >>> law.predict([3.0]).tolist()
        [0.5]
        """
        law = cls(form, loss_weights=loss_weights, score_range=score_range)
        form, lo, hi, _, _ = law._checked_params()
        floor = check_real(floor, "floor")
        ceiling = check_real(ceiling, "ceiling")
        slope = check_real(slope, "slope", low=0.0, low_open=True)
        midpoint = check_real(midpoint, "midpoint")
        if not lo <= ceiling <= hi:
            raise ValueError(f"`ceiling` must lie in `score_range` [{lo}, {hi}]; got {ceiling}")
        if form == "sigmoid" and not lo <= floor <= hi:
            raise ValueError(f"`floor` must lie in `score_range` [{lo}, {hi}]; got {floor}")
        if not floor < ceiling:
            raise ValueError(f"`floor` must be below `ceiling`; got floor={floor}, ceiling={ceiling}")
        u = cls._checked_weights(loss_weights, None)
        u = np.ones(1) if u is None else u
        layout = _Layout(form, lo, hi, None, None)
        layout.free = [True, True, True, True]
        law._store(form, layout, np.array([floor, ceiling, np.log(slope), midpoint]), u, u.size)
        law.residual_std_ = float("nan")
        law.success_, law.n_iter_, law.cost_ = True, 0, float("nan")
        law._data = None
        return law
