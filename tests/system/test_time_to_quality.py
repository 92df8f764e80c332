"""scripts/bench/time_to_quality.py: the minutes a run took to reach a reference run's last dev BLEU."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run_dir(path: Path, bleus: list[float]) -> Path:
    """A run directory whose validations at 400, 800, ... steps (3, 6, ... minutes) score ``bleus``."""
    path.mkdir()
    records = [{"step": 20, "loss": 7.0, "minutes": 0.2}]
    records += [{"step": 400 * i, "minutes": 3.0 * i, "dev_bleu": b} for i, b in enumerate(bleus, start=1)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _time(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/bench/time_to_quality.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_reaches_the_reference_at_its_first_validation_at_or_above_it(tmp_path):
    reference = _run_dir(tmp_path / "today", [5.0, 12.0, 14.0, 13.5])  # ends its hour at 13.5
    faster = _run_dir(tmp_path / "new", [6.0, 13.5, 12.0, 16.0])  # reaches it at its 2nd, dips, ends higher
    out = tmp_path / "ttq.json"
    done = _time(str(reference), str(faster), "--reference", str(reference), "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["target_dev_bleu"] == 13.5
    today, new = report["runs"]
    assert (today["reached_at_minutes"], today["reached_at_step"]) == (9.0, 1200)
    assert (new["reached_at_minutes"], new["reached_at_step"], new["best_dev_bleu"]) == (6.0, 800, 16.0)
    never = _time(str(reference), "--target", "20", "--out", str(out))
    assert never.returncode == 0 and "never reached 20.00" in never.stdout


def test_a_run_without_validations_is_a_one_line_error(tmp_path):
    empty = _run_dir(tmp_path / "early", [])
    done = _time(str(empty), "--target", "10", "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no validation lines" in done.stderr
    assert not (tmp_path / "x.json").exists()
