"""Fuzzing translate's input: arbitrary Unicode (control characters, every kind of line break, combining
marks, right-to-left text, byte-order marks, 10^4-character lines) gives one translation per input line and
no exception, through the Translator and through the command line."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import CLI_ENV, FUZZ, REPO, one_line_error, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.decode.loader import load_model
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.decode.translator import Translator

# Unicode's line breaks besides LF (str.splitlines splits at all of them), other controls, marks and scripts.
BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
ODD = BREAKS + "\x00\x01\x07\x1b\x7f\t \ufeff\u200b\u200d\u200e\u200f\u202a\u202e\u2066\u0301\u0308\u20dd\ufe0f"
SCRIPTS = "我想喝咖啡今天天气很好。سلامעבריתहिन्दीÅé\U0001f600\U00020000"

lines = st.text(st.sampled_from(ODD + SCRIPTS) | st.characters(exclude_categories=["Cs"]), max_size=30)
long_lines = st.tuples(st.sampled_from(SCRIPTS + ODD), st.integers(5_000, 10_000)).map(lambda c: c[0] * c[1])


@pytest.fixture(scope="module")
def translator(toy_run) -> Translator:
    model, tokenizer, cfg = load_model(toy_run, torch.device("cpu"))
    return TorchTranslator(model, tokenizer, cfg.decode, torch.device("cpu"))


@settings(FUZZ, max_examples=40)
@given(
    batch=st.lists(lines, min_size=1, max_size=6), long=st.lists(long_lines, max_size=1), beam=st.sampled_from([1, 2])
)
def test_translator_gives_one_single_line_translation_per_input(translator, batch, long, beam):
    sentences = batch + long
    results = translator.translate(sentences, beam=beam)
    assert [r.source for r in results] == sentences
    for result in results:
        text = result.best.text
        assert text.splitlines() in ([text], []), ascii(text)  # printing it adds exactly one line


def test_translate_cli_keeps_one_output_line_per_input_line(toy_run, tmp_path):
    """Every line break Unicode knows, inside lines, on stdin and in a file: the output still has exactly one
    line per input line (LF-separated), with the source echoed unchanged in --json."""
    inputs = [
        "我想喝咖啡。",
        "",
        "a" + "\u2028".join("今天天气很好") + "\x85b",
        "tab\tform\x0cfeed\x0bvertical\x1cfile\x1dgroup\x1erecord",
        "lone\rcarriage return",
        "\ufeffbom, nul \x00 and bell \x07",
        "e\u0301\u0308 \u202eRTL override\u202c עברית سلام",
        "咖" * 10_000,
        "   ",
    ]
    text = "".join(line + "\n" for line in inputs)
    result = run_cli("translate", "--model", str(toy_run), "--device", "cpu", "--json", "--beam", "1", stdin=text)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.split("\n")[:-1]]
    assert [r["source"] for r in records] == inputs
    (tmp_path / "in.txt").write_bytes(text.replace("\n", "\r\n").encode("utf-8"))  # CRLF in the file
    out = tmp_path / "out.txt"
    args = ("-i", str(tmp_path / "in.txt"), "-o", str(out), "--beam", "1")
    result = run_cli("translate", "--model", str(toy_run), "--device", "cpu", *args)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().count(b"\n") == len(inputs)
    assert out.read_text(encoding="utf-8").split("\n")[:-1] == [r["translation"] for r in records]


def test_translate_cli_bad_utf8_on_stdin_is_a_one_line_error(toy_run):
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq", "translate", "--model", str(toy_run), "--device", "cpu"],
        input="好。\n".encode() + b"caf\xe9\n",  # Latin-1, not UTF-8, on the second line
        capture_output=True,
        cwd=REPO,
        env=CLI_ENV,
        timeout=120,
    )
    # stdin is translated as it streams in: the line before the bad one is already out, and nothing after it
    assert len(result.stdout.decode().splitlines()) == 1
    decoded = subprocess.CompletedProcess(result.args, result.returncode, "", result.stderr.decode())
    assert "stdin line 2: not valid UTF-8" in one_line_error(decoded)
