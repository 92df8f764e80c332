"""seq2seq.filelock: an exclusive lock per file, refused to a second holder, free again once released;
on Windows (``msvcrt``, faked here) the lock covers byte ``LOCKED_BYTE``, past anything a lock file holds."""

import errno
import os
import types

import pytest

import seq2seq.filelock as filelock
from seq2seq.filelock import LOCKED_BYTE, locked, open_lock_file, try_lock, unlock


def test_a_second_handle_is_refused_until_the_first_unlocks(tmp_path):
    first, second = open_lock_file(tmp_path / "x.lock"), open_lock_file(tmp_path / "x.lock")
    try:
        assert try_lock(first)
        assert not try_lock(second)
        unlock(first)
        assert try_lock(second)
    finally:
        os.close(first)
        os.close(second)


def test_locked_holds_the_lock_for_the_block(tmp_path):
    other = open_lock_file(tmp_path / "x.lock")
    try:
        with locked(tmp_path / "x.lock"):
            assert not try_lock(other)
        assert try_lock(other)
    finally:
        os.close(other)


class FakeMsvcrt(types.ModuleType):
    """``msvcrt`` as far as locking goes: records (file position, mode, bytes) of each call and refuses the
    first ``refusals`` locks with ``error``."""

    LK_UNLCK, LK_LOCK, LK_NBLCK = 0, 1, 2

    def __init__(self, refusals: int = 0, error: int = errno.EACCES) -> None:
        super().__init__("msvcrt")
        self.calls: list[tuple[int, int, int]] = []
        self.refusals, self.error = refusals, error

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        self.calls.append((os.lseek(fd, 0, os.SEEK_CUR), mode, nbytes))
        if mode != self.LK_UNLCK and self.refusals:
            self.refusals -= 1
            raise OSError(self.error, "locked")


@pytest.fixture
def windows(monkeypatch):
    """The module as on Windows: no fcntl, the given fake msvcrt."""

    def use(fake: FakeMsvcrt) -> FakeMsvcrt:
        monkeypatch.setattr(filelock, "fcntl", None)
        monkeypatch.setattr(filelock, "msvcrt", fake)
        return fake

    return use


def test_windows_locks_one_byte_past_the_content_and_reports_a_held_lock(tmp_path, windows):
    fake = windows(FakeMsvcrt(refusals=1))
    fd = open_lock_file(tmp_path / "x.lock")
    try:
        os.write(fd, b"1234\n")  # a pid, which a refused process must still read
        assert not try_lock(fd)
        assert try_lock(fd)
        unlock(fd)
    finally:
        os.close(fd)
    assert fake.calls == [(LOCKED_BYTE, fake.LK_NBLCK, 1)] * 2 + [(LOCKED_BYTE, fake.LK_UNLCK, 1)]


def test_windows_waits_through_lk_lock_timeouts(tmp_path, windows):
    fake = windows(FakeMsvcrt(refusals=2, error=errno.EDEADLOCK))  # LK_LOCK gives up after ~10 s each time
    with locked(tmp_path / "x.lock"):
        pass
    assert [mode for _, mode, _ in fake.calls] == [fake.LK_LOCK] * 3 + [fake.LK_UNLCK]


def test_windows_other_errors_are_not_taken_for_a_held_lock(tmp_path, windows):
    windows(FakeMsvcrt(refusals=1, error=errno.EBADF))
    fd = open_lock_file(tmp_path / "x.lock")
    try:
        with pytest.raises(OSError):
            try_lock(fd)
    finally:
        os.close(fd)
