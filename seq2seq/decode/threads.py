"""How many CPU threads a decode uses: the default of translate, evaluate, score and serve, both engines.

Two numbers decide it (``ThreadPlan``): ``intra``, the threads that share one batch's matrix
products (torch's ``set_num_threads``, CTranslate2's ``intra_threads``), and ``workers``, the
batches decoded at once (CTranslate2's ``inter_threads``; our decoder's search threads,
``seq2seq.decode.batched.search_ids``). The rule, the fastest for both engines in float32, bf16 and
int8, greedy and beam 5, a corpus and one sentence at a time (docs/design.md#decoding-threads):
**one intra-op thread per worker, one worker per core**. A decode's matrices are too small for
several threads to share one without waiting on each other at every operator; separate batches
on separate cores never wait. A single sentence is one batch, so it runs on one core either way.

torch's inter-op pool is left alone: decoding never forks work onto it.

An explicit count (``--threads N``) means N intra-op threads and one worker, as torch and
CTranslate2 read such a number; ``OMP_NUM_THREADS`` in the environment counts as that explicit
count (both libraries read it themselves when nothing overrides it).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass

from seq2seq.device import available_cpus
from seq2seq.errors import UserError


@dataclass(frozen=True)
class ThreadPlan:
    """The threads of one translator: ``intra`` per batch, ``workers`` batches at once."""

    intra: int
    workers: int = 1


def default_plan(cores: int) -> ThreadPlan:
    """The measured default on ``cores`` CPU cores: one thread per worker, one worker per core."""
    return ThreadPlan(intra=1, workers=max(cores, 1))


def decode_threads(threads: int = 0, cores: int | None = None, environ: Mapping[str, str] = os.environ) -> ThreadPlan:
    """``threads`` > 0: that many intra-op threads, one worker; else ``OMP_NUM_THREADS`` when set, else
    ``default_plan`` for the ``cores`` this process may use (``available_cpus`` when not given)."""
    if threads < 0:
        raise UserError(f"--threads {threads}: give a number of threads >= 1, or 0 for the default")
    if threads == 0:
        threads = _omp_threads(environ)
    if threads > 0:
        return ThreadPlan(intra=threads)
    return default_plan(available_cpus() if cores is None else cores)


def _omp_threads(environ: Mapping[str, str]) -> int:
    """``OMP_NUM_THREADS`` as a count (its first entry, as OpenMP reads a list), 0 when unset or unreadable."""
    text = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(text) if text.isdigit() else 0
