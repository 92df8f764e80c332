"""seq2seq.serve.app: the HTTP API on the shared toy run. Translations equal ``seq2seq translate``'s for
the same settings, also when requests are batched together; every kind of bad input is a 4xx JSON
error (never a 500 or a traceback); caps name their limit; the OpenAPI schema describes the
endpoints; a real ``seq2seq serve`` process finishes its requests in flight on SIGTERM and exits.
"""

import json
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import FUZZ, http_json, run_cli, serve_process
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.cli import build_parser, main
from seq2seq.decode.loader import load_translator
from seq2seq.device import decode_precision
from seq2seq.serve.app import RequestLimits, create_app
from seq2seq.serve.batcher import BatchLimits

SENTENCES = ["我们去散步。", "他昨天去了北京。", "今天天气很好。", "我想喝一杯咖啡。", "你好。", "这本书是我的。"]
LIMITS = RequestLimits(max_body_bytes=4096, max_sentences=4, max_chars=30)


@pytest.fixture(scope="module")
def client(toy_run):
    translator = load_translator([toy_run], torch.device("cpu"))  # what translate and serve use
    app = create_app(translator, "toy", 60, LIMITS, BatchLimits(max_wait_ms=50, max_sentences=16))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_health_describes_the_model(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "model": "toy",
        "step": 60,
        "vocabulary": {"source": 1200, "target": 1200},
        "device": "cpu",
        "precision": decode_precision("auto", torch.device("cpu")),  # bf16 where the CPU computes it natively
    }


def test_page_is_served_self_contained(client):
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert "/translate" in page and "<script>" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from elsewhere: works offline


def test_same_translations_as_the_cli_also_when_batched_together(client, toy_run):
    """Each sentence sent as its own request, all at once (so the batcher mixes them), and as one list."""
    expected = run_cli(
        "translate", "--model", str(toy_run), "--device", "cpu", "--beam", "3", "--nbest", "2", "--json", *SENTENCES
    )
    assert expected.returncode == 0, expected.stderr
    want = [json.loads(line) for line in expected.stdout.splitlines()]
    assert any(w["translation"] for w in want)  # not a vacuous comparison of empty outputs

    def one(sentence: str) -> dict:
        response = client.post("/translate", json={"text": sentence, "beam": 3, "nbest": 2})
        assert response.status_code == 200, response.text
        return response.json()["results"][0]

    with ThreadPoolExecutor(len(SENTENCES)) as pool:
        singles = list(pool.map(one, SENTENCES))
    as_list = client.post("/translate", json={"text": SENTENCES[:4], "beam": 3, "nbest": 2}).json()["results"]
    for got in (singles, as_list):
        for g, w in zip(got, want, strict=False):
            assert (g["source"], g["translation"], g["score"], g["tokens"]) == (
                w["source"],
                w["translation"],
                w["score"],
                w["tokens"],
            )
            assert [(h["translation"], h["score"]) for h in g["nbest"]] == [
                (h["translation"], h["score"]) for h in w["nbest"]
            ]


def test_attention_has_every_layer_and_head_with_labels(client):
    response = client.post("/translate", json={"text": ["我们去散步。", "你好。"], "beam": 2, "attention": True})
    assert response.status_code == 200
    for result in response.json()["results"]:
        att = result["attention"]
        s, t = len(att["source_pieces"]), len(att["target_pieces"])
        assert att["source_pieces"][-1] == "<end>" and att["target_pieces"] == [*result["tokens"], "<end>"]
        assert att["decoder_input_pieces"] == ["<start>", *result["tokens"]]
        for kind, layers, rows, cols in (("encoder", 2, s, s), ("decoder", 2, t, t), ("cross", 2, t, s)):
            weights = torch.tensor(att[kind])
            assert weights.shape == (layers, 4, rows, cols), kind  # toy config: 2+2 layers, 4 heads
            assert torch.allclose(weights.sum(-1), torch.ones(layers, 4, rows), atol=1e-3), kind
        assert (torch.tensor(att["decoder"]).triu(1) == 0).all()  # the causal mask


def test_nbest_only_when_asked(client):
    result = client.post("/translate", json={"text": "你好。", "beam": 2}).json()["results"][0]
    assert "nbest" not in result and "attention" not in result


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"text": []}, "text"),
        ({"text": ""}, "text"),
        ({}, "text"),
        ({"text": 5}, "text"),
        ({"text": ["ok", 5]}, "text"),
        ({"text": "你好", "beam": "5"}, "beam"),
        ({"text": "你好", "beam": 2.5}, "beam"),
        ({"text": "你好", "beam": 0}, "beam"),
        ({"text": "你好", "beam": 1000}, "beam"),
        ({"text": "你好", "nbest": 0}, "nbest"),
        ({"text": "你好", "beam": 2, "nbest": 3}, "nbest 3 is more than beam 2"),
        ({"text": "你好", "attention": "yes"}, "attention"),
        ({"text": "你好", "file": "/etc/passwd"}, "file"),
        ([1, 2], "body"),
        (None, "body"),
    ],
)
def test_bad_input_is_a_json_4xx_naming_the_field(client, body, named):
    response = client.post("/translate", json=body)
    assert response.status_code == 422, response.text
    assert named in response.json()["error"]


@pytest.mark.parametrize("raw", [b'{"text": "a"', b"\xff\xfe", b"text=a", b"", b'{"text": "\\ud800"}'])
def test_malformed_json_is_a_json_422(client, raw):
    response = client.post("/translate", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]


@pytest.mark.parametrize(
    ("body", "limit"),
    [
        ({"text": ["你好"] * 5}, "max-sentences"),
        ({"text": "好" * 31}, "max-chars"),
        ({"text": ["好", "好" * 31]}, "max-chars"),
        ({"text": "好" * 2000}, "max-body-bytes"),
    ],
)
def test_caps_are_413_naming_the_limit(client, body, limit):
    response = client.post("/translate", json=body)
    assert response.status_code == 413, response.text
    assert response.json()["limit"] == limit
    assert any(cap in response.json()["error"] for cap in ("at most 4", "at most 30", "over 4096 bytes"))


def test_a_chunked_body_over_the_cap_is_413(client):
    parts = (part for part in [b'{"text": "', b"a" * 5000, b'"}'])  # a generator: sent without Content-Length
    response = client.post("/translate", content=parts, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["limit"] == "max-body-bytes"


def test_unknown_paths_and_methods_are_json_errors(client):
    for response in (client.get("/nothing"), client.get("/translate"), client.post("/health"), client.get("/docs")):
        assert response.status_code in (404, 405)
        assert response.json()["error"]


def test_openapi_schema_describes_requests_responses_and_errors(client):
    schema = client.get("/openapi.json").json()
    request = schema["components"]["schemas"]["TranslateRequest"]
    assert request["additionalProperties"] is False
    assert set(request["properties"]) == {"text", "beam", "nbest", "attention"} and request["required"] == ["text"]
    post = schema["paths"]["/translate"]["post"]
    assert set(post["responses"]) == {"200", "413", "422"}
    assert post["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    result = schema["components"]["schemas"]["SentenceResult"]["properties"]
    assert {"source", "translation", "score", "tokens", "nbest", "attention"} == set(result)
    assert set(schema["paths"]) == {"/translate", "/health"}


# SIGTERM is re-raised once done; Ctrl-C ends with 130, or 0 where the process started with SIGINT
# ignored (a shell's background job) and so cannot be stopped by re-raising it.
@pytest.mark.parametrize(("stop", "status"), [(signal.SIGTERM, {-signal.SIGTERM}), (signal.SIGINT, {130, 0})])
def test_a_stop_signal_finishes_requests_in_flight_then_exits(toy_run, stop, status):
    """Requests wait in a long batching window when the signal arrives: they are answered, new ones refused."""
    with serve_process(toy_run, "--batch-wait-ms", "2500") as (process, url):
        answers: list[tuple[int, dict]] = []

        def ask(sentence: str) -> None:
            answers.append(http_json(f"{url}/translate", {"text": sentence, "beam": 2}))

        threads = [threading.Thread(target=ask, args=(s,)) for s in SENTENCES[:3]]
        for thread in threads:
            thread.start()
        time.sleep(0.8)  # the requests have reached the batcher, which waits 2.5 s for company
        process.send_signal(stop)
        time.sleep(0.4)
        with pytest.raises(OSError):  # no longer accepting
            http_json(f"{url}/health", timeout=5)
        assert all(thread.is_alive() for thread in threads)  # ... but still answering
        for thread in threads:
            thread.join(timeout=60)
        assert process.wait(timeout=60) in status
        log = process.stdout.read()
    assert sorted(a[1]["results"][0]["source"] for a in answers) == sorted(SENTENCES[:3]), log
    assert all(code == 200 for code, _ in answers)
    assert "Finished server process" in log and "Traceback" not in log


def test_binds_loopback_by_default():
    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"


def test_without_the_serve_extra_it_says_how_to_install(monkeypatch, capsys, toy_run):
    for name in [m for m in sys.modules if m.split(".")[0] in ("fastapi", "uvicorn") or m.startswith("seq2seq.serve")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)  # makes `import fastapi` raise ImportError
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--model", str(toy_run)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == "seq2seq: error: serve needs fastapi: pip install 'seq2seq[serve]'\n"


# -- fuzzing: random JSON bodies and raw bytes are answered, never with a server error -----------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# Near-valid requests reach the model (so the batcher is fuzzed too); anything else tests validation.
REQUESTS = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=40) | st.lists(st.text(max_size=20), max_size=5) | JSON_VALUES,
        "beam": st.integers(-2, 12) | JSON_VALUES,
        "nbest": st.integers(-2, 12) | JSON_VALUES,
        "attention": st.booleans() | JSON_VALUES,
        "unknown_field": JSON_VALUES,
    },
)


@settings(FUZZ, max_examples=80)
@given(body=REQUESTS | JSON_VALUES)
def test_random_json_bodies_get_an_answer_never_a_server_error(client, body):
    response = client.post("/translate", json=body)
    assert response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/json")
    if response.status_code >= 400:
        assert isinstance(response.json()["error"], str)


@settings(FUZZ, max_examples=40)
@given(raw=st.binary(max_size=300))
def test_random_bytes_are_a_4xx_json_error(client, raw):
    response = client.post("/translate", content=raw, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert isinstance(response.json()["error"], str)
