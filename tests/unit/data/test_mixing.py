"""Several corpora mixed by weight (data.corpora, seq2seq.data.mixing): each epoch's proportions, seeded
draws without repeats, the pipeline reading and checking every corpus, and a single corpus unchanged."""

import json
import re
from collections import Counter

import pytest
import torch
from conftest import REPO, TOY, TOY_SRC, TOY_TGT, run_cli, sets, write_lines

from seq2seq.config import load_config
from seq2seq.data.batching import BucketSampler
from seq2seq.data.corpus import read_pair_files
from seq2seq.data.mixing import CorpusMix
from seq2seq.data.pipeline import prepare_data
from seq2seq.errors import UserError
from seq2seq.special import UNK

SIZES, WEIGHTS = (300, 40, 1000), (1.0, 0.5, 0.25)


def _corpus_of(index: int, sizes: tuple[int, ...] = SIZES) -> int:
    bounds = torch.tensor(sizes).cumsum(0)
    return int(torch.searchsorted(bounds, torch.tensor(index), right=True))


def test_per_epoch_counts_follow_the_weights():
    mix = CorpusMix(("a", "b", "c"), SIZES, WEIGHTS, reference=0, seed=1)
    assert mix.per_epoch() == [300, 150, 75]  # the reference corpus once; the others by weight relative to it
    other = CorpusMix(("a", "b", "c"), SIZES, WEIGHTS, reference=2, seed=1)
    assert other.per_epoch() == [4000, 2000, 1000]
    assert "b 40 pairs, weight 0.5 -> 150 per epoch (28.6%)" in mix.describe()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_epoch_of_batches_holds_the_weighted_proportions(seed):
    """Over one epoch of length-bucketed batches each corpus's share is its weight's share (to rounding)."""
    mix = CorpusMix(("a", "b", "c"), SIZES, WEIGHTS, reference=0, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 30, (sum(SIZES),), generator=gen)
    sampler = BucketSampler(lengths, lengths, 256, seed, items_at=mix.epoch_items)
    for epoch in range(3):
        served = torch.cat(list(sampler.epoch_batches(epoch))).tolist()
        per_corpus = Counter(_corpus_of(i) for i in served)
        total = sum(per_corpus.values())
        for corpus, weight in enumerate(WEIGHTS):
            assert per_corpus[corpus] / total == pytest.approx(weight / sum(WEIGHTS), abs=1 / total)
        reference = [i for i in served if i < SIZES[0]]
        assert sorted(reference) == list(range(SIZES[0]))  # every reference pair exactly once


def test_draws_are_seeded_and_use_every_pair_before_repeating():
    mix = CorpusMix(("a", "b", "c"), SIZES, WEIGHTS, reference=0, seed=7)
    assert torch.equal(mix.epoch_items(4), CorpusMix(("a", "b", "c"), SIZES, WEIGHTS, 0, 7).epoch_items(4))
    assert not torch.equal(mix.epoch_items(4), CorpusMix(("a", "b", "c"), SIZES, WEIGHTS, 0, 8).epoch_items(4))
    # corpus c (1000 pairs, 75 per epoch): the first 13 epochs hold 975 distinct pairs
    drawn = [i for e in range(13) for i in mix.epoch_items(e).tolist() if i >= 340]
    assert len(drawn) == 975 == len(set(drawn))
    # corpus b (40 pairs, 150 per epoch): every pair 3 or 4 times in an epoch, each of the first 40 draws distinct
    small = [i for i in mix.epoch_items(0).tolist() if 300 <= i < 340]
    assert len(set(small[:40])) == 40 and set(Counter(small).values()) <= {3, 4}


# -- the pipeline ------------------------------------------------------------------------------


def _lexicon(path_zh, path_en) -> tuple[list[str], list[str]]:
    """A small word-pair corpus taken from the toy corpus: first two characters -> first English word."""
    src, tgt = read_pair_files(str(TOY_SRC), str(TOY_TGT))
    zh = [s[:2] for s in src[:150]]
    en = [t.split()[0] for t in tgt[:150]]
    write_lines(path_zh, zh)
    write_lines(path_en, en)
    return zh, en


def _corpora(lexicon_dir, weight: float = 0.5, **first) -> str:
    toy = {"name": "toy", "src": str(TOY_SRC), "tgt": str(TOY_TGT), **first}
    lex = {"name": "lex", "src": str(lexicon_dir / "lex.zh"), "tgt": str(lexicon_dir / "lex.en"), "weight": weight}
    return "data.corpora=" + str([toy, lex]).replace("'", '"').replace("True", "true")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    _lexicon(root / "lex.zh", root / "lex.en")
    overrides = ["data.src=null", "data.tgt=null", _corpora(root), f"data.cache_dir={root / 'cache'}"]
    cfg = load_config(REPO / TOY, overrides)
    return cfg, prepare_data(cfg.data, root / "run"), root


def test_dev_and_test_come_from_the_eval_corpus_only(mixed, toy_pairs):
    cfg, data, _ = mixed
    toy = set(zip(*toy_pairs, strict=True))
    for split in (data.dev_text, data.test_text):
        assert set(zip(split.src, split.tgt, strict=True)) <= toy
    held = set(data.dev_text.src) | set(data.test_text.src)
    assert not held & set(data.train_text.src)  # no lexicon pair repeats a dev/test source either


def test_report_counts_pairs_per_corpus(mixed):
    cfg, data, _ = mixed
    toy, lex = data.report["corpora"]
    assert (toy["name"], lex["name"]) == ("toy", "lex") and (toy["weight"], lex["weight"]) == (1.0, 0.5)
    assert toy["read"] == 2000 and lex["read"] == 150
    assert data.corpus_sizes == [toy["train"], lex["train"]] and sum(data.corpus_sizes) == len(data.train)
    assert lex["train"] == 150 - lex["duplicates"] - lex["overlap"] > 0  # nothing of it filtered out
    # the stored pairs are corpus after corpus: the lexicon's come last
    assert all(len(s) <= 2 for s in data.train_text.src[toy["train"] :])


def test_prepare_and_train_show_the_mix(mixed):
    cfg, _, root = mixed
    overrides = sets("data.src=null", "data.tgt=null", _corpora(root), f"data.cache_dir={root / 'cache'}")
    result = run_cli("prepare", "--config", TOY, *overrides)
    assert result.returncode == 0, result.stderr
    assert '"mix": "toy ' in result.stdout and "lex " in result.stdout and "weight 0.5" in result.stdout
    train = run_cli(
        "train",
        "--config",
        TOY,
        *overrides,
        *sets(f"train.run_dir={root / 'run_cli'}", "train.max_steps=2", "train.eval_every=2"),
        *sets("train.eval_sentences=2", "train.threads=1", "train.average_last=0", "train.device=cpu"),
    )
    assert train.returncode == 0, train.stderr
    assert "data mix: toy " in train.stdout + train.stderr


def test_a_single_corpus_listed_in_corpora_equals_the_plain_config(tmp_path, toy_cache):
    plain = prepare_data(load_config(REPO / TOY, [f"data.cache_dir={toy_cache}"]).data)
    listed_cfg = load_config(
        REPO / TOY,
        [
            "data.src=null",
            "data.tgt=null",
            f'data.corpora=[{{"name": "toy", "src": "{TOY_SRC}", "tgt": "{TOY_TGT}"}}]',
            f"data.cache_dir={tmp_path}",
        ],
    )
    listed = prepare_data(listed_cfg.data)
    assert listed.train_text == plain.train_text and listed.test_text == plain.test_text
    assert torch.equal(listed.train.src_tokens, plain.train.src_tokens)
    assert listed.corpus_sizes == plain.corpus_sizes == [len(plain.train)]


def test_a_bad_corpus_is_named(tmp_path):
    _lexicon(tmp_path / "lex.zh", tmp_path / "lex.en")
    (tmp_path / "lex.en").write_text("only one line\n", encoding="utf-8")
    overrides = ["data.src=null", "data.tgt=null", _corpora(tmp_path), f"data.cache_dir={tmp_path / 'c'}"]
    cfg = load_config(REPO / TOY, overrides)
    with pytest.raises(UserError, match=r"lex\.zh has 150 lines but .*lex\.en has 1; the files must be line-aligned"):
        prepare_data(cfg.data)
    (tmp_path / "lex.en").unlink()
    with pytest.raises(UserError, match=r"data\.corpora\[1\] \(lex\)\.tgt: file .*lex\.en not found"):
        prepare_data(cfg.data)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ('data.corpora=[{"name": "a", "src": "x"}]', "data.corpora[0] (a): set src and tgt"),
        ('data.corpora=[{"name": "a", "tsv": "x", "weight": 0}]', "data.corpora[0] (a): weight must be positive"),
        ('data.corpora=[{"name": "a", "tsv": "x"}, {"name": "a", "tsv": "y"}]', "its own name"),
        ('data.corpora=[{"name": "a", "tsv": "x", "wieght": 2}]', "did you mean 'weight'"),
        ('data.corpora=[{"name": "a", "tsv": "x", "vocab": false}]', "at least one corpus must teach"),
    ],
)
def test_corpora_config_errors_name_the_corpus(setting, named):
    with pytest.raises(UserError, match=re.escape(named)):
        load_config(REPO / TOY, ["data.src=null", "data.tgt=null", setting])


def test_corpora_and_src_together_are_refused():
    with pytest.raises(UserError, match="data.corpora replaces data.src/tgt/tsv"):
        load_config(REPO / TOY, ['data.corpora=[{"name": "a", "tsv": "x"}]'])


def test_a_corpus_outside_the_vocabulary_loses_its_pairs_with_unknown_pieces(tmp_path, toy_cache):
    """vocab: false keeps the other corpora's tokenizer; its pairs with a piece outside it are counted and dropped."""
    zh, en = _lexicon(tmp_path / "lex.zh", tmp_path / "lex.en")
    write_lines(tmp_path / "lex.zh", zh + ["鬱鬱蔥蔥", "龘"])  # characters the toy corpus never uses
    write_lines(tmp_path / "lex.en", en + ["lush", "dragon"])
    lex = {"name": "lex", "src": str(tmp_path / "lex.zh"), "tgt": str(tmp_path / "lex.en"), "vocab": False}
    toy = {"name": "toy", "src": str(TOY_SRC), "tgt": str(TOY_TGT)}
    corpora = "data.corpora=" + json.dumps([toy, lex])
    cfg = load_config(REPO / TOY, ["data.src=null", "data.tgt=null", corpora, f"data.cache_dir={tmp_path / 'c'}"])
    data = prepare_data(cfg.data)
    plain = prepare_data(load_config(REPO / TOY, [f"data.cache_dir={toy_cache}"]).data)
    assert data.tokenizer.src.serialized_model_proto() == plain.tokenizer.src.serialized_model_proto()
    assert data.report["filtered_unknown"] >= 2 and data.report["corpora"][1]["filtered"] >= 2
    assert "鬱鬱蔥蔥" not in data.train_text.src and "lush" not in data.train_text.tgt
    lexicon_part = range(data.corpus_sizes[0], len(data.train))  # the vocabulary corpus itself may hold rare <unk>s
    assert all(UNK not in ids for ids in data.train.sources(list(lexicon_part)))
