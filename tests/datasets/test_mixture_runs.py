"""numtk.datasets.load_regmix and load_olmo_ladder: the shipped derived tables.

The oracles are the source files themselves: the checksums recorded in data/README.md, and values
read by hand from RegMix's and the OLMo ladder's CSV files (hard-coded below, as printed there).
"""

import gzip
import hashlib
import importlib.resources
import re

import numpy as np
import pytest

from numtk.datasets import load_olmo_ladder, load_regmix

DATA = importlib.resources.files("numtk.datasets") / "data"


@pytest.fixture(scope="module")
def regmix():
    return load_regmix()


@pytest.fixture(scope="module")
def ladder():
    return load_olmo_ladder()


def _readme_sha256(name):
    text = (DATA / "README.md").read_text("utf-8")
    section = text.split(f"## `{name}`")[1].split("\n## ")[0]
    return re.findall(r"sha256\s*`([0-9a-f]{64})`", section.replace("\n", " "))


def test_shipped_files_match_the_documented_derivation():
    raw = gzip.decompress((DATA / "regmix_runs.csv.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() in _readme_sha256("regmix_runs.csv.gz")
    assert len(raw) == 362270 and raw.count(b"\n") == 1089
    olmo = (DATA / "olmo_ladder_final.csv").read_bytes()
    assert hashlib.sha256(olmo).hexdigest() in _readme_sha256("olmo_ladder_final.csv")
    licences = (DATA / "LICENSES.md").read_text("utf-8")
    assert "Copyright (c) 2024 Sea AI Lab" in licences
    assert "Apache License" in licences and "Version 2.0, January 2004" in licences


def test_regmix_shapes_and_names(regmix):
    assert regmix.sizes == ["1M", "60M", "1B"]
    assert len(regmix.domains) == 17 and len(set(regmix.domains)) == 17
    assert len(regmix.validation_sets) == 13
    assert regmix.domains[0] == "arxiv" and regmix.domains[11] == "pile_cc"
    assert regmix.validation_sets[regmix.target] == "pile_cc" and regmix.target == 8
    # the 4 training domains without a validation set (as in RegMix's files)
    assert set(regmix.domains) - set(regmix.validation_sets) == {
        "nih_exporter", "philpapers", "enron_emails", "europarl"}
    counts = {"1M": 768, "60M": 256, "1B": 64}
    for s, n in counts.items():
        b = regmix.blocks[s]
        assert b.mixtures.shape == (n, 17) and b.losses.shape == (n, 13)
        assert b.split.shape == b.mixture_id.shape == b.source_index.shape == (n,)
    assert regmix.mixtures.shape == (1088, 17) and regmix.losses.shape == (1088, 13)
    assert regmix.model_size.shape == regmix.tokens.shape == (1088,)
    assert regmix.licence == "MIT" and "RegMix" in regmix.citation


def test_regmix_simplex_rows_and_published_rounding(regmix):
    m = regmix.mixtures
    assert np.all(m >= 0) and np.all(m <= 1)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(np.abs(regmix.mixture_sums - 1) <= 0.004 + 1e-12)  # published sums 0.996 to 1.003
    published = m * regmix.mixture_sums[:, None]
    np.testing.assert_allclose(published, np.round(published, 3), atol=1e-12)  # 3 decimals
    assert np.all(np.isfinite(regmix.losses)) and np.all(regmix.losses > 0)


def test_regmix_shared_mixtures(regmix):
    one, sixty, big = (regmix.blocks[s] for s in regmix.sizes)
    assert (one.split == "train").sum() == 512 and (one.split == "test").sum() == 256
    test = one.split == "test"
    np.testing.assert_array_equal(one.mixture_id[test], sixty.mixture_id)
    np.testing.assert_array_equal(one.mixtures[test], sixty.mixtures)
    np.testing.assert_array_equal(one.source_index[test], np.arange(1, 257))
    np.testing.assert_array_equal(big.source_index, np.arange(64))
    # mixture ids are unique per mixture and every other pair of mixtures differs
    ids, first = np.unique(regmix.mixture_id, return_index=True)
    np.testing.assert_array_equal(ids, np.arange(832))
    distinct = regmix.mixtures[first]
    assert len(np.unique(np.round(distinct, 12), axis=0)) == 832
    assert not np.isin(big.mixture_id, one.mixture_id).any()


def test_regmix_values_against_the_source_files(regmix):
    one, sixty, big = (regmix.blocks[s] for s in regmix.sizes)
    v = regmix.validation_sets
    # train_mixture_1m.csv, index 1: 0.004 philpapers, 0.209 gutenberg_pg_19, 0.787 pile_cc
    row = one.mixtures[0] * one.mixture_sums[0]
    expect = np.zeros(17)
    expect[[regmix.domains.index(d) for d in ("philpapers", "gutenberg_pg_19", "pile_cc")]] = [
        0.004, 0.209, 0.787]
    np.testing.assert_allclose(row, expect, atol=1e-15)
    # train_pile_loss_1m.csv, index 1: arxiv 7.0255866050720215, pile_cc 5.169477939605713
    assert one.losses[0, v.index("arxiv")] == 7.0255866050720215
    assert one.losses[0, v.index("pile_cc")] == 5.169477939605713
    # test_pile_loss_60m.csv, index 2: pile_cc 4.123269557952881, dm_mathematics 1.6829262971878052
    assert sixty.losses[1, v.index("pile_cc")] == 4.123269557952881
    assert sixty.losses[1, v.index("dm_mathematics")] == 1.6829262971878052
    # test_pile_loss_1m.csv, index 1: pile_cc 5.318245887756348 (same mixture as 60M index 1)
    assert one.losses[one.split == "test"][0, v.index("pile_cc")] == 5.318245887756348
    # test_mixture_1B.csv / test_pile_loss_1B.csv, index 63: github weight 0.369,
    # pile_cc loss 3.016209126, github loss 0.848714828
    assert big.mixtures[63, regmix.domains.index("github")] * big.mixture_sums[63] == pytest.approx(
        0.369, abs=1e-15)
    assert big.losses[63, v.index("pile_cc")] == 3.016209126
    assert big.losses[63, v.index("github")] == 0.848714828


def test_regmix_sizes_from_the_model_configurations(regmix):
    def non_embedding(n_layer, d, inter):   # LLaMA block: qkv + proj, SwiGLU, two RMSNorms; final norm
        return n_layer * (4 * d * d + 3 * d * inter + 2 * d) + d
    expect = {"1M": non_embedding(2, 256, 512), "60M": non_embedding(10, 768, 1536),
              "1B": non_embedding(22, 2048, 5632)}
    for s, n in expect.items():
        assert regmix.blocks[s].model_size == n
        assert np.all(regmix.model_size[regmix.size == s] == n)
    assert regmix.blocks["1B"].tokens == 25e9 and regmix.blocks["60M"].tokens == 1e9
    # larger models reach lower Pile-CC loss on every mixture they share
    one, sixty = regmix.blocks["1M"], regmix.blocks["60M"]
    t = regmix.target
    assert np.all(sixty.losses[:, t] < one.losses[one.split == "test", t])


def test_loaders_return_fresh_arrays(regmix):
    again = load_regmix()
    again.mixtures[:] = 0
    again.blocks["1B"].losses[:] = 0
    third = load_regmix()
    np.testing.assert_array_equal(third.mixtures, regmix.mixtures)
    np.testing.assert_array_equal(third.blocks["1B"].losses, regmix.blocks["1B"].losses)
    ol = load_olmo_ladder()
    ol.bpb[:] = 0
    assert load_olmo_ladder().bpb.min() > 0


def test_ladder_shapes_and_names(ladder):
    assert ladder.size.shape == (30,)
    assert ladder.size.tolist() == [s for s in ("190M", "370M", "760M", "1B", "3B") for _ in range(6)]
    np.testing.assert_array_equal(ladder.multiplier[:6], [0.5, 1, 1, 2, 5, 10])
    np.testing.assert_array_equal(ladder.rerun[:6], [False, False, True, False, False, False])
    assert ladder.validation_losses.shape == (30, 11) and len(ladder.validation_sets) == 11
    assert ladder.validation_sets[0] == "c4_en" and ladder.validation_sets[-1] == "wikitext_103"
    assert len(ladder.tasks) == 22 and ladder.bpb.shape == ladder.accuracy.shape == (30, 22)
    assert ladder.tasks[-2:] == ["mmlu_avg_val", "mmlu_avg_test"]
    assert set(ladder.main_tasks) <= set(ladder.tasks) and len(ladder.main_tasks) == 8
    assert ladder.accuracy_metric[ladder.tasks.index("boolq_val")] == "acc"
    assert ladder.accuracy_metric.count("acc") == 1
    chance = dict(zip(ladder.tasks, ladder.chance))
    assert chance["piqa_val"] == 0.5 and chance["csqa_val"] == 0.2
    assert chance["socialiqa_val"] == pytest.approx(1 / 3) and chance["hellaswag_val"] == 0.25
    assert np.all((ladder.accuracy > 0) & (ladder.accuracy < 1))
    assert np.all(ladder.bpb > 0) and np.all(ladder.validation_losses > 0)
    assert ladder.licence == "Apache-2.0"


def test_ladder_tokens_and_parameters(ladder):
    params = {"190M": 190354176, "370M": 371262464, "760M": 758220288, "1B": 1279395840,
              "3B": 3169537280}
    for s, n in params.items():
        assert np.all(ladder.model_size[ladder.size == s] == n)
    # tokens = multiplier x 20 tokens per parameter, within the rounding to whole batches
    ratio = ladder.tokens / (20 * ladder.multiplier * ladder.model_size)
    assert np.all(np.abs(ratio - 1) < 0.01)


def test_ladder_values_against_the_source_files(ladder):
    def at(size, mult, rerun=False):
        m = (ladder.size == size) & (ladder.multiplier == mult) & (ladder.rerun == rerun)
        assert m.sum() == 1
        return int(np.flatnonzero(m)[0])

    # 1B-1xC.csv, last row (_step 16279): c4_en CE 3.0630710124969482,
    # hellaswag_val len_norm 0.49641504883766174, hellaswag_val bpb 0.8174969553947449,
    # total tokens 25604653056
    i = at("1B", 1)
    assert ladder.step[i] == 16279 and ladder.tokens[i] == 25604653056
    assert ladder.validation_losses[i, ladder.validation_sets.index("c4_en")] == 3.0630710124969482
    j = ladder.tasks.index("hellaswag_val")
    assert ladder.accuracy[i, j] == 0.49641504883766174
    assert ladder.bpb[i, j] == 0.8174969553947449
    # 190M-1xC.csv and its rerun, last rows: c4_en 3.600973129272461 and 3.599918842315674
    c4 = ladder.validation_sets.index("c4_en")
    assert ladder.validation_losses[at("190M", 1), c4] == 3.600973129272461
    assert ladder.validation_losses[at("190M", 1, True), c4] == 3.599918842315674
    # 3B-1xC-rerun.csv: c4_en 2.8737220764160156 at _step 20162; 3B-10xC.csv ends at _step 201524
    assert ladder.validation_losses[at("3B", 1, True), c4] == 2.8737220764160156
    assert ladder.step[at("3B", 10)] == 201524 and ladder.tokens[at("3B", 10)] == 633939689472


def test_ladder_mmlu_average_is_the_weighted_mean(ladder):
    w = {"stem": 0.215, "humanities": 0.335, "social_sciences": 0.219, "other": 0.231}
    for part in ("val", "test"):
        cols = [ladder.tasks.index(f"mmlu_{s}_{part}") for s in w]
        avg = ladder.tasks.index(f"mmlu_avg_{part}")
        for field in (ladder.bpb, ladder.accuracy):
            expect = sum(wk * field[:, c] for wk, c in zip(w.values(), cols)) / sum(w.values())
            np.testing.assert_allclose(field[:, avg], expect, rtol=1e-14)
