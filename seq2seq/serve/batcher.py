"""Dynamic batching for the server: requests from many clients are gathered into batches and
decoded by one worker thread, the only thread that touches the model.

The worker takes the oldest request, then keeps gathering for at most ``max_wait_ms`` while the
batch stays within ``max_sentences`` and ``max_tokens`` source tokens; requests of a batch that
share beam and n-best settings are translated in one ``Translator.translate`` call. Callers get a
``concurrent.futures.Future``, which an event loop can await without blocking on the model.
"""

import queue
import threading
import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass

from seq2seq.decode.translator import SentenceAttention, Translation, Translator


@dataclass(frozen=True)
class BatchLimits:
    """How long to wait for company and how much one batch may hold (a larger request runs alone)."""

    max_wait_ms: float = 5.0
    max_sentences: int = 64
    max_tokens: int = 4096


@dataclass
class Result:
    """One sentence's n-best translations and, when asked for, its attention weights."""

    translation: Translation
    attention: SentenceAttention | None = None


@dataclass
class _Job:
    sentences: list[str]
    beam: int
    nbest: int
    attention: bool
    future: Future
    tokens: int = 0


class Batcher:
    """Owns a Translator on one worker thread; ``submit`` from any thread, ``close`` to drain and stop."""

    def __init__(self, translator: Translator, limits: BatchLimits = BatchLimits()) -> None:
        self.translator, self.limits = translator, limits
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._held: _Job | None = None  # taken from the queue but did not fit the previous batch
        self._closed = False
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._run, name="seq2seq-batcher", daemon=True)
        self._worker.start()

    def submit(self, sentences: list[str], beam: int, nbest: int = 1, attention: bool = False) -> Future:
        """Queue sentences for translation; the future resolves to one ``Result`` per sentence, in order."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            self._queue.put(_Job(sentences, beam, nbest, attention, future))
        return future

    def close(self) -> None:
        """Finish every queued request, then stop the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._worker.join()

    def _run(self) -> None:
        while (batch := self._gather()) is not None:
            try:
                self._decode(batch)
            except Exception as error:  # the worker must survive whatever one batch does
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(error)

    def _take(self, job: _Job) -> bool:
        """Claim a job for decoding and count its tokens; False if its caller gave up or it cannot be read."""
        if not job.future.set_running_or_notify_cancel():
            return False
        try:
            job.tokens = sum(len(self.translator.encode(s)) for s in job.sentences)
        except Exception as error:
            job.future.set_exception(error)
            return False
        return True

    def _gather(self) -> list[_Job] | None:
        """The next batch (waiting for its first job), or None once closed and drained."""
        batch: list[_Job] = []
        if self._held is not None:
            batch, self._held = [self._held], None
        while not batch:
            job = self._queue.get()
            if job is None:
                return None
            if self._take(job):
                batch.append(job)
        deadline = time.monotonic() + self.limits.max_wait_ms / 1000
        sentences, tokens = len(batch[0].sentences), batch[0].tokens
        while sentences < self.limits.max_sentences and (remaining := deadline - time.monotonic()) > 0:
            try:
                job = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if job is None:
                self._queue.put(None)  # seen again once this batch is done
                break
            if not self._take(job):
                continue
            if (
                sentences + len(job.sentences) > self.limits.max_sentences
                or tokens + job.tokens > self.limits.max_tokens
            ):
                self._held = job
                break
            batch.append(job)
            sentences, tokens = sentences + len(job.sentences), tokens + job.tokens
        return batch

    def _decode(self, batch: list[_Job]) -> None:
        groups: dict[tuple[int, int], list[_Job]] = defaultdict(list)
        for job in batch:
            groups[job.beam, job.nbest].append(job)
        for (beam, nbest), jobs in groups.items():
            try:
                translations = self.translator.translate([s for job in jobs for s in job.sentences], beam, nbest)
            except Exception as error:
                if len(jobs) == 1:
                    jobs[0].future.set_exception(error)
                else:  # find the job that fails, without failing the others with it
                    for job in jobs:
                        self._decode([job])
                continue
            start = 0
            for job in jobs:
                mine = translations[start : start + len(job.sentences)]
                start += len(job.sentences)
                try:
                    job.future.set_result(
                        [
                            Result(t, self.translator.attention(t.source, t.best.tokens) if job.attention else None)
                            for t in mine
                        ]
                    )
                except Exception as error:
                    job.future.set_exception(error)
