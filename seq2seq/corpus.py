"""Reading, checking, normalizing and splitting a parallel corpus.

Input is two line-aligned UTF-8 files or one TSV file. Problems that make the
corpus unusable (missing or empty file, bad UTF-8, misaligned files, short TSV
rows) raise ``UserError`` naming file and line. The split into train/dev/test is
seeded and group-aware: pairs sharing a source or a target sentence land on the
same side, so dev/test never contain a sentence the model saw in training.
"""

import random
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from seq2seq.config import DataConfig
from seq2seq.errors import UserError

_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Drop byte-order marks, NFKC (full-width ASCII/punctuation -> half-width),
    collapse whitespace, strip.

    Applied identically to training data and to text given to ``translate``, and idempotent,
    so a run's own dev/test text reads back unchanged. (The marks go first: dropped after
    NFKC, one between a letter and a combining accent would leave the pair uncomposed.)
    """
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text.replace("\ufeff", ""))).strip()


def read_lines(path: str | Path, key: str) -> list[str]:
    """All lines of a UTF-8 text file; ``key`` names the config key in errors."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{key}: file {path} not found (fetch it with scripts/fetch_data.py or fix the path)")
    with path.open("rb") as handle:
        lines = [_decode_line(raw, path, number) for number, raw in enumerate(handle, start=1)]
    if not lines:
        raise UserError(f"{key}: file {path} is empty")
    return lines


def split_lines(data: bytes, where: str) -> list[str]:
    """UTF-8 bytes -> lines, as ``read_lines`` reads a file: split at LF only (the CR of a CRLF dropped), so
    characters Unicode also counts as line breaks (U+2028, U+0085, \\x1c, form feed...) stay inside their
    line and every input line keeps its place; ``where`` names the input in errors."""
    raws = data.split(b"\n")
    if raws[-1] == b"":
        raws.pop()  # the final line end
    return [_decode_line(raw, where, number) for number, raw in enumerate(raws, start=1)]


def _decode_line(raw: bytes, where: str | Path, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise UserError(f"{where} line {number}: not valid UTF-8; re-encode the file as UTF-8") from None


def read_pair_files(src_path: str, tgt_path: str, key_prefix: str = "data.") -> tuple[list[str], list[str]]:
    """Two line-aligned files -> (sources, targets); keys ``{key_prefix}src``/``tgt`` in errors."""
    src, tgt = read_lines(src_path, f"{key_prefix}src"), read_lines(tgt_path, f"{key_prefix}tgt")
    if len(src) != len(tgt):
        raise UserError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; the files must be line-aligned"
        )
    return src, tgt


def read_tsv(path: str, src_column: int, tgt_column: int) -> tuple[list[str], list[str]]:
    """A TSV file -> (sources, targets) from the given 0-based columns."""
    need = max(src_column, tgt_column) + 1
    src, tgt = [], []
    for number, line in enumerate(read_lines(path, "data.tsv"), start=1):
        columns = line.split("\t")
        if len(columns) < need:
            raise UserError(
                f"{path} line {number}: expected at least {need} tab-separated columns, found {len(columns)}"
            )
        src.append(columns[src_column])
        tgt.append(columns[tgt_column])
    return src, tgt


def read_corpus(cfg: DataConfig) -> tuple[list[str], list[str]]:
    """The training corpus named by the config, normalized."""
    if cfg.tsv is not None:
        src, tgt = read_tsv(cfg.tsv, cfg.src_column, cfg.tgt_column)
    else:
        src, tgt = read_pair_files(cfg.src, cfg.tgt)
    return [normalize(s) for s in src], [normalize(t) for t in tgt]


@dataclass
class Split:
    """Normalized sentence pairs of one split."""

    src: list[str]
    tgt: list[str]

    def __len__(self) -> int:
        return len(self.src)


def _components(src: list[str], tgt: list[str]) -> list[list[int]]:
    """Pair indices grouped into connected components (pairs linked by a shared sentence)."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node

    for s, t in zip(src, tgt, strict=True):
        a, b = find("s\t" + s), find("t\t" + t)
        if a != b:
            parent[a] = b
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(src):
        groups.setdefault(find("s\t" + s), []).append(i)
    return list(groups.values())


def group_split(
    src: list[str], tgt: list[str], dev_size: int, test_size: int, seed: int
) -> tuple[list[int], list[int], list[int]]:
    """Seeded, group-aware split -> (train, dev, test) pair indices.

    Whole groups are dealt in a seeded random order to test, then dev, until each
    has its size; a group that would overshoot a split goes to train instead.
    """
    groups = _components(src, tgt)
    random.Random(seed).shuffle(groups)
    train: list[int] = []
    dev: list[int] = []
    test: list[int] = []
    for group in groups:
        if len(test) + len(group) <= test_size:
            test.extend(group)
        elif len(dev) + len(group) <= dev_size:
            dev.extend(group)
        else:
            train.extend(group)
    return sorted(train), sorted(dev), sorted(test)


@dataclass
class Splits:
    """Train/dev/test and what happened on the way."""

    train: Split
    dev: Split
    test: Split
    read: int
    duplicates: int
    overlap: int


def make_splits(cfg: DataConfig) -> Splits:
    """Read the corpus, drop exact duplicates, then split it (or take dev/test from the config)."""
    src, tgt = read_corpus(cfg)
    seen: set[tuple[str, str]] = set()
    keep = [i for i, pair in enumerate(zip(src, tgt, strict=True)) if not (pair in seen or seen.add(pair))]
    duplicates = len(src) - len(keep)
    src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
    if cfg.dev_src is None or cfg.test_src is None:
        dev_size = 0 if cfg.dev_src else cfg.dev_size
        test_size = 0 if cfg.test_src else cfg.test_size
        train_i, dev_i, test_i = group_split(src, tgt, dev_size, test_size, cfg.split_seed)
        train = Split([src[i] for i in train_i], [tgt[i] for i in train_i])
        dev = Split([src[i] for i in dev_i], [tgt[i] for i in dev_i])
        test = Split([src[i] for i in test_i], [tgt[i] for i in test_i])
    else:
        train, dev, test = Split(src, tgt), Split([], []), Split([], [])
    for name, split in (("dev", dev), ("test", test)):
        given = getattr(cfg, f"{name}_src")
        if given is not None:
            s, t = read_pair_files(given, getattr(cfg, f"{name}_tgt"), f"data.{name}_")
            split.src, split.tgt = [normalize(x) for x in s], [normalize(x) for x in t]
    # Explicit dev/test files may share sentences with the training corpus: drop those pairs from train.
    held_src, held_tgt = set(dev.src) | set(test.src), set(dev.tgt) | set(test.tgt)
    kept = [i for i in range(len(train)) if train.src[i] not in held_src and train.tgt[i] not in held_tgt]
    overlap = len(train) - len(kept)
    train = Split([train.src[i] for i in kept], [train.tgt[i] for i in kept])
    return Splits(train, dev, test, read=len(keep) + duplicates, duplicates=duplicates, overlap=overlap)
