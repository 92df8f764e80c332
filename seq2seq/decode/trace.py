"""Beam traces for one sentence: what beam search kept and what ended at every step, with raw and
length-penalised scores, as plain data (JSON-ready, for a web page) and as a readable table."""

from seq2seq.decode.batched import beam_options, pad_batch
from seq2seq.decode.constrained import constrained_beam_search
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.search import beam_search, force_prefixes
from seq2seq.decode.torch_engine import TorchTranslator


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
    if terms:
        constraints = [[translator.target_ids(t) for t in terms]]
        (hyps,) = constrained_beam_search(model, src, constraints, trace=steps, **settings)
    else:
        (hyps,) = beam_search(model, src, trace=steps, **settings)

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
