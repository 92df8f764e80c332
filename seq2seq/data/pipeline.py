"""From config to ready-to-batch data: split, tokenizer, encoded tensors, cache.

``prepare_data`` runs the whole pipeline once and caches the result under
``data.cache_dir/<key>``, the key hashing the corpus bytes, the data settings and
the pipeline version, so a second run starts in seconds and any change to the
corpus or settings rebuilds. The tokenizer and the dev/test text are copied into
the run directory, which then holds everything ``translate`` and ``evaluate`` need:
with them ``test.novelty``, the similarity of each test source to its closest
training source (``seq2seq.neardup``), which ``evaluate`` buckets BLEU by, and, when
the source script is normalized, the test sources in the other script
(``test.traditional.src`` / ``test.simplified.src``).

Corpora larger than memory: the pipeline streams. Up to ``data.hash_split_above`` pairs the
corpus is split in memory, grouping all of it (``seq2seq.corpus``); above, by hash
(``seq2seq.hashsplit``). Either way the training pairs go to disk, the tokenizer learns from a
seeded sample of at most ``data.spm_sample_sentences`` of them (all of them when they are
fewer: the tokenizer is then the one the whole corpus teaches), the pairs are encoded chunk by
chunk on SentencePiece's threads into flat token files, and training reads each batch from
those (``seq2seq.shards``). The training text stays on disk, read only by subword regularization.
"""

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import torch
from torch import Tensor

from seq2seq.atomic import write_bytes_atomically
from seq2seq.batching import Batch, gather_rows, make_batch
from seq2seq.config import DataConfig
from seq2seq.corpus import Split, SpooledSplits, corpus_key, corpus_pairs, make_splits, pair_chunks
from seq2seq.errors import UserError
from seq2seq.hashsplit import split_by_hash
from seq2seq.neardup import closest_similarity
from seq2seq.script import OTHER_SCRIPT, converter
from seq2seq.shards import ShardReader, ShardWriter, load_tensors, read_lengths, shard_files, write_split
from seq2seq.tokenizer import UNK, Tokenizer, seed_sampling

PIPELINE_VERSION = 4
ENCODE_CHUNK = 50_000  # pairs encoded per call: SentencePiece's threads share one call's work
NOVELTY_SOURCES = 50_000  # test.novelty compares with (a seeded sample of) at most this many training sources
T = TypeVar("T")
# Settings that do not change the encoded data, so they stay out of the cache key.
_NOT_IN_KEY = {"batch_tokens", "cache_dir", "subword_alpha"}


@dataclass
class EncodedSplit:
    """Id sequences stored flat: ``tokens[offsets[i]:offsets[i+1]]`` is sentence i."""

    src_tokens: Tensor  # (total source ids,) int32
    src_offsets: Tensor  # (n + 1,) int64
    tgt_tokens: Tensor
    tgt_offsets: Tensor
    lengths: tuple[Tensor, Tensor] | None = field(default=None, repr=False)  # (n,) each, when read at load
    reader: ShardReader | None = field(default=None, repr=False)  # batches read from the files, when loaded

    @classmethod
    def from_lists(cls, src: list[list[int]], tgt: list[list[int]]) -> "EncodedSplit":
        def flat(seqs: list[list[int]]) -> tuple[Tensor, Tensor]:
            lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
            offsets = torch.zeros(len(seqs) + 1, dtype=torch.long)
            offsets[1:] = lengths.cumsum(0)
            tokens = torch.tensor([i for s in seqs for i in s], dtype=torch.int32)
            return tokens, offsets

        return cls(*flat(src), *flat(tgt))

    @classmethod
    def load(cls, directory: Path, name: str) -> "EncodedSplit":
        """Split ``name`` as ``seq2seq.shards`` stored it: lengths in memory, batches read from the files."""
        return cls(
            **load_tensors(directory, name),
            lengths=(read_lengths(directory, name, "src"), read_lengths(directory, name, "tgt")),
            reader=ShardReader(directory, name),
        )

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> Tensor:
        return self.src_offsets.diff() if self.lengths is None else self.lengths[0]

    @property
    def tgt_lengths(self) -> Tensor:
        return self.tgt_offsets.diff() if self.lengths is None else self.lengths[1]

    def rows(self, side: str, indices: Tensor) -> tuple[Tensor, Tensor]:
        """Sentences ``indices`` of ``side`` ("src" | "tgt") -> (their ids one after another, lengths (B,))."""
        if self.reader is not None:
            return self.reader.rows(side, indices.tolist())
        return gather_rows(getattr(self, f"{side}_tokens"), getattr(self, f"{side}_offsets"), indices)

    def sources(self, indices: list[int]) -> list[list[int]]:
        """Source ids of the sentences ``indices``."""
        flat, lengths = self.rows("src", torch.tensor(indices, dtype=torch.long))
        return [ids.tolist() for ids in flat.split(lengths.tolist())]

    def batch(self, indices: Tensor) -> Batch:
        """Padded batch of the given sentence indices."""
        return make_batch(self.rows("src", indices), self.rows("tgt", indices))

    def state(self) -> dict[str, Tensor]:
        """The four flat tensors by name."""
        return {name: getattr(self, name) for name in ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")}


@dataclass
class FilterCounts:
    """Pairs dropped from training, by reason."""

    empty: int = 0
    too_long: int = 0
    ratio: int = 0
    unknown: int = 0  # a piece outside the vocabulary (only for corpora that did not teach it)

    def add(self, other: "FilterCounts") -> None:
        for reason in ("empty", "too_long", "ratio", "unknown"):
            setattr(self, reason, getattr(self, reason) + getattr(other, reason))


@dataclass
class EncodedPairs:
    """Encoded pairs as id lists, with their text, pair for pair."""

    src_ids: list[list[int]]
    tgt_ids: list[list[int]]
    text: Split


def encode_train(
    split: Split, tokenizer: Tokenizer, max_len: int, max_ratio: float, drop_unknown: bool = False
) -> tuple[EncodedPairs, FilterCounts]:
    """Encode training pairs (on every core), filtering empty sides, overlong and badly proportioned pairs
    (and, with ``drop_unknown``, pairs holding an unknown piece: a corpus that did not teach the
    vocabulary, e.g. a lexicon of rare words, would otherwise teach the model to map <unk> to them).

    Returns the pairs kept and what was filtered.
    """
    counts = FilterCounts()
    pairs = [(s, t) for s, t in zip(split.src, split.tgt, strict=True) if s and t]
    counts.empty = len(split) - len(pairs)
    xs = tokenizer.encode_src_batch([s for s, _ in pairs])
    ys = tokenizer.encode_tgt_batch([t for _, t in pairs])
    kept = EncodedPairs([], [], Split([], []))
    for (s, t), x, y in zip(pairs, xs, ys, strict=True):
        if drop_unknown and (UNK in x or UNK in y):
            counts.unknown += 1
        elif len(x) > max_len or len(y) + 1 > max_len:
            counts.too_long += 1
        elif max(len(x), len(y) + 1) > max_ratio * min(len(x), len(y) + 1):
            counts.ratio += 1
        else:
            kept.src_ids.append(x)
            kept.tgt_ids.append(y)
            kept.text.src.append(s)
            kept.text.tgt.append(t)
    return kept, counts


class Resegmented:
    """The training pairs with a freshly sampled subword segmentation each epoch.

    Subword regularization (Kudo, 2018): seeing many segmentations of the same
    sentence makes a model robust to how words are split, which helps most when
    the corpus is small. ``split(epoch)`` keeps the pairs and their order and draws
    from a generator seeded by (seed, epoch), so a resumed run sees the same data.
    A sampled pair longer than ``max_len`` keeps its best segmentation.
    """

    def __init__(self, text: Split, tokenizer: Tokenizer, alpha: float, seed: int, max_len: int) -> None:
        self.text, self.tokenizer, self.alpha, self.seed, self.max_len = text, tokenizer, alpha, seed, max_len
        self.epoch: int | None = None
        self.current: EncodedSplit | None = None

    def split(self, epoch: int) -> EncodedSplit:
        """The pairs segmented for ``epoch`` (kept as ``current`` until another epoch is asked for)."""
        if epoch != self.epoch:
            seed_sampling(self.seed * 100_003 + epoch)
            tok, src_ids, tgt_ids = self.tokenizer, [], []
            for s, t in zip(self.text.src, self.text.tgt, strict=True):
                x, y = tok.encode_src(s, self.alpha), tok.encode_tgt(t, self.alpha)
                if len(x) > self.max_len or len(y) + 1 > self.max_len:
                    x, y = tok.encode_src(s), tok.encode_tgt(t)
                src_ids.append(x)
                tgt_ids.append(y)
            self.epoch, self.current = epoch, EncodedSplit.from_lists(src_ids, tgt_ids)
        return self.current


def encode_eval(split: Split, tokenizer: Tokenizer) -> tuple[list[list[int]], list[list[int]]]:
    """Encode a dev/test split unfiltered (every sentence gets scored): (source ids, target ids)."""
    return tokenizer.encode_src_batch(split.src), tokenizer.encode_tgt_batch(split.tgt)


def sample_indices(total: int, most: int, seed: int) -> list[int] | None:
    """Ascending indices of a seeded sample of ``most`` of ``total`` items; None (every item) when
    ``most`` is 0 or there are no more items than that."""
    if most <= 0 or total <= most:
        return None
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(total, generator=generator)[:most].sort().values.tolist()


def _sampled(items: Iterable[T], indices: list[int] | None) -> list[T]:
    """The items at ``indices`` (ascending; None: every item)."""
    if indices is None:
        return list(items)
    wanted, chosen = iter(indices), []
    position = next(wanted, None)
    for index, item in enumerate(items):
        if position is None:
            break
        if index == position:
            chosen.append(item)
            position = next(wanted, None)
    return chosen


@dataclass
class PreparedData:
    """Everything training needs from the data side."""

    tokenizer: Tokenizer
    train: EncodedSplit  # read from the cache a batch at a time
    dev: EncodedSplit
    dev_text: Split
    test_text: Split
    report: dict
    corpus_sizes: list[int]  # training pairs of each corpus, in storage order (config order)
    directory: Path  # the cache entry

    @property
    def train_text(self) -> Split:
        """The text of ``train``, pair for pair, read from the cache (only subword regularization needs it)."""
        return _read_split(self.directory, "train")


def _file_digest(path: str | None, digest: "hashlib._Hash", key: str) -> None:
    """Add a file's size and bytes (or a marker for an absent one) to ``digest``; ``key`` names the setting."""
    if path is None:
        digest.update(b"none;")
        return
    try:
        digest.update(f"{os.path.getsize(path)};".encode())  # delimits files: no two corpora hash alike
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        raise UserError(
            f"{key}: file {path} not found or unreadable; fetch it with scripts/fetch_data.py or fix the path"
        ) from None


def cache_key(cfg: DataConfig, tokenizer: Tokenizer | None = None) -> str:
    """Hash of the corpus files' bytes, the data settings, the pipeline version and a given tokenizer."""
    digest = hashlib.sha256()
    settings = {k: v for k, v in asdict(cfg).items() if k not in _NOT_IN_KEY}
    digest.update(json.dumps([PIPELINE_VERSION, settings], sort_keys=True).encode())
    if tokenizer is not None:
        digest.update(b"tokenizer;" + tokenizer.src.serialized_model_proto() + tokenizer.tgt.serialized_model_proto())
    files = [
        (getattr(corpus, name), f"{corpus_key(cfg, i)}{name}")
        for i, corpus in enumerate(cfg.corpus_list())
        for name in ("tsv", "src", "tgt")
    ]
    files += [(getattr(cfg, name), f"data.{name}") for name in ("dev_src", "dev_tgt", "test_src", "test_tgt")]
    for path, key in files:
        _file_digest(path, digest, key)
    return digest.hexdigest()[:16]


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _read_split(directory: Path, name: str) -> Split:
    read = lambda side: (directory / f"{name}.{side}").read_text(encoding="utf-8").splitlines()  # noqa: E731
    return Split(read("src"), read("tgt"))


class Stopwatch:
    """Seconds spent in each named stage, one after another (the report says where a build's time goes)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage] = round(now - self._last, 2)
        self._last = now


def _split(cfg: DataConfig, directory: Path) -> SpooledSplits:
    """Train/dev/test, the training pairs spooled into ``directory``: in memory, or by hash for large corpora."""
    if corpus_pairs(cfg) > cfg.hash_split_above:
        return split_by_hash(cfg, directory)
    return make_splits(cfg).spool(directory)


def _train_tokenizer(cfg: DataConfig, splits: SpooledSplits) -> Tokenizer:
    """A tokenizer learnt from (a seeded sample of ``data.spm_sample_sentences``) training pairs of the
    corpora that teach the vocabulary."""
    teaching = [
        (path, c) for path, c, s in zip(splits.train_files, splits.corpora, cfg.corpus_list(), strict=True) if s.vocab
    ]
    indices = sample_indices(sum(c.train for _, c in teaching), cfg.spm_sample_sentences, cfg.split_seed)
    pairs = (
        pair for path, _ in teaching for chunk in pair_chunks(path) for pair in zip(chunk.src, chunk.tgt, strict=True)
    )
    sample = _sampled(pairs, indices)
    return Tokenizer.train(
        [s for s, _ in sample],
        [t for _, t in sample],
        cfg.vocab_size,
        cfg.joint_vocab,
        cfg.spm_model_type,
        cfg.character_coverage,
    )


def _encode_train_files(cfg: DataConfig, splits: SpooledSplits, tokenizer: Tokenizer, directory: Path) -> FilterCounts:
    """Encode every corpus's training pairs, chunk by chunk, into the ``train`` shards and their kept text
    into ``train.src``/``train.tgt``; sets each corpus's ``train`` and ``filtered`` counts."""
    counts, writer = FilterCounts(), ShardWriter(directory, "train")
    with (
        (directory / "train.src").open("w", encoding="utf-8") as src_text,
        (directory / "train.tgt").open("w", encoding="utf-8") as tgt_text,
    ):
        for index, (path, corpus, setting) in enumerate(
            zip(splits.train_files, splits.corpora, cfg.corpus_list(), strict=True)
        ):
            before = writer.count
            for chunk in pair_chunks(path, ENCODE_CHUNK):
                kept, chunk_counts = encode_train(
                    chunk, tokenizer, cfg.max_len, cfg.max_ratio, drop_unknown=not setting.vocab
                )
                writer.add(kept.src_ids, kept.tgt_ids)
                src_text.writelines(line + "\n" for line in kept.text.src)
                tgt_text.writelines(line + "\n" for line in kept.text.tgt)
                counts.add(chunk_counts)
            corpus.filtered = corpus.train - (writer.count - before)
            corpus.train = writer.count - before
            if corpus.train == 0:
                where = corpus_key(cfg, index).rstrip(".")
                raise UserError(f"{where}: every training pair was filtered out; check data.max_len and data.max_ratio")
            path.unlink()
    writer.close()
    return counts


def _build(cfg: DataConfig, directory: Path, tokenizer: Tokenizer | None) -> None:
    """Run the pipeline and write its results into ``directory`` (training a tokenizer unless one is given)."""
    start = time.perf_counter()
    stages = Stopwatch()
    splits = _split(cfg, directory)
    stages.lap("split")
    if sum(c.train for c in splits.corpora) == 0:
        raise UserError("data: no training pairs left after the dev/test split; lower data.dev_size/test_size")
    tokenizer = tokenizer or _train_tokenizer(cfg, splits)
    tokenizer.save(directory)
    stages.lap("tokenizer")
    counts = _encode_train_files(cfg, splits, tokenizer, directory)
    write_split(directory, "dev", *encode_eval(splits.dev, tokenizer))
    stages.lap("encode")
    for name, split in (("dev", splits.dev), ("test", splits.test)):
        _write_lines(directory / f"{name}.src", split.src)
        _write_lines(directory / f"{name}.tgt", split.tgt)
    train_pairs = sum(c.train for c in splits.corpora)
    # Beyond NOVELTY_SOURCES training pairs, against a seeded sample of them: a lower bound, exact up to there.
    with (directory / "train.src").open(encoding="utf-8") as handle:
        lines = (line.rstrip("\n") for line in handle)
        sources = _sampled(lines, sample_indices(train_pairs, NOVELTY_SOURCES, cfg.split_seed))
    novelty = closest_similarity(splits.test.src, sources)
    stages.lap("novelty")
    _write_lines(directory / "test.novelty", [f"{x:.4f}" for x in novelty])
    if cfg.src_script != "keep":
        other = OTHER_SCRIPT[cfg.src_script]
        _write_lines(directory / f"test.{other}.src", [converter(other)(x) for x in splits.test.src])
    report = {
        "pairs_read": sum(c.read for c in splits.corpora),
        "duplicates_removed": sum(c.duplicates for c in splits.corpora),
        "overlap_removed": sum(c.overlap for c in splits.corpora),
        "filtered_empty": counts.empty,
        "filtered_too_long": counts.too_long,
        "filtered_ratio": counts.ratio,
        "filtered_unknown": counts.unknown,
        "train": train_pairs,
        "dev": len(splits.dev),
        "test": len(splits.test),
        "corpora": [asdict(c) for c in splits.corpora],
        "split_similarity": cfg.split_similarity,
        "test_with_similar_train_source": round(sum(x >= 0.8 for x in novelty) / max(len(novelty), 1), 4),
        "src_vocab": tokenizer.src_vocab_size,
        "tgt_vocab": tokenizer.tgt_vocab_size,
        "build_seconds": round(time.perf_counter() - start, 2),
        "stage_seconds": stages.laps,
    }
    (directory / "report.json").write_text(json.dumps(report, indent=1))


def prepare_data(cfg: DataConfig, run_dir: Path | None = None, tokenizer: Tokenizer | None = None) -> PreparedData:
    """Build (or load from cache) the encoded splits and tokenizer; fill ``run_dir``.

    ``tokenizer``: encode with this one (a warm start's) instead of training one on the corpus.
    """
    directory = Path(cfg.cache_dir) / cache_key(cfg, tokenizer)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _locked(directory.parent):  # the ranks of a torchrun job on one machine: one builds, the rest wait
        cached = _complete(directory)
        if not cached:
            shutil.rmtree(directory, ignore_errors=True)  # files deleted from an entry (by hand, a cleaner): rebuild
            tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=".build-"))
            try:
                _build(cfg, tmp, tokenizer)
                tmp.rename(directory)  # atomic: a half-built cache is never seen
            except OSError:  # another process finished first
                if not (directory / "report.json").is_file():
                    raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    start = time.perf_counter()
    report = json.loads((directory / "report.json").read_text())
    report.update(cache=str(directory), cache_hit=cached, load_seconds=round(time.perf_counter() - start, 2))
    tokenizer = Tokenizer.load(directory)
    if run_dir is not None:
        _install_into_run(directory, Path(run_dir))
    return PreparedData(
        tokenizer,
        EncodedSplit.load(directory, "train"),
        EncodedSplit.load(directory, "dev"),
        _read_split(directory, "dev"),
        _read_split(directory, "test"),
        report,
        [corpus["train"] for corpus in report["corpora"]],
        directory,
    )


def _complete(directory: Path) -> bool:
    """Whether a cache entry holds every file ``_build`` writes (report.json, written last, among them)."""
    names = ["report.json", *shard_files("train"), *shard_files("dev")] + [
        f"{split}.{side}" for split in ("train", "dev", "test") for side in "src tgt".split()
    ]
    return all((directory / name).is_file() for name in names) and any(directory.glob("spm*.model"))


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory`` for the block (released when the process dies, too)."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _install_into_run(cache: Path, run_dir: Path) -> None:
    """Copy tokenizer and dev/test text into the run directory (refusing a different tokenizer)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    wanted = {path.name: path.read_bytes() for path in cache.glob("spm*.model")}
    present = {path.name: path.read_bytes() for path in run_dir.glob("spm*.model")}
    if present and present != wanted:
        raise UserError(
            f"{run_dir} holds a model trained with another tokenizer or corpus; "
            "choose a new train.run_dir (or delete the old run)"
        )
    # Atomic: a run killed mid-copy must not leave a half tokenizer that the next start takes for another one.
    for name, model in wanted.items():
        write_bytes_atomically(run_dir / name, model)
    others = [path.name for path in cache.glob("test.*.src")]  # the test sources in the other script
    for name in ["dev.src", "dev.tgt", "test.src", "test.tgt", "test.novelty", *others]:
        write_bytes_atomically(run_dir / name, (cache / name).read_bytes())
