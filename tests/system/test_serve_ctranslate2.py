"""``seq2seq serve --engine ctranslate2`` as a client sees it: the server starts on a model exported from the
shared toy run, says which model and step it serves, and answers a request with the translations the
CTranslate2 engine gives in this process; what the engine cannot do (attention) is a 422 naming it."""

from conftest import http_json, serve_process

from seq2seq.decode.ctranslate2 import CTranslate2Translator
from seq2seq.export.ctranslate2 import export_ctranslate2

SENTENCES = ["我很好。", "他昨天去了北京。"]


def test_serve_on_the_ctranslate2_engine_answers_like_the_engine(toy_run, tmp_path):
    exported = export_ctranslate2(toy_run, tmp_path / "ct2")
    expected = CTranslate2Translator(exported, threads=1).translate(SENTENCES, beam=2)
    assert any(t.best.text for t in expected)  # guard: the toy model says something
    with serve_process(exported, "--engine", "ctranslate2") as (_, url):
        status, health = http_json(f"{url}/health")
        assert status == 200 and health["model"] == str(exported)
        assert health["step"] == 60  # the step of the checkpoint it was exported from (conftest.toy_run)
        status, answer = http_json(f"{url}/translate", {"text": SENTENCES, "beam": 2})
        assert status == 200, answer
        assert [r["translation"] for r in answer["results"]] == [t.best.text for t in expected]
        assert [r["tokens"] for r in answer["results"]] == [t.best.pieces for t in expected]
        status, refused = http_json(f"{url}/translate", {"text": SENTENCES[0], "attention": True})
        assert status == 422 and "ctranslate2 engine has no attention weights" in refused["error"]
