"""How many CPU threads a decode uses: the default of translate, evaluate, score and serve, per engine.

Two numbers decide it (``ThreadPlan``): ``intra``, the threads that share one batch's matrix
products (torch's ``set_num_threads``, CTranslate2's ``intra_threads``), and ``workers``, the
batches decoded at once (CTranslate2's ``inter_threads``; our decoder decodes one batch at a time,
so it has one worker). The rule, measured on the recipe's model (docs/benchmarks.md, "Threads"):

* CTranslate2: one thread per worker and one worker per core, for a batch decode and for a
  request alike. A decode's matrices are too small for several threads to share one without
  waiting on each other; separate batches on separate cores do not wait.
* our decoder: one intra-op thread, whatever the precision, for the same reason; the cores
  beyond the first stay free for the tokenizer, the server's event loop or another process.

torch's inter-op pool is left alone: our decoding never forks work onto it.

An explicit count (``--threads N``) means N intra-op threads and one worker, as torch and
CTranslate2 read such a number; ``OMP_NUM_THREADS`` in the environment counts as that explicit
count (both libraries read it themselves when nothing overrides it).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass

from seq2seq.device import available_cpus
from seq2seq.errors import UserError

WORKLOADS = ("batch", "request")  # many sentences at once (translate, evaluate, score) / a server's requests


@dataclass(frozen=True)
class ThreadPlan:
    """The threads of one translator: ``intra`` per batch, ``workers`` batches at once."""

    intra: int
    workers: int = 1


def default_plan(engine: str, cores: int, workload: str = "batch") -> ThreadPlan:
    """The measured default for ``engine`` (torch or ctranslate2) on ``cores`` CPU cores (see the module doc)."""
    if workload not in WORKLOADS:
        raise ValueError(f"workload {workload!r}: choose one of {', '.join(WORKLOADS)}")
    cores = max(cores, 1)
    if engine == "ctranslate2":
        return ThreadPlan(intra=1, workers=cores)
    return ThreadPlan(intra=1)


def decode_threads(
    engine: str,
    workload: str = "batch",
    threads: int = 0,
    cores: int | None = None,
    environ: Mapping[str, str] = os.environ,
) -> ThreadPlan:
    """``threads`` > 0: that many intra-op threads, one worker; else ``OMP_NUM_THREADS`` when set, else
    ``default_plan`` for the ``cores`` this process may use (``available_cpus`` when not given)."""
    if threads < 0:
        raise UserError(f"--threads {threads}: give a number of threads >= 1, or 0 for the default")
    if threads == 0:
        threads = _omp_threads(environ)
    if threads > 0:
        return ThreadPlan(intra=threads)
    return default_plan(engine, available_cpus() if cores is None else cores, workload)


def _omp_threads(environ: Mapping[str, str]) -> int:
    """``OMP_NUM_THREADS`` as a count (its first entry, as OpenMP reads a list), 0 when unset or unreadable."""
    text = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(text) if text.isdigit() else 0
