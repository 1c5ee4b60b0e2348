"""Groups for group counterfactuals: clusters of the rows of each class (spec section 5).

The paper's protocol (spec section 9, step 4) clusters, for each true label, the rows of that label
into 10 clusters, keeps at most 200 rows per cluster and pads clusters smaller than 20 with jittered
copies; each cluster is then one group, moved to the other label. :func:`make_groups` does the same
with scikit-learn's KMeans by default (KMedoids from scikit-learn-extra on request), subsamples
large clusters at random instead of keeping "the first 200 rows" (the same in distribution, since
the paper's rows are shuffled), and returns any padding rows separately from the real members.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import as_array, available_memory, check_int, check_option
from numtk.counterfactual._common import MAX_COUNT, as_points

__all__ = ["make_groups"]

# Standard deviation of the Gaussian jitter added to padding copies (the official protocol's 0.01,
# in the units of X: the paper's features are z-scored).
_PAD_JITTER = 0.01


def _optional_int(value: Any, name: str, *, minimum: int, maximum: int = MAX_COUNT) -> int | None:
    return None if value is None else check_int(value, name, minimum=minimum, maximum=maximum)


def _clusterer(method: str):
    """A factory ``(n_clusters, seed) -> estimator with fit, labels_, cluster_centers_``."""
    if method == "kmeans":
        from sklearn.cluster import KMeans

        return lambda k, seed: KMeans(n_clusters=k, n_init=10, random_state=seed)
    try:
        from sklearn_extra.cluster import KMedoids
    except ImportError as exc:
        raise ImportError(
            "make_groups(method='kmedoids') needs the optional package scikit-learn-extra "
            "(`pip install scikit-learn-extra`; it may have no wheel for recent Python/NumPy "
            "versions); method='kmeans' needs only scikit-learn") from exc
    return lambda k, seed: KMedoids(n_clusters=k, random_state=seed)


@constraints(X="array2d", y="array1d", n_clusters="count", max_size="int>=1", rng="rng", method="option",
             min_size="int>=1", pad_to="count", labels="array1d")
def make_groups(X: Any, y: Any, n_clusters: int = 10, max_size: int | None = 200, *, rng: Any = None,
                method: str = "kmeans", min_size: int = 1, pad_to: int | None = None,
                labels: Any = None) -> Result:
    """Split the rows of each class into clusters: the groups of a group-counterfactual study.

    For each class value ``l`` (or each value in ``labels``), the rows ``X[y == l]`` are clustered
    with :class:`sklearn.cluster.KMeans` (``n_init=10``, seeded from ``rng``), or with
    ``KMedoids`` of scikit-learn-extra for ``method="kmedoids"``. Every cluster becomes one group:
    the positions of its rows in ``X``, randomly subsampled to ``max_size`` rows with ``rng``.
    Clusters with fewer than ``min_size`` rows are dropped. With ``pad_to``, groups smaller than
    ``pad_to`` get jittered copies of their members (the paper's padding), returned separately in
    ``synthetic``: they are fabricated points, not rows of ``X``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The data (finite), in the space the classifier is linear in (the paper z-scores it).
    y : array_like, shape (n,)
        Class label of each row (any values that compare with ``==``; no NaN).
    n_clusters : int, default 10
        Clusters per class. A class with fewer distinct rows gets one cluster per distinct row.
    max_size : int or None, default 200
        Largest group: bigger clusters are subsampled uniformly without replacement. ``None``
        keeps whole clusters.
    rng : {None, int, numpy.random.Generator}, optional
        Seeds the clustering (one seed drawn per class), the subsampling and the padding. ``None``
        draws fresh OS entropy, an int seeds a new Generator, a Generator is used (and advanced).
    method : {"kmeans", "kmedoids"}, default "kmeans"
        ``"kmedoids"`` (the official protocol's choice) needs the optional package
        scikit-learn-extra; without it an :class:`ImportError` says so.
    min_size : int, default 1
        Clusters with fewer rows are dropped (before padding).
    pad_to : int, optional
        Pad groups with fewer members to this size with copies of randomly chosen members plus
        Gaussian noise of standard deviation 0.01 (the paper uses ``pad_to=20``). Off by default.
    labels : array_like, optional
        The class values to group, in this order (default: the sorted unique values of ``y``);
        each must occur in ``y``.

    Returns
    -------
    res : Result
        With fields

        groups : list of ndarray of intp
            One sorted array of row positions into ``X`` per group; groups of the same class come
            together, classes in the order of ``labels``. Within a class, the groups are disjoint.
        source_label : ndarray, shape (n_groups,)
            The class of each group's rows (the counterfactual target is another class).
        centers : ndarray of float64, shape (n_groups, d)
            Each group's cluster centre (the KMeans centroid, or the medoid, of the whole cluster
            before subsampling).
        synthetic : list of ndarray of float64
            Per group, the padding rows, shape ``(n_pad, d)``; shape ``(0, d)`` when the group was
            not padded (always, without ``pad_to``). The group's point set is
            ``numpy.vstack([X[groups[g]], synthetic[g]])``.

    Raises
    ------
    ImportError
        ``method="kmedoids"`` without scikit-learn-extra installed.

    See Also
    --------
    GroupCounterfactualMap : fits one map per group.

    Notes
    -----
    Clustering uses scikit-learn (imported on first call). A class whose rows are all identical
    forms one group. The official protocol keeps the first 200 rows of an already shuffled split;
    uniform subsampling is the same in distribution.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from numtk.counterfactual import make_groups
    >>> X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    >>> res = make_groups(X, y, n_clusters=3, max_size=40, rng=0)
    >>> res.source_label.tolist()
    [0, 0, 0, 1, 1, 1]
    >>> res.centers.shape
    (6, 4)
    >>> all(len(g) <= 40 and np.all(y[g] == lab) for g, lab in zip(res.groups, res.source_label))
    True

    Without a size cap the groups of a class partition its rows:

    >>> whole = make_groups(X, y, n_clusters=3, max_size=None, rng=0)
    >>> np.array_equal(np.sort(np.concatenate(whole.groups[:3])), np.flatnonzero(y == 0))
    True
    """
    X = as_points(X, "X")
    y = as_array(y, "y", ndim=None, kinds="biufUSO")
    if y.ndim != 1:
        raise ValueError(f"`y` must be 1-D; got an array of shape {y.shape}")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"`X` and `y` must have the same length; `X` has {X.shape[0]} rows and "
                         f"`y` has {y.shape[0]}")
    if y.dtype.kind == "f" and np.isnan(y).any():
        raise ValueError("`y` must not contain NaN")
    n_clusters = check_int(n_clusters, "n_clusters", minimum=1, maximum=MAX_COUNT)
    max_size = _optional_int(max_size, "max_size", minimum=1)
    min_size = check_int(min_size, "min_size", minimum=1, maximum=MAX_COUNT)
    pad_to = _optional_int(pad_to, "pad_to", minimum=1)
    if pad_to is not None:
        # at most min(n_clusters, n) groups per class, each padded to pad_to rows of d floats
        n_groups = min(n_clusters, X.shape[0]) * max(1, len(np.unique(y)) if labels is None else np.size(labels))
        need = n_groups * pad_to * (X.shape[1] + 2) * 8
        if need > available_memory():
            raise ValueError(f"`pad_to`={pad_to} would create up to {n_groups} x {pad_to} padding rows "
                             f"(about {need / 2**30:.1f} GiB), more than is available")
    check_option(method, "method", ("kmeans", "kmedoids"))
    rng = normalize_rng(rng)

    if labels is None:
        labels = np.unique(y)
    else:
        labels = as_array(labels, "labels", ndim=None, kinds="biufUSO")
        if labels.dtype.kind == "f" and np.isnan(labels).any():
            raise ValueError("`labels` must not contain NaN")
        if labels.ndim != 1:
            labels = labels.reshape(-1)
        if labels.size == 0:
            raise ValueError("`labels` must name at least one class")
        if len(np.unique(labels)) != labels.size:
            raise ValueError(f"`labels` must not repeat a class; got {labels.tolist()}")
        missing = [lab for lab in labels.tolist() if not np.any(y == lab)]
        if missing:
            raise ValueError(f"`labels` holds values that do not occur in `y`: {missing}")
    cluster = _clusterer(method)

    d = X.shape[1]
    groups, source, centers, synthetic = [], [], [], []
    for li, lab in enumerate(labels):
        idx = np.flatnonzero(y == lab)
        Xl = X[idx]
        k = min(n_clusters, np.unique(Xl, axis=0).shape[0])
        seed = int(rng.integers(0, 2**31 - 1))
        model = cluster(k, seed).fit(Xl)
        assign = np.asarray(model.labels_)
        for c in range(k):
            members = idx[assign == c]
            if members.size < min_size:
                continue
            if max_size is not None and members.size > max_size:
                members = np.sort(rng.choice(members, max_size, replace=False))
            pad = np.empty((0, d), dtype=np.float64)
            if pad_to is not None and members.size < pad_to:
                m = pad_to - members.size
                src = rng.choice(members, m, replace=True)
                pad = X[src] + rng.normal(scale=_PAD_JITTER, size=(m, d))
            groups.append(members.astype(np.intp, copy=False))
            source.append(li)
            centers.append(np.asarray(model.cluster_centers_[c], dtype=np.float64))
            synthetic.append(pad)

    return Result(
        groups=groups,
        source_label=labels[np.asarray(source, dtype=np.intp)],
        centers=np.array(centers, dtype=np.float64).reshape(len(groups), d),
        synthetic=synthetic,
    )
