"""Independent batches decoded at once: in forked processes where that is safe, else on threads.

Worker threads share one interpreter lock, and a decoding step is many small operators with
Python between them, so threads keep waiting for each other's Python, and the more so the
shorter the operators (bf16) and the more workers there are; separate processes never wait
(docs/benchmarks.md measured both). So the batches go to forked processes: a fork shares the
loaded weights copy-on-write, and each worker sends back only its hypotheses.

A fork is used only where it is safe and cheap:
* on Linux: macOS and Windows start a fresh interpreter instead, which would load the model again;
* on a CPU: a CUDA context does not survive a fork;
* from a process running no other Python thread (a batch verb, not a server): a fork copies
  only the thread that forks, and a lock another thread held would stay locked in the child.
Everywhere else the batches run on threads, as before.
"""

import functools
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from typing import TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")

_jobs: dict[int, Callable] = {}  # what a forked worker runs, by job id: a fork inherits this dict


def _run_job(job: int, item: object) -> object:
    return _jobs[job](item)


def can_fork(device: torch.device) -> bool:
    """Whether ``map_batches`` may fork workers for a decode on ``device`` from this process now."""
    return sys.platform == "linux" and device.type == "cpu" and threading.active_count() == 1


def map_batches(
    run: Callable[[Item], Result], items: Sequence[Item], workers: int, device: torch.device
) -> list[Result]:
    """``[run(item) for item in items]``, ``workers`` items at a time, in order."""
    count = min(workers, len(items))
    if count <= 1:
        return [run(item) for item in items]
    if not can_fork(device):
        with ThreadPoolExecutor(count, thread_name_prefix="seq2seq-search") as pool:
            return list(pool.map(run, items))
    job = id(run)
    _jobs[job] = run  # no other thread runs, so no other job can be registered meanwhile
    try:
        # A fork-context pool forks all its workers at the first submit, before its own
        # management thread starts.
        with ProcessPoolExecutor(count, mp_context=get_context("fork")) as pool:
            return list(pool.map(functools.partial(_run_job, job), items))
    finally:
        del _jobs[job]
