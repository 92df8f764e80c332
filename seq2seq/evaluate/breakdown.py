"""BLEU by kind of sentence: by novelty (how alike the closest training source is) and by length.

A corpus-level score hides where a model fails. Tatoeba repeats itself, so a test sentence
may have a near-twin in training; the novelty buckets (``seq2seq.data.neardup`` similarity of a
test source to its closest training source, written at prepare time as ``test.novelty``)
separate recall of the corpus from translation of new sentences, and the length buckets show
how a model copes with longer input.
"""

import math
from dataclasses import dataclass

from seq2seq.data.neardup import NEAR_DUPLICATE, NOVEL
from seq2seq.evaluate.metrics import DEFAULT_TOKENIZER, References, corpus_scores, reference_streams

NOVELTY_BUCKETS = (
    (f"novel (< {NOVEL})", 0.0, NOVEL),
    (f"similar ({NOVEL}-{NEAR_DUPLICATE})", NOVEL, NEAR_DUPLICATE),
    (f"near-duplicate (>= {NEAR_DUPLICATE})", NEAR_DUPLICATE, math.inf),
)
LENGTH_BUCKETS = (("1-6 chars", 0, 7), ("7-12 chars", 7, 13), ("13+ chars", 13, math.inf))


@dataclass
class BucketScore:
    """Corpus BLEU and chrF of the sentences of one bucket."""

    label: str
    sentences: int
    bleu: float
    chrf: float


def bucket_scores(
    hypotheses: list[str],
    references: References,
    values: list[float],
    buckets: tuple[tuple[str, float, float], ...],
    tokenize: str = DEFAULT_TOKENIZER,
) -> list[BucketScore]:
    """Score the sentences whose ``values[i]`` falls in each ``[low, high)`` bucket (empty buckets are left out),
    against one reference each or several streams, with BLEU tokenizer ``tokenize``."""
    streams = reference_streams(references)
    results = []
    for label, low, high in buckets:
        chosen = [i for i, v in enumerate(values) if low <= v < high]
        if chosen:
            picked = [[stream[i] for i in chosen] for stream in streams]
            s = corpus_scores([hypotheses[i] for i in chosen], picked, tokenize)
            results.append(BucketScore(label, len(chosen), s.bleu, s.chrf))
    return results
