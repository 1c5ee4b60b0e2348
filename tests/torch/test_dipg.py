"""numtk.torch.dipg: the exact top-k, sum-of-Gamma noise, the I-MLE top-k, the screened top-k, candidate edges,
the GCN and DiscreteGraphPrompt.

Oracles: a brute-force top-k in plain Python (sort by (-score, position)), the closed-form moments of the
sum-of-Gamma noise, the I-MLE gradient rebuilt by hand from the same generator, a linear cost whose optimum is
known (the k smallest costs), a breadth-first search in plain Python, the dense NumPy formula of the GCN and the
prompted model rebuilt for one target from the public pieces.
"""

import math

import numpy as np
import pytest
import torch

from numtk.torch.dipg import (GCN, DiscreteGraphPrompt, candidate_edges, demo, imle_topk, screened_topk,
                              sum_of_gamma_noise, topk_mask)

F64 = torch.float64


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def brute_topk(scores, k):
    """Row by row: the k first positions when sorted by (-score, position)."""
    a = np.asarray(scores, dtype=float)
    flat = a.reshape(-1, a.shape[-1])
    out = np.zeros_like(flat)
    for r, row in enumerate(flat):
        order = sorted(range(len(row)), key=lambda i: (-row[i], i))
        out[r, order[:k]] = 1
    return out.reshape(a.shape)


# --------------------------------------------------------------------------------------------------
# topk_mask
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.int64, torch.int32])
def test_topk_mask_matches_brute_force_with_ties_and_batches(dtype):
    g = gen(1)
    for shape in [(7,), (4, 9), (2, 3, 11)]:
        # small integers: many ties
        scores = torch.randint(-3, 4, shape, generator=g).to(dtype)
        for k in range(shape[-1] + 1):
            z = topk_mask(scores, k)
            assert z.dtype == dtype and z.shape == scores.shape
            np.testing.assert_array_equal(z.numpy(), brute_topk(scores.numpy(), k))
            assert bool((z.sum(-1) == k).all())


def test_topk_mask_edges_and_infinities():
    s = torch.tensor([1.0, -math.inf, 2.0, math.inf, -math.inf])
    assert topk_mask(s, 0).sum() == 0
    assert bool((topk_mask(s, 5) == 1).all())
    assert topk_mask(s, 2).tolist() == [0, 0, 1, 1, 0]
    assert topk_mask(s, 4).tolist() == [1, 1, 1, 1, 0]          # -inf ties: the lower position
    assert topk_mask(torch.zeros(3, 0), 0).shape == (3, 0)
    assert topk_mask(torch.zeros(0, 4), 2).shape == (0, 4)
    assert topk_mask(torch.full((5,), 2.0), 3).tolist() == [1, 1, 1, 0, 0]


def test_topk_mask_validation():
    with pytest.raises(ValueError, match="`scores`"):
        topk_mask(torch.tensor([1.0, float("nan")]), 1)
    with pytest.raises(ValueError, match="`scores`"):
        topk_mask(torch.tensor(1.0), 1)
    with pytest.raises(TypeError, match="`scores`"):
        topk_mask(torch.tensor([True, False]), 1)
    with pytest.raises(TypeError, match="`scores`"):
        topk_mask(np.ones(3), 1)
    with pytest.raises(ValueError, match="`k`"):
        topk_mask(torch.ones(3), 4)
    with pytest.raises(ValueError, match="`k`"):
        topk_mask(torch.ones(3), -1)
    with pytest.raises(TypeError, match="`k`"):
        topk_mask(torch.ones(3), 1.5)


# --------------------------------------------------------------------------------------------------
# sum-of-Gamma noise
# --------------------------------------------------------------------------------------------------
def test_sum_of_gamma_moments():
    k, s, n = 5, 10, 200_000
    eps = sum_of_gamma_noise((n,), k, n_iter=s, rng=3, dtype=F64)
    H = sum(1.0 / i for i in range(1, s + 1))
    mean, var = (H - math.log(s)) / k, sum(1.0 / i**2 for i in range(1, s + 1)) / k
    assert abs(float(eps.mean()) - mean) < 4 * math.sqrt(var / n)
    # the variance of the sample variance needs the fourth moment; 4 % is many standard errors here
    assert abs(float(eps.var()) - var) < 0.04 * var


def test_sum_of_gamma_determinism_and_validation():
    a = sum_of_gamma_noise((3, 4), 2, rng=7)
    b = sum_of_gamma_noise((3, 4), 2, rng=np.random.default_rng(1))
    assert torch.equal(a, sum_of_gamma_noise((3, 4), 2, rng=7))
    assert torch.equal(b, sum_of_gamma_noise((3, 4), 2, rng=np.random.default_rng(1)))
    assert a.dtype == torch.get_default_dtype() and sum_of_gamma_noise(5, 1, dtype=F64).dtype == F64
    with pytest.raises(ValueError, match="`k`"):
        sum_of_gamma_noise(3, 0)
    with pytest.raises(ValueError, match="`n_iter`"):
        sum_of_gamma_noise(3, 2, n_iter=0)
    with pytest.raises(ValueError, match="`n_iter`"):
        sum_of_gamma_noise(3, 2, n_iter=10**12)
    with pytest.raises(TypeError, match="`shape`"):
        sum_of_gamma_noise("x", 2)
    with pytest.raises(ValueError, match="`shape`"):
        sum_of_gamma_noise((2, -1), 2)
    with pytest.raises(TypeError, match="`rng`"):
        sum_of_gamma_noise(3, 2, rng="x")
    with pytest.raises(TypeError, match="`dtype`"):
        sum_of_gamma_noise(3, 2, dtype=torch.int64)


# --------------------------------------------------------------------------------------------------
# I-MLE
# --------------------------------------------------------------------------------------------------
def test_imle_forward_is_k_hot():
    theta = torch.randn(5, 12, generator=gen(2), dtype=F64)
    for S in (1, 3):
        z = imle_topk(theta, 4, n_samples=S, rng=0)
        assert z.shape == ((5, 12) if S == 1 else (S, 5, 12))
        assert bool(((z == 0) | (z == 1)).all()) and bool((z.sum(-1) == 4).all())
    assert torch.equal(imle_topk(theta, 4, noise_temperature=0.0), topk_mask(theta, 4))


def test_imle_backward_reuses_the_forward_noise():
    theta = torch.randn(3, 10, generator=gen(4), dtype=F64)
    k, lam, tau, S = 3, 2.5, 0.7, 4
    g_up = torch.randn(S, 3, 10, generator=gen(5), dtype=F64)
    t = theta.clone().requires_grad_(True)
    z = imle_topk(t, k, lam=lam, n_samples=S, noise_temperature=tau, rng=11)
    (z * g_up).sum().backward()
    # by hand: the same generator gives the same noise; target theta - lam * dL/dz with that noise
    eps = tau * sum_of_gamma_noise((S, 3, 10), k, rng=11, dtype=F64)
    z_fwd = topk_mask(theta + eps, k)
    z_tgt = topk_mask(theta - lam * g_up + eps, k)
    assert torch.equal(z.detach(), z_fwd)
    assert torch.equal(t.grad, (z_fwd - z_tgt).mean(0))
    # fresh noise in the backward would differ: with independent noise the hand-built gradient changes
    eps2 = tau * sum_of_gamma_noise((S, 3, 10), k, rng=12, dtype=F64)
    assert not torch.equal(t.grad, (z_fwd - topk_mask(theta - lam * g_up + eps2, k)).mean(0))


def test_imle_gradient_no_division_by_lambda():
    theta = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=F64, requires_grad=True)
    z = imle_topk(theta, 2, lam=100.0, noise_temperature=0.0)
    (z * torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=F64)).sum().backward()
    assert theta.grad.tolist() == [0.0, 1.0, -1.0, 0.0]   # z - z', entries in {-1, 0, 1}


def test_imle_learns_the_k_smallest_costs():
    m, k = 12, 4
    # a clear gap of 1 between the k-th and the (k+1)-th smallest cost
    c = torch.cat([torch.linspace(-2.0, -1.0, k, dtype=F64), torch.linspace(0.0, 2.0, m - k, dtype=F64)])
    c = c[torch.randperm(m, generator=gen(6))]
    theta = torch.zeros(m, dtype=F64, requires_grad=True)
    opt = torch.optim.SGD([theta], lr=0.1)
    g = gen(7)
    for _ in range(200):
        opt.zero_grad()
        z = imle_topk(theta, k, lam=5.0, rng=g)
        (z * c).sum().backward()
        opt.step()
    want = torch.zeros(m, dtype=F64)
    want[torch.argsort(c)[:k]] = 1
    assert torch.equal(topk_mask(theta.detach(), k), want)


def test_imle_determinism_and_validation():
    theta = torch.randn(6, generator=gen(8))
    assert torch.equal(imle_topk(theta, 2, rng=3), imle_topk(theta, 2, rng=3))
    with pytest.raises(ValueError, match="`theta`"):
        imle_topk(torch.tensor([1.0, float("inf")]), 1)
    with pytest.raises(TypeError, match="`theta`"):
        imle_topk(torch.ones(3, dtype=torch.int64), 1)
    with pytest.raises(ValueError, match="`k`"):
        imle_topk(theta, 7)
    with pytest.raises(ValueError, match="`lam`"):
        imle_topk(theta, 2, lam=-1.0)
    with pytest.raises(ValueError, match="`n_samples`"):
        imle_topk(theta, 2, n_samples=0)
    with pytest.raises(ValueError, match="`noise_temperature`"):
        imle_topk(theta, 2, noise_temperature=float("nan"))
    with pytest.raises(ValueError, match="`n_samples`"):      # n_samples x numel beyond the memory
        imle_topk(torch.zeros(2**20), 1, n_samples=2**20, rng=0)
    with pytest.raises(ValueError, match="`n_samples`"):
        imle_topk(theta, 2, n_samples=2**20 + 1)


@pytest.mark.skipif(not torch.backends.mps.is_available() and not torch.cuda.is_available(),
                    reason="needs a second device")
def test_generator_on_another_device():
    dev = "cuda" if torch.cuda.is_available() else "mps"
    with pytest.raises(ValueError, match="`rng`"):
        imle_topk(torch.randn(5), 2, rng=torch.Generator(device=dev))
    with pytest.raises(ValueError, match="`rng`"):
        sum_of_gamma_noise(5, 2, rng=torch.Generator(device=dev), device="cpu")


# --------------------------------------------------------------------------------------------------
# screened top-k
# --------------------------------------------------------------------------------------------------
def test_screened_equals_full_topk_on_ten_thousand_instances():
    # narrow bounds (w <= 0.3) screen most items out: the masked top-k gathers the active items into a block
    # (its max(n_active) < m // 2 path); wide ones (w <= 2) leave many in and it solves in place
    g = gen(9)
    m, n = 60, 250
    total = 0
    paths = set()
    for k, ties, wmax in [(1, False, 0.3), (5, True, 0.3), (12, False, 0.3), (25, True, 2.0)]:
        for _ in range(10):
            v = torch.randn(n, m, generator=g, dtype=F64)
            if ties:
                v = torch.round(v * 2)                       # many ties, inside and across the bounds
            width = torch.rand(n, 1, generator=g, dtype=F64) * wmax
            lo = v - width * torch.rand(n, m, generator=g, dtype=F64)
            hi = v + width * torch.rand(n, m, generator=g, dtype=F64)
            r = screened_topk(v, k, lo, hi)
            ref = topk_mask(v, k)
            assert torch.equal(r.mask, ref)
            assert bool((r.n_active >= k).all()) and r.widened == 0
            assert bool((ref.bool() <= r.active).all())         # the winners are active
            gather = int(r.n_active.max()) < m // 2
            paths.add(gather)
            if ties and gather:
                # the tied case through the gather path against the brute-force top-k, k < m
                np.testing.assert_array_equal(r.mask[:60].numpy(), brute_topk(v[:60].numpy(), k))
                paths.add("tied gather")
            total += n
    assert paths == {True, False, "tied gather"}
    assert total == 10_000


def test_screened_active_set_shrinks_as_lambda_goes_to_zero():
    g = gen(10)
    theta = torch.randn(200, 500, generator=g, dtype=F64)
    eps = sum_of_gamma_noise((200, 500), 10, rng=g, dtype=F64)
    grad = 2 * torch.rand(200, 500, generator=g, dtype=F64) - 1     # |g| <= G = 1
    fractions = []
    for lam in (10.0, 1.0, 0.1, 0.01):
        v = theta + eps - lam * grad
        r = screened_topk(v, 10, theta + eps - lam, theta + eps + lam)
        assert torch.equal(r.mask, topk_mask(v, 10))
        fractions.append(r.fraction)
    assert all(a > b for a, b in zip(fractions, fractions[1:]))
    assert fractions[0] > 0.5 and fractions[-1] < 0.03


def test_screened_threshold_and_widening():
    g = gen(11)
    v = torch.randn(50, 30, generator=g, dtype=F64)
    lo, hi = v - 0.3, v + 0.3
    kth = torch.topk(lo, 4).values[:, -1]
    r = screened_topk(v, 4, lo, hi, threshold=kth)
    assert torch.equal(r.mask, topk_mask(v, 4)) and r.widened == 0
    assert torch.equal(r.active, screened_topk(v, 4, lo, hi).active)
    # a threshold too high is detected per row; violated bounds are widened; the result stays exact
    r = screened_topk(v, 4, lo, hi, threshold=10.0)
    assert torch.equal(r.mask, topk_mask(v, 4)) and r.widened == 50
    bad_hi = hi.clone()
    bad_hi[:, 0] = v[:, 0] - 5
    r = screened_topk(v, 4, torch.minimum(lo, bad_hi), bad_hi)
    assert torch.equal(r.mask, topk_mask(v, 4)) and r.widened == 50
    # k = 0 and k = m
    assert screened_topk(v, 0, lo, hi).mask.sum() == 0
    assert bool((screened_topk(v, 30, lo, hi).mask == 1).all())


def test_screened_validation():
    v = torch.zeros(5)
    with pytest.raises(ValueError, match="`lower`"):
        screened_topk(v, 2, torch.zeros(4), torch.zeros(5))
    with pytest.raises(ValueError, match="`lower`"):
        screened_topk(v, 2, torch.ones(5), torch.zeros(5))
    with pytest.raises(ValueError, match="`upper`"):
        screened_topk(v, 2, torch.zeros(5), torch.full((5,), float("nan")))
    with pytest.raises(ValueError, match="`values`"):
        screened_topk(torch.full((5,), float("nan")), 2, v, v)
    with pytest.raises(ValueError, match="`k`"):
        screened_topk(v, 6, v, v)
    with pytest.raises(ValueError, match="`threshold`"):
        screened_topk(v, 2, v, v, threshold=float("inf"))


# --------------------------------------------------------------------------------------------------
# candidate edges
# --------------------------------------------------------------------------------------------------
def bfs(edge_list, n, target, hops):
    adj = {i: set() for i in range(n)}
    for a, b in edge_list:
        adj[a].add(b)
        adj[b].add(a)
    seen, frontier = {target}, {target}
    for _ in range(hops):
        frontier = {w for v in frontier for w in adj[v]} - seen
        seen |= frontier
    return sorted(seen)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_candidate_edges_match_a_bfs(dtype):
    rs = np.random.default_rng(0)
    for trial in range(20):
        n = int(rs.integers(1, 30))
        E = int(rs.integers(0, 40))
        e = rs.integers(0, n, size=(2, E))
        edges = torch.tensor(e, dtype=dtype)
        target, hops = int(rs.integers(0, n)), int(rs.integers(1, 4))
        r = candidate_edges(edges, n, target, hops=hops)
        nodes = bfs(list(zip(e[0], e[1])), n, target, hops)
        assert r.nodes.tolist() == nodes and r.nodes.dtype == torch.int64
        assert r.candidates.tolist() == [[target] * (len(nodes) - 1), [v for v in nodes if v != target]]
        keep = [i for i in range(E) if e[0, i] in nodes and e[1, i] in nodes]
        assert r.subgraph_edges.tolist() == e[:, keep].reshape(2, -1).tolist()


def test_candidate_edges_validation():
    edges = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(TypeError, match="`edges`"):
        candidate_edges(edges.float(), 3, 0)
    with pytest.raises(ValueError, match="`edges`"):
        candidate_edges(edges, 2, 0)
    with pytest.raises(ValueError, match="`edges`"):
        candidate_edges(torch.zeros(3, 2, dtype=torch.long), 3, 0)
    with pytest.raises(ValueError, match="`target`"):
        candidate_edges(edges, 3, 3)
    with pytest.raises(ValueError, match="`hops`"):
        candidate_edges(edges, 3, 0, hops=0)
    with pytest.raises(ValueError, match="`num_nodes`"):
        candidate_edges(edges, 0, 0)
    assert candidate_edges(edges, 2**63, 0).nodes.tolist() == [0, 1, 2]   # a bound on the ids, nothing allocated
    assert candidate_edges(edges, 3, 0, hops=2**63).nodes.tolist() == [0, 1, 2]


def test_candidate_edges_memory_does_not_scale_with_num_nodes():
    # ids far apart in a huge id space: the tables are sized by the ids that occur (the BFS is the oracle)
    big = 2**31 - 1
    ids = [0, 7, 2**20, 2**30, big - 1]
    e = torch.tensor([[ids[0], ids[1], ids[2], ids[3]], [ids[1], ids[2], ids[3], ids[4]]])
    r = candidate_edges(e, big, ids[2], hops=1)
    assert r.nodes.tolist() == [ids[1], ids[2], ids[3]]
    assert r.candidates.tolist() == [[ids[2], ids[2]], [ids[1], ids[3]]]
    assert r.subgraph_edges.tolist() == [[ids[1], ids[2]], [ids[2], ids[3]]]
    # an isolated target, not among the edges' ends
    r = candidate_edges(e, big, 12345, hops=3)
    assert r.nodes.tolist() == [12345] and r.candidates.shape == (2, 0)


# --------------------------------------------------------------------------------------------------
# GCN
# --------------------------------------------------------------------------------------------------
def test_gcn_matches_the_dense_formula():
    rs = np.random.default_rng(1)
    n, E = 9, 20
    e = rs.integers(0, n, size=(2, E))
    w = rs.random(E)
    torch.manual_seed(0)
    gcn = GCN(4, 6, 3).double()
    x = rs.standard_normal((n, 4))
    A = np.zeros((n, n))
    np.add.at(A, (e[1], e[0]), w)
    A_hat = A + np.eye(n)
    d = A_hat.sum(1) ** -0.5
    P = d[:, None] * A_hat * d[None, :]
    W1, b1 = gcn.lin1.weight.detach().numpy(), gcn.lin1.bias.detach().numpy()
    W2, b2 = gcn.lin2.weight.detach().numpy(), gcn.lin2.bias.detach().numpy()
    # the bias is added before propagation (Linear then propagate): P (X W1^T + 1 b1^T)
    H = np.maximum(P @ (x @ W1.T + b1), 0)
    want = P @ (H @ W2.T + b2)
    got = gcn(torch.tensor(x), torch.tensor(e), torch.tensor(w)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # symmetric graph, unit weights: D^-1/2 (A + I) D^-1/2 X W
    es = np.concatenate([e, e[::-1]], axis=1)
    A = np.zeros((n, n))
    np.add.at(A, (es[1], es[0]), 1.0)
    d = (A + np.eye(n)).sum(1) ** -0.5
    P = d[:, None] * (A + np.eye(n)) * d[None, :]
    np.testing.assert_allclose(P, P.T)
    want = P @ (np.maximum(P @ (x @ W1.T + b1), 0) @ W2.T + b2)
    got = gcn(torch.tensor(x), torch.tensor(es, dtype=torch.int32)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_gcn_edge_weight_gradient_and_validation():
    gcn = GCN(2, 4, 2)
    x = torch.randn(3, 2, generator=gen(0))
    edges = torch.tensor([[0, 1], [1, 2]])
    w = torch.ones(2, requires_grad=True)
    gcn(x, edges, w).sum().backward()
    assert w.grad is not None and bool(torch.isfinite(w.grad).all())
    with pytest.raises(ValueError, match="`x`"):
        gcn(torch.randn(3, 5), edges)
    with pytest.raises(ValueError, match="`edge_weight`"):
        gcn(x, edges, -torch.ones(2))
    with pytest.raises(ValueError, match="`edge_weight`"):
        gcn(x, edges, torch.ones(3))
    with pytest.raises(ValueError, match="`edges`"):
        gcn(x, torch.tensor([[0], [5]]))
    with pytest.raises(ValueError, match="`hidden`"):
        GCN(2, 0, 2)


# --------------------------------------------------------------------------------------------------
# DiscreteGraphPrompt
# --------------------------------------------------------------------------------------------------
def small_graph(seed=0, n=24, E=40):
    rs = np.random.default_rng(seed)
    e = rs.integers(0, n, size=(2, E))
    e = e[:, e[0] != e[1]]
    edges = torch.tensor(np.concatenate([e, e[::-1]], axis=1))
    x = torch.tensor(rs.standard_normal((n, 5)))
    return x, edges


def test_prompt_eval_mask_is_topk_of_the_scores_and_matches_a_manual_build():
    x, edges = small_graph()
    torch.manual_seed(1)
    model = DiscreteGraphPrompt(GCN(5, 8, 6), 3, score_hidden=16, num_classes=4).double().eval()
    targets = torch.tensor([0, 5, 7, 5])
    sc = model.scores(x, edges, targets)
    sel = model.selected_nodes(x, edges, targets)
    mask = topk_mask(sc.theta.detach(), 3).bool()
    assert torch.equal(sel, sc.candidates[mask].reshape(4, 3))
    logits = model(x, edges, targets, rng=0)
    assert torch.equal(logits, model(x, edges, targets, rng=1))         # no noise in evaluation
    # one target rebuilt from the public pieces: subgraph, the selected prompt edges, the frozen GNN, the head
    for i, t in enumerate(targets.tolist()):
        r = candidate_edges(edges, x.shape[0], t)
        nodes = r.nodes.tolist()
        local = {v: j for j, v in enumerate(nodes)}
        assert sc.candidates[i][sc.candidates[i] >= 0].tolist() == r.candidates[1].tolist()
        se = r.subgraph_edges
        src = [local[v] for v in se[0].tolist()]
        dst = [local[v] for v in se[1].tolist()]
        w = [1.0] * len(src)
        for v in sel[i].tolist():
            if v >= 0:
                src += [local[t], local[v]]
                dst += [local[v], local[t]]
                w += [1.0, 1.0]
        h = model.gnn(x[r.nodes], torch.tensor([src, dst], dtype=torch.long), torch.tensor(w, dtype=F64))
        want = model.head(h[local[t]])
        torch.testing.assert_close(logits[i], want, rtol=1e-12, atol=1e-12)


def test_prompt_training_trains_the_scorer_not_the_gnn():
    x, edges = small_graph(1)
    torch.manual_seed(2)
    gnn = GCN(5, 8, 6).double()
    model = DiscreteGraphPrompt(gnn, 2, score_hidden=16, num_classes=3, lam=1000.0).double().train()
    assert all(not p.requires_grad for p in gnn.parameters())
    targets = torch.arange(10)
    y = torch.arange(10) % 3
    grads = 0.0
    for seed in range(5):
        model.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x, edges, targets, rng=seed), y, reduction="sum")
        loss.backward()
        grads += float(model.scorer[0].weight.grad.abs().sum())
        assert model.head.weight.grad is not None
    assert grads > 0
    assert all(p.grad is None for p in gnn.parameters())
    a = model(x, edges, targets, rng=3)
    assert torch.equal(a, model(x, edges, targets, rng=3))


def test_prompt_small_subgraphs_and_validation():
    # a target with one neighbour and k = 3: the missing prompt edges are -1 in selected_nodes
    x = torch.randn(4, 2, generator=gen(0))
    edges = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    model = DiscreteGraphPrompt(GCN(2, 4, 2), 3, score_hidden=4).eval()
    sel = model.selected_nodes(x, edges, torch.tensor([0]))
    assert sel.tolist() == [[1, -1, -1]]
    assert model(x, edges, torch.tensor([0, 2])).shape == (2, 2)
    with pytest.raises(TypeError, match="`gnn`"):
        DiscreteGraphPrompt(lambda *a: a, 2)
    with pytest.raises(ValueError, match="`k`"):
        DiscreteGraphPrompt(GCN(2, 4, 2), 0)
    with pytest.raises(ValueError, match="`embed_dim`"):
        DiscreteGraphPrompt(torch.nn.Identity(), 2)
    with pytest.raises(ValueError, match="`targets`"):
        model(x, edges, torch.tensor([4]))
    with pytest.raises(TypeError, match="`targets`"):
        model(x, edges, torch.tensor([0.0]))
    with pytest.raises(ValueError, match="`targets`"):
        model(x, edges, torch.tensor([[0]]))
    with pytest.raises(ValueError, match="`edges`"):
        model(x, torch.tensor([[0], [9]]), torch.tensor([0]))


# --------------------------------------------------------------------------------------------------
# the demo
# --------------------------------------------------------------------------------------------------
class _DropBNGCN(torch.nn.Module):
    """A GCN-like GNN with Dropout and BatchNorm: eval mode matters for it."""

    out_dim = 6

    def __init__(self):
        super().__init__()
        self.gcn = GCN(5, 8, 6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, edges, edge_weight=None):
        return self.drop(self.bn(self.gcn(x, edges, edge_weight)))


def test_prompt_keeps_the_frozen_gnn_in_eval_mode():
    x, edges = small_graph(3)
    x = x.float()
    gnn = _DropBNGCN().train()
    model = DiscreteGraphPrompt(gnn, 2, score_hidden=8, num_classes=3)
    assert not gnn.training
    model.train()
    assert model.training and model.scorer.training and not gnn.training
    buffers = {name: b.clone() for name, b in gnn.named_buffers()}
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    targets = torch.arange(8)
    loss = torch.nn.functional.cross_entropy(model(x, edges, targets, rng=0), targets % 3)
    loss.backward()
    opt.step()
    for name, b in gnn.named_buffers():                      # batch-norm statistics untouched
        assert torch.equal(b, buffers[name]), name
    # dropout off: the same noise gives the same logits, and they equal the eval-mode GNN's by hand
    with torch.no_grad():
        assert torch.equal(model(x, edges, targets, rng=1), model(x, edges, targets, rng=1))
        h = gnn(x, edges)
        gnn.eval()
        assert torch.equal(h, gnn(x, edges))
    model.eval()
    model.train(True)
    assert not gnn.training


def test_gcn_edges_on_another_device():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with pytest.raises(ValueError, match="`edges`"):
        GCN(2, 3, 2)(torch.randn(3, 2), torch.tensor([[0], [1]], device="cuda"))


def test_demo_small_run():
    state = torch.random.get_rng_state()
    res = demo(steps=40, n_ego=60, rng=0)
    assert torch.equal(torch.random.get_rng_state(), state)     # no global random state changed
    m = res.metrics
    assert set(res.keys()) >= {"metrics", "history", "wall_time"}
    assert set(m) >= {"dipg", "continuous", "none", "oracle", "k"}
    # robust orderings: the planted class-mates are the best prompt, and DiP-G finds more of them than chance
    assert m["oracle"]["accuracy"] > m["none"]["accuracy"]
    assert m["dipg"]["recall"] > m["k"] / m["candidates"]
    assert 0.0 <= m["continuous"]["recall"] <= 1.0
    # the headline: DiP-G's hard prompts recover more planted class-mates than the continuous prompt discretised
    # at test (held at rng 0, 1, 2 with these settings)
    assert m["dipg"]["recall"] > m["continuous"]["recall"]
    assert 0.0 <= m["continuous"]["soft_accuracy"] <= 1.0 and 0.0 <= m["continuous"]["soft_edges"] <= 10
    assert len(res.history["dipg"]) == 40
    again = demo(steps=40, n_ego=60, rng=0)
    assert again.history["dipg"] == res.history["dipg"]


def test_demo_torch_generator():
    # a torch.Generator gives the seed of the NumPy generator that drives the demo: the same run as that NumPy
    # generator (so deterministic)
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(0)))
    runs = [demo(steps=2, n_ego=8, rng=torch.Generator().manual_seed(0))]
    runs.append(demo(steps=2, n_ego=8, rng=np.random.default_rng(seed)))
    for r in runs[1:]:
        assert r.history == runs[0].history
        assert r.metrics["dipg"]["accuracy"] == runs[0].metrics["dipg"]["accuracy"]
    with pytest.raises(TypeError, match="`rng`"):
        demo(steps=2, n_ego=8, rng="0")


def test_demo_validation():
    with pytest.raises(ValueError, match="`steps`"):
        demo(steps=0)
    with pytest.raises(ValueError, match="`n_ego`"):
        demo(n_ego=2)


def test_empty_batches():
    assert screened_topk(torch.zeros(0, 3), 1, torch.zeros(0, 3), torch.zeros(0, 3)).mask.shape == (0, 3)
    model = DiscreteGraphPrompt(GCN(2, 4, 2), 1)
    edges = torch.tensor([[0, 1], [1, 2]])
    assert model(torch.randn(3, 2), edges, torch.zeros(0, dtype=torch.long)).shape == (0, 2)
    assert model.eval().selected_nodes(torch.randn(3, 2), edges, torch.zeros(0, dtype=torch.long)).shape == (0, 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_follows_the_device():
    dev = torch.device("cuda")
    theta = torch.randn(4, 10, device=dev, requires_grad=True)
    z = imle_topk(theta, 3, rng=0)
    assert z.device.type == "cuda" and bool((z.sum(-1) == 3).all())
    assert sum_of_gamma_noise(5, 2, rng=torch.Generator(device=dev).manual_seed(0)).device.type == "cuda"
    (z * torch.arange(10.0, device=dev)).sum().backward()
    assert theta.grad.device.type == "cuda"
    v = torch.randn(3, 50, device=dev)
    assert torch.equal(screened_topk(v, 5, v - 0.1, v + 0.1).mask, topk_mask(v, 5))
    x, edges = small_graph()
    model = DiscreteGraphPrompt(GCN(5, 8, 6), 2, num_classes=3).double().to(dev)
    assert model(x.to(dev), edges.to(dev), torch.tensor([0, 1], device=dev), rng=0).device.type == "cuda"
