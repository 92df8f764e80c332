"""Script normalization (seq2seq.data.zh_script, data.src_script): OpenCC conversion, the same function for the
corpus and for translate/evaluate input, the other-script test set, and the error without the extra."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import CLI_ENV, REPO, TOY, TOY_SRC, TOY_TGT, one_line_error, sets, write_lines

from seq2seq.checkpoint import load_checkpoint, save_checkpoint
from seq2seq.config import load_config
from seq2seq.data.corpus import read_pair_files
from seq2seq.data.pipeline import prepare_data
from seq2seq.data.zh_script import converter
from seq2seq.decode.loader import load_model
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.decode.translator import source_normalizer
from seq2seq.errors import UserError

TRADITIONAL, SIMPLIFIED = "今天天氣很好。他們說這個問題很難。", "今天天气很好。他们说这个问题很难。"


def test_conversion_both_ways_and_keep():
    assert converter("simplified")(TRADITIONAL) == SIMPLIFIED
    assert converter("traditional")(SIMPLIFIED) == TRADITIONAL
    assert converter("simplified")(SIMPLIFIED) == SIMPLIFIED  # already simplified: unchanged
    assert converter("keep")(TRADITIONAL) == TRADITIONAL


def test_missing_opencc_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "opencc", None)  # import opencc now raises ImportError
    converter.cache_clear()
    try:
        with pytest.raises(UserError, match=r"data\.tgt_script=traditional needs OpenCC: pip install 'seq2seq\[zh\]'"):
            converter("traditional", "data.tgt_script")
        assert converter("keep")("x") == "x"  # keep needs no OpenCC
    finally:
        converter.cache_clear()


def test_missing_opencc_is_a_one_line_cli_error(tmp_path):
    fake = tmp_path / "site" / "opencc"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no OpenCC here')\n")
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq", "prepare", "--config", TOY, *sets("data.src_script=simplified")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**CLI_ENV, "PYTHONPATH": str(tmp_path / "site")},
        timeout=120,
        check=False,
    )
    assert "seq2seq[zh]" in one_line_error(result)


@pytest.fixture(scope="module")
def mixed_script_run(tmp_path_factory):
    """The toy corpus with every third source in traditional characters, prepared with src_script=simplified."""
    root = tmp_path_factory.mktemp("script")
    src, tgt = read_pair_files(str(TOY_SRC), str(TOY_TGT))
    to_traditional = converter("traditional")
    src = [to_traditional(s) if i % 3 == 0 else s for i, s in enumerate(src)]
    write_lines(root / "mixed.zh", src)
    write_lines(root / "mixed.en", tgt)
    cfg = load_config(
        REPO / TOY,
        [
            f"data.src={root / 'mixed.zh'}",
            f"data.tgt={root / 'mixed.en'}",
            f"data.cache_dir={root / 'cache'}",
            "data.src_script=simplified",
        ],
    )
    return prepare_data(cfg.data, root / "run"), root / "run", src


def test_corpus_is_converted_and_the_other_script_test_set_written(mixed_script_run):
    data, run, raw_src = mixed_script_run
    to_simplified, to_traditional = converter("simplified"), converter("traditional")
    assert sum(to_simplified(s) != s for s in raw_src) > 50  # the corpus really held traditional text
    for split in (data.train_text, data.dev_text, data.test_text):
        assert all(to_simplified(s) == s for s in split.src)
    traditional = (run / "test.traditional.src").read_text(encoding="utf-8").splitlines()
    assert traditional == [to_traditional(s) for s in data.test_text.src]
    assert traditional != data.test_text.src


@pytest.fixture(scope="module")
def simplified_toy_run(toy_run, tmp_path_factory):
    """A copy of the toy run whose stored config says src_script=simplified, with a traditional test set."""
    run = tmp_path_factory.mktemp("simplified_run") / "run"
    shutil.copytree(toy_run, run)
    state = load_checkpoint(run / "best.pt")
    state["config"]["data"]["src_script"] = "simplified"
    save_checkpoint(state, run / "best.pt")
    test = (run / "test.src").read_text(encoding="utf-8").splitlines()
    write_lines(run / "test.traditional.src", [converter("traditional")(s) for s in test])
    return run


def test_translator_reads_traditional_input_as_the_model_was_trained(simplified_toy_run):
    device = torch.device("cpu")
    model, tokenizer, cfg = load_model(simplified_toy_run, device)
    assert cfg.data.src_script == "simplified"
    translator = TorchTranslator(model, tokenizer, cfg.decode, device, normalize_source=source_normalizer(cfg))
    assert translator.encode(TRADITIONAL) == translator.encode(SIMPLIFIED)
    plain = TorchTranslator(model, tokenizer, cfg.decode, device)  # no conversion: other pieces
    assert plain.encode(TRADITIONAL) != plain.encode(SIMPLIFIED)
    a, b = translator.translate([TRADITIONAL, SIMPLIFIED], beam=2)
    assert a.best.text == b.best.text


def test_evaluate_scores_the_traditional_test_set_like_the_simplified_one(simplified_toy_run):
    def evaluate(*args: str) -> dict:
        result = subprocess.run(
            [sys.executable, "-m", "seq2seq", "evaluate", "--model", str(simplified_toy_run), "--json", *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=CLI_ENV,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    simplified = evaluate("--device", "cpu")
    traditional = evaluate("--device", "cpu", "--src", str(simplified_toy_run / "test.traditional.src"))
    assert traditional["bleu"] == simplified["bleu"] and traditional["chrf"] == simplified["chrf"]
    assert traditional["by_novelty"] == simplified["by_novelty"]  # the test set's novelty applies to both
