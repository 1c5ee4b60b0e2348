"""Independent O(n^2) oracles for the Kendall tests (pure NumPy, no numtk code)."""

import numpy as np


def pair_counts(x, y):
    """(concordant, discordant, xtie, ytie, ntie) by comparing every pair i < j."""
    x = np.asarray(x)
    y = np.asarray(y)
    n = len(x)
    if n < 2:
        return 0, 0, 0, 0, 0
    i, j = np.triu_indices(n, k=1)
    # Compare as Python-exact values: object arrays keep int64 beyond 2**53 exact.
    sx = np.sign(np.where(x[i] > x[j], 1, np.where(x[i] < x[j], -1, 0)))
    sy = np.sign(np.where(y[i] > y[j], 1, np.where(y[i] < y[j], -1, 0)))
    prod = sx * sy
    return (int(np.count_nonzero(prod > 0)), int(np.count_nonzero(prod < 0)),
            int(np.count_nonzero(sx == 0)), int(np.count_nonzero(sy == 0)),
            int(np.count_nonzero((sx == 0) & (sy == 0))))


def tau_b(x, y):
    c, d, xt, yt, _ = pair_counts(x, y)
    n = len(x)
    tot = n * (n - 1) // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return (c - d) / np.sqrt((tot - xt) * (tot - yt))


def pointwise(x, y):
    """Per point: C_i - D_i, #(j != i tied in x), #(j != i tied in y)."""
    x = np.asarray(x)
    y = np.asarray(y)
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    eye = np.eye(len(x), dtype=bool)
    return ((sx * sy).sum(axis=1), ((sx == 0) & ~eye).sum(axis=1), ((sy == 0) & ~eye).sum(axis=1))
