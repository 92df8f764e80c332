"""One trainer per run directory.

Two ``seq2seq train`` processes writing the same ``last.pt`` and ``metrics.jsonl`` would
interleave two histories into files that belong to neither. ``RunLock`` holds an exclusive
lock on ``RUN_DIR/.lock`` (``seq2seq.filelock``: flock, or msvcrt on Windows) for as long as
training runs; the file holds the owner's pid so that a second process can say whom it is
waiting for.

The operating system drops a process's lock when the process dies, however it dies, so a lock left
by a killed trainer (``kill -9``, an out-of-memory kill, a lost node) is free without any
guessing from pids, and a pid reused by an unrelated process cannot keep it. A clean exit
empties the file; a non-empty file found free therefore names an owner that died holding
it, and is reported as stale. Taking the lock also deletes the temporary files of writes
that owner left unfinished (``seq2seq.atomic``): no other process can be writing there now.
"""

import os
from pathlib import Path
from types import TracebackType

from seq2seq.atomic import remove_partial_writes
from seq2seq.errors import UserError
from seq2seq.filelock import open_lock_file, try_lock, unlock

LOCK_NAME = ".lock"


class RunLock:
    """``with RunLock(run_dir) as lock:`` -- exclusive use of ``run_dir``; ``lock.stale_pid`` names a
    previous owner that died holding the lock (None if there was none)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self.stale_pid: int | None = None
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = open_lock_file(self.path)
        except OSError as err:
            raise UserError(
                f"cannot use run directory {self.run_dir} ({err.strerror or err}); "
                "make it writable or choose another train.run_dir"
            ) from None
        if not try_lock(fd):
            owner = _read_pid(fd)
            os.close(fd)
            raise UserError(
                f"{self.run_dir} is in use by another training process (pid {owner or 'unknown'}); "
                "wait for it to finish or stop it, or choose another train.run_dir"
            )
        self.stale_pid = _read_pid(fd)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        remove_partial_writes(self.run_dir)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._fd is None:
            return
        # Empty, not deleted: a process that opened the file just before an unlink would lock an
        # orphaned inode while a third one locks a new file, and both would think they own the run.
        os.ftruncate(self._fd, 0)
        unlock(self._fd)
        os.close(self._fd)
        self._fd = None


def _read_pid(fd: int) -> int | None:
    """The pid written in the lock file, if any."""
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 32).decode("ascii", errors="replace").strip()
    return int(text) if text.isdigit() else None
