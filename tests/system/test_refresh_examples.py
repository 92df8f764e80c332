"""scripts/docs/refresh_examples.py, run as a process: marked example blocks rewritten from a model, --check,
one-line errors."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI_ENV, REPO

SENTENCE = "我们明天去公园散步。"
DOC = f"""# A page

<!-- example -->
```console
$ seq2seq translate "{SENTENCE}"
an old translation
$ printf 'two\\nlines\\n' | wc -l
7
```

An unmarked block stays as written:

```console
$ seq2seq translate "{SENTENCE}"
whatever was written here
```
"""


def _refresh(model: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "scripts/docs/refresh_examples.py", "--model", str(model), *args],
        cwd=REPO,
        env=CLI_ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_check_reports_a_stale_block_and_the_refresh_rewrites_only_marked_blocks(toy_run, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(DOC, encoding="utf-8")
    stale = _refresh(toy_run, "--check", str(page))
    assert stale.returncode == 1, stale.stderr
    assert f"{page}:4: example differs" in stale.stdout
    assert page.read_text(encoding="utf-8") == DOC

    rewritten = _refresh(toy_run, str(page))
    assert rewritten.returncode == 0, rewritten.stderr
    text = page.read_text(encoding="utf-8")
    lines = text.split("\n")
    translation = lines[lines.index(f'$ seq2seq translate "{SENTENCE}"') + 1]
    assert translation and not translation.startswith("$ ")  # the toy model's translation, in its place
    assert "$ printf 'two\\nlines\\n' | wc -l\n2\n```" in text  # the commands of a block run in bash
    assert "whatever was written here" in text and "an old translation" not in text

    current = _refresh(toy_run, "--check", str(page))
    assert current.returncode == 0, current.stdout + current.stderr
    assert "1 examples, current" in current.stdout


def test_a_failing_command_is_an_error_naming_the_block(toy_run, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- example -->\n```console\n$ echo fine\n$ cat no-such-file\n```\n", encoding="utf-8")
    done = _refresh(toy_run, str(page))
    assert done.returncode == 2
    assert done.stderr.startswith(f"refresh_examples: error: {page}:2: `cat no-such-file` exited 1; stderr: cat:")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<!-- example -->\nno fence\n", ":1: <!-- example --> must be followed by a fenced block"),
        ("<!-- example -->\n```console\n$ seq2seq translate x\n", ":2: the example's fence is never closed"),
        ("<!-- example -->\n```console\nonly output\n```\n", ":2: the example has no '$ ' command line"),
    ],
)
def test_malformed_blocks_are_refused(toy_run, tmp_path, text, problem):
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    done = _refresh(toy_run, "--check", str(page))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert f"{page}{problem}" in done.stderr


def test_continuation_lines_stay_with_their_command_and_timings_are_not_compared(toy_run, tmp_path):
    command = "$ printf 'BLEU = 1.00\\n1 sentences in 0.7s (1.4 sentences/s)\\n' \\\n  | cat"
    page = tmp_path / "page.md"
    for shown, current in (("BLEU = 1.00", True), ("BLEU = 1.01", False)):
        block = f"{command}\n{shown}\n1 sentences in 0.5s (2.0 sentences/s)"
        page.write_text(f"<!-- example -->\n```console\n{block}\n```\n", encoding="utf-8")
        done = _refresh(toy_run, "--check", str(page))
        assert done.returncode == (0 if current else 1), done.stdout + done.stderr
