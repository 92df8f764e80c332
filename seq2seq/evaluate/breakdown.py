"""BLEU by kind of sentence: by novelty (how alike the closest training source is) and by length.

A corpus-level score hides where a model fails. Tatoeba repeats itself, so a test sentence
may have a near-twin in training; the novelty buckets (``seq2seq.data.neardup`` similarity of a
test source to its closest training source, written at prepare time as ``test.novelty``)
separate recall of the corpus from translation of new sentences, and the length buckets show
how a model copes with longer input: in characters for a source written without spaces between its
words (Chinese, Japanese), in words otherwise, where a character count says little.
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


def length_buckets(unit: str) -> tuple[tuple[str, float, float], ...]:
    """Short, middling and long sources, ``unit`` (chars or words) naming what the lengths count."""
    return ((f"1-6 {unit}", 0, 7), (f"7-12 {unit}", 7, 13), (f"13+ {unit}", 13, math.inf))


def source_lengths(sources: list[str]) -> tuple[str, list[int]]:
    """The unit of the length buckets and each source's length in it: characters when most sources hold no
    space (a language written without spaces between words), else words."""
    spaced = sum(" " in source.strip() for source in sources)
    if 2 * spaced <= len(sources):
        return "chars", [len(source) for source in sources]
    return "words", [len(source.split()) for source in sources]


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
