"""seq2seq.serve.batcher: requests arriving together are decoded in one batch (within the sentence and
token caps), each caller gets its own results in order, equal to translating alone; a request that
fails does not fail the others of its batch; a caller that gave up is skipped; close drains. The
queue refuses past its caps (an empty one takes anything), a cancelled request leaves it at once,
and one past its deadline is failed, not decoded. A batch is in the metrics before its answers go out.
"""

import math
import threading
import time
from concurrent.futures import Future

import pytest
import torch

from seq2seq.decode.loader import load_model
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.serve.batcher import Batcher, BatchLimits, DeadlineExceeded, QueueDepth, QueueFull, QueueLimits
from seq2seq.serve.metrics import ServeMetrics
from seq2seq.text.stage import DEFAULTS


class Recording(TorchTranslator):
    """The toy run's translator that records every batch and fails a batch holding "💥"."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.batches: list[list[str]] = []
        self.gate = threading.Event()  # translate waits for it: tests hold the worker busy
        self.gate.set()
        self.entered = threading.Event()  # set when a batch reaches translate

    def translate(self, sentences, beam=None, nbest=1, *, text=DEFAULTS):
        self.entered.set()
        self.gate.wait(timeout=60)
        self.batches.append(list(sentences))
        if any("💥" in s for s in sentences):
            raise ValueError("exploded")
        return super().translate(sentences, beam, nbest, text=text)


@pytest.fixture(scope="module")
def loaded(toy_run):
    return load_model(toy_run, torch.device("cpu"))


@pytest.fixture
def translator(loaded) -> Recording:
    model, tokenizer, cfg = loaded
    return Recording(model, tokenizer, cfg.decode, torch.device("cpu"))


def _texts(future: Future) -> list[str]:
    return [r.translation.best.text for r in future.result(timeout=60)]


def test_requests_arriving_together_share_one_batch_and_get_their_own_results(translator):
    batcher = Batcher(translator, BatchLimits(max_wait_ms=2000, max_sentences=16))
    try:
        jobs = [(["我们去散步。", "你好。"], 2), (["今天天气很好。"], 2), (["他昨天去了北京。"], 2)]
        futures = [batcher.submit(sentences, beam) for sentences, beam in jobs]
        got = [_texts(f) for f in futures]
    finally:
        batcher.close()
    assert translator.batches == [["我们去散步。", "你好。", "今天天气很好。", "他昨天去了北京。"]]
    alone = [[t.best.text for t in TorchTranslator.translate(translator, s, beam)] for s, beam in jobs]
    assert got == alone


class OrderedMetrics(ServeMetrics):
    """Metrics that log each batch they count into a shared list of events."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def batch(self, sentences: int, seconds: float) -> None:
        self.events.append(f"counted {sentences}")
        super().batch(sentences, seconds)


def test_a_batch_is_counted_before_its_answers_go_out(translator):
    """A client that reads /metrics right after its answer must find its batch there."""
    events: list[str] = []
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0), metrics=OrderedMetrics(events))
    try:
        future = batcher.submit(["你好。", "我们去散步。"], 1)
        future.add_done_callback(lambda _: events.append("answered"))  # runs where the result is set
        future.result(timeout=60)
    finally:
        batcher.close()
    assert events == ["counted 2", "answered"]


def test_caps_split_batches_and_settings_split_calls(translator):
    batcher = Batcher(translator, BatchLimits(max_wait_ms=1000, max_sentences=3))
    try:
        futures = [batcher.submit(["你好。"], 1) for _ in range(4)] + [batcher.submit(["你好。"], 2, nbest=2)]
        for future in futures:
            future.result(timeout=60)
    finally:
        batcher.close()
    assert [len(b) for b in translator.batches] == [3, 1, 1]  # 3 greedy | 1 greedy + 1 beam-2 (two calls)
    assert len(futures[-1].result()[0].translation.outputs) == 2


def test_token_cap(translator):
    tokens = len(translator.encode("我们明天去公园散步。"))
    batcher = Batcher(translator, BatchLimits(max_wait_ms=1000, max_sentences=64, max_tokens=2 * tokens))
    try:
        for future in [batcher.submit(["我们明天去公园散步。"], 1) for _ in range(3)]:
            future.result(timeout=60)
    finally:
        batcher.close()
    assert [len(b) for b in translator.batches] == [2, 1]


def test_a_failing_request_does_not_fail_the_others(translator):
    batcher = Batcher(translator, BatchLimits(max_wait_ms=1000))
    try:
        good, bad, other = (batcher.submit(s, 2) for s in (["你好。"], ["💥"], ["我们去散步。"]))
        unreadable = batcher.submit(["\ud800"], 2)  # a lone surrogate: the tokenizer cannot even encode it
        with pytest.raises(ValueError, match="exploded"):
            bad.result(timeout=60)
        with pytest.raises(RuntimeError):  # what sentencepiece raises for it
            unreadable.result(timeout=60)
        assert _texts(good) == [t.best.text for t in TorchTranslator.translate(translator, ["你好。"], 2)]
        assert len(_texts(other)) == 1
    finally:
        batcher.close()
    assert translator.batches[0] == ["你好。", "💥", "我们去散步。"]  # tried together first


def test_cancelled_requests_are_skipped_and_close_drains(translator):
    translator.gate.clear()
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0, max_sentences=1))
    first = batcher.submit(["你好。"], 1)  # the worker takes it and waits at the gate
    gone = batcher.submit(["我们去散步。"], 1)
    assert gone.cancel()  # its caller disconnected before the worker took it
    translator.gate.set()
    last = batcher.submit(["今天天气很好。"], 1, attention=True)
    batcher.close()  # returns once everything queued is done
    assert first.done() and last.done() and gone.cancelled()
    assert all("我们去散步。" not in batch for batch in translator.batches)
    result = last.result()[0]
    assert result.attention is not None and result.attention.source_pieces[-1] == "<end>"
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(["你好。"], 1)


def _busy(translator: Recording, batcher: Batcher) -> Future:
    """Close the gate and give the worker a request to hold it at: what comes next waits in the queue."""
    translator.gate.clear()
    translator.entered.clear()
    first = batcher.submit(["你好。"], 1)
    assert translator.entered.wait(timeout=60)
    return first


def test_the_queue_refuses_past_its_caps_and_counts_what_waits(translator):
    one = len(translator.encode("我们去散步。"))
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0), QueueLimits(max_sentences=3, max_tokens=4 * one))
    try:
        first = _busy(translator, batcher)
        waiting = [batcher.submit(["我们去散步。", "我们去散步。"], 1), batcher.submit(["我们去散步。"], 1)]
        assert batcher.depth() == QueueDepth(sentences=3, tokens=3 * one, full=True, in_batch=1)
        with pytest.raises(QueueFull) as refused:
            batcher.submit(["我们去散步。"], 1)
        assert refused.value.limit == "max-queue-sentences" and refused.value.retry_after_s == 1  # nothing decoded yet
        translator.gate.set()
        for future in [first, *waiting]:
            future.result(timeout=60)
        # The token cap: one long sentence fits the sentence cap, but not its tokens on top of a waiting one's.
        long = "我们去散步。" * 4
        assert one + len(translator.encode(long)) > 4 * one
        _busy(translator, batcher)
        batcher.submit(["我们去散步。"], 1)
        with pytest.raises(QueueFull) as refused:
            batcher.submit([long], 1)
        assert refused.value.limit == "max-queue-tokens"
        rate = batcher.metrics.sentences_per_second()
        assert rate is not None and refused.value.retry_after_s == max(1, math.ceil(1 / rate))
    finally:
        translator.gate.set()
        batcher.close()


def test_retry_after_is_how_long_the_queue_takes_to_drain_at_the_recent_rate(translator):
    """The toy model decodes in milliseconds, so its own rate always gives 1 s: a slow decoder's batches,
    recorded in the metrics the batcher reads, set the rate here."""
    metrics = ServeMetrics()
    metrics.batch(sentences=2, seconds=5.0)  # 0.4 sentences a second
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0), QueueLimits(max_sentences=3), metrics)
    try:
        _busy(translator, batcher)
        batcher.submit(["我们去散步。", "你好。", "他昨天去了北京。"], 1)
        with pytest.raises(QueueFull) as refused:
            batcher.submit(["我们去散步。"], 1)
        assert metrics.sentences_per_second() == pytest.approx(0.4)  # the held batch is not in it yet
        assert refused.value.retry_after_s == 8  # 3 waiting sentences / 0.4 a second = 7.5 s, rounded up
    finally:
        translator.gate.set()
        batcher.close()


def test_an_empty_queue_takes_a_request_larger_than_its_caps(translator):
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0), QueueLimits(max_sentences=1, max_tokens=1))
    try:
        assert len(batcher.submit(["你好。", "我们去散步。"], 1).result(timeout=60)) == 2
    finally:
        batcher.close()


def test_a_cancelled_request_leaves_the_queue_at_once(translator):
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0), QueueLimits(max_sentences=2))
    try:
        first = _busy(translator, batcher)
        waits = batcher.submit(["他昨天去了北京。"], 1)
        gone = batcher.submit(["我们去散步。"], 1)
        assert batcher.depth().full
        assert gone.cancel()
        tokens = len(translator.encode("他昨天去了北京。"))
        assert batcher.depth() == QueueDepth(sentences=1, tokens=tokens, full=False, in_batch=1)
        stays = batcher.submit(["这本书是我的。"], 1)  # there is room again, while the worker has not moved
        translator.gate.set()
        for future in (first, waits, stays):
            future.result(timeout=60)
    finally:
        translator.gate.set()
        batcher.close()
    assert translator.batches == [["你好。"], ["他昨天去了北京。", "这本书是我的。"]]


def test_a_request_past_its_deadline_is_failed_not_decoded(translator):
    batcher = Batcher(translator, BatchLimits(max_wait_ms=0))
    try:
        first = _busy(translator, batcher)
        late = batcher.submit(["我们去散步。"], 1, deadline=time.monotonic())  # passed by the time it is taken
        on_time = batcher.submit(["今天天气很好。"], 1, deadline=time.monotonic() + 60)
        translator.gate.set()
        with pytest.raises(DeadlineExceeded):
            late.result(timeout=60)
        first.result(timeout=60)
        on_time.result(timeout=60)
    finally:
        translator.gate.set()
        batcher.close()
    assert all("我们去散步。" not in batch for batch in translator.batches)
    assert batcher.depth() == QueueDepth(sentences=0, tokens=0, full=False, in_batch=0)
