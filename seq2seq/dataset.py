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
"""

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from seq2seq.atomic import write_bytes_atomically
from seq2seq.batching import Batch, make_batch
from seq2seq.config import DataConfig
from seq2seq.corpus import Split, corpus_key, make_splits
from seq2seq.errors import UserError
from seq2seq.neardup import closest_similarity
from seq2seq.script import OTHER_SCRIPT, converter
from seq2seq.tokenizer import UNK, Tokenizer, seed_sampling

PIPELINE_VERSION = 3
# Settings that do not change the encoded data, so they stay out of the cache key.
_NOT_IN_KEY = {"batch_tokens", "cache_dir", "subword_alpha"}


@dataclass
class EncodedSplit:
    """Id sequences stored flat: ``tokens[offsets[i]:offsets[i+1]]`` is sentence i."""

    src_tokens: Tensor  # (total source ids,) int32
    src_offsets: Tensor  # (n + 1,) int64
    tgt_tokens: Tensor
    tgt_offsets: Tensor

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
    def concat(cls, parts: list["EncodedSplit"]) -> "EncodedSplit":
        """The sentences of ``parts``, one part after another."""

        def offsets(name: str) -> Tensor:
            lengths = torch.cat([getattr(p, name).diff() for p in parts])
            return torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])

        return cls(
            torch.cat([p.src_tokens for p in parts]),
            offsets("src_offsets"),
            torch.cat([p.tgt_tokens for p in parts]),
            offsets("tgt_offsets"),
        )

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> Tensor:
        return self.src_offsets.diff()

    @property
    def tgt_lengths(self) -> Tensor:
        return self.tgt_offsets.diff()

    def sources(self, indices: list[int]) -> list[list[int]]:
        """Source ids of the sentences ``indices``."""
        offsets = self.src_offsets.tolist()
        return [self.src_tokens[offsets[i] : offsets[i + 1]].tolist() for i in indices]

    def batch(self, indices: Tensor) -> Batch:
        """Padded batch of the given sentence indices."""
        return make_batch(self.src_tokens, self.src_offsets, self.tgt_tokens, self.tgt_offsets, indices)

    def state(self) -> dict[str, Tensor]:
        return asdict(self)


@dataclass
class FilterCounts:
    """Pairs dropped from training, by reason."""

    empty: int = 0
    too_long: int = 0
    ratio: int = 0
    unknown: int = 0  # a piece outside the vocabulary (only for corpora that did not teach it)


def encode_train(
    split: Split, tokenizer: Tokenizer, max_len: int, max_ratio: float, drop_unknown: bool = False
) -> tuple[EncodedSplit, Split, FilterCounts]:
    """Encode the training pairs, filtering empty sides, overlong and badly proportioned pairs
    (and, with ``drop_unknown``, pairs holding an unknown piece: a corpus that did not teach the
    vocabulary, e.g. a lexicon of rare words, would otherwise teach the model to map <unk> to them).

    Returns the encoded pairs, their text (same order) and what was filtered.
    """
    counts = FilterCounts()
    src_ids, tgt_ids, kept = [], [], Split([], [])
    for s, t in zip(split.src, split.tgt, strict=True):
        if not s or not t:
            counts.empty += 1
            continue
        x, y = tokenizer.encode_src(s), tokenizer.encode_tgt(t)
        if drop_unknown and (UNK in x or UNK in y):
            counts.unknown += 1
        elif len(x) > max_len or len(y) + 1 > max_len:
            counts.too_long += 1
        elif max(len(x), len(y) + 1) > max_ratio * min(len(x), len(y) + 1):
            counts.ratio += 1
        else:
            src_ids.append(x)
            tgt_ids.append(y)
            kept.src.append(s)
            kept.tgt.append(t)
    return EncodedSplit.from_lists(src_ids, tgt_ids), kept, counts


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


def encode_eval(split: Split, tokenizer: Tokenizer) -> EncodedSplit:
    """Encode a dev/test split unfiltered (every sentence gets scored)."""
    return EncodedSplit.from_lists(
        [tokenizer.encode_src(s) for s in split.src], [tokenizer.encode_tgt(t) for t in split.tgt]
    )


@dataclass
class PreparedData:
    """Everything training needs from the data side."""

    tokenizer: Tokenizer
    train: EncodedSplit
    train_text: Split  # the text of ``train``, pair for pair
    dev: EncodedSplit
    dev_text: Split
    test_text: Split
    report: dict
    corpus_sizes: list[int]  # training pairs of each corpus, in storage order (config order)


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


def _build(cfg: DataConfig, directory: Path, tokenizer: Tokenizer | None) -> None:
    """Run the pipeline and write its results into ``directory`` (training a tokenizer unless one is given)."""
    start = time.perf_counter()
    splits = make_splits(cfg)
    if len(splits.train) == 0:
        raise UserError("data: no training pairs left after the dev/test split; lower data.dev_size/test_size")
    teaching = [part for part, c in zip(splits.train_parts(), cfg.corpus_list(), strict=True) if c.vocab]
    tokenizer = tokenizer or Tokenizer.train(
        [s for part in teaching for s in part.src],
        [t for part in teaching for t in part.tgt],
        cfg.vocab_size,
        cfg.joint_vocab,
        cfg.spm_model_type,
        cfg.character_coverage,
    )
    tokenizer.save(directory)
    encoded, train_text, counts = [], Split([], []), FilterCounts()
    for corpus, part, setting in zip(splits.corpora, splits.train_parts(), cfg.corpus_list(), strict=True):
        part_encoded, part_text, part_counts = encode_train(
            part, tokenizer, cfg.max_len, cfg.max_ratio, drop_unknown=not setting.vocab
        )
        corpus.train = len(part_encoded)
        encoded.append(part_encoded)
        train_text.src += part_text.src
        train_text.tgt += part_text.tgt
        corpus.filtered = len(part) - len(part_encoded)
        for reason in ("empty", "too_long", "ratio", "unknown"):
            setattr(counts, reason, getattr(counts, reason) + getattr(part_counts, reason))
    train = EncodedSplit.concat(encoded)
    for index, part in enumerate(encoded):
        if len(part) == 0:
            where = corpus_key(cfg, index).rstrip(".")
            raise UserError(f"{where}: every training pair was filtered out; check data.max_len and data.max_ratio")
    dev = encode_eval(splits.dev, tokenizer)
    sizes = [c.train for c in splits.corpora]
    torch.save({"train": train.state(), "dev": dev.state(), "corpus_sizes": sizes}, directory / "encoded.pt")
    for name, split in (("train", train_text), ("dev", splits.dev), ("test", splits.test)):
        _write_lines(directory / f"{name}.src", split.src)
        _write_lines(directory / f"{name}.tgt", split.tgt)
    novelty = closest_similarity(splits.test.src, train_text.src)
    _write_lines(directory / "test.novelty", [f"{x:.4f}" for x in novelty])
    if cfg.src_script != "keep":
        other = OTHER_SCRIPT[cfg.src_script]
        _write_lines(directory / f"test.{other}.src", [converter(other)(x) for x in splits.test.src])
    report = {
        "pairs_read": splits.read,
        "duplicates_removed": splits.duplicates,
        "overlap_removed": splits.overlap,
        "filtered_empty": counts.empty,
        "filtered_too_long": counts.too_long,
        "filtered_ratio": counts.ratio,
        "filtered_unknown": counts.unknown,
        "train": len(train),
        "dev": len(splits.dev),
        "test": len(splits.test),
        "corpora": [asdict(c) for c in splits.corpora],
        "split_similarity": cfg.split_similarity,
        "test_with_similar_train_source": round(sum(x >= 0.8 for x in novelty) / max(len(novelty), 1), 4),
        "src_vocab": tokenizer.src_vocab_size,
        "tgt_vocab": tokenizer.tgt_vocab_size,
        "build_seconds": round(time.perf_counter() - start, 2),
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
    encoded = torch.load(directory / "encoded.pt", weights_only=True)
    report = json.loads((directory / "report.json").read_text())
    report.update(cache=str(directory), cache_hit=cached, load_seconds=round(time.perf_counter() - start, 2))
    tokenizer = Tokenizer.load(directory)
    if run_dir is not None:
        _install_into_run(directory, Path(run_dir))
    return PreparedData(
        tokenizer,
        EncodedSplit(**encoded["train"]),
        _read_split(directory, "train"),
        EncodedSplit(**encoded["dev"]),
        _read_split(directory, "dev"),
        _read_split(directory, "test"),
        report,
        [int(n) for n in encoded["corpus_sizes"]],
    )


def _complete(directory: Path) -> bool:
    """Whether a cache entry holds every file ``_build`` writes (report.json, written last, among them)."""
    names = ["report.json", "encoded.pt"] + [
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
