"""Score a model on real pasted text: does it keep what must not be translated, and all of the text?

The model learns from short Tatoeba sentences almost free of digits and Latin script, so text a user
pastes (several sentences per line, dates, prices, URLs, versions, names) can lose sentences, numbers
and names in silence. This script translates the three files of ``benchmarks/real-text`` (written for
this project, see its README) with ``python -m seq2seq translate --json``, or scores outputs already
made (``--outputs DIR``: sentences.out, paragraphs.out, english.out; each line plain text or a JSON
record with "translation" and optionally "warnings", "confidence" and "sentences"), and reports:

- copy rate: every maximal ``[A-Za-z0-9]+`` run of a source line is a token (138-0013-8000 is three,
  v2.1.3 is v2, 1, 3); a token is copied when the output line holds it as a whole run, case-sensitive,
  counted with multiplicity. Per file, sentences.zh and paragraphs.zh.
- length coverage: expected English words = 0.65 x Han characters + Latin/digit tokens of the source;
  the share of lines whose output has fewer than half of them (a dropped sentence shows here), and the
  median ratio output words / expected words.
- off-target handling (english.en): a line is handled when the output is the input, passed through, or
  a warning of its record mentions the language.
- warnings and confidence: how many lines carry a warning (JSON outputs) and their mean confidence.

Usage:
    python scripts/bench/real_text.py --model RUN_DIR [--set-dir DIR] [--out report.json] [-- extra translate args]
    python scripts/bench/real_text.py --outputs DIR [--set-dir DIR] [--out report.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SET_DIR = REPO / "benchmarks" / "real-text"
FILES = {"sentences": "sentences.zh", "paragraphs": "paragraphs.zh", "english": "english.en"}
TOKEN = re.compile(r"[A-Za-z0-9]+")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
WORDS_PER_HAN = 0.65  # English words per Chinese character, roughly
SHORT = 0.5  # an output with fewer than this share of the expected words is short


@dataclass
class Output:
    """One output line: its translation, and what a JSON record adds."""

    text: str
    warnings: list[str] = field(default_factory=list)
    confidence: float | None = None


def parse_output(line: str) -> Output:
    """A plain translation, or a JSON record of ``translate --json`` (warnings of its sentences included)."""
    stripped = line.strip()
    if stripped.startswith("{"):
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and "translation" in record:
            warnings = [str(w) for w in record.get("warnings") or []]
            for sentence in record.get("sentences") or []:
                warnings += [str(w) for w in sentence.get("warnings") or [] if str(w) not in warnings]
            confidence = record.get("confidence")
            number = isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
            return Output(str(record["translation"]), warnings, float(confidence) if number else None)
    return Output(line.rstrip("\n"))


def copy_rate(sources: list[str], outputs: list[Output]) -> dict[str, Any]:
    """Tokens of the sources found again in their outputs, with multiplicity."""
    copied = total = 0
    for source, output in zip(sources, outputs, strict=True):
        wanted = Counter(TOKEN.findall(source))
        found = Counter(TOKEN.findall(output.text))
        total += sum(wanted.values())
        copied += sum(min(count, found[token]) for token, count in wanted.items())
    return {"copied": copied, "total": total, "percent": _percent(copied, total)}


def expected_words(source: str) -> float:
    """How many English words a translation of ``source`` should have, roughly."""
    return WORDS_PER_HAN * len(HAN.findall(source)) + len(TOKEN.findall(source))


def length_coverage(sources: list[str], outputs: list[Output]) -> dict[str, Any]:
    """The share of lines translated much too short, and the median ratio of output to expected words."""
    ratios = []
    short = 0
    for source, output in zip(sources, outputs, strict=True):
        expected = expected_words(source)
        if expected == 0:
            continue
        words = len(output.text.split())
        short += words < SHORT * expected
        ratios.append(words / expected)
    return {
        "lines": len(ratios),
        "short": short,
        "short_percent": _percent(short, len(ratios)),
        "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
    }


def warning_summary(outputs: list[Output]) -> dict[str, Any]:
    """Lines carrying a warning, and the mean confidence of the lines that report one."""
    confidences = [o.confidence for o in outputs if o.confidence is not None]
    return {
        "lines_with_warnings": sum(bool(o.warnings) for o in outputs),
        "lines_with_confidence": len(confidences),
        "mean_confidence": round(statistics.fmean(confidences), 4) if confidences else None,
    }


def off_target(sources: list[str], outputs: list[Output]) -> dict[str, Any]:
    """English lines passed through unchanged or flagged by a warning about the language."""
    passed = warned = 0
    for source, output in zip(sources, outputs, strict=True):
        if output.text.strip() == source.strip():
            passed += 1
        elif any("language" in w.lower() for w in output.warnings):
            warned += 1
    handled = passed + warned
    return {
        "handled": handled,
        "total": len(sources),
        "percent": _percent(handled, len(sources)),
        "passed_through": passed,
        "warned": warned,
    }


def _percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def read_lines(path: Path) -> list[str]:
    if not path.is_file():
        sys.exit(f"real_text: no file {path}")
    return path.read_text(encoding="utf-8").splitlines()


def translate(model: str, set_dir: Path, out_dir: Path, extra: list[str]) -> None:
    """Translate the three files with ``python -m seq2seq translate --json`` into ``out_dir``."""
    for name, file in FILES.items():
        command = [sys.executable, "-m", "seq2seq", "translate", "--model", model, "--json"]
        command += ["-i", str(set_dir / file), "-o", str(out_dir / f"{name}.out"), *extra]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"real_text: translating {file} failed ({done.returncode}):\n{done.stderr[-4000:]}")


def score(set_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Every figure, per file."""
    report: dict[str, Any] = {}
    for name, file in FILES.items():
        sources = read_lines(set_dir / file)
        outputs = [parse_output(line) for line in read_lines(out_dir / f"{name}.out")]
        if len(outputs) != len(sources):
            sys.exit(f"real_text: {name}.out has {len(outputs)} lines, {file} has {len(sources)}")
        if name == "english":
            report[name] = off_target(sources, outputs)
        else:
            report[name] = {
                "lines": len(sources),
                "copy": copy_rate(sources, outputs),
                "length": length_coverage(sources, outputs),
                "warnings": warning_summary(outputs),
            }
    return report


def table(report: dict[str, Any]) -> str:
    """The figures as a small text table."""
    rows = [f"{'set':<11}{'lines':>6}{'copied':>15}{'short':>12}{'median len':>12}{'warned':>8}{'mean conf':>11}"]
    for name in ("sentences", "paragraphs"):
        r = report[name]
        copy, length, warn = r["copy"], r["length"], r["warnings"]
        conf = "-" if warn["mean_confidence"] is None else f"{warn['mean_confidence']:.3f}"
        median = "-" if length["median_ratio"] is None else f"{length['median_ratio']:.2f}"
        rows.append(
            f"{name:<11}{r['lines']:>6}{copy['copied']:>6}/{copy['total']:<4}{_pct(copy['percent']):>4}"
            f"{length['short']:>5} {_pct(length['short_percent']):>6}{median:>12}"
            f"{warn['lines_with_warnings']:>8}{conf:>11}"
        )
    e = report["english"]
    rows.append(
        f"english: {e['handled']}/{e['total']} handled ({e['passed_through']} passed through, {e['warned']} warned)"
    )
    return "\n".join(rows)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="run directory to translate with")
    source.add_argument("--outputs", type=Path, help="score sentences.out, paragraphs.out, english.out in DIR")
    p.add_argument("--set-dir", type=Path, default=SET_DIR, help="the test set (default: benchmarks/real-text)")
    p.add_argument("--out", type=Path, help="write the report as JSON here")
    args = p.parse_args(argv)
    if args.outputs is not None and extra:
        p.error("extra translate arguments need --model")
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.outputs
        if out_dir is None:
            out_dir = Path(tmp)
            translate(args.model, args.set_dir, out_dir, extra)
        report = score(args.set_dir, out_dir)
    report = {"model": args.model, "outputs": None if args.outputs is None else str(args.outputs), **report}
    print(table(report))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
