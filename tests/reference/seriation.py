"""Pure-NumPy references for the seriation kernels (independent of numtk)."""

import numpy as np


def local_pca(X, neighbors, chunk=2048):
    """Top right singular vector of each centred neighbourhood (numpy.linalg.eigh) and lambda_2 / lambda_1."""
    n, d = X.shape
    kp = neighbors.shape[1]
    tangents = np.empty((n, d))
    ratio = np.empty(n)
    for lo in range(0, n, chunk):
        Y = X[neighbors[lo:lo + chunk]]                 # (c, kp, d)
        Y = Y - Y.mean(axis=1, keepdims=True)
        if kp < d:  # Gram path: kp x kp eigenproblems
            G = Y @ Y.transpose(0, 2, 1)
            w, V = np.linalg.eigh(G)
            u = V[:, :, -1]
            t = np.einsum("ck,ckd->cd", u, Y)
        else:       # covariance path: d x d eigenproblems
            C = Y.transpose(0, 2, 1) @ Y
            w, V = np.linalg.eigh(C)
            t = V[:, :, -1]
        norm = np.linalg.norm(t, axis=1, keepdims=True)
        norm[norm == 0] = 1.0
        tangents[lo:lo + chunk] = t / norm
        top = w[:, -1]
        second = w[:, -2] if w.shape[1] > 1 else np.zeros_like(top)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio[lo:lo + chunk] = np.where(top > 0, np.maximum(second, 0) / top, 1.0)
    # deterministic raw sign: first nonzero coordinate positive
    first = np.argmax(tangents != 0, axis=1)
    flip = tangents[np.arange(n), first] < 0
    tangents[flip] *= -1
    return tangents, ratio


def tree_signs(W, tangents):
    """Sign propagation along the maximum-weight spanning tree of w |c|, node by node in BFS order."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

    n = W.shape[0]
    Wc = W.tocoo()
    c = np.einsum("ed,ed->e", tangents[Wc.row], tangents[Wc.col])
    H = sp.csr_matrix((Wc.data * c, (Wc.row, Wc.col)), shape=(n, n))
    cost = sp.csr_matrix((3.0 - Wc.data * np.abs(c), (Wc.row, Wc.col)), shape=(n, n))
    tree = minimum_spanning_tree(cost)
    tree = (tree + tree.T).tocsr()
    start = int(np.argmax(np.diff(W.indptr)))
    order, pred = breadth_first_order(tree, start, directed=False, return_predecessors=True)
    z = np.ones(n)
    for v in order[1:]:
        z[v] = z[pred[v]] * (1.0 if H[pred[v], v] >= 0 else -1.0)
    return z.astype(np.int8)
