"""Exclusive locks on files that the operating system drops when their holder dies, on POSIX and Windows.

The run lock (``seq2seq.train.runlock``) and the data cache (``seq2seq.data.cache``) both need a lock
that no crash can leave behind, so that nothing has to guess from pids or from a lock file's age.
POSIX has ``flock`` (``fcntl``), Windows ``msvcrt.locking``; each module exists on one family of
systems only, so both are imported where they exist and neither is needed to import this one.

A Windows lock on a byte range also stops other processes reading those bytes, so the lock covers
one byte far past anything a lock file holds (``LOCKED_BYTE``): the run lock's owner pid stays
readable by the process that is refused. That is why this is not the ``filelock`` package: its Windows lock
covers byte 0 and it deletes the lock file on release, which would hide the holder's pid from the refused run.
"""

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from seq2seq.errors import UserError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
try:
    import msvcrt
except ImportError:  # POSIX
    msvcrt = None

LOCKED_BYTE = 1 << 20  # the offset of the byte a Windows lock covers
# What msvcrt.locking raises while another handle holds the byte (LK_NBLCK at once, LK_LOCK after ~10 s).
_HELD = {errno.EACCES, errno.EDEADLOCK}


def open_lock_file(path: Path) -> int:
    """A read-write descriptor of ``path`` (created if missing), binary on Windows too."""
    return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)


def try_lock(fd: int) -> bool:
    """Take the exclusive lock of open file ``fd`` if it is free: True; False if another holder has it."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    return _msvcrt_lock(fd, _require_msvcrt().LK_NBLCK)


def lock(fd: int) -> None:
    """Take the exclusive lock of open file ``fd``, waiting for as long as another holder keeps it."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    # LK_LOCK itself retries once a second for ten seconds before it gives up; a build may take longer.
    while not _msvcrt_lock(fd, _require_msvcrt().LK_LOCK):
        pass


def unlock(fd: int) -> None:
    """Release the lock taken on ``fd`` (closing ``fd`` releases it as well)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    os.lseek(fd, LOCKED_BYTE, os.SEEK_SET)
    _require_msvcrt().locking(fd, msvcrt.LK_UNLCK, 1)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """The exclusive lock of file ``path`` (created if missing) for the block, waiting for it if need be."""
    fd = open_lock_file(path)
    try:
        lock(fd)
        try:
            yield
        finally:
            unlock(fd)
    finally:
        os.close(fd)


def _msvcrt_lock(fd: int, mode: int) -> bool:
    os.lseek(fd, LOCKED_BYTE, os.SEEK_SET)  # msvcrt.locking locks from the file position
    try:
        msvcrt.locking(fd, mode, 1)
    except OSError as err:
        if err.errno in _HELD:
            return False
        raise
    return True


def _require_msvcrt() -> ModuleType:
    if msvcrt is None:
        raise UserError("this system has neither fcntl.flock nor msvcrt.locking; seq2seq cannot lock its files here")
    return msvcrt
