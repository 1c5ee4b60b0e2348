"""A tiny mixture-of-experts classifier, trained in NumPy on scikit-learn's digits in about a second, on which
expert merges are compared with real routed activations (the tests and the PuzzleMoE demonstration).

The model: 64 pixel features (standardised) are routed by a linear router to the top-k of N SwiGLU experts,
``E_e(x) = W_down_e (silu(W_gate_e x) * (W_up_e x))`` with 10 outputs (the class logits), combined with the
softmax of the chosen router logits. Training is Adam on the cross-entropy plus a small Switch-style load
balancing term, with hand-written gradients. The expert weights use the layout of
:func:`numtk.moe.moe_forward` (``w_gate``, ``w_up`` of shape (N, H, D), ``w_down`` of shape (N, C, H)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtk._lib import Result, normalize_rng, single_blas_thread

__all__ = ["digits_moe", "moe_logits", "routed_norms", "compare_merges"]


def _silu_parts(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sig = 1.0 / (1.0 + np.exp(-G))
    return G * sig, sig


def _route(r: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.argsort(-r, axis=1, kind="stable")[:, :top_k]
    chosen = np.take_along_axis(r, idx, axis=1)
    z = np.exp(chosen - chosen[:, :1])
    return idx, z / z.sum(axis=1, keepdims=True)


def _forward(X, Wr, Wg, Wu, Wd, top_k, allowed=None):
    """logits and the cache of the backward pass (dense over the experts: the model is tiny)."""
    B = X.shape[0]
    N, H, D = Wg.shape
    G = (X @ Wg.reshape(N * H, D).T).reshape(B, N, H)
    U = (X @ Wu.reshape(N * H, D).T).reshape(B, N, H)
    S, sig = _silu_parts(G)
    A = S * U
    O = np.matmul(A.transpose(1, 0, 2), Wd.transpose(0, 2, 1)).transpose(1, 0, 2)  # (B, N, C)
    r = X @ Wr.T
    if allowed is not None:
        r = np.where(allowed[None, :], r, -np.inf)
    idx, gates = _route(r, top_k)
    chosen = O[np.arange(B)[:, None], idx]                                         # (B, k, C)
    logits = np.sum(gates[:, :, None] * chosen, axis=1)
    return logits, dict(G=G, U=U, S=S, sig=sig, A=A, r=r, idx=idx, gates=gates, chosen=chosen)


def _loss_and_grads(X, y, params, top_k, balance):
    Wr, Wg, Wu, Wd = params
    B = X.shape[0]
    N, H, D = Wg.shape
    logits, c = _forward(X, Wr, Wg, Wu, Wd, top_k)
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(p[np.arange(B), y] + 1e-300))
    dlog = p
    dlog[np.arange(B), y] -= 1.0
    dlog /= B
    idx, gates = c["idx"], c["gates"]
    # experts
    dO = np.zeros((B, N, dlog.shape[1]))
    for k in range(top_k):
        dO[np.arange(B), idx[:, k]] += gates[:, k, None] * dlog
    dWd = np.matmul(dO.transpose(1, 2, 0), c["A"].transpose(1, 0, 2))            # (N, C, H)
    dA = np.matmul(dO.transpose(1, 0, 2), Wd).transpose(1, 0, 2)                  # (B, N, H)
    dU = dA * c["S"]
    sig = c["sig"]
    dG = dA * c["U"] * sig * (1.0 + c["G"] * (1.0 - sig))
    dWg = (dG.reshape(B, N * H).T @ X).reshape(N, H, D)
    dWu = (dU.reshape(B, N * H).T @ X).reshape(N, H, D)
    # router: through the gates (softmax over the chosen logits) ...
    dgate = np.sum(dlog[:, None, :] * c["chosen"], axis=2)
    dz = gates * (dgate - np.sum(gates * dgate, axis=1, keepdims=True))
    dr = np.zeros((B, N))
    np.add.at(dr, (np.arange(B)[:, None], idx), dz)
    # ... and the load-balancing term N * sum_e f_e * mean_b softmax(r)_be (f: routed fractions, constant)
    r = c["r"]
    q = np.exp(r - r.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    f = np.bincount(idx.ravel(), minlength=N) / idx.size
    loss += balance * N * float(np.sum(f * q.mean(axis=0)))
    v = balance * N * f / B
    dr += q * (v[None, :] - (q @ v)[:, None])
    dWr = dr.T @ X
    return loss, [dWr, dWg, dWu, dWd]


def _digits(gen: np.random.Generator, n_test: int):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = gen.permutation(len(y))
    test, train = order[:n_test], order[n_test:]
    mu = X[train].mean(axis=0)
    sd = X[train].std(axis=0)
    sd[sd == 0] = 1.0
    Xs = (X - mu) / sd
    return Xs[train], y[train], Xs[test], y[test]


def _train(params, Xtr, ytr, gen, *, top_k, steps, batch, learning_rate, balance):
    """Adam (0.9, 0.999) on minibatches drawn without replacement, epoch after epoch; updates params in place."""
    m = [np.zeros_like(q) for q in params]
    v = [np.zeros_like(q) for q in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    order = gen.permutation(len(ytr))
    pos = 0
    for t in range(1, steps + 1):
        if pos + batch > len(order):
            order, pos = gen.permutation(len(ytr)), 0
        rows = order[pos:pos + batch]
        pos += batch
        _, grads = _loss_and_grads(Xtr[rows], ytr[rows], params, top_k, balance)
        for q, g, mq, vq in zip(params, grads, m, v):
            mq *= b1
            mq += (1 - b1) * g
            vq *= b2
            vq += (1 - b2) * g * g
            q -= learning_rate * (mq / (1 - b1**t)) / (np.sqrt(vq / (1 - b2**t)) + eps)


def digits_moe(*, num_experts: int = 8, top_k: int = 2, hidden: int = 32, steps: int = 400, batch: int = 128,
               learning_rate: float = 0.01, balance: float = 0.01, n_test: int = 600, rng: Any = 0) -> Result:
    """Train the tiny MoE classifier on scikit-learn's digits (1797 8x8 images, 10 classes).

    Returns a Result with ``router`` (N, 64), ``experts`` (dict of ``w_gate``, ``w_up`` (N, H, 64) and
    ``w_down`` (N, 10, H), float32), ``top_k``, the split ``X_train``, ``y_train``, ``X_test``, ``y_test`` and
    the ``train_accuracy`` and ``test_accuracy`` of the trained model. Deterministic for a given ``rng``.
    """
    gen = normalize_rng(rng)
    Xtr, ytr, Xte, yte = _digits(gen, n_test)
    D, C, N, H = Xtr.shape[1], 10, num_experts, hidden
    params = [gen.normal(0, 0.1 / np.sqrt(D), (N, D)), gen.normal(0, 1 / np.sqrt(D), (N, H, D)),
              gen.normal(0, 1 / np.sqrt(D), (N, H, D)), gen.normal(0, 1 / np.sqrt(H), (N, C, H))]
    with single_blas_thread():  # hundreds of small products: BLAS threads only cost here
        _train(params, Xtr, ytr, gen, top_k=top_k, steps=steps, batch=batch, learning_rate=learning_rate,
               balance=balance)
    router = params[0].astype(np.float32)
    experts = {k: p.astype(np.float32) for k, p in zip(("w_gate", "w_up", "w_down"), params[1:])}
    res = Result(router=router, experts=experts, top_k=top_k, X_train=Xtr, y_train=ytr, X_test=Xte, y_test=yte)
    res.train_accuracy = float(np.mean(moe_logits(res, Xtr).argmax(axis=1) == ytr))
    res.test_accuracy = float(np.mean(moe_logits(res, Xte).argmax(axis=1) == yte))
    return res


def moe_logits(model: Result, X: np.ndarray, experts: dict | None = None, allowed: np.ndarray | None = None
               ) -> np.ndarray:
    """The class logits of the model on the rows of X (float64), with other ``experts`` (same layout) or only
    the experts where ``allowed`` (bool (N,)) is True eligible for routing."""
    ex = model.experts if experts is None else experts
    Wg, Wu, Wd = (np.asarray(ex[k], dtype=np.float64) for k in ("w_gate", "w_up", "w_down"))
    logits, _ = _forward(np.asarray(X, dtype=np.float64), np.asarray(model.router, dtype=np.float64), Wg, Wu, Wd,
                         model.top_k, allowed)
    return logits


def routed_norms(model: Result, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wanda norms from calibration tokens X: per expert, the L2 norm over the tokens routed to it of every
    hidden feature (N, D) and of every intermediate activation silu(g) * u (N, H)."""
    ex = model.experts
    Wg, Wu, Wd = (np.asarray(ex[k], dtype=np.float64) for k in ("w_gate", "w_up", "w_down"))
    X = np.asarray(X, dtype=np.float64)
    _, c = _forward(X, np.asarray(model.router, dtype=np.float64), Wg, Wu, Wd, model.top_k)
    N = Wg.shape[0]
    routed = np.zeros((X.shape[0], N), dtype=bool)
    routed[np.arange(X.shape[0])[:, None], c["idx"]] = True
    hidden = np.sqrt(np.einsum("bn,bd->nd", routed.astype(np.float64), X * X))
    inter = np.sqrt(np.einsum("bn,bnh->nh", routed.astype(np.float64), c["A"] ** 2))
    return hidden, inter


def compare_merges(model: Result, *, similarity_threshold: float = 0.4, pairs: Any = "auto", density: float = 0.5,
                   rng: Any = 0) -> list[dict]:
    """Every 50 % compression of the model's experts, on its held-out split: one dict per method with
    ``method``, ``test_accuracy``, ``output_error`` (relative Frobenius error of the held-out logits against the
    unmerged model's) and ``memory_ratio`` (expert memory against the unmerged bf16 experts).

    Methods: 'unmerged'; 'puzzlemoe' (:func:`~numtk.moe.merge_experts` with the routed Wanda norms of the
    training split, packed, then decoded by :func:`~numtk.moe.unpack_bf16`); 'puzzlemoe-nonorm' (magnitude
    saliency); 'average', 'ties' and 'dare' (each pair replaced by one merged expert that both of its router
    entries select; TIES and DARE with ``base='mean'`` and ``density``); 'drop' (of each pair the expert routed
    fewer training tokens is removed from routing). All use the pairs PuzzleMoE chose.
    """
    from numtk.moe import average_merge, dare_merge, merge_experts, ties_merge, unpack_bf16

    gen = normalize_rng(rng)
    ref = moe_logits(model, model.X_test)
    y = model.y_test
    rows = []

    def add(method, logits, ratio):
        err = float(np.linalg.norm(logits - ref) / np.linalg.norm(ref))
        rows.append(dict(method=method, test_accuracy=float(np.mean(logits.argmax(axis=1) == y)),
                         output_error=err, memory_ratio=ratio))

    add("unmerged", ref, 1.0)
    hidden, inter = routed_norms(model, model.X_train)
    merged = {}
    for label, norms in (("puzzlemoe", (hidden, inter)), ("puzzlemoe-nonorm", None)):
        res = merge_experts(model.experts, pairs, activation_norms=norms, similarity_threshold=similarity_threshold)
        merged[label] = res
        ex = {}
        for k, words in res.packed.items():
            ex[k] = np.stack([np.asarray(unpack_bf16(words[p], int(pos), as_float=True))
                              for p, pos in res.slot])
        add(label, moe_logits(model, model.X_test, ex), res.memory_ratio)
    pair_arr = merged["puzzlemoe"].pairs
    for method in ("average", "ties", "dare"):
        ex = {k: np.array(v, dtype=np.float64) for k, v in model.experts.items()}
        for e, f in pair_arr:
            for k, W in model.experts.items():
                if method == "average":
                    M = average_merge([W[e], W[f]])
                elif method == "ties":
                    M = ties_merge([W[e], W[f]], density=density)
                else:
                    M = dare_merge([W[e], W[f]], density=density, rng=gen)
                ex[k][e] = ex[k][f] = M
        add(method, moe_logits(model, model.X_test, ex), 0.5)
    _, c = _forward(model.X_train, model.router.astype(np.float64),
                    *(model.experts[k].astype(np.float64) for k in ("w_gate", "w_up", "w_down")), model.top_k)
    usage = np.bincount(c["idx"].ravel(), minlength=model.router.shape[0])
    allowed = np.ones(model.router.shape[0], dtype=bool)
    for e, f in pair_arr:
        allowed[f if usage[f] < usage[e] else e] = False
    add("drop", moe_logits(model, model.X_test, allowed=allowed), 0.5)
    return rows
