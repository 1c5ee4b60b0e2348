"""Sampling-metrics benchmark problems and the side-by-side run for ``bench/compare.py``.

Contestants on the same samples (standard normal X, shifted normal Y, n = m = 2000, d = 2 and 32):

- Sinkhorn: :func:`numtk.sampling.sinkhorn_distance` (``debiased=False``, absolute ε = 0.05 x the median
  squared distance, costs on the fly) against POT's ``ot.sinkhorn2`` on ``ot.dist(X, Y)`` with the same ε,
  ``method='sinkhorn_log'`` (like for like) and the kernel-domain ``method='sinkhorn'``. Both run exactly
  ``iters`` iterations (``tol=0`` / ``stopThr=0``) so the work is equal; POT's time includes ``ot.dist``.
- MMD²: :func:`numtk.mmd` (compiled pairwise sums, no n x m matrix) against a NumPy reference that forms
  the kernel matrices with BLAS (``|x|^2 + |y|^2 - 2 X Y^T``) and sums them; same (median) bandwidth.

Each row is ``(name, numtk seconds, anchor seconds, ratio)`` with ``ratio = anchor / numtk`` (> 1: numtk
faster), median of ``repeat`` interleaved runs.
"""

import warnings

import numpy as np

from benchmarks._timing import interleaved

SIZES = ((2000, 2), (2000, 32))


def make_samples(n, d, seed=20261130):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(n, d)) + 0.5


def numpy_mmd(X, Y, h):
    """Unbiased RBF MMD² with dense kernel matrices (the NumPy reference contestant)."""
    def gram(A, B):
        D2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * (A @ B.T)
        np.maximum(D2, 0.0, out=D2)
        return np.exp(-D2 / (2.0 * h * h))
    n, m = len(X), len(Y)
    Kxx, Kyy = gram(X, X), gram(Y, Y)
    return ((Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1))
            - 2.0 * gram(X, Y).sum() / (n * m))


def sinkhorn_rows(sizes=SIZES, iters=100, repeat=3, workers=1):
    """Rows comparing sinkhorn_distance with ot.sinkhorn2 (skipped when POT is not installed)."""
    try:
        import ot
    except ImportError:  # POT is a test extra
        return []
    from numtk.sampling import sinkhorn_distance

    rows = []
    for n, d in sizes:
        X, Y = make_samples(n, d)
        a = np.full(n, 1.0 / n)
        eps = 0.05 * float(np.median(ot.dist(X, Y)))

        def ours():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tol=0: "not converged" by construction
                return sinkhorn_distance(X, Y, epsilon=eps, relative_epsilon=False, debiased=False,
                                         max_iter=iters, tol=0.0, workers=workers)

        def pot(method):
            def run():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return float(ot.sinkhorn2(a, a, ot.dist(X, Y), reg=eps, method=method, numItermax=iters,
                                              stopThr=0.0))
            return run

        t = interleaved({"numtk": ours, "log": pot("sinkhorn_log"), "kernel": pot("sinkhorn")}, repeat, warmup=False)
        t_ours, t_log, t_ker = t.medians["numtk"], t.medians["log"], t.medians["kernel"]
        v_ours, v_log = t.results["numtk"], t.results["log"]
        tag = f"n={n},d={d},iters={iters},workers={workers}"
        rows.append((f"sinkhorn vs ot.sinkhorn2[log] {tag} (rel.diff {abs(v_ours - v_log) / abs(v_log):.1e})",
                     t_ours, t_log, t_log / t_ours))
        rows.append((f"sinkhorn vs ot.sinkhorn2[kernel] {tag}", t_ours, t_ker, t_ker / t_ours))
    return rows


def mmd_rows(sizes=SIZES, repeat=3, workers=1):
    """Rows comparing numtk.sampling.mmd with the dense NumPy reference."""
    from numtk.sampling import mmd
    from numtk.sampling._metrics import _median_distance

    rows = []
    for n, d in sizes:
        X, Y = make_samples(n, d)
        h = _median_distance(X, Y)
        t = interleaved({"numtk": lambda: mmd(X, Y, bandwidth=h, workers=workers), "numpy": lambda: numpy_mmd(X, Y, h)},
                        repeat, warmup=False)
        t_ours, t_np, v_ours, v_np = t.medians["numtk"], t.medians["numpy"], t.results["numtk"], t.results["numpy"]
        rows.append((f"mmd vs numpy n={n},d={d},workers={workers} (abs.diff {abs(v_ours - v_np):.1e})",
                     t_ours, t_np, t_np / t_ours))
    return rows


def compare(quick=False, workers=1):
    """Print the rows (used by bench/compare.py); returns them."""
    repeat = 1 if quick else 3
    rows = sinkhorn_rows(repeat=repeat, iters=30 if quick else 100, workers=workers)
    rows += mmd_rows(repeat=repeat, workers=workers)
    print(f"{'sampling metrics':<90} {'numtk':>9} {'anchor':>9} {'ratio':>7}")
    for name, t1, t2, r in rows:
        print(f"{name:<90} {t1:9.4f} {t2:9.4f} {r:7.2f}")
    return rows


if __name__ == "__main__":
    compare()
