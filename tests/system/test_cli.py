"""The ``seq2seq`` verbs end to end, each test one ``python -m seq2seq`` process: ``prepare``
prints its data report as JSON, ``--help`` lists the verbs; bad arguments, misaligned files,
missing or wrong configs and bad decoding settings end with exit status 2 and one line on stderr
(no traceback); ``train`` leaves a complete run directory, and ``translate``/``evaluate`` work on
it (the session's shared toy run, conftest.toy_run).

Everything writes only under pytest's tmp directories.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import CLI_ENV, REPO, TOY, main_error, metrics_records, one_line_error, run_cli, sets, write_lines

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import load_config


def test_prepare_prints_the_data_report(tmp_path):
    result = run_cli("prepare", "--config", TOY, "--set", f"data.cache_dir={tmp_path / 'cache'}")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("pairs_read", "train", "dev", "test", "src_vocab", "padding_fraction", "batches_per_epoch"):
        assert key in report, key
    assert report["pairs_read"] == 2000  # the toy fixture corpus
    assert report["dev"] == report["test"] == 100  # the toy recipe: dev_size, test_size
    assert 0 < report["train"] <= report["pairs_read"] - report["dev"] - report["test"]
    assert report["src_vocab"] > 0
    assert 0 <= report["padding_fraction"] < 0.1  # length bucketing keeps padding small
    assert report["batches_per_epoch"] >= 1
    assert report["cache_hit"] is False and Path(report["cache"]).is_relative_to(tmp_path)


def test_help_lists_the_verbs(tmp_path):
    result = run_cli("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for verb in ("train", "translate", "evaluate", "prepare"):
        assert verb in result.stdout, verb


def test_translate_beam_zero_is_aone_line_error(tmp_path):
    line = one_line_error(run_cli("translate", "--beam", "0", "你好。", cwd=tmp_path))
    assert "--beam" in line and ">= 1" in line


def test_evaluate_misaligned_files_is_aone_line_error(tmp_path):
    hyp = tmp_path / "hyp.txt"
    ref = tmp_path / "ref.txt"
    hyp.write_text("one\ntwo\nthree\n", encoding="utf-8")
    ref.write_text("one\ntwo\n", encoding="utf-8")
    line = one_line_error(run_cli("evaluate", "--hyp", str(hyp), "--ref", str(ref), cwd=tmp_path))
    assert line.endswith("3 translations but 2 references; they must be line-aligned")


def test_train_missing_config_is_aone_line_error(tmp_path):
    line = one_line_error(run_cli("train", "--config", "missing.yaml", cwd=tmp_path))
    assert "missing.yaml" in line and "not found" in line
    assert list(tmp_path.iterdir()) == []  # nothing created


# -- end to end on the shared toy run -------------------------------------------
def test_run_directory_is_complete(toy_run):
    for name in (
        "last.pt",
        "best.pt",
        "config.yaml",
        "metrics.jsonl",
        "spm.model",
        "test.src",
        "test.tgt",
        "dev.src",
        "dev.tgt",
    ):
        assert (toy_run / name).is_file(), name
    cfg = load_config(toy_run / "config.yaml")  # the saved config is a valid config...
    assert cfg.train.max_steps == 60 and cfg.train.run_dir == str(toy_run)  # ...with the overrides applied
    best = load_checkpoint(toy_run / "best.pt")
    assert best["config"] == cfg.to_dict() and best["step"] == 60
    assert load_checkpoint(toy_run / "last.pt")["progress"]["step"] == 60
    test_src = (toy_run / "test.src").read_text(encoding="utf-8").splitlines()
    assert len(test_src) == len((toy_run / "test.tgt").read_text(encoding="utf-8").splitlines()) == 100
    assert any("dev_bleu" in r for r in metrics_records(toy_run))
    assert not list(toy_run.glob(".*.tmp"))


def test_translate_one_sentence(toy_run):
    result = run_cli("translate", "--model", str(toy_run), "--device", "cpu", "你好。")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].strip()


def test_translate_json(toy_run):
    result = run_cli("translate", "--model", str(toy_run), "--device", "cpu", "--json", "你好。", "", "我很好。")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["source"] for r in records] == ["你好。", "", "我很好。"]
    for r in records:
        assert set(r) >= {"source", "translation", "score", "tokens"}
        assert isinstance(r["score"], float) and isinstance(r["tokens"], list)
    assert records[0]["translation"] and records[0]["tokens"]
    assert records[1]["translation"] == "" and records[1]["tokens"] == []


def test_translate_stdin_keeps_empty_lines_aligned(toy_run):
    result = run_cli("translate", "--model", str(toy_run), "--device", "cpu", stdin="你好。\n\n我很好。\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[3] == ""  # three lines, each ending in a newline
    assert lines[0].strip() and lines[1] == "" and lines[2].strip()


def test_translate_decode_settings_override_the_stored_ones(toy_run):
    sentences = ["你好。", "我很好。", "我们明天去学校。"]
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--json", *sentences]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    stored = [json.loads(line) for line in result.stdout.splitlines()]
    assert max(len(r["tokens"]) for r in stored) > 1
    result = run_cli(*args, *sets("decode.max_len_a=0", "decode.max_len_b=1"))
    assert result.returncode == 0, result.stderr
    assert all(len(json.loads(line)["tokens"]) <= 1 for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    ("verb", "setting", "named"),
    [
        ("translate", "decode.no_repeat_ngram=-1", "decode.no_repeat_ngram"),
        ("evaluate", "decode.length_penalty=long", "decode.length_penalty"),
        ("evaluate", "train.lr=1", "decode.*"),  # training settings cannot change a trained model
    ],
)
def test_bad_decode_setting_is_a_one_line_error(toy_run, verb, setting, named):
    result = run_cli(
        verb, "--model", str(toy_run), "--device", "cpu", *sets(setting), *(["你好。"] * (verb == "translate"))
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in result.stderr


def test_evaluate_model_json(toy_run):
    result = run_cli("evaluate", "--model", str(toy_run), "--device", "cpu", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert {"bleu", "chrf", "bleu_signature", "chrf_signature"} <= set(record)
    assert record["sentences"] == 100
    assert 0 <= record["bleu"] <= 100 and 0 <= record["chrf"] <= 100
    assert "nrefs:1" in record["bleu_signature"]


def test_evaluate_files_without_a_model(tmp_path):
    hyp = tmp_path / "hyp.txt"
    ref = tmp_path / "ref.txt"
    hyp.write_text("The cat sat on the mat.\nI like tea.\n", encoding="utf-8")
    ref.write_text("The cat sat on the mat.\nI like green tea.\n", encoding="utf-8")
    result = run_cli("evaluate", "--hyp", str(hyp), "--ref", str(ref), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["sentences"] == 2
    assert 0 < record["bleu"] < 100 and 0 < record["chrf"] < 100
    assert record["bleu_signature"].startswith("nrefs:1") and "chrf_signature" in record


def test_translate_without_a_model_says_to_train(tmp_path):
    result = run_cli("translate", "--model", str(tmp_path / "nonexistent"), "--device", "cpu", "你好。")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "train" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def _bad_config(tmp_path: Path, section: str, key: str, value) -> Path:
    raw = yaml.safe_load((REPO / TOY).read_text(encoding="utf-8"))
    raw[section][key] = value
    path = tmp_path / "BAD.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("section", "key", "value", "named"),
    [
        ("train", "learning_rate", 0.1, "learning_rate"),  # unknown key
        ("model", "heads", 3, "model.heads"),  # impossible value: 3 does not divide 64
    ],
)
def test_config_error_through_therun_cli(tmp_path, section, key, value, named):
    result = run_cli(
        "train",
        "--config",
        str(_bad_config(tmp_path, section, key, value)),
        *sets(f"train.run_dir={tmp_path / 'run'}", f"data.cache_dir={tmp_path / 'cache'}"),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert named in lines[0] and "BAD.yaml" in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_config_override_error_through_therun_cli(tmp_path):
    result = run_cli("train", "--config", TOY, *sets("train.max_step=5", f"train.run_dir={tmp_path / 'run'}"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "max_step" in lines[0] and "max_steps" in lines[0]  # names it, suggests the fix
    assert "Traceback" not in result.stderr


def test_train_resume_without_last_checkpoint_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    run = tmp_path / "run"
    settings = sets(f"train.run_dir={run}", f"data.cache_dir={tmp_path / 'cache'}", "train.max_steps=1")
    line = main_error(capsys, "train", "--config", TOY, "--device", "cpu", "--resume", *settings)
    assert line == f"seq2seq: error: --resume: no {run / 'last.pt'} to resume from"
    assert not run.exists() and not (tmp_path / "cache").exists()  # nothing trained, nothing written


def test_translate_input_file_missing_is_a_one_line_error(toy_run, tmp_path, capsys):
    missing = tmp_path / "missing.txt"
    line = main_error(capsys, "translate", "--model", str(toy_run), "--device", "cpu", "-i", str(missing))
    assert line == f"seq2seq: error: -i {missing}: file not found"


def test_evaluate_compare_with_hyp_is_a_one_line_error(tmp_path, capsys):
    hyp = write_lines(tmp_path / "hyp.txt", ["a"])
    line = main_error(capsys, "evaluate", "--compare", "runs/a", "runs/b", "--hyp", str(hyp))
    assert line.endswith("give either --compare RUN… or --hyp FILE…, not both")


def test_translate_into_a_closed_pipe_exits_0_quietly(toy_run, tmp_path):
    """``seq2seq translate … | head -1``: the reader goes away; the translator stops with status 0, no traceback."""
    sentences = write_lines(tmp_path / "in.txt", ["我很好。", "你好。"] * 100)
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--chunk-lines", "1", "-i", str(sentences)]
    with subprocess.Popen(
        [sys.executable, "-m", "seq2seq", *args],
        cwd=REPO,
        env=CLI_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout.readline().strip()  # a first translation: the writes have begun
            proc.stdout.close()  # what `head -1` does next
            err = proc.stderr.read()
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
