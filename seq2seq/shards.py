"""Encoded sentences stored flat on disk and memory-mapped back: how a corpus larger than memory trains.

An ``EncodedSplit`` is four flat tensors (the ids of every sentence one after another, and the
offsets where each sentence starts, per side). On disk each is a raw little file of machine
integers (``NAME.src.ids`` int32, ``NAME.src.offsets`` int64, the same for ``tgt``), appended to
chunk by chunk while a corpus is encoded (``ShardWriter``, no list of the whole split) and mapped
into memory by ``load_split``: the operating system reads the pages a batch touches and may drop
them again, so a training process does not hold the token data, whatever the corpus size. Only the
per-sentence lengths the sampler sorts by live in its memory, read from the offsets files rather than
through the mapping (whose pages would then count as the process's own) and stored in 2 bytes each.

The mapping is private (``shared=False``): nothing writes to it, and the cache entry stays as built.
"""

from array import array
from itertools import accumulate, chain
from pathlib import Path

import torch
from torch import Tensor

# (field of EncodedSplit, file suffix, array typecode, torch dtype)
_FILES = (
    ("src_tokens", "src.ids", "i", torch.int32),
    ("src_offsets", "src.offsets", "q", torch.int64),
    ("tgt_tokens", "tgt.ids", "i", torch.int32),
    ("tgt_offsets", "tgt.offsets", "q", torch.int64),
)


def shard_files(name: str) -> list[str]:
    """The file names of split ``name`` (what a complete cache entry holds)."""
    return [f"{name}.{suffix}" for _, suffix, _, _ in _FILES]


class ShardWriter:
    """Appends id sequences to the files of one split as they are encoded; ``close`` when done."""

    def __init__(self, directory: Path, name: str) -> None:
        self._handles = {field: (directory / f"{name}.{suffix}").open("wb") for field, suffix, _, _ in _FILES}
        self._ends = {"src": 0, "tgt": 0}
        self.count = 0
        for side in self._ends:
            array("q", [0]).tofile(self._handles[f"{side}_offsets"])

    def add(self, src: list[list[int]], tgt: list[list[int]]) -> None:
        """Append the pairs ``zip(src, tgt)``."""
        for side, seqs in (("src", src), ("tgt", tgt)):
            array("i", chain.from_iterable(seqs)).tofile(self._handles[f"{side}_tokens"])
            ends = array("q", accumulate((len(s) for s in seqs), initial=self._ends[side]))
            ends[1:].tofile(self._handles[f"{side}_offsets"])
            self._ends[side] = ends[-1]
        self.count += len(src)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()


def write_split(directory: Path, name: str, src: list[list[int]], tgt: list[list[int]]) -> None:
    """Write the pairs ``zip(src, tgt)`` as split ``name`` in one go."""
    writer = ShardWriter(directory, name)
    writer.add(src, tgt)
    writer.close()


def map_file(path: Path, dtype: torch.dtype) -> Tensor:
    """A raw file of ``dtype`` integers as a 1-D tensor backed by the file (read-only use)."""
    count = path.stat().st_size // dtype.itemsize
    if count == 0:
        return torch.empty(0, dtype=dtype)
    return torch.from_file(str(path), shared=False, size=count, dtype=dtype)


def load_tensors(directory: Path, name: str) -> dict[str, Tensor]:
    """The four tensors of split ``name``, memory-mapped, keyed by ``EncodedSplit`` field."""
    return {field: map_file(directory / f"{name}.{suffix}", dtype) for field, suffix, _, dtype in _FILES}


def read_lengths(directory: Path, name: str, side: str) -> Tensor:
    """(N,) sentence lengths of one side of split ``name``, int16 (int32 if one is longer), from its offsets file."""
    parts, last = [], torch.zeros(0, dtype=torch.int64)
    with (directory / f"{name}.{side}.offsets").open("rb") as handle:
        while block := handle.read(8 << 20):  # whole int64s
            offsets = torch.cat([last, torch.frombuffer(bytearray(block), dtype=torch.int64)])
            parts.append(offsets.diff().to(torch.int32))
            last = offsets[-1:]
    lengths = torch.cat(parts)
    return lengths.to(torch.int16) if len(lengths) == 0 or int(lengths.max()) < 2**15 else lengths
