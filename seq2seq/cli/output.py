"""What the verbs print: translation lines, JSON records, score lines, evaluation reports and tables."""

import json
import math

from seq2seq.decode.forced import ForcedScore
from seq2seq.decode.translator import Translation
from seq2seq.evaluate.breakdown import BucketScore
from seq2seq.evaluate.metrics import Scores

BREAKDOWN_TITLES = {
    "by_novelty": "by novelty (similarity of the source to its closest training source):",
    "by_length": "by source length:",
}


def translation_lines(results: list[Translation], as_json: bool, nbest: int) -> list[str]:
    """The best translation, ``rank<TAB>score<TAB>text`` lines for n-best, or one JSON object per sentence."""
    lines = []
    for result in results:
        if as_json:
            best = result.best
            record = {
                "source": result.source,
                "translation": best.text,
                "score": round(best.score, 4),
                "tokens": best.pieces,
            }
            if result.constraints is not None:
                record["constraints"] = result.constraints
            record["confidence"] = None if result.confidence is None else round(result.confidence, 4)
            record["warnings"] = result.warnings
            if len(result.sentences) > 1 or any(not s.translated for s in result.sentences):
                record["sentences"] = [
                    {
                        "source": s.source,
                        "translation": s.text,
                        "translated": s.translated,
                        "language": s.language,
                        "confidence": None if s.confidence is None else round(s.confidence, 4),
                        "warnings": s.warnings,
                    }
                    for s in result.sentences
                ]
            if nbest > 1:
                record["nbest"] = [{"translation": o.text, "score": round(o.score, 4)} for o in result.outputs]
            lines.append(json.dumps(record, ensure_ascii=False))
        elif nbest > 1:
            lines += [f"{rank}\t{o.score:.4f}\t{o.text}" for rank, o in enumerate(result.outputs, start=1)]
        else:
            lines.append(result.best.text)
    return lines


def warning_lines(result: Translation, number: int) -> list[str]:
    """What stderr says of a line's translation: one line per warning, naming the input line and sentence."""
    return [
        f"seq2seq: line {number}, {_excerpt(sentence.source)}: {warning}"
        for sentence in result.sentences
        for warning in sentence.warnings
    ]


def _excerpt(text: str, most: int = 30) -> str:
    return json.dumps(text if len(text) <= most else text[: most - 1] + "…", ensure_ascii=False)


def score_line(source: str, reference: str, pieces: list[str], forced: ForcedScore, as_json: bool) -> str:
    """One reference's forced score: ``log_prob<TAB>normalized<TAB>reference``, or a JSON record with each token's."""
    if not as_json:
        return f"{forced.log_prob:.4f}\t{forced.normalized:.4f}\t{reference}"
    record = {
        "source": source,
        "reference": reference,
        "tokens": [*pieces, "<end>"],
        "token_log_probs": [round(v, 4) for v in forced.token_log_probs],
        "log_prob": round(forced.log_prob, 4),
        "normalized": round(forced.normalized, 4),
    }
    return json.dumps(record, ensure_ascii=False)


def score_summary(scores: list[ForcedScore]) -> str:
    """Total and per-token log-probability, and the perplexity, of a scored file."""
    tokens = sum(len(f.token_log_probs) for f in scores)
    total = sum(f.log_prob for f in scores)
    per_token = total / max(tokens, 1)
    return (
        f"{len(scores)} sentences, {tokens} tokens: log-probability {total:.2f}, "
        f"{per_token:.4f} per token (perplexity {math.exp(-per_token):.2f})"
    )


def evaluation_report(
    scores: Scores,
    breakdown: dict[str, list[BucketScore]],
    sentences: int,
    seconds: float,
    show_bleu: bool,
    show_chrf: bool,
    as_json: bool,
) -> str:
    """``evaluate``'s output: BLEU and chrF with their signatures, the bucket tables, the speed."""
    speed = sentences / max(seconds, 1e-9)
    if as_json:
        record: dict = {"sentences": sentences, "seconds": round(seconds, 2), "sentences_per_s": round(speed, 2)}
        if show_bleu:
            record.update(bleu=round(scores.bleu, 2), bleu_signature=scores.bleu_signature)
        if show_chrf:
            record.update(chrf=round(scores.chrf, 2), chrf_signature=scores.chrf_signature)
        for name, buckets in breakdown.items():
            record[name] = [
                {"bucket": b.label, "sentences": b.sentences, "bleu": round(b.bleu, 2), "chrf": round(b.chrf, 2)}
                for b in buckets
            ]
        return json.dumps(record) + "\n"
    lines = []
    if show_bleu:
        lines.append(f"BLEU = {scores.bleu:.2f}  ({scores.bleu_signature})")
    if show_chrf:
        lines.append(f"chrF = {scores.chrf:.2f}  ({scores.chrf_signature})")
    for name, title in BREAKDOWN_TITLES.items():
        if name in breakdown:
            lines.append(title)
            lines += [
                f"  {b.label:<24} {b.sentences:>5} sentences  BLEU {b.bleu:5.2f}  chrF {b.chrf:5.2f}"
                for b in breakdown[name]
            ]
    lines.append(f"{sentences} sentences in {seconds:.1f}s ({speed:.1f} sentences/s)")
    return "\n".join(lines) + "\n"
