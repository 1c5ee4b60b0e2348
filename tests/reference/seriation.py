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
