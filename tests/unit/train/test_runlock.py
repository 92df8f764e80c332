"""seq2seq.train.runlock: one trainer per run directory; a lock whose owner died is taken over."""

import os
import signal
import subprocess
import sys

import pytest
from conftest import CLI_ENV, TOY, one_line_error, run_cli, sets

from seq2seq.errors import UserError
from seq2seq.train.runlock import LOCK_NAME, RunLock

HOLD = "import sys, time; from seq2seq.train.runlock import RunLock; RunLock(sys.argv[1]).__enter__(); print('held', flush=True); time.sleep(120)"  # noqa: E501


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of ``tmp_path / 'run'``; killed (SIGKILL) at the end if still alive."""
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True, env=CLI_ENV)
    assert process.stdout.readline().strip() == "held"
    yield run, process
    process.kill()
    process.wait()


def test_a_second_lock_is_refused_naming_the_owner_and_free_again_after_release(tmp_path):
    with RunLock(tmp_path) as first:
        assert first.stale_pid is None
        with pytest.raises(UserError, match=rf"in use by another training process \(pid {os.getpid()}\)"):
            RunLock(tmp_path).__enter__()
    with RunLock(tmp_path) as again:
        assert again.stale_pid is None  # a clean release is not a stale lock
    assert (tmp_path / LOCK_NAME).read_text() == ""


def test_a_lock_held_by_a_killed_process_is_stale_and_taken_over(holder):
    run, process = holder
    with pytest.raises(UserError, match=rf"pid {process.pid}\)"):
        RunLock(run).__enter__()
    partial = run / ".last.pt.k2j4x8q1.tmp"  # what a kill in the middle of a checkpoint write leaves
    partial.write_bytes(b"PK\x03\x04 half")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (run / LOCK_NAME).read_text().strip() == str(process.pid)  # the dead owner's pid is still written
    with RunLock(run) as lock:
        assert lock.stale_pid == process.pid
        assert not partial.exists()  # the new owner clears the dead one's unfinished writes
        assert (run / LOCK_NAME).read_text().strip() == str(os.getpid())


def test_a_second_train_on_the_same_run_directory_is_a_one_line_error(holder, toy_cache):
    run, process = holder
    line = one_line_error(
        run_cli("train", "--config", TOY, *sets(f"train.run_dir={run}", f"data.cache_dir={toy_cache}"))
    )
    assert str(run) in line and f"pid {process.pid}" in line
    assert not (run / "last.pt").exists() and not (run / "metrics.jsonl").exists()
