"""Fuzzing the corpus reader: whatever bytes a corpus file holds (random bytes, other encodings, byte-order
marks, CR/LF/CR-only line ends, NUL, very long lines), reading it is either a correct read or a one-line
UserError naming the file -- never another exception."""

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.config import DataConfig
from seq2seq.data.corpus import normalize, read_corpus, read_lines, read_tsv
from seq2seq.data.pipeline import prepare_data
from seq2seq.errors import UserError

ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252", "gb18030", "big5", "shift_jis"]
LINE_ENDS = ["\n", "\r\n", "\r", "\n\r", "\x85", "\u2028"]
# Characters that break naive readers: NUL, other C0 controls, BOMs inside lines, separators, combining marks,
# right-to-left text and marks, astral characters, and letters for the marks to combine with.
TRICKY = "aeoAO\x00\x01\x0b\x0c\x1c\x1e\x7f\ufeff\u200b\u200f\u202e\u0301\u0338\u05d0\u0627\U0001f600\u3000\uff21\t "

# A small alphabet in which NFKC, byte-order marks and whitespace meet often: letters, combining marks, marks and
# spaces that NFKC rewrites (U+00A8 becomes a space and a combining diaeresis).
COMBINING = "ae \u0301\u0308\ufeff\u3000\u00a0\t\u00a8"


def _lines_text() -> st.SearchStrategy[list[str]]:
    line = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(TRICKY), max_size=40)
    long_line = st.integers(2_000, 20_000).map(lambda n: "长" * n)
    return st.lists(line | long_line, min_size=0, max_size=12)


@st.composite
def encoded_files(draw: st.DrawFn) -> bytes:
    """Lines joined by one kind of line end and encoded in one encoding (characters it cannot hold dropped),
    sometimes with a byte-order mark, sometimes without a final line end."""
    lines = draw(_lines_text())
    end = draw(st.sampled_from(LINE_ENDS))
    text = end.join(lines) + (end if draw(st.booleans()) else "")
    data = draw(st.sampled_from(ENCODINGS))
    raw = text.encode(data, errors="ignore")
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + raw


def _expected(data: bytes) -> list[str] | int:
    """The read the reader promises: lines split at LF, CRs before the LF removed -- or the first line
    number that is not UTF-8 (0: the file is empty)."""
    if not data:
        return 0
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    lines = []
    for number, part in enumerate(parts, start=1):
        try:
            lines.append(part.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError:
            return number
    return lines


def _assert_one_line(err: UserError, path: Path) -> str:
    message = str(err)
    assert "\n" not in message and "\r" not in message
    assert str(path) in message
    return message


@settings(FUZZ, max_examples=300)
@given(text=st.text(st.sampled_from(COMBINING), max_size=8) | st.text(st.sampled_from(TRICKY), max_size=12) | st.text())
def test_normalize_is_idempotent_and_leaves_one_line(text):
    once = normalize(text)
    assert normalize(once) == once
    assert once == once.strip() and "  " not in once and "\ufeff" not in once
    assert once.splitlines() in ([once], [])


@settings(FUZZ, max_examples=150)
@given(data=st.binary(max_size=3000) | encoded_files())
def test_read_lines_is_a_correct_read_or_a_one_line_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "corpus.txt"
    path.write_bytes(data)
    expected = _expected(data)
    try:
        lines = read_lines(path, "data.src")
    except UserError as err:
        message = _assert_one_line(err, path)
        assert isinstance(expected, int), message
        assert ("empty" in message) if expected == 0 else (f"line {expected}:" in message)
        return
    assert lines == expected


def _pair_files(tmp_path_factory: pytest.TempPathFactory, src: bytes, tgt: bytes) -> Path:
    """A fresh folder holding ``a.src`` and ``a.tgt`` with the given bytes."""
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "a.src").write_bytes(src)
    (folder / "a.tgt").write_bytes(tgt)
    return folder


@st.composite
def aligned_utf8(
    draw: st.DrawFn, line: Callable[[int], st.SearchStrategy[str]], min_lines: int = 1
) -> tuple[bytes, bytes]:
    """Two UTF-8 files with as many lines (line i drawn from ``line(i)``, no LF inside), LF or CRLF ends, with
    or without a BOM or a final line end: corpora the reader must accept."""
    count = draw(st.integers(min_lines, 12))
    files = []
    for _ in range(2):
        lines = [draw(line(i)) for i in range(count)]
        end = draw(st.sampled_from(["\n", "\r\n"]))
        text = end.join(lines) + (end if draw(st.booleans()) or lines[-1] == "" else "")
        files.append((b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + text.encode("utf-8"))
    return files[0], files[1]


ODD_LINE = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\n") | st.sampled_from(TRICKY)
)


def odd_line(_: int) -> st.SearchStrategy[str]:
    return ODD_LINE


# Mostly aligned UTF-8 (the reader must accept it), else two independent odd files (a read or a one-line error).
pair_files = (
    aligned_utf8(odd_line)
    | aligned_utf8(odd_line)
    | aligned_utf8(odd_line)
    | st.tuples(encoded_files(), encoded_files())
)


def _expected_pairs(src: bytes, tgt: bytes) -> int | list[str]:
    """The number of pairs the reader must give, or what its one-line error may say: a file's first line that
    is not UTF-8, or its emptiness (either file's, as the reader meets them), else the differing line counts
    (as regular expressions)."""
    failures = []
    for data, name in ((src, "a.src"), (tgt, "a.tgt")):
        expected = _expected(data)
        if isinstance(expected, int):
            failures.append(re.escape(f"{name} is empty" if expected == 0 else f"{name} line {expected}:"))
    if failures:
        return failures
    src_count, tgt_count = len(_expected(src)), len(_expected(tgt))
    return src_count if src_count == tgt_count else [f"a.src has {src_count} lines but \\S*a.tgt has {tgt_count};"]


def test_read_corpus_gives_aligned_normalized_pairs_or_a_one_line_error(tmp_path_factory):
    outcomes: list[str] = []

    @settings(FUZZ, max_examples=60)
    @given(files=pair_files)
    def check(files: tuple[bytes, bytes]) -> None:
        folder = _pair_files(tmp_path_factory, *files)
        cfg = DataConfig(src=str(folder / "a.src"), tgt=str(folder / "a.tgt"))
        expected = _expected_pairs(*files)
        if isinstance(expected, list):
            with pytest.raises(UserError) as err:
                read_corpus(cfg)
            message = str(err.value)
            assert "\n" not in message and str(folder) in message and any(re.search(e, message) for e in expected), (
                message
            )
            outcomes.append("error")
            return
        sources, targets = read_corpus(cfg)
        assert len(sources) == len(targets) == expected
        for sentence in sources + targets:
            # Normalized: what translate sees too -- no BOM, no line breaks, no outer or repeated whitespace.
            assert sentence == sentence.strip() and "\ufeff" not in sentence and "  " not in sentence
            assert sentence.splitlines() in ([sentence], [])
            assert normalize(sentence) == sentence  # idempotent: re-reading a run's own dev/test text changes nothing
        outcomes.append("read")

    check()
    assert outcomes.count("read") >= len(outcomes) // 2 and "error" in outcomes, outcomes


@settings(FUZZ, max_examples=60)
@given(data=encoded_files(), columns=st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_read_tsv_is_a_read_or_a_one_line_error(tmp_path_factory, data, columns):
    path = tmp_path_factory.mktemp("fuzz") / "corpus.tsv"
    path.write_bytes(data)
    try:
        src, tgt = read_tsv(str(path), *columns)
    except UserError as err:
        _assert_one_line(err, path)
        return
    lines = _expected(data)
    assert src == [line.split("\t")[columns[0]] for line in lines]
    assert tgt == [line.split("\t")[columns[1]] for line in lines]


# Lines SentencePiece can learn a 16-piece vocabulary from (few distinct characters), decorated with what
# normalization must clean up (BOMs, odd spaces, controls that are whitespace, combining accents). Line i ends
# with its number in the letters a and b: no two pairs are the same, so dedup leaves three or more pairs, dev
# and test take at most one each, and training keeps the rest (short lines: the length filters keep them all).
DECORATION = st.text(st.sampled_from("\ufeff\u3000\u00a0\t\x0b\x0c\x1c \u0301"), max_size=3)
WORD = st.text(st.sampled_from("ab长"), min_size=1, max_size=6)


def pipeline_line(i: int) -> st.SearchStrategy[str]:
    number = format(i, "b").translate(str.maketrans("01", "ab"))
    return st.builds(lambda before, word, after: f"{before}{word} {number}{after}", DECORATION, WORD, DECORATION)


@st.composite
def pipeline_files(draw: st.DrawFn) -> tuple[bytes, bytes, bool]:
    """(src, tgt, whether the pipeline must build): three times in four aligned corpora of ``pipeline_line``,
    which it must build; else two odd files, which it may refuse."""
    if draw(st.sampled_from([True, True, True, False])):
        return (*draw(aligned_utf8(pipeline_line, min_lines=3)), True)
    return draw(encoded_files()), draw(encoded_files()), False


# What the pipeline may refuse in a corpus the reader accepts: nothing left to train on, a vocabulary it cannot learn.
PIPELINE_REFUSALS = ("every training pair was filtered out", "no training pairs left", "SentencePiece cannot train")


def test_prepare_data_on_odd_corpora_builds_or_is_a_one_line_error(tmp_path_factory):
    """The whole pipeline (split, SentencePiece training, encoding): on aligned corpora of a few characters it
    builds, every time; on odd files it builds or refuses in one line -- the reader's error, or one of the
    pipeline's own."""
    outcomes: list[str] = []

    @settings(FUZZ, max_examples=12)
    @given(files=pipeline_files())
    def check(files: tuple[bytes, bytes, bool]) -> None:
        src, tgt, must_build = files
        folder = _pair_files(tmp_path_factory, src, tgt)
        cfg = DataConfig(
            src=str(folder / "a.src"),
            tgt=str(folder / "a.tgt"),
            dev_size=1,
            test_size=1,
            vocab_size=16,
            cache_dir=str(folder / "cache"),
        )
        expected = _expected_pairs(src, tgt)
        try:
            data = prepare_data(cfg, folder / "run")
        except UserError as err:
            message = str(err)
            assert not must_build and "\n" not in message, message
            allowed = expected if isinstance(expected, list) else map(re.escape, PIPELINE_REFUSALS)
            assert any(re.search(e, message) for e in allowed), message
            outcomes.append("refused")
            return
        assert isinstance(expected, int) and 1 <= len(data.train) <= expected
        for i in range(len(data.train)):
            (ids,) = data.train.sources([i])
            assert ids[-1] == 3 and all(0 <= t < data.tokenizer.src_vocab_size for t in ids)
        outcomes.append("built")

    check()
    assert outcomes.count("built") >= len(outcomes) // 2, outcomes
