"""Released training runs for data-mixture and loss-to-benchmark laws (RegMix, OLMo ladder).

Both tables are derived subsets of public releases, shipped in ``data/`` with their licences
(``data/LICENSES.md``: MIT for RegMix, Apache-2.0 for the OLMo ladder); ``data/README.md`` gives
the exact derivation (source commit, files, columns, row order) and the checksums, so that a reader
can rebuild each file from the source repository and compare.

- ``regmix_runs.csv.gz``: every row of the eight CSV files of ``sail-sg/regmix``'s ``data/``
  directory, one run per line: ``size, split, source_index, mixture_id``, the 17 training-domain
  weights and the 13 validation losses, values copied as text.
- ``olmo_ladder_final.csv``: the final logged step of each of the 30 ladder runs of
  ``allenai/OLMo-ladder`` (5 sizes x 5 token multipliers, plus a rerun at 1xC), with the 11
  validation cross-entropies and the 20 per-task bits-per-byte and accuracy columns.
"""

from __future__ import annotations

import functools
import gzip
import importlib.resources
import io

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result

__all__ = ["load_regmix", "load_olmo_ladder"]

# --- RegMix -----------------------------------------------------------------------------------

# Non-embedding parameters of the three model configurations of RegMix's ``lit_gpt/config.py``
# (``tinyllama_1M``, ``tinyllama_60M``, ``tinyllama_1_1b``: LLaMA blocks without biases, full
# multi-head attention, SwiGLU MLP): n_layer * (4 d^2 + 3 d I + 2 d) + d, d = n_embd,
# I = intermediate_size, with (n_layer, d, I) = (2, 256, 512), (10, 768, 1536), (22, 2048, 5632).
# The untied input embedding and output head add 2 * 50432 * d more.
_REGMIX_SIZES = ("1M", "60M", "1B")
_REGMIX_PARAMS = {"1M": 1_312_000, "60M": 58_998_528, "1B": 1_130_457_088}
_REGMIX_EMBEDDING = {"1M": 25_821_184, "60M": 77_463_552, "1B": 206_569_472}
# Training tokens as the paper states them (1B tokens for the 1M and 60M proxies, 25B for 1B).
_REGMIX_TOKENS = {"1M": 1.0e9, "60M": 1.0e9, "1B": 25.0e9}
_REGMIX_N_DOMAINS = 17
_REGMIX_N_VALIDATION = 13

_REGMIX_CITATION = (
    "Q. Liu, X. Zheng, N. Muennighoff, G. Zeng, L. Dou, T. Pang, J. Jiang, M. Lin, \"RegMix: Data "
    "Mixture as Regression for Language Model Pre-training\", ICLR 2025, arXiv:2407.01492. Data: "
    "github.com/sail-sg/regmix, data/ (MIT licence, Copyright (c) 2024 Sea AI Lab).")

# --- OLMo ladder ------------------------------------------------------------------------------

# Non-embedding parameter counts of the ladder (``MODEL_PARAMS`` in the ladder's
# ``src/scaling/utils.py``); the files named 1B and 3B are the ladder's 1.3B and 3.2B models.
_OLMO_SIZES = ("190M", "370M", "760M", "1B", "3B")
_OLMO_PARAMS = {"190M": 190_354_176, "370M": 371_262_464, "760M": 758_220_288,
                "1B": 1_279_395_840, "3B": 3_169_537_280}
# Chance level (``task_minimum`` of the ladder's ``src/scaling/task_utils.py``): 0.25 unless listed.
_OLMO_CHANCE = {"piqa_val": 0.5, "socialiqa_val": 1.0 / 3.0, "csqa_val": 0.2, "boolq_val": 0.5,
                "winogrande_val": 0.5}
# MMLU subject weights of the ladder (``WEIGHT_BY_KEY``), used for the MMLU averages.
_MMLU_WEIGHTS = {"stem": 0.215, "humanities": 0.335, "social_sciences": 0.219, "other": 0.231}
# The eight tasks of the ladder paper's main results (``v2_main``): MMLU (test, subject-weighted)
# and seven core tasks.
_OLMO_MAIN_TASKS = ("mmlu_avg_test", "hellaswag_val", "arc_challenge_test", "arc_easy_test",
                    "piqa_val", "csqa_val", "socialiqa_val", "openbookqa_test")

_OLMO_CITATION = (
    "A. Bhagia, J. Liu, A. Wettig, D. Heineman, O. Tafjord, A. H. Jha, L. Soldaini, N. A. Smith, "
    "D. Groeneveld, P. W. Koh, J. Dodge, H. Hajishirzi, \"Establishing Task Scaling Laws via "
    "Compute-Efficient Model Ladders\", arXiv:2412.04403, 2024. Data: github.com/allenai/OLMo-ladder, "
    "src/scripts/paper/data/ladder-runs/ (Apache License 2.0).")


def _read_data(name: str) -> str:
    resource = importlib.resources.files("numtk.datasets") / "data" / name
    raw = resource.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("ascii")


def _split_table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    return lines[0].split(","), [line.split(",") for line in lines[1:] if line]


@functools.lru_cache(maxsize=1)
def _regmix_table():
    header, rows = _split_table(_read_data("regmix_runs.csv.gz"))
    if header[:4] != ["size", "split", "source_index", "mixture_id"]:  # pragma: no cover - fixed file
        raise RuntimeError("unexpected header in regmix_runs.csv.gz")
    weight_cols = header[4:4 + _REGMIX_N_DOMAINS]
    loss_cols = header[4 + _REGMIX_N_DOMAINS:]
    if (len(loss_cols) != _REGMIX_N_VALIDATION
            or not all(c.startswith("train_the_pile_") for c in weight_cols)):  # pragma: no cover
        raise RuntimeError("unexpected columns in regmix_runs.csv.gz")
    domains = [c.removeprefix("train_the_pile_") for c in weight_cols]
    validation = [c.removeprefix("metric/the_pile_").removesuffix("_val_loss") for c in loss_cols]
    size = np.array([r[0] for r in rows])
    split = np.array([r[1] for r in rows])
    source_index = np.array([int(r[2]) for r in rows], dtype=np.int64)
    mixture_id = np.array([int(r[3]) for r in rows], dtype=np.int64)
    values = np.array([[float(v) for v in r[4:]] for r in rows], dtype=np.float64)
    return domains, validation, size, split, source_index, mixture_id, values


@constraints()
def load_regmix() -> Result:
    """RegMix's released proxy runs: 17-domain Pile mixtures and 13 validation losses at 1M, 60M, 1B.

    Liu et al. [1]_ trained small LLaMA-style models on random mixtures of 17 domains of the Pile
    and recorded the validation loss on 13 Pile domains: 512 runs at 1M parameters (their
    regression's training set), 256 further mixtures each trained at 1M and at 60M, and 64 other
    mixtures at 1B. RegMix itself regresses the Pile-CC loss of the 1M runs on the mixture
    weights; the runs at three sizes also make a real test of mixture laws with a size term (fit on
    1M and 60M, where the 256 mixtures are shared, and predict the 1B runs).

    Returns
    -------
    res : Result
        With fields

        domains : list of str
            The 17 training domains, in column order: ``arxiv, freelaw, nih_exporter,
            pubmed_central, wikipedia_en, dm_mathematics, github, philpapers, stackexchange,
            enron_emails, gutenberg_pg_19, pile_cc, ubuntu_irc, europarl, hackernews,
            pubmed_abstracts, uspto_backgrounds`` (the source columns ``train_the_pile_<name>``).
        validation_sets : list of str
            The 13 validation domains, in column order: ``arxiv, freelaw, pubmed_central,
            wikipedia_en, dm_mathematics, github, stackexchange, gutenberg_pg_19, pile_cc,
            ubuntu_irc, hackernews, pubmed_abstracts, uspto_backgrounds`` (the source columns
            ``metric/the_pile_<name>_val_loss``).
        target : int
            The column of ``pile_cc`` in ``validation_sets`` (8), the loss RegMix optimises.
        sizes : list of str
            ``["1M", "60M", "1B"]``, the keys of ``blocks``.
        blocks : dict of str to Result
            The runs of each size, with fields ``mixtures`` (R, 17), ``losses`` (R, 13),
            ``model_size`` (int), ``tokens`` (float), ``split``, ``mixture_id``,
            ``source_index`` and ``mixture_sums`` (R,), as the flat fields below. ``"1M"``
            holds 768 runs (the 512 ``"train"`` runs, then the 256 ``"test"`` runs), ``"60M"``
            256 and ``"1B"`` 64. Row k of the 1M ``"test"`` runs and row k of the 60M runs
            share their mixture.
        size : ndarray of str, shape (1088,)
            Each run's size label; the rows are those of ``blocks`` concatenated in ``sizes``
            order.
        model_size : ndarray of float64, shape (1088,)
            Non-embedding parameters of the run's model: 1,312,000 (1M), 58,998,528 (60M),
            1,130,457,088 (1B), counted from the model configurations of RegMix's
            ``lit_gpt/config.py`` (the untied embedding and output head add 25.8M, 77.5M and
            206.6M).
        tokens : ndarray of float64, shape (1088,)
            Training tokens as the paper states them: 1e9 for the 1M and 60M runs, 25e9 for
            1B.
        mixtures : ndarray of float64, shape (1088, 17)
            Training-domain weights, each row divided by its sum so that it sums to 1 (the
            published weights are rounded to 3 decimals and sum to 0.996-1.003; many are exactly
            0).
        mixture_sums : ndarray of float64, shape (1088,)
            The published rows' sums: ``mixtures * mixture_sums[:, None]`` gives the published
            weights back.
        losses : ndarray of float64, shape (1088, 13)
            Validation cross-entropy losses (nats per token) at the end of training.
        split : ndarray of str, shape (1088,)
            ``"train"`` for the 512 runs of RegMix's ``train_*_1m.csv`` files, ``"test"`` for the
            runs of its ``test_*`` files.
        mixture_id : ndarray of int64, shape (1088,)
            Equal for runs trained on the same mixture: 0-511 the 1M training mixtures, 512-767
            the 256 mixtures run at both 1M and 60M, 768-831 the 1B mixtures. The 832 mixtures
            are pairwise distinct; no 1B mixture was run at a smaller size.
        source_index : ndarray of int64, shape (1088,)
            The ``index`` column of the source file (1-based for the 1M and 60M files, 0-based for
            the 1B files).
        description : str
            One line saying what the data are.
        citation : str
            How to cite the data.
        licence : str
            ``"MIT"``; the notice is in ``numtk/datasets/data/LICENSES.md``.

    Notes
    -----
    The shipped table ``data/regmix_runs.csv.gz`` holds the eight files of RegMix's ``data/``
    directory, every value copied as text (``data/README.md`` gives the derivation and
    checksums). The only change made here is the row normalisation of the mixtures, which
    :class:`numtk.mixture.MixtureLaw` requires (rows summing to 1 within 1e-6).

    References
    ----------
    .. [1] Q. Liu, X. Zheng, N. Muennighoff, G. Zeng, L. Dou, T. Pang, J. Jiang, M. Lin, "RegMix:
       Data Mixture as Regression for Language Model Pre-training", ICLR 2025,
       arXiv:2407.01492. Code and data: https://github.com/sail-sg/regmix (MIT).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.datasets import load_regmix
    >>> rm = load_regmix()
    >>> rm.sizes, len(rm.domains), rm.validation_sets[rm.target]
    (['1M', '60M', '1B'], 17, 'pile_cc')
    >>> {s: rm.blocks[s].losses.shape for s in rm.sizes}
    {'1M': (768, 13), '60M': (256, 13), '1B': (64, 13)}
    >>> one, sixty = rm.blocks["1M"], rm.blocks["60M"]
    >>> shared = one.split == "test"
    >>> bool(np.array_equal(one.mixture_id[shared], sixty.mixture_id))
    True
    >>> bool(np.allclose(rm.mixtures.sum(axis=1), 1.0))
    True
    """
    domains, validation, size, split, source_index, mixture_id, values = _regmix_table()
    raw = values[:, :_REGMIX_N_DOMAINS]
    sums = raw.sum(axis=1)
    mixtures = raw / sums[:, None]
    losses = values[:, _REGMIX_N_DOMAINS:].copy()
    model_size = np.array([_REGMIX_PARAMS[s] for s in size], dtype=np.float64)
    tokens = np.array([_REGMIX_TOKENS[s] for s in size], dtype=np.float64)
    blocks = {}
    for s in _REGMIX_SIZES:
        m = size == s
        blocks[s] = Result(mixtures=mixtures[m], losses=losses[m], model_size=_REGMIX_PARAMS[s],
                           tokens=_REGMIX_TOKENS[s], split=split[m], mixture_id=mixture_id[m],
                           source_index=source_index[m], mixture_sums=sums[m])
    return Result(
        domains=list(domains), validation_sets=list(validation),
        target=validation.index("pile_cc"), sizes=list(_REGMIX_SIZES), blocks=blocks,
        size=size.copy(), model_size=model_size, tokens=tokens, mixtures=mixtures,
        mixture_sums=sums, losses=losses, split=split.copy(), mixture_id=mixture_id.copy(),
        source_index=source_index.copy(),
        description=("RegMix proxy runs: 17-domain Pile mixtures, 13 Pile validation losses, "
                     "768 runs at 1M, 256 at 60M (mixtures shared with 1M), 64 at 1B"),
        citation=_REGMIX_CITATION, licence="MIT")


@functools.lru_cache(maxsize=1)
def _olmo_table():
    header, rows = _split_table(_read_data("olmo_ladder_final.csv"))
    if header[:5] != ["size", "multiplier", "rerun", "step", "tokens"]:  # pragma: no cover
        raise RuntimeError("unexpected header in olmo_ladder_final.csv")
    cols = header[5:]
    ce = [c for c in cols if c.endswith("/CrossEntropyLoss")]
    bpb = [c for c in cols if c.startswith("eval/downstream_bpb/")]
    acc = [c for c in cols if c.startswith("eval/downstream/")]
    if (len(ce), len(bpb), len(acc)) != (11, 20, 20):  # pragma: no cover - fixed file
        raise RuntimeError("unexpected columns in olmo_ladder_final.csv")
    validation = [c.removeprefix("eval/").removesuffix("-validation/CrossEntropyLoss") for c in ce]
    tasks = [c.removeprefix("eval/downstream_bpb/").removesuffix("_rc_5shot_bpb") for c in bpb]
    acc_tasks = [c.removeprefix("eval/downstream/").split("_rc_5shot_")[0] for c in acc]
    if acc_tasks != tasks:  # pragma: no cover - fixed file
        raise RuntimeError("bits-per-byte and accuracy columns of olmo_ladder_final.csv differ")
    metric = [c.split("_rc_5shot_")[1] for c in acc]
    size = np.array([r[0] for r in rows])
    multiplier = np.array([float(r[1]) for r in rows])
    rerun = np.array([r[2] == "1" for r in rows])
    step = np.array([int(r[3]) for r in rows], dtype=np.int64)
    tokens = np.array([int(r[4]) for r in rows], dtype=np.int64)
    values = np.array([[float(v) for v in r[5:]] for r in rows], dtype=np.float64)
    return validation, tasks, metric, size, multiplier, rerun, step, tokens, values


@constraints()
def load_olmo_ladder() -> Result:
    """The OLMo model ladder's final checkpoints: losses, task bits-per-byte and accuracies.

    Bhagia et al. [1]_ trained OLMo-2-style models of five sizes (190M to 3.2B non-embedding
    parameters) for 0.5, 1, 2, 5 and 10 times the Chinchilla token count (20 tokens per
    parameter), the 1xC runs twice, and evaluated them on 11 validation sets and 20 ranked-choice
    5-shot tasks. Their two-step law predicts a task's bits-per-byte (the normalised loss of the
    correct answer) from size and tokens, then its accuracy from the bits-per-byte with a sigmoid;
    this table is what the second step needs at the final checkpoint of every run: fit a
    loss-to-benchmark law on the models up to 1.3B and predict the 3.2B ones.

    Returns
    -------
    res : Result
        With fields

        size : ndarray of str, shape (30,)
            The size label of the source file (``"190M", "370M", "760M", "1B", "3B"``); the
            rows run through the sizes in this order, and within a size through the multipliers
            0.5, 1, 1 (rerun), 2, 5, 10.
        model_size : ndarray of float64, shape (30,)
            Non-embedding parameters (the ladder's ``MODEL_PARAMS``): 190,354,176;
            371,262,464; 758,220,288; 1,279,395,840 (the "1B" files, the ladder's 1.3B);
            3,169,537,280 (the "3B" files, 3.2B).
        multiplier : ndarray of float64, shape (30,)
            Training tokens in multiples of 20 tokens per parameter (0.5, 1, 2, 5, 10).
        rerun : ndarray of bool, shape (30,)
            True for the second 1xC run of each size (the ``-rerun`` files).
        step : ndarray of int64, shape (30,)
            The final step (the row kept: the last and largest ``_step`` of the file).
        tokens : ndarray of int64, shape (30,)
            Training tokens at that step (``throughput/total_tokens``).
        validation_sets : list of str
            The 11 validation sets: ``c4_en, dolma_books, dolma_common-crawl, dolma_pes2o,
            dolma_reddit, dolma_stack, dolma_wiki, ice, m2d2_s2orc, pile, wikitext_103``.
        validation_losses : ndarray of float64, shape (30, 11)
            Cross-entropy (nats per token) on each validation set.
        tasks : list of str
            22 tasks: the 20 of the source (``mmlu_<subject>_val``, ``mmlu_<subject>_test`` for
            the subjects ``stem, humanities, social_sciences, other``, then ``hellaswag_val,
            arc_easy_val, arc_easy_test, arc_challenge_val, arc_challenge_test, boolq_val,
            csqa_val, openbookqa_val, openbookqa_test, piqa_val, socialiqa_val,
            winogrande_val``), then ``mmlu_avg_val`` and ``mmlu_avg_test``: the subject-weighted
            means of the ladder (weights 0.215, 0.335, 0.219, 0.231).
        bpb : ndarray of float64, shape (30, 22)
            Bits per byte of the correct continuation, ranked-choice 5-shot format.
        accuracy : ndarray of float64, shape (30, 22)
            Accuracy, length-normalised (``len_norm``) for every task except BoolQ (``acc``).
        accuracy_metric : list of str
            ``"len_norm"`` or ``"acc"`` for each task.
        chance : ndarray of float64, shape (22,)
            The ladder's floor of each task (``task_minimum``): 0.5 for PIQA, BoolQ and
            Winogrande, 1/3 for Social IQa, 0.2 for CommonsenseQA, 0.25 otherwise.
        main_tasks : list of str
            The eight tasks of the ladder paper's main results: ``mmlu_avg_test, hellaswag_val,
            arc_challenge_test, arc_easy_test, piqa_val, csqa_val, socialiqa_val,
            openbookqa_test``.
        description : str
            One line saying what the data are.
        citation : str
            How to cite the data.
        licence : str
            ``"Apache-2.0"``; the licence text is in ``numtk/datasets/data/LICENSES.md``.

    Notes
    -----
    The shipped table ``data/olmo_ladder_final.csv`` keeps, from each of the 30 files
    ``src/scripts/paper/data/ladder-runs/<size>-<m>xC[-rerun].csv`` of the ladder repository,
    the row of the final step and the columns listed above, values copied as text
    (``data/README.md`` gives the derivation and checksums). The ladder's own step 2 also fits
    on intermediate checkpoints and adds an ideal point (bpb 0, accuracy 1); only final
    checkpoints are shipped here.

    References
    ----------
    .. [1] A. Bhagia, J. Liu, A. Wettig, D. Heineman, O. Tafjord, A. H. Jha, L. Soldaini,
       N. A. Smith, D. Groeneveld, P. W. Koh, J. Dodge, H. Hajishirzi, "Establishing Task
       Scaling Laws via Compute-Efficient Model Ladders", arXiv:2412.04403, 2024. Code and
       data: https://github.com/allenai/OLMo-ladder (Apache-2.0).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.datasets import load_olmo_ladder
    >>> ol = load_olmo_ladder()
    >>> ol.bpb.shape, ol.accuracy.shape, len(ol.validation_sets)
    ((30, 22), (30, 22), 11)
    >>> sorted(set(ol.size.tolist()), key=ol.size.tolist().index)
    ['190M', '370M', '760M', '1B', '3B']
    >>> j = ol.tasks.index("hellaswag_val")
    >>> big = ol.size == "3B"
    >>> bool(ol.accuracy[big, j].min() > ol.accuracy[ol.size == "190M", j].max())
    True
    """
    validation, tasks, metric, size, multiplier, rerun, step, tokens, values = _olmo_table()
    n_val, n_task = len(validation), len(tasks)
    losses = values[:, :n_val].copy()
    bpb = values[:, n_val:n_val + n_task]
    acc = values[:, n_val + n_task:]
    weights = np.array(list(_MMLU_WEIGHTS.values()))
    extra_bpb, extra_acc = [], []
    for part in ("val", "test"):
        idx = [tasks.index(f"mmlu_{subject}_{part}") for subject in _MMLU_WEIGHTS]
        extra_bpb.append(bpb[:, idx] @ weights / weights.sum())
        extra_acc.append(acc[:, idx] @ weights / weights.sum())
    all_tasks = list(tasks) + ["mmlu_avg_val", "mmlu_avg_test"]
    return Result(
        size=size.copy(),
        model_size=np.array([_OLMO_PARAMS[s] for s in size], dtype=np.float64),
        multiplier=multiplier.copy(), rerun=rerun.copy(), step=step.copy(), tokens=tokens.copy(),
        validation_sets=list(validation), validation_losses=losses,
        tasks=all_tasks,
        bpb=np.column_stack([bpb, *extra_bpb]),
        accuracy=np.column_stack([acc, *extra_acc]),
        accuracy_metric=list(metric) + ["len_norm", "len_norm"],
        chance=np.array([_OLMO_CHANCE.get(t, 0.25) for t in all_tasks]),
        main_tasks=list(_OLMO_MAIN_TASKS),
        description=("OLMo model ladder, final checkpoints: 5 sizes x 5 token multipliers + 5 "
                     "reruns; 11 validation losses, 20 tasks' bits-per-byte and accuracy"),
        citation=_OLMO_CITATION, licence="Apache-2.0")
