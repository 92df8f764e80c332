"""Faults around the run directory and the data cache: a full disk while saving, a read-only run directory,
a data cache deleted during a run, a corpus changed between runs. Each gives a clear one-line error or a
correct rebuild; a checkpoint that was there before is never damaged."""

import errno
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI_ENV, REPO, TOY, TOY_SRC, TOY_TGT, metrics_records, one_line_error, sets, write_lines

import seq2seq.atomic
from seq2seq.checkpoint import load_checkpoint, save_checkpoint
from seq2seq.config import load_config
from seq2seq.data.pipeline import prepare_data
from seq2seq.errors import UserError
from seq2seq.train.trainer import Trainer


def _step(run: Path) -> int:
    return load_checkpoint(run / "last.pt")["progress"]["step"]


def _temporaries(run: Path) -> list[str]:
    return sorted(p.name for p in run.iterdir() if p.name.endswith(".tmp"))


def test_a_full_disk_in_the_middle_of_a_checkpoint_write(tmp_path, monkeypatch):
    """ENOSPC from the file system in the middle of torch.save (which reports it as a RuntimeError of its own):
    a one-line error naming the file and the cause; the previous checkpoint intact; no temporary file."""
    path = tmp_path / "last.pt"
    save_checkpoint({"model": {}, "config": {"step": 1}}, path)
    before = path.read_bytes()
    opened = os.fdopen

    class FullDisk:
        """A file on a disk with 100 bytes left."""

        def __init__(self, fd: int, mode: str) -> None:
            self.file, self.left = opened(fd, mode), 100

        def write(self, data: bytes) -> int:
            if len(data) > self.left:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.left -= len(data)
            return self.file.write(data)

        def __getattr__(self, name: str):
            return getattr(self.file, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.file.close()

    monkeypatch.setattr(seq2seq.atomic.os, "fdopen", FullDisk)
    with pytest.raises(UserError, match=r"last.pt \(No space left on device\); the previous version is unchanged"):
        save_checkpoint({"model": {}, "config": {"step": 2}}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and load_checkpoint(path)["config"] == {"step": 1}
    assert _temporaries(tmp_path) == []


def test_a_full_disk_while_training_then_resume_once_space_returns(toy_run, toy_cache, tmp_path, monkeypatch):
    """Files may grow to 2 MB (RLIMIT_FSIZE: writes past it fail with EFBIG): best.pt and every small file fit,
    the toy last.pt does not. Then the limit goes and the same run resumes."""
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)  # last.pt at step 60
    monkeypatch.chdir(REPO)
    settings = [f"train.run_dir={run}", f"data.cache_dir={toy_cache}", "train.max_steps=62", "train.eval_every=100"]
    cfg = load_config(TOY, [*settings, "train.threads=1", "train.eval_sentences=2", "train.device=cpu"])
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, hard))
    try:
        with pytest.raises(UserError) as info:
            Trainer(cfg).fit(quiet=True)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(info.value).startswith(f"cannot write {run / 'last.pt'} (File too large); the previous version")
    assert _step(run) == 60 and _temporaries(run) == []  # the previous last.pt, whole
    Trainer(cfg).fit(quiet=True)
    assert _step(run) == 62
    # The failed session recorded step 62's validation before its save failed; the resumed one dropped that
    # record with the rest past step 60, trained the steps again and recorded them once.
    assert [r["step"] for r in metrics_records(run)].count(62) == 1


def _read_only(path: Path) -> list[str]:
    """The command prefix that runs a command with ``path`` read-only: plain permissions for a normal user; for
    root (whom permissions do not stop) a read-only bind mount in a private mount namespace."""
    if os.geteuid() != 0:
        for item in [path, *path.rglob("*")]:
            item.chmod(0o555 if item.is_dir() else 0o444)
        return []
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"running as root without the right to make a private mount: {probe.stderr.decode().strip()}")
    mount = f'mount --bind {path} {path} && mount -o remount,bind,ro {path} && exec "$@"'
    return ["unshare", "--mount", "sh", "-c", mount, "sh"]


def test_a_read_only_run_directory_translates_and_refuses_training(toy_run, toy_cache, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    prefix = _read_only(run)
    python = [*prefix, sys.executable, "-m", "seq2seq"]
    call = lambda *args: subprocess.run(  # noqa: E731
        [*python, *args], capture_output=True, text=True, cwd=REPO, env=CLI_ENV, timeout=120
    )
    translated = call("translate", "--model", str(run), "--device", "cpu", "--beam", "1", "我想喝咖啡。")
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1, translated.stderr
    refused = call("train", "--config", TOY, *sets(f"train.run_dir={run}", f"data.cache_dir={toy_cache}"))
    line = one_line_error(refused)
    assert f"cannot use run directory {run}" in line and ("Read-only" in line or "Permission denied" in line)


@pytest.fixture
def small_corpus(tmp_path) -> list[str]:
    """``--set``s for a 600-pair corpus of our own (its cache builds in a moment) and a run on it."""
    src = TOY_SRC.read_text(encoding="utf-8").splitlines()[:600]
    tgt = TOY_TGT.read_text(encoding="utf-8").splitlines()[:600]
    write_lines(tmp_path / "c.zh", src)
    write_lines(tmp_path / "c.en", tgt)
    return [
        f"data.src={tmp_path / 'c.zh'}",
        f"data.tgt={tmp_path / 'c.en'}",
        "data.dev_size=40",
        "data.test_size=40",
        "data.vocab_size=800",
        f"data.cache_dir={tmp_path / 'cache'}",
        f"train.run_dir={tmp_path / 'run'}",
        "train.eval_every=4",
        "train.eval_sentences=1",
        "train.threads=1",
    ]


def test_a_data_cache_deleted_during_a_run_is_rebuilt_and_the_run_resumes(small_corpus, tmp_path, monkeypatch):
    args = ["train", "--config", TOY, "--device", "cpu", *sets(*small_corpus)]
    process = subprocess.Popen(
        [sys.executable, "-m", "seq2seq", *args, *sets("train.max_steps=8")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=CLI_ENV,
    )
    for line in process.stdout:
        if line.lstrip().startswith(("model:", "step")):
            shutil.rmtree(tmp_path / "cache")  # the data are loaded: pull the cache from under the run
            break
    process.stdout.read()
    assert process.wait(timeout=120) == 0, process.stderr.read()
    assert not (tmp_path / "cache").exists()
    monkeypatch.chdir(REPO)
    resumed = Trainer(load_config(TOY, [*small_corpus, "train.max_steps=12"]))
    assert not resumed.data.report["cache_hit"]  # rebuilt -- to the same tokenizer, or the run would be refused
    resumed.fit(quiet=True)
    assert _step(tmp_path / "run") == 12
    # A cache entry with a file missing (deleted by hand, by a cleaner) is rebuilt too, not a traceback.
    (entry,) = [path for path in (tmp_path / "cache").iterdir() if path.is_dir()]
    (entry / "train.src.ids").unlink()
    assert not prepare_data(load_config(TOY, small_corpus).data).report["cache_hit"]
    assert (entry / "train.src.ids").is_file()


def test_a_corpus_changed_between_runs_misses_the_cache_and_the_old_run_refuses(small_corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    Trainer(load_config(TOY, [*small_corpus, "train.max_steps=4"])).fit(quiet=True)
    lines = (tmp_path / "c.en").read_text(encoding="utf-8").splitlines()
    lines[100] = lines[100] + " Really."  # one sentence of six hundred
    write_lines(tmp_path / "c.en", lines)
    with pytest.raises(UserError, match="holds a model trained with another tokenizer or corpus") as info:
        Trainer(load_config(TOY, [*small_corpus, "train.max_steps=8"]))
    assert "\n" not in str(info.value)
    assert len([p for p in (tmp_path / "cache").iterdir() if p.is_dir()]) == 2  # the new corpus got its own entry
    fresh = [s for s in small_corpus if not s.startswith("train.run_dir=")] + [f"train.run_dir={tmp_path / 'new'}"]
    fresh.append("train.max_steps=4")
    Trainer(load_config(TOY, fresh)).fit(quiet=True)  # and trains in a new run directory
    assert _step(tmp_path / "new") == 4
