"""What ``GET /metrics`` reports, in the Prometheus text format (version 0.0.4).

Counted here: requests in progress and answered by status, batches by size, decode seconds per batch,
sentences decoded, and the decoder's recent throughput; the queue's depth and caps are read from the batcher when the
page is rendered. Written out by hand rather than with ``prometheus-client``: six series of one
process need a counter, a histogram and the format's few rules (``# HELP``/``# TYPE`` lines,
cumulative ``le`` buckets ending in ``+Inf``, ``_sum`` and ``_count``), which are less code than
the extra's wiring, and the serve extra stays FastAPI and uvicorn.

Updated from the event loop (responses) and the batcher's worker (batches), so under one lock.
"""

import math
import threading
from collections import Counter, deque
from collections.abc import Sequence

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
RECENT_BATCHES = 32  # the throughput window: long enough to smooth one odd batch, short enough to follow load


class Histogram:
    """Counts of observations at or below each bucket's upper bound, their sum and their number."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * len(self.bounds)
        self.sum, self.count = 0.0, 0

    def observe(self, value: float) -> None:
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
                break
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        cumulative, out = 0, []
        for bound, count in zip(self.bounds, self.counts, strict=True):
            cumulative += count
            out.append(f'{name}_bucket{{le="{_number(bound)}"}} {cumulative}')
        out += [
            f'{name}_bucket{{le="+Inf"}} {self.count}',
            f"{name}_sum {_number(self.sum)}",
            f"{name}_count {self.count}",
        ]
        return out


class ServeMetrics:
    """The server's counters; ``render`` writes them with the queue's state as one text page."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._responses: Counter[str] = Counter()
        self._in_progress = 0
        self._batch_sentences = Histogram(BATCH_SIZES)
        self._decode_seconds = Histogram(DECODE_SECONDS)
        self._sentences = 0
        self._recent: deque[tuple[int, float]] = deque(maxlen=RECENT_BATCHES)

    def started(self) -> None:
        """A request arrived (its headers)."""
        with self._lock:
            self._in_progress += 1

    def finished(self, status: int) -> None:
        """A request was answered with ``status`` (499 for one whose client left before its answer)."""
        with self._lock:
            self._in_progress -= 1
            self._responses[str(status)] += 1

    def batch(self, sentences: int, seconds: float) -> None:
        """One batch of ``sentences`` decoded in ``seconds``."""
        with self._lock:
            self._batch_sentences.observe(sentences)
            self._decode_seconds.observe(seconds)
            self._sentences += sentences
            self._recent.append((sentences, seconds))

    def sentences_per_second(self) -> float | None:
        """Sentences per second of decoding over the recent batches (None before the first batch): how fast
        the queue drains while the decoder is busy, which is what a wait estimate needs."""
        with self._lock:
            seconds = sum(s for _, s in self._recent)
            return sum(n for n, _ in self._recent) / seconds if seconds > 0 else None

    def render(
        self, *, queued_sentences: int, queued_tokens: int, in_batch: int, max_sentences: int, max_tokens: int
    ) -> str:
        rate = self.sentences_per_second()
        with self._lock:
            lines = [
                "# HELP seq2seq_requests_total Requests answered, by HTTP status.",
                "# TYPE seq2seq_requests_total counter",
            ]
            lines += [f'seq2seq_requests_total{{status="{s}"}} {n}' for s, n in sorted(self._responses.items())]
            lines += _gauge("seq2seq_requests_in_progress", "Requests arrived and not yet answered.", self._in_progress)
            lines += _gauge("seq2seq_queue_sentences", "Sentences waiting for a batch.", queued_sentences)
            lines += _gauge("seq2seq_queue_tokens", "Source tokens waiting for a batch.", queued_tokens)
            lines += _gauge("seq2seq_batch_in_progress_sentences", "Sentences of the batch being decoded.", in_batch)
            lines += _gauge("seq2seq_queue_max_sentences", "The queue's cap in sentences.", max_sentences)
            lines += _gauge("seq2seq_queue_max_tokens", "The queue's cap in source tokens.", max_tokens)
            lines += [
                "# HELP seq2seq_batch_sentences Sentences per decoded batch.",
                "# TYPE seq2seq_batch_sentences histogram",
            ]
            lines += self._batch_sentences.lines("seq2seq_batch_sentences")
            lines += [
                "# HELP seq2seq_decode_seconds Seconds to decode one batch.",
                "# TYPE seq2seq_decode_seconds histogram",
            ]
            lines += self._decode_seconds.lines("seq2seq_decode_seconds")
            lines += [
                "# HELP seq2seq_sentences_total Sentences decoded.",
                "# TYPE seq2seq_sentences_total counter",
                f"seq2seq_sentences_total {self._sentences}",
            ]
        help_rate = f"Sentences per second of decoding over the last {RECENT_BATCHES} batches."
        lines += _gauge("seq2seq_sentences_per_second", help_rate, math.nan if rate is None else rate)
        return "\n".join(lines) + "\n"


def _gauge(name: str, description: str, value: float) -> list[str]:
    return [f"# HELP {name} {description}", f"# TYPE {name} gauge", f"{name} {_number(value)}"]


def _number(value: float) -> str:
    """A sample value as the format writes it: integers without a decimal point, NaN as ``NaN``."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))
