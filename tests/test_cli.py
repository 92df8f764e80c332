"""seq2seq.cli through the installed command: ``prepare`` prints its data report as JSON,
``--help`` lists the verbs, and bad arguments, misaligned files and missing configs end
with exit status 2 and one line on stderr (no traceback).

Each test starts one short process (no model is trained here); the data pipeline writes
only under pytest's tmp directory.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOY = "configs/toy.yaml"


def _command() -> list[str]:
    """The ``seq2seq`` console script of this environment (``python -m seq2seq`` if it is not installed)."""
    script = Path(sys.executable).with_name("seq2seq")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "seq2seq"]


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*_command(), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    """Assert exit status 2 with a single ``seq2seq: error:`` line on stderr; return that line."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("seq2seq: error:") and "Traceback" not in result.stderr
    assert result.stdout == ""
    return lines[0]


def test_prepare_prints_the_data_report(tmp_path):
    result = _cli("prepare", "--config", TOY, "--set", f"data.cache_dir={tmp_path / 'cache'}")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("pairs_read", "train", "dev", "test", "src_vocab", "padding_fraction", "batches_per_epoch"):
        assert key in report, key
    assert report["pairs_read"] == 2000  # the toy fixture corpus
    assert report["dev"] == report["test"] == 100  # configs/toy.yaml: dev_size, test_size
    assert 0 < report["train"] <= report["pairs_read"] - report["dev"] - report["test"]
    assert report["src_vocab"] > 0
    assert 0 <= report["padding_fraction"] < 0.1  # length bucketing keeps padding small
    assert report["batches_per_epoch"] >= 1
    assert report["cache_hit"] is False and Path(report["cache"]).is_relative_to(tmp_path)


def test_help_lists_the_verbs(tmp_path):
    result = _cli("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for verb in ("train", "translate", "evaluate", "prepare"):
        assert verb in result.stdout, verb


def test_translate_beam_zero_is_a_one_line_error(tmp_path):
    line = _one_line_error(_cli("translate", "--beam", "0", "你好。", cwd=tmp_path))
    assert "--beam" in line and ">= 1" in line


def test_evaluate_misaligned_files_is_a_one_line_error(tmp_path):
    hyp = tmp_path / "hyp.txt"
    ref = tmp_path / "ref.txt"
    hyp.write_text("one\ntwo\nthree\n", encoding="utf-8")
    ref.write_text("one\ntwo\n", encoding="utf-8")
    line = _one_line_error(_cli("evaluate", "--hyp", str(hyp), "--ref", str(ref), cwd=tmp_path))
    assert "3" in line and "2" in line and "aligned" in line


def test_train_missing_config_is_a_one_line_error(tmp_path):
    line = _one_line_error(_cli("train", "--config", "missing.yaml", cwd=tmp_path))
    assert "missing.yaml" in line and "not found" in line
    assert list(tmp_path.iterdir()) == []  # nothing created
