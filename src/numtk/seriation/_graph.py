"""The symmetric k-nearest-neighbour graph shared by STAGE and the graph baselines."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from numtk._lib import n_threads, single_blas_thread
from numtk._lib._validation import as_points, check_int, check_option, check_real

__all__ = ["scaled_points", "rescale_points", "NeighborIndex", "knn_graph", "graph_from_neighbors", "bridge_components",
           "components", "connect", "orient", "WEIGHTS"]

WEIGHTS = ("gaussian", "binary")


def scaled_points(X, name: str = "X") -> tuple[np.ndarray, float]:
    """The point-cloud check of every seriation method: ``X`` validated by :func:`numtk._lib._validation.as_points`
    (dense, numeric, 2-D, finite, at least one row and one column; C-ordered float64), then rescaled exactly by
    :func:`rescale_points`. Returns ``(X / scale, scale)``."""
    return rescale_points(as_points(X, name))


#: Points whose largest magnitude lies outside [2**-400, 2**400] are rescaled by a power of two (exactly) before
#: any distance is formed: squared distances of larger points overflow float64 (1e154 and up), of smaller ones
#: underflow (1e-154 and down), and the orderings computed here are invariant to scaling X.
_SCALE_HIGH = 2.0 ** 400
_SCALE_LOW = 2.0 ** -400


def rescale_points(X: np.ndarray) -> tuple[np.ndarray, float]:
    """(X / s, s) with s a power of two putting max |X| in [1, 2) when max |X| is extreme, else (X, 1.0).

    Scaling by a power of two is exact (bar values that become subnormal, far below the largest), so the
    geometry of the points, and every ordering computed from it, is unchanged. All-zero X is returned as is.
    """
    if X.size == 0:
        return X, 1.0
    top = float(np.max(np.abs(X)))
    if top == 0.0 or _SCALE_LOW <= top <= _SCALE_HIGH:
        return X, 1.0
    exponent = int(np.frexp(top)[1]) - 1  # top = m 2**(exponent + 1), m in [0.5, 1); 2**exponent is finite
    return np.ldexp(X, -exponent), float(np.ldexp(1.0, exponent))


def scaled_bandwidth(bandwidth, scale: float):
    """A bandwidth given in the units of X, in those of ``X / scale`` (validated; None stays None)."""
    if bandwidth is None:
        return None
    h = check_real(bandwidth, "bandwidth", low=0.0, low_open=True)
    if scale == 1.0:
        return h
    tiny, big = np.finfo(float).tiny, np.finfo(float).max
    with np.errstate(over="ignore", under="ignore"):
        return float(min(max(h / scale, tiny), big))


def check_neighbor_count(k: int, n_rows: int, distinct: int | None = None) -> None:
    """``k`` neighbours need at least k + 1 (distinct) rows of X: the message names both parameters."""
    if distinct is None:
        if k > n_rows - 1:
            raise ValueError(f"`n_neighbors` must be at most n_samples - 1 = {n_rows - 1}; got {k} (`X` has too "
                             f"few rows: {n_rows})")
    elif k > distinct - 1:
        raise ValueError(f"`n_neighbors` must be at most the number of distinct samples - 1 = {distinct - 1}; got "
                         f"{k} (`X` has too few distinct rows: {distinct} of {n_rows})")


#: Up to this many coordinates the neighbour queries of STAGE use SciPy's compiled k-d tree (``cKDTree``, threaded
#: queries); above, scikit-learn's ``NearestNeighbors`` (brute force with BLAS in high dimension). On the helix of
#: the benchmarks projected to 3 coordinates (n = 1e5), cKDTree answered a 90-neighbour query 2.6x faster than
#: scikit-learn's k-d tree, the same neighbours.
KDTREE_MAX_DIM = 16
#: Queries x neighbours per query thread (see _stage.py's _PCA_GRAIN for how the grains were measured).
QUERY_GRAIN = 2.5e5


class NeighborIndex:
    """Exact nearest-neighbour queries on the rows of ``X`` with the interface of scikit-learn's
    ``NearestNeighbors.kneighbors(points, n_neighbors, return_distance)``: SciPy's ``cKDTree`` in up to
    :data:`KDTREE_MAX_DIM` coordinates (``threads`` query threads), else ``NearestNeighbors`` (``threads`` jobs).
    Distances are Euclidean; rows of a query point's answer are sorted by distance."""

    def __init__(self, X: np.ndarray, threads: int = 1):
        self.n_samples_fit_ = X.shape[0]
        self.threads = max(1, int(threads))
        if X.shape[1] <= KDTREE_MAX_DIM:
            from scipy.spatial import cKDTree

            self._tree, self._nn = cKDTree(X, balanced_tree=False, compact_nodes=False), None
        else:
            from sklearn.neighbors import NearestNeighbors

            self._tree, self._nn = None, NearestNeighbors(n_jobs=None if self.threads == 1 else self.threads).fit(X)

    def kneighbors(self, points: np.ndarray, n_neighbors: int, return_distance: bool = True):
        if self._nn is not None:
            return self._nn.kneighbors(points, n_neighbors=n_neighbors, return_distance=return_distance)
        threads = n_threads(self.threads, work=len(points) * n_neighbors, grain=QUERY_GRAIN)
        dist, ind = self._tree.query(points, k=n_neighbors, workers=threads)
        if n_neighbors == 1:  # cKDTree drops the axis for k = 1
            dist, ind = dist[:, None], ind[:, None]
        ind = ind.astype(np.int64, copy=False)
        return (dist, ind) if return_distance else ind


def knn_graph(X: np.ndarray, n_neighbors: int, *, weights: str = "gaussian", bandwidth: float | None = None,
              workers=1) -> tuple[sp.csr_matrix, float]:
    """Symmetric k-NN similarity graph (union of the directed k-NN relations, no self loops).

    Neighbours come from scikit-learn's exact ``NearestNeighbors``. ``weights='gaussian'`` gives
    ``w_ij = exp(-|x_i - x_j|^2 / h^2)`` with ``h = bandwidth`` or, when None, the median distance of the
    points to their k-th neighbour (so the graph is invariant to scaling X); ``'binary'`` gives 1. Exact
    duplicate rows that are neighbours are joined with weight 1 (distance 0). ``workers`` (an int, validated
    by :func:`numtk._lib.n_threads`) is the neighbour search's ``n_jobs``.

    Returns the CSR matrix and the bandwidth used (NaN for binary weights).
    """
    from sklearn.neighbors import NearestNeighbors

    n = X.shape[0]
    check_option(weights, "weights", WEIGHTS)
    k = check_int(n_neighbors, "n_neighbors", minimum=1)
    workers = n_threads(workers)
    check_neighbor_count(k, n)
    n_jobs = None if workers == 1 else workers
    nn = NearestNeighbors(n_neighbors=k, n_jobs=n_jobs).fit(X)
    dist, ind = nn.kneighbors()  # excludes each point itself
    return graph_from_neighbors(dist, ind, weights=weights, bandwidth=bandwidth, keep_duplicates=True)


def graph_from_neighbors(dist: np.ndarray, ind: np.ndarray, *, weights: str = "gaussian",
                         bandwidth: float | None = None,
                         keep_duplicates: bool = False) -> tuple[sp.csr_matrix, float]:
    """The symmetric k-NN graph of :func:`knn_graph` from precomputed neighbours (self excluded).

    Pairs at distance 0 (duplicate rows) are dropped, or with ``keep_duplicates`` joined with weight 1.
    """
    n, k = ind.shape
    rows = np.repeat(np.arange(n), k)
    values = dist.ravel()
    marker = np.nextafter(0.0, 1.0)  # the smallest positive double stands for a zero distance in the union
    if keep_duplicates:
        values = np.where(values > 0, values, marker)
    D = sp.csr_matrix((values, (rows, ind.ravel())), shape=(n, n))
    D = D.maximum(D.T).tocsr()  # union; distances are symmetric so max keeps the value
    D.eliminate_zeros()  # distinct points have positive distances; zeros would be duplicates
    if keep_duplicates:
        D.data[D.data <= marker] = 0.0  # stored: an edge of weight exp(0) = 1
    if weights == "binary":
        W = D.copy()
        W.data[:] = 1.0
        return W, float("nan")
    if bandwidth is None:
        h = float(np.median(dist[:, -1]))
        if h == 0.0:
            h = float(dist[dist > 0].min()) if np.any(dist > 0) else 1.0
    else:
        h = check_real(bandwidth, "bandwidth", low=0.0, low_open=True)
    W = D.copy()
    W.data = np.exp(-(W.data / h) ** 2)
    return W, h


def transverse_offsets(X: np.ndarray, rows: np.ndarray, cols: np.ndarray, tangents: np.ndarray,
                       isotropy: np.ndarray, chunk: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Length of x_j - x_i and its part normal to a tangent, for the pairs (rows[e], cols[e]).

    The tangent is that of the endpoint whose local PCA was the more anisotropic (smaller lambda_2 /
    lambda_1): a neighbourhood that caught points of another strand gives its point a poor tangent, and the
    other endpoint's tangent then decides. Returns (length, normal offset), computed in chunks of edges.
    """
    m = rows.size
    length, normal = np.empty(m), np.empty(m)
    for lo in range(0, m, chunk):
        r, c = rows[lo:lo + chunk], cols[lo:lo + chunk]
        e = X[c] - X[r]
        own = np.where(isotropy[r] <= isotropy[c], r, c)
        sq = np.einsum("ij,ij->i", e, e)
        along = np.einsum("ij,ij->i", e, tangents[own])
        length[lo:lo + chunk] = np.sqrt(sq)
        normal[lo:lo + chunk] = np.sqrt(np.maximum(sq - along * along, 0.0))
    return length, normal


#: Candidate pairs per point when bridges follow tangents: its nearest points outside its component.
_BRIDGE_CANDIDATES = 48
#: Components up to this size find them in one tree of all points.
_BRIDGE_SMALL = 256
#: Bridge cost |e| (1 + _BRIDGE_NORMAL_PENALTY (normal offset / |e|)^2): a pair across the tangents costs up to
#: 5x its length, so a slightly longer gap along the curve wins over a shorter jump to a neighbouring strand.
_BRIDGE_NORMAL_PENALTY = 4.0
#: Between two components of more than _BRIDGE_SMALL points the bridge cost is further multiplied by
#: 1 + _BRIDGE_END_PENALTY (2 + o_i + o_j) / 4, o in [-1, 1] how far each endpoint's graph neighbours lie on the
#: side of the other endpoint (see forward_balance): 1 for a pair joining the two pieces' ends (o = -1: the
#: neighbours of each lie behind it), 1 + _BRIDGE_END_PENALTY / 2 for one joining their interiors. When the
#: edge tests split a strand where it runs past the next arm of a spiral, the shortest tangent-aware pair can
#: be two noise outliers of neighbouring arms (close-arm spiral, 7 noise widths, data seed 4: 0.4886 -> 0.7368,
#: a whole turn, instead of the gap along the curve at 0.668: |tau| - floor -0.110; with the ends preferred
#: -0.0001). Over data seeds 1-8 this took the spiral at 7 noise widths from 4 to 5 seeds within 0.01 of the floor.
_BRIDGE_END_PENALTY = 8.0


#: Above this many components the closest-pair tree is built by Boruvka rounds (the pairwise loop is O(C^2)
#: neighbour queries: minutes for the ~n/3 components of a 1-NN graph at n = 3000).
_PAIRWISE_MAX_COMPONENTS = 64


def _closest_pair_tree_boruvka(X: np.ndarray, labels: np.ndarray, n_components: int) -> np.ndarray:
    """The tree of :func:`_closest_pair_tree` by Boruvka rounds: each group of components takes its closest pair
    to any other group (a point's nearest foreign point is among its size + 1 nearest points; groups above
    _BRIDGE_SMALL points query a tree of the points outside them), the pairs are added shortest first where they
    join two groups, and the groups merge; O(log C) rounds of O(n log n) queries."""
    from sklearn.neighbors import NearestNeighbors

    n = X.shape[0]
    everything = NearestNeighbors().fit(X)
    parent = list(range(n_components))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    edges = []
    group = labels.astype(np.int64)
    while True:
        _, group = np.unique(group, return_inverse=True)
        group = group.ravel()
        n_groups = int(group.max()) + 1 if n else 0
        if n_groups <= 1:
            break
        sizes = np.bincount(group, minlength=n_groups)
        best_d = np.full(n_groups, np.inf)
        best = np.full((n_groups, 2), -1, dtype=np.int64)
        small = sizes[group] <= _BRIDGE_SMALL
        rows = np.flatnonzero(small)
        if rows.size:
            k = min(n, int(sizes[group[rows]].max()) + 1)
            dist, ind = everything.kneighbors(X[rows], n_neighbors=k)
            foreign = group[ind] != group[rows][:, None]
            j = np.argmax(foreign, axis=1)
            d = dist[np.arange(rows.size), j]
            partner = ind[np.arange(rows.size), j]
            order = np.lexsort((d, group[rows]))
            g_sorted = group[rows][order]
            first = order[np.r_[True, g_sorted[1:] != g_sorted[:-1]]]
            g = group[rows][first]
            best_d[g] = d[first]
            best[g, 0], best[g, 1] = rows[first], partner[first]
        for g in np.flatnonzero(sizes > _BRIDGE_SMALL):
            own = np.flatnonzero(group == g)
            outside = np.flatnonzero(group != g)
            d, j = NearestNeighbors().fit(X[outside]).kneighbors(X[own], n_neighbors=1)
            i = int(np.argmin(d[:, 0]))
            best_d[g] = d[i, 0]
            best[g] = (own[i], outside[j[i, 0]])
        merged = False
        for g in np.argsort(best_d, kind="stable"):
            a, b = best[g]
            ra, rb = find(int(labels[a])), find(int(labels[b]))
            if ra != rb:
                parent[ra] = rb
                edges.append((int(a), int(b)))
                merged = True
        if not merged:  # pragma: no cover - every round joins at least one pair of groups
            break
        group = np.array([find(int(c)) for c in range(n_components)], dtype=np.int64)[labels]
    return np.array(edges, dtype=np.int64).reshape(-1, 2)


def _closest_pair_tree(X: np.ndarray, labels: np.ndarray, n_components: int) -> np.ndarray:
    """Edges (C - 1, 2) of a minimum spanning tree over components, each candidate the closest pair."""
    from sklearn.neighbors import NearestNeighbors

    if n_components > _PAIRWISE_MAX_COMPONENTS:
        return _closest_pair_tree_boruvka(X, labels, n_components)

    members = [np.flatnonzero(labels == c) for c in range(n_components)]
    dist = np.full((n_components, n_components), np.inf)
    pair = {}
    for a in range(n_components):
        tree = NearestNeighbors(n_neighbors=1).fit(X[members[a]])
        for b in range(a + 1, n_components):
            d, j = tree.kneighbors(X[members[b]])
            i = int(np.argmin(d[:, 0]))
            dist[a, b] = dist[b, a] = d[i, 0]
            pair[a, b] = (int(members[a][j[i, 0]]), int(members[b][i]))
    # Minimum spanning tree of the complete component graph (distances may be 0 for touching parts).
    mst = minimum_spanning_tree(sp.csr_matrix(np.triu(dist + 1.0, k=1))).tocoo()
    edges = np.array([pair[min(a, b), max(a, b)] for a, b in zip(mst.row, mst.col)], dtype=np.int64)
    return edges.reshape(-1, 2)


def forward_balance(X: np.ndarray, W: sp.csr_matrix, tangents: np.ndarray,
                    rows: np.ndarray, own_axis: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """For each node i of ``rows``: the direction u_i of the curve there (the principal axis of its graph
    neighbours' tangents, so that an outlier whose own tangent is tilted still sees the strand's; with
    ``own_axis``, its own tangent, for tangents already smoothed over the neighbours), and
    the mean of sign(<u_i, x_j - x_i>) over its neighbours j, shrunk by its degree over half the median degree
    where that is below 1. The mean is about 0 inside a strand and beside it (neighbours ahead and behind),
    +-1 at an end of a piece of the strand (half a neighbourhood, all on one side), and the shrinking makes it
    small at an outlier with few neighbours left. Returns (balance, u)."""
    W = W.tocsr()
    degree = np.diff(W.indptr)
    half = max(float(np.median(degree)) / 2.0, 1.0) if degree.size else 1.0
    out = np.zeros(rows.size)
    axes = np.zeros((rows.size, X.shape[1]))
    dim = X.shape[1]
    chunk = max(1, (1 << 21) // (dim * dim))  # the chunk's dim x dim matrices hold at most 2**21 values (16 MiB)
    for lo in range(0, rows.size, chunk):
        r = rows[lo:lo + chunk]
        sub = W[r]
        deg = np.diff(sub.indptr)
        owner = np.repeat(np.arange(r.size), deg)
        if own_axis:
            u = tangents[r]
        else:
            Tn = tangents[sub.indices]
            M = 1e-3 * np.einsum("ni,nj->nij", tangents[r], tangents[r])  # decides only without neighbours
            np.add.at(M, owner, np.einsum("ni,nj->nij", Tn, Tn))
            with single_blas_thread():  # many tiny eigenproblems: BLAS threads only cost here
                u = np.linalg.eigh(M)[1][:, :, -1]
        ahead = np.sign(np.einsum("ij,ij->i", u[owner], X[sub.indices] - X[r[owner]]))
        deg = np.maximum(deg, 1)
        out[lo:lo + r.size] = np.bincount(owner, weights=ahead, minlength=r.size) / deg * np.minimum(1.0, deg / half)
        axes[lo:lo + r.size] = u
    return out, axes


def end_facing(X: np.ndarray, W: sp.csr_matrix, tangents: np.ndarray, i: np.ndarray, j: np.ndarray,
               own_axis: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """For the pairs (i[e], j[e]): how far the graph neighbours of each endpoint lie on the side of the other,
    o in [-1, 1] (see forward_balance): -1 at an end of a piece of the curve whose neighbours all lie behind it,
    facing the other endpoint; about 0 inside a strand. Returns (o_i, o_j); both are about -1 where the pair
    joins two pieces of one curve end to end."""
    nodes, at = np.unique(np.r_[i, j], return_inverse=True)
    balance, axis = forward_balance(X, W, tangents, nodes, own_axis)
    e = X[j] - X[i]
    a_i, a_j = at[:i.size], at[i.size:]
    o_i = balance[a_i] * np.sign(np.einsum("ij,ij->i", axis[a_i], e))
    o_j = -balance[a_j] * np.sign(np.einsum("ij,ij->i", axis[a_j], e))
    return o_i, o_j


def _tangent_pair_tree(X: np.ndarray, labels: np.ndarray, n_components: int, tangents: np.ndarray,
                       isotropy: np.ndarray, threads: int = 1, W: sp.csr_matrix | None = None) -> np.ndarray:
    """Edges (C - 1, 2) of a minimum spanning tree over components, each candidate the pair of least
    tangent-aware cost among the 48 nearest points outside its component of each point (both sides query: a
    dense strand near one end can crowd the other end out of its list); components that no such pair joins
    are joined by closest pairs. A component of up to 256 points queries one tree of all points (48 + its size
    neighbours; one query per size class); a larger one a tree of the points of the other large components
    (pairs with small ones come from the small side), from those of its points within 5 times its closest
    approach (no pair farther can cost less than the closest one), at O(n log n) per large component (at most
    n / 256 of them). With the graph ``W``, pairs between two large components prefer their ends (see
    _BRIDGE_END_PENALTY; their points within that much more than 5 times the closest approach are queried)."""
    from sklearn.neighbors import NearestNeighbors

    n = X.shape[0]
    everything = NeighborIndex(X, threads)
    sizes = np.bincount(labels, minlength=n_components)
    by_label = np.argsort(labels, kind="stable")
    bounds = np.r_[0, np.cumsum(sizes)]
    rows, cols = [], []
    # Components of up to _BRIDGE_SMALL points: one query per size class (sizes in (2^(j-1), 2^j]) of all their
    # points, each row cut to its component's size + 48 nearest (a loop over thousands of small components
    # cost more than all the rest of stage at n = 1e6).
    small = sizes[labels] <= _BRIDGE_SMALL
    size_class = np.ceil(np.log2(np.maximum(sizes[labels], 1))).astype(np.int64)
    for j in np.unique(size_class[small]):
        pts = np.flatnonzero(small & (size_class == j))
        width = min(n, (1 << int(j)) + _BRIDGE_CANDIDATES)
        ind = everything.kneighbors(X[pts], n_neighbors=width, return_distance=False)
        within = np.arange(width)[None, :] < (sizes[labels[pts]] + _BRIDGE_CANDIDATES)[:, None]
        out = within & (labels[ind] != labels[pts][:, None])
        rows.append(np.broadcast_to(pts[:, None], ind.shape)[out])
        cols.append(ind[out])
    # Components above _BRIDGE_SMALL points query the points of the other large components only: every pair with
    # a small component already has the small side's candidates, and a tree of all the points outside the largest
    # component, queried from its points near some outlier cut off by the transverse test, cost a quarter of a
    # stage run at n = 1e6 (near points x 48 candidates per outlier).
    large = sizes[labels] > _BRIDGE_SMALL
    for c in np.flatnonzero(sizes > _BRIDGE_SMALL):
        own = by_label[bounds[c]:bounds[c + 1]]
        outside = np.flatnonzero(large & (labels != c))
        if outside.size == 0:
            continue
        # Only points within (1 + penalty) times the component's closest approach can beat that pair's cost.
        tree = NearestNeighbors().fit(X[outside])
        d1 = tree.kneighbors(X[own], n_neighbors=1)[0][:, 0]
        reach = (1.0 + _BRIDGE_NORMAL_PENALTY) * (1.0 + (_BRIDGE_END_PENALTY if W is not None else 0.0))
        near = own[d1 <= reach * d1.min()]
        q = min(_BRIDGE_CANDIDATES, outside.size)
        ind = tree.kneighbors(X[near], n_neighbors=q, return_distance=False)
        r, cand = np.repeat(near, q), outside[ind.ravel()]
        rows.append(r)
        cols.append(cand)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    edges = np.zeros((0, 2), dtype=np.int64)
    if rows.size:
        length, normal = transverse_offsets(X, rows, cols, tangents, isotropy)
        ratio = np.divide(normal, length, out=np.zeros_like(normal), where=length > 0)
        cost = length * (1.0 + _BRIDGE_NORMAL_PENALTY * ratio * ratio)
        both = large[rows] & large[cols]
        if W is not None and both.any():
            o_i, o_j = end_facing(X, W, tangents, rows[both], cols[both])
            cost[both] *= 1.0 + _BRIDGE_END_PENALTY * (2.0 + o_i + o_j) / 4.0
        lo = np.minimum(labels[rows], labels[cols]).astype(np.int64)
        hi = np.maximum(labels[rows], labels[cols]).astype(np.int64)
        key = lo * n_components + hi
        order = np.lexsort((cost, key))
        first = order[np.r_[True, key[order[1:]] != key[order[:-1]]]]  # the cheapest pair per component pair
        G = sp.csr_matrix((cost[first] + 1.0, (lo[first], hi[first])), shape=(n_components, n_components))
        mst = minimum_spanning_tree(G).tocoo()
        best = dict(zip(key[first].tolist(), first.tolist()))
        picked = [best[min(a, b) * n_components + max(a, b)] for a, b in zip(mst.row, mst.col)]
        edges = np.c_[rows[picked], cols[picked]].astype(np.int64).reshape(-1, 2)
    if len(edges) < n_components - 1:  # pieces out of reach of the candidates: closest pairs between them
        joined = sp.csr_matrix((np.ones(len(edges)), (labels[edges[:, 0]], labels[edges[:, 1]])),
                               shape=(n_components, n_components))
        n_super, group = connected_components(joined, directed=False)
        edges = np.vstack([edges, _closest_pair_tree(X, group[labels], n_super)])
    return edges


def bridge_components(X: np.ndarray, W: sp.csr_matrix, labels: np.ndarray, n_components: int,
                      tangents: np.ndarray | None = None,
                      isotropy: np.ndarray | None = None, threads: int = 1) -> tuple[sp.csr_matrix, np.ndarray]:
    """Join the components of W by the edges of a minimum spanning tree over components (``threads``: query
    threads of the tangent-aware search).

    Without tangents, each candidate edge between two components is their closest pair of points. With unit
    ``tangents`` (and the ``isotropy`` lambda_2 / lambda_1 of each point's local PCA), the candidates pair each
    point with its 48 nearest points outside its component, and the pair of least
    ``|e| (1 + 4 (normal offset / |e|)^2)`` joins its two components: the gap along the curve rather than the
    jump to a nearby strand (offsets as in :func:`transverse_offsets`); components that no candidate pair
    reaches are joined by closest pairs. Between two components of more than 256 points a pair also pays for
    joining their interiors rather than their ends (see :func:`forward_balance` and _BRIDGE_END_PENALTY): two
    pieces of one curve meet end to end. The C - 1 tree edges are added with the median weight of the graph
    (see the comment below). Returns the new graph and the (C - 1, 2) array of added edges.
    """
    if tangents is None:
        edges = _closest_pair_tree(X, labels, n_components)
    else:
        edges = _tangent_pair_tree(X, labels, n_components, tangents, isotropy, threads, W)
    # A bridge is the only link between its two sides, so a least-squares fit over the graph satisfies
    # it exactly whatever its weight; a Gaussian weight of a long bridge would underflow and ruin the
    # conditioning, so bridges take the graph's median weight.
    w = np.full(len(edges), float(np.median(W.data)) if W.nnz else 1.0)
    n = W.shape[0]
    extra = sp.csr_matrix((np.r_[w, w], (np.r_[edges[:, 0], edges[:, 1]], np.r_[edges[:, 1], edges[:, 0]])),
                          shape=(n, n))
    return (W + extra).tocsr(), edges


def orient(f: np.ndarray, root: int | None) -> np.ndarray:
    """The global sign of an embedding: ``root`` nearer the low end if given, else the entry of
    largest magnitude positive (scikit-learn's deterministic sign rule)."""
    if f.size == 0:
        return f
    if root is not None:
        flip = (f[root] - f.min()) > (f.max() - f[root])
    else:
        flip = f[int(np.argmax(np.abs(f)))] < 0
    return -f if flip else f


def components(W: sp.csr_matrix, both_ways: bool = False) -> tuple[int, np.ndarray]:
    """Connected components (count, label per node) of a symmetric graph, numbered in the order of their
    lowest node.

    ``both_ways``: every edge is stored in both directions (a symmetric pattern, as the graphs STAGE builds).
    Then the components are the strongly connected ones, and SciPy finds those from the graph as stored; the
    undirected search first builds the transpose (at 3e5 nodes and 4.5e6 edges 0.15 s against 0.24 s)."""
    if not both_ways:
        return connected_components(W, directed=False)
    count, labels = connected_components(W, directed=True, connection="strong")
    if count > 1:  # renumbered as the undirected search numbers them
        _, first = np.unique(labels, return_index=True)
        rank = np.empty(count, dtype=labels.dtype)
        rank[np.argsort(first)] = np.arange(count, dtype=labels.dtype)
        labels = rank[labels]
    return count, labels


def connect(W: sp.csr_matrix, points: np.ndarray | None, allow_disconnected: bool,
            what: str = "k-NN graph") -> tuple[sp.csr_matrix, int, np.ndarray]:
    """Join a disconnected graph's components (``allow_disconnected``) or raise.

    Returns the (possibly bridged) graph, the number of components before bridging and the component
    label of each node.
    """
    n_comp, labels = components(W)
    if n_comp == 1:
        return W, 1, labels
    if not allow_disconnected:
        raise ValueError(f"the {what} has {n_comp} connected components; a global order needs a connected "
                         "graph: increase `n_neighbors`, or pass `allow_disconnected`=True to join the "
                         "components by their closest points")
    if points is None:
        raise ValueError(f"the {what} has {n_comp} connected components, and with "
                         "affinity='precomputed' there are no coordinates to bridge them "
                         "(allow_disconnected=True needs points); pass a connected similarity")
    W, _ = bridge_components(points, W, labels, n_comp)
    return W, n_comp, labels
