"""seq2seq.data.pipeline: prepare_data end to end on the toy corpus, the cache, filtering, run-dir install."""

import dataclasses
import re
import shutil
from pathlib import Path

import pytest
import torch
from conftest import TOY_SRC, TOY_TGT, write_lines

from seq2seq.config import DataConfig
from seq2seq.data.cache import cache_key
from seq2seq.data.corpus import make_splits
from seq2seq.data.encoded import EncodedSplit, Resegmented
from seq2seq.data.pipeline import PreparedData, prepare_data
from seq2seq.data.tokenizer import JOINT, Tokenizer
from seq2seq.errors import UserError
from seq2seq.special import BOS, EOS, PAD, UNK

FILTER_KEYS = ("filtered_empty", "filtered_too_long", "filtered_ratio")


def _config(cache: Path, **overrides) -> DataConfig:
    settings = {
        "src": str(TOY_SRC),
        "tgt": str(TOY_TGT),
        "dev_size": 100,
        "test_size": 100,
        "vocab_size": 1200,
        "cache_dir": str(cache),
    }
    settings.update(overrides)
    return DataConfig(**settings)


def _copy_corpus(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(TOY_SRC, directory / "c.zh")), Path(shutil.copy(TOY_TGT, directory / "c.en"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[DataConfig, Path, PreparedData]:
    """One prepare_data run on the toy corpus (a cache miss) with its config and run directory."""
    root = tmp_path_factory.mktemp("prepared")
    cfg = _config(root / "cache")
    run_dir = root / "run"
    return cfg, run_dir, prepare_data(cfg, run_dir)


def _assert_same_split(a: EncodedSplit, b: EncodedSplit) -> None:
    for name, tensor in a.state().items():
        assert torch.equal(tensor, b.state()[name]), name


# --- end to end ---------------------------------------------------------------------------------


def test_report_counts_add_up(built):
    _, _, data = built
    report = data.report
    assert report["cache_hit"] is False
    assert report["pairs_read"] == 2000
    assert report["dev"] == 100 and report["test"] == 100
    removed = report["duplicates_removed"] + report["overlap_removed"] + sum(report[k] for k in FILTER_KEYS)
    assert report["train"] + report["dev"] + report["test"] + removed == report["pairs_read"]
    assert report["duplicates_removed"] > 0  # Tatoeba repeats a few pairs
    assert report["overlap_removed"] == 0  # an automatic split never overlaps
    assert report["train"] == len(data.train)
    assert report["dev"] == len(data.dev) == len(data.dev_text)
    assert report["test"] == len(data.test_text)
    assert report["src_vocab"] == report["tgt_vocab"] == data.tokenizer.src_vocab_size == 1200


def test_report_matches_make_splits(built):
    cfg, _, data = built
    splits = make_splits(cfg)
    assert data.report["duplicates_removed"] == splits.duplicates
    assert data.dev_text.src == splits.dev.src and data.test_text.tgt == splits.test.tgt


def test_run_dir_receives_tokenizer_and_dev_test_text(built):
    _, run_dir, data = built
    assert {p.name for p in run_dir.iterdir()} == {JOINT, "dev.src", "dev.tgt", "test.src", "test.tgt", "test.novelty"}
    assert (run_dir / JOINT).read_bytes() == data.tokenizer.src.serialized_model_proto()
    assert (run_dir / "dev.src").read_text(encoding="utf-8").splitlines() == data.dev_text.src
    assert (run_dir / "dev.tgt").read_text(encoding="utf-8").splitlines() == data.dev_text.tgt
    assert (run_dir / "test.src").read_text(encoding="utf-8").splitlines() == data.test_text.src
    assert (run_dir / "test.tgt").read_text(encoding="utf-8").splitlines() == data.test_text.tgt
    loaded = Tokenizer.load(run_dir)
    assert loaded.encode_src(data.dev_text.src[0]) == data.tokenizer.encode_src(data.dev_text.src[0])


def test_dev_is_encoded_unfiltered_from_dev_text(built):
    _, _, data = built
    tok = data.tokenizer
    for i in range(len(data.dev_text)):
        s, e = int(data.dev.src_offsets[i]), int(data.dev.src_offsets[i + 1])
        assert data.dev.src_tokens[s:e].tolist() == tok.encode_src(data.dev_text.src[i])
        s, e = int(data.dev.tgt_offsets[i]), int(data.dev.tgt_offsets[i + 1])
        assert data.dev.tgt_tokens[s:e].tolist() == tok.encode_tgt(data.dev_text.tgt[i])


def test_dev_and_test_share_no_sentence_with_train(built):
    _, _, data = built
    train_src = {
        tuple(data.train.src_tokens[a:b].tolist())
        for a, b in zip(data.train.src_offsets[:-1].tolist(), data.train.src_offsets[1:].tolist(), strict=True)
    }
    held = data.dev_text.src + data.test_text.src
    assert not train_src & {tuple(data.tokenizer.encode_src(s)) for s in held}


def test_second_call_is_a_cache_hit_with_identical_tensors(built, tmp_path):
    cfg, _, first = built
    second = prepare_data(cfg, tmp_path / "run2")
    assert second.report["cache_hit"] is True
    assert second.report["cache"] == first.report["cache"]
    _assert_same_split(first.train, second.train)
    _assert_same_split(first.dev, second.dev)
    assert second.dev_text == first.dev_text and second.test_text == first.test_text
    assert second.tokenizer.src.serialized_model_proto() == first.tokenizer.src.serialized_model_proto()
    assert {k: v for k, v in second.report.items() if k not in ("cache_hit", "load_seconds")} == {
        k: v for k, v in first.report.items() if k not in ("cache_hit", "load_seconds")
    }


def test_settings_outside_the_data_leave_the_key(built, tmp_path):
    cfg, _, _ = built
    assert cache_key(cfg) == cache_key(dataclasses.replace(cfg, batch_tokens=999, cache_dir=str(tmp_path)))
    assert cache_key(cfg) != cache_key(dataclasses.replace(cfg, split_seed=2))
    assert cache_key(cfg) != cache_key(dataclasses.replace(cfg, max_len=50))


def test_changing_a_setting_misses_the_cache(built):
    cfg, _, first = built
    changed = dataclasses.replace(cfg, vocab_size=1300)
    assert cache_key(changed) != cache_key(cfg)
    data = prepare_data(changed)
    assert data.report["cache_hit"] is False and data.report["cache"] != first.report["cache"]
    assert data.tokenizer.src_vocab_size == 1300
    assert prepare_data(changed).report["cache_hit"] is True


def test_changing_the_corpus_content_misses_the_cache(tmp_path):
    src, tgt = _copy_corpus(tmp_path / "corpus")
    cfg = _config(tmp_path / "cache", src=str(src), tgt=str(tgt))
    first = prepare_data(cfg)
    key = cache_key(cfg)
    lines = tgt.read_text(encoding="utf-8").splitlines()
    lines[0] = "Hello there."  # same path, same line count, one sentence changed
    write_lines(tgt, lines)
    assert cache_key(cfg) != key
    second = prepare_data(cfg)
    assert second.report["cache_hit"] is False and second.report["cache"] != first.report["cache"]


def test_missing_corpus_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="nowhere.zh"):
        prepare_data(_config(tmp_path / "cache", src=str(tmp_path / "nowhere.zh")))
    assert not list((tmp_path / "cache").glob("*"))


def test_failed_build_leaves_no_cache(tmp_path):
    cfg = _config(tmp_path / "cache", vocab_size=100)  # too small for the toy corpus
    with pytest.raises(UserError, match="data.vocab_size"):
        prepare_data(cfg)
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [".lock"]  # no entry: only the builders' lock


# --- filtering ----------------------------------------------------------------------------------


def test_filtering_counts_and_drops_long_and_badly_proportioned_pairs(tmp_path, toy_pairs):
    src, tgt = toy_pairs
    long_src = "".join(src[100:160])  # ~60 Chinese sentences in one line
    long_tgt = " ".join(tgt[100:160])
    ratio_tgt = " ".join(tgt[300:304])  # a few English sentences for one tiny source
    extra = [
        (long_src, "Too long on the source side."),
        ("太长了。", long_tgt),
        (long_src, long_tgt),
        ("好。", ratio_tgt),
        ("是。", ratio_tgt + " Yes."),
    ]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_lines(corpus / "c.zh", src + [s for s, _ in extra])
    write_lines(corpus / "c.en", tgt + [t for _, t in extra])
    cfg = _config(
        tmp_path / "cache",
        src=str(corpus / "c.zh"),
        tgt=str(corpus / "c.en"),
        dev_size=0,
        test_size=0,
        max_len=40,
        max_ratio=4.0,
    )
    data = prepare_data(cfg)
    tok = data.tokenizer

    # The added pairs are what their names say under the trained tokenizer.
    def shape(s: str, t: str) -> tuple[int, int]:
        return len(tok.encode_src(s)), len(tok.encode_tgt(t)) + 1

    for s, t in extra[:3]:
        assert max(shape(s, t)) > 40
    for s, t in extra[3:]:
        x, y = shape(s, t)
        assert max(x, y) <= 40 and y > 4.0 * x

    # Independently count what the toy corpus itself loses to the same rules.
    splits = make_splits(cfg)
    shapes = [shape(s, t) for s, t in zip(splits.train.src, splits.train.tgt, strict=True)]
    too_long = sum(max(x, y) > 40 for x, y in shapes)
    ratio = sum(max(x, y) <= 40 and max(x, y) > 4.0 * min(x, y) for x, y in shapes)
    report = data.report
    assert report["filtered_too_long"] == too_long >= 3
    assert report["filtered_ratio"] == ratio >= 2
    assert report["train"] == len(splits.train) - too_long - ratio == len(data.train)
    # Nothing that breaks a rule is left in the training tensors.
    x, y = data.train.src_lengths, data.train.tgt_lengths + 1
    assert int(x.max()) <= 40 and int(y.max()) <= 40
    assert (torch.maximum(x, y) <= 4.0 * torch.minimum(x, y)).all()


def test_empty_sides_are_filtered(tmp_path, toy_pairs):
    src, tgt = toy_pairs
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_lines(corpus / "c.zh", src + ["", "只有中文。", "   "])
    write_lines(corpus / "c.en", tgt + ["Only English.", "", "Blank source."])
    cfg = _config(tmp_path / "cache", src=str(corpus / "c.zh"), tgt=str(corpus / "c.en"), dev_size=0, test_size=0)
    report = prepare_data(cfg).report
    assert report["filtered_empty"] == 3
    removed = report["duplicates_removed"] + sum(report[k] for k in FILTER_KEYS)
    assert report["train"] + removed == report["pairs_read"] == 2003


# --- EncodedSplit -------------------------------------------------------------------------------


def test_encoded_split_batch_gives_the_right_tensors():
    split = EncodedSplit.from_lists([[5, 6, EOS], [7, EOS], [8, 9, 10, EOS]], [[11], [12, 13, 14], []])
    assert len(split) == 3
    assert split.src_lengths.tolist() == [3, 2, 4] and split.tgt_lengths.tolist() == [1, 3, 0]
    assert split.src_tokens.dtype == torch.int32
    batch = split.batch(torch.tensor([2, 0]))
    assert batch.src.tolist() == [[8, 9, 10, EOS], [5, 6, EOS, PAD]]
    assert batch.tgt_in.tolist() == [[BOS, PAD], [BOS, 11]]
    assert batch.tgt_out.tolist() == [[EOS, PAD], [11, EOS]]
    assert batch.src.dtype == torch.long
    batch = split.batch(torch.tensor([1]))
    assert batch.tgt_in.tolist() == [[BOS, 12, 13, 14]] and batch.tgt_out.tolist() == [[12, 13, 14, EOS]]


def test_encoded_split_batch_on_prepared_data(built):
    _, _, data = built
    indices = torch.tensor([5, 0, 17])
    batch = data.train.batch(indices)
    for row, i in enumerate(indices.tolist()):
        s = data.train.src_tokens[data.train.src_offsets[i] : data.train.src_offsets[i + 1]].tolist()
        t = data.train.tgt_tokens[data.train.tgt_offsets[i] : data.train.tgt_offsets[i + 1]].tolist()
        assert batch.src[row, : len(s)].tolist() == s and (batch.src[row, len(s) :] == PAD).all()
        assert batch.tgt_in[row, : len(t) + 1].tolist() == [BOS, *t]
        assert batch.tgt_out[row, : len(t) + 1].tolist() == [*t, EOS]
    assert batch.tokens == int(data.train.tgt_lengths[indices].sum()) + len(indices)


# --- run directory ------------------------------------------------------------------------------


def test_same_tokenizer_installs_again(built):
    cfg, run_dir, _ = built
    prepare_data(cfg, run_dir)  # the run dir already holds this very tokenizer: fine
    assert (run_dir / JOINT).is_file()


def test_run_dir_with_a_different_tokenizer_is_refused(built):
    cfg, run_dir, first = built
    before = (run_dir / JOINT).read_bytes()
    other = dataclasses.replace(cfg, vocab_size=1300)
    with pytest.raises(UserError, match=str(run_dir)):
        prepare_data(other, run_dir)
    assert (run_dir / JOINT).read_bytes() == before == first.tokenizer.src.serialized_model_proto()


# --- resegmentation per epoch (subword regularization) -------------------------------------------
def test_train_text_matches_the_encoded_pairs(built):
    _, _, data = built
    assert len(data.train_text) == len(data.train)
    tok = data.tokenizer
    for i in (0, 7, len(data.train) - 1):
        pair = data.train.batch(torch.tensor([i]))
        assert tok.decode_tgt(pair.tgt_out[0].tolist()) == data.train_text.tgt[i]
        assert pair.src[0].tolist() == tok.encode_src(data.train_text.src[i])


def test_resegmented_epochs_keep_the_pairs_and_change_the_pieces(built):
    cfg, _, data = built
    tok = data.tokenizer
    resegment = Resegmented(data.train_text, tok, alpha=0.1, seed=3, max_len=cfg.max_len)
    first = resegment.split(0)
    assert resegment.current is first and len(first) == len(data.train)
    targets = first.batch(torch.arange(len(first))).tgt_out.tolist()
    assert [tok.decode_tgt(ids) for ids in targets] == data.train_text.tgt  # same sentences, same order
    assert not torch.equal(first.tgt_tokens, data.train.tgt_tokens)  # segmented differently from the best
    second = resegment.split(1)
    assert not torch.equal(first.src_tokens, second.src_tokens)  # a new segmentation every epoch
    again = Resegmented(data.train_text, tok, alpha=0.1, seed=3, max_len=cfg.max_len).split(0)
    _assert_same_split(first, again)  # (seed, epoch) decides: a resumed run sees the same data


def test_resegmented_pairs_stay_within_max_len(built):
    _, _, data = built
    longest = int(max(data.train.src_lengths.max(), data.train.tgt_lengths.max() + 1))
    split = Resegmented(data.train_text, data.tokenizer, alpha=0.01, seed=0, max_len=longest).split(0)
    assert int(split.src_lengths.max()) <= longest and int(split.tgt_lengths.max()) + 1 <= longest


def test_placeholders_mask_the_training_pairs_and_byte_fallback_leaves_no_unknown(tmp_path):
    src = write_lines(tmp_path / "c.zh", ["我有3个苹果。", "汤姆在睡觉。"] * 150)
    tgt = write_lines(tmp_path / "c.en", ["I have 3 apples.", "Tom is sleeping."] * 150)
    cfg = _config(tmp_path / "cache", src=str(src), tgt=str(tgt), dev_size=0, test_size=0, vocab_size=300)
    masked = dataclasses.replace(cfg, placeholders=True, placeholder_share=0.0, byte_fallback=True)
    data = prepare_data(masked)
    pairs = dict(zip(data.train_text.src, data.train_text.tgt, strict=True))
    (apples,) = [s for s in pairs if "苹果" in s]
    (symbol,) = re.findall("⦅\\d+⦆", apples)
    assert apples == f"我有{symbol}个苹果。" and pairs[apples] == f"I have {symbol} apples."
    assert pairs["汤姆在睡觉。"] == "Tom is sleeping."  # names masked in a share of 0 of the pairs
    assert data.tokenizer.has_piece("⦅1⦆") and data.tokenizer.has_piece("⦅12⦆")
    assert UNK not in data.tokenizer.encode_src("𝄞 龘 ⦅3⦆")  # byte pieces, never <unk>
    plain = prepare_data(cfg)
    assert not plain.tokenizer.has_piece("⦅1⦆") and "我有3个苹果。" in plain.train_text.src
