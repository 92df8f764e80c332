"""The whole workflow -- prepare, train, translate, evaluate -- in an interpreter without the POSIX-only
parts that Windows and macOS lack (tests/fixtures/no_posix/sitecustomize.py: no ``fcntl`` for seq2seq,
no ``os.sched_getaffinity``, no ``os.pread``/``os.pwrite``, no ``fork``; a stand-in ``msvcrt``), so a
POSIX-only call on any of these paths fails here, on Linux CI, before it fails a Windows or Mac user.

The corpus is split by hash (``data.hash_split_above=0``) so that its worker pool starts by spawning,
as on macOS and Windows; the tokenizer's threads and a trainer's with ``train.threads: 0`` come from
``seq2seq.device.available_cpus``."""

import json
import os
import subprocess
import sys

from conftest import CLI_ENV, FIXTURES, REPO, TOY, sets

NO_POSIX = {**CLI_ENV, "PYTHONPATH": os.pathsep.join([str(FIXTURES / "no_posix"), str(REPO)])}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=REPO, env=NO_POSIX, timeout=300, check=False
    )


def test_the_interpreter_lacks_the_posix_only_parts():
    probe = "import os, multiprocessing; print(hasattr(os, 'sched_getaffinity'), hasattr(os, 'pread'), "
    probe += "'fork' in multiprocessing.get_all_start_methods()); "
    probe += "exec('import fcntl', {'__name__': 'seq2seq.probe'})"  # as a seq2seq module imports it
    result = _run("-c", probe)
    assert result.stdout.split() == ["False", "False", "False"]
    assert "ModuleNotFoundError: No module named 'fcntl'" in result.stderr
    import_filelock = "import seq2seq.filelock as f; print(f.fcntl, f.msvcrt.__name__)"
    assert _run("-c", import_filelock).stdout.split() == ["None", "msvcrt"]  # the Windows path, stood in for


def test_prepare_train_translate_evaluate_without_posix_only_calls(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    data = sets(f"data.cache_dir={cache}", "data.hash_split_above=0")
    prepared = _run("-m", "seq2seq", "prepare", "--config", TOY, *data)
    assert prepared.returncode == 0, prepared.stderr
    assert json.loads(prepared.stdout)["cache_hit"] is False

    # One thread: several spin against each other on a busy machine. The count train.threads=0 would take:
    threads = "import os, torch; from seq2seq.config import load_config; from seq2seq.train.trainer import Trainer; "
    threads += f"Trainer(load_config({TOY!r}, ['data.cache_dir={cache}', 'data.hash_split_above=0'])); "
    threads += "print(torch.get_num_threads(), os.cpu_count())"
    counted = _run("-c", threads)
    assert counted.returncode == 0, counted.stderr
    used, cores = counted.stdout.split()
    assert used == cores  # no affinity mask to read: every core

    steps = sets(f"train.run_dir={run}", "train.max_steps=6", "train.eval_every=6", "train.eval_sentences=4")
    trained = _run(
        "-m", "seq2seq", "train", "--config", TOY, "--device", "cpu", *data, *steps, "--set", "train.threads=1"
    )
    assert trained.returncode == 0, trained.stderr
    assert (run / "best.pt").is_file() and (run / ".lock").read_text() == ""  # the lock was taken and released
    assert (cache / ".lock").is_file()

    translated = _run("-m", "seq2seq", "translate", "--model", str(run), "--device", "cpu", "你好。", "谢谢！")
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 2

    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("".join((run / "test.src").read_text(encoding="utf-8").splitlines(True)[:8]), encoding="utf-8")
    ref.write_text("".join((run / "test.tgt").read_text(encoding="utf-8").splitlines(True)[:8]), encoding="utf-8")
    evaluated = _run(
        "-m", "seq2seq", "evaluate", "--model", str(run), "--device", "cpu", "--src", str(src), "--ref", str(ref),
        "--json",
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    assert report["sentences"] == 8 and "tok:13a" in report["bleu_signature"]
