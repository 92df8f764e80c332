"""Reading, checking, normalizing and splitting a parallel corpus.

Input is two line-aligned UTF-8 files or one TSV file. Problems that make the
corpus unusable (missing or empty file, bad UTF-8, misaligned files, short TSV
rows) raise ``UserError`` naming file and line. The split into train/dev/test is
seeded and group-aware: pairs sharing a source or a target sentence, or whose
sources or targets are near-duplicates (``seq2seq.data.neardup``, above
``data.split_similarity``), land on the same side, so dev/test measure what the
model makes of sentences it has not seen, not how well it remembers their twins.
Several corpora (``data.corpora``) are each read and checked alike; dev/test come
from one of them, the others only train. Files are read a line at a time (``raw_chunks``
hands out chunks of pairs), and the splits' training pairs go to disk (``SpooledSplits``)
for the rest of the pipeline; a corpus too large for this module's in-memory split is split
by ``seq2seq.data.hashsplit``.
"""

import random
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice, zip_longest
from pathlib import Path

from seq2seq.config import CorpusConfig, DataConfig
from seq2seq.data.neardup import near_duplicates
from seq2seq.data.zh_script import converter
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


def normalizer(script: str, key: str = "data.src_script") -> Callable[[str], str]:
    """``normalize``, then the conversion to ``script`` (``seq2seq.data.zh_script``); ``key`` names the setting."""
    convert = converter(script, key)
    return lambda text: convert(normalize(text))


READ_CHUNK = 50_000  # pairs read (and normalized) at a time when a corpus is streamed


def _lines(path: str | Path, key: str) -> Iterator[str]:
    """The lines of a UTF-8 text file, one at a time; ``key`` names the config key in errors."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{key}: file {path} not found (fetch it with seq2seq fetch or fix the path)")
    number = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):  # noqa: B007 (read after the loop: the line count)
            yield decode_line(raw, path, number)
    if number == 0:
        raise UserError(f"{key}: file {path} is empty")


def read_lines(path: str | Path, key: str) -> list[str]:
    """All lines of a UTF-8 text file; ``key`` names the config key in errors."""
    return list(_lines(path, key))


def split_lines(data: bytes, where: str) -> list[str]:
    """UTF-8 bytes -> lines, as ``read_lines`` reads a file: split at LF only (the CR of a CRLF dropped), so
    characters Unicode also counts as line breaks (U+2028, U+0085, \\x1c, form feed...) stay inside their
    line and every input line keeps its place; ``where`` names the input in errors."""
    raws = data.split(b"\n")
    if raws[-1] == b"":
        raws.pop()  # the final line end
    return [decode_line(raw, where, number) for number, raw in enumerate(raws, start=1)]


def decode_line(raw: bytes, where: str | Path, number: int) -> str:
    """Line ``number`` of input ``where`` as text without its line end; not UTF-8 is a user error naming it."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise UserError(f"{where} line {number}: not valid UTF-8; re-encode the file as UTF-8") from None


def _file_pairs(src_path: str, tgt_path: str, key_prefix: str) -> Iterator[tuple[str, str]]:
    """The pairs of two line-aligned files, one at a time; keys ``{key_prefix}src``/``tgt`` in errors."""
    src, tgt = _lines(src_path, f"{key_prefix}src"), _lines(tgt_path, f"{key_prefix}tgt")
    count = 0
    for s, t in zip_longest(src, tgt):
        if s is None or t is None:  # one file ended: count the rest of the other for the message
            src_count = count + (s is not None) + sum(1 for _ in src)
            tgt_count = count + (t is not None) + sum(1 for _ in tgt)
            raise UserError(
                f"{src_path} has {src_count} lines but {tgt_path} has {tgt_count}; the files must be line-aligned"
            )
        count += 1
        yield s, t


def _tsv_pairs(path: str, src_column: int, tgt_column: int, key: str) -> Iterator[tuple[str, str]]:
    """The (source, target) columns of a TSV file, one row at a time; ``key`` names the setting in errors."""
    need = max(src_column, tgt_column) + 1
    for number, line in enumerate(_lines(path, key), start=1):
        columns = line.split("\t")
        if len(columns) < need:
            raise UserError(
                f"{path} line {number} ({key}): expected at least {need} tab-separated columns, found {len(columns)}"
            )
        yield columns[src_column], columns[tgt_column]


def _unzipped(pairs: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    src: list[str] = []
    tgt: list[str] = []
    for s, t in pairs:
        src.append(s)
        tgt.append(t)
    return src, tgt


def read_pair_files(src_path: str, tgt_path: str, key_prefix: str = "data.") -> tuple[list[str], list[str]]:
    """Two line-aligned files -> (sources, targets); keys ``{key_prefix}src``/``tgt`` in errors."""
    return _unzipped(_file_pairs(src_path, tgt_path, key_prefix))


def read_tsv(path: str, src_column: int, tgt_column: int, key: str = "data.tsv") -> tuple[list[str], list[str]]:
    """A TSV file -> (sources, targets) from the given 0-based columns; ``key`` names the setting in errors."""
    return _unzipped(_tsv_pairs(path, src_column, tgt_column, key))


def corpus_key(cfg: DataConfig, index: int) -> str:
    """How errors name a corpus's settings: ``data.`` for the single corpus, ``data.corpora[i] (name).`` else."""
    return f"data.corpora[{index}] ({cfg.corpora[index].name})." if cfg.corpora else "data."


def corpus_pairs(cfg: DataConfig) -> int:
    """Lines in the files of all configured corpora: their size in pairs, counted before they are read
    (a missing file counts none; reading it reports it)."""
    total = 0
    for corpus in cfg.corpus_list():
        path = Path(corpus.tsv if corpus.tsv is not None else corpus.src or "")
        if path.is_file():
            with path.open("rb") as handle:
                total += sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))  # noqa: B023
    return total


def raw_chunks(cfg: DataConfig, index: int, size: int = READ_CHUNK) -> Iterator[tuple[list[str], list[str]]]:
    """Corpus ``index`` of the config as (sources, targets) chunks of at most ``size`` pairs, not yet normalized."""
    corpus: CorpusConfig = cfg.corpus_list()[index]
    key = corpus_key(cfg, index)
    if corpus.tsv is not None:
        pairs = _tsv_pairs(corpus.tsv, corpus.src_column, corpus.tgt_column, f"{key}tsv")
    else:
        pairs = _file_pairs(corpus.src, corpus.tgt, key)
    while chunk := list(islice(pairs, size)):
        yield _unzipped(chunk)


def read_corpus(cfg: DataConfig, index: int = 0) -> tuple[list[str], list[str]]:
    """Corpus ``index`` of the config (the only one, by default), normalized and in the configured scripts."""
    src_norm, tgt_norm = normalizer(cfg.src_script, "data.src_script"), normalizer(cfg.tgt_script, "data.tgt_script")
    src: list[str] = []
    tgt: list[str] = []
    for raw_src, raw_tgt in raw_chunks(cfg, index):
        src += map(src_norm, raw_src)
        tgt += map(tgt_norm, raw_tgt)
    return src, tgt


@dataclass
class Split:
    """Normalized sentence pairs of one split."""

    src: list[str]
    tgt: list[str]

    def __len__(self) -> int:
        return len(self.src)


def _components(src: list[str], tgt: list[str], similar: float = 1.0) -> list[list[int]]:
    """Pair indices grouped into connected components: pairs linked by a shared sentence, or by
    sources (or targets) at least ``similar`` alike (1: identical only)."""
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
    if similar < 1:
        links = [("s\t" + a, "s\t" + b) for a, b in near_duplicates(src, similar)]
        links += [("t\t" + a, "t\t" + b) for a, b in near_duplicates(tgt, similar)]
        for a, b in links:
            a, b = find(a), find(b)
            if a != b:
                parent[a] = b
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(src):
        groups.setdefault(find("s\t" + s), []).append(i)
    return list(groups.values())


def group_split(
    src: list[str], tgt: list[str], dev_size: int, test_size: int, seed: int, similar: float = 1.0
) -> tuple[list[int], list[int], list[int]]:
    """Seeded, group-aware split -> (train, dev, test) pair indices.

    Whole groups (``_components``) are dealt in a seeded random order to test, then dev,
    until each has its size; a group that would overshoot a split goes to train instead.
    """
    groups = _components(src, tgt, similar)
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
class CorpusCounts:
    """What reading one corpus gave: its name and weight, pairs read, duplicates, training pairs."""

    name: str
    weight: float
    read: int
    duplicates: int
    train: int = 0
    overlap: int = 0  # training pairs dropped for sharing a sentence with dev/test
    filtered: int = 0  # training pairs dropped by the encoder's filters (too long, ratio, unknown pieces)


@dataclass
class Splits:
    """Train/dev/test and what happened on the way. ``train`` holds the corpora one after another,
    in config order; ``corpora[i].train`` of its pairs come from corpus i."""

    train: Split
    dev: Split
    test: Split
    read: int
    duplicates: int
    overlap: int
    corpora: list[CorpusCounts] = field(default_factory=list)

    def train_parts(self) -> list[Split]:
        """``train`` cut back into one Split per corpus."""
        parts, start = [], 0
        for counts in self.corpora:
            end = start + counts.train
            parts.append(Split(self.train.src[start:end], self.train.tgt[start:end]))
            start = end
        return parts

    def spool(self, directory: Path) -> "SpooledSplits":
        """The same splits with each corpus's training pairs written to a file in ``directory``."""
        files = []
        for index, part in enumerate(self.train_parts()):
            files.append(directory / f"train-{index}.pairs")
            write_pairs(files[-1], part.src, part.tgt)
        return SpooledSplits(self.dev, self.test, files, self.corpora)


@dataclass
class SpooledSplits:
    """Dev/test in memory, the training pairs of corpus i in ``train_files[i]`` (``write_pairs``'s format):
    what the rest of the pipeline reads, whichever way the corpus was split."""

    dev: Split
    test: Split
    train_files: list[Path]
    corpora: list[CorpusCounts]


def write_pairs(path: Path, src: Iterable[str], tgt: Iterable[str]) -> None:
    """Normalized pairs as ``source<TAB>target`` lines (normalized text holds no tab or line break)."""
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(f"{s}\t{t}\n" for s, t in zip(src, tgt, strict=True))


def pair_chunks(path: Path, size: int = READ_CHUNK) -> Iterator[Split]:
    """The pairs of a ``write_pairs`` file, ``size`` at a time."""
    with path.open(encoding="utf-8", newline="\n") as handle:
        while lines := list(islice(handle, size)):
            pairs = [line.rstrip("\n").split("\t") for line in lines]
            yield Split([s for s, _ in pairs], [t for _, t in pairs])


def _deduplicated(src: list[str], tgt: list[str]) -> tuple[list[str], list[str]]:
    """The pairs without exact repeats, first occurrences in order."""
    seen: set[tuple[str, str]] = set()
    keep = [i for i, pair in enumerate(zip(src, tgt, strict=True)) if not (pair in seen or seen.add(pair))]
    return [src[i] for i in keep], [tgt[i] for i in keep]


def given_split(cfg: DataConfig, name: str, split_off: Split) -> Split:
    """The explicit ``dev`` or ``test`` files of the config (``data.{name}_src``/``_tgt``), normalized, if
    set; else ``split_off`` (what the split held out)."""
    given = getattr(cfg, f"{name}_src")
    if given is None:
        return split_off
    src, tgt = read_pair_files(given, getattr(cfg, f"{name}_tgt"), f"data.{name}_")
    src_norm, tgt_norm = normalizer(cfg.src_script, "data.src_script"), normalizer(cfg.tgt_script, "data.tgt_script")
    return Split([src_norm(x) for x in src], [tgt_norm(x) for x in tgt])


def make_splits(cfg: DataConfig) -> Splits:
    """Read every corpus and drop its exact duplicates; split the eval corpus (or take dev/test from
    the config); the other corpora only train. Training pairs sharing a sentence with dev/test go."""
    reference = cfg.eval_corpus()
    parts: list[Split] = []
    counts: list[CorpusCounts] = []
    for index, corpus in enumerate(cfg.corpus_list()):
        src, tgt = read_corpus(cfg, index)
        unique_src, unique_tgt = _deduplicated(src, tgt)
        parts.append(Split(unique_src, unique_tgt))
        counts.append(CorpusCounts(corpus.name, corpus.weight, len(src), len(src) - len(unique_src)))
    src, tgt = parts[reference].src, parts[reference].tgt
    if cfg.dev_src is None or cfg.test_src is None:
        dev_size = 0 if cfg.dev_src else cfg.dev_size
        test_size = 0 if cfg.test_src else cfg.test_size
        train_i, dev_i, test_i = group_split(src, tgt, dev_size, test_size, cfg.split_seed, cfg.split_similarity)
        parts[reference] = Split([src[i] for i in train_i], [tgt[i] for i in train_i])
        dev = Split([src[i] for i in dev_i], [tgt[i] for i in dev_i])
        test = Split([src[i] for i in test_i], [tgt[i] for i in test_i])
    else:
        dev, test = Split([], []), Split([], [])
    dev, test = given_split(cfg, "dev", dev), given_split(cfg, "test", test)
    # Explicit dev/test files, or a second corpus, may share sentences with dev/test: drop those pairs from train.
    held_src, held_tgt = set(dev.src) | set(test.src), set(dev.tgt) | set(test.tgt)
    train = Split([], [])
    for part, count in zip(parts, counts, strict=True):
        kept = [i for i in range(len(part)) if part.src[i] not in held_src and part.tgt[i] not in held_tgt]
        count.train, count.overlap = len(kept), len(part) - len(kept)
        train.src += [part.src[i] for i in kept]
        train.tgt += [part.tgt[i] for i in kept]
    return Splits(
        train,
        dev,
        test,
        read=sum(c.read for c in counts),
        duplicates=sum(c.duplicates for c in counts),
        overlap=sum(c.overlap for c in counts),
        corpora=counts,
    )
