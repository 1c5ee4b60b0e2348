# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Per-point Kendall concordance counts in O(n log n) (private; used by kendall_tau_interval).

For every point i: C_i - D_i = sum over j != i of sign(x_i - x_j) * sign(y_i - y_j), and the sizes of
its x and y tie groups minus one. Input is the lexicographic (x, y) order with 0-based dense ranks,
as returned by ``_stats_ext.kendall_lexsort``. A Fenwick tree over the y ranks sweeps the x groups;
the four quadrants of each point follow from the tree, the y-rank histogram and the point's own group.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t

cnp.import_array()


def pointwise_counts(const int64_t[::1] xr, const int64_t[::1] yr, Py_ssize_t n_y):
    """Return (cd, x_share, y_share), int64 arrays in the input (lexicographic) order."""
    cdef Py_ssize_t n = xr.shape[0]
    if yr.shape[0] != n:
        raise ValueError("`xr` and `yr` must have the same length")
    cd_arr = np.zeros(n, dtype=np.int64)
    xs_arr = np.zeros(n, dtype=np.int64)
    ys_arr = np.zeros(n, dtype=np.int64)
    if n == 0:
        return cd_arr, xs_arr, ys_arr
    ycount_arr = np.zeros(n_y + 1, dtype=np.int64)
    tree_arr = np.zeros(n_y + 1, dtype=np.int64)
    cdef int64_t[::1] cd = cd_arr
    cdef int64_t[::1] xs = xs_arr
    cdef int64_t[::1] ys = ys_arr
    cdef int64_t[::1] ycount = ycount_arr
    cdef int64_t[::1] ylt = np.zeros(n_y + 1, dtype=np.int64)
    cdef int64_t[::1] tree = tree_arr
    cdef Py_ssize_t i, j, s, e, p, lo, hi
    cdef int64_t v, ll, le, lg, gl, gg, inserted, acc
    for i in range(n):
        if yr[i] < 0 or yr[i] >= n_y:
            raise ValueError("`yr` must hold ranks in [0, n_y)")
    with nogil:
        for i in range(n):
            ycount[yr[i]] += 1
        acc = 0
        for j in range(n_y):
            ylt[j] = acc
            acc += ycount[j]
        inserted = 0
        s = 0
        while s < n:
            e = s + 1
            while e < n and xr[e] == xr[s]:
                e += 1
            # Quadrant counts against the points already inserted (strictly smaller x).
            lo = s
            while lo < e:
                hi = lo + 1
                while hi < e and yr[hi] == yr[lo]:
                    hi += 1
                v = yr[lo]
                ll = 0
                p = v
                while p > 0:
                    ll += tree[p]
                    p -= p & (-p)
                # le = #inserted with y <= v: the prefix through rank v
                le = 0
                p = v + 1
                while p > 0:
                    le += tree[p]
                    p -= p & (-p)
                lg = inserted - le
                # Inside the x group: (lo - s) points have smaller y, (e - hi) larger.
                gl = ylt[v] - ll - (lo - s)
                gg = (n - ylt[v] - ycount[v]) - lg - (e - hi)
                for j in range(lo, hi):
                    cd[j] = ll + gg - lg - gl
                    xs[j] = e - s - 1
                    ys[j] = ycount[v] - 1
                lo = hi
            for j in range(s, e):
                p = yr[j] + 1
                while p <= n_y:
                    tree[p] += 1
                    p += p & (-p)
            inserted += e - s
            s = e
    return cd_arr, xs_arr, ys_arr
