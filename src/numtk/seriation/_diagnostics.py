"""Diagnostics of a STAGE result computed from the data and the result alone."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_real
from numtk.seriation._strands import split_windows, window_size

__all__ = ["short_circuits"]

_GLUED = 0.5  # a row whose local misfit exceeds this is counted in `glued`


@constraints(X="array2d", result="option", factor="real>0")
def short_circuits(X: ArrayLike, result, *, factor: float = 10.0) -> Result:
    r"""Graph edges that a STAGE embedding stretches: the signature of arms short-circuited.

    Every edge (i, j) of ``result.graph`` joins two points close in space and carries the signed step
    :math:`d_{ij} = \langle (T_i + T_j)/2, x_j - x_i \rangle` along the oriented tangents
    :math:`T = s \, t` (``signs`` times ``tangents``); along one strand of the curve the embedding
    follows it, :math:`f_j - f_i \approx d_{ij}`. An edge that joins two different strands (neighbouring
    arms of a spiral, closer than the neighbour radius) has :math:`d_{ij} \approx 0` while the points
    lie a whole turn apart along the curve: either the embedding keeps them apart and the edge is
    stretched by about a turn, or the edge glues the arms and the edges around it are stretched
    instead. This function reports the edges whose mismatch :math:`|f_j - f_i - d_{ij}|` exceeds
    ``factor`` times the median step :math:`h = \operatorname{median} |d_{ij}|` (the few edges
    the embedding held apart) and, per row, the misfit of its edges (high over whole stretches
    where many edges glued the arms and the embedding stopped following the steps).

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        The points given to :func:`stage`.
    result : Result
        What ``stage(X, ...)`` returned.
    factor : float, optional
        The mismatch, in median steps, above which an edge is reported (> 0).

    Returns
    -------
    Result
        edges : ndarray of int64, shape (m, 2)
            The reported edges, as row indices of ``X`` (one row per graph node; duplicate rows
            share a node), largest mismatch first.
        stretch : ndarray of float64, shape (m,)
            Their mismatch in median steps, :math:`|f_j - f_i - d_{ij}| / h`.
        n_edges : int
            m.
        points : ndarray of bool, shape (n_samples,)
            The rows whose graph node touches a reported edge.
        share : float
            The share of the least-squares misfit :math:`\sum w_{ij} (f_j - f_i - d_{ij})^2` that the
            reported edges carry, in [0, 1] (0 with no edge).
        scale : float
            h, in the units of ``X``.
        local_misfit : ndarray of float64, shape (n_samples,)
            Per row, the misfit of the edges at its node relative to their steps,
            :math:`\sqrt{\sum_j w_{ij} (f_j - f_i - d_{ij})^2 / \sum_j w_{ij} d_{ij}^2}`: a few
            percent where the embedding follows the steps, about 1 where it ignores them.
        glued : float
            The fraction of rows whose local misfit exceeds 0.5.
        split_windows : int
            Windows of m consecutive values of the embedding (m = 4 times the graph's median degree, and
            at least 8 times the median rank difference of its edges; consecutive windows overlap by
            half) whose points the graph holds in two or more groups of at least a sixth of the window,
            with no edge between them: two stretches of the curve laid at the same values. 0 when the
            embedding follows one strand.
        split_run : int
            The longest run of consecutive split windows. A stretch laid beside another splits a run of
            several (5-37 on ten of the eleven misses measured in the tutorial, 2 on the eleventh);
            outliers that keep to themselves split a window here and there (runs of 1-2, also at the
            noise floor).
        windows : int
            The number of windows.
        stray : ndarray of bool, shape (n_samples,)
            The rows outside the largest group of a split window they lie in.

    Notes
    -----
    On a curve whose strands stay farther apart than the neighbour radius no edge is reported and
    ``glued`` is about 0: each step matches the embedding up to the noise. A reported edge means the
    graph STAGE integrated held an edge between strands; a large ``glued`` means many such edges
    pulled arms together. When ``order_agreement`` falls short of :func:`noise_floor` on close arms,
    these are the usual cause (see the tutorial's section on close arms). A jump escapes both: a stretch
    cut off from the curve on both sides and held to a neighbouring arm only by the edges that glue it
    fits every edge, so nothing is stretched and ``glued`` stays about 0. It shows in ``split_windows``
    instead: the stretch lies at the values of another, with no edge between the two there. :func:`stage`
    looks for runs of such windows itself and joins the pieces again (its ``n_reassembled``); a run left
    in its result is one it could not mend. ``misfit`` of the result
    summarises the same mismatch over all edges but does not say where it sits. The check uses only
    ``X`` and ``result``, no ground truth. The embedding's global sign is matched to the steps first.

    Examples
    --------
    >>> from numtk.seriation import make_curve, short_circuits, stage
    >>> X, t = make_curve("spiral", 2000, 20, noise=0.02, params={"gap": 0.3}, rng=0)
    >>> check = short_circuits(X, stage(X, rng=0))
    >>> check.n_edges, check.glued, check.split_windows
    (0, 0.0, 0)
    """
    X = as_array(X, "X", ndim=2)
    check_finite(X, "X")
    factor = check_real(factor, "factor", low=0.0, low_open=True)
    fields = ("graph", "embedding", "tangents", "signs", "inverse")
    if not isinstance(result, Result) or any(not hasattr(result, f) for f in fields):
        raise TypeError("`result` must be the Result of numtk.seriation.stage")
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    inverse = np.asarray(result.inverse)
    if inverse.shape != (n,) or np.asarray(result.embedding).shape != (n,) or result.tangents.shape != X.shape:
        raise ValueError(f"`result` does not belong to `X`: it orders {inverse.shape[0]} rows of "
                         f"{result.tangents.shape[1]} features, X has shape {X.shape}")
    nodes, row = np.unique(inverse, return_index=True)  # the first row of each graph node
    W = sp.triu(sp.csr_matrix(result.graph), k=1).tocoo()
    empty = dict(edges=np.zeros((0, 2), dtype=np.int64), stretch=np.zeros(0), n_edges=0,
                 points=np.zeros(n, dtype=bool), share=0.0, scale=0.0, local_misfit=np.zeros(n), glued=0.0)
    if W.nnz == 0:
        return Result(**empty, split_windows=0, split_run=0, windows=1, stray=np.zeros(n, dtype=bool))
    if nodes.size != result.graph.shape[0]:
        raise ValueError("`result` does not belong to `X`: its graph has a node without a row")
    f_node = np.asarray(result.embedding, dtype=np.float64)[row]
    e_rows, e_cols = W.row.astype(np.int64), W.col.astype(np.int64)
    n_split, n_windows, stray, run = split_windows(f_node, e_rows, e_cols, window_size(f_node, e_rows, e_cols))
    side = dict(split_windows=n_split, split_run=run, windows=n_windows, stray=stray[inverse])
    i, j = row[W.row], row[W.col]
    T = result.signs[:, None] * np.asarray(result.tangents, dtype=np.float64)
    step = np.einsum("ij,ij->i", 0.5 * (T[i] + T[j]), X[j] - X[i])
    f = np.asarray(result.embedding, dtype=np.float64)
    df = f[j] - f[i]
    if np.dot(W.data * df, step) < 0:  # the orientation rule may flip f after the solve, not the signs
        step = -step
    mismatch = np.abs(df - step)
    h = float(np.median(np.abs(step)))
    if h == 0.0:
        return Result(**empty, **side)
    bad = np.flatnonzero(mismatch > factor * h)
    bad = bad[np.argsort(-mismatch[bad], kind="stable")]
    energy = W.data * mismatch ** 2
    total = float(energy.sum())
    m = nodes.size
    touched = np.zeros(m, dtype=bool)
    touched[W.row[bad]] = True
    touched[W.col[bad]] = True
    num = np.bincount(W.row, energy, m) + np.bincount(W.col, energy, m)
    scale2 = W.data * step ** 2
    den = np.bincount(W.row, scale2, m) + np.bincount(W.col, scale2, m)
    local = np.sqrt(np.divide(num, den, out=np.zeros(m), where=den > 0))[inverse]
    return Result(edges=np.c_[i[bad], j[bad]].astype(np.int64), stretch=mismatch[bad] / h, n_edges=int(bad.size),
                  points=touched[inverse], share=float(energy[bad].sum() / total) if total > 0 else 0.0, scale=h,
                  local_misfit=local, glued=float(np.mean(local > _GLUED)), **side)
