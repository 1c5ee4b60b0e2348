"""Benchmark inputs and a brute-force oracle, shared by the asv suite and ``bench/compare.py``.

Nothing here is a benchmark: asv only collects names starting with ``time_``, ``peakmem_``,
``mem_``, ``track_`` or ``timeraw_``.
"""

import numpy as np

#: Seed of every benchmark input; identical data for numtk and the anchor.
SEED = 20261129

#: Kinds of input data.
#: ``continuous``: standard normal floats (no ties);
#: ``ties``: integers 0..99 (the "heavy ties" case of spec A1.7);
#: ``heavy_ties``: integers 0..4 (a handful of huge tie groups).
DATA_KINDS = ("continuous", "ties", "heavy_ties")


def make_data(n, kind, seed=SEED):
    """Return a pair ``(x, y)`` of length-``n`` arrays of the given ``kind``."""
    rng = np.random.default_rng(seed)
    if kind == "continuous":
        x, y = rng.standard_normal((2, n))
    elif kind == "ties":
        x, y = rng.integers(0, 100, size=(2, n))
    elif kind == "heavy_ties":
        x, y = rng.integers(0, 5, size=(2, n))
    else:
        raise ValueError(f"unknown data kind {kind!r}; expected one of {DATA_KINDS}")
    return x, y


def kendall_tau_b_brute_force(x, y, block=256):
    """Kendall's tau-b by counting every pair: O(n^2) time, O(block * n) memory.

    An independent oracle built from NumPy only: sign products over all pairs (i < j),
    ``block`` rows at a time. Returns ``(tau_b, discordant)``.
    """
    x = np.asarray(x)
    y = np.asarray(y)
    n = x.size
    conc = disc = xtie = ytie = 0
    cols = np.arange(n)
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        # pairs (i, j) with i in [i0, i1) and j > i
        upper = cols[None, i0:] > np.arange(i0, i1)[:, None]
        sx = np.sign(x[i0:i1, None] - x[None, i0:]).astype(np.int8)
        sy = np.sign(y[i0:i1, None] - y[None, i0:]).astype(np.int8)
        prod = sx * sy
        conc += int(np.count_nonzero((prod > 0) & upper))
        disc += int(np.count_nonzero((prod < 0) & upper))
        xtie += int(np.count_nonzero((sx == 0) & upper))
        ytie += int(np.count_nonzero((sy == 0) & upper))
    tot = n * (n - 1) // 2
    if xtie == tot or ytie == tot:
        return float("nan"), disc
    tau = (conc - disc) / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return float(min(1.0, max(-1.0, tau))), disc
