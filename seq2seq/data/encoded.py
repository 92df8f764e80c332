"""Encoded pairs: the flat id tensors training batches from, and the encoding that fills them.

``EncodedSplit`` stores a split's id sequences flat (tokens plus offsets), in memory or read a
batch at a time from the token files (``seq2seq.data.shards``); ``encode_train`` encodes and
filters training pairs; ``Resegmented`` draws a new subword segmentation every epoch.
"""

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from seq2seq.data.batching import Batch, gather_rows, make_batch
from seq2seq.data.corpus import Split
from seq2seq.data.shards import ShardReader, load_tensors, read_lengths
from seq2seq.data.tokenizer import Tokenizer, seed_sampling
from seq2seq.special import BOS, UNK


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
        """Split ``name`` as ``seq2seq.data.shards`` stored it: lengths in memory, batches read from the files."""
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

    def batch(self, indices: Tensor, start: int = BOS) -> Batch:
        """Padded batch of the given sentence indices, the decoder input starting with ``start``."""
        return make_batch(self.rows("src", indices), self.rows("tgt", indices), start)

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
