"""Dynamic batching for the server: requests from many clients wait in one bounded queue and are
decoded in batches by one worker thread, the only thread that touches the model.

The worker takes the oldest request, then keeps gathering for at most ``max_wait_ms`` while the
batch stays within ``max_sentences`` and ``max_tokens`` source tokens; requests of a batch that
share beam and n-best settings are translated in one ``Translator.translate`` call. Callers get a
``concurrent.futures.Future``, which an event loop can await without blocking on the model.

Admission: the queue holds at most ``QueueLimits`` sentences and source tokens waiting for a batch
(the batch being decoded does not count); ``submit`` past that raises ``QueueFull`` at once, with
an estimate of when to retry, so a burst larger than the decoder's rate is refused rather than
turned into latency and memory for everyone. An empty queue takes any one request, so a request
larger than the caps still runs (alone). Cancelling a request's future takes it out of the queue
at once (its caller gave up or disconnected); a request whose deadline has passed by the time the
worker reaches it is failed with ``DeadlineExceeded`` instead of decoded. Once a request is in a
batch it can no longer be cancelled: a caller that leaves then costs at most that batch.
"""

import math
import threading
import time
from collections import defaultdict, deque
from concurrent.futures import Future
from dataclasses import dataclass

from seq2seq.decode.translator import SentenceAttention, Translation, Translator
from seq2seq.serve.metrics import ServeMetrics
from seq2seq.text.stage import DEFAULTS, TextOptions


@dataclass(frozen=True)
class BatchLimits:
    """How long to wait for company and how much one batch may hold (a larger request runs alone)."""

    max_wait_ms: float = 5.0
    max_sentences: int = 64
    max_tokens: int = 4096


@dataclass(frozen=True)
class QueueLimits:
    """How much may wait for a batch (the ``--max-queue-*`` flags of ``seq2seq serve``)."""

    max_sentences: int = 256
    max_tokens: int = 16384


@dataclass(frozen=True)
class QueueDepth:
    """What waits for a batch now, whether the queue is at a cap (a new request would be refused), and
    the sentences of the batch being gathered or decoded."""

    sentences: int
    tokens: int
    full: bool
    in_batch: int


class QueueFull(Exception):
    """``submit`` refused a request: the queue is at ``limit`` (the flag's name without --)."""

    def __init__(self, limit: str, retry_after_s: int) -> None:
        super().__init__(f"the queue is at its cap ({limit})")
        self.limit, self.retry_after_s = limit, retry_after_s


class DeadlineExceeded(Exception):
    """The request's deadline passed before a batch took it."""


@dataclass
class Result:
    """One sentence's n-best translations and, when asked for, its attention weights."""

    translation: Translation
    attention: SentenceAttention | None = None


@dataclass(eq=False)  # identity, not value: two equal requests are two jobs
class _Job:
    sentences: list[str]
    beam: int
    nbest: int
    attention: bool
    text: TextOptions
    future: Future
    tokens: int
    deadline: float  # time.monotonic(); math.inf for none
    queued: bool = True


class Batcher:
    """Owns a Translator on one worker thread; ``submit`` from any thread, ``close`` to drain and stop."""

    def __init__(
        self,
        translator: Translator,
        limits: BatchLimits = BatchLimits(),
        queue_limits: QueueLimits = QueueLimits(),
        metrics: ServeMetrics | None = None,
    ) -> None:
        self.translator, self.limits, self.queue_limits = translator, limits, queue_limits
        self.metrics = metrics or ServeMetrics()
        self._waiting: deque[_Job] = deque()
        self._sentences = self._tokens = 0  # what self._waiting holds
        self._in_batch = 0
        self._closed = False
        self._changed = threading.Condition()  # guards the fields above; re-entrant: futures call back into it
        self._worker = threading.Thread(target=self._run, name="seq2seq-batcher", daemon=True)
        self._worker.start()

    def submit(
        self,
        sentences: list[str],
        beam: int,
        nbest: int = 1,
        attention: bool = False,
        deadline: float = math.inf,
        text: TextOptions = DEFAULTS,
    ) -> Future:
        """Queue texts for translation by ``deadline`` (``time.monotonic()``) with the text stage's ``text``
        options; the future resolves to one ``Result`` per text, in order. Raises ``QueueFull`` when the
        queue is at a cap."""
        future: Future = Future()
        try:
            tokens = sum(len(self.translator.encode(s)) for s in sentences)
        except Exception as error:  # a sentence the tokenizer cannot read fails this request alone
            future.set_exception(error)
            return future
        job = _Job(sentences, beam, nbest, attention, text, future, tokens, deadline)
        with self._changed:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            if self._waiting:
                if self._sentences + len(sentences) > self.queue_limits.max_sentences:
                    raise QueueFull("max-queue-sentences", self._retry_after_s())
                if self._tokens + tokens > self.queue_limits.max_tokens:
                    raise QueueFull("max-queue-tokens", self._retry_after_s())
            self._waiting.append(job)
            self._sentences, self._tokens = self._sentences + len(sentences), self._tokens + tokens
            self._changed.notify_all()
        future.add_done_callback(lambda _: self._withdraw(job))
        return future

    def depth(self) -> QueueDepth:
        with self._changed:
            full = self._sentences >= self.queue_limits.max_sentences or self._tokens >= self.queue_limits.max_tokens
            return QueueDepth(self._sentences, self._tokens, full, self._in_batch)

    def close(self) -> None:
        """Finish every queued request, then stop the worker."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._worker.join()

    def _retry_after_s(self) -> int:
        """Seconds until the queue has drained at the recent decoding rate (1 before anything was decoded)."""
        rate = self.metrics.sentences_per_second()
        return max(1, math.ceil(self._sentences / rate)) if rate else 1

    def _withdraw(self, job: _Job) -> None:
        """A job's future finished: if it was cancelled while waiting, it leaves the queue now."""
        with self._changed:
            if job.queued:
                self._waiting.remove(job)
                self._dequeued(job)

    def _dequeued(self, job: _Job) -> None:
        job.queued = False
        self._sentences, self._tokens = self._sentences - len(job.sentences), self._tokens - job.tokens

    def _claim(self, job: _Job) -> bool:
        """Take the queue's oldest job for decoding; False if it was cancelled or is past its deadline."""
        self._waiting.popleft()
        self._dequeued(job)
        if not job.future.set_running_or_notify_cancel():  # cancelled, its callback not yet run
            return False
        if time.monotonic() >= job.deadline:  # running now, so no cancel can race this
            job.future.set_exception(DeadlineExceeded())
            return False
        return True

    def _run(self) -> None:
        while (batch := self._gather()) is not None:
            try:
                self._decode(batch)
            except Exception as error:  # the worker must survive whatever one batch does
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(error)
            with self._changed:
                self._in_batch = 0

    def _gather(self) -> list[_Job] | None:
        """The next batch (waiting for its first job), or None once closed and drained."""
        with self._changed:
            batch: list[_Job] = []
            while not batch:
                while not self._waiting:
                    if self._closed:
                        return None
                    self._changed.wait()
                job = self._waiting[0]
                if self._claim(job):
                    batch.append(job)
            self._in_batch = len(batch[0].sentences)
            window_ends = time.monotonic() + self.limits.max_wait_ms / 1000
            sentences, tokens = len(batch[0].sentences), batch[0].tokens
            while sentences < self.limits.max_sentences:
                if not self._waiting:
                    remaining = window_ends - time.monotonic()
                    if remaining <= 0 or self._closed:
                        break
                    self._changed.wait(remaining)
                    continue
                job = self._waiting[0]
                if (
                    sentences + len(job.sentences) > self.limits.max_sentences
                    or tokens + job.tokens > self.limits.max_tokens
                ):
                    break  # it heads the next batch
                if self._claim(job):
                    batch.append(job)
                    sentences, tokens = sentences + len(job.sentences), tokens + job.tokens
                    self._in_batch = sentences
            return batch

    def _decode(self, batch: list[_Job]) -> None:
        groups: dict[tuple[int, int, TextOptions], list[_Job]] = defaultdict(list)
        for job in batch:
            groups[job.beam, job.nbest, job.text].append(job)
        for (beam, nbest, text), jobs in groups.items():
            sentences = [s for job in jobs for s in job.sentences]
            start = time.perf_counter()
            try:
                translations = self.translator.translate(sentences, beam, nbest, text=text)
            except Exception as error:
                if len(jobs) == 1:
                    jobs[0].future.set_exception(error)
                else:  # find the job that fails, without failing the others with it
                    for job in jobs:
                        self._decode([job])
                continue
            # Counted before any answer goes out: a client that reads /metrics after its answer sees its batch.
            self.metrics.batch(len(sentences), time.perf_counter() - start)
            first = 0
            for job in jobs:
                mine = translations[first : first + len(job.sentences)]
                first += len(job.sentences)
                try:
                    job.future.set_result(
                        [
                            Result(t, self.translator.attention(t.source, t.best.tokens) if job.attention else None)
                            for t in mine
                        ]
                    )
                except Exception as error:
                    job.future.set_exception(error)
