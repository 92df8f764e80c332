"""Encoded sentences stored flat on disk and read back a batch at a time: how a corpus larger than memory trains.

An ``EncodedSplit`` is four flat tensors (the ids of every sentence one after another, and the
offsets where each sentence starts, per side). On disk each is a raw little file of machine
integers (``NAME.src.ids`` int32, ``NAME.src.offsets`` int64, the same for ``tgt``), appended to
chunk by chunk while a corpus is encoded (``ShardWriter``, no list of the whole split).

Training reads a batch's sentences with positioned reads (``ShardReader``: two per sentence and
side, a small cost beside a training step), which copy them out of the page cache and leave
nothing behind, so a training process does not hold the token data, whatever the corpus size.
Reading them through a memory mapping would: the pages a process has read stay in its resident
set, and on every page fault Linux maps the neighbouring cached pages too ("fault-around"), so a
long run's resident size grows towards the size of the token files; giving the pages back after
each batch (``madvise``) costs more than the reads. Only the per-sentence lengths the sampler
sorts by live in memory, read from the offsets files and stored in 2 bytes each.
(Why: docs/design.md#shard-reads.)

``load_tensors`` maps the four files whole (private, read-only use: the cache entry stays as
built), for code that looks at a split at once rather than a batch at a time.
"""

import os
import struct
import sys
import weakref
from array import array
from itertools import accumulate, chain
from pathlib import Path
from typing import BinaryIO

import torch
from torch import Tensor

_pread = getattr(os, "pread", None)  # POSIX only
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
    """(N,) sentence lengths of one side of split ``name``, int16 (int32 if one is longer), from its offsets file.

    Read through one small reused buffer into one preallocated tensor: a new tensor per block,
    joined at the end, leaves a fragmented heap behind, several times the lengths' own size.
    """
    path = directory / f"{name}.{side}.offsets"
    lengths = torch.empty(max(path.stat().st_size // 8 - 1, 0), dtype=torch.int32)
    buffer = bytearray(1 << 20)
    values = torch.frombuffer(buffer, dtype=torch.int64)
    with path.open("rb") as handle:
        done, previous = 0, int.from_bytes(handle.read(8), sys.byteorder, signed=True)
        while read := handle.readinto(buffer):  # whole int64s: the file and the buffer are multiples of 8
            ends = values[: read // 8]
            lengths[done] = int(ends[0]) - previous
            lengths[done + 1 : done + len(ends)].copy_(ends.diff())
            done, previous = done + len(ends), int(ends[-1])
    return lengths.to(torch.int16) if len(lengths) == 0 or int(lengths.max()) < 2**15 else lengths


def read_at(handle: BinaryIO, size: int, offset: int) -> bytes:
    """``size`` bytes of the unbuffered file ``handle`` from ``offset``: one ``os.pread`` where the system
    has it (POSIX); elsewhere (Windows) a seek and a read, the same bytes, since a reader's handles are its own."""
    if _pread is not None:
        return _pread(handle.fileno(), size, offset)
    handle.seek(offset)
    return handle.read(size)


class ShardReader:
    """The sentences of split ``name`` read from its files on demand, by positioned reads (``read_at``)."""

    _SPAN = struct.Struct("=qq")  # (start, end) of a sentence: two consecutive offsets

    def __init__(self, directory: Path, name: str) -> None:
        # Unbuffered (a batch reads a few bytes here and there) and held for the reader's life, so a run goes on
        # reading a cache deleted under it; closed when the reader goes, not left open to the garbage collector,
        # whose ResourceWarnings then surface in whatever code runs next.
        self._files = {suffix: (directory / f"{name}.{suffix}").open("rb", buffering=0) for _, suffix, _, _ in _FILES}
        for handle in self._files.values():
            weakref.finalize(self, handle.close)

    def rows(self, side: str, indices: list[int]) -> tuple[Tensor, Tensor]:
        """Sentences ``indices`` of ``side`` ("src" | "tgt") -> (their ids one after another (int32), lengths (B,))."""
        offsets, ids = self._files[f"{side}.offsets"], self._files[f"{side}.ids"]
        chunks, lengths = [], []
        for i in indices:
            start, end = self._SPAN.unpack(read_at(offsets, 16, 8 * i))
            chunks.append(read_at(ids, 4 * (end - start), 4 * start))
            lengths.append(end - start)
        read = bytearray(b"".join(chunks))
        flat = torch.frombuffer(read, dtype=torch.int32) if read else torch.empty(0, dtype=torch.int32)
        return flat, torch.tensor(lengths, dtype=torch.int64)
