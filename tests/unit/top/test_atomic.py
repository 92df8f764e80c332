"""seq2seq.atomic, durability: a replaced file is fsynced before its rename and its directory after it
(the directory's entries, read at the moment of that fsync, already show the new name and no temporary
file); a built directory is installed with every file in it fsynced first; every writer of a run's or
the data cache's files goes through these (checkpoints, config, tokenizer, dev/test text, cache entries).
The fsyncs are recorded by patching ``os.fsync``, so the test sees what the disk would be told."""

import errno
import os
import stat
from pathlib import Path

import pytest
import torch
from conftest import TOY_SRC, TOY_TGT

from seq2seq.atomic import install_directory, write_bytes_atomically
from seq2seq.checkpoint import save_checkpoint
from seq2seq.config import Config, DataConfig, save_config
from seq2seq.data.pipeline import prepare_data
from seq2seq.errors import UserError


class Syncs:
    """Stands in for ``os.fsync``: records the inode of each call and, for a directory, its entries then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_directories: int | None = None) -> None:
        self.real, self.fail_directories = os.fsync, fail_directories
        self.calls: list[tuple[int, list[str] | None]] = []
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd: int) -> None:
        info = os.fstat(fd)
        directory = stat.S_ISDIR(info.st_mode)
        self.calls.append((info.st_ino, sorted(os.listdir(fd)) if directory else None))
        if directory and self.fail_directories is not None:
            raise OSError(self.fail_directories, os.strerror(self.fail_directories))
        self.real(fd)

    def first(self, path: Path) -> int:
        """The index of the first fsync of ``path`` (by inode: a renamed file keeps it)."""
        inode = path.stat().st_ino
        return next(i for i, (synced, _) in enumerate(self.calls) if synced == inode)

    def listings(self, directory: Path) -> list[tuple[int, list[str]]]:
        """(index, entries) of each fsync of ``directory``."""
        inode = directory.stat().st_ino
        return [(i, names) for i, (synced, names) in enumerate(self.calls) if synced == inode and names is not None]


def test_a_replaced_file_is_synced_then_its_directory_after_the_rename(tmp_path, monkeypatch):
    path = tmp_path / "a.bin"
    path.write_bytes(b"old")
    syncs = Syncs(monkeypatch)
    write_bytes_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert syncs.listings(tmp_path) == [(syncs.first(path) + 1, ["a.bin"])]  # after the file, the rename done


@pytest.mark.parametrize(("code", "fails"), [(errno.EINVAL, False), (errno.EIO, True)])
def test_a_directory_that_cannot_be_synced(tmp_path, monkeypatch, code, fails):
    """EINVAL: the file system has no directory fsync, nothing more to do. Any other error is one line."""
    Syncs(monkeypatch, fail_directories=code)
    path = tmp_path / "config.yaml"
    if fails:
        with pytest.raises(UserError, match=r"cannot make .*config.yaml durable \(Input/output error\)"):
            write_bytes_atomically(path, b"x")
    else:
        write_bytes_atomically(path, b"x")
    assert path.read_bytes() == b"x"  # in place either way


def test_an_installed_directory_has_every_file_synced_before_the_rename(tmp_path, monkeypatch):
    built, target = tmp_path / ".build-1", tmp_path / "entry"
    (built / "sub").mkdir(parents=True)
    (built / "a").write_bytes(b"a")
    (built / "sub" / "b").write_bytes(b"b")
    syncs = Syncs(monkeypatch)
    install_directory(built, target)
    [(parent_sync, names)] = syncs.listings(tmp_path)
    assert names == ["entry"]  # renamed by then
    for inside in (target / "a", target / "sub" / "b", target / "sub", target):
        assert syncs.first(inside) < parent_sync, inside
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "c").write_bytes(b"c")
    with pytest.raises(OSError):  # someone installed it first
        install_directory(tmp_path / "again", target)


def test_checkpoints_and_the_config_sync_their_directory(tmp_path, monkeypatch):
    syncs = Syncs(monkeypatch)
    save_checkpoint({"model": {"w": torch.zeros(2)}, "step": 1}, tmp_path / "last.pt")
    save_config(Config(), tmp_path / "config.yaml")
    assert [names for _, names in syncs.listings(tmp_path)] == [["last.pt"], ["config.yaml", "last.pt"]]


def test_the_data_cache_and_the_run_directory_are_installed_durably(tmp_path, monkeypatch):
    """prepare_data: the cache entry (built in a temporary directory) and the run's tokenizer and text."""
    cache, run = tmp_path / "cache", tmp_path / "run"
    cfg = DataConfig(
        src=str(TOY_SRC), tgt=str(TOY_TGT), dev_size=100, test_size=100, vocab_size=1200, cache_dir=str(cache)
    )
    syncs = Syncs(monkeypatch)
    data = prepare_data(cfg, run)
    entry = Path(data.report["cache"])
    entry_installed = next(i for i, names in syncs.listings(cache) if entry.name in names)
    for path in sorted(entry.rglob("*")):
        assert syncs.first(path) < entry_installed, path.name
    run_files = {"spm.model", "dev.src", "dev.tgt", "test.src", "test.tgt", "test.novelty"}
    assert run_files <= set(syncs.listings(run)[-1][1])
    for name in run_files:  # each one's directory fsync comes after it
        assert any(i > syncs.first(run / name) and name in names for i, names in syncs.listings(run)), name
