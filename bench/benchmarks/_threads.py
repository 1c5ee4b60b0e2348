"""Thread crossovers of the compiled kernels: ``bench/compare.py --kernels none --threads``.

Every threaded kernel declares a grain next to its call (``n_threads(workers, work=..., grain=...)``): the
work below which a second thread costs more than it saves, so ``workers=-1`` starts no thread there. For
each kernel and size this prints the medians of ``workers=1`` and ``workers=-1`` (what a user gets), the
threaded path forced on (``workers=2`` with the grain ignored: where the crossover lies) and the ratios
``w1/w-1`` and ``w1/w2``, each the median over rounds of the ratio of the two calls of that round (> 1: the
threads pay). Sizes on both sides of each grain. Absolute times wander on a shared machine; the paired
ratios much less, and the ``w1/w1`` column (the same call twice) shows how far they wander.
"""

from __future__ import annotations

import statistics
import warnings

import numpy as np

from benchmarks._timing import interleaved


def _forced(fn, workers):
    from numtk._lib._workers import uncapped

    with uncapped():
        return fn(workers)


def _kendall_cases(quick):
    from numtk.stats import kendall_distance, kendall_tau, kendall_tau_interval
    from numtk.stats._kendall import _kendall_grain
    from numtk.stats._kendall_interval import LEXSORT_GRAIN

    rng = np.random.default_rng(20261203)
    sizes = (10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6) if quick else (10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6,
                                                                     3 * 10**6)

    def pair(kind, n):
        if kind == "continuous":
            return rng.standard_normal((2, n))
        if kind == "ties":  # ints 0..99: few distinct values (Fenwick count)
            return rng.integers(0, 100, (2, n))
        if kind == "heavy_ties":
            return rng.integers(0, 5, (2, n))
        # x continuous, y with many tie groups: two radix sorts and the merge count
        return rng.standard_normal(n), rng.integers(0, n // 8 + 2, n)

    for kind in ("continuous", "ties", "heavy_ties", "many_groups"):
        for n in sizes:
            x, y = pair(kind, n)
            yield ("kendall_tau", kind, n, n, _kendall_grain(np.asarray(x), np.asarray(y)),
                   lambda w, x=x, y=y: kendall_tau(x, y, workers=w).statistic)
    for n in sizes[:4]:
        x, y = pair("continuous", n)
        yield ("kendall_distance", "continuous", n, n, _kendall_grain(x, y),
               lambda w, x=x, y=y: kendall_distance(x, y, workers=w))
        yield ("kendall_tau_interval", "asymptotic", n, n, LEXSORT_GRAIN,
               lambda w, x=x, y=y: kendall_tau_interval(x, y, method="asymptotic", workers=w).low)


def _grain(module, name, default=None):
    """A kernel's grain constant (``default`` where the module does not declare it)."""
    import importlib

    return getattr(importlib.import_module(module), name, default)


def _moe_cases(quick):
    from numtk.moe import llep_plan, pack_bf16, packed_matvec, unpack_bf16, zipf_loads
    from numtk.moe._bf16 import _round_bf16

    rng = np.random.default_rng(20261203)
    elem = _grain("numtk.moe._bf16", "BF16_ELEMENTWISE_GRAIN")
    unpack = _grain("numtk.moe._bf16", "BF16_UNPACK_GRAIN")
    for n in (2**18, 2**20, 2**21, 2**22, 2**24):
        mag = rng.random(n).astype(np.float32)
        flags = [rng.random(n) < 0.5 for _ in range(4)]
        words = pack_bf16(mag, *flags)
        yield "moe.pack_bf16", "float32", n, n, elem, lambda w, mag=mag, flags=flags: pack_bf16(mag, *flags, workers=w)
        yield "moe.unpack_bf16", "expert 0", n, n, unpack, lambda w, words=words: unpack_bf16(words, 0, workers=w)
        yield "moe._round_bf16", "float64", n, n, elem, lambda w, x=mag.astype(np.float64): _round_bf16(x, workers=w)
    matvec = _grain("numtk.moe._bf16", "BF16_MATVEC_GRAIN")
    for d, batch in ((128, 1), (256, 4), (512, 4), (1024, 4), (2048, 8)):
        mag = rng.random((d, d)).astype(np.float32)
        flags = [rng.random((d, d)) < 0.5 for _ in range(4)]
        words = pack_bf16(mag, *flags)
        x = rng.standard_normal((batch, d)).astype(np.float32)
        yield ("moe.packed_matvec", f"batch {batch}", d, d * d * batch, matvec,
               lambda w, words=words, x=x: packed_matvec(words, x, 0, workers=w))
    layer = _grain("numtk.moe._llep", "LLEP_GRAIN")
    for L in (8, 128, 512, 2048):
        loads = zipf_loads(64, 32768, size=L, rng=1)
        yield ("moe.llep_plan", "64 experts", L, L * 64, layer,
               lambda w, loads=loads: llep_plan(loads, 8, workers=w).device_loads)


def _sampling_cases(quick):
    from numtk.sampling import mmd, sinkhorn_distance

    rng = np.random.default_rng(20261203)
    pairs = _grain("numtk.sampling._metrics", "MMD_GRAIN")
    for n in (64, 256, 1024, 2048):
        X, Y = rng.standard_normal((2, n, 4))
        yield "sampling.mmd", "d=4", n, 2 * n * n * 4, pairs, lambda w, X=X, Y=Y: mmd(X, Y, workers=w)
    passes = _grain("numtk.sampling._metrics", "SINKHORN_GRAIN")
    for n in (64, 128, 256, 512):
        X, Y = rng.standard_normal((2, n, 4))
        yield ("sampling.sinkhorn", "d=4, 20 iterations", n, n * n, passes,
               lambda w, X=X, Y=Y: sinkhorn_distance(X, Y, max_iter=20, workers=w))


def _cases(quick, only=None):
    for name, gen in (("stats", _kendall_cases), ("moe", _moe_cases), ("sampling", _sampling_cases)):
        if only is None or name in only:
            yield from gen(quick)


def _paired(samples, a, b):
    return statistics.median(x / y for x, y in zip(samples[a], samples[b]))


def _fmt(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:7.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:7.2f} ms"
    return f"{seconds:7.3f} s "


def report(quick=False, options=None, only=None):
    """Print the crossover table (the areas of ``only``, default all); returns its rows (dicts)."""
    from numtk._lib import n_threads

    repeat = max(9, getattr(options, "repeat", 7) or 7)
    min_time = getattr(options, "min_time", 0.05) or 0.05
    head = (f"{'kernel':<22} {'data':<12} {'n':>8} {'grain':>8} {'thr':>3} {'w=1':>10} {'w=-1':>10} "
            f"{'w1/w-1':>6} {'w=2 forced':>10} {'w1/w2':>6} {'w1/w1':>6}")
    print("== thread crossovers (w1/w-1 and w1/w2: paired medians, > 1 means the threads pay) ==")
    print(head)
    print("-" * len(head))
    rows = []
    for kernel, data, n, work, grain, fn in _cases(quick, only):
        threads = n_threads(-1, work=work, grain=grain)
        calls = {"w1": lambda: fn(1), "wall": lambda: fn(-1), "w2": lambda: _forced(fn, 2), "w1b": lambda: fn(1)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Sinkhorn stopped at max_iter on purpose
            t = interleaved(calls, repeat, min_time=min_time)
        same = all(np.array_equal(np.asarray(t.results["w1"]), np.asarray(t.results[k])) for k in ("wall", "w2"))
        row = dict(kernel=kernel, data=data, n=n, work=work, grain=grain, threads=threads, w1=t.medians["w1"],
                   wall=t.medians["wall"], w2=t.medians["w2"], r_all=_paired(t.samples, "w1", "wall"),
                   r_two=_paired(t.samples, "w1", "w2"), r_noise=_paired(t.samples, "w1", "w1b"), same=same)
        rows.append(row)
        print(f"{kernel:<22} {data:<12} {n:>8} {grain or 0:>8.3g} {threads:>3} {_fmt(row['w1']):>10} "
              f"{_fmt(row['wall']):>10} {row['r_all']:6.2f} {_fmt(row['w2']):>10} {row['r_two']:6.2f} "
              f"{row['r_noise']:6.2f}{'' if same else '  RESULTS DIFFER'}", flush=True)
    print()
    return rows
