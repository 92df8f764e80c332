"""``seq2seq explain`` end to end on the session's shared toy run (conftest.toy_run): the page written
to --out carries the report, --json prints it (or writes it to --out), and an engine without the
model's tensors, a layer out of range and a missing model are one-line errors."""

import json
import re

from conftest import one_line_error, run_cli

from seq2seq.explain.report import SECTIONS

SENTENCE, REF = "今天天气很好。", "The weather is nice today."


def test_the_page_and_the_json(toy_run, tmp_path):
    out = tmp_path / "explain.html"
    done = run_cli("explain", SENTENCE, "--ref", REF, "--model", str(toy_run), "--device", "cpu", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"wrote {out}" and done.stdout == ""
    data = json.loads(re.findall(r'type="application/json">(.*?)</script>', out.read_text(encoding="utf-8"), re.S)[0])
    report = data["report"]
    assert data["served"] is False and (report["sentence"], report["reference"]) == (SENTENCE, REF)
    assert list(report)[-len(SECTIONS) :] == list(SECTIONS)
    assert report["training_vs_inference"]["teacher_forced"] is not None

    printed = run_cli("explain", SENTENCE, "--model", str(toy_run), "--device", "cpu", "--json", "--layer", "-1")
    assert printed.returncode == 0, printed.stderr
    as_json = json.loads(printed.stdout)
    assert as_json["attention_head"]["layer"] == 1 and as_json["training_vs_inference"]["teacher_forced"] is None
    assert as_json["translation"] == report["translation"]  # the same greedy translation either way


def test_bad_choices_are_one_line_errors(toy_run, tmp_path):
    line = one_line_error(run_cli("explain", SENTENCE, "--model", str(toy_run), "--engine", "ctranslate2"))
    assert "does not support explain" in line and "--engine torch" in line
    line = one_line_error(run_cli("explain", SENTENCE, "--model", str(toy_run), "--device", "cpu", "--head", "7"))
    assert "head 7: the model has 4 heads" in line
    line = one_line_error(run_cli("explain", SENTENCE, "--model", str(tmp_path / "none"), cwd=tmp_path))
    assert "no trained model" in line
    assert list(tmp_path.iterdir()) == []  # nothing written
