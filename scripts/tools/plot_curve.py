"""Plot learning curves: dev BLEU, chrF and loss against training minutes, one line per run.

Reads each run directory's ``metrics.jsonl`` (written by ``seq2seq train``); the
validation records are the lines that carry ``dev_bleu``. BLEU, chrF and dev loss
go on three panels, all against the ``minutes`` the run had trained at that
validation, so runs of different speeds compare on the same clock.

    python scripts/tools/plot_curve.py runs/zh-en [runs/other ...] --out docs/learning_curve.png
"""

import argparse
import sys
from pathlib import Path
from typing import Any

from seq2seq.errors import UserError
from seq2seq.train.runlog import read_validations


def plot(runs: dict[str, list[dict[str, Any]]], out: Path, title: str) -> None:
    """Draw BLEU, chrF and dev loss (top to bottom) against minutes for every run; write a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plotting needs matplotlib: pip install 'seq2seq[plot]' (or pip install matplotlib)") from None
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(7, 8))
    panels = {"dev_bleu": "dev BLEU", "dev_chrf": "dev chrF", "dev_loss": "dev loss (per token)"}
    for ax, (key, label) in zip(axes, panels.items(), strict=True):
        for name, records in runs.items():
            points = [(r.get("minutes", 0.0), r[key]) for r in records if key in r]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=name)
        ax.set_ylabel(label)
    axes[-1].set_xlabel("training minutes")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    axes[0].set_title(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (each holding metrics.jsonl)")
    parser.add_argument(
        "--out", type=Path, default=Path("runs/bench/learning_curve.png"), help="PNG to write (default: %(default)s)"
    )
    parser.add_argument("--title", default="greedy dev BLEU / chrF and dev loss during training", help="figure title")
    args = parser.parse_args(argv)
    try:
        runs: dict[str, list[dict[str, Any]]] = {}
        for run_dir in args.runs:
            name = run_dir.resolve().name
            if name in runs:  # two runs/x from different parents: keep both apart
                name = str(run_dir)
            runs[name] = read_validations(run_dir)
        plot(runs, args.out, args.title)
    except UserError as err:
        print(f"plot_curve: error: {err}", file=sys.stderr)
        return 2
    for name, records in runs.items():
        last = records[-1]
        print(
            f"{name}: {len(records)} validations, last at {last.get('minutes', 0):.1f} min "
            f"BLEU {last['dev_bleu']:.2f} chrF {last.get('dev_chrf', float('nan')):.2f}"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
