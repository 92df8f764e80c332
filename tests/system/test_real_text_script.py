"""scripts/bench/real_text.py scores hand-written outputs (plain and JSON lines) over a tiny set, to the figure."""

import json
import subprocess
import sys

import pytest
from conftest import CLI_ENV, REPO

SET = {
    "sentences.zh": [
        "请打电话138-0013-8000。",  # 3 tokens, all copied
        "我买了3个苹果和3个梨。",  # 3 twice: one copy is not enough
        "我用GitHub。",  # case-sensitive: github is not GitHub
    ],
    "paragraphs.zh": [
        "今天下雨了。我在家看书。明天去公园。",  # 15 Han characters: 9.75 words expected
        "版本v2.1.3已经发布。请运行pip install foo。",  # 9 Han characters and 6 tokens: 11.85 words expected
    ],
    "english.en": ["Thank you!", "Where is the station?", "OK."],
}

OUTPUTS = {
    "sentences.out": [
        "Please call 138-0013-8000.",
        json.dumps({"translation": "I bought 3 apples and three pears.", "confidence": 0.5, "warnings": ["a number"]}),
        "I use github.",
    ],
    "paragraphs.out": [
        json.dumps(
            {
                "translation": "It rained today.",
                "confidence": 0.7,
                "warnings": [],
                "sentences": [
                    {"source": "今天下雨了。", "translation": "It rained today.", "warnings": []},
                    {"source": "我在家看书。", "translation": "", "warnings": ["sentence dropped"]},
                ],
            }
        ),
        json.dumps(
            {
                "translation": "Version v2.1.3 has been released. Please run pip install foo.",
                "confidence": 0.9,
                "warnings": [],
            }
        ),
    ],
    "english.out": [
        "  Thank you! ",  # passed through (whitespace aside)
        json.dumps({"translation": "车站在哪里？", "warnings": ["looks like English, not the source Language"]}),
        "好的。",  # translated, no warning: not handled
    ],
}


def _write(directory, files: dict[str, list[str]]) -> None:
    directory.mkdir()
    for name, lines in files.items():
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "scripts/bench/real_text.py", *args]
    return subprocess.run(command, cwd=REPO, env=CLI_ENV, capture_output=True, text=True, timeout=60)


def test_scores_plain_and_json_outputs(tmp_path):
    _write(tmp_path / "set", SET)
    _write(tmp_path / "out", OUTPUTS)
    report_path = tmp_path / "report.json"
    args = ["--outputs", str(tmp_path / "out"), "--set-dir", str(tmp_path / "set"), "--out", str(report_path)]
    done = _run(*args)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))

    sentences = report["sentences"]
    assert sentences["copy"] == {"copied": 4, "total": 6, "percent": 66.67}
    # ratios 3/5.6, 7/7.85, 3/2.3: none short, the median is the middle one
    assert sentences["length"] == {"lines": 3, "short": 0, "short_percent": 0.0, "median_ratio": round(7 / 7.85, 4)}
    assert sentences["warnings"] == {"lines_with_warnings": 1, "lines_with_confidence": 1, "mean_confidence": 0.5}

    paragraphs = report["paragraphs"]
    assert paragraphs["copy"] == {"copied": 6, "total": 6, "percent": 100.0}
    # 3 words of 9.75 expected is short; 10 of 11.85 is not
    median = round((3 / 9.75 + 10 / 11.85) / 2, 4)
    assert paragraphs["length"] == {"lines": 2, "short": 1, "short_percent": 50.0, "median_ratio": median}
    # a warning of one sentence counts for its line
    assert paragraphs["warnings"] == {"lines_with_warnings": 1, "lines_with_confidence": 2, "mean_confidence": 0.8}

    assert report["english"] == {"handled": 2, "total": 3, "percent": 66.67, "passed_through": 1, "warned": 1}
    assert "english: 2/3 handled (1 passed through, 1 warned)" in done.stdout
    assert "4/6" in done.stdout


def test_refuses_outputs_that_do_not_line_up(tmp_path):
    _write(tmp_path / "set", SET)
    _write(tmp_path / "out", {**OUTPUTS, "paragraphs.out": OUTPUTS["paragraphs.out"][:1]})
    done = _run("--outputs", str(tmp_path / "out"), "--set-dir", str(tmp_path / "set"))
    assert done.returncode != 0
    assert "paragraphs.out has 1 lines, paragraphs.zh has 2" in done.stderr


@pytest.mark.parametrize("name", ["sentences.zh", "paragraphs.zh", "english.en"])
def test_shipped_set_holds_no_corpus_sentence(name):
    lines = (REPO / "benchmarks" / "real-text" / name).read_text(encoding="utf-8").splitlines()
    assert lines and all(line.strip() for line in lines)
    for corpus in ("data/tatoeba-cmn-eng-full/all.zh", "data/hsk-zh-en/all.zh", "data/tatoeba-cmn-eng-full/all.en"):
        path = REPO / corpus
        if path.exists():
            assert not set(lines) & set(path.read_text(encoding="utf-8").splitlines())


def test_the_default_set_is_the_repositorys(tmp_path):
    """Without --set-dir the script scores against benchmarks/real-text: outputs that copy its sources are read."""
    files = {"sentences": "sentences.zh", "paragraphs": "paragraphs.zh", "english": "english.en"}
    sources = {
        name: (REPO / "benchmarks" / "real-text" / file).read_text(encoding="utf-8").splitlines()
        for name, file in files.items()
    }
    _write(tmp_path / "out", {f"{name}.out": lines for name, lines in sources.items()})
    done = _run("--outputs", str(tmp_path / "out"), "--out", str(tmp_path / "report.json"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["sentences"]["lines"] == len(sources["sentences"]) > 100
