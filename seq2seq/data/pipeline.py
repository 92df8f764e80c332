"""From config to ready-to-batch data: split, tokenizer, encoded tensors, cache.

``prepare_data`` runs the whole pipeline once and caches the result under
``data.cache_dir/<key>`` (``seq2seq.data.cache``: the key hashes the corpus bytes, the
data settings and the pipeline version), so a second run starts in seconds and any change
to the corpus or settings rebuilds. The tokenizer and the dev/test text are copied into
the run directory, which then holds everything ``translate`` and ``evaluate`` need:
with them ``test.novelty``, the similarity of each test source to its closest
training source (``seq2seq.data.neardup``), which ``evaluate`` buckets BLEU by, and, when
the source script is normalized, the test sources in the other script
(``test.traditional.src`` / ``test.simplified.src``).

Corpora larger than memory: the pipeline streams. Up to ``data.hash_split_above`` pairs the
corpus is split in memory, grouping all of it (``seq2seq.data.corpus``); above, by hash
(``seq2seq.data.hashsplit``). Either way the training pairs go to disk, the tokenizer learns from a
seeded sample of at most ``data.spm_sample_sentences`` of them (all of them when they are
fewer: the tokenizer is then the one the whole corpus teaches), the pairs are encoded chunk by
chunk on SentencePiece's threads into flat token files, and training reads each batch from
those (``seq2seq.data.shards``). The training text stays on disk, read only by subword regularization.
"""

import json
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

import torch

from seq2seq.atomic import install_directory
from seq2seq.config import DataConfig
from seq2seq.data.cache import cache_key, install_into_run, is_complete, locked, read_split, write_lines
from seq2seq.data.corpus import Split, SpooledSplits, corpus_key, corpus_pairs, make_splits, pair_chunks
from seq2seq.data.encoded import EncodedSplit, FilterCounts, encode_eval, encode_train
from seq2seq.data.hashsplit import split_by_hash
from seq2seq.data.neardup import NEAR_DUPLICATE, closest_similarity
from seq2seq.data.shards import ShardWriter, write_split
from seq2seq.data.tokenizer import PieceOptions, Tokenizer
from seq2seq.data.zh_script import OTHER_SCRIPT, converter
from seq2seq.errors import UserError
from seq2seq.text.language import uses_latin_script
from seq2seq.text.placeholders import PLACEHOLDERS, mask_training_pair

ENCODE_CHUNK = 50_000  # pairs encoded per call: SentencePiece's threads share one call's work
NOVELTY_SOURCES = 50_000  # test.novelty compares with (a seeded sample of) at most this many training sources
T = TypeVar("T")


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
        return read_split(self.directory, "train")


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
    options = PieceOptions(PLACEHOLDERS if cfg.placeholders else (), cfg.byte_fallback)
    return Tokenizer.train(
        [s for s, _ in sample],
        [t for _, t in sample],
        cfg.vocab_size,
        cfg.joint_vocab,
        cfg.spm_model_type,
        cfg.character_coverage,
        options,
    )


def _masked(cfg: DataConfig, chunk: Split) -> Split:
    """``chunk`` with its aligned non-translatables masked as placeholders, when ``data.placeholders`` asks."""
    if not cfg.placeholders:
        return chunk
    latin_words = not uses_latin_script(cfg.src_lang)
    pairs = [
        mask_training_pair(s, t, latin_words, cfg.placeholder_share) for s, t in zip(chunk.src, chunk.tgt, strict=True)
    ]
    return Split([s for s, _ in pairs], [t for _, t in pairs])


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
                    _masked(cfg, chunk), tokenizer, cfg.max_len, cfg.max_ratio, drop_unknown=not setting.vocab
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
        write_lines(directory / f"{name}.src", split.src)
        write_lines(directory / f"{name}.tgt", split.tgt)
    train_pairs = sum(c.train for c in splits.corpora)
    # Beyond NOVELTY_SOURCES training pairs, against a seeded sample of them: a lower bound, exact up to there.
    with (directory / "train.src").open(encoding="utf-8") as handle:
        lines = (line.rstrip("\n") for line in handle)
        sources = _sampled(lines, sample_indices(train_pairs, NOVELTY_SOURCES, cfg.split_seed))
    novelty = closest_similarity(splits.test.src, sources)
    stages.lap("novelty")
    write_lines(directory / "test.novelty", [f"{x:.4f}" for x in novelty])
    if cfg.src_script != "keep":
        other = OTHER_SCRIPT[cfg.src_script]
        write_lines(directory / f"test.{other}.src", [converter(other)(x) for x in splits.test.src])
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
        "test_with_similar_train_source": round(sum(x >= NEAR_DUPLICATE for x in novelty) / max(len(novelty), 1), 4),
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
    with locked(directory.parent):  # the ranks of a torchrun job on one machine: one builds, the rest wait
        cached = is_complete(directory)
        if not cached:
            shutil.rmtree(directory, ignore_errors=True)  # files deleted from an entry (by hand, a cleaner): rebuild
            tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=".build-"))
            try:
                _build(cfg, tmp, tokenizer)
                install_directory(tmp, directory)  # atomic and durable: a half-built cache is never seen
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
        install_into_run(directory, Path(run_dir))
    return PreparedData(
        tokenizer,
        EncodedSplit.load(directory, "train"),
        EncodedSplit.load(directory, "dev"),
        read_split(directory, "dev"),
        read_split(directory, "test"),
        report,
        [corpus["train"] for corpus in report["corpora"]],
        directory,
    )
