"""seq2seq.explain.report and seq2seq.explain.page: the whole report of a tiny seeded model holds
every section, consistent with itself (the translation is greedy's, the masks' batch pads this
sentence), is strict JSON, and the page carries it intact — offline, and with no text of the report
able to break out of its element; engines without tensors, ensembles and empty sentences are
one-line errors."""

import json
import re

import pytest
import torch
from conftest import END, START, Tensorless, build_tiny_model

from seq2seq.config import DecodeConfig
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.errors import UserError
from seq2seq.explain.page import render_page
from seq2seq.explain.report import SECTIONS, Labels, build_report, explain
from seq2seq.model.ensemble import Ensemble

SRC, COMPANION, REF = [5, 6, 7, 3], [5, 6, 7, 8, 9, 10, 3], [11, 12, 13]
HOSTILE = "</script><script>alert(1)</script><!--"


def _labels(ids: list[int]) -> list[str]:
    return [HOSTILE if i == 6 else str(i) for i in ids]


LABELS = Labels(_labels, _labels, lambda ids: " ".join(map(str, ids)))


@pytest.fixture(scope="module")
def report():
    return build_report(build_tiny_model(), SRC, COMPANION, REF, LABELS, DecodeConfig(max_len_b=6), layer=-1, head=3)


def test_every_section_is_there_and_consistent(report):
    assert list(report)[-len(SECTIONS) :] == list(SECTIONS)
    assert report["model"]["parameters"] == sum(p.numel() for p in build_tiny_model().parameters())
    tokens = [row["chosen_id"] for row in report["training_vs_inference"]["greedy"]]
    assert report["translation"]["pieces"] == _labels([t for t in tokens if t != END])
    assert report["decoder_input_pieces"][0] == str(START) and report["predicted_pieces"][-1] == str(END)
    assert (report["attention_head"]["layer"], report["attention_head"]["head"]) == (1, 3)  # -1: the last layer
    assert report["multi_head"]["layer"] == 1
    cross = torch.tensor(report["multi_head"]["cross"])
    assert cross.shape == (4, len(report["decoder_input_pieces"]), len(SRC))
    masks = report["masks"]
    assert masks["lengths"]["source"] == [len(SRC), len(COMPANION)]
    assert masks["source_pieces"][0][len(SRC) :] == ["0"] * (len(COMPANION) - len(SRC))  # <pad>'s id
    assert report["training_vs_inference"]["teacher_forced"][-1]["target_id"] == END
    assert [t["piece"] for t in report["tokens"]["tokens"]] == _labels(SRC)


def test_the_report_is_strict_json(report):
    assert json.loads(json.dumps(report, allow_nan=False)) == report


def test_the_page_carries_the_report_and_fetches_nothing(report):
    page = render_page(report)
    (data,) = re.findall(r'<script id="report-data" type="application/json">(.*?)</script>', page, re.S)
    assert json.loads(data) == {"served": False, "report": report}
    assert HOSTILE not in page and page.count("</script>") == 2  # the data's and the program's own
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}  # a namespace, not a fetch
    assert not re.search(r"<link|@import|url\(|\bsrc=", page)
    assert "__REPORT_JSON__" not in page
    assert json.loads(re.findall(r'type="application/json">(.*?)</script>', render_page(None, True), re.S)[0]) == {
        "served": True,
        "report": None,
    }


def test_an_engine_without_tensors_is_refused():
    with pytest.raises(UserError, match="the other engine does not support explain; use --engine torch"):
        explain(Tensorless.__new__(Tensorless), "今天天气很好。")


def test_an_ensemble_and_an_empty_sentence_are_user_errors():
    tiny = build_tiny_model()
    cpu = torch.device("cpu")
    with pytest.raises(UserError, match="give one --model"):
        explain(TorchTranslator(Ensemble([tiny, tiny]), None, DecodeConfig(), cpu), "你好。")
    with pytest.raises(UserError, match="empty"):
        explain(TorchTranslator(tiny, None, DecodeConfig(), cpu), "   ")
