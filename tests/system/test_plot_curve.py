"""scripts/tools/plot_curve.py: a PNG from metrics.jsonl, one-line errors for bad run directories."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _plot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/tools/plot_curve.py", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def _run_dir(path: Path, lines: list[str]) -> Path:
    path.mkdir()
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_plots_the_validation_records_of_each_run(tmp_path):
    train_line = json.dumps({"step": 10, "loss": 5.0, "minutes": 0.5})
    validation = [
        json.dumps({"step": s, "minutes": s / 10, "dev_loss": 4 - s / 100, "dev_bleu": s / 10, "dev_chrf": s / 5})
        for s in (20, 40)
    ]
    first = _run_dir(tmp_path / "a", [train_line, *validation])
    second = _run_dir(tmp_path / "b", validation[:1])
    out = tmp_path / "curve.png"
    done = _plot(str(first), str(second), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "a: 2 validations, last at 4.0 min BLEU 4.00" in done.stdout
    assert "b: 1 validations" in done.stdout


def test_bad_run_directories_give_one_line_errors(tmp_path):
    missing = _plot(str(tmp_path / "nowhere"), "--out", str(tmp_path / "x.png"))
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("is " + str(tmp_path / "nowhere") + " a run directory of seq2seq train?")
    broken = _run_dir(tmp_path / "broken", [json.dumps({"step": 1}), "{not json"])
    done = _plot(str(broken), "--out", str(tmp_path / "x.png"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "metrics.jsonl line 2: not valid JSON" in done.stderr
    no_validation = _run_dir(tmp_path / "early", [json.dumps({"step": 1, "loss": 6.0})])
    done = _plot(str(no_validation), "--out", str(tmp_path / "x.png"))
    assert done.returncode == 2 and "no validation lines" in done.stderr
    assert not (tmp_path / "x.png").exists()
