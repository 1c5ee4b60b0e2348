"""The PuzzleMoE demonstration used by ``python -m numtk tour`` and ``python -m numtk demo puzzlemoe``.

A tiny mixture of experts (top-2 of 8 SwiGLU experts, trained on scikit-learn's digits in about a second) is
compressed to half its expert memory: its experts are paired, each pair is merged by PuzzleMoE with the routed
Wanda norms and packed into bf16 words, and the merged layer runs from the words through the decode-fused
:func:`~numtk.moe.packed_matvec`. The demonstration prints the memory, the error against the original experts,
the held-out accuracy beside the merging baselines and expert dropping, the closed forms for Gaussian experts
against measurement, and the speed of the packed product against the same loop over plain bf16 words.

Closed forms for two experts of i.i.d. Gaussian weights, without activation norms (bf16 rounding neglected):
write the magnitudes a = r cos(theta), b = r sin(theta); theta is uniform on [0, pi/2] and independent of r.
A position is shared when |a - b| <= tau (a + b), i.e. when |theta - pi/4| <= arctan(tau): a fraction
(4/pi) arctan(tau). Averaging over theta the squared error of a shared position ((a - b)/2 squared) and of a
position the other expert keeps (a squared) gives the relative error
sqrt(1/2 - (1 + 2 tau - tau^2) / (pi (1 + tau^2))): sqrt(1/2 - 1/pi) = 0.4263 at tau = 0 and tau = 1, and a
minimum of sqrt(1/2 - sqrt(2)/pi) = 0.2233 at tau = sqrt(2) - 1 = 0.414, next to the paper's default 0.4.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["run", "gaussian_error", "gaussian_shared", "gaussian_pair", "decoded_experts", "packed_logits",
           "matvec_speed", "threshold_sweep", "plot_threshold_sweep"]

#: the standard deviation of the Gaussian experts (that of trained LLM expert weights, roughly)
SIGMA = 0.02
#: the matrix of the speed comparison: 4096 x 4096 words, 32 MiB packed, beyond the caches
SPEED_SHAPE = (4096, 4096)
#: the thresholds of the printed Gaussian check
GAUSSIAN_TAUS = (0.0, 0.2, 0.4, float(np.sqrt(2.0) - 1.0), 0.6, 1.0)
_KEYS = ("w_gate", "w_up", "w_down")


# --------------------------------------------------------------------------------------------------
# closed forms and problems
# --------------------------------------------------------------------------------------------------
def gaussian_error(tau: Any) -> np.ndarray:
    """The relative reconstruction error of PuzzleMoE without norms for two experts of i.i.d. Gaussian weights:
    ``sqrt(1/2 - (1 + 2 tau - tau**2) / (pi (1 + tau**2)))`` (bf16 rounding neglected)."""
    t = np.asarray(tau, dtype=np.float64)
    return np.sqrt(0.5 - (1.0 + 2.0 * t - t * t) / (np.pi * (1.0 + t * t)))


def gaussian_shared(tau: Any) -> np.ndarray:
    """The fraction of positions two experts of i.i.d. Gaussian weights share: ``(4/pi) arctan(tau)``."""
    return 4.0 / np.pi * np.arctan(np.asarray(tau, dtype=np.float64))


def gaussian_pair(shape: tuple[int, int], *, sigma: float = SIGMA, rng: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two float32 experts of i.i.d. N(0, sigma^2) weights."""
    from numtk._lib import normalize_rng

    gen = normalize_rng(rng)
    return tuple(gen.standard_normal(shape, dtype=np.float32) * np.float32(sigma) for _ in range(2))


def decoded_experts(merged) -> dict[str, np.ndarray]:
    """The N experts that a packed layer of :func:`~numtk.moe.merge_experts` stands for, decoded to float32
    (the layout of the tiny MoE: ``w_gate``, ``w_up``, ``w_down``)."""
    from numtk.moe import unpack_bf16

    return {k: np.stack([unpack_bf16(words[p], int(pos), as_float=True) for p, pos in merged.slot])
            for k, words in merged.packed.items()}


def packed_logits(model, merged, X: np.ndarray) -> np.ndarray:
    """The class logits of the tiny MoE with its experts run from the packed words of ``merged``.

    Routing is the model's (router logits in float64, top-k, softmax of the chosen logits); each expert
    computes ``W_down (silu(W_gate x) * (W_up x))`` for the tokens routed to it by three calls of
    :func:`~numtk.moe.packed_matvec` on the words of its pair, in float32.
    """
    from numtk.moe import packed_matvec

    X = np.asarray(X, dtype=np.float64)
    r = X @ np.asarray(model.router, dtype=np.float64).T
    idx = np.argsort(-r, axis=1, kind="stable")[:, :model.top_k]
    chosen = np.take_along_axis(r, idx, axis=1)
    gates = np.exp(chosen - chosen[:, :1])
    gates /= gates.sum(axis=1, keepdims=True)
    X32 = X.astype(np.float32)
    words = merged.packed
    logits = np.zeros((X.shape[0], words["w_down"].shape[1]))
    for e, (p, pos) in enumerate(merged.slot):
        tokens, k = np.nonzero(idx == e)
        if tokens.size == 0:
            continue
        x = np.ascontiguousarray(X32[tokens])
        G = packed_matvec(words["w_gate"][p], x, int(pos))
        U = packed_matvec(words["w_up"][p], x, int(pos))
        A = G / (1.0 + np.exp(-G)) * U
        logits[tokens] += gates[tokens, k, None] * packed_matvec(words["w_down"][p], A, int(pos))
    return logits


# --------------------------------------------------------------------------------------------------
# speed
# --------------------------------------------------------------------------------------------------
def _best_times(calls: dict, reps: int) -> dict[str, float]:
    """The best time of each call over ``reps`` rounds, the calls interleaved within a round."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(reps):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def matvec_speed(shape: tuple[int, int] = SPEED_SHAPE, *, batches=(1, 8), threads=(1,), reps: int = 20,
                 rng: Any = 0) -> dict:
    """PuzzleMoE's merge and packed product on a Gaussian pair of ``shape``, timed.

    Returns a dict: ``merge_seconds`` and ``merge_rate`` (elements per second of :func:`~numtk.moe.puzzle_merge`
    plus :func:`~numtk.moe.pack_bf16`), ``identical`` (whether ``packed_matvec`` gives exactly the plain bf16
    product's floats) and ``rows``, one dict per batch size and thread count with the best times of
    ``packed_matvec`` (``packed``), of the same compiled loop over plain bf16 words holding the same values
    (``plain``; the benchmark-only binding of :mod:`numtk.moe._bf16`) and of NumPy's float32 product with the
    matrix decoded beforehand (``numpy``, 4 bytes per weight, on as many BLAS threads), and ``ratio`` =
    packed / plain.
    """
    from numtk._lib._workers import blas_threads
    from numtk.moe import pack_bf16, packed_matvec, puzzle_merge, unpack_bf16
    from numtk.moe._bf16 import _bf16_matvec

    W_i, W_j = gaussian_pair(shape, rng=rng)
    t0 = time.perf_counter()
    res = puzzle_merge(W_i, W_j)
    packed = pack_bf16(res.magnitude, res.mask_i, res.mask_j, res.sign_i, res.sign_j)
    merge_seconds = time.perf_counter() - t0
    del W_i, W_j, res
    plain = unpack_bf16(packed, 0)                          # expert i as ordinary bf16 words
    decoded = unpack_bf16(packed, 0, as_float=True)
    gen = np.random.default_rng(1)
    rows, identical = [], True
    for b in batches:
        x = gen.standard_normal((b, shape[1]), dtype=np.float32)
        xv = x[0] if b == 1 else x
        out = np.empty((shape[0],) if b == 1 else (b, shape[0]), np.float32)
        identical &= bool(np.array_equal(packed_matvec(packed, xv, 0), _bf16_matvec(plain, xv)))
        for n in threads:
            with blas_threads(n):
                best = _best_times({"packed": lambda: packed_matvec(packed, xv, 0, out=out, workers=n),
                                    "plain": lambda: _bf16_matvec(plain, xv, out=out, workers=n),
                                    "numpy": lambda: np.matmul(xv, decoded.T)}, reps)
            rows.append(dict(batch=b, threads=n, **best, ratio=best["packed"] / best["plain"]))
    return dict(shape=tuple(shape), merge_seconds=merge_seconds, merge_rate=packed.size / merge_seconds,
                identical=identical, rows=rows)


# --------------------------------------------------------------------------------------------------
# error against the similarity threshold
# --------------------------------------------------------------------------------------------------
def threshold_sweep(taus, *, model=None, shape: tuple[int, int] = (1024, 1024), rng: Any = 0) -> list[dict]:
    """PuzzleMoE's error against the similarity threshold, for a Gaussian pair and for the tiny digits MoE.

    One dict per tau: ``gaussian_error`` (the mean over the two experts of the relative Frobenius error, a pair
    of ``shape`` merged without norms), ``gaussian_closed`` (:func:`gaussian_error`), ``gaussian_shared`` and
    ``shared_closed`` (the shared fraction, measured and :func:`gaussian_shared`); for the digits MoE
    (``model``, trained when None) merged with the routed Wanda norms and packed: ``digits_error`` (the mean
    over the experts of their weight error), ``digits_output_error`` (the relative error of the held-out
    logits) and ``digits_accuracy``.
    """
    from numtk.moe import merge_experts, puzzle_merge, reconstruction_error
    from numtk.moe._tiny_moe import digits_moe, moe_logits, routed_norms

    if model is None:
        model = digits_moe()
    W_i, W_j = gaussian_pair(shape, rng=rng)
    norms = routed_norms(model, model.X_train)
    ref = moe_logits(model, model.X_test)
    pairs = merge_experts(model.experts, activation_norms=norms).pairs   # the same pairs at every tau
    rows = []
    for tau in taus:
        tau = float(tau)
        res = puzzle_merge(W_i, W_j, similarity_threshold=tau)
        err = 0.5 * (reconstruction_error(res.reconstruction[0], W_i)
                     + reconstruction_error(res.reconstruction[1], W_j))
        merged = merge_experts(model.experts, pairs, activation_norms=norms, similarity_threshold=tau)
        logits = moe_logits(model, model.X_test, decoded_experts(merged))
        rows.append(dict(tau=tau, gaussian_error=err, gaussian_closed=float(gaussian_error(tau)),
                         gaussian_shared=float(np.mean(res.similarity_mask)),
                         shared_closed=float(gaussian_shared(tau)), digits_error=float(np.mean(merged.error)),
                         digits_output_error=float(np.linalg.norm(logits - ref) / np.linalg.norm(ref)),
                         digits_accuracy=float(np.mean(logits.argmax(axis=1) == model.y_test))))
    return rows


def plot_threshold_sweep(table: list[dict], path: str) -> None:
    """Reconstruction error against the similarity threshold (rows of :func:`threshold_sweep`): the Gaussian
    pair beside its closed form and averaging's sqrt(1/2), and the digits experts (weights and outputs)."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    tau = np.array([r["tau"] for r in table])
    fine = np.linspace(0.0, 1.0, 201)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    left.plot(fine, gaussian_error(fine), "-", color="C0", lw=1, label="closed form")
    left.plot(tau, [r["gaussian_error"] for r in table], "o", color="C0", ms=4, label="measured")
    left.axhline(np.sqrt(0.5), color="grey", ls="--", lw=0.8, label="averaging, sqrt(1/2)")
    left.axvline(np.sqrt(2.0) - 1.0, color="grey", ls=":", lw=0.8, label="tau = sqrt(2) - 1")
    left.set_title("two Gaussian experts, no norms", fontsize=9)
    right.plot(tau, [r["digits_error"] for r in table], "s-", color="C1", ms=4, label="weights")
    right.plot(tau, [r["digits_output_error"] for r in table], "^-", color="C2", ms=4, label="held-out logits")
    right.set_title("digits MoE, 8 experts in 4 packed pairs, Wanda norms", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("similarity threshold tau")
        ax.set_ylim(bottom=0.0)
        ax.legend(fontsize=7)
    left.set_ylabel("relative reconstruction error")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------------
def _digits(out, rows: list[dict]) -> Any:
    from numtk.moe import merge_experts
    from numtk.moe._tiny_moe import compare_merges, digits_moe, moe_logits, routed_norms

    t0 = time.perf_counter()
    model = digits_moe()
    secs = time.perf_counter() - t0
    N, H, D = model.experts["w_gate"].shape
    out(f"PuzzleMoE on a tiny MoE: top-{model.top_k} of {N} SwiGLU experts ({D} -> {H} -> 10) trained on "
        f"scikit-learn's digits in {secs:.1f} s, held-out accuracy {model.test_accuracy:.3f} "
        f"({len(model.y_test)} images)")
    norms = routed_norms(model, model.X_train)
    t0 = time.perf_counter()
    merged = merge_experts(model.experts, activation_norms=norms)
    merge_secs = time.perf_counter() - t0
    n_weights = sum(w.size for w in model.experts.values())
    out(f"  merged and packed in {merge_secs * 1e3:.0f} ms (tau = {merged.similarity_threshold}, pairs of least "
        f"total magnitude distance, Wanda norms of the routed training tokens)")
    out(f"  memory: {merged.packed_bytes} bytes of packed words for the {N} experts' {n_weights} weights, "
        f"{merged.bf16_bytes} bytes in bf16: ratio {merged.memory_ratio} (nothing else is stored)")
    out("   pair   shared  kept i  kept j  weight error i  weight error j  clamped")
    for (e, f), shared, (di, dj), (ei, ej), c in zip(merged.pairs, merged.similarity, merged.density,
                                                     merged.error, merged.n_clamped):
        out(f"  ({e}, {f})  {shared:6.3f}  {di:6.3f}  {dj:6.3f}  {ei:14.4f}  {ej:14.4f}  {c:7d}")

    decoded = moe_logits(model, model.X_test, decoded_experts(merged))
    t0 = time.perf_counter()
    run_packed = packed_logits(model, merged, model.X_test)
    packed_secs = time.perf_counter() - t0
    gap = float(np.max(np.abs(run_packed - decoded)) / np.max(np.abs(decoded)))
    acc = float(np.mean(run_packed.argmax(axis=1) == model.y_test))
    out(f"  run from the packed words (packed_matvec, float32): held-out accuracy {acc:.3f} in "
        f"{packed_secs * 1e3:.1f} ms; logits within {gap:.1e} (relative) of the float64 run of the decoded weights")

    table = compare_merges(model)
    names = {"unmerged": "unmerged (bf16 size 1)", "puzzlemoe": "PuzzleMoE, Wanda norms",
             "puzzlemoe-nonorm": "PuzzleMoE, magnitudes", "average": "average of each pair",
             "ties": "TIES (density 0.5)", "dare": "DARE (density 0.5)", "drop": "drop the less used expert"}
    out("  every 50 % compression, on the held-out split (the same pairs):")
    out("    method                      held-out accuracy  output error  memory")
    for r in table:
        out(f"    {names[r['method']]:<27} {r['test_accuracy']:>17.3f}  {r['output_error']:>12.3f}  "
            f"{r['memory_ratio']:>6.2f}")
    by = {r["method"]: r for r in table}
    rows.append({"area": "moe", "method": "PuzzleMoE, digits top-2 MoE, 8 experts -> 4 packed pairs", "n": N,
                 "result": f"acc. {by['puzzlemoe']['test_accuracy']:.3f} (unmerged "
                           f"{by['unmerged']['test_accuracy']:.3f}), {merged.memory_ratio:g}x memory",
                 "vs anchor": f"average {by['average']['test_accuracy']:.3f}, drop {by['drop']['test_accuracy']:.3f}",
                 "speed": f"{merge_secs * 1e3:.0f} ms merge"})
    return model


def _gaussian(out, rows: list[dict]) -> None:
    from numtk.moe import average_merge, puzzle_merge, reconstruction_error

    shape = (1024, 1024)
    W_i, W_j = gaussian_pair(shape, rng=1)
    out(f"Two Gaussian experts N(0, {SIGMA}^2), {shape[0]} x {shape[1]}, no norms: measured against the closed "
        "forms")
    out("    tau   shared (closed form)   relative error (closed form)")
    at_04 = None
    for tau in GAUSSIAN_TAUS:
        t0 = time.perf_counter()
        res = puzzle_merge(W_i, W_j, similarity_threshold=tau)
        secs = time.perf_counter() - t0
        err = reconstruction_error(res.reconstruction[0], W_i)
        out(f"  {tau:5.3f}   {np.mean(res.similarity_mask):.4f} ({gaussian_shared(tau):.4f})         "
            f"{err:.4f} ({gaussian_error(tau):.4f})")
        if tau == 0.4:
            at_04 = (err, secs)
    avg = reconstruction_error(average_merge([W_i, W_j]), W_i)
    out(f"  averaging the pair: {avg:.4f} (closed form sqrt(1/2) = {np.sqrt(0.5):.4f})")
    rows.append({"area": "moe", "method": "PuzzleMoE merge, Gaussian pair, tau 0.4", "n": W_i.size,
                 "result": f"rel. error {at_04[0]:.4f}", "vs anchor": f"closed form {gaussian_error(0.4):.4f}",
                 "speed": f"{at_04[1] * 1e3:.0f} ms"})


def _speed(out, rows: list[dict], quick: bool) -> None:
    from numtk._lib._workers import available_cores

    cores = available_cores()
    sp = matvec_speed(SPEED_SHAPE, threads=(1,) if quick or cores == 1 else (1, cores), reps=20 if quick else 100)
    d_out, d_in = sp["shape"]
    out(f"Packed product at {d_out} x {d_in} (a Gaussian pair, {d_out * d_in * 2 >> 20} MiB of words): merge and "
        f"pack {sp['merge_seconds']:.2f} s ({sp['merge_rate'] / 1e6:.0f} M elements/s, one call with its allocations)")
    out("  batch  threads  packed_matvec  plain bf16 mat-vec  packed/plain  NumPy float32 (decoded, 4 B/weight)")
    for r in sp["rows"]:
        out(f"  {r['batch']:>5}  {r['threads']:>7}  {r['packed'] * 1e3:>10.2f} ms  {r['plain'] * 1e3:>15.2f} ms  "
            f"{r['ratio']:>11.2f}x  {r['numpy'] * 1e3:>8.2f} ms")
    out(f"  (the plain mat-vec is the same compiled loop over ordinary bf16 words of expert i; its floats and "
        f"packed_matvec's are {'identical' if sp['identical'] else 'NOT identical'}; best of the timed rounds)")
    r = sp["rows"][0]
    rows.append({"area": "moe", "method": "packed_matvec (compiled), batch 1", "n": d_out * d_in,
                 "result": "decoded in registers, 2 B/weight", "vs anchor": "plain bf16 mat-vec",
                 "speed": f"{r['packed'] * 1e3:.2f} ms = {r['ratio']:.2f}x plain"})


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """PuzzleMoE: merge, pack and run a tiny digits MoE; the closed forms for Gaussian experts; the packed
    product's speed.

    Returns the tour's table rows. With ``plot``, saves the reconstruction error against the similarity
    threshold (Gaussian pair and digits experts) to that file (needs matplotlib).
    """
    rows: list[dict] = []
    model = _digits(out, rows)
    _gaussian(out, rows)
    _speed(out, rows, quick)
    if plot:
        plot_threshold_sweep(threshold_sweep(np.linspace(0.0, 1.0, 21), model=model), plot)
        out(f"figure saved to {plot}")
    return rows
