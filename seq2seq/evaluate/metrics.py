"""Scoring translations with sacrebleu (BLEU and chrF on detokenized text)."""

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from seq2seq.errors import UserError


@dataclass
class Scores:
    """Corpus-level scores and the sacrebleu signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


def corpus_scores(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus BLEU (13a tokenization, cased) and chrF of hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} translations but {len(references)} references; they must be line-aligned")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()))
