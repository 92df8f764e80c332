"""Beam traces for one sentence: what beam search kept and what ended at every step, with raw and
length-penalised scores, as plain data (JSON-ready, for a web page) and as a readable table.

The searches know nothing of traces: ``first_sentence_steps`` is an ``on_step`` callback
(``seq2seq.decode.search.BeamStep``) that records what they show it.
"""

from torch import Tensor

from seq2seq.decode.batched import beam_options, pad_batch
from seq2seq.decode.constrained import constrained_beam_search
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.search import BeamStep, Hypothesis, beam_search, force_prefixes, length_penalty_factor
from seq2seq.decode.torch_engine import TorchTranslator


def trace_step(step: int, live: list[tuple[list[int], float]], ended: list[Hypothesis], alpha: float) -> dict:
    """One step of a beam trace as plain data (ids, not text): the live beams (prefix, summed
    log-probability, length-penalised score) and the hypotheses that ended at this step."""
    penalty = length_penalty_factor(step + 1, alpha)
    return {
        "step": step + 1,
        "live": [
            {"tokens": tokens, "score": score, "normalized": score / penalty}
            for tokens, score in live
            if score != float("-inf")
        ],
        "ended": [{"tokens": h.tokens, "score": h.score * penalty, "normalized": h.score} for h in ended],
    }


def first_sentence_steps(into: list[dict], alpha: float) -> BeamStep:
    """An ``on_step`` callback that appends to ``into`` a ``trace_step`` of the batch's first sentence
    for every step it is searched, the step it is done included; ``alpha`` is the search's length penalty."""
    ended = 0  # of its finished hypotheses, those already recorded
    searched = True  # whether it was still searched after the step before

    def on_step(step: int, live: list[int], tokens: Tensor, scores: Tensor, finished: list[list[Hypothesis]]) -> None:
        nonlocal ended, searched
        if not searched:
            return
        searched = live[:1] == [0]
        beams = list(zip(tokens[: scores.size(1), 1:].tolist(), scores[0].tolist(), strict=True)) if searched else []
        into.append(trace_step(step, beams, finished[0][ended:], alpha))
        ended = len(finished[0])

    return on_step


def trace_sentence(
    translator: TorchTranslator, sentence: str, beam: int, prefix: str = "", glossary: Glossary | None = None
) -> dict:
    """Beam-search ``sentence`` and return its trace: ``steps`` (one per decoding step, each with
    ``live`` beams and ``ended`` hypotheses: text, pieces, score, normalized) and the ``best`` output.

    The translator's engine must have the ``trace`` capability (our own decoder)."""
    translator.require(trace=True)
    decode, tok = translator.decode, translator.tokenizer
    src = pad_batch([translator.encode(sentence)], translator.device)
    terms = glossary.targets_for(sentence) if glossary else []
    processors = [force_prefixes([translator.target_ids(prefix)])] if prefix else []
    settings = beam_options(decode, beam, beam, processors)
    model = translator.search_model  # the weights translate decodes with (a bf16 copy in bf16)
    steps: list[dict] = []
    record = first_sentence_steps(steps, decode.length_penalty)
    if terms:
        constraints = [[translator.target_ids(t) for t in terms]]
        (hyps,) = constrained_beam_search(model, src, constraints, on_step=record, **settings)
    else:
        (hyps,) = beam_search(model, src, on_step=record, **settings)

    def show(entry: dict) -> dict:
        return {
            "text": tok.decode_tgt(entry["tokens"]),
            "pieces": tok.tgt_pieces(entry["tokens"]),
            "score": round(entry["score"], 4),
            "normalized": round(entry["normalized"], 4),
        }

    return {
        "source": sentence,
        "beam": beam,
        "length_penalty": decode.length_penalty,
        "prefix": prefix,
        "constraints": terms,
        "steps": [
            {"step": s["step"], "live": [show(b) for b in s["live"]], "ended": [show(e) for e in s["ended"]]}
            for s in steps
        ],
        "best": {"translation": tok.decode_tgt(hyps[0].tokens), "score": round(hyps[0].score, 4)},
    }


def format_trace(trace: dict) -> str:
    """The trace as a table: one row per beam and step; ``ended`` rows are finished hypotheses."""
    lines = [
        f"source: {trace['source']}",
        f"beam {trace['beam']}, length penalty α = {trace['length_penalty']}"
        + (f", prefix {trace['prefix']!r}" if trace["prefix"] else "")
        + (f", constraints {trace['constraints']}" if trace["constraints"] else ""),
        f"{'step':>4}  {'state':<5}  {'log-prob':>9}  {'penalised':>9}  pieces",
    ]
    for step in trace["steps"]:
        for state, entries in (("ended", step["ended"]), ("live", step["live"])):
            for e in entries:
                pieces = " ".join(e["pieces"])
                lines.append(f"{step['step']:>4}  {state:<5}  {e['score']:>9.4f}  {e['normalized']:>9.4f}  {pieces}")
    lines.append(f"best: {trace['best']['translation']}  ({trace['best']['score']:.4f})")
    return "\n".join(lines) + "\n"
