"""Time to quality: the minutes of training a run took to reach a dev BLEU.

The hour's recipe is compute-bound, so what a change to it buys is best read on the clock: how soon
does the run reach the quality the reference recipe ends its hour at? The target is a greedy dev
BLEU (the validation's, on ``train.eval_sentences`` of the dev split): ``--target 23.7``, or
``--reference RUN``, the last validation of that run (its end-of-hour BLEU). A run reaches it at
its first validation at or above the target; ``minutes`` is the training clock of that validation
(validations included), as ``metrics.jsonl`` records it. Greedy dev BLEU on 500 sentences moves by
about ±1 between neighbouring validations, so compare runs validated on the same sentences, and read
a difference of one validation as noise.

    python scripts/bench/time_to_quality.py runs/zh-en [runs/other ...] --reference runs/zh-en-base
    python scripts/bench/time_to_quality.py runs/zh-en --target 23.69 --out runs/bench/time_to_quality.json
"""

import argparse
import sys
from pathlib import Path
from typing import Any

from benchlib import REPORTS, cpu_name, write_report

from seq2seq.errors import UserError
from seq2seq.train.runlog import read_validations


def reached(records: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    """The first validation record whose dev BLEU is at least ``target``; None if none is."""
    return next((r for r in records if r["dev_bleu"] >= target), None)


def summary(run_dir: Path, target: float) -> dict[str, Any]:
    """One run's figures: its last and best validation, and when it first reached ``target``."""
    records = read_validations(run_dir)
    last, best = records[-1], max(records, key=lambda r: r["dev_bleu"])
    first = reached(records, target)
    return {
        "run": str(run_dir),
        "steps": last["step"],
        "minutes": round(last.get("minutes", 0.0), 1),
        "last_dev_bleu": round(last["dev_bleu"], 2),
        "best_dev_bleu": round(best["dev_bleu"], 2),
        "reached_at_minutes": round(first.get("minutes", 0.0), 1) if first else None,
        "reached_at_step": first["step"] if first else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (each holding metrics.jsonl)")
    goal = parser.add_mutually_exclusive_group(required=True)
    goal.add_argument("--target", type=float, help="the greedy dev BLEU to reach")
    goal.add_argument("--reference", type=Path, help="a run whose last validation's dev BLEU is the target")
    parser.add_argument("--out", type=Path, default=REPORTS / "time_to_quality.json", help="JSON report")
    args = parser.parse_args(argv)
    try:
        target = args.target if args.reference is None else read_validations(args.reference)[-1]["dev_bleu"]
        rows = [summary(run, target) for run in args.runs]
    except UserError as err:
        print(f"time_to_quality: error: {err}", file=sys.stderr)
        return 2
    for row in rows:
        when = (
            f"reached {target:.2f} at {row['reached_at_minutes']} min (step {row['reached_at_step']})"
            if row["reached_at_step"]
            else f"never reached {target:.2f}"
        )
        print(
            f"{row['run']}: {row['steps']} steps in {row['minutes']} min, dev BLEU last {row['last_dev_bleu']} "
            f"best {row['best_dev_bleu']}; {when}"
        )
    reference = str(args.reference) if args.reference else None
    report = {"cpu": cpu_name(), "target_dev_bleu": round(target, 2), "reference": reference, "runs": rows}
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
