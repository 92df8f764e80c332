"""``evaluate`` scoring for any target language, end to end on the shared toy run: BLEU's tokenizer comes
from ``--tokenize``, else from the model's config (``data.tgt_lang``), and the signature shows it;
several ``--ref`` give multi-reference scores equal to sacrebleu's, for one system and in comparisons.
Happy paths run ``seq2seq.cli.main`` in this process; errors run the real command."""

import json
import shutil

import pytest
import sacrebleu
from conftest import one_line_error, run_cli, write_lines

from seq2seq.checkpoint import DIGEST_KEY, load_checkpoint, save_checkpoint
from seq2seq.cli import main

HYPS = ["我昨天去了北京。", "他很喜欢喝茶。", "今天天气很好。"]
REFS = ["我昨天去北京了。", "他非常喜欢喝茶。", "今天的天气很好。"]
REFS_2 = ["昨天我去了北京。", "他很爱喝茶。", "今天天气不错。"]


def _json(capsys, *args: str) -> dict:
    main(list(args))
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def zh_run(toy_run, tmp_path):
    """A copy of the toy run whose checkpoint says its target language is Chinese."""
    run = tmp_path / "zh-run"
    shutil.copytree(toy_run, run)
    state = load_checkpoint(run / "best.pt")
    state["config"]["data"]["tgt_lang"] = "zh"
    save_checkpoint({k: v for k, v in state.items() if k != DIGEST_KEY}, run / "best.pt")
    return run


def test_hypotheses_against_two_references_with_a_named_tokenizer(tmp_path, capsys):
    files = [write_lines(tmp_path / name, lines) for name, lines in (("h", HYPS), ("a", REFS), ("b", REFS_2))]
    hyp, ref_a, ref_b = map(str, files)
    args = ["evaluate", "--model", str(tmp_path), "--hyp", hyp, "--ref", ref_a, "--ref", ref_b, "--json"]
    report = _json(capsys, *args, "--tokenize", "zh")
    assert report["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS_2], tokenize="zh").score, abs=0.005)
    assert report["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS, REFS_2]).score, abs=0.005)
    assert "nrefs:2" in report["bleu_signature"] and "tok:zh" in report["bleu_signature"]
    assert "tok:13a" in _json(capsys, *args)["bleu_signature"]  # no model config here: sacrebleu's default

    comparison = _json(capsys, *args[:3], "--hyp", hyp, "--hyp", ref_b, *args[5:], "--tokenize", "zh")
    first = comparison["systems"][0]["BLEU"]["score"]
    assert first == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS_2], tokenize="zh").score, abs=0.01)
    assert "nrefs:2" in comparison["signatures"]["BLEU"] and "tok:zh" in comparison["signatures"]["BLEU"]


def test_the_tokenizer_follows_the_models_target_language(zh_run, capsys):
    args = ["evaluate", "--model", str(zh_run), "--device", "cpu", "--beam", "1", "--json"]
    assert "tok:zh" in _json(capsys, *args)["bleu_signature"]
    assert "tok:13a" in _json(capsys, *args, "--tokenize", "13a")["bleu_signature"]


def test_comparing_runs_scored_with_different_tokenizers_is_a_one_line_error(toy_run, zh_run):
    line = one_line_error(run_cli("evaluate", "--device", "cpu", "--compare", str(toy_run), str(zh_run)))
    assert "different tokenizers" in line and "--tokenize" in line
