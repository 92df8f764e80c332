"""seq2seq.decode.workers: batches mapped in order on forked workers where a fork is safe, else threads."""

import os
import sys
import threading

import pytest
import torch

import seq2seq.decode.workers
from seq2seq.decode.workers import can_fork, map_batches
from seq2seq.errors import UserError


def test_batches_run_in_order_on_forked_workers_or_threads(monkeypatch):
    items = list(range(7))
    cpu = torch.device("cpu")
    assert map_batches(lambda _: os.getpid(), items[:1], 2, cpu) == [os.getpid()]  # one item: no worker
    forked = can_fork(cpu)
    pids = map_batches(lambda _: os.getpid(), items, 2, cpu)
    assert (os.getpid() not in pids) == forked  # forked workers are other processes
    assert map_batches(lambda i: i * i, items, 3, cpu) == [i * i for i in items]
    monkeypatch.setattr(seq2seq.decode.workers, "can_fork", lambda device: False)
    assert map_batches(lambda _: os.getpid(), items, 2, cpu) == [os.getpid()] * len(items)  # threads


def test_a_fork_needs_linux_a_cpu_and_no_other_thread():
    cpu = torch.device("cpu")
    assert not can_fork(torch.device("cuda"))
    if sys.platform != "linux":
        assert not can_fork(cpu)
        return
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not can_fork(cpu)  # a server's threads: the batches stay on threads
    finally:
        release.set()
        other.join()


def test_an_error_in_a_worker_reaches_the_caller():
    def run(i: int) -> int:
        if i == 3:
            raise UserError("batch 3 failed")
        return i

    with pytest.raises(UserError, match="batch 3 failed"):
        map_batches(run, list(range(5)), 2, torch.device("cpu"))
