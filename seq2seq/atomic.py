"""Files that are either the old version or the new one, never half of either.

A write goes to a temporary file beside the target, is fsynced, then renamed over the
target (``os.replace`` is atomic on POSIX file systems), so a crash, a ``kill -9`` or a
full disk at any moment leaves the previous file intact. What such a crash can leave is
the temporary file itself; its name marks it (``.NAME.XXXX.tmp``) and
``remove_partial_writes`` clears it once the run directory is known to be ours (the run
lock is held), since no other writer can be mid-way then.

The rename is an entry in the directory, which the file's fsync does not write: until the
directory is fsynced too, a power cut can undo it (the old file back, or none), which a
``kill -9`` cannot, since the kernel still holds it. So every rename here is followed by an fsync
of its directory, and a directory built elsewhere (the data cache's entries) is installed by
``install_directory``: its files and itself fsynced, renamed, then its parent fsynced.

A failure to write (a full disk, a read-only directory) is a ``UserError`` naming the file.
"""

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

from seq2seq.errors import UserError

_SUFFIX = ".tmp"


class Writable(Protocol):
    """What a writer function is given: a binary file's ``write``."""

    def write(self, data: bytes) -> int: ...


def write_atomically(path: Path, write: Callable[[Writable], None]) -> None:
    """Create or replace ``path`` with what ``write(handle)`` writes, atomically."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_SUFFIX)
    except OSError as err:
        raise UserError(
            f"cannot write {path} ({err.strerror or err}); check the directory's space and permissions"
        ) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            recording = _Recording(handle)
            try:
                write(recording)
            except Exception:
                if recording.error is not None:  # the real cause, which torch.save reports as a RuntimeError
                    raise recording.error from None
                raise
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        what = "the previous version is unchanged" if path.exists() else "nothing was written"
        raise UserError(f"cannot write {path} ({err.strerror or err}); {what}: free space and retry") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _durable(path)


def _durable(path: Path) -> None:
    """fsync the directory holding ``path``, just renamed into it; a failure is a UserError naming it."""
    try:
        fsync_directory(path.parent)
    except OSError as err:
        raise UserError(
            f"cannot make {path} durable ({err.strerror or err}): it is in place, but a power cut may undo it"
        ) from None


def fsync_directory(directory: Path) -> None:
    """Write ``directory``'s entries (the renames made in it) to the disk.

    Not on Windows, where a directory cannot be opened like this (NTFS journals the rename). A file
    system that cannot sync a directory says EINVAL; there is nothing more to do on it, so that is
    not an error.
    """
    if os.name == "nt":
        return
    try:
        _fsync(directory)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise


def install_directory(built: Path, target: Path) -> None:
    """Rename the directory ``built`` (complete, beside ``target``) to ``target``, durably.

    Every file under ``built`` and every directory are fsynced first, so that once the parent's fsync
    has recorded the rename no power cut can show ``target`` with a file missing or short (the data
    cache writes its files with plain writes: nothing reads them before this rename). Raises OSError if
    ``target`` exists and is not empty (someone else installed it first). POSIX only, like the data
    cache's lock.
    """
    built, target = Path(built), Path(target)
    for path in sorted(built.rglob("*")):
        _fsync(path)
    fsync_directory(built)
    os.replace(built, target)
    fsync_directory(target.parent)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Recording:
    """A file handle that remembers the OSError its ``write`` raised: ``torch.save`` catches a failed write
    (a full disk) and raises an unrelated RuntimeError ("unexpected pos ...") in its place."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.error = handle, None

    def write(self, data: bytes) -> int:
        try:
            return self.handle.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.handle.flush()


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """``path.write_bytes(data)``, atomically."""
    write_atomically(path, lambda handle: handle.write(data))


def write_text_atomically(path: Path, text: str) -> None:
    """``path.write_text(text, encoding="utf-8")``, atomically."""
    write_bytes_atomically(path, text.encode("utf-8"))


def remove_partial_writes(directory: Path) -> list[Path]:
    """Delete the temporary files that interrupted writes left in ``directory``; returns them.

    Only call this while no other process can be writing there (hold the run lock).
    """
    leftovers = sorted(Path(directory).glob(f".*{_SUFFIX}"))
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
