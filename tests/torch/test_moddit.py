"""numtk.torch.moddit: MOD-DiT's block maps, line design, fit, prediction, masks, block-sparse attention and
online state.

Oracles: the explicit dense basis maps of the line design built by NumPy loops (their Gram matrix, their
products with block maps, the ridge solution by numpy.linalg.solve); block maps by a brute-force NumPy loop over
blocks of the softmax; attention masked token by token in NumPy (float64); torch's own dense
scaled_dot_product_attention; torch.autograd.gradcheck.
"""

import math

import numpy as np
import pytest
import torch

from numtk.torch import _moddit
from numtk.torch.moddit import (OnlineMaskState, block_sparse_attention, block_sparsity_map, demo,
                                extrapolate_and_select, fit_line_features, lines_design_gram, lines_map, lines_rhs,
                                mask_from_lines, masked_dense_attention)

F = torch.nn.functional
D64 = torch.float64


# --------------------------------------------------------------------------------------------------
# NumPy oracles
# --------------------------------------------------------------------------------------------------
def basis_maps(n, bpf):
    """The 3n basis maps, built entry by entry: diagonals d = -(n-1)..n-1, columns, frame-block diagonal."""
    maps = []
    for d in range(-(n - 1), n):
        A = np.zeros((n, n))
        for i in range(n):
            if 0 <= i + d < n:
                A[i, i + d] = 1.0
        maps.append(A)
    for j in range(n):
        A = np.zeros((n, n))
        A[:, j] = 1.0
        maps.append(A)
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i // bpf == j // bpf:
                A[i, j] = 1.0
    maps.append(A)
    return np.stack(maps)


def design(n, bpf):
    return basis_maps(n, bpf).reshape(3 * n, n * n).T          # (n^2, 3n)


def np_softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def np_block_map(q, k, block, threshold):
    """Brute force: per head, the softmax, then per block the fraction of entries below the threshold."""
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    nq, nk = -(-Lq // block), -(-Lk // block)
    out = np.zeros((B, H, nq, nk))
    for b in range(B):
        for h in range(H):
            P = np_softmax(q[b, h] @ k[b, h].T / math.sqrt(D))
            for i in range(nq):
                for j in range(nk):
                    tile = P[i * block:(i + 1) * block, j * block:(j + 1) * block]
                    out[b, h, i, j] = np.mean(tile < threshold)
    return out


def np_masked_attention(q, k, v, mask, block):
    """Token-level mask from the block mask; softmax over kept keys; rows keeping nothing give zero."""
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    mask = np.broadcast_to(mask, (B, H) + mask.shape[-2:])
    out = np.zeros((B, H, Lq, v.shape[3]))
    for b in range(B):
        for h in range(H):
            s = q[b, h] @ k[b, h].T / math.sqrt(D)
            for t in range(Lq):
                keep = np.array([mask[b, h, t // block, u // block] for u in range(Lk)])
                if not keep.any():
                    continue
                p = np.exp(s[t, keep] - s[t, keep].max())
                out[b, h, t] = (p / p.sum()) @ v[b, h][keep]
    return out


def randn(*shape, g, dtype=D64):
    return torch.randn(*shape, generator=g, dtype=dtype)


@pytest.fixture
def g():
    return torch.Generator().manual_seed(20261202)


# --------------------------------------------------------------------------------------------------
# the line design
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 12, 16])
def test_closed_form_gram_equals_the_gram_of_the_basis_maps(n):
    for bpf in sorted({1, 2, 3, 4, 5, n}):
        if bpf > n:
            continue
        M = design(n, bpf)
        res = lines_design_gram(n, bpf)
        assert res.gram.dtype == D64 and res.gram.shape == (3 * n, 3 * n)
        np.testing.assert_array_equal(res.gram.numpy(), M.T @ M, err_msg=f"n={n}, blocks_per_frame={bpf}")


def test_the_factor_solves_the_ridge_system_and_falls_back():
    n, bpf = 9, 4                                            # a partial last frame
    G = design(n, bpf).T @ design(n, bpf)
    rhs = np.random.default_rng(0).normal(size=(3 * n, 5))
    for reg, method in ((1e-5, "cholesky"), (0.0, "pinv")):
        res = lines_design_gram(n, bpf, reg)
        assert res.method == method                          # reg = 0: the Gram is singular (collinear basis)
        X = _moddit._solve(res.method, res.factor, res.pivots, torch.from_numpy(rhs)).numpy()
        if method == "cholesky":
            np.testing.assert_allclose((G + reg * np.eye(3 * n)) @ X, rhs, atol=1e-8)
        else:                                                # the minimum-norm least-squares solution
            np.testing.assert_allclose(X, np.linalg.pinv(G) @ rhs, atol=1e-8)
    res = lines_design_gram(4, 2, dtype=torch.float32)
    assert res.gram.dtype == torch.float32 and res.factor.dtype == torch.float32


def test_lines_rhs_and_lines_map_equal_the_explicit_products(g):
    n, bpf = 11, 3
    M = design(n, bpf)
    S = torch.rand(2, 3, n, n, generator=g, dtype=D64)
    rhs = lines_rhs(S, bpf)
    assert rhs.shape == (2, 3, 3 * n)
    np.testing.assert_allclose(rhs.numpy(), S.numpy().reshape(6, n * n).dot(M).reshape(2, 3, 3 * n), rtol=1e-13)
    x = randn(4, 3 * n, g=g)
    np.testing.assert_allclose(lines_map(x, bpf).numpy().reshape(4, n * n), x.numpy() @ M.T, rtol=1e-13,
                               atol=1e-13)


@pytest.mark.parametrize("n,bpf", [(16, 4), (13, 5), (8, 1), (8, 8), (10, 3)])
def test_planted_maps_are_reproduced(g, n, bpf):
    # maps in the span of the basis; compare fitted MAPS: the coefficients are identified only up to the null
    # direction sum Diag_d - sum Col_j = 0
    M = design(n, bpf)
    x = randn(3, 3 * n, g=g)
    S = torch.from_numpy((x.numpy() @ M.T).reshape(3, n, n))
    res = fit_line_features(S, bpf)
    scale = float(torch.linalg.vector_norm(S))
    assert float(torch.linalg.vector_norm(res.fitted - S)) < 1e-4 * scale      # ridge bias at reg = 1e-5
    np.testing.assert_allclose(res.fitted.numpy().reshape(3, -1), res.coefficients.numpy() @ M.T, atol=1e-12)
    np.testing.assert_allclose(res.residual.numpy(), np.linalg.norm((res.fitted - S).numpy(), axis=(1, 2)))
    tight = fit_line_features(S, bpf, reg=1e-12)
    assert float(torch.linalg.vector_norm(tight.fitted - S)) < 1e-8 * scale
    # the coefficients are not the planted ones, and need not be: a null-space shift gives the same map
    null = np.concatenate([np.ones(2 * n - 1), -np.ones(n), [0.0]])
    assert np.abs(M @ null).max() < 1e-12
    assert float((res.coefficients - x).abs().max()) > 1e-3
    assert res.diagonals.shape == (3, 2 * n - 1) and res.columns.shape == (3, n) and res.block_diagonal.shape == (3,)


def test_fit_is_the_ridge_solution(g):
    n, bpf, reg = 7, 2, 1e-3
    M = design(n, bpf)
    S = torch.rand(5, n, n, generator=g, dtype=D64)
    res = fit_line_features(S, bpf, reg=reg)
    X = np.linalg.solve(M.T @ M + reg * np.eye(3 * n), M.T @ S.numpy().reshape(5, -1).T).T
    np.testing.assert_allclose(res.coefficients.numpy(), X, atol=1e-10)
    res32 = fit_line_features(S.float(), bpf, reg=reg)                 # the dtype of the maps
    assert res32.coefficients.dtype == torch.float32
    np.testing.assert_allclose(res32.coefficients.numpy(), X, atol=1e-5)


# --------------------------------------------------------------------------------------------------
# prediction and masks
# --------------------------------------------------------------------------------------------------
def test_top_k_returns_the_planted_important_lines():
    n, bpf = 16, 4
    planted = {("diag", 0), ("diag", 3), ("col", 5), ("col", 11)}
    S = np.full((n, n), 0.97)
    for i in range(n):
        for j in range(n):
            if ("diag", j - i) in planted or ("col", j) in planted:
                S[i, j] = 0.05                                # negligibility low: important
    fits = [fit_line_features(torch.from_numpy(S)[None], bpf) for _ in range(2)]
    sel = extrapolate_and_select(fits, 4)
    want = {0 + n - 1, 3 + n - 1, 2 * n - 1 + 5, 2 * n - 1 + 11}
    assert set(sel.lines[0].tolist()) == want
    mask = mask_from_lines(sel.lines, n, bpf)
    assert torch.equal(mask[0], torch.from_numpy(S < 0.5))


def test_extrapolation_is_cur_plus_change_over_T_and_selects_the_smallest(g):
    n, H = 6, 3
    prev, cur = randn(H, 3 * n, g=g), randn(H, 3 * n, g=g)
    for T, w in ((10, 0.5), (3, 1.0), (1, 2.0)):
        sel = extrapolate_and_select([prev, cur], 5, T, column_weight=w)
        pred = cur + (cur - prev) / T
        assert torch.equal(sel.predicted, pred) and torch.equal(sel.block_diagonal, cur[:, -1])
        score = pred[:, :-1].clone()
        score[:, 2 * n - 1:] *= w
        assert torch.equal(sel.lines, torch.argsort(score, dim=1)[:, :5])
        stacked = extrapolate_and_select(torch.stack([randn(H, 3 * n, g=g), prev, cur]), 5, T, column_weight=w)
        assert torch.equal(stacked.lines, sel.lines)
    every = extrapolate_and_select([prev, cur], 3 * n - 1).lines                      # every line
    assert torch.equal(every.sort(dim=1).values, torch.arange(3 * n - 1).expand(H, -1))


def test_mask_from_lines_against_a_loop(g):
    n, bpf, H = 10, 3, 4
    lines = torch.stack([torch.randperm(3 * n - 1, generator=g)[:4] for _ in range(H)])
    bd = torch.tensor([0.5, 1.0, 1.5, -2.0], dtype=D64)
    mask = mask_from_lines(lines, n, bpf, block_diagonal=bd)
    for h in range(H):
        chosen = set(lines[h].tolist())
        for i in range(n):
            for j in range(n):
                want = (j - i + n - 1) in chosen or (2 * n - 1 + j) in chosen
                want = want or (bool(bd[h] <= 1.0) and i // bpf == j // bpf)
                assert bool(mask[h, i, j]) == want
    assert torch.equal(mask_from_lines(lines, n, bpf), mask_from_lines(lines, n, bpf, block_diagonal=bd,
                                                                       bd_threshold=-3.0))
    for position, video in (("start", slice(3, None)), ("end", slice(0, n))):
        full = mask_from_lines(lines, n, bpf, block_diagonal=bd, text_blocks=3, text_position=position)
        assert full.shape == (H, n + 3, n + 3) and torch.equal(full[:, video, video], mask)
        text = torch.ones(n + 3, dtype=torch.bool)
        text[video] = False
        assert bool(full[:, text].all()) and bool(full[:, :, text].all())


# --------------------------------------------------------------------------------------------------
# block maps
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("Lq,Lk,block", [(32, 32, 8), (30, 45, 8), (17, 17, 4)])
def test_block_sparsity_map_against_a_brute_force_loop(g, Lq, Lk, block):
    q, k = 3.0 * randn(2, 2, Lq, 6, g=g), 3.0 * randn(2, 2, Lk, 6, g=g)   # sharp: fractions strictly inside (0, 1)
    for threshold in (1e-4, 1e-2):
        S = block_sparsity_map(q, k, block, threshold)
        want = np_block_map(q.numpy(), k.numpy(), block, threshold)
        assert S.dtype == D64 and S.shape == want.shape
        np.testing.assert_allclose(S.numpy(), want, rtol=0, atol=1e-15)
        assert 0.05 < float(S.mean()) < 0.95
    S32 = block_sparsity_map(q.float(), k.float(), block)
    assert S32.dtype == torch.float32


# --------------------------------------------------------------------------------------------------
# block-sparse attention
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("Lq,Lk,block,Dv", [(64, 64, 16, 8), (50, 70, 16, 5), (37, 37, 8, 8), (9, 9, 3, 2)])
def test_block_sparse_attention_equals_masked_dense_attention(g, Lq, Lk, block, Dv):
    B, H, D = 2, 3, 8
    q, k, v = randn(B, H, Lq, D, g=g), randn(B, H, Lk, D, g=g), randn(B, H, Lk, Dv, g=g)
    nq, nk = -(-Lq // block), -(-Lk // block)
    for shape in ((nq, nk), (H, nq, nk), (B, H, nq, nk), (1, H, nq, nk)):
        mask = torch.rand(*shape, generator=g) < 0.4
        mask[..., 0, :] = False                               # a row that keeps nothing: output zero
        out = block_sparse_attention(q, k, v, mask, block)
        ref = masked_dense_attention(q, k, v, mask, block)
        assert out.shape == (B, H, Lq, Dv) and out.dtype == D64
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=1e-13)
        np.testing.assert_allclose(ref.numpy(), np_masked_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy(),
                                                                    block), rtol=0, atol=1e-13)
        assert not bool(out[..., :block, :].any())


@pytest.mark.parametrize("budget", [1, 2000, 1 << 23])
def test_chunking_and_padding_do_not_change_the_result(g, monkeypatch, budget):
    # one row per chunk, a few rows per chunk (padded to the chunk's largest count), everything at once
    monkeypatch.setitem(_moddit._GATHER_ELEMENTS, "cpu", budget)
    q, k, v = randn(1, 2, 45, 4, g=g), randn(1, 2, 45, 4, g=g), randn(1, 2, 45, 4, g=g)
    mask = torch.rand(2, 6, 6, generator=g) < torch.linspace(0.1, 0.9, 6)[:, None]   # 0 to 6 blocks per row
    out = block_sparse_attention(q, k, v, mask, 8)
    np.testing.assert_allclose(out.numpy(), masked_dense_attention(q, k, v, mask, 8).numpy(), rtol=0, atol=1e-13)


def _counts_per_row(n, counts, H, g):
    """A mask per head whose row r keeps counts[r] key blocks, drawn at random."""
    order = torch.rand(H, n, n, generator=g).argsort(dim=-1)
    return order < torch.as_tensor(counts)[None, :, None]


@pytest.mark.parametrize("budget", [2000, 1 << 23])
def test_block_sparse_attention_computes_only_the_kept_blocks(g, monkeypatch, budget):
    # every attention product of the sparse path goes through scaled_dot_product_attention: count its
    # (query x key) sizes; nothing may compute the dense product (no matmul, no masked_dense_attention)
    monkeypatch.setitem(_moddit._GATHER_ELEMENTS, "cpu", budget)
    B, H, L, block, D = 2, 3, 196, 8, 4                    # 25 blocks, the last one partial
    n = -(-L // block)
    q, k, v = (randn(B, H, L, D, g=g) for _ in range(3))
    masks = {
        "graded": torch.rand(H, n, n, generator=g) < torch.linspace(0.0, 1.0, n)[:, None],
        "ragged": torch.rand(B, H, n, n, generator=g) < 0.3,
        # one row keeps 8 blocks, the others 7: padding the 7s to 8 would compute 8/7 > 9/8 of the kept tiles
        "one longer row": _counts_per_row(n, [8] + [7] * (n - 1), H, g),
    }
    real = F.scaled_dot_product_attention
    for name, mask in masks.items():
        ref = masked_dense_attention(q, k, v, mask, block)
        sizes = []

        def spy(Q, K, V, *args, **kwargs):
            sizes.append((math.prod(Q.shape[:-1]) * K.shape[-2], K.shape[-2]))
            return real(Q, K, V, *args, **kwargs)

        def dense(*args, **kwargs):
            raise AssertionError("a dense product on the block-sparse path")

        with monkeypatch.context() as mp:
            mp.setattr(F, "scaled_dot_product_attention", spy)
            for target, attr in ((torch, "matmul"), (torch, "bmm"), (torch.Tensor, "__matmul__"),
                                 (_moddit, "masked_dense_attention"), (_moddit, "block_sparsity_map")):
                mp.setattr(target, attr, dense)
            out = block_sparse_attention(q, k, v, mask, block)
        kept_tiles = int(mask.expand(B, H, n, n).sum())
        computed = sum(s for s, _ in sizes)
        assert kept_tiles * block**2 <= computed <= 1.125 * kept_tiles * block**2, (name, computed, kept_tiles)
        assert max(keys for _, keys in sizes) == int(mask.sum(dim=-1).max()) * block   # the longest row's keys
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=1e-13)


def test_all_true_mask_is_dense_attention(g):
    q, k, v = randn(2, 2, 40, 8, g=g), randn(2, 2, 40, 8, g=g), randn(2, 2, 40, 8, g=g)
    full = torch.ones(5, 5, dtype=torch.bool)
    dense = F.scaled_dot_product_attention(q, k, v)
    assert torch.equal(block_sparse_attention(q, k, v, full, 8), dense)          # the same call: the same bits
    # the gathered path itself, given the full mask, to rounding (float64): 1e-13
    gathered = _moddit._gathered_attention(q, k, v, full.expand(2, 2, 5, 5), 8, 8**-0.5)
    np.testing.assert_allclose(gathered.numpy(), dense.numpy(), rtol=0, atol=1e-13)
    # and with a partial last block
    q, k, v = q[:, :, :37], k[:, :, :37], v[:, :, :37]
    gathered = _moddit._gathered_attention(q, k, v, full.expand(2, 2, 5, 5), 8, 8**-0.5)
    np.testing.assert_allclose(gathered.numpy(), F.scaled_dot_product_attention(q, k, v).numpy(), rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype", [D64, torch.float32])
def test_masked_blocks_without_probability_mass_give_dense_attention(g, dtype):
    # tokens in 4 groups of blocks; scores 900 within a group and 0 across: exp(-900) is 0 in float64 and float32,
    # so the blocks across groups carry no probability and masking them changes nothing
    block, n, D = 4, 8, 8
    L = block * n
    group = (torch.arange(L) // block) % 4
    E = torch.eye(D, dtype=D64)[group] * math.sqrt(900.0 * math.sqrt(D))
    q = (E + 0.01 * randn(L, D, g=g))[None, None].to(dtype)
    k = E[None, None].to(dtype)
    v = randn(1, 1, L, 5, g=g).to(dtype)
    bg = torch.arange(n) % 4
    mask = bg[:, None] == bg[None, :]
    dense = F.scaled_dot_product_attention(q, k, v)
    out = block_sparse_attention(q, k, v, mask, block)
    assert float(mask.float().mean()) == 0.25
    tol = 1e-13 if dtype == D64 else 1e-5
    np.testing.assert_allclose(out.numpy(), dense.numpy(), rtol=0, atol=tol)


def test_gradients_equal_those_of_masked_dense_attention(g):
    B, H, L, D = 1, 1, 10, 2
    q, k, v = (randn(B, H, L, D, g=g).requires_grad_() for _ in range(3))
    mask = torch.tensor([[True, False, True], [False, False, False], [False, True, True]])
    assert torch.autograd.gradcheck(lambda a, b, c: block_sparse_attention(a, b, c, mask, 4), (q, k, v))
    w = randn(B, H, L, D, g=g)
    ga = torch.autograd.grad((block_sparse_attention(q, k, v, mask, 4) * w).sum(), (q, k, v))
    gb = torch.autograd.grad((masked_dense_attention(q, k, v, mask, 4) * w).sum(), (q, k, v))
    for a, b in zip(ga, gb):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-13)


def test_dtypes_follow_the_input(g):
    q, k, v = (randn(1, 2, 32, 8, g=g) for _ in range(3))
    mask = torch.rand(4, 4, generator=g) < 0.5
    mask[:, 0] = True
    ref = masked_dense_attention(q, k, v, mask, 8)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 5e-2)):
        out = block_sparse_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask, 8)
        assert out.dtype == dtype and out.device == q.device
        np.testing.assert_allclose(out.double().numpy(), ref.numpy(), atol=tol)


# --------------------------------------------------------------------------------------------------
# the online state
# --------------------------------------------------------------------------------------------------
def test_schedule():
    state = OnlineMaskState(top_k=3, blocks_per_frame=2)
    dense = [s for s in range(100) if state.is_dense(s)]
    assert dense == list(range(12)) + [21, 31, 41, 51, 61, 71, 81, 91]
    assert state.dense_steps(100) == dense and state.dense_steps(5) == [0, 1, 2, 3, 4]
    other = OnlineMaskState(top_k=3, blocks_per_frame=2, warmup=4, predict_T=3)
    assert other.dense_steps(16) == [0, 1, 2, 3, 6, 9, 12, 15]


def test_online_update_changes_only_unmasked_history(g):
    n, H = 12, 3
    state = OnlineMaskState(top_k=4, blocks_per_frame=3)
    assert state.update(0, torch.rand(H, n, n, generator=g, dtype=D64)) is None
    assert state.update(10, torch.rand(H, n, n, generator=g, dtype=D64)) is None and state.history is not None
    mask = state.update(11, torch.rand(H, n, n, generator=g, dtype=D64))
    assert mask.shape == (H, n, n) and mask.dtype == torch.bool and 0 < state.sparsity < 1
    before, used = state.history.clone(), state.mask.clone()
    new = torch.rand(H, n, n, generator=g, dtype=D64)
    state.update(21, new)
    assert torch.equal(state.history[used], new[used])                    # measured where the mask computed
    assert torch.equal(state.history[~used], before[~used])               # the rest keeps its old measurement
    assert len(state.fits) == 2
    refit = fit_line_features(torch.where(used, new, before), 3)
    assert torch.equal(state.fits[-1].coefficients, refit.coefficients)
    with pytest.raises(ValueError, match="`step` 15 is not a full-attention step"):
        state.update(15, new)


def test_frame_block_heads_are_decided_once_at_the_end_of_the_warm_up():
    # the anchor decides which heads keep the frame-block diagonal once, at the end of the warm-up, and keeps
    # that mode at every refit. Head 0: important columns and important frame blocks during the warm-up (BD
    # coefficient -0.3 <= 0: keeps them), negligible frame blocks at the refit (+0.3: a refit alone would drop
    # them). Head 1: important diagonals, frame blocks negligible (+0.3), then important (-0.3).
    n, bpf = 12, 3
    nd = 2 * n - 1

    def maps(bd0, bd1):
        x = torch.zeros(2, 3 * n, dtype=D64)
        x[:, nd:nd + n] = 0.9                                   # a constant 0.9 (as columns)
        x[0, nd + torch.tensor([0, 5, 9])] -= 0.8               # head 0: columns 0, 5, 9 matter
        x[1, torch.tensor([4, 7, 16]) + n - 1] -= 0.8           # head 1: diagonals 4, 7 and 16 - 11 = 5 matter
        x[:, -1] = torch.tensor([bd0, bd1], dtype=D64)
        return lines_map(x, bpf)

    state = OnlineMaskState(top_k=3, blocks_per_frame=bpf, bd_threshold=0.0)
    state.update(10, maps(-0.3, 0.3))
    state.update(11, maps(-0.3, 0.3))
    assert state.block_diagonal_heads.tolist() == [True, False]
    frames = _moddit._bd_mask(n, bpf, "cpu")
    assert bool(state.mask[0][frames].all()) and not bool(state.mask[1][frames].all())
    state.update(21, maps(0.3, -0.3))
    assert state.fits[-1].block_diagonal[0] > 0.2                # the refit alone would drop head 0's frames
    assert state.block_diagonal_heads.tolist() == [True, False]
    sel = extrapolate_and_select(state.fits, 3, 10)
    assert torch.equal(state.mask, mask_from_lines(sel.lines, n, bpf, block_diagonal=torch.tensor([True, False])))
    assert bool(state.mask[0][frames].all())
    # a new run decides again
    state.update(10, maps(0.3, -0.3))
    state.update(11, maps(0.3, -0.3))
    assert state.block_diagonal_heads.tolist() == [False, True]


@pytest.mark.parametrize("position,T,V", [("start", 16, 40), ("end", 12, 48), ("end", 0, 44)])
def test_text_tokens_keep_full_attention(g, position, T, V):
    # a joint sequence of T text tokens (first or last) and V video tokens, blocks of 8: the block maps cover the
    # video blocks (video queries, video keys, the softmax over every key); at the sparse steps the text rows and
    # columns are computed whole, and the output is masked dense attention with that mask
    B, H, D, block = 2, 2, 8, 8
    L = T + V
    video = slice(T, L) if position == "start" else slice(0, V)
    n, t = -(-V // block), -(-T // block)
    vb = slice(t, None) if position == "start" else slice(0, n)
    state = OnlineMaskState(top_k=2, blocks_per_frame=2, warmup=3, predict_T=2, block=block, text_tokens=T,
                            text_position=position)
    text_rows = torch.ones(L, dtype=torch.bool)
    text_rows[video] = False
    sparse_steps = 0
    for step in range(7):
        q, k, v = randn(B, H, L, D, g=g), randn(B, H, L, D, g=g), randn(B, H, L, 5, g=g)
        before = None if state.history is None else state.history.clone()
        mask = state.mask
        out = state.attention(q, k, v, step)
        dense = F.scaled_dot_product_attention(q, k, v)
        if state.is_dense(step):
            assert torch.equal(out, dense)
            if step >= 1:                                          # the video block map of this step, merged
                want = torch.from_numpy(np_block_map(q[:, :, video].numpy(), k.numpy(), block, 1e-4)).mean(dim=0)
                want = want[..., vb]
                used = torch.ones(H, n, n, dtype=torch.bool) if step < 3 else (mask[:, vb, vb])
                np.testing.assert_allclose(state.history[used].numpy(), want[used].numpy(), atol=1e-15)
                if before is not None:
                    assert torch.equal(state.history[~used], before[~used])
            continue
        sparse_steps += 1
        assert mask.shape == (H, n + t, n + t)
        assert bool(mask[:, ~vb_mask(n + t, vb)].all()) and bool(mask[:, :, ~vb_mask(n + t, vb)].all())
        assert torch.equal(state.video_mask, mask[:, vb, vb]) and not bool(state.video_mask.all())
        np.testing.assert_allclose(out.numpy(), masked_dense_attention(q, k, v, mask, block).numpy(), rtol=0,
                                   atol=1e-13)
        np.testing.assert_allclose(out[:, :, text_rows].numpy(), dense[:, :, text_rows].numpy(), rtol=0,
                                   atol=1e-13)                         # text queries attend to every key
    assert sparse_steps == 2


def vb_mask(nb, vb):
    """The blocks of slice vb among nb blocks, as a bool vector."""
    m = torch.zeros(nb, dtype=torch.bool)
    m[vb] = True
    return m


def test_text_geometry_is_checked(g):
    x = randn(1, 1, 60, 4, g=g)
    with pytest.raises(ValueError, match="`text_tokens` must be a multiple of `block` = 8 when the text comes first"):
        OnlineMaskState(top_k=2, blocks_per_frame=2, block=8, text_tokens=12, text_position="start")
    with pytest.raises(ValueError, match="`text_position` must be one of 'start', 'end'"):
        OnlineMaskState(top_k=2, blocks_per_frame=2, block=8, text_tokens=8, text_position="middle")
    with pytest.raises(ValueError, match="`text_tokens` = 8: with the text last, the 52 video tokens"):
        OnlineMaskState(top_k=2, blocks_per_frame=2, block=8, text_tokens=8).attention(x, x, x, 0)
    with pytest.raises(ValueError, match="`text_tokens` = 60 must be less than the sequence length L = 60"):
        OnlineMaskState(top_k=2, blocks_per_frame=2, block=8, text_tokens=60).attention(x, x, x, 0)
    state = OnlineMaskState(top_k=2, blocks_per_frame=2, warmup=2, block=8, text_tokens=12)
    for step in range(2):
        state.attention(x, x, x, step)
    with pytest.raises(ValueError, match="`q` has 68 tokens, 9 blocks of 8, but the mask of this run covers 8"):
        state.attention(*(randn(1, 1, 68, 4, g=g) for _ in range(3)), 2)


def test_a_missing_warm_up_step_is_named(g):
    S = torch.rand(2, 6, 6, generator=g, dtype=D64)
    state = OnlineMaskState(top_k=2, blocks_per_frame=2)
    with pytest.raises(ValueError, match=r"`step` 11 is the last warm-up step: .* block map of warm-up step 10, "
                                         r"recorded just before it, and none was recorded in this run"):
        state.update(11, S)
    state.update(10, S)
    state.update(11, S)
    assert state.mask is not None
    with pytest.raises(ValueError, match="warm-up step 10, recorded just before it, and the last one recorded was "
                                         "that of step 11"):
        state.update(11, S)                                    # twice: step 10 must come again first
    mask = state.update(10, S)                                 # step warmup - 2 starts a new run
    assert mask is None and state.fits and len(state.fits) == 1
    with pytest.raises(ValueError, match="`step` 1 is the last warm-up step"):
        OnlineMaskState(top_k=2, blocks_per_frame=2, warmup=2).update(1, S)


def test_online_attention_follows_the_schedule(g):
    B, H, L, D, block = 1, 2, 48, 8, 8
    state = OnlineMaskState(top_k=2, blocks_per_frame=2, warmup=3, predict_T=2, block=block)
    for step in range(7):
        q, k, v = (randn(B, H, L, D, g=g) for _ in range(3))
        mask = state.mask
        out = state.attention(q, k, v, step)
        if state.is_dense(step):                                          # steps 0, 1, 2, 4, 6
            assert torch.equal(out, F.scaled_dot_product_attention(q, k, v))
        else:
            assert torch.equal(out, block_sparse_attention(q, k, v, mask, block))
        assert (state.mask is None) == (step < 2)
    with pytest.raises(ValueError, match="no mask yet"):
        OnlineMaskState(top_k=2, blocks_per_frame=2, block=block).attention(q, k, v, 12)


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
def test_validation_names_the_argument(g):
    q = randn(1, 2, 16, 4, g=g)
    m = torch.ones(2, 2, dtype=torch.bool)
    cases = [
        (lambda: block_sparse_attention(q, q[:, :1], q, m, 8), ValueError, "`k`"),
        (lambda: block_sparse_attention(q, q, q.float(), m, 8), TypeError, "`v`"),
        (lambda: block_sparse_attention(q[0], q, q, m, 8), ValueError, "`q`"),
        (lambda: block_sparse_attention(q, q, q, m.float(), 8), TypeError, "`block_mask`"),
        (lambda: block_sparse_attention(q, q, q, torch.ones(3, 2, dtype=torch.bool), 8), ValueError, "`block_mask`"),
        (lambda: block_sparse_attention(q, q, q, torch.ones(3, 2, 2, dtype=torch.bool), 8), ValueError,
         "`block_mask`"),
        (lambda: block_sparse_attention(q, q, q, m, 0), ValueError, "`block`"),
        (lambda: block_sparse_attention(q * float("nan"), q, q, m, 8), ValueError, "`q`"),
        (lambda: masked_dense_attention(q, q, q, m, 8, scale=-1.0), ValueError, "`scale`"),
        (lambda: block_sparsity_map(q, q, 8, threshold=2.0), ValueError, "`threshold`"),
        (lambda: lines_design_gram(0, 1), ValueError, "`n`"),
        (lambda: lines_design_gram(4, 5), ValueError, "`blocks_per_frame`"),
        (lambda: lines_design_gram(4, 2, reg=-1.0), ValueError, "`reg`"),
        (lambda: lines_design_gram(4, 2, dtype=torch.int64), TypeError, "`dtype`"),
        (lambda: lines_design_gram(4, 2, device="nowhere"), ValueError, "`device`"),
        (lambda: lines_rhs(torch.ones(3, 4), 1), ValueError, "`S`"),
        (lambda: fit_line_features(torch.ones(4, 4, dtype=torch.int64), 1), TypeError, "`S`"),
        (lambda: lines_map(torch.ones(5), 1), ValueError, "`coefficients`"),
        (lambda: extrapolate_and_select([torch.ones(6)], 2), ValueError, "`history`"),
        (lambda: extrapolate_and_select([torch.ones(6), torch.ones(9)], 2), ValueError, "`history`"),
        (lambda: extrapolate_and_select([torch.ones(6), "x"], 2), TypeError, "`history`"),
        (lambda: extrapolate_and_select(torch.ones(2, 6), 0), ValueError, "`top_k`"),
        (lambda: extrapolate_and_select(torch.ones(2, 6), 1, predict_T=0), ValueError, "`predict_T`"),
        (lambda: extrapolate_and_select(torch.ones(2, 6), 1, column_weight=0.0), ValueError, "`column_weight`"),
        (lambda: mask_from_lines(torch.tensor([0.5]), 3, 1), TypeError, "`lines`"),
        (lambda: mask_from_lines(torch.tensor([8]), 3, 1), ValueError, "`lines`"),
        (lambda: mask_from_lines(torch.tensor([[1]]), 3, 1, block_diagonal=torch.ones(2)), ValueError,
         "`block_diagonal`"),
        (lambda: OnlineMaskState(top_k=0, blocks_per_frame=1), ValueError, "`top_k`"),
        (lambda: OnlineMaskState(top_k=1, blocks_per_frame=1, warmup=1), ValueError, "`warmup`"),
        (lambda: OnlineMaskState(top_k=1, blocks_per_frame=1).is_dense(-1), ValueError, "`step`"),
        (lambda: OnlineMaskState(top_k=1, blocks_per_frame=1).update(10, torch.ones(2, 3)), ValueError,
         "`block_map`"),
        (lambda: demo(steps=0), ValueError, "`steps`"),
        (lambda: demo(steps=12), ValueError, "`steps`"),
    ]
    for call, exc, name in cases:
        with pytest.raises(exc, match=name):
            call()


def test_sizes_beyond_the_problem_are_refused(g):
    # a block longer than both sequences only pads them (2**26 tokens: a gigabyte for 16 tokens); a frame longer
    # than the map, or more lines than it has, were clamped silently: each is refused, naming the parameter
    q = randn(1, 1, 16, 4, g=g)
    m0 = torch.zeros(1, 1, dtype=torch.bool)
    for block in (17, 2**26, 2**31 - 1):
        for call in (lambda: block_sparse_attention(q, q, q, m0, block),
                     lambda: masked_dense_attention(q, q, q, m0, block),
                     lambda: block_sparsity_map(q, q, block)):
            with pytest.raises(ValueError, match=r"`block` must be <= max\(Lq, Lk\) = 16"):
                call()
    short = q[:, :, :4]                                   # Lq = 4, Lk = 16: a block of 16 is one block each
    assert block_sparse_attention(short, q, q, m0, 16).shape == (1, 1, 4, 4)
    assert block_sparsity_map(q, short, 16).shape == (1, 1, 1, 1)
    two = torch.ones(2, 6, dtype=D64)
    assert extrapolate_and_select(two, 5).lines.shape == (5,)             # n = 2: 3n - 1 = 5 lines
    for top_k in (6, 10**30):
        with pytest.raises(ValueError, match="`top_k` must be <= 3n - 1 = 5"):
            extrapolate_and_select(two, top_k)
    with pytest.raises(ValueError, match="`blocks_per_frame` must be <= n = 2"):
        lines_map(two[0], 10**30)
    S = torch.rand(1, 4, 4, generator=g, dtype=D64)
    with pytest.raises(ValueError, match="`blocks_per_frame` must be <= n = 4"):
        OnlineMaskState(top_k=1, blocks_per_frame=50, warmup=2).update(0, S)
    with pytest.raises(ValueError, match="`top_k` must be <= 3n - 1 = 11"):
        OnlineMaskState(top_k=12, blocks_per_frame=2, warmup=2).update(0, S)
    assert OnlineMaskState(top_k=11, blocks_per_frame=4, warmup=2).update(0, S) is None
    x = randn(1, 1, 48, 4, g=g)                             # 48 tokens: checked at step 0 already
    with pytest.raises(ValueError, match="`block` must be <= max"):
        OnlineMaskState(top_k=2, blocks_per_frame=2).attention(x, x, x, 0)
    with pytest.raises(ValueError, match="`blocks_per_frame` must be <= n = 6"):
        OnlineMaskState(top_k=2, blocks_per_frame=7, block=8).attention(x, x, x, 0)
    with pytest.raises(ValueError, match="`top_k` must be <= 3n - 1 = 17"):
        OnlineMaskState(top_k=18, blocks_per_frame=2, block=8).attention(x, x, x, 0)


def test_finiteness_of_q_k_v_is_checked_by_the_bridge(g, monkeypatch):
    # q, k and v go through numtk.torch._common.check_tensor (no finiteness check of the module's own)
    from numtk.torch import _common

    q = randn(1, 1, 8, 4, g=g)
    m = torch.ones(1, 1, dtype=torch.bool)
    seen = []
    real = _common.check_tensor
    monkeypatch.setattr(_moddit, "check_tensor", lambda t, name, **kw: seen.append((name, kw)) or real(t, name, **kw))
    masked_dense_attention(q, q, q, m, 8)
    assert [name for name, _ in seen[:3]] == ["q", "k", "v"] and all(kw.get("finite", True) for _, kw in seen[:3])
    monkeypatch.undo()
    assert not hasattr(_moddit, "_finite")
    for i, name in enumerate("qkv"):
        args = [q, q, q]
        args[i] = q.clone().index_fill_(2, torch.tensor([3]), float("inf"))
        with pytest.raises(ValueError, match=f"`{name}` must be finite"):
            block_sparse_attention(*args, m, 8)
    big = torch.full((1, 1, 8, 4), 3e38)                 # finite, though its sum overflows float32
    assert bool(torch.isfinite(block_sparsity_map(big, big, 8)).all())


def test_the_asv_suite_is_skipped_without_torch(monkeypatch):
    import builtins
    import importlib
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench"
    if not (bench / "benchmarks" / "bench_torch_moddit.py").is_file():
        pytest.skip("bench/ is not in this checkout")
    monkeypatch.syspath_prepend(str(bench))
    before = set(sys.modules)
    suite = importlib.import_module("benchmarks.bench_torch_moddit")
    real = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    for bench_class, args in ((suite.BlockSparseAttention, (0.8, "rows")), (suite.BlockMapAndFit, ())):
        with pytest.raises(NotImplementedError, match="torch is not installed"):
            bench_class().setup(*args)
    monkeypatch.undo()
    # with torch: one thread from setup to teardown (compare.py's primary figure), then the count as it was
    before_threads = torch.get_num_threads()
    timed = suite.BlockMapAndFit()
    timed.setup()
    assert torch.get_num_threads() == 1
    timed.teardown()
    assert torch.get_num_threads() == before_threads
    compare = importlib.import_module("benchmarks._torch_moddit")
    assert compare._thread_counts(1) == [1] and compare._thread_counts(4) == [1, 4]
    for name in set(sys.modules) - before:                    # bench/'s modules leave with bench/'s path
        del sys.modules[name]


# --------------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------------
def test_demo_orders_the_masks(monkeypatch):
    threads = []
    real = _moddit.OnlineMaskState.attention
    monkeypatch.setattr(_moddit.OnlineMaskState, "attention",
                        lambda self, *a: threads.append(torch.get_num_threads()) or real(self, *a))
    before = torch.get_num_threads()
    res = demo(steps=13, quick=True)
    assert set(threads) == {1} and len(threads) == 13 and torch.get_num_threads() == before   # timed on one thread
    m = res.metrics
    assert (m["dense_steps"], m["sparse_steps"], m["n"]) == (12, 1, 64)
    assert m["moddit"]["error"] < m["static"]["error"] < m["random"]["error"]
    assert m["moddit"]["error"] < 0.02 and m["moddit"]["sparsity"] > 0.7
    assert abs(m["random"]["sparsity"] - m["moddit"]["sparsity"]) < 1e-12
    assert res.maps["measured"].shape == (4, 64, 64) and len(res.history["step"]) == 1
