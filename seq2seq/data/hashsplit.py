"""The train/dev/test split of corpora too large to group in memory: decided by hash, streamed.

The in-memory split (``seq2seq.data.corpus.make_splits``) links every pair of the corpus to its
near-duplicates before it deals groups to dev and test, which needs every sentence, its grams and
its signature at once: gigabytes at 10^7 pairs. Dev and test are a few thousand pairs, so here
only they are looked at as a whole, and everything else streams past them:

1. Every corpus is read in chunks, normalized on all cores and spooled to disk, one line per pair,
   while a 64-bit BLAKE2b hash of each pair, keyed by ``data.split_seed``, is kept in memory
   (8 bytes a pair). Exact duplicates are repeats of a hash; the first occurrence stays. (Two
   distinct pairs of 10^7 share a hash with probability below 10^-5.)
2. The held-out candidates are the ``HELD_OUT_FACTOR`` x (dev + test) unique pairs of the eval
   corpus with the smallest hashes: a seeded random sample. ``group_split`` deals them, grouped by
   shared and near-duplicate sentences among themselves, to test and then dev; the candidates it
   leaves over go back to training.
3. Every training pair of every corpus streams past an index of the held-out pairs alone, on all
   cores: a pair sharing its source or target with a held-out pair, or whose source or target is
   a near-duplicate of a held-out one (``seq2seq.data.neardup.NearDuplicateIndex``, exact), is dropped
   and counted as overlap.

So no dev or test sentence has a twin or a near-twin in training, and dev and test share none,
as with the in-memory split. Where the in-memory split moves a whole group (say a held-out pair
and its training near-duplicates) to one side, this one drops the group's training members: the
near-twins of a few thousand held-out pairs, a number that does not grow with the corpus. Memory
holds the hashes, the held-out pairs and a few chunks per process.
"""

import hashlib
import multiprocessing
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seq2seq.config import DataConfig
from seq2seq.data.corpus import (
    READ_CHUNK,
    CorpusCounts,
    Split,
    SpooledSplits,
    given_split,
    group_split,
    normalizer,
    raw_chunks,
)
from seq2seq.data.neardup import NearDuplicateIndex
from seq2seq.device import available_cpus

HELD_OUT_FACTOR = 2  # candidates per held-out pair wanted: room for groups that do not fit


def pair_hash(key: bytes, src: str, tgt: str) -> int:
    """A pair's 64-bit hash (signed, to sit in an int64 tensor), keyed by ``key``."""
    digest = hashlib.blake2b(f"{src}\t{tgt}".encode(), digest_size=8, key=key).digest()
    return int.from_bytes(digest, "little", signed=True)


def _normalize_chunk(job: tuple[list[str], list[str], str, str, bytes]) -> tuple[str, array]:
    """Raw pairs -> (their normalized ``source<TAB>target`` lines, their hashes)."""
    raw_src, raw_tgt, src_script, tgt_script, key = job
    src_norm, tgt_norm = normalizer(src_script, "data.src_script"), normalizer(tgt_script, "data.tgt_script")
    lines, hashes = [], array("q")
    for s, t in zip(raw_src, raw_tgt, strict=True):
        s, t = src_norm(s), tgt_norm(t)
        lines.append(f"{s}\t{t}\n")
        hashes.append(pair_hash(key, s, t))
    return "".join(lines), hashes


@dataclass
class HeldOutFilter:
    """What a training pair must not share with dev/test: a sentence, or (with indexes) a near-duplicate."""

    src: set[str]
    tgt: set[str]
    src_index: NearDuplicateIndex | None = None
    tgt_index: NearDuplicateIndex | None = None

    @classmethod
    def of(cls, held: list[Split], similar: float) -> "HeldOutFilter":
        src = [s for split in held for s in split.src]
        tgt = [t for split in held for t in split.tgt]
        if similar >= 1:
            return cls(set(src), set(tgt))
        return cls(set(src), set(tgt), NearDuplicateIndex(src, similar), NearDuplicateIndex(tgt, similar))

    def keeps(self, src: str, tgt: str) -> bool:
        if src in self.src or tgt in self.tgt:
            return False
        if self.src_index is None or self.tgt_index is None:
            return True
        return not (self.src_index.matches(src) or self.tgt_index.matches(tgt))


_FILTER: HeldOutFilter | None = None  # each worker's copy (set by _use_filter)


def _use_filter(held_out: HeldOutFilter) -> None:
    global _FILTER
    _FILTER = held_out


def _filter_chunk(lines: list[str]) -> tuple[str, int]:
    """Spooled lines -> (the lines of pairs the filter keeps, how many it dropped)."""
    kept = [line for line in lines if _FILTER.keeps(*line.rstrip("\n").split("\t"))]
    return "".join(kept), len(lines) - len(kept)


def pool_context() -> multiprocessing.context.BaseContext:
    """How the worker processes start: forked where that is safe, so that they inherit the loaded modules
    (and the filter) at no cost (they run no torch code); spawned on macOS, where a forked child of a process
    that loaded the system frameworks may crash, and wherever fork is missing (Windows): each worker then
    imports this module afresh and receives the filter pickled."""
    fork = "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin"
    return multiprocessing.get_context("fork" if fork else "spawn")


def _in_parallel(
    function: Callable[[Any], Any],
    jobs: Iterable[Any],
    initializer: Callable[..., None] | None = None,
    args: tuple[Any, ...] = (),
) -> Iterator[Any]:
    """``function`` over ``jobs``, results in order: on one process per core when there are several, with at
    most two jobs per process in flight, so that a corpus is never read faster than it is processed."""
    workers = available_cpus()
    if workers < 2:
        if initializer is not None:
            initializer(*args)
        yield from map(function, jobs)
        return
    with pool_context().Pool(workers, initializer, args) as pool:
        pending: deque = deque()
        for job in jobs:
            pending.append(pool.apply_async(function, (job,)))
            if len(pending) > 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _spool(cfg: DataConfig, index: int, path: Path, key: bytes) -> Tensor:
    """Corpus ``index`` normalized into ``path``, one line per pair; returns the pair hashes (N,) int64."""
    for script, setting in ((cfg.src_script, "data.src_script"), (cfg.tgt_script, "data.tgt_script")):
        normalizer(script, setting)  # a missing OpenCC is reported here, not from a worker
    hashes = array("q")
    jobs = ((s, t, cfg.src_script, cfg.tgt_script, key) for s, t in raw_chunks(cfg, index))
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for lines, chunk_hashes in _in_parallel(_normalize_chunk, jobs):
            handle.write(lines)
            hashes.extend(chunk_hashes)
    return torch.frombuffer(hashes, dtype=torch.int64) if hashes else torch.empty(0, dtype=torch.int64)


def first_occurrences(hashes: Tensor) -> Tensor:
    """(N,) bool: whether each hash is the first of its value (exact duplicates are the rest)."""
    order = torch.argsort(hashes, stable=True)
    ranked = hashes[order]
    first = torch.ones(len(hashes), dtype=torch.bool)
    first[1:] = ranked[1:] != ranked[:-1]
    keep = torch.zeros(len(hashes), dtype=torch.bool)
    keep[order[first]] = True
    return keep


def _lines_at(path: Path, wanted: list[int]) -> Split:
    """The spooled pairs at line numbers ``wanted`` (ascending)."""
    chosen, position = Split([], []), 0
    with path.open(encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle):
            if position < len(wanted) and number == wanted[position]:
                s, t = line.rstrip("\n").split("\t")
                chosen.src.append(s)
                chosen.tgt.append(t)
                position += 1
    return chosen


def _training_lines(path: Path, keep: Tensor, held: set[int]) -> Iterator[list[str]]:
    """Chunks of the spooled lines that may train: first occurrences, not held out."""
    with path.open(encoding="utf-8", newline="\n") as handle:
        start = 0
        while lines := list(islice(handle, READ_CHUNK)):
            flags = keep[start : start + len(lines)].tolist()
            numbered = enumerate(zip(lines, flags, strict=True), start)
            yield [line for number, (line, flag) in numbered if flag and number not in held]
            start += len(lines)


def split_by_hash(cfg: DataConfig, directory: Path) -> SpooledSplits:
    """Split the configured corpora as the module docstring says, spooling into ``directory``."""
    key = str(cfg.split_seed).encode()
    reference = cfg.eval_corpus()
    spools, keeps, counts = [], [], []
    for index, corpus in enumerate(cfg.corpus_list()):
        spools.append(directory / f"corpus-{index}.pairs")
        hashes = _spool(cfg, index, spools[-1], key)
        keeps.append(first_occurrences(hashes))
        counts.append(CorpusCounts(corpus.name, corpus.weight, len(hashes), len(hashes) - int(keeps[-1].sum())))
        if index == reference:
            reference_hashes = hashes
    held: set[int] = set()  # line numbers of the reference corpus that went to dev/test
    dev, test = Split([], []), Split([], [])
    if cfg.dev_src is None or cfg.test_src is None:
        dev_size = 0 if cfg.dev_src else cfg.dev_size
        test_size = 0 if cfg.test_src else cfg.test_size
        unique = keeps[reference].nonzero().squeeze(1)
        wanted = HELD_OUT_FACTOR * (dev_size + test_size)
        candidates = unique[torch.argsort(reference_hashes[unique])[:wanted]].sort().values.tolist()
        pairs = _lines_at(spools[reference], candidates)
        _, dev_i, test_i = group_split(pairs.src, pairs.tgt, dev_size, test_size, cfg.split_seed, cfg.split_similarity)
        dev = Split([pairs.src[i] for i in dev_i], [pairs.tgt[i] for i in dev_i])
        test = Split([pairs.src[i] for i in test_i], [pairs.tgt[i] for i in test_i])
        held = {candidates[i] for i in dev_i + test_i}
    dev, test = given_split(cfg, "dev", dev), given_split(cfg, "test", test)
    held_out = HeldOutFilter.of([dev, test], cfg.split_similarity)
    files = []
    for index, (spool, keep, count) in enumerate(zip(spools, keeps, counts, strict=True)):
        files.append(directory / f"train-{index}.pairs")
        count.train = 0
        with files[-1].open("w", encoding="utf-8", newline="\n") as handle:
            lines = _training_lines(spool, keep, held if index == reference else set())
            for text, dropped in _in_parallel(_filter_chunk, lines, _use_filter, (held_out,)):
                handle.write(text)
                count.train += text.count("\n")
                count.overlap += dropped
        spool.unlink()
    return SpooledSplits(dev, test, files, counts)
