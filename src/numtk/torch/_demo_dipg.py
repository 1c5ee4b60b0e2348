"""Demo of numtk.torch.dipg: hard discrete prompts against a continuous prompt discretised at test time.

The data is a planted graph, generated here: one ego network per target node. The target (class ``y``, a weak
class signal in its features) is joined to two first-hop "hubs" without signal; each hub has four leaves; of
the eight leaves exactly ``k = 3``, the planted class-mates, belong to the target's community (its class and its
community key, a one-hot part of the features), the others to communities of other classes. Each leaf has two
private neighbours of its own community (third hop, outside the candidates). The candidates of a target are the
ten nodes of its 2-hop subgraph; connecting it to its three class-mates is the best prompt (the oracle row).

The frozen GNN is a random, wide two-layer :class:`~numtk.torch.dipg.GCN` (256 hidden, 128 outputs): the demo
studies the prompt, not pre-training, and a wide random GCN keeps the features' information in its embedding
(with a narrow one, or one pre-trained for the classes alone, the community key is lost and no prompt can find
the class-mates). Prompts, each with a trained linear head, on held-out targets:

- DiP-G (:class:`~numtk.torch.dipg.DiscreteGraphPrompt`, ``mode="imle"``): hard k-sparse masks in training
  (perturbed top-k, I-MLE gradient, ``lam = 10`` on the summed cross-entropy) and ``topk(theta)`` at test;
- a continuous prompt in the style of GraphTOP (``mode="gumbel_sigmoid"``): soft weights
  ``sigmoid((theta + logistic noise) / T)`` on every candidate in training, ``T`` annealed linearly
  0.97 -> 0.03, an entropy (weight 0.2) and a sparsity (weight 2) term, and the same hard ``topk(theta)`` at
  test;
- no prompt (the frozen GCN and a trained head) and the oracle prompt (the planted class-mates).

Departures from GraphTOP in the continuous baseline, each to make it a fair one here: the sparsity term pulls
the expected share of prompt edges to ``k / M`` (the share the top-k keeps) instead of GraphTOP's 1/2; the
extra ``sigmoid(. / 0.2)`` GraphTOP applies to the scores is dropped (the mask's own temperature plays its
part); the entropy and sparsity terms act on the mask's weights at the current temperature,
``sigmoid(theta / T)``, with weights 0.2 and 2 instead of GraphTOP's 2 and 10. With the terms at temperature 1
and GraphTOP's weights the baseline collapsed to no prompt (no candidate weighted above 1/2 after training,
its accuracy that of no prompt), which measured the regularisers, not the discretisation.

Metrics: test accuracy (hard top-k prompt), the recall of planted class-mates among the k chosen nodes, and for
the continuous prompt its accuracy with its training-time soft weights and its number of candidates per target
weighted above 1/2 (so that a collapse, or a gap between soft training and hard test, shows).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from numtk._lib import Result, progress_bar
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int
from numtk.torch._common import numpy_rng, torch, torch_threads
from numtk.torch._dipg import GCN, DiscreteGraphPrompt

__all__ = ["demo", "run"]

#: the default settings, and the quick ones of the tour
_DEFAULT = dict(steps=200, n_ego=240)
_QUICK = dict(steps=100, n_ego=160)


def _planted(n_ego: int, C: int, k: int, hubs: int, leaves: int, signal: float, target_signal: float,
             key: float, noise: float, gen: np.random.Generator):
    """Ego networks with planted class-mates in the target's community.

    Node features are ``[class part | community part]`` (C + 2C dims) plus noise. Per ego network: a target of
    class ``y`` (class signal ``target_signal``, weak), ``hubs`` first-hop nodes without signal (label -1),
    ``leaves`` second-hop nodes per hub of which exactly ``k``, the planted class-mates, belong to the target's
    community (its class and its random community key) and the others to communities of their own (another
    class, another key); each leaf has two private neighbours of its community (third hop: outside the
    candidates). Returns x, edges (both directions), labels, targets and the planted class-mates per target.
    """
    labels, feats, src, dst, planted, targets = [], [], [], [], [], []
    d_key = 2 * C

    def new(label, s, kv):
        cls = np.zeros(C)
        if label >= 0:
            cls[label] = s
        labels.append(label)
        feats.append(np.concatenate([cls, kv]))
        return len(labels) - 1

    def community_key(avoid=None):
        j = int(gen.integers(d_key - (avoid is not None)))
        if avoid is not None and j >= int(np.argmax(avoid)):
            j += 1
        return key * np.eye(d_key)[j]

    for _ in range(n_ego):
        y = int(gen.integers(C))
        kt = community_key()
        t = new(y, target_signal, kt)
        targets.append(t)
        others = [c for c in range(C) if c != y]
        hub_ids = [new(-1, 0.0, np.zeros(d_key)) for _ in range(hubs)]
        for h in hub_ids:
            src.append(t)
            dst.append(h)
        n_leaves = hubs * leaves
        mates = set(gen.choice(n_leaves, size=k, replace=False).tolist())
        mate_ids = []
        for j in range(n_leaves):
            c, kv = (y, kt) if j in mates else (int(gen.choice(others)), community_key(kt))
            v = new(c, signal, kv)
            src.append(hub_ids[j // leaves])
            dst.append(v)
            if j in mates:
                mate_ids.append(v)
            for _ in range(2):
                src.append(v)
                dst.append(new(c, signal, kv))
        planted.append(mate_ids)
    x = np.array(feats) + noise * gen.standard_normal((len(labels), C + d_key))
    return x, np.array([src + dst, dst + src]), np.array(labels), np.array(targets), np.array(planted)


#: the continuous prompt's regularisers: (entropy weight, sparsity weight)
_REG = (0.2, 2.0)


def _train_prompt(model, x, edges, tr, ytr, steps, seed, lr, continuous):
    """Adam on the score MLP and the head. DiP-G: summed cross-entropy (the I-MLE target moves by ``lam`` times
    each target's own gradient). Continuous: GraphTOP's form of loss, mean cross-entropy plus the entropy and
    sparsity terms (weights ``_REG``) on ``sigmoid(theta / T)``, the sparsity pulling the expected share of
    edges to ``k / M`` (GraphTOP: 1/2), and the Gumbel-sigmoid temperature annealed linearly from 0.97 to
    0.03."""
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    g = torch.Generator().manual_seed(seed)
    h = model.embed(x, edges)
    losses = []
    model.train()
    for step in range(steps):
        opt.zero_grad()
        if continuous:
            model.temperature = 0.97 * (1 - step / steps) + 0.03
        logits = model(x, edges, tr, rng=g, embeddings=h)
        ce = torch.nn.functional.cross_entropy(logits, ytr)
        report = float(ce.detach())
        if continuous:
            loss = ce
            theta = model.last_scores
            valid = torch.isfinite(theta)
            # the regularisers act on the mask's own weights, sigmoid(theta / T) at the current temperature
            p = torch.sigmoid(torch.where(valid, theta, torch.zeros_like(theta)) / model.temperature)
            ent = -(p * torch.log(p + 1e-10) + (1 - p) * torch.log(1 - p + 1e-10))
            count = valid.sum(1)
            share = (p * valid).sum(1) / count
            loss = (loss + _REG[0] * (ent * valid).sum() / valid.sum()
                    + _REG[1] * ((share - model.k / count) ** 2).mean())
        else:
            loss = ce * len(tr)
        loss.backward()
        opt.step()
        losses.append(report)
    return losses


def _evaluate(model, x, edges, te, yte, planted_te):
    """Test accuracy with the hard top-k, recall of class-mates; for a continuous prompt also the accuracy with
    its training-time soft weights (noise-free ``sigmoid(theta / T)`` at the final temperature) and the number
    of candidates per target whose soft weight exceeds 1/2."""
    model.eval()
    with torch.no_grad():
        acc = float((model(x, edges, te).argmax(1) == yte).double().mean())
        sel = model.selected_nodes(x, edges, te).numpy()
    k = planted_te.shape[1]
    recall = float(np.mean([len(set(s.tolist()) & set(p.tolist())) / k for s, p in zip(sel, planted_te)]))
    out = {"accuracy": acc, "recall": recall}
    if model.mode != "imle":
        mode, model.mode = model.mode, "sigmoid"
        model.train()
        with torch.no_grad():
            out["soft_accuracy"] = float((model(x, edges, te).argmax(1) == yte).double().mean())
            w = model.last_mask[0]
        model.mode = mode
        model.eval()
        out["soft_edges"] = float((w > 0.5).sum(1).double().mean())
    return out


def _check_steps(steps: Any) -> int | None:
    return None if steps is None else check_int(steps, "steps", minimum=1, maximum=10**6)


@constraints(steps="count", rng="rng", progress="bool", n_ego="count")
def demo(*, steps: Any = None, rng: Any = 0, progress: bool = False, n_ego: Any = None) -> Result:
    """DiP-G against a GraphTOP-style continuous prompt on a planted graph (see the module docstring).

    Parameters
    ----------
    steps : int, optional
        Training steps of each prompt (default 200; the tour's quick run: 100 on 160 ego networks).
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Seeds the graph, the random frozen GCN, the heads' and prompts' initialisation and the noise (a
        torch.Generator gives one seed; torch's global random state is left as it was).
    progress : bool, default False
        Show a progress bar over the two learned prompts (tqdm).
    n_ego : int, optional
        Ego networks (half train, half test targets; default 240).

    Returns
    -------
    Result
        metrics : dict
            Per prompt ``"dipg"``, ``"continuous"``, ``"none"``, ``"oracle"``: a dict with ``accuracy`` (on the
            test targets, the hard top-k prompt) and, for the two learned prompts, ``recall`` (the share of
            planted class-mates among the k chosen nodes) and ``train_time`` (s); for ``"continuous"`` also
            ``soft_accuracy`` (with its noise-free soft weights at the final temperature) and ``soft_edges``
            (candidates per test target weighted above 1/2); also ``k``, ``candidates`` (per target) and
            ``n_test``.
        history : dict of list
            ``"dipg"`` and ``"continuous"``: the training cross-entropy per step, mean over the training
            targets, without the continuous prompt's regularisers.
        wall_time : float
            Seconds for the whole demo.

    Examples
    --------
    >>> from numtk.torch.dipg import demo
    >>> r = demo(steps=2, n_ego=8, rng=0)
    >>> sorted(r.metrics)
    ['candidates', 'continuous', 'dipg', 'k', 'n_test', 'none', 'oracle']
    >>> sorted(r.metrics["continuous"])
    ['accuracy', 'recall', 'soft_accuracy', 'soft_edges', 'train_time']
    >>> len(r.history["dipg"]), r.metrics["n_test"]
    (2, 4)
    """
    steps = _check_steps(steps) or _DEFAULT["steps"]
    n_ego = _DEFAULT["n_ego"] if n_ego is None else check_int(n_ego, "n_ego", minimum=4, maximum=10**5)
    progress = check_bool(progress, "progress")
    gen = numpy_rng(rng)
    start = time.perf_counter()
    C, k = 4, 3
    seeds = gen.integers(0, 2**31 - 1, size=4)
    out: dict[str, Any] = {}
    history: dict[str, list] = {}
    prompts = (("dipg", "imle"), ("continuous", "gumbel_sigmoid"))
    with torch_threads(1):
        x, e, y, targets, planted = _planted(n_ego, C, k, 2, 4, 1.0, 0.35, 3.0, 0.5, gen)
        x, edges, y = torch.tensor(x, dtype=torch.float32), torch.tensor(e), torch.tensor(y)
        # the frozen GNN: a random GCN, wide enough that its embedding keeps the features' information; the
        # modules initialise from torch's global generator, forked here and restored on exit
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seeds[0]))
            gnn = GCN(x.shape[1], 256, 128)
        half = n_ego // 2
        tr, te = torch.tensor(targets[:half]), torch.tensor(targets[half:])
        ytr, yte = y[tr], y[te]
        # no prompt and the oracle prompt: the frozen GCN with a trained head
        for name in ("none", "oracle"):
            ed = edges
            if name == "oracle":
                add = np.array([[t, v] for t, ps in zip(targets, planted) for v in ps]).T
                ed = torch.cat([edges, torch.tensor(add), torch.tensor(add[::-1].copy())], dim=1)
            with torch.no_grad():
                h = gnn(x, ed)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seeds[1]))
                head = torch.nn.Linear(gnn.out_dim, C)
            opt = torch.optim.Adam(head.parameters(), lr=0.05)
            for _ in range(200):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(head(h[tr]), ytr).backward()
                opt.step()
            with torch.no_grad():
                out[name] = {"accuracy": float((head(h[te]).argmax(1) == yte).double().mean())}
        # the two learned prompts
        for name, mode in progress_bar(prompts, progress=progress, desc="dipg demo"):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(seeds[2]))
                model = DiscreteGraphPrompt(gnn, k, score_hidden=32, lam=10.0, mode=mode, num_classes=C)
            t0 = time.perf_counter()
            history[name] = _train_prompt(model, x, edges, tr, ytr, steps, int(seeds[3]), 0.03, mode != "imle")
            out[name] = _evaluate(model, x, edges, te, yte, planted[half:])
            out[name]["train_time"] = time.perf_counter() - t0
    out["k"] = k
    out["candidates"] = 2 + 2 * 4
    out["n_test"] = int(len(te))
    return Result(metrics=out, history=history, wall_time=time.perf_counter() - start)


def run(*, quick: bool = True, out: Callable[[str], Any] = print, plot: Any = None) -> list[dict]:
    """``python -m numtk demo dipg``: the table of :func:`demo` (quick: 100 steps on 160 ego networks; full:
    200 steps on 240); ``plot``: the training cross-entropies of the two learned prompts, and the test
    accuracies of the four prompts with the learned prompts' recall of class-mates (and the continuous prompt's
    accuracy with its soft weights)."""
    settings = _QUICK if quick else _DEFAULT
    res = demo(**settings, rng=0)
    m = res.metrics
    out(f"DiP-G on a planted graph: {m['n_test']} test targets, k = {m['k']} planted class-mates each "
        f"({settings['steps']} steps, {res.wall_time:.1f} s)")
    out(f"{'prompt':<36}{'accuracy':>10}{'recall':>10}{'soft acc':>10}{'w > 1/2':>9}")
    labels = {"dipg": "DiP-G (hard, I-MLE)", "continuous": "continuous (Gumbel-sigmoid) + top-k",
              "none": "no prompt", "oracle": "oracle (the planted class-mates)"}
    rows = []
    for key in ("dipg", "continuous", "none", "oracle"):
        rec = m[key].get("recall", 1.0 if key == "oracle" else None)
        soft = m[key].get("soft_accuracy")
        edges = m[key].get("soft_edges")
        out(f"{labels[key]:<36}{m[key]['accuracy']:>10.3f}{'-' if rec is None else f'{rec:.3f}':>10}"
            f"{'-' if soft is None else f'{soft:.3f}':>10}{'-' if edges is None else f'{edges:.2f}':>9}")
    out("(accuracy: hard top-k prompt at test; soft acc, w > 1/2: the continuous prompt with its training-time "
        "soft weights, and its candidates per target weighted above 1/2)")
    rows.append({"area": "torch", "method": "DiP-G hard prompts vs a continuous prompt, planted graph",
                 "n": m["n_test"],
                 "result": f"acc {m['dipg']['accuracy']:.2f}, recall {m['dipg']['recall']:.2f}",
                 "vs anchor": f"continuous acc {m['continuous']['accuracy']:.2f}, recall "
                              f"{m['continuous']['recall']:.2f}",
                 "speed": f"{res.wall_time:.1f} s"})
    if plot is not None:
        from numtk._lib._optional import pyplot

        plt = pyplot()
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
        for key in ("dipg", "continuous"):
            a1.plot(res.history[key], label=labels[key])
        a1.set_xlabel("step")
        a1.set_ylabel("training cross-entropy")
        a1.legend(fontsize=8)
        keys = ["none", "continuous", "dipg", "oracle"]
        a2.bar(range(4), [m[key]["accuracy"] for key in keys], color=["grey", "tab:orange", "tab:blue", "green"])
        for i, key in enumerate(keys):
            if "recall" in m[key]:
                a2.text(i, m[key]["accuracy"] + 0.02, f"recall {m[key]['recall']:.2f}", ha="center", fontsize=8)
            if "soft_accuracy" in m[key]:
                a2.text(i, m[key]["accuracy"] + 0.08, f"soft acc {m[key]['soft_accuracy']:.2f}", ha="center",
                        fontsize=8)
        a2.set_ylim(0, 1.1)
        a2.set_xticks(range(4), ["none", "continuous\n+ top-k", "DiP-G", "oracle"], fontsize=8)
        a2.set_ylabel("test accuracy")
        fig.tight_layout()
        fig.savefig(plot, dpi=100)
        plt.close(fig)
    return rows
