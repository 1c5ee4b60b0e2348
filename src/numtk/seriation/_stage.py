"""STAGE: tangent synchronisation and an inhomogeneous Laplacian solve to order points along a curve.

Pipeline (each step's cost at n points, k graph neighbours, k_p PCA neighbours, m coordinates):

1. optional global PCA of the distinct rows onto their m leading directions ('auto': the directions above the
   noise level, when the data are clearly low rank), which makes the neighbour search tree-based and everything
   after it cheaper (O(n d^2));
2. neighbours: SciPy's cKDTree (threaded queries) in up to 16 coordinates, else scikit-learn; one query of k + 1
   points per point serves the graph;
3. local PCA tangents, compiled (Lanczos per neighbourhood, threaded), the neighbourhood size chosen on a random
   probe of at most 1000 points; large sizes fit the nearest points of a random thinning of the cloud, at the
   kept points only, every point taking its nearest kept point's tangent (O(n fit / k_p) fits); points whose
   neighbourhood is not line-like fall back to a smaller one;
4. the tangent line field averaged over the k-NN graph (compiled, three steps); the graph edges that run across
   the tangents (between strands of the curve closer than the k-NN radius) are dropped, and the pieces joined
   along the tangents (O(n k d)); where the first solve says strands are glued (misfit above 0.2), each point is
   moved across its tangent to the middle of its strand (mean shift), the edges between points whose strands
   differ are dropped too and steps 5-6 run again;
5. Z2 sign synchronisation: scipy's minimum spanning tree, then compiled propagation and power iterations;
6. compiled signed increments and right-hand side, then the Laplacian solve: compiled conjugate gradients with
   a two-level preconditioner (Jacobi plus a coarse correction on greedy aggregates grown along strong edges, the
   coarse system factored by SuperLU), or the spanning tree of step 5, or Jacobi; or a grounded sparse LU;
7. with loss='l1', or 'auto' while the misfit still exceeds 0.2, a least-absolute-deviations refinement by
   reweighted solves;
8. where the first solve's misfit exceeded 0.2: folds of the embedding at either end (a tangent field turned
   through half a turn) found in its sublevel sets (O(n k log n)) and mended by flipping the signs beyond them
   and solving (and refining) again.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from numtk._lib import MapWrapper, NumtkWarning, Result, n_threads, normalize_rng, single_blas_thread
from numtk._lib._workers import blas_threads
from numtk._lib._constraints import constraints
from numtk._lib._validation import C_INT_MAX, as_array, check_bool, check_int, check_option, check_real
from numtk.seriation._graph import (WEIGHTS, NeighborIndex, bridge_components, check_neighbor_count, components,
                                   connect, end_facing, graph_from_neighbors, orient, scaled_bandwidth,
                                   scaled_points, transverse_offsets)

__all__ = ["stage"]

SOLVERS = ("auto", "cg", "direct")
LOSSES = ("auto", "l2", "l1")
PRECONDITIONERS = ("aggregation", "tree", "jacobi")
_PRECONDITIONER_CODE = {"none": 0, "jacobi": 1, "tree": 2, "aggregation": 3}

_CHUNK_ROWS = 4096  # neighbourhoods per task when a map-like `workers` carries the local PCA
_MIN_THIN_POINTS = 64  # thinned local-PCA neighbourhoods fit at least this many points
_PROBE = 1000  # points on which the 'auto' rule chooses the neighbourhood size
# 'auto' takes the first size whose median lambda_2 / lambda_1 is at most this. The specification's 0.5 picked
# k_p = 45 (median 0.47, frustration 0.45%) on the close-arm spiral at n = 2e4 and gave |tau| 0.950; 0.4 picks
# 90 (0.998) and was never worse than 0.5 on the spec's reference cases and the benchmark curves.
_ISOTROPY_THRESHOLD = 0.4
# ... unless the median rises by more than _ISOTROPY_RISE above the best so far while that best is at most
# _ISOTROPY_LOCAL (the specification's bound): the larger neighbourhoods reach the next strand and the best smaller
# size is taken. Without this, close arms at 5 noise widths (n = 3000, d = 20) rose from 0.44-0.47 at 2k and 3k to
# 0.65 at 6k and fell below 0.4 again only at 1440-1500 points, half the cloud, where the tangents follow the
# cloud's outline: the nested arcs lay along it with a misfit of 0.15, which does not start the strand test
# (worst |tau| - floor -0.97 over data seeds 1-8 and stage seeds 0-3; -0.064 with the rule). A noise-dominated
# line rises too (0.68 -> 0.72 from 2k to 3k in d = 100, where small samples favour a noise direction) but from
# above 0.5, so it is left alone. 0.05 is several standard errors of the median of a 1000-point probe.
_ISOTROPY_LOCAL = 0.5
_ISOTROPY_RISE = 0.05
# Edges across the tangents (see _drop_transverse): normal offset > 0.5 |e| and > 6 x the lower quartile of the
# normal offsets of all edges.
# Edges whose shared-neighbour share (shared neighbours over the smaller degree) is below this fraction of the
# median share over all edges (see _drop_unshared). Measured on close-arm spirals and nested arcs (n = 3000, d = 20,
# gap 7x the noise per coordinate): |tau| 0.692 -> 0.9949 and 0.888 -> 0.9912 against floors 0.9955 and 0.9926
# (5x: 0.385 -> 0.636 and 0.179 -> 0.242; that was data seed 1: over seeds 1-8 the spiral is within 0.01 of the
# floor on 5 of 8 at 7x and all from 9x, the nested arcs on all from 7x); never lower on the benchmark curves
# (helix, spiral, line, random Fourier, nested arcs; noise 0-0.05; d = 3 and 100). A fixed share (0.35) did as
# well on the close arms but cut 24-98 % of the edges of noisy tubes (the median share is 0.44 in d = 3 and 0.10
# in d = 100 at n = 1e5); relative to the median it cuts ~4 %, and the iterations and |tau| of the scaling table
# do not change.
_SHARED_FRACTION = 0.5
# ... an edge of low share is kept where both endpoints' kept neighbours lie at least this much more behind them
# than ahead (-1: all behind, see end_facing): a thin spot of the sampling, where k-NN neighbourhoods on the two
# sides of the gap barely overlap. Without it, at 2000 points the test cut the spiral at such spots (5-13 edges of
# the k-NN graph across, against 31-50 elsewhere; it dropped all but 0-2), and the stretch beyond was held by an
# edge to the neighbouring arm: |tau| 0.03-0.08 below the floor (8 noise widths, d = 100, data seeds 2 and 8;
# 6 noise widths, d = 20, seed 4), 0.44-0.77 on the nested arcs (6, d = 100, seeds 7 and 8). Any threshold in
# [0, 0.3] kept the same seeds; 0.5 lost one.
_FACING_END = 0.3
_TRANSVERSE_SLOPE = 0.5
_TRANSVERSE_SCALE = 6.0
_TRANSVERSE_QUANTILE = 0.25
# Per-point fallback of the 'auto' tangents (see _tangents): a point whose ratio at the chosen size exceeds
# _ISOTROPY_THRESHOLD takes the largest smaller neighbourhood (of at least _FALLBACK_MIN points) whose ratio is at
# most _FALLBACK_RATIO.
_FALLBACK_RATIO = 0.05
_FALLBACK_MIN = 10
_AUTO_MIN_FEATURES = 20  # pca_components='auto' reduces only from this many features on
_AUTO_NOISE_MARGIN = 2.0  # ... keeping directions whose variance exceeds 2x the noise bulk's upper edge
# Gaussian weights below this fraction of the median weight are raised to it: an outlier's edges would otherwise
# underflow (exp(-(7 h / h)^2) ~ 1e-22) and make the system too ill-conditioned for any iterative solve, while
# weights this small change the embedding of the other points by about this fraction only.
_WEIGHT_FLOOR = 1e-6
# Aggregates of the two-level preconditioner grow along strong edges only: w_ij >= 0.25 max(max_k w_ik, max_k w_jk)
# (see _seriation_ext.cpp, strong_aggregate). Measured CG iterations at tol 1e-8, n = 1e5, d = 100, noise 0.05:
# spiral 1294 with every edge, 87 / 74 / 59 at 0.05 / 0.1 / 0.25; helix 53 with every edge, 47 at 0.1.
_STRONG_EDGE = 0.25
# Work per thread of the compiled kernels (n_threads caps the threads at work // grain): below it a second thread
# cost more than it saved. Measured 1 against 2 threads, interleaved medians, on the shared 2-core machine under a
# load of ~8 (so these are upper bounds of the crossover on an idle machine): local PCA (rows x points x
# coordinates) 0.85x at 4.3e5, 1.12x at 1.7e6; Laplacian products (stored entries) 1.00x at 6.4e5; cKDTree
# queries (queries x neighbours, in _graph.py) 1.02x at 3.2e4, 0.93-1.06x up to 5e5.
_PCA_GRAIN = 1e6
_CSR_GRAIN = 4e5
_MAX_ITER = C_INT_MAX  # iteration counts are C ints in the compiled kernels
# loss='auto' refines the least-squares solution towards least absolute deviations when its misfit exceeds this.
# Measured misfits (n = 3000, d = 20, data seeds 1-8): close arms from 9 noise widths on 0.05-0.10, at 7-8 widths
# 0.07-0.49, at 5-6 widths 0.15-0.84; the benchmark curves (bench/benchmarks/_seriation.py, n = 1e3 and 1e4) and
# make_curve's six kinds at noise 0-0.1 in d = 100 below 0.1, except the spiral and nested arcs at noise 0.1 (close
# arms). With the refinement the spiral at 7 widths had 6 of 8 seeds within 0.01 of the floor (5 without) and the
# nested arcs at 6 widths 4 (1 without; worst |tau| - floor -0.79 -> -0.47); at 5 widths, where neither solution is
# near the floor, the worst cases were further off (spiral -0.76 -> -0.92). With the strand test in front
# (split_strands='auto'), which leaves the refinement only the edges between strands that it missed, 'auto' held
# more seeds at 5 widths than 'l2' (data seeds 1-8, stage seeds 0-3: nested arcs 32 of 32 runs against 28,
# spiral 29 against 28, worst -0.027 against -0.049) and the benchmark curves never reach it, so it is the
# default.
_ROBUST_MISFIT = 0.2
_IRLS_STEPS = 20  # reweighted solves of the refinement (the measured gains were complete by 20)
_IRLS_EPS = 0.1  # residuals below this fraction of the median |increment| count as this (smoothed L1)
_IRLS_CHANGE = 1e-6  # ... or until no embedding value moves by more than this fraction of the largest |value|
# Strands whose noise tubes touch (see _smooth_tangents, _strand_modes, _drop_across_modes). split_strands='auto'
# runs the mode test when the first solve's misfit exceeds _ROBUST_MISFIT (a flipped stretch with a low misfit was
# mended by the smoothing alone: the spiral at 8 noise widths, seed 5). Measured (n = 3000, d = 20, data seeds
# 1-8, loss='l2'), seeds within 0.01 of the floor without / with the test: spiral at 5, 6, 7 noise widths 0 / 6,
# 0 / 8, 6 / 8; nested arcs 0 / 7, 3 / 8, 8 / 8; all 8 from 8 widths on either way (with the default loss='auto':
# spiral 7 of 8 at 5, nested arcs 8 of 8; with the folds mended too, 8 of 8 on both). On a first version (no extra
# smoothing, the window 2.5 k-NN radii along) a window of 50 points instead of 100, a Gaussian of 0.7 or 1.5 noise
# widths, or a threshold of 1.5 or 3 widths each held fewer seeds at 5 noise widths.
_SMOOTH_STEPS = 3
_SPLIT_SMOOTH_STEPS = 7  # ... and this many more before the mode test
_MODE_NEIGHBOURS = 100  # window of each mode search, in points
_MODE_RADIUS = 4.0  # ... reaching this many noise widths
_MODE_ALONG = 3.0  # ... of which the points within this many noise widths along the tangent count (4: the
# innermost turn of the spiral, radius 1 = 8 noise widths at 5, bent the window enough to cut the strand: 5 of 8
# seeds at 5 noise widths against 7; 2.5 and 3.5 lost seeds too)
_MODE_STEPS = 100
_MODE_TOL = 1e-3  # a point stops when it moves by less than this many noise widths
_MODE_GAP = 2.0  # edges whose endpoints' modes lie more than this many noise widths apart across go
_MODE_CHUNK = 1 << 21


def _pca_task(X: np.ndarray, neighbors: np.ndarray, tol: float):
    """One chunk of local PCA (module level, so process pools and Dask can pickle it)."""
    from numtk.seriation import _seriation_ext

    return _seriation_ext.local_pca(X, neighbors, 1, 64, tol)[:2]


def _local_pca(X: np.ndarray, neighbors: np.ndarray, threads=1,
               tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Top principal direction of each neighbourhood (a row of indices into X) and lambda_2 / lambda_1.

    Compiled Lanczos per neighbourhood (see native/include/numtk/seriation/local_pca.hpp); ``tol`` is the
    relative residual of the top eigenpair (0: run each to the full Krylov space, exact). At the default
    1e-6 the tangents agree with the exact ones to ~1e-12 on curve data, and the ratio (from the Krylov
    space, a lower bound) to about 1%: it only steers the 'auto' neighbourhood size. ``threads`` is a
    thread count for the kernel or a map-like callable that runs chunks of neighbourhoods as tasks.
    """
    from numtk.seriation import _seriation_ext

    X = np.ascontiguousarray(X)
    neighbors = np.ascontiguousarray(neighbors)
    if callable(threads):
        chunks = [neighbors[lo:lo + _CHUNK_ROWS] for lo in range(0, neighbors.shape[0], _CHUNK_ROWS)]
        with MapWrapper(threads) as mapper:
            parts = list(mapper(functools.partial(_pca_task, X, tol=tol), chunks))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    threads = n_threads(threads, work=neighbors.size * X.shape[1], grain=_PCA_GRAIN)
    tangents, ratio, _ = _seriation_ext.local_pca(X, neighbors, threads, 64, tol)
    return tangents, ratio


# --------------------------------------------------------------------------------------------------
# Distinct rows
# --------------------------------------------------------------------------------------------------

_HASH_SEED = 0x5EB1A7E  # fixed: the hash only groups candidates; equality is decided exactly


def _row_hash(X: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's bit patterns (-0.0 counted as +0.0), one column at a time."""
    n, d = X.shape
    mult = np.random.default_rng(_HASH_SEED).integers(1, 2**63, size=d, dtype=np.uint64) | np.uint64(1)
    h = np.zeros(n, dtype=np.uint64)
    col = np.empty(n)
    for j in range(d):
        np.add(X[:, j], 0.0, out=col)  # -0.0 + 0.0 = +0.0
        h ^= col.view(np.uint64) * mult[j]
        h = (h << np.uint64(17)) | (h >> np.uint64(47))
    return h


def _distinct_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(U, inverse): the distinct rows of X in the order of their first appearance, and the row of U of each row.

    Rows are grouped by a 64-bit hash (O(n d) plus one sort of n integers) and only rows whose hash repeats are
    compared exactly (``numpy.unique(axis=0)``, which sorts whole rows: 12 s for 4e5 x 100 rows against 2 s for
    the hash on a loaded 2-core machine). Without duplicates X itself is returned, not a copy.
    """
    n = X.shape[0]
    h = _row_hash(X)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = hs[1:] == hs[:-1]
    if not same.any():
        return X, np.arange(n)
    cand = np.sort(order[np.r_[same, False] | np.r_[False, same]])
    _, first, inv = np.unique(X[cand] + 0.0, axis=0, return_index=True, return_inverse=True)
    rep = np.arange(n)
    rep[cand] = cand[first[inv.ravel()]]  # the first row equal to each candidate (cand is in row order)
    keep = np.flatnonzero(rep == np.arange(n))
    pos = np.empty(n, dtype=np.int64)
    pos[keep] = np.arange(keep.size)
    return X[keep], pos[rep]


# --------------------------------------------------------------------------------------------------
# Global PCA pre-reduction
# --------------------------------------------------------------------------------------------------

_ROW_CHUNK = 1 << 16  # rows per chunk of the global PCA's passes over the points


def _project(U: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """(U - mean) @ basis, in chunks of rows (no centred copy of U)."""
    mean = U.mean(axis=0)
    P = np.empty((U.shape[0], basis.shape[1]))
    for lo in range(0, U.shape[0], _ROW_CHUNK):
        P[lo:lo + _ROW_CHUNK] = (U[lo:lo + _ROW_CHUNK] - mean) @ basis
    return P


def _principal_basis(U: np.ndarray, pca_components, neighbors_given: bool) -> tuple[np.ndarray | None, float]:
    """Orthonormal columns (d, m) spanning the m leading principal directions of U, or None (no reduction), and
    the noise variance per coordinate: the median variance of the discarded directions (NaN without a reduction).

    'auto' reduces when there are at least 20 features, at least twice as many distinct rows as features
    and no precomputed neighbours, and the spectrum is clearly low rank: the noise variance is estimated by
    the median eigenvalue of the covariance (valid when fewer than half the directions carry signal), the
    directions whose variance exceeds twice the upper edge of the Marchenko-Pastur noise bulk,
    ``2 sigma^2 (1 + sqrt(d / n))^2``, are kept (at least 2), and the reduction is used only if at least one
    and at most a quarter of the directions stand out.
    """
    m, d = U.shape
    if pca_components is None:
        return None, math.nan
    if pca_components == "auto" and (d < _AUTO_MIN_FEATURES or m < 2 * d or neighbors_given):
        return None, math.nan
    if pca_components != "auto" and pca_components >= d:
        return None, math.nan
    mean = U.mean(axis=0)
    C = np.zeros((d, d))
    for lo in range(0, m, _ROW_CHUNK):  # centred in chunks: no copy of U
        Y = U[lo:lo + _ROW_CHUNK] - mean
        C += Y.T @ Y
    lam, V = np.linalg.eigh(C / m)
    lam, V = lam[::-1], V[:, ::-1]
    if pca_components == "auto":
        top = max(float(lam[0]), np.finfo(float).tiny)
        noise = max(float(np.median(lam)), 1e-12 * top)
        edge = noise * (1.0 + math.sqrt(d / m)) ** 2
        keep = int(np.count_nonzero(lam > _AUTO_NOISE_MARGIN * edge))
        if keep == 0 or keep > d // 4:  # no direction stands out of the bulk, or the data are not low rank
            return None, math.nan
        keep = max(keep, 2)
    else:
        keep = pca_components
    return np.ascontiguousarray(V[:, :keep]), max(float(np.median(lam[keep:])), 0.0)


# --------------------------------------------------------------------------------------------------
# Local PCA tangents with the 'auto' neighbourhood size
# --------------------------------------------------------------------------------------------------

def _neighbourhood_sizes(n: int, k: int, tangent_neighbors) -> list[int]:
    """Candidate local-PCA sizes: 2k (from 10 points on), 3k, 6k, 12k, ... capped at n/2 ('auto'), or the given
    size.

    2k was added after 3k = 45 reached the next arm on a sparsely sampled spiral (n = 2000, d = 100, arm gap 0.6,
    noise 0.05: the 45 nearest points span about the gap along the curve). Its tangents turned across the curve
    at thin spots and the signs beyond flipped: 1 of 8 data seeds within 0.01 of the noise floor, 8 of 8 with 2k
    (or a fixed 20 or 30). On make_curve's six kinds at noise 0-0.1 (n = 2000, d = 3 and 100, three seeds) no
    |tau| fell by more than 1e-3; the close-arm tables (n = 3000, d = 20) kept their counts.
    """
    if tangent_neighbors != "auto":
        return [tangent_neighbors]
    cap = max(2, n // 2)
    sizes, kp = [], 3 * k
    if 2 * k >= _FALLBACK_MIN:
        sizes.append(min(2 * k, cap))
    while True:
        sizes.append(min(max(kp, 2), cap))
        if kp >= cap:
            return sorted(set(sizes))
        kp *= 2


class _Neighbourhoods:
    """Local-PCA neighbourhoods of a given size, for all points or a probe.

    Up to ``q`` (the width of the neighbour table ``ind``, self first) they come from the table; up to ``fit``
    (default ``max(q, 64)``; ``stage`` passes max(6k, 64)) they are queried exactly. A larger size ``kp`` (only
    under 'auto') uses the ``fit`` nearest points among a random thinning of the cloud that keeps a fraction
    ``fit / kp`` of it: the same radius, ``fit`` points to fit instead of kp, so the cost and memory stay bounded
    whatever n. (Fewer than 64 points made the tangents noisy enough for an occasional sign domain wall with
    k = 5.) Thinnings are drawn from ``rng`` once per size and reused; :meth:`tangents` fits the kept points only.

    An exact query of all points is kept and serves every later size up to its width, for any rows (the
    fallback's smaller sizes); on a cloud of at most _PROBE points, whose probe is the whole cloud and walks
    several sizes, the first one is made at ``fit`` (close spiral, n = 1e3: the queries of 30, 45 and 90
    neighbours and the fallback's of the smaller sizes again became one; STAGE 0.12 s -> 0.09 s).
    """

    def __init__(self, U, nn, ind, rng, n_jobs, fit=None):
        self.U, self.nn, self.ind, self.rng, self.n_jobs = U, nn, ind, rng, n_jobs
        self.q = ind.shape[1]
        if nn is None:
            self.fit = self.q
        else:
            self.fit = max(self.q, min(_MIN_THIN_POINTS if fit is None else max(fit, _MIN_THIN_POINTS), U.shape[0]))
        self._thin = {}
        self._exact = None  # the widest exact query of all points so far

    def thinned(self, kp: int) -> bool:
        return kp > self.fit

    def __call__(self, kp: int, rows: np.ndarray | None = None) -> np.ndarray:
        U = self.U
        if kp <= self.q:
            return (self.ind if rows is None else self.ind[rows])[:, :kp]
        if self.nn is None:  # precomputed neighbours: sizes are capped at q before we get here
            raise AssertionError("neighbourhood larger than the precomputed table")
        if kp <= self.fit:
            table = self._exact
            if table is None or table.shape[1] < kp:
                if rows is not None and U.shape[0] > _PROBE:  # a probe: its own query
                    return self.nn.kneighbors(U[rows], n_neighbors=kp, return_distance=False)
                size = self.fit if U.shape[0] <= _PROBE else kp
                table = self._exact = self.nn.kneighbors(U, n_neighbors=size, return_distance=False)
            return (table if rows is None else table[rows])[:, :kp]
        if kp not in self._thin:
            n = U.shape[0]
            size = max(self.fit, int(math.ceil(n * self.fit / kp)))
            keep = np.sort(self.rng.choice(n, size=size, replace=False))
            tree = NeighborIndex(U[keep], self.n_jobs or 1)
            self._thin[kp] = (keep, tree)
        keep, tree = self._thin[kp]
        return keep[tree.kneighbors(U if rows is None else U[rows], n_neighbors=self.fit, return_distance=False)]

    def tangents(self, kp: int, threads) -> tuple[np.ndarray, np.ndarray]:
        """Tangents and ratios of every point at a thinned size ``kp``: local PCA at the points of the thinning
        only (each on its ``fit`` nearest kept points), each point then taking those of its nearest kept point.

        The thinning keeps one point in kp / fit, so a point's nearest kept point lies about kp / (2 fit)
        sample spacings away along the curve, a small fraction of the kp / 2 spacings of the neighbourhood's
        radius: the two neighbourhoods nearly coincide. The fits cost O(n fit / kp) instead of O(n) (the
        'auto' size grows with n at a fixed curve and noise, so this work stays about constant) and the
        query of all points is a 1-nearest one instead of a fit-nearest one.
        """
        self(kp, np.zeros(0, dtype=np.int64))  # draws the thinning of this size
        keep, tree = self._thin[kp]
        hood = keep[tree.kneighbors(self.U[keep], n_neighbors=self.fit, return_distance=False)]
        t, r = _local_pca(self.U, hood, threads)
        nearest = tree.kneighbors(self.U, n_neighbors=1, return_distance=False)[:, 0]
        return t[nearest], r[nearest]


def _tangents(U: np.ndarray, hoods: _Neighbourhoods, sizes: list[int], threads, rng: np.random.Generator,
              k: int = 0):
    """Local PCA tangents for the first size whose median eigenvalue ratio is <= 0.4 (else the best; the best
    so far once the median climbs 0.05 above a best of at most 0.5), with a per-point fallback to smaller
    neighbourhoods.

    The size is chosen on a random probe of at most ``_PROBE`` points drawn from ``rng`` (all points when there
    are fewer; the median ratio of a thousand points is a stable estimate), then the tangents of all points
    are computed once. Under 'auto' (several sizes), a point whose own ratio at the chosen size exceeds 0.4
    (its neighbourhood is not line-like: typically it reaches a second strand of the curve, such as the next
    arm of a spiral, while most points' do not) takes the tangent of the largest smaller neighbourhood -- the
    smaller 'auto' sizes, then max(k, 10) -- whose ratio is at most 0.05 (clearly line-like); if there is none
    it keeps its tangent. On a close spiral (n = 3000, d = 100, arm gap 0.3) the 45-point neighbourhoods
    'auto' picks leave 3% of the tangents more than 30 degrees off, enough for the transverse-edge test to
    cut good edges (|tau| 0.21); with the fallback 0.3-0.5% (0.999). A bound of 0.1 also let noisy small
    neighbourhoods replace tangents on a noisy planar spiral and lost there. Above ``_PROBE`` points the
    fallback runs only if it would replace the tangent of some probe point.
    """
    n = U.shape[0]
    chosen = sizes[-1]
    auto = len(sizes) > 1
    probe, probe_ratio = None, {}
    probe_threads = 1 if callable(threads) else threads
    if auto:
        probe = np.sort(rng.choice(n, size=_PROBE, replace=False)) if n > _PROBE else None
        best = None
        for kp in sizes:
            probe_ratio[kp] = _local_pca(U, hoods(kp, probe), probe_threads)[1]
            med = float(np.median(probe_ratio[kp]))
            if best is None or med < best[1]:
                best = (kp, med)
            if med <= _ISOTROPY_THRESHOLD:
                chosen = kp
                break
            if best[1] <= _ISOTROPY_LOCAL and med > best[1] + _ISOTROPY_RISE:
                chosen = best[0]
                break
        else:
            chosen = best[0]
    t, r = hoods.tangents(chosen, threads) if hoods.thinned(chosen) else _local_pca(U, hoods(chosen), threads)
    if auto and _FALLBACK_RATIO > 0:
        smallest = max(k, _FALLBACK_MIN)
        smaller = sorted({s for s in sizes if s < chosen} | ({smallest} if smallest < chosen else set()), reverse=True)
        rows = np.flatnonzero(r > _ISOTROPY_THRESHOLD)
        if probe is not None and rows.size and smaller:
            # Beyond the probe's size, fall back only if some probe point would (a noisy curve at a large size has
            # many points above 0.4 and hardly a line-like smaller neighbourhood: this skips the work there).
            bad = probe[probe_ratio[chosen] > _ISOTROPY_THRESHOLD]
            rescued = np.zeros(bad.size, dtype=bool)
            for kp in smaller:
                rs = (probe_ratio[kp][probe_ratio[chosen] > _ISOTROPY_THRESHOLD] if kp in probe_ratio
                      else _local_pca(U, hoods(kp, bad), probe_threads)[1])
                rescued |= rs <= _FALLBACK_RATIO
            if not rescued.any():
                rows = rows[:0]
        for kp in smaller:
            if rows.size == 0:
                break
            ts, rs = _local_pca(U, hoods(kp, rows), threads)
            ok = rs <= _FALLBACK_RATIO
            t[rows[ok]], r[rows[ok]] = ts[ok], rs[ok]
            rows = rows[~ok]
    return t, r, chosen


# --------------------------------------------------------------------------------------------------
# Edges across strands
# --------------------------------------------------------------------------------------------------

def _drop_unshared(W: sp.csr_matrix, threads: int = 1, P: np.ndarray | None = None,
                   tangents: np.ndarray | None = None):
    """W without its edges whose endpoints share few neighbours, and how many were removed: the share (shared
    neighbours over the smaller degree) below _SHARED_FRACTION (half) of its median over all edges.

    Along one strand the k-NN neighbourhoods of two neighbours overlap for most of their length (a window
    shifted by less than its half-width); an edge between two strands whose noise tubes touch joins points
    whose other neighbours lie mostly on their own strands. Such an edge escapes the transverse test when the
    tubes are wider than the tangents' angle can resolve, and it glues the strands together in the solve.

    With the points ``P`` and their (smoothed) ``tangents``, an edge of low share is kept where its endpoints
    are ends facing each other in the graph of the edges kept: each one's kept neighbours lie at least
    _FACING_END more behind it, away from the other, than ahead (see end_facing). That is a thin spot of the
    sampling along one strand, where the neighbourhoods on the two sides barely overlap; between two strands
    each endpoint keeps neighbours ahead and behind along its own.
    """
    from numtk.seriation import _seriation_ext as ext

    if W.nnz == 0:
        return W, 0
    indptr, indices, data = _csr_arrays(W)
    shared = ext.shared_neighbours(indptr, indices, n_threads(threads, work=indices.size, grain=_CSR_GRAIN))
    deg = np.diff(indptr)
    rows = np.repeat(np.arange(W.shape[0], dtype=indices.dtype), deg)
    share = shared / np.maximum(np.minimum(deg[rows], deg[indices]), 1)
    keep = share >= _SHARED_FRACTION * float(np.median(share))

    def kept_graph():  # W's entries where `keep` holds
        kept = np.zeros(indptr.size, dtype=indptr.dtype)
        np.cumsum(np.bincount(rows[keep], minlength=W.shape[0]), out=kept[1:])
        return sp.csr_matrix((data[keep], indices[keep], kept), shape=W.shape)

    low = np.flatnonzero(~keep)
    if P is not None and low.size:
        o_i, o_j = end_facing(P, kept_graph(), tangents, rows[low], indices[low], own_axis=True)  # symmetric
        keep[low[(o_i <= -_FACING_END) & (o_j <= -_FACING_END)]] = True
    n_drop = (keep.size - int(np.count_nonzero(keep))) // 2  # the pattern is symmetric: each edge stored twice
    if n_drop == 0:
        return W, 0
    return kept_graph(), n_drop


def _drop_transverse(P: np.ndarray, W: sp.csr_matrix, tangents: np.ndarray, isotropy: np.ndarray):
    """W without its edges across the tangents, and how many were removed.

    An edge (i, j) of the k-NN graph is dropped when x_j - x_i is more than _TRANSVERSE_SLOPE (0.5) of its
    length normal to the tangent (over 30 degrees off it) and that normal offset exceeds _TRANSVERSE_SCALE (6)
    times the lower quartile of the normal offsets of all edges (a scale of the noise tube's width plus the
    curvature's sagitta; a quartile rather than the median, so that it holds while up to three quarters of the
    edges run between strands). The tangent is that of the endpoint with the smaller lambda_2 / lambda_1. Such
    an edge joins two strands of the curve closer than the k-NN radius (neighbouring arms of a spiral): its
    increment along the tangents is ~0 and would glue the strands together in the solve. Within one noisy
    tube the limit is ~4.5 sigma for two normal directions (a tail of 3e-5), more for more directions, and
    ~1.9 sigma for one (planar curves), where the 30-degree test still keeps all but the shortest edges.
    Measured on close spirals (n 500-5000, arm gaps 0.2-0.6, d = 2 and 100) and the benchmark curves, it was
    never worse than keeping the edges and much better wherever the k-NN graph joined arms; the median
    in place of the quartile, or 4 or 8 in place of 6, each lost some of those cases.
    """
    C = sp.triu(W, k=1).tocoo()
    if C.nnz == 0:
        return W, 0
    length, normal = transverse_offsets(P, C.row, C.col, tangents, isotropy)
    limit = _TRANSVERSE_SCALE * float(np.quantile(normal, _TRANSVERSE_QUANTILE))
    drop = (normal > limit) & (normal > _TRANSVERSE_SLOPE * length)
    n_drop = int(np.count_nonzero(drop))
    if n_drop == 0:
        return W, 0
    keep = ~drop
    U = sp.csr_matrix((C.data[keep], (C.row[keep], C.col[keep])), shape=W.shape)
    return (U + U.T).tocsr(), n_drop


# --------------------------------------------------------------------------------------------------
# Strands whose noise tubes touch: a smoothed tangent field and the strands' modes across it
# --------------------------------------------------------------------------------------------------

def _smooth_tangents(tangents: np.ndarray, ratio: np.ndarray, ind: np.ndarray, steps: int | None = None,
                     threads: int = 1) -> np.ndarray:
    """The tangent line field averaged ``steps`` (default _SMOOTH_STEPS) times over each point's neighbours
    ``ind`` (self first), compiled (_seriation_ext.smooth_lines), with the raw tangents' sign rule applied after.

    Each step replaces t_i by the unit sum of sign(t_i . t_j) (1 - r_j) t_j over the row of ``ind`` (a line
    field: the signs are free), with r the points' lambda_2 / lambda_1, so line-like neighbourhoods count most.
    A point whose sum vanishes keeps its tangent. Why: where two strands touch, the local PCA of a point between
    them sees both and can return a direction across them (spiral arms 6 noise widths apart, n = 3000: 10 % of
    the tangents more than 31 degrees off, 1 % more than 86); its graph neighbours mostly lie on one strand,
    and three steps over the k-NN graph left 1 % more than 19 degrees off. Every call takes three steps (0.6 s
    per step at n = 1e6, m = 3 on two threads, 0.9 s on one: the reads of rows in random order are scattered);
    the strand test takes seven more, because ten held more seeds at 5 noise widths than three (nested arcs 5
    of 8 against 0, the spiral 5 against 6; the same from 6 on). The
    averaging radius (about sqrt(steps) k-NN radii) stays below the local PCA's, so curves keep their bends:
    on make_curve's six kinds at noise 0-0.1 (n = 2000, d = 3 and 100, three seeds) the new default (this and
    the strand test) moved |tau| by at most 3e-4 wherever no strands touch; where they touch or cross, from
    -0.05 to +0.90, the losses on curves that were already far off (|tau| 0.68 -> 0.63, 0.23 -> 0.21).
    """
    from numtk.seriation import _seriation_ext as ext

    n, m = tangents.shape
    steps = _SMOOTH_STEPS if steps is None else steps
    if steps == 0 or n == 0 or ind.shape[1] < 2:
        return tangents
    weight = np.clip(1.0 - np.asarray(ratio, dtype=np.float64), 0.0, 1.0)
    t = ext.smooth_lines(tangents, weight, ind, steps, n_threads(threads, work=ind.size * m, grain=_CSR_GRAIN))
    t[_first_negative(t)] *= -1  # the raw tangents' sign rule
    return t


def _probe_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sorted random probe of at most _PROBE of n rows (all of them when there are fewer)."""
    return np.sort(rng.choice(n, size=_PROBE, replace=False)) if n > _PROBE else np.arange(n)


def _noise_level(P: np.ndarray, noise_var: float, nn, ind: np.ndarray, k: int, rng: np.random.Generator) -> float:
    """The noise per coordinate sigma: from the discarded principal directions when there are some, else the mean
    variance across the leading direction of the 3k-point neighbourhoods (the precomputed table's without a
    neighbour index) of a random probe of at most _PROBE points, its median over the probe."""
    if math.isfinite(noise_var):
        return math.sqrt(noise_var)
    n, m = P.shape
    probe = _probe_rows(n, rng)
    size = min(n, 3 * k + 1)
    hood = (ind[probe] if nn is None else nn.kneighbors(P[probe], n_neighbors=size, return_distance=False))
    Z = P[hood]
    Z = Z - Z.mean(axis=1, keepdims=True)
    lam = np.linalg.eigvalsh(np.einsum("pqa,pqb->pab", Z, Z) / hood.shape[1])
    across = np.maximum(lam[:, :-1], 0.0).sum(axis=1) / max(m - 1, 1)
    return math.sqrt(float(np.median(across)))


def _mode_window(P: np.ndarray, sigma: float, nn, ind: np.ndarray, k: int, rng: np.random.Generator, n_jobs):
    """Points Q and a table (n, K) of rows of Q: each point's window for its mode search.

    The window should reach _MODE_RADIUS sigma (a point two noise widths out on its strand sees the strand's
    middle) with about _MODE_NEIGHBOURS points. The K nearest points reach that radius on a sparse cloud; on a
    denser one (the reach r_K of the K nearest, measured on a probe, is shorter) the K nearest are taken among
    a random thinning that keeps a fraction (r_K / R)^D of the points, D the dimension in which the count
    grows with the radius between the k-th and K-th neighbours. Without a neighbour index the precomputed
    neighbours are the window.
    """
    n, m = P.shape
    if nn is None:
        return P, ind[:, 1:]
    K = min(_MODE_NEIGHBOURS, n - 1)

    def own_nearest():
        return P, nn.kneighbors(P, n_neighbors=K + 1, return_distance=False)[:, 1:]

    if n <= 4 * K:
        return own_nearest()
    radius = _MODE_RADIUS * sigma
    dist = nn.kneighbors(P[_probe_rows(n, rng)], n_neighbors=K + 1)[0]
    r_big, r_small = float(np.median(dist[:, K])), float(np.median(dist[:, min(k, K)]))
    if r_big >= radius:
        return own_nearest()
    dim = m
    if r_big > r_small > 0 and K > k:
        dim = min(max(math.log(K / k) / math.log(r_big / r_small), 1.0), float(m))
    size = max(K + 1, int(math.ceil(n * (r_big / radius) ** dim)))
    keep = np.sort(rng.choice(n, size=size, replace=False))
    return P[keep], NeighborIndex(P[keep], n_jobs or 1).kneighbors(P, n_neighbors=K, return_distance=False)


def _strand_modes(P: np.ndarray, tangents: np.ndarray, sigma: float, Q: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Each point moved to the mode of its strand's cross-section: mean shift across its tangent.

    A point y (starting at x_i) moves by the mean of the normal parts of q - y over its window (rows ``table[i]``
    of Q), weighted by exp(-|normal part|^2 / (2 sigma^2)) and limited to |along part| < _MODE_ALONG sigma, until
    it moves by less than _MODE_TOL sigma (at most _MODE_STEPS steps). With Gaussian noise of width sigma across a
    strand the step is half the way to the strand's middle; a point between two strands goes to the nearer one
    (the one a nearest-point projection would choose), its window's other strand adding little weight.
    """
    n, m = P.shape
    Y = np.array(P, dtype=np.float64, copy=True)
    if n == 0 or table.shape[1] == 0:
        return Y
    inv = 1.0 / (2.0 * sigma * sigma)
    reach, tol = _MODE_ALONG * sigma, _MODE_TOL * sigma
    rows = max(1, _MODE_CHUNK // (table.shape[1] * m))
    active = np.arange(n)
    for _ in range(_MODE_STEPS):
        if active.size == 0:
            break
        moving = np.zeros(active.size, dtype=bool)
        for lo in range(0, active.size, rows):
            a = active[lo:lo + rows]
            D = Q[table[a]] - Y[a, None, :]
            T = tangents[a]
            along = np.einsum("rqm,rm->rq", D, T)
            D -= along[..., None] * T[:, None, :]
            w = np.exp(-np.einsum("rqm,rqm->rq", D, D) * inv) * (np.abs(along) < reach)
            total = w.sum(axis=1)
            step = np.einsum("rq,rqm->rm", w, D) / np.where(total > 0, total, 1.0)[:, None]
            Y[a] += step
            moving[lo:lo + rows] = np.einsum("rm,rm->r", step, step) > tol * tol
        active = active[moving]
    return Y


def _drop_across_modes(W: sp.csr_matrix, tangents: np.ndarray, modes: np.ndarray, sigma: float):
    """W without its edges whose endpoints' modes lie more than _MODE_GAP sigma apart across the edge's tangent
    (the endpoints' tangents, sign-aligned and averaged), how many were removed, and the affinity of the kept
    edges, exp(-across^2 / (2 sigma^2)) (W's new pattern), by which the sign synchronisation scales them.

    Along one strand the modes coincide up to the mean shift's sampling noise; between two strands they lie a
    strand gap apart. Points of one strand pushed by the noise past the middle of the gap are ordered with the
    other strand, as the noise floor's nearest-point projection orders them.

    The affinity is for the edges the threshold misses. Between two arcs traversed in opposite directions (nested
    arcs), an edge across says "same sign" to the synchronisation, which is wrong for the direction of travel;
    the joining turn says otherwise through a few points. On nested arcs at 5 noise widths, data seed 7, the 78
    such edges left after the threshold outweighed the turn, and the innermost arc came out reversed (|tau| 0.063
    below the floor); scaled, it holds the floor (data seeds 1-8 and stage seeds 0-3: 28 of 32 within 0.01 of the
    floor against 24 without; the spiral 28 both ways).
    """
    C = sp.triu(W, k=1).tocoo()
    if C.nnz == 0:
        return W, 0, sp.csr_matrix(W.shape)
    i, j = C.row, C.col
    ti, tj = tangents[i], tangents[j]
    tm = ti + np.where(np.einsum("em,em->e", ti, tj) < 0, -1.0, 1.0)[:, None] * tj
    norm = np.linalg.norm(tm, axis=1, keepdims=True)
    tm = np.where(norm > 0, tm / np.where(norm > 0, norm, 1.0), ti)
    dy = modes[j] - modes[i]
    across = np.einsum("em,em->e", dy, dy) - np.einsum("em,em->e", dy, tm) ** 2
    drop = across > (_MODE_GAP * sigma) ** 2
    keep = ~drop
    i, j = i[keep], j[keep]
    U = sp.csr_matrix((C.data[keep], (i, j)), shape=W.shape)
    a = np.exp(-across[keep] / (2.0 * sigma * sigma))
    A = sp.csr_matrix((np.r_[a, a], (np.r_[i, j], np.r_[j, i])), shape=W.shape)
    return (U + U.T).tocsr(), int(np.count_nonzero(drop)), A


_FOLD_SMALLEST = 64  # the smallest sublevel set examined for a fold, in points
_FOLD_ARM = 0.25  # ... a second piece holding this share of the band's points is a second arm
_FOLD_OPPOSITE = -0.7  # ... when the two arms meet the bottom on opposite sides: cosine at most this
_FOLD_ROUNDS = 4  # at most this many rounds over the two ends (each mends at most one fold per end)


def _rank_window(low: np.ndarray, high: np.ndarray, lo: int, hi: int) -> sp.csr_matrix:
    """The graph of the edges (ranks ``low`` < ``high``) with both ends of rank lo .. hi - 1, on ranks - lo."""
    inside = (low >= lo) & (high < hi)
    return sp.csr_matrix((np.ones(int(np.count_nonzero(inside)), dtype=np.int8), (low[inside] - lo, high[inside] - lo)),
                         shape=(hi - lo, hi - lo))


def _fold(P: np.ndarray, f: np.ndarray, rows: np.ndarray, cols: np.ndarray):
    """(the points beyond a fold at the low end of the embedding ``f``, the size of its second arm), or None.

    ``rows``, ``cols``: the graph's edges, each once. A fold is an interior minimum of f: the tangent field turned
    through half a turn over a short stretch (the local PCA of a few dozen points at a thin spot or a tight turn
    saw across to another strand). Every edge agrees with its neighbours there, so the synchronisation keeps the
    turned signs, and the curve beyond the turn is laid out backwards. The points of the m lowest values of f then
    form a V: two arms leaving the minimum along the curve in opposite directions, where at an end of the curve
    they form one arm. For m = 64, 128, ... and n, the band of ranks m/4 .. m (the bottom quarter, about the turn,
    left out) is split into connected pieces. A fold needs a second piece holding at least _FOLD_ARM of the band,
    and both pieces meeting the bottom's piece about the minimum, on opposite sides of it: the centroids of their
    points with an edge into it, seen from its centroid, at a cosine of at most _FOLD_OPPOSITE. (A piece of the
    curve misplaced next to another arm -- a jump, not a fold -- also makes two pieces, but they meet the bottom
    from the same side or not at all: measured cosines 0.0 or -0.60 there, -0.79 to -0.98 at folds, with the
    whole bottom in place of its piece.) The largest scale at which a fold is seen decides (its arms reach
    furthest); the points beyond the fold are its second (smaller) arm and the bottom's points that this arm
    reaches in fewer graph steps than the first.
    """
    from scipy.sparse.csgraph import connected_components, dijkstra

    n = int(f.size)
    if n < _FOLD_SMALLEST:
        return None
    order = np.argsort(f, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    a, b = rank[rows], rank[cols]
    low, high = np.minimum(a, b), np.maximum(a, b)
    scales = [m for m in (_FOLD_SMALLEST << j for j in range(n.bit_length())) if m <= n]
    best = None
    for m in scales + ([n] if scales[-1] < n else []):
        lo = m // 4
        _, labels = connected_components(_rank_window(low, high, lo, m), directed=False)
        sizes = np.bincount(labels)
        if sizes.size > 1:
            first, second = np.argsort(sizes, kind="stable")[::-1][:2]
            if sizes[second] >= _FOLD_ARM * (m - lo):
                # the bottom's piece about the minimum (another piece would be a second extremum, not this one)
                bottom = connected_components(_rank_window(low, high, 0, lo), directed=False)[1]
                bottom = bottom == bottom[0]
                touch = (high >= lo) & (high < m) & (low < lo)  # edges from the band into the bottom's piece
                touch[touch] = bottom[low[touch]]
                piece = labels[high[touch] - lo]
                centre = P[order[:lo][bottom]].mean(axis=0)
                ends = []
                for which in (first, second):
                    contact = np.unique(high[touch][piece == which])
                    ends.append(P[order[contact]].mean(axis=0) - centre if contact.size else None)
                if ends[0] is not None and ends[1] is not None:
                    norm = float(np.linalg.norm(ends[0]) * np.linalg.norm(ends[1]))
                    if norm > 0 and float(ends[0] @ ends[1]) <= _FOLD_OPPOSITE * norm:
                        best = (int(sizes[second]), m, labels, first, second)
    if best is None:
        return None
    size, m, labels, first, second = best
    lo = m // 4
    # the bottom's points go with the arm that reaches them in fewer graph steps (within the m lowest points)
    arm = np.full(m, -1)
    arm[lo:][labels == first] = 0
    arm[lo:][labels == second] = 1
    seeds = np.flatnonzero(arm >= 0)
    _, _, source = dijkstra(_rank_window(low, high, 0, m), directed=False, indices=seeds, unweighted=True,
                            min_only=True, return_predecessors=True)
    side = np.where(source >= 0, arm[np.maximum(source, 0)], -1)
    return order[:m][side == 1], size


def _unfold(P, W, signs, state, resolve):
    """Mend folds at either end of the embedding (see _fold): flip the signs beyond a fold and solve again, keeping
    the new solution when that end has no fold left or a smaller one.

    ``state`` is the current solution as returned by ``resolve(signs)``: a tuple whose first item is the solve's
    Result. Returns (signs, state, folds mended).
    """
    C = sp.triu(W, k=1).tocoo()
    rows, cols = C.row.astype(np.int64), C.col.astype(np.int64)
    mended = 0
    known = {}  # end -> (the state it was measured on, its fold)
    for _ in range(_FOLD_ROUNDS):
        changed = False
        for sign in (1.0, -1.0):
            if sign in known and known[sign][0] is state:  # measured when this state was kept
                found = known[sign][1]
            else:
                found = _fold(P, sign * state[0].embedding, rows, cols)
            if found is None:
                continue
            trial = signs.copy()
            trial[found[0]] *= -1
            new = resolve(trial)
            left = _fold(P, sign * new[0].embedding, rows, cols)
            if left is None or left[1] < found[1]:  # no fold left at this end, or a smaller one
                signs, state, changed = trial, new, True
                known[sign] = (state, left)
                mended += 1
        if not changed:
            break
    return signs, state, mended


_PIECES_MAX = 14  # the exact search over the pieces' order and directions is done up to this many pieces (1 s)
_REASSEMBLE_ROUNDS = 2
_REASSEMBLE = True  # (tests switch it off to show what it mends)
# The reassembly starts where at least this many consecutive windows are split. Measured (2000-point close arms,
# 14 misses, and a random Fourier curve in d = 3): the longest run was 5-37 windows on each miss it mended, 2 on
# a run 0.012 below the floor; at n = 1e5 (spiral, d = 20, 5 noise widths, seed 5, 0.007 below the floor) 8 of
# 892 windows split in runs of 1-2 by outlier groups, whose pieces, joined, laid the curve's two halves in the
# wrong order (0.97 below the floor).
_SPLIT_RUN = 4


def _reassemble(P, W, signs, tangents, state, resolve):
    """Mend stretches laid at the values of another (see _strands and the Notes of stage): cut the points into
    pieces, each laid in order, join them end to end in the order and directions of least total cost (the
    distance between their ends, more across the tangents than along), and solve again on the pieces' own edges
    and the joins with the signs of the pieces turned back where they were laid backwards; keep the new solution
    when fewer windows of its ranks hold two strands.

    A stretch cut off from the curve at both ends (thin spots of the sampling where no edge across was kept) and
    held to another arm by a few edges fits every edge: neither the misfit nor a stretched edge shows it. It
    shows in the embedding's windows instead: two groups of points with no edge between them, at the same values.
    ``resolve(graph, signs)`` solves as ``state`` was solved. Returns (graph, signs, state, rounds kept).
    """
    from numtk.seriation._strands import piece_path, split_windows, strand_pieces, window_size

    C = sp.triu(W, k=1).tocoo()
    rows, cols = C.row.astype(np.int64), C.col.astype(np.int64)
    n = P.shape[0]
    m = window_size(state[0].embedding, rows, cols)
    split, _, _, run = split_windows(state[0].embedding, rows, cols, m)
    kept = 0
    graph = W
    for _ in range(_REASSEMBLE_ROUNDS):
        if run < _SPLIT_RUN:
            break
        f = state[0].embedding
        G = C if graph is W else sp.triu(graph, k=1).tocoo()  # round 1 reads W's edges, as above
        found = strand_pieces(f, G.row.astype(np.int64), G.col.astype(np.int64), m, max(m // 4, 8))
        if found is None or found[0].max() + 1 > _PIECES_MAX:
            break
        piece, core = found
        p = int(piece.max()) + 1
        order = np.argsort(f, kind="stable")
        ends = []
        for c in range(p):  # each piece's ends: its lowest and highest points in f among those of its chain
            pts = order[(piece[order] == c) & core[order]]
            e = max(1, min(m // 4, pts.size // 4))
            ends.append((pts[:e], pts[-e:]))
        centre = np.array([[P[a].mean(axis=0), P[b].mean(axis=0)] for a, b in ends])
        oriented = signs[:, None] * tangents
        out = np.array([[-oriented[a].sum(axis=0), oriented[b].sum(axis=0)] for a, b in ends])  # outward
        out /= np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-300)
        v = centre[None, None, :, :, :] - centre[:, :, None, None, :]  # from end (i, a) to end (j, b)
        dist = np.linalg.norm(v, axis=-1)
        unit = v / np.maximum(dist, 1e-300)[..., None]
        leave = np.einsum("iad,iajbd->iajb", out, unit)
        enter = -np.einsum("jbd,iajbd->iajb", out, unit)
        cost = dist * (3.0 - leave - enter)
        path, entered = piece_path(cost)
        trial = signs.copy()
        for c, e in zip(path, entered):
            if e == 1:  # entered by its high end: laid backwards
                trial[piece == c] *= -1
        same = piece[G.row] == piece[G.col]
        jr, jc = [], []
        for (a, ea), (b, eb) in zip(zip(path[:-1], [1 - e for e in entered[:-1]]), zip(path[1:], entered[1:])):
            A, B = ends[a][ea], ends[b][eb]
            near = np.argmin(np.linalg.norm(P[A][:, None, :] - P[B][None, :, :], axis=-1), axis=1)
            jr.append(A)
            jc.append(B[near])
        jr, jc = np.concatenate(jr), np.concatenate(jc)
        joins = np.full(jr.size, float(np.median(G.data)))

        def graph_of(keep):  # G's edges where `keep` holds, and the joins, stored both ways
            U = sp.coo_matrix((np.r_[G.data[keep], joins], (np.r_[G.row[keep], jr], np.r_[G.col[keep], jc])),
                              shape=(n, n))
            return (U + U.T).tocsr()

        trial_graph = graph_of(same)
        n_comp, labels = components(trial_graph, both_ways=True)
        if n_comp > 1:  # points whose edges all went to other pieces keep theirs
            apart = labels != np.argmax(np.bincount(labels))
            trial_graph = graph_of(same | apart[G.row] | apart[G.col])
        new = resolve(trial_graph, trial)
        now, _, _, run = split_windows(new[0].embedding, rows, cols, m)
        if now >= split:
            break
        graph, signs, state, split, kept = trial_graph, trial, new, now, kept + 1
    return graph, signs, state, kept


# --------------------------------------------------------------------------------------------------
# Sign synchronisation
# --------------------------------------------------------------------------------------------------

def _csr_arrays(W: sp.csr_matrix):
    """(indptr, indices, data) of a canonical CSR matrix, the index arrays in one dtype (int32 or int64)."""
    if not W.has_canonical_format:
        W = W.copy()
        W.sum_duplicates()
    dtype = np.int64 if W.indices.dtype == np.int64 or W.indptr.dtype == np.int64 else np.int32
    return (np.ascontiguousarray(W.indptr, dtype=dtype), np.ascontiguousarray(W.indices, dtype=dtype),
            np.ascontiguousarray(W.data, dtype=np.float64))


def _spanning_tree(indptr: np.ndarray, indices: np.ndarray, cost: np.ndarray):
    """Minimum spanning forest of the edge costs (one per stored entry of a symmetric CSR pattern), as
    (order, parent) of a breadth-first traversal of each component from its node of largest degree (parent -1
    at the roots), in the dtype of ``indptr``."""
    n = indptr.size - 1
    C = sp.csr_matrix((cost, indices, indptr), shape=(n, n))
    tree = minimum_spanning_tree(sp.triu(C, k=1))  # each edge once: half the entries for its sort
    tree = (tree + tree.T).tocsr()
    degree = np.diff(indptr)
    n_comp, labels = components(C, both_ways=True)
    order = np.empty(n, dtype=indptr.dtype)
    parent = np.full(n, -1, dtype=indptr.dtype)
    pos = 0
    if n_comp == 1:
        starts = [int(np.argmax(degree))]
    else:
        by_comp = np.lexsort((-degree, labels))  # per component, the node of largest degree first
        first = np.searchsorted(labels[by_comp], np.arange(n_comp))
        starts = by_comp[first].tolist()
    for start in starts:
        o, pred = breadth_first_order(tree, start, directed=False, return_predecessors=True)
        order[pos:pos + o.size] = o
        parent[o[1:]] = pred[o[1:]]
        pos += o.size
    return order, parent


def _synchronise(W: sp.csr_matrix, tangents: np.ndarray, max_iter: int, threads: int = 1,
                 return_tree: bool = False):
    """Z2 signs z maximising sum w_ij c_ij z_i z_j: spanning-tree propagation, then power iterations.

    The tree is a maximum spanning tree of w |c| (a minimum tree of 3 - w |c|, all costs positive) traversed
    breadth-first from each component's node of largest degree; ``return_tree`` also returns it as
    (order, parent) for the tree preconditioner of the Laplacian solve.
    """
    from numtk.seriation import _seriation_ext as ext

    indptr, indices, w = _csr_arrays(W)
    n = W.shape[0]
    T = np.ascontiguousarray(tangents, dtype=np.float64)
    c = ext.edge_cosines(T, indptr, indices, n_threads(threads, work=indices.size * T.shape[1], grain=_CSR_GRAIN))
    h = w * c
    order, parent = _spanning_tree(indptr, indices, 3.0 - np.abs(h))
    z = ext.tree_signs(indptr, indices, h, order, parent, np.ones(n))
    z, _ = ext.power_signs(indptr, indices, h, z, max_iter, n_threads(threads, work=indices.size, grain=_CSR_GRAIN))
    frustration = ext.frustration(indptr, indices, w, c, z)
    signs = z.astype(np.int8)
    if return_tree:
        return signs, frustration, (order, parent)
    return signs, frustration


# --------------------------------------------------------------------------------------------------
# Integration: the inhomogeneous Laplacian least-squares problem
# --------------------------------------------------------------------------------------------------

def _edge_weights_to_parent(W: sp.csr_matrix, parent: np.ndarray) -> np.ndarray:
    """w(v, parent[v]) for every node (1 at the roots)."""
    child = np.flatnonzero(parent >= 0)
    pw = np.ones(W.shape[0])
    if child.size:
        pw[child] = np.asarray(W[child, parent[child]]).ravel()
    return pw


def _coarse_grid(indptr, indices, w, rows):
    """Coarse space of the two-level preconditioner: greedy aggregates of the graph, the coarse Laplacian
    P^T L P grounded at one aggregate per component and its sparse LU factors (SuperLU, COLAMD).

    Returns (aggregate of each node, unknown of each aggregate (-1 if grounded), the factors as
    (Lp, Li, Lx, Up, Ui, Ux, perm_r, perm_c) with index arrays of the graph's index dtype).
    """
    from scipy.sparse.linalg import splu

    from numtk.seriation import _seriation_ext as ext

    dtype = indptr.dtype
    agg, n_agg = ext.aggregate(indptr, indices, w, _STRONG_EDGE)
    Wc = sp.csr_matrix((w, (agg[rows], agg[indices])), shape=(n_agg, n_agg))  # sums the duplicates
    Wc.setdiag(0.0)
    Wc.eliminate_zeros()
    Lc = (sp.diags(np.asarray(Wc.sum(axis=1)).ravel()) - Wc).tocsc()
    _, comp = components(Wc, both_ways=True)
    ground = np.zeros(n_agg, dtype=bool)
    ground[np.unique(comp, return_index=True)[1]] = True
    keep = np.flatnonzero(~ground)
    coarse = np.full(n_agg, -1, dtype=dtype)
    coarse[keep] = np.arange(keep.size, dtype=dtype)
    if keep.size == 0:
        z = np.zeros(1, dtype=dtype)
        return agg, coarse, (z, z[:0], np.zeros(0), z, z[:0], np.zeros(0), z[:0], z[:0])
    lu = splu(Lc[keep][:, keep].tocsc())
    L, U = lu.L.tocsc(), lu.U.tocsc()

    def idx(a):
        return np.ascontiguousarray(a, dtype=dtype)

    return agg, coarse, (idx(L.indptr), idx(L.indices), L.data, idx(U.indptr), idx(U.indices), U.data,
                         idx(lu.perm_r), idx(lu.perm_c))


def _integrate(X: np.ndarray, W: sp.csr_matrix, oriented: np.ndarray, *, solver: str = "cg",
               preconditioner: str = "aggregation", tol: float = 1e-8, max_iter: int | None = None, tree=None,
               threads: int = 1) -> Result:
    """Least-squares integration of the signed increments: L f = b, f mean zero per component.

    Returns a Result with ``embedding`` f, ``rhs`` b, ``increments`` (d per stored entry of W),
    ``residual`` ||b - L f|| / ||b||, ``misfit`` (the relative least-squares misfit
    ||W_E^1/2 (B f - d)|| / ||W_E^1/2 d||), ``n_iter`` (CG iterations; 0 for the direct solve, or the number of
    refinement steps) and ``success`` (the residual reached ``tol``). ``tree`` = (order, parent) of a spanning
    tree for the 'tree' preconditioner (computed as a maximum spanning tree of W when None).
    """
    from numtk.seriation import _seriation_ext as ext

    n = W.shape[0]
    indptr, indices, w = _csr_arrays(W)
    X = np.ascontiguousarray(X, dtype=np.float64)
    oriented = np.ascontiguousarray(oriented, dtype=np.float64)
    kernel_threads = n_threads(threads, work=indices.size, grain=_CSR_GRAIN)
    dv, b = ext.increments(X, oriented, indptr, indices, w,
                           n_threads(threads, work=indices.size * X.shape[1], grain=_CSR_GRAIN))
    rows = np.repeat(np.arange(n), np.diff(indptr))
    deg = np.bincount(rows, weights=w, minlength=n)
    n_comp, labels = components(W, both_ways=True)
    labels = labels.astype(indptr.dtype)
    bnorm = float(np.linalg.norm(b))
    if max_iter is None:
        max_iter = max(1000, n)

    def project(f):
        if n_comp == 1:
            return f - f.mean()
        return f - (np.bincount(labels, weights=f, minlength=n_comp) / np.bincount(labels, minlength=n_comp))[labels]

    def relative_residual(f):
        if bnorm == 0.0:
            return 0.0
        return float(np.linalg.norm(b - ext.laplacian_apply(indptr, indices, w, deg, f, kernel_threads)) / bnorm)

    nit, converged = 0, True
    if bnorm == 0.0:
        f = np.zeros(n)
    elif solver == "direct":
        from scipy.sparse.linalg import splu

        ground = np.zeros(n, dtype=bool)
        ground[np.unique(labels, return_index=True)[1]] = True  # the first node of each component
        keep = np.flatnonzero(~ground)
        L = (sp.diags(deg) - sp.csr_matrix((w, indices, indptr), shape=(n, n))).tocsc()
        lu = splu(L[keep][:, keep].tocsc())
        f = np.zeros(n)
        f[keep] = lu.solve(b[keep])
        f = project(f)
        residual = relative_residual(f)
        while residual > tol and nit < 3:  # iterative refinement with the same factors
            r = b - ext.laplacian_apply(indptr, indices, w, deg, f, kernel_threads)
            step = np.zeros(n)
            step[keep] = lu.solve(r[keep])
            f = project(f + step)
            residual = relative_residual(f)
            nit += 1
        converged = residual <= tol
    else:
        code = _PRECONDITIONER_CODE[preconditioner]
        empty, none = np.zeros(0, dtype=indptr.dtype), np.zeros(0)
        order, parent, pw = empty, empty, none
        aggregates, coarse, factors = empty, empty, (empty, empty, none, empty, empty, none, empty, empty)
        if preconditioner == "tree":
            if tree is None:
                tree = _spanning_tree(indptr, indices, 2.0 * w.max() - w)  # a maximum spanning tree of w
            order, parent = tree
            pw = _edge_weights_to_parent(W, parent)
        elif preconditioner == "aggregation":
            aggregates, coarse, factors = _coarse_grid(indptr, indices, w, rows)
        f, nit, _, converged = ext.pcg(indptr, indices, w, deg, b, np.zeros(n), labels, int(n_comp), code,
                                       order, parent, pw, aggregates, coarse, *factors, float(tol), int(max_iter),
                                       kernel_threads)
    f = project(f)
    residual = relative_residual(f)
    if not converged:
        hint = ("a `tol` this small is below the rounding floor of the system" if solver == "direct" else
                "increase `max_iter`, or use solver='direct'")
        warnings.warn(f"stage: the Laplacian solve stopped at relative residual {residual:.2e} > tol = {tol:g} "
                      f"after {nit} {'refinement steps' if solver == 'direct' else 'iterations'}; {hint}",
                      NumtkWarning, stacklevel=3)
    return Result(embedding=f, rhs=b, increments=dv, residual=residual, misfit=_misfit(f, rows, indices, w, dv),
                  n_iter=int(nit),
                  success=bool(converged))


def _misfit(f: np.ndarray, rows: np.ndarray, indices: np.ndarray, w: np.ndarray, dv: np.ndarray) -> float:
    """The relative least-squares misfit ||W_E^1/2 (B f - d)|| / ||W_E^1/2 d|| over the stored entries of a graph."""
    denom = float(np.sum(w * dv * dv))
    return float(np.sqrt(np.sum(w * (f[indices] - f[rows] - dv) ** 2) / denom)) if denom > 0 else 0.0


def _least_absolute(X: np.ndarray, W: sp.csr_matrix, oriented: np.ndarray, sol: Result,
                    **solve) -> tuple[Result, int]:
    """Refine the least-squares solution ``sol`` towards min_f sum w_ij |f_j - f_i - d_ij| by iteratively
    reweighted least squares: each step solves the weighted problem with weights w_ij eps / max(|r_ij|, eps),
    r the residuals of the previous step and eps = _IRLS_EPS times the median |d_ij| (a smoothed L1 loss; the
    weights never exceed w, so the system is never worse scaled than the first). The L1 loss is convex, so the
    steps approach its minimiser from any start.

    Why: a few edges between strands of the curve (neighbouring arms whose noise tubes touch) carry increments
    ~0 where the strands lie a whole turn apart. In least squares their squared residuals outweigh the
    stretch of the chain of along-curve edges, so the strands are glued together; in L1 an edge costs only its
    absolute residual, and as long as fewer (weight) such edges than along-curve edges cross each section of the
    curve, the solution follows the chain. Returns the final solve's Result, its ``misfit`` recomputed with the
    original weights, and the number of steps taken.
    """
    indptr, indices, w = _csr_arrays(W)
    rows = np.repeat(np.arange(W.shape[0]), np.diff(indptr))
    dv = sol.increments
    scale = float(np.median(np.abs(dv))) if dv.size else 0.0
    if scale == 0.0 or not np.isfinite(scale):
        return sol, 0
    eps = _IRLS_EPS * scale
    f = sol.embedding
    for steps in range(1, _IRLS_STEPS + 1):
        r = np.abs(f[indices] - f[rows] - dv)
        Wk = sp.csr_matrix((w * (eps / np.maximum(r, eps)), indices, indptr), shape=W.shape)
        sol = _integrate(X, Wk, oriented, **solve)
        change = float(np.max(np.abs(sol.embedding - f)))
        f = sol.embedding
        if change <= _IRLS_CHANGE * float(np.max(np.abs(f))):
            break
    return Result(**{**dict(sol), "misfit": _misfit(f, rows, indices, w, dv)}), steps


@constraints(X="array2d", n_neighbors="int>=1", weights="option", bandwidth="real>0", tangent_neighbors="int>=2",
             pca_components="int>=1", max_sync_iter="int>=0", solver="option", preconditioner="option", tol="real>0",
             max_iter="int>=1", loss="option", split_strands=("bool", "option"), allow_disconnected="bool",
             root="int>=0", neighbors="array2d", workers="workers", rng="rng")
def stage(X: ArrayLike, *, n_neighbors: int = 15, weights: str = "gaussian", bandwidth: float | None = None,
          tangent_neighbors="auto", pca_components="auto", max_sync_iter: int = 100, solver: str = "auto",
          preconditioner: str = "aggregation", tol: float = 1e-8, max_iter: int | None = None,
          loss: str = "auto", split_strands="auto", allow_disconnected: bool = True, root: int | None = None,
          neighbors=None, workers=1, rng=None) -> Result:
    r"""Order points sampled near an unknown curve by their position along it (STAGE).

    STAGE estimates a tangent direction at every point by local PCA, fixes the signs of all tangents
    jointly (Z2 synchronisation over the k-NN graph), turns neighbour differences into signed
    increments along the oriented tangents, and integrates them into one scalar embedding by the
    inhomogeneous least-squares problem

    .. math::

        \min_f \sum_{(i,j) \in E} w_{ij} (f_j - f_i - d_{ij})^2, \qquad
        d_{ij} = \langle (T_i + T_j)/2,\ x_j - x_i \rangle,

    a graph-Laplacian system :math:`L f = b` with :math:`b_i = -\sum_j w_{ij} d_{ij}`. Sorting ``f`` gives
    the order (up to reversal).

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        The points (finite). Exact duplicate rows share one embedding value. Points whose largest
        magnitude is beyond 2**400 or below 2**-400 (where squared distances overflow or underflow) are
        first scaled by a power of two, exactly (the order is invariant to scaling X; ``embedding`` is
        scaled back, and X so large that it overflows float64 is refused).
    n_neighbors : int, optional
        k of the symmetric k-NN graph (1 <= k <= number of distinct rows - 1).
    weights : {'gaussian', 'binary'}, optional
        Edge weights: :math:`\exp(-|x_i - x_j|^2 / h^2)` (raised to at least :math:`10^{-6}` times their
        median, so that the edges of outliers do not underflow) or 1.
    bandwidth : float, optional
        h for Gaussian weights; default: the median distance to the k-th neighbour.
    tangent_neighbors : int or 'auto', optional
        Neighbourhood size of the local PCA. 'auto' tries 2k (when at least 10), 3k, 6k, 12k, ... (at most
        n/2) on a random probe of at most 1000 points and keeps the first whose median eigenvalue ratio
        :math:`\lambda_2/\lambda_1` is at most 0.4 (else the size of the smallest median). Sizes above
        q = max(6k, 64) (large n) fit the q nearest points of a random thinning of the cloud that keeps a
        fraction q / size of it: the same radius at the cost of q points; only the kept points are fitted,
        and every point takes the tangent (and ratio) of its nearest kept point. A point whose own ratio at that
        size exceeds 0.4 (typically its neighbourhood reaches a second strand of the curve, such as the
        next arm of a spiral) takes the tangent of the largest smaller neighbourhood (the smaller sizes
        tried, then max(k, 10)) whose ratio is at most 0.05, if any. An int is used as given (exact
        neighbourhoods, no fallback).

        Whatever the size, the graph edges that run across the tangents are then dropped: an edge whose
        displacement is more than 30 degrees off the tangent (of its endpoint with the smaller ratio) and
        whose offset normal to it exceeds 6 times the lower quartile of those offsets over all edges. Such
        edges join strands closer than the k-NN radius; their increments are ~0 and would glue the strands
        together in the solve. Within one noisy tube the offsets are noise and (almost) no edge goes. If
        this splits the graph, the pieces are joined along the tangents (see `allow_disconnected`).
    pca_components : int, 'auto' or None, optional
        Project the points onto their leading principal directions before anything else (the neighbour
        search, local PCA and increments then work in that space; discarded directions carry only
        noise). None: no projection; an int: that many directions. 'auto' (default) projects only data
        with at least 20 features (and at least twice as many distinct rows), without precomputed
        `neighbors`, whose covariance spectrum is clearly low rank: it keeps the directions whose
        variance exceeds twice the upper edge :math:`\sigma^2 (1 + \sqrt{d/n})^2` of the noise bulk
        (:math:`\sigma^2` estimated by the median eigenvalue), at least 2, and only if some direction stands
        out and at most a quarter of the features do. Isotropic noise in many features is the usual case (e.g. gene
        expression); the projection makes the neighbour search tree-based instead of brute force.
    max_sync_iter : int, optional
        Power iterations of the sign synchronisation after the spanning-tree initialisation (at most
        2**31 - 1).
    solver : {'auto', 'cg', 'direct'}, optional
        The Laplacian solve. 'cg': compiled conjugate gradients on the complement of the constants,
        preconditioned by `preconditioner`; 'direct': sparse LU (SuperLU, COLAMD ordering) of the system
        grounded at one node per component, with up to three steps of iterative refinement. 'auto' is
        'cg'.
    preconditioner : {'aggregation', 'tree', 'jacobi'}, optional
        Preconditioner of ``solver='cg'``: 'aggregation' (default), the two-level preconditioner of the
        Notes; 'tree', the Laplacian of the synchronisation's spanning tree, solved exactly in O(n); or
        'jacobi', the degree diagonal (slow on long path-like graphs; for comparisons only).
    tol : float, optional
        Relative residual :math:`\|b - L f\| / \|b\|` at which the solve stops (``residual`` of the result
        is below it, for either solver; ``success`` is False, ``status`` says why and a warning says so
        when it is not reached).
    max_iter : int, optional
        Iterations of the conjugate gradients; default max(1000, n); at most 2**31 - 1.
    loss : {'l2', 'l1', 'auto'}, optional
        The integration's loss. 'l2': the least-squares problem above, one Laplacian solve.
        'l1': that solution refined towards least absolute deviations,
        :math:`\min_f \sum w_{ij} |f_j - f_i - d_{ij}|`, by up to 20 reweighted solves (each like the
        first): a few edges between strands of the curve (neighbouring arms of a spiral whose noise tubes
        touch) glue the strands together in least squares, and cost only their absolute residuals in L1.
        'auto' (default): 'l2', refined as 'l1' when its ``misfit`` exceeds 0.2 (the increments are far from
        integrable, as when strands are glued; on well-separated curves the misfit is about 0.05-0.1 and
        nothing is added: the benchmark curves of ``bench/`` stay below 0.06). On close arms at 5 noise
        widths (n = 3000, d = 20, data seeds 1-8), after the strand test, 'auto' held the noise floor to
        0.01 on 8 seeds of the nested arcs and 7 of the spiral, against 7 and 6 with 'l2' (worst
        :math:`|\tau|` below the floor 0.027 against 0.049; measured before folds were mended, see Notes,
        which holds the eighth); without the strand test it took the spiral at 7
        noise widths from 6 to 7. An L1 solution holds glued arms apart, so :func:`short_circuits` then
        reports stretched edges rather than glued rows.
    split_strands : {'auto', True, False}, optional
        Separate strands of the curve whose noise tubes touch (neighbouring arms of a spiral a few noise
        widths apart) before the solve. Every call averages the local-PCA tangent field over the k-NN
        graph, as lines (three steps; a point between two strands can otherwise get a tangent across
        them); the strand test first takes seven more steps. Each point is then moved across its
        tangent, by mean shift with a Gaussian of the noise width :math:`\sigma`, to the middle of its
        strand (its window: about 100 points within :math:`4\sigma`, of a random thinning of the cloud
        when it is dense, those within :math:`3\sigma` along the tangent counting); graph edges whose
        endpoints' modes lie more than :math:`2\sigma` apart across the tangent are dropped and the graph
        is solved again, the sign synchronisation weighing each kept edge by :math:`\exp(-a^2 / 2\sigma^2)`,
        a the distance of its endpoints' modes across the tangent. Points pushed by the noise past the
        middle of the gap go to the nearer strand, as the noise floor's nearest-point projection puts them.
        :math:`\sigma` is the noise per coordinate of the principal projection's discarded directions, or
        else the median variance across the leading local direction of 3k-point neighbourhoods.
        'auto' (default): when the first solve's ``misfit`` exceeds 0.2 (glued strands leave increments
        far from integrable; a well-separated curve stays near 0.05 and costs nothing more). True: always;
        False: never.
        ``strand_edges`` counts the dropped edges. On close arms (n = 3000, d = 20, data seeds 1-8) it
        took the spiral and the nested arcs at 6 noise widths from 0 and 1 of 8 seeds within 0.01 of
        the noise floor to 8 of 8; see the tutorial's per-seed table.
    allow_disconnected : bool, optional
        True (default): a disconnected graph is joined along a spanning tree of its components, each
        link the pair (among each point's 48 nearest outside its component) of least
        :math:`|e|(1 + 4 (e_\perp / |e|)^2)`, with :math:`e_\perp` the offset normal to the tangent: the gap
        along the curve rather than a jump to a nearby strand. ``n_components`` reports how many
        components the k-NN graph had. False: a disconnected k-NN graph raises ValueError (pieces left
        by dropping transverse edges are always joined).
    root : int, optional
        A row at the start of the curve: the sign of the embedding puts it nearer the low end. By
        default the entry of largest magnitude is made positive.
    neighbors : tuple of two arrays, optional
        Precomputed neighbours ``(distances, indices)``, each of shape (n_samples, q), each row sorted by
        distance with the point itself first, as ``NearestNeighbors(n_neighbors=q).fit(X).kneighbors(X)``
        returns them (an approximate search works too, for data too large for an exact one). Needs
        ``q > n_neighbors`` and distinct rows of X; local PCA neighbourhoods are capped at q.
    workers : int or map-like callable, optional
        An int: threads of the compiled kernels and jobs of the neighbour search (-1: all cores). A
        map-like callable (``Pool.map``, a wrapped ``dask.distributed`` client map, ...): runs the local
        PCA as tasks of 4096 neighbourhoods each; the result does not depend on it.
    rng : {None, int, numpy.random.Generator}, optional
        Draws the probe of the 'auto' neighbourhood size (more than 1000 distinct rows) and the thinnings
        of large neighbourhoods. Nothing is random below 1001 distinct rows; pass an int or a Generator
        for reproducible results above.

    Returns
    -------
    res : Result
        With fields

        order : ndarray of int64, shape (n_samples,)
            The rows by position along the curve (the stable argsort of ``embedding``).
        embedding : ndarray of float64, shape (n_samples,)
            The position of each row: mean zero, approximately arc length, in the units of X.
        tangents : ndarray of float64, shape (n_samples, n_features)
            The raw unit tangent of each row, in the coordinates of X.
        signs : ndarray of int8, shape (n_samples,)
            +-1: the oriented tangents are ``signs[:, None] * tangents``.
        graph : scipy.sparse.csr_matrix, shape (m, m)
            The edge weights used, over the m distinct rows (without the transverse edges, with
            the joining ones; after a reassembly, see ``n_reassembled``, without the edges between
            pieces and with the joins).
        inverse : ndarray of int, shape (n_samples,)
            The graph node of each row.
        residual : float
            The relative residual :math:`\|b - L f\| / \|b\|` of the Laplacian solve.
        misfit : float
            The relative least-squares misfit :math:`\|W_E^{1/2}(B f - d)\| / \|W_E^{1/2} d\|`,
            the non-integrable share of the increments (in [0, 1] for the least-squares solution; after
            the L1 refinement of `loss` it can exceed 1).
        n_iter : int
            Iterations of the solve: conjugate-gradient iterations, or the direct solve's
            refinement steps; 0 when no solve was needed.
        success : bool
            Whether ``residual`` is at most `tol`.
        status : str
            ``'converged'`` (``residual <= tol``; also when no solve was needed) or
            ``'max_iterations'`` (the solve stopped first: `max_iter` conjugate-gradient
            iterations, or three refinement steps of the direct solve; a warning says so too).
        message : str
            A sentence describing ``status``.
        n_components : int
            Connected components of the k-NN graph, before joining.
        labels : ndarray of int, shape (n_samples,)
            The component of each row in the k-NN graph.
        frustration : float
            The weight share of the edges whose tangent signs the synchronisation leaves
            inconsistent (the weights it used: after the strand test, scaled by the modes' affinity;
            the synchronisation's signs, before any fold is mended).
        tangent_neighbors : int
            The local-PCA neighbourhood size used (0 when no tangent was fitted).
        tangent_fit_points : int
            The points each tangent is fitted to: fewer than ``tangent_neighbors`` when a thinned
            cloud is used.
        isotropy : ndarray of float64, shape (n_samples,)
            :math:`\lambda_2/\lambda_1` of the neighbourhood each row's tangent came from.
        transverse_edges : int
            k-NN graph edges dropped as running across the tangents.
        unshared_edges : int
            k-NN graph edges dropped (before the transverse test) because their endpoints share few
            neighbours (shared neighbours over the smaller degree below half its median over all edges):
            edges between strands whose noise tubes touch. An edge whose two endpoints are ends of the
            graph left, facing each other (a thin spot of the sampling along one strand), is kept.
        strand_edges : int
            Graph edges dropped because their endpoints' strand modes lie apart (see `split_strands`);
            0 when the test did not run or dropped nothing.
        n_unfold : int
            Folds mended: an interior extremum of the embedding where the tangent field turned through
            half a turn over a short stretch and the curve beyond was laid out backwards; the signs
            beyond each were flipped and the solve run again (see Notes). 0 when there was none.
        n_reassembled : int
            Rounds (at most two) in which pieces of the curve laid side by side at the same values were
            joined end to end again and the solve kept (see Notes); 0 when there were none. ``graph`` is
            then the graph of the last such solve: the pieces' own edges and the joins.
        n_reweight : int
            Reweighted solves of the L1 refinement (see `loss`); 0 when it did not run. ``residual``,
            ``n_iter`` and ``success`` are those of the last solve, ``misfit`` that of the final
            embedding under the original weights.
        pca_components : int or None
            The principal directions kept by `pca_components`, or None without a projection.

    Notes
    -----
    The steps follow the reconstruction in the project's specification (the paper's text and code were
    not available).

    *The solve.* :math:`L = D - W` is singular (constant null vector per component) and the system is
    consistent (:math:`1^T b = 0`); the conjugate gradients run on the complement of the per-component
    constants, where :math:`L` is definite, and stop when :math:`\|b - L f\| \le` `tol` :math:`\|b\|`,
    checked on the recomputed residual. A k-NN graph along a curve is path-like at large scale: its
    smallest nonzero eigenvalue falls like :math:`k^3/n^2`, so plain or Jacobi-preconditioned conjugate
    gradients need O(n/k) iterations. The 'tree' preconditioner, the exact O(n) inverse of the Laplacian
    of the synchronisation's maximum spanning tree, removes that on thin graphs but degrades once the
    noise tube is many points wide (measured on the benchmark helix in d = 100: 300 iterations at
    n = 1e4, 1150 at n = 1e5). The default 'aggregation' preconditioner is two-level:
    :math:`M^{-1} = D^{-1} + P (P^T L P)^{-1} P^T`, with :math:`P` the indicator matrix of greedy
    aggregates of the graph (a node and its free neighbours along strong edges, those of weight at least
    a quarter of the larger of the two endpoints' heaviest edges; about k nodes each) and the coarse
    Laplacian, grounded per component, factored once by SuperLU. The coarse space carries the error that
    is smooth along the graph, Jacobi the rough error. The coarse graph is path-like too, so its sparse
    factors stay nearly as sparse as the graph (fill about 2) and the coarse solve is linear in n.
    Restricting aggregates to strong edges keeps a weak edge to another strand (the next arm of a
    spiral) from tying two strands into one aggregate: with every edge the iteration count on the
    spiral grew from 70 to 1294 between n = 2e4 and 1e5; along strong edges it stayed at 46-59 at
    `tol` = 1e-8 from n = 2e3 to 1e5 on the helix and the spiral (helix, n = 1e6: 50). 'direct'
    factors the grounded system (SuperLU, COLAMD) and refines; exact, but its fill grows with the width
    of the tube (n = 1e5: tens of seconds).

    *Folds.* Where the local PCA of a few dozen points sees across to another strand (a thin spot, the
    tight innermost turn of a spiral), the tangent field can turn through half a turn over a short
    stretch. Every edge agrees with its neighbours there, so the synchronisation keeps the turned
    signs, and the curve beyond is laid out backwards: the embedding folds, with an extremum inside the
    curve. When the first solve's ``misfit`` exceeds 0.2 (as for `split_strands` and `loss`), each end
    of the final embedding (after the L1 refinement, whose solution glued strands do not bend) is
    examined: for m = 64, 128, ... and n points of lowest (highest) value, the band between the m/4-th
    and the m-th splits into connected pieces of the graph. At an end of the curve it is one piece; at
    a fold, two arms leave the extremum along the curve. A second piece of at least a quarter of the
    band whose points, like the first's, have edges into the extremum's piece of the bottom quarter, on
    the opposite side of it (cosine of at most -0.7 between the two sets of contact points, seen from
    its centroid), marks a fold. At the largest such m, the signs of the smaller arm, and of the
    bottom's points nearer to it in graph steps, are flipped and the graph solved (and refined) again,
    kept if the fold is gone or smaller (up to four rounds; ``n_unfold`` counts the folds mended). On
    close arms at 5 noise widths (n = 3000, d = 20, data seeds 1-8 and stage seeds 0-3) the spiral then
    held the noise floor to 0.01 on 32 of 32 runs instead of 29, the nested arcs on 32 as before; with
    2000 points, the spiral at 8 noise widths on 8 seeds of 8 instead of 7 (the miss was 0.39). On
    make_curve's six kinds away from close arms nothing moved. A stretch misplaced next to another arm
    (a jump) also leaves two pieces, but they meet the bottom from the same side, and two extrema
    inside the curve (a Z) are not found from the ends.

    *Stretches laid side by side.* A stretch cut off from the curve at thin spots of the sampling (no
    edge across kept) and held to another arm by a few edges fits every edge: the misfit stays low and
    no edge is stretched, but the stretch lies at the values of another, far from it in space. The final
    embedding shows it: windows of m consecutive ranks (m = 4 times the graph's median degree, and at
    least 8 times the median rank difference of its edges; windows overlap by half) whose points the
    graph holds in two groups of at least a sixth of the window, with no edge between them
    (:func:`short_circuits` reports them as ``split_windows``). Where at least 4 consecutive windows are
    split (outliers that keep to themselves split one or two here and there), the groups are linked from
    window to window through the points they share (a link where they share at least a third of the
    smaller; a group linked to two on one side, where two strands meet, is cut out), the chains of links
    of at least m/4 points are the pieces, and every other point joins the piece it reaches in the
    fewest graph steps. The order and directions of the pieces (up to 14) that join them end to end at
    least cost are found exactly (dynamic programming over subsets); a join from end a to end b costs
    :math:`|v| (3 - \cos(u_a, v) - \cos(u_b, -v))`, v the vector between the centroids of the two
    ends' extreme m/4 points and u each end's outward oriented tangent, so that a join along the curve
    costs about :math:`|v|` and one across to another arm about :math:`3|v|`. The graph is solved (and refined) again on
    the pieces' own edges and the joins, with the signs of the pieces laid backwards flipped, and the
    solution kept if fewer windows of the original graph are split (up to two rounds,
    ``n_reassembled``). On 2000-point close arms at 5-7 noise widths (spiral and nested arcs, d = 20
    and 100, 8 configurations, data seeds 1-8) the noise floor then held to 0.01 on 59 of 64 runs
    instead of 50 (the worst 0.13 below it instead of 0.64); on make_curve's six kinds away from close
    arms three random Fourier curves in d = 3 rose from 0.37-0.77 below the floor to 0.016-0.032 below
    it, and nothing else moved. The folds above are mended this way too. A glued stretch inside one
    window's group (no edge-free split) is not seen. Where no run of split windows starts it, the check
    costs a few passes over the graph's edges (at n = 1e6 about 2 s).

    *Costs.* With the default principal projection the neighbour search runs on a few coordinates
    with a k-d tree instead of brute force in all features, and local PCA, synchronisation and solve
    are linear in n: at a fixed curve and noise the 'auto' neighbourhood size grows with n, but the
    local PCA fits a bounded number of points at a thinning of the cloud whose size stays about
    constant. Each compiled kernel uses as many of the `workers` threads as its work justifies. For
    more than 1000 distinct rows the result depends on `rng` (the probe of the neighbourhood size and,
    at large n, the thinnings).

    References
    ----------
    .. [1] STAGE: linear seriation from noisy point clouds, ICML 2026.
    .. [2] X. Jiang, L.-H. Lim, Y. Yao, Y. Ye, "Statistical ranking and combinatorial Hodge theory",
       Math. Program. 127, 203-244, 2011.
    .. [3] N. Boumal, "Nonconvex phase synchronization", SIAM J. Optim. 26, 2355-2377, 2016.
    .. [4] D. A. Spielman, S.-H. Teng, "Nearly linear time algorithms for preconditioning and solving
       symmetric, diagonally dominant linear systems", SIAM J. Matrix Anal. Appl. 35, 835-885, 2014.

    Examples
    --------
    >>> from numtk.seriation import make_curve, order_agreement, stage
    >>> X, t = make_curve("helix", n_samples=1000, n_features=20, noise=0.01, rng=0)
    >>> res = stage(X, n_neighbors=10)
    >>> order_agreement(res.order, t) > 0.99
    True
    >>> res.pca_components, bool(res.residual < 1e-8)
    (3, True)
    """
    # An extreme scale (squared distances overflowing or underflowing) is removed exactly by a power of two: the
    # order is invariant to scaling X; the embedding is scaled back at the end.
    X, scale = scaled_points(X)
    check_option(weights, "weights", WEIGHTS)
    check_option(solver, "solver", SOLVERS)
    check_option(preconditioner, "preconditioner", PRECONDITIONERS)
    check_option(loss, "loss", LOSSES)
    if isinstance(split_strands, str):
        check_option(split_strands, "split_strands", ("auto",))
    else:
        split_strands = check_bool(split_strands, "split_strands")
    check_bool(allow_disconnected, "allow_disconnected")
    max_sync_iter = check_int(max_sync_iter, "max_sync_iter", minimum=0, maximum=_MAX_ITER)
    tol = check_real(tol, "tol", low=0.0, high=1.0, low_open=True)
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", minimum=1, maximum=_MAX_ITER)
    bandwidth = scaled_bandwidth(bandwidth, scale)
    rng = normalize_rng(rng)
    # an int runs native threads (and scikit-learn's n_jobs); a map-like callable carries the local PCA
    threads = workers if callable(workers) else n_threads(workers)
    kernel_threads = 1 if callable(workers) else threads
    n_jobs = 1 if callable(workers) else threads
    n, dim = X.shape
    if isinstance(pca_components, str) and pca_components != "auto":
        raise TypeError(f"`pca_components` must be an int, 'auto' or None; got {pca_components!r}")
    if pca_components is not None and not isinstance(pca_components, str):
        pca_components = check_int(pca_components, "pca_components", minimum=1, maximum=dim)
    U, inverse = _distinct_rows(X)
    m = U.shape[0]
    if root is not None:
        root = check_int(root, "root", minimum=0, maximum=n - 1)
    if tangent_neighbors != "auto":
        tangent_neighbors = check_int(tangent_neighbors, "tangent_neighbors", minimum=2, maximum=max(2, m))
    k = check_int(n_neighbors, "n_neighbors", minimum=1)
    if m >= 3 and dim > 1:
        check_neighbor_count(k, n, m)
    if neighbors is not None and m >= 3 and dim > 1:
        if m != n:
            raise ValueError("`neighbors` needs distinct rows of `X`; X has duplicate rows")
        dist, ind = _check_neighbors(neighbors, n, k)
        if scale != 1.0:
            dist = dist / scale
    with blas_threads(kernel_threads):  # `workers` bounds BLAS too (a d x d eigh and the Gram matrix)
        basis, noise_var = _principal_basis(U, pca_components, neighbors is not None) if m >= 3 else (None, math.nan)
        P = U if basis is None else _project(U, basis)
    if m < 3 or P.shape[1] == 1:
        return _small_or_line(X, P, inverse, root, basis, scale)
    sizes = _neighbourhood_sizes(m, k, tangent_neighbors)
    if neighbors is not None:
        nn = None
        sizes = sorted({min(size, ind.shape[1]) for size in sizes})
    else:
        # One query of all points serves the graph (k); local-PCA sizes up to max(6k, 64) are queried exactly when
        # chosen (on the probe first), larger ones on a thinning (see _Neighbourhoods). A query of 6k neighbours
        # for every point cost 4x the k-neighbour one at n = 1e5 and is not needed once 'auto' picks a larger size.
        nn = NeighborIndex(P, n_jobs)
        query = min(m, k + 1)
        if tangent_neighbors != "auto":
            query = min(m, max(query, tangent_neighbors))
        dist, ind = nn.kneighbors(P, n_neighbors=query)  # self first: the rows are distinct
    W, _ = graph_from_neighbors(dist[:, 1:k + 1], ind[:, 1:k + 1], weights=weights, bandwidth=bandwidth)
    n_comp, labels = components(W, both_ways=True)
    if n_comp > 1 and not allow_disconnected:
        connect(W, P, allow_disconnected)  # raises
    hoods = _Neighbourhoods(P, nn, ind, rng, None if n_jobs == 1 else n_jobs, fit=6 * k)
    tangents, isotropy, kp = _tangents(P, hoods, sizes, threads, rng, k)
    fit_points = min(int(kp), int(hoods.fit)) if hoods.thinned(kp) else int(kp)
    del dist, hoods
    graph_nb = np.ascontiguousarray(ind[:, :k + 1])
    tangents = _smooth_tangents(tangents, isotropy, graph_nb, threads=kernel_threads)
    W, n_unshared = _drop_unshared(W, kernel_threads, P, tangents)
    shared = W
    W, n_transverse = _drop_transverse(P, shared, tangents, isotropy)
    if solver == "auto":
        solver = "cg"
    solve = dict(solver=solver, preconditioner=preconditioner, tol=tol, max_iter=max_iter, threads=kernel_threads)
    orient_args = (tangents, isotropy, weights, max_sync_iter, n_jobs, solve)
    cut = bool(n_transverse or n_unshared or n_comp > 1)
    graph, signs, frustration, sol = _join_and_solve(P, W, cut, *orient_args)
    n_strand = 0
    hard = sol.misfit > _ROBUST_MISFIT  # strands glued, or signs turned: the increments are far from integrable
    if split_strands is True or (split_strands == "auto" and hard):
        with single_blas_thread():  # a thousand tiny eigenproblems
            sigma = _noise_level(P, noise_var, nn, ind, k, rng)
        if sigma > 0:
            tangents = _smooth_tangents(tangents, isotropy, graph_nb, _SPLIT_SMOOTH_STEPS, kernel_threads)
            W, n_transverse = _drop_transverse(P, shared, tangents, isotropy)
            Q, table = _mode_window(P, sigma, nn, ind, k, rng, None if n_jobs == 1 else n_jobs)
            W, n_strand, affinity = _drop_across_modes(W, tangents, _strand_modes(P, tangents, sigma, Q, table),
                                                       sigma)
            del Q, table
            orient_args = (tangents,) + orient_args[1:]
            graph, signs, frustration, sol = _join_and_solve(P, W, True, *orient_args, affinity=affinity)
    del ind, graph_nb, shared
    W = graph

    def refine(signs, sol, graph=None):  # the L1 refinement where `loss` asks for it: (solution, reweighted solves)
        graph = W if graph is None else graph
        if loss == "l1" or (loss == "auto" and sol.misfit > _ROBUST_MISFIT):
            return _least_absolute(P, graph, signs[:, None] * tangents, sol, **solve)
        return sol, 0

    state = refine(signs, sol)
    n_unfold = 0
    if hard:  # folds are looked for in the final embedding; each trial is solved (and refined) the same way
        signs, state, n_unfold = _unfold(
            P, W, signs, state, lambda trial: refine(trial, _integrate(P, W, trial[:, None] * tangents, **solve)))
    n_reassembled = 0
    if _REASSEMBLE:
        W, signs, state, n_reassembled = _reassemble(
            P, W, signs, tangents, state,
            lambda G, trial: refine(trial, _integrate(P, G, trial[:, None] * tangents, **{**solve, "tree": None}), G))
    sol, n_reweight = state
    f = orient(sol.embedding, None if root is None else inverse[root])
    if basis is not None:  # tangents in the coordinates of X, with the raw sign rule applied there
        tangents, signs = _to_features(tangents, basis, signs)
    embedding = _unscale(f[inverse], scale)
    if sol.success:
        status, message = "converged", f"the relative residual of the Laplacian solve is below tol = {tol:g}"
    else:
        status, message = ("max_iterations", f"the Laplacian solve stopped at relative residual {sol.residual:.2e} "
                           f"> tol = {tol:g} after {sol.n_iter} "
                           f"{'refinement steps' if solver == 'direct' else 'iterations'}")
    return Result(order=np.argsort(embedding, kind="stable"), embedding=embedding, tangents=tangents[inverse],
                  signs=signs[inverse], graph=W, inverse=inverse, residual=sol.residual, misfit=sol.misfit,
                  n_iter=sol.n_iter, success=sol.success, status=status, message=message, n_components=int(n_comp),
                  labels=labels[inverse], frustration=frustration, tangent_neighbors=int(kp),
                  tangent_fit_points=fit_points, isotropy=isotropy[inverse], transverse_edges=int(n_transverse),
                  unshared_edges=int(n_unshared), strand_edges=int(n_strand), n_unfold=int(n_unfold),
                  n_reassembled=int(n_reassembled),
                  n_reweight=int(n_reweight),
                  pca_components=None if basis is None else int(basis.shape[1]))


def _join_and_solve(P, W, cut, tangents, isotropy, weights, max_sync_iter, n_jobs, solve, affinity=None):
    """Join the pieces of the graph W (``cut``: edges were removed, it may be in pieces), synchronise the signs,
    solve; returns (the joined graph, signs, frustration, solution) and puts the spanning tree in ``solve``.

    ``affinity`` (optional, W's pattern) scales the weights of the synchronisation only (see _drop_across_modes);
    the joining edges keep theirs."""
    n_split, split = components(W, both_ways=True) if cut else (1, None)
    bridges = np.zeros((0, 2), dtype=np.int64)
    if n_split > 1:  # join the pieces along the tangents: the gap along the curve, not the jump to another strand
        W, bridges = bridge_components(P, W, split, n_split, tangents, isotropy, n_jobs)
    if W.nnz and weights == "gaussian":  # a new matrix: W may be the caller's
        W = sp.csr_matrix((np.maximum(W.data, _WEIGHT_FLOOR * float(np.median(W.data))), W.indices, W.indptr),
                          shape=W.shape)
    sync = W
    if affinity is not None:
        ends = (np.r_[bridges[:, 0], bridges[:, 1]], np.r_[bridges[:, 1], bridges[:, 0]])
        scale = affinity + sp.csr_matrix((np.ones(2 * len(bridges)), ends), shape=W.shape)
        sync = W.multiply(scale).tocsr()
    signs, frustration, solve["tree"] = _synchronise(sync, tangents, max_sync_iter, solve["threads"],
                                                     return_tree=True)
    sol = _integrate(P, W, signs[:, None] * tangents, **solve)
    return W, signs, frustration, sol


def _unscale(embedding: np.ndarray, scale: float) -> np.ndarray:
    """The embedding in the units of X (see scaled_points); refused when that overflows float64."""
    if scale == 1.0:
        return embedding
    with np.errstate(over="ignore"):
        out = embedding * scale
    if not np.all(np.isfinite(out)):
        raise ValueError("`X` is too large: the embedding (an arc length in the units of X) overflows float64; "
                         "divide X by a constant first (the order is invariant to scaling X)")
    return out


def _to_features(tangents: np.ndarray, basis: np.ndarray, signs: np.ndarray):
    """Tangents of the projected points as unit vectors of the original features (first nonzero coordinate
    positive); signs flip with them, so the oriented tangents are unchanged."""
    T = tangents @ basis.T
    norm = np.linalg.norm(T, axis=1, keepdims=True)
    T /= np.where(norm > 0, norm, 1.0)
    flip = _first_negative(T)
    T[flip] *= -1
    signs = np.where(flip, -signs, signs).astype(np.int8)
    return T, signs


def _first_negative(T: np.ndarray) -> np.ndarray:
    """Rows of T whose first nonzero coordinate is negative (the raw tangents' sign rule makes it positive)."""
    first = np.argmax(T != 0, axis=1)
    return T[np.arange(T.shape[0]), first] < 0


def _check_neighbors(neighbors, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate precomputed ``(distances, indices)`` neighbours (self first, sorted by distance)."""
    if not isinstance(neighbors, (tuple, list)) or len(neighbors) != 2:
        raise TypeError("`neighbors` must be a pair (distances, indices) as returned by kneighbors")
    dist = np.asarray(neighbors[0], dtype=np.float64)
    ind = as_array(neighbors[1], "neighbors[1]", ndim=2, kinds="iu")
    if dist.shape != ind.shape or dist.ndim != 2 or dist.shape[0] != n:
        raise ValueError(f"`neighbors` must hold two arrays of shape (n_samples, q) = ({n}, q); got "
                         f"{dist.shape} and {ind.shape}")
    if ind.shape[1] < k + 1:
        raise ValueError(f"`neighbors` must hold more than n_neighbors = {k} neighbours per point (the "
                         f"point itself first); got q = {ind.shape[1]}")
    if ind.min() < 0 or ind.max() >= n:
        raise ValueError(f"`neighbors` indices must lie in [0, {n})")
    if not np.array_equal(ind[:, 0], np.arange(n)):
        raise ValueError("`neighbors` must list each point itself first, as kneighbors(X) does")
    if not np.all(np.isfinite(dist)) or dist.min() < 0 or np.any(np.diff(dist, axis=1) < 0):
        raise ValueError("`neighbors` distances must be finite, non-negative and sorted in each row")
    return dist, ind.astype(np.int64, copy=False)


def _small_or_line(X, U, inverse, root, basis=None, scale=1.0) -> Result:
    """n_distinct <= 2 or one coordinate: the embedding is exact without the graph machinery."""
    m, dim = U.shape
    if dim == 1:
        f = U[:, 0] - U[:, 0].mean()  # increments are exact differences: the solve returns x - mean(x)
        tangents = np.ones((m, 1))
    elif m == 1:
        f = np.zeros(1)
        tangents = np.zeros((1, dim))
    else:
        half = 0.5 * np.linalg.norm(U[1] - U[0])
        f = np.array([-half, half])
        t = (U[1] - U[0]) / (2 * half)
        tangents = np.vstack([t, t])
    if m != 2 or root is not None:  # two points keep their row order: [-h, +h]
        f = orient(f, None if root is None else inverse[root])
    signs = np.ones(m, dtype=np.int8)
    if basis is not None:
        tangents, signs = _to_features(tangents, basis, signs)
    embedding = _unscale(f[inverse], scale)
    n = X.shape[0]
    return Result(order=np.argsort(embedding, kind="stable"), embedding=embedding, tangents=tangents[inverse],
                  signs=signs[inverse], graph=sp.csr_matrix((m, m)), inverse=inverse, residual=0.0, misfit=0.0,
                  n_iter=0, success=True, status="converged",
                  message="exact without a solve (at most two distinct rows, or one coordinate)", n_components=1,
                  labels=np.zeros(n, dtype=np.int64), frustration=0.0, tangent_neighbors=0, tangent_fit_points=0,
                  isotropy=np.zeros(n), transverse_edges=0, unshared_edges=0, strand_edges=0, n_unfold=0,
                  n_reassembled=0, n_reweight=0,
                  pca_components=None if basis is None else int(basis.shape[1]))
