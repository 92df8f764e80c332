"""``seq2seq serve`` under load and faults, as a real process on loopback with the toy run, using the
clients of tests/faulty_clients.py (scripts/soak/soak_serve.py runs them for minutes, outside CI, for the
figures in docs/reliability.md).

An overload burst (several times the queue) mixed with malformed and oversized bodies, slow clients
trickling their bodies (one past its deadline), and clients that leave mid-body or right after
sending; then a second burst with a SIGTERM in its middle. Afterwards: no 5xx but the designed
503/504; every client that stayed got exactly one response, and each 200 its own sentence; the
server counted every request once; its RSS is back within a bound; it exits within its grace time.
And the bodies over the size cap that once ended in a broken pipe: a 413 every time, then service.
"""

import random
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from conftest import rss_mib, serve_process
from faulty_clients import (
    OVERSIZED,
    SENTENCES,
    Outcome,
    chunked,
    client,
    exchange,
    head,
    problems,
    translate_body,
)

QUEUE, TIMEOUT_S = 8, 3.0
FLAGS = ("--max-queue-sentences", str(QUEUE), "--batch-sentences", "4", "--request-timeout-s", str(TIMEOUT_S))
FLAGS += ("--max-body-bytes", "4096")
RSS_BOUND_MIB = 64  # over the warmed-up server; queued requests that were never freed would exceed it soon
GRACE_S = TIMEOUT_S + 1 + 10  # the deadline, uvicorn's margin over it, and the last batch on a busy machine


def _metrics(port: int) -> dict[str, float]:
    reply = exchange(port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", b"")
    assert reply is not None and reply.status == 200
    samples = {}
    for line in reply.body.decode().splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def _served(samples: dict[str, float]) -> dict[int, int]:
    prefix = 'seq2seq_requests_total{status="'
    return {int(k[len(prefix) : -2]): int(v) for k, v in samples.items() if k.startswith(prefix)}


def _burst(port: int, kinds: list[str], seed: int) -> list[Outcome]:
    """One client per kind, all at once; each sentence unique, so that a 200 can be matched to its request."""
    rng = random.Random(seed)
    with ThreadPoolExecutor(len(kinds)) as pool:
        futures = [
            pool.submit(client, kind, port, f"{SENTENCES[n % len(SENTENCES)]}{seed}-{n}", rng, TIMEOUT_S)
            for n, kind in enumerate(kinds)
        ]
        return [f.result() for f in futures]


def _until(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_overload_malformed_slow_and_vanishing_clients_then_sigterm(toy_run):
    with serve_process(toy_run, *FLAGS) as (process, url):
        port = int(url.rsplit(":", 1)[1])
        polls = 0

        def metrics() -> dict[str, float]:
            nonlocal polls
            polls += 1
            return _metrics(port)

        # A first full queue brings the server to its working set (every serving thread has run),
        # so what grows after it is what the faults below leave behind.
        warm = _burst(port, ["translate"] * 5 * QUEUE, seed=0)
        assert all(o.reply for o in warm)
        warm_statuses = [o.reply.status for o in warm]
        assert 200 in warm_statuses and set(warm_statuses) <= {200, 503}  # served, or the queue was full
        rss_before = rss_mib(process.pid)

        kinds = ["translate"] * 5 * QUEUE + ["translate-deadline"] * 8
        kinds += ["malformed-json", "wrong-type"] * 2 + ["oversized-declared", "oversized-chunked"]
        kinds += ["trickle"] * 3 + ["trickle-past-deadline"] + ["leave-mid-body", "leave-after-request"] * 4
        outcomes = _burst(port, kinds, seed=1)
        assert [p for o in outcomes for p in problems(o)] == []
        statuses = [o.reply.status for o in outcomes if o.reply]
        assert statuses.count(503) >= 1 and statuses.count(200) >= 1  # it was overloaded, and it served
        assert statuses.count(413) == 2 and statuses.count(422) == 4
        [late] = [o for o in outcomes if o.kind == "trickle-past-deadline"]
        assert late.reply is not None and late.reply.status == 408 or "ConnectionResetError" in str(late.error)

        def idle() -> bool:  # every request ended (1: this one), no batch left (a leaver's may still run)
            now = metrics()
            return now["seq2seq_requests_in_progress"] == 1 and now["seq2seq_batch_in_progress_sentences"] == 0

        _until(idle, "every request and batch to end")
        samples = metrics()
        assert samples["seq2seq_queue_sentences"] == 0
        # Each request counted once: a client that stayed saw the status counted for it, one that left
        # has some status counted (499 if it left before its answer); the /metrics requests are 200s too.
        served = _served(samples)
        seen = Counter([200] * (1 + polls - 1) + warm_statuses + statuses)  # 1: serve_process's /health
        assert all(served.get(status, 0) >= n for status, n in seen.items()), (served, seen)
        assert sum(served.values()) == sum(seen.values()) + sum(1 for o in outcomes if o.reply is None)
        assert rss_mib(process.pid) - rss_before < RSS_BOUND_MIB

        # A second burst, and SIGTERM once every request of it has reached the server, some still in flight.
        second = ["translate"] * 2 * QUEUE + ["trickle"] * 2
        polls = 0  # from here on, each poll before the current one is one more 200 answered
        answered_before = sum(_served(metrics()).values())
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(_burst, port, second, 2)

            def in_flight() -> int:
                samples = metrics()
                answered = sum(_served(samples).values()) - answered_before - (polls - 1)
                arrived = answered + samples["seq2seq_requests_in_progress"] - 1
                return int(samples["seq2seq_requests_in_progress"] - 1) if arrived >= len(second) else -1

            _until(lambda: in_flight() >= 0 or running.done(), "the second burst to arrive")
            flying = in_flight()
            stopped = time.monotonic()
            process.send_signal(signal.SIGTERM)
            outcomes = running.result()
        status = process.wait(timeout=GRACE_S)
        assert time.monotonic() - stopped < GRACE_S and status == -signal.SIGTERM
        log = process.stdout.read()
    assert flying >= 1  # the stop came in the middle: requests in flight (the trickling ones at least)
    assert [p for o in outcomes for p in problems(o)] == [], log  # each answered: nothing dropped at the stop
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log


def test_bodies_over_the_cap_are_413_every_time_and_the_server_keeps_serving(toy_run):
    """The 600 KB body that once ended in a broken pipe: declared (the client waits for an early answer
    before sending the rest, which a server that answers and closes early turns into a reset), chunked,
    and declared with ``Expect: 100-continue`` (answered before any of it is sent); then a translation."""
    body = b'{"text": "' + b"a" * OVERSIZED + b'"}'
    with serve_process(toy_run, "--max-body-bytes", "65536") as (process, url):
        port = int(url.rsplit(":", 1)[1])
        for _ in range(3):
            declared = exchange(port, head(len(body)) + body[:65536], body[65536:], trickle_s=0.5)
            assert declared is not None and declared.status == 413, declared
            assert declared.json() == {"error": "request body over 65536 bytes", "limit": "max-body-bytes"}
            sent_chunked = exchange(port, head(None), chunked(body))
            assert sent_chunked is not None and sent_chunked.status == 413
            expecting = exchange(port, head(len(body), "Expect: 100-continue"), b"")
            assert expecting is not None and expecting.status == 413
        sentence = SENTENCES[0]
        reply = exchange(port, head(len(translate_body(sentence))), translate_body(sentence))
        assert reply is not None and reply.status == 200
        assert reply.json()["results"][0]["source"] == sentence
        assert process.poll() is None
