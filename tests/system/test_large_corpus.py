"""The data pipeline for corpora larger than memory (seq2seq.data.shards, seq2seq.data.hashsplit, the streamed
prepare of seq2seq.data.pipeline): the same result as the in-memory pipeline on a small corpus, token shards
mapped from disk, the tokenizer's seeded sample, the split by hash keeping near-duplicates off both
sides, and training on it resuming exactly."""

from pathlib import Path

import pytest
import torch
from conftest import REPO, TOY, TOY_SRC, TOY_TGT

from seq2seq.config import CorpusConfig, DataConfig, load_config
from seq2seq.data.corpus import make_splits
from seq2seq.data.encoded import EncodedSplit, encode_eval, encode_train
from seq2seq.data.hashsplit import first_occurrences
from seq2seq.data.neardup import NearDuplicateIndex, closest_similarity, similarity
from seq2seq.data.pipeline import prepare_data, sample_indices
from seq2seq.data.shards import ShardWriter, write_split
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.special import PAD
from seq2seq.train.trainer import Trainer

SETTINGS = {"dev_size": 100, "test_size": 100, "vocab_size": 1200}


def _config(cache: Path, **overrides) -> DataConfig:
    return DataConfig(src=str(TOY_SRC), tgt=str(TOY_TGT), cache_dir=str(cache), **{**SETTINGS, **overrides})


def _assert_same_split(got: EncodedSplit, src: list[list[int]], tgt: list[list[int]], name: str) -> None:
    for key, tensor in EncodedSplit.from_lists(src, tgt).state().items():
        assert torch.equal(got.state()[key].long(), tensor.long()), f"{name}.{key}"


def test_a_small_corpus_gives_what_the_in_memory_pipeline_gives(tmp_path):
    """The streamed pipeline (pairs spooled to disk, the tokenizer fed from the files, encoding chunk by chunk
    into shards) against the same steps done in memory at once: the corpus split whole, the tokenizer trained
    on every training pair (the toy corpus is smaller than data.spm_sample_sentences), each corpus encoded in
    one call, every test source compared with every training source."""
    plain = _config(tmp_path / "cache")
    reversed_corpus = CorpusConfig("b", str(TOY_TGT), str(TOY_SRC), weight=0.5)
    mixed = DataConfig(
        corpora=(CorpusConfig("a", str(TOY_SRC), str(TOY_TGT), eval=True), reversed_corpus),
        cache_dir=str(tmp_path / "cache"),
        **SETTINGS,
    )
    for name, cfg in (("plain", plain), ("mixed", mixed)):
        run_dir = tmp_path / name
        data = prepare_data(cfg, run_dir)
        splits = make_splits(cfg)
        assert len(splits.train) <= cfg.spm_sample_sentences  # no sample: the tokenizer sees every pair
        tokenizer = Tokenizer.train(
            splits.train.src,
            splits.train.tgt,
            cfg.vocab_size,
            cfg.joint_vocab,
            cfg.spm_model_type,
            cfg.character_coverage,
        )
        assert data.tokenizer.src.serialized_model_proto() == tokenizer.src.serialized_model_proto(), name
        assert data.tokenizer.tgt.serialized_model_proto() == tokenizer.tgt.serialized_model_proto(), name
        kept = [
            encode_train(part, tokenizer, cfg.max_len, cfg.max_ratio, drop_unknown=not corpus.vocab)[0]
            for part, corpus in zip(splits.train_parts(), cfg.corpus_list(), strict=True)
        ]
        assert data.corpus_sizes == [len(k.src_ids) for k in kept] and all(data.corpus_sizes), name
        train_src = [ids for k in kept for ids in k.src_ids]
        _assert_same_split(data.train, train_src, [ids for k in kept for ids in k.tgt_ids], f"{name} train")
        _assert_same_split(data.dev, *encode_eval(splits.dev, tokenizer), f"{name} dev")
        assert data.train_text.src == [s for k in kept for s in k.text.src], name
        assert data.train_text.tgt == [t for k in kept for t in k.text.tgt], name
        assert (data.dev_text, data.test_text) == (splits.dev, splits.test), name
        novelty = closest_similarity(splits.test.src, data.train_text.src)
        assert (run_dir / "test.novelty").read_text().split() == [f"{x:.4f}" for x in novelty], name


def test_training_data_is_mapped_from_the_shard_files(tmp_path):
    data = prepare_data(_config(tmp_path / "cache"))
    mapped = Path("/proc/self/maps").read_text()
    for name in ("train.src.ids", "train.tgt.ids", "train.src.offsets", "train.tgt.offsets"):
        assert str(data.directory / name) in mapped, name  # a mapping of the file, not a copy in memory
    assert not (data.directory / "encoded.pt").exists()
    tok = data.tokenizer
    for i in (0, len(data.train) // 2, len(data.train) - 1):
        pair = data.train.batch(torch.tensor([i]))
        assert pair.src[0].tolist() == tok.encode_src(data.train_text.src[i])
        assert tok.decode_tgt(pair.tgt_out[0].tolist()) == data.train_text.tgt[i]


def test_shards_written_in_chunks_equal_the_split_at_once(tmp_path):
    src = [[5, 6, 3], [7, 3], [3], [9, 9, 9, 3]]
    tgt = [[11], [12, 13, 14], [], [15]]
    writer = ShardWriter(tmp_path, "train")
    for start in range(0, len(src), 3):  # two chunks, the second short
        writer.add(src[start : start + 3], tgt[start : start + 3])
    writer.close()
    mapped, expected = EncodedSplit.load(tmp_path, "train"), EncodedSplit.from_lists(src, tgt)
    for name, tensor in expected.state().items():
        assert mapped.state()[name].dtype == tensor.dtype and torch.equal(mapped.state()[name], tensor), name


@pytest.mark.parametrize("longest", [9, 40_000])  # int16 lengths, and int32 when one does not fit
def test_lengths_are_read_across_buffer_blocks(tmp_path, longest):
    gen = torch.Generator().manual_seed(longest)
    lengths = torch.randint(0, 6, (300_000,), generator=gen)  # 2.4 MB of offsets: three read blocks
    lengths[123_456] = longest
    writer = ShardWriter(tmp_path, "train")
    seqs = [[7] * n for n in lengths.tolist()]
    writer.add(seqs, seqs[::-1])
    writer.close()
    split = EncodedSplit.load(tmp_path, "train")
    assert split.src_lengths.dtype == (torch.int16 if longest < 2**15 else torch.int32)
    assert torch.equal(split.src_lengths.long(), lengths) and torch.equal(split.tgt_lengths.long(), lengths.flip(0))


def _resident_kb(path: Path) -> int:
    """Resident KB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0]:  # a mapping's header line: "start-end perms offset dev inode path"
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_batches_are_read_without_keeping_the_token_files_resident(tmp_path):
    """Training holds none of the token data, whatever the corpus size: no page of the files stays mapped."""
    seqs = [[5 + i % 50] * (1 + i % 40) for i in range(20_000)]  # 1.6 MB of ids per side
    write_split(tmp_path, "train", seqs, seqs[::-1])
    split = EncodedSplit.load(tmp_path, "train")
    indices = torch.arange(0, 20_000, 97)  # every page of the ids files
    batch = split.batch(indices)
    assert batch.src.tolist() == [seqs[i] + [PAD] * (40 - len(seqs[i])) for i in indices.tolist()]
    assert split.sources([3, 0]) == [seqs[3], seqs[0]] and split.sources([]) == []
    files = [tmp_path / f"train.{suffix}" for suffix in ("src.ids", "tgt.ids", "src.offsets", "tgt.offsets")]
    assert [_resident_kb(path) for path in files] == [0, 0, 0, 0]
    assert split.src_tokens[split.src_offsets[indices]].tolist() == [seqs[i][0] for i in indices.tolist()]
    assert _resident_kb(files[0]) > 100  # what a read through the whole-file mapping would have kept


def test_encoding_many_at_once_equals_one_by_one(tmp_path):
    data = prepare_data(_config(tmp_path / "cache"))
    tok, text = data.tokenizer, data.train_text
    kept, counts = encode_train(text, tok, max_len=100, max_ratio=9.0)
    assert kept.src_ids == [tok.encode_src(s) for s in text.src]
    assert kept.tgt_ids == [tok.encode_tgt(t) for t in text.tgt] and kept.text == text and counts.empty == 0


def test_the_tokenizer_learns_from_a_seeded_sample_when_the_corpus_is_larger(tmp_path):
    assert sample_indices(10, 0, seed=1) is None and sample_indices(10, 10, seed=1) is None  # covered: all
    assert sample_indices(10, 4, seed=1) == sample_indices(10, 4, seed=1) != sample_indices(10, 4, seed=2)
    assert sorted(set(sample_indices(10, 4, seed=1))) == sample_indices(10, 4, seed=1)

    def model(directory: str, most: int, seed: int = 1) -> bytes:
        cfg = _config(tmp_path / directory, spm_sample_sentences=most, split_seed=seed)
        return prepare_data(cfg).tokenizer.src.serialized_model_proto()

    whole = model("whole", 0)
    report = prepare_data(_config(tmp_path / "whole", spm_sample_sentences=0, split_seed=1)).report
    # The training pairs the tokenizer learns from: those the split left, before the encoder's filters.
    pairs = (
        report["pairs_read"] - report["duplicates_removed"] - report["overlap_removed"] - report["dev"] - report["test"]
    )
    assert model("covering", pairs) == whole  # a sample as large as the training split is the whole of it
    assert model("a", 600) == model("b", 600) != whole


def test_the_split_by_hash_keeps_near_duplicates_off_both_sides(tmp_path):
    data = prepare_data(_config(tmp_path / "cache", hash_split_above=0))
    report = data.report
    assert (report["dev"], report["test"]) == (100, 100)
    assert report["pairs_read"] == report["duplicates_removed"] + report["overlap_removed"] + 200 + report["train"]
    train, dev, test = data.train_text, data.dev_text, data.test_text
    held = dev.src + test.src, dev.tgt + test.tgt
    assert not set(held[0]) & set(train.src) and not set(held[1]) & set(train.tgt)
    assert max(closest_similarity(held[0], train.src)) < 0.8 and max(closest_similarity(held[1], train.tgt)) < 0.8
    assert max(closest_similarity(dev.src, test.src)) < 0.8 and max(closest_similarity(dev.tgt, test.tgt)) < 0.8
    again = prepare_data(_config(tmp_path / "again", hash_split_above=0))
    assert again.test_text == test and again.train_text == train  # seeded
    other = prepare_data(_config(tmp_path / "other", hash_split_above=0, split_seed=2))
    assert other.test_text != test


def test_the_split_by_hash_of_several_corpora_keeps_held_out_sentences_out_of_every_one(tmp_path):
    lexicon = CorpusConfig("lex", str(TOY_SRC), str(TOY_TGT), weight=0.5)  # the same pairs again
    cfg = DataConfig(
        corpora=(CorpusConfig("toy", str(TOY_SRC), str(TOY_TGT), eval=True), lexicon),
        cache_dir=str(tmp_path / "cache"),
        hash_split_above=0,
        **SETTINGS,
    )
    data = prepare_data(cfg)
    toy, lex = data.report["corpora"]
    assert data.corpus_sizes == [toy["train"], lex["train"]] and toy["train"] == lex["train"]  # the same pairs left
    assert lex["overlap"] >= 200  # every held-out pair repeated in the second corpus went
    assert not set(data.dev_text.src + data.test_text.src) & set(data.train_text.src)


def test_the_near_duplicate_index_finds_what_brute_force_finds(toy_pairs):
    src = toy_pairs[0]
    held, queries = src[:150], src[150:1150]
    index = NearDuplicateIndex(held, 0.6)
    expected = [max(similarity(q, h) for h in held) >= 0.6 for q in queries]
    assert [index.matches(q) for q in queries] == expected and any(expected)


def test_first_occurrences_of_hashes():
    keep = first_occurrences(torch.tensor([5, -3, 5, 7, -3, 5]))
    assert keep.tolist() == [True, True, False, True, False, False]


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the toy config names its corpus relative to the repository


def test_training_on_the_split_by_hash_resumes_exactly(tmp_path, in_repo):
    def trainer(run: str, steps: int) -> Trainer:
        where = [f"train.run_dir={tmp_path / run}", f"data.cache_dir={tmp_path / 'cache'}"]
        settings = [*where, "data.hash_split_above=0"]
        fast = ["train.threads=1", "train.device=cpu", "train.eval_sentences=2", "train.precision=float32"]
        return Trainer(load_config(TOY, [*settings, *fast, f"train.max_steps={steps}", "train.eval_every=4"]))

    straight = trainer("a", 8)
    straight.fit(quiet=True)
    trainer("b", 4).fit(quiet=True)
    resumed = trainer("b", 8)
    resumed.fit(quiet=True)
    assert resumed.progress.step == 8 and resumed.sampler.state_dict() == straight.sampler.state_dict()
    for name, tensor in straight.model.state_dict().items():
        assert torch.allclose(tensor, resumed.model.state_dict()[name], rtol=0, atol=1e-6), name
