"""seq2seq.explain.routes: ``seq2seq serve``'s /explain page and /explain.json on the shared toy run
(conftest.toy_run) give the report ``explain`` builds for the same sentence, number for number, on
the server's private copy of the model; bad input is a JSON error like every other of the server."""

import json
import re

import pytest
import torch
from conftest import Tensorless, unhooked
from fastapi import FastAPI
from fastapi.testclient import TestClient

from seq2seq.decode.loader import load_translator
from seq2seq.explain.report import SECTIONS, explain
from seq2seq.explain.routes import add_explain_routes
from seq2seq.serve.app import RequestLimits, create_app

SENTENCE, REF = "今天天气很好。", "The weather is nice today."


@pytest.fixture(scope="module")
def served(toy_run):
    translator = load_translator([toy_run], torch.device("cpu"), precision="float32")
    app = create_app(translator, "toy", 60, RequestLimits(max_chars=30))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield translator, client


def test_the_json_is_the_report_of_explain(served):
    translator, client = served
    response = client.get("/explain.json", params={"text": SENTENCE, "ref": REF, "layer": 1, "head": 2})
    assert response.status_code == 200, response.text
    got = response.json()
    assert list(got)[-len(SECTIONS) :] == list(SECTIONS)
    assert got == json.loads(json.dumps(explain(translator, SENTENCE, REF, 1, 2)))
    assert unhooked(translator.model)  # the served model was never tapped


def test_the_page_is_served_with_its_form(served):
    _, client = served
    page = client.get("/explain", params={"text": SENTENCE})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    data = json.loads(re.findall(r'type="application/json">(.*?)</script>', page.text, re.S)[0])
    assert data["served"] is True and data["report"]["sentence"] == SENTENCE and data["report"]["reference"] is None
    empty = client.get("/explain")
    assert empty.status_code == 200
    assert json.loads(re.findall(r'type="application/json">(.*?)</script>', empty.text, re.S)[0])["report"] is None


def test_bad_requests_are_json_errors(served):
    _, client = served
    layer = client.get("/explain.json", params={"text": SENTENCE, "layer": 9})
    assert layer.status_code == 422
    assert layer.json() == {"error": "layer 9: the encoder has 2 layers (0 to 1, or -1 for the last)"}
    long = client.get("/explain", params={"text": "好" * 31})
    assert long.status_code == 413 and long.json() == {"error": "text: 31 characters; at most 30", "limit": "max-chars"}
    missing = client.get("/explain.json")
    assert missing.status_code == 422 and "text" in missing.json()["error"]
    not_int = client.get("/explain.json", params={"text": SENTENCE, "head": "x"})
    assert not_int.status_code == 422 and not_int.json()["error"].startswith("head:")


def test_an_engine_without_tensors_is_a_422():
    app = FastAPI()
    add_explain_routes(app, Tensorless.__new__(Tensorless), max_chars=100)
    response = TestClient(app).get("/explain.json", params={"text": SENTENCE})
    assert response.status_code == 422
    assert response.json() == {"error": "the other engine does not support explain; use --engine torch"}
