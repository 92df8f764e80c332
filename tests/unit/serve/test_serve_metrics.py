"""seq2seq.serve.metrics: histograms count cumulatively (a value on a bound is in that bucket), the page
is the Prometheus text format, and the throughput covers the recent batches only."""

import pytest

from seq2seq.serve.metrics import RECENT_BATCHES, Histogram, ServeMetrics

QUEUE = {"queued_sentences": 3, "queued_tokens": 40, "in_batch": 2, "max_sentences": 256, "max_tokens": 16384}


def test_histogram_buckets_are_cumulative_with_the_bound_inside():
    histogram = Histogram([1, 2.5, 10])
    for value in (0.5, 1, 2, 3, 20):
        histogram.observe(value)
    assert histogram.lines("h") == [
        'h_bucket{le="1"} 2',
        'h_bucket{le="2.5"} 3',
        'h_bucket{le="10"} 4',
        'h_bucket{le="+Inf"} 5',
        "h_sum 26.5",
        "h_count 5",
    ]


def test_the_page_before_anything_was_decoded():
    page = ServeMetrics().render(**QUEUE).splitlines()
    assert page[:2] == [
        "# HELP seq2seq_requests_total Requests answered, by HTTP status.",
        "# TYPE seq2seq_requests_total counter",
    ]
    assert "seq2seq_queue_sentences 3" in page and "seq2seq_queue_tokens 40" in page
    assert "seq2seq_batch_in_progress_sentences 2" in page
    assert "seq2seq_sentences_per_second NaN" in page and "seq2seq_batch_sentences_count 0" in page


def test_responses_by_status_and_throughput_over_the_recent_batches():
    metrics = ServeMetrics()
    for status in (200, 200, 503, 499):
        metrics.started()
        metrics.finished(status)
    metrics.started()  # one still in progress
    metrics.batch(1000, 1.0)  # falls out of the window below
    for _ in range(RECENT_BATCHES):
        metrics.batch(4, 0.5)
    assert metrics.sentences_per_second() == pytest.approx(8.0)
    page = metrics.render(**QUEUE).splitlines()
    assert [line for line in page if line.startswith("seq2seq_requests_total{")] == [
        'seq2seq_requests_total{status="200"} 2',
        'seq2seq_requests_total{status="499"} 1',
        'seq2seq_requests_total{status="503"} 1',
    ]
    assert "seq2seq_requests_in_progress 1" in page
    assert f"seq2seq_sentences_total {1000 + 4 * RECENT_BATCHES}" in page
    assert "seq2seq_sentences_per_second 8" in page
