"""seq2seq.evaluate.compare with several references and a named BLEU tokenizer: each system's score is
sacrebleu's own for those reference streams and that tokenizer, and the signatures say so."""

import pytest
import sacrebleu

from seq2seq.evaluate.compare import compare

REFS = ["我昨天去北京了。", "他非常喜欢喝茶。", "今天的天气很好。", "我们明天见。"]
REFS_2 = ["昨天我去了北京。", "他很爱喝茶。", "今天天气不错。", "明天见。"]
SYSTEMS = [("a", ["我昨天去了北京。", "他喜欢茶。", "今天天气很好。", "明天见。"]), ("b", REFS_2)]


def test_multi_reference_comparison_scores_as_sacrebleu():
    result = compare(SYSTEMS, [REFS, REFS_2], bootstrap=50, trials=50, tokenize="zh")
    for (_, lines), scores in zip(SYSTEMS, result.results, strict=True):
        assert scores["BLEU"].score == pytest.approx(
            sacrebleu.corpus_bleu(lines, [REFS, REFS_2], tokenize="zh").score, abs=0.01
        )
        assert scores["chrF"].score == pytest.approx(sacrebleu.corpus_chrf(lines, [REFS, REFS_2]).score, abs=0.01)
    assert result.sentences == 4
    assert "nrefs:2" in result.signatures["BLEU"] and "tok:zh" in result.signatures["BLEU"]
