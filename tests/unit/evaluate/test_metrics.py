"""seq2seq.evaluate.metrics: BLEU's tokenizer follows the target language as sacrebleu maps it (unless
named), Chinese scored with ``zh`` is what sacrebleu gives and not what ``13a`` gives, several reference
streams score as sacrebleu scores them, and a tokenizer missing its extra is a one-line error."""

import importlib

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from seq2seq.errors import UserError
from seq2seq.evaluate.metrics import bleu_metric, bleu_tokenizer, corpus_scores

HYPS = ["我昨天去了北京。", "他很喜欢喝茶。", "今天天气很好。"]
REFS = ["我昨天去北京了。", "他非常喜欢喝茶。", "今天的天气很好。"]
REFS_2 = ["昨天我去了北京。", "他很爱喝茶。", "今天天气不错。"]


@pytest.mark.parametrize(
    ("lang", "expected"),
    [("zh", "zh"), ("zh-Hant", "zh"), ("ZH_tw", "zh"), ("ja", "ja-mecab"), ("ko", "ko-mecab"), ("en", "13a")]
    + [("de", "13a"), (None, "13a")],
)
def test_the_tokenizer_follows_the_target_language(lang, expected):
    assert bleu_tokenizer(lang) == expected
    assert bleu_tokenizer(lang, "char") == "char"  # a named tokenizer wins


@pytest.mark.parametrize("lang", ["zh", "en", "fr"])
def test_the_choice_is_sacrebleus_own(lang):
    theirs, ours = BLEU(trg_lang=lang), BLEU(tokenize=bleu_tokenizer(lang))
    assert ours.tokenizer_signature == theirs.tokenizer_signature


def test_chinese_scored_with_zh_differs_from_13a_as_sacrebleu_says():
    zh, plain = corpus_scores(HYPS, REFS, "zh"), corpus_scores(HYPS, REFS)
    assert zh.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="zh").score)
    assert plain.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="13a").score)
    assert plain.bleu == 0.0 < zh.bleu  # 13a: each unsegmented line is one "word", and no line matches whole
    assert "tok:zh" in zh.bleu_signature and "tok:13a" in plain.bleu_signature
    assert zh.chrf == plain.chrf  # chrF counts characters: no tokenizer


def test_several_references_score_as_sacrebleu_scores_them():
    both = corpus_scores(HYPS, [REFS, REFS_2], "zh")
    assert both.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS_2], tokenize="zh").score)
    assert both.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS, REFS_2]).score)
    assert both.bleu > corpus_scores(HYPS, REFS, "zh").bleu  # a second reference can only match more
    assert "nrefs:2" in both.bleu_signature and "nrefs:2" in both.chrf_signature


def test_a_reference_stream_of_another_length_is_a_user_error():
    with pytest.raises(UserError, match="3 translations but 2 references"):
        corpus_scores(HYPS, [REFS, REFS_2[:2]])


@pytest.mark.parametrize(
    ("tokenize", "module", "extra"), [("ja-mecab", "ja_mecab", "ja"), ("ko-mecab", "ko_mecab", "ko")]
)
def test_a_mecab_tokenizer_without_its_extra_is_a_one_line_error(monkeypatch, tokenize, module, extra):
    tokenizer_module = importlib.import_module(f"sacrebleu.tokenizers.tokenizer_{module}")
    monkeypatch.setattr(tokenizer_module, "MeCab", None)  # what sacrebleu sets when the import failed
    with pytest.raises(UserError) as err:
        bleu_metric(tokenize)
    assert str(err.value) == f"BLEU tokenizer {tokenize} needs MeCab and its dictionary: pip install 'seq2seq[{extra}]'"
