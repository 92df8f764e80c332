"""seq2seq.data.corpus: normalization, reading files and TSV, input errors, group-aware splits, dedup/overlap."""

import random
from pathlib import Path

import pytest
from conftest import TOY_SRC, TOY_TGT, write_lines

from seq2seq.config import DataConfig
from seq2seq.data.corpus import group_split, make_splits, normalize, read_corpus, read_pair_files, read_tsv
from seq2seq.errors import UserError

# --- normalize --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("你好，世界！", "你好,世界!"),  # full-width punctuation -> half-width
        ("ＡＢＣ　１２３？", "ABC 123?"),  # full-width letters, digits, ideographic space
        ("  Hello \t  world\n ", "Hello world"),  # collapse and strip
        ("a\u00a0\u2003b\r\nc", "a b c"),  # no-break and em spaces, CRLF inside
        ("", ""),
        ("   ", ""),
    ],
)
def test_normalize(raw, expected):
    assert normalize(raw) == expected


def test_normalize_is_idempotent_on_the_corpus(toy_pairs):
    src, tgt = toy_pairs
    for text in src[:300] + tgt[:300]:
        assert normalize(text) == text


# --- reading ----------------------------------------------------------------------------------


def test_read_pair_files_strips_line_ends(tmp_path):
    (tmp_path / "a.zh").write_bytes("你好。\r\n再见。\n".encode())
    (tmp_path / "a.en").write_bytes(b"Hello.\nBye.")  # no final newline
    src, tgt = read_pair_files(str(tmp_path / "a.zh"), str(tmp_path / "a.en"))
    assert src == ["你好。", "再见。"]
    assert tgt == ["Hello.", "Bye."]


def test_read_corpus_from_two_files_normalizes():
    src, tgt = read_corpus(DataConfig(src=str(TOY_SRC), tgt=str(TOY_TGT)))
    assert len(src) == len(tgt) == 2000
    assert (src[1], tgt[1]) == ("等等!", "Wait!")  # the file has the full-width "等等！"
    assert all(normalize(s) == s for s in src)


def test_read_corpus_from_tsv_with_default_columns(tmp_path):
    tsv = write_lines(tmp_path / "c.tsv", ["Hi.\t嗨。", "Wait！\t等等！\textra"])
    src, tgt = read_corpus(DataConfig(tsv=str(tsv), src_column=1, tgt_column=0))
    assert src == ["嗨。", "等等!"]
    assert tgt == ["Hi.", "Wait!"]


def test_read_corpus_from_tsv_with_other_columns(tmp_path):
    tsv = write_lines(tmp_path / "c.tsv", ["1\t嗨。\tx\tHi.", "2\t等等。\ty\tWait."])
    src, tgt = read_corpus(DataConfig(tsv=str(tsv), src_column=3, tgt_column=1))
    assert src == ["Hi.", "Wait."]
    assert tgt == ["嗨。", "等等。"]


def test_tsv_takes_precedence_over_src_tgt(tmp_path):
    tsv = write_lines(tmp_path / "c.tsv", ["Hi.\t嗨。"])
    src, tgt = read_corpus(DataConfig(tsv=str(tsv), src=str(TOY_SRC), tgt=str(TOY_TGT)))
    assert (src, tgt) == (["嗨。"], ["Hi."])


# --- bad input --------------------------------------------------------------------------------


def _fail(call, *args) -> str:
    with pytest.raises(UserError) as info:
        call(*args)
    return str(info.value)


def test_missing_file_names_it(tmp_path):
    write_lines(tmp_path / "a.en", ["Hi."])
    message = _fail(read_pair_files, str(tmp_path / "nope.zh"), str(tmp_path / "a.en"))
    assert "nope.zh" in message and "data.src" in message
    write_lines(tmp_path / "a.zh", ["嗨。"])
    message = _fail(read_pair_files, str(tmp_path / "a.zh"), str(tmp_path / "gone.en"))
    assert "gone.en" in message and "data.tgt" in message


def test_missing_tsv_names_it(tmp_path):
    message = _fail(read_corpus, DataConfig(tsv=str(tmp_path / "none.tsv")))
    assert "none.tsv" in message


def test_empty_file_names_it(tmp_path):
    (tmp_path / "blank.zh").write_bytes(b"")
    write_lines(tmp_path / "a.en", ["Hi."])
    message = _fail(read_pair_files, str(tmp_path / "blank.zh"), str(tmp_path / "a.en"))
    assert "blank.zh" in message and "is empty" in message


def test_not_utf8_names_file_and_first_bad_line(tmp_path):
    bad = tmp_path / "latin1.zh"
    bad.write_bytes("嗨。\n等等。\n".encode() + "café\n".encode("latin-1") + "naïve\n".encode("latin-1"))
    write_lines(tmp_path / "a.en", ["a", "b", "c", "d"])
    message = _fail(read_pair_files, str(bad), str(tmp_path / "a.en"))
    assert "latin1.zh" in message
    assert "line 3" in message and "line 4" not in message
    assert "UTF-8" in message


def test_not_utf8_in_tsv(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"Hi.\t\xe5\x97\xa8\nWait.\t\xff\xfe\n")
    message = _fail(read_corpus, DataConfig(tsv=str(bad)))
    assert "bad.tsv" in message and "line 2" in message


def test_different_line_counts_names_both_files(tmp_path):
    write_lines(tmp_path / "a.zh", ["嗨。", "等等。", "开始。"])
    write_lines(tmp_path / "a.en", ["Hi.", "Wait."])
    message = _fail(read_pair_files, str(tmp_path / "a.zh"), str(tmp_path / "a.en"))
    assert "a.zh" in message and "a.en" in message
    assert "has 3 lines" in message and "has 2" in message


def test_tsv_row_with_too_few_columns_names_the_line(tmp_path):
    tsv = write_lines(tmp_path / "c.tsv", ["Hi.\t嗨。", "Wait.\t等等。", "no tab here", "Go.\t走。"])
    message = _fail(read_tsv, str(tsv), 1, 0)
    assert "c.tsv" in message and "line 3" in message
    # The columns asked for decide what "too few" means.
    tsv2 = write_lines(tmp_path / "d.tsv", ["a\tb\tc", "a\tb"])
    message = _fail(read_tsv, str(tsv2), 2, 0)
    assert "d.tsv" in message and "line 2" in message
    assert read_tsv(str(tsv2), 1, 0) == (["b", "b"], ["a", "a"])


# --- group_split ------------------------------------------------------------------------------


def _chained_corpus(seed: int = 0) -> tuple[list[str], list[str]]:
    """Pairs where sentences are shared: one English sentence with several Chinese translations,
    one Chinese sentence with several English ones, and chains linking the two, plus singletons."""
    rng = random.Random(seed)
    src, tgt = [], []
    for g in range(120):
        kind = g % 4
        if kind == 0:  # singleton
            src.append(f"zh{g}")
            tgt.append(f"en{g}")
        elif kind == 1:  # one target, several sources
            for k in range(rng.randint(2, 4)):
                src.append(f"zh{g}-{k}")
                tgt.append(f"en{g}")
        elif kind == 2:  # one source, several targets
            for k in range(rng.randint(2, 4)):
                src.append(f"zh{g}")
                tgt.append(f"en{g}-{k}")
        else:  # a chain s0-t0-s1-t1-s2-...
            for k in range(rng.randint(2, 5)):
                src.extend([f"zh{g}-{k}", f"zh{g}-{k + 1}"])
                tgt.extend([f"en{g}-{k}", f"en{g}-{k}"])
    order = list(range(len(src)))
    rng.shuffle(order)  # members of a group are scattered through the file
    return [src[i] for i in order], [tgt[i] for i in order]


def test_group_split_partitions_and_respects_sizes():
    src, tgt = _chained_corpus()
    train, dev, test = group_split(src, tgt, dev_size=40, test_size=30, seed=3)
    assert sorted(train + dev + test) == list(range(len(src)))
    assert 0 < len(test) <= 30 and 0 < len(dev) <= 40
    assert train == sorted(train) and dev == sorted(dev) and test == sorted(test)


def test_group_split_sizes_exact_for_singletons():
    src = [f"s{i}" for i in range(50)]
    tgt = [f"t{i}" for i in range(50)]
    train, dev, test = group_split(src, tgt, dev_size=7, test_size=5, seed=0)
    assert (len(train), len(dev), len(test)) == (38, 7, 5)


def test_group_split_is_deterministic_per_seed():
    src, tgt = _chained_corpus()
    assert group_split(src, tgt, 40, 30, seed=1) == group_split(src, tgt, 40, 30, seed=1)
    assert group_split(src, tgt, 40, 30, seed=1) != group_split(src, tgt, 40, 30, seed=2)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_group_split_never_shares_a_sentence_across_splits(seed):
    src, tgt = _chained_corpus(seed)
    parts = group_split(src, tgt, dev_size=40, test_size=30, seed=seed)
    assert all(parts)
    for side in (src, tgt):
        sets = [{side[i] for i in part} for part in parts]
        assert not sets[0] & sets[1], "train/dev share a sentence"
        assert not sets[0] & sets[2], "train/test share a sentence"
        assert not sets[1] & sets[2], "dev/test share a sentence"


def test_group_split_keeps_a_long_chain_whole():
    # One chain of 9 pairs linked through shared sentences, and 20 singletons.
    src = [f"zh{k // 2}" for k in range(9)] + [f"s{i}" for i in range(20)]
    tgt = [f"en{(k + 1) // 2}" for k in range(9)] + [f"t{i}" for i in range(20)]
    for seed in range(6):
        parts = group_split(src, tgt, dev_size=5, test_size=5, seed=seed)
        # Too large for dev or test, so the whole chain trains.
        assert set(range(9)) <= set(parts[0])
        chain_in = [sum(i < 9 for i in part) for part in parts]
        assert chain_in == [9, 0, 0]


def test_group_split_on_the_toy_corpus(toy_pairs):
    src, tgt = toy_pairs
    train, dev, test = group_split(src, tgt, 100, 100, seed=1)
    assert len(dev) == 100 and len(test) == 100
    train_src, train_tgt = {src[i] for i in train}, {tgt[i] for i in train}
    for held in (dev, test):
        assert not train_src & {src[i] for i in held}
        assert not train_tgt & {tgt[i] for i in held}


# --- make_splits ------------------------------------------------------------------------------


def _pairs(tmp_path: Path, name: str, pairs: list[tuple[str, str]]) -> tuple[str, str]:
    src = write_lines(tmp_path / f"{name}.zh", [s for s, _ in pairs])
    tgt = write_lines(tmp_path / f"{name}.en", [t for _, t in pairs])
    return str(src), str(tgt)


def test_make_splits_removes_exact_duplicates(tmp_path):
    pairs = [(f"句子{i}。", f"Sentence {i}.") for i in range(30)]
    pairs += [pairs[3], pairs[3], pairs[7], ("句子5！", "Sentence  5.")]  # the last one equals pair 5 once normalized
    pairs += [("句子3。", "Another translation.")]  # same source, different target: not a duplicate
    src, tgt = _pairs(tmp_path, "c", pairs)
    splits = make_splits(DataConfig(src=src, tgt=tgt, dev_size=4, test_size=4, split_seed=0))
    assert splits.read == 35
    assert splits.duplicates == 3
    # ("句子5！" normalizes to "句子5!", not "句子5。", so it is a distinct pair.)
    assert splits.overlap == 0
    all_pairs = [
        (s, t) for split in (splits.train, splits.dev, splits.test) for s, t in zip(split.src, split.tgt, strict=True)
    ]
    assert len(all_pairs) == len(set(all_pairs)) == 32
    assert ("句子5!", "Sentence 5.") in all_pairs


def test_make_splits_counts_normalized_duplicates(tmp_path):
    src, tgt = _pairs(tmp_path, "c", [("你好！", "Hi."), ("你好!", "Hi. "), ("再见。", "Bye.")])
    splits = make_splits(DataConfig(src=src, tgt=tgt, dev_size=0, test_size=0))
    assert (splits.read, splits.duplicates, len(splits.train)) == (3, 1, 2)


def test_make_splits_with_explicit_dev_test_removes_overlap(tmp_path):
    train_pairs = [(f"训练{i}。", f"Train {i}.") for i in range(20)]
    train_pairs += [
        ("开发。", "Something else."),  # source is a dev source
        ("别的。", "Test sentence."),  # target is a test target
        ("开发。", "Dev sentence."),  # exactly a dev pair
    ]
    src, tgt = _pairs(tmp_path, "train", train_pairs)
    dev_src, dev_tgt = _pairs(tmp_path, "dev", [("开发。", "Dev sentence."), ("其他！", "Other.")])
    test_src, test_tgt = _pairs(tmp_path, "test", [("测试。", "Test sentence.")])
    cfg = DataConfig(src=src, tgt=tgt, dev_src=dev_src, dev_tgt=dev_tgt, test_src=test_src, test_tgt=test_tgt)
    splits = make_splits(cfg)
    assert splits.read == 23 and splits.duplicates == 0
    assert splits.overlap == 3
    assert len(splits.train) == 20
    assert splits.dev.src == ["开发。", "其他!"]  # explicit files are normalized too
    assert splits.test.tgt == ["Test sentence."]
    assert not set(splits.train.src) & (set(splits.dev.src) | set(splits.test.src))
    assert not set(splits.train.tgt) & (set(splits.dev.tgt) | set(splits.test.tgt))


def test_make_splits_with_explicit_dev_only_splits_test_off(tmp_path):
    src, tgt = _pairs(tmp_path, "train", [(f"训练{i}。", f"Train {i}.") for i in range(30)] + [("开发。", "x")])
    dev_src, dev_tgt = _pairs(tmp_path, "dev", [("开发。", "Dev.")])
    splits = make_splits(DataConfig(src=src, tgt=tgt, dev_src=dev_src, dev_tgt=dev_tgt, dev_size=10, test_size=5))
    assert len(splits.dev) == 1 and len(splits.test) == 5
    assert splits.dev.tgt == ["Dev."]
    assert len(splits.train) + len(splits.test) + splits.overlap == 31
    assert "开发。" not in splits.train.src


def test_make_splits_names_a_bad_dev_file(tmp_path):
    src, tgt = _pairs(tmp_path, "train", [("a", "b")] * 2)
    cfg = DataConfig(src=src, tgt=tgt, dev_src=str(tmp_path / "missing.zh"), dev_tgt=tgt)
    with pytest.raises(UserError, match=r"data\.dev_src.*missing\.zh"):
        make_splits(cfg)
