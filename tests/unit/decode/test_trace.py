"""seq2seq.decode.trace: the ``on_step`` recorder of beam search sees the live and ended beams of every
step (scripted, hand-computed) with scores normalised by the length penalty, and records the batch's
first sentence as it would be recorded alone, also when it is done before the others."""

import math

import pytest
from conftest import GREEDY_TRAP, A, B, EosRamp, PositionRamp, ScriptedModel, gnmt, script_src, sources, unpad

from seq2seq.decode.search import beam_search
from seq2seq.decode.trace import first_sentence_steps


def test_beam_trace_records_live_and_ended_beams():
    """GREEDY_TRAP, beam 2, α = 0: step 1 keeps A (.6) and B (.4); step 2 ends B <end> (.36) and
    A <end> (.24), which fills the beam: the search stops."""
    model = ScriptedModel({7: GREEDY_TRAP})
    trace: list[dict] = []
    record = first_sentence_steps(trace, alpha=0.0)
    (hyps,) = beam_search(model, script_src(7), beam=2, nbest=2, length_penalty=0.0, use_cache=False, on_step=record)
    assert [s["step"] for s in trace] == [1, 2]
    assert [(b["tokens"], b["score"]) for b in trace[0]["live"]] == [
        ([A], pytest.approx(math.log(0.6))),
        ([B], pytest.approx(math.log(0.4))),
    ]
    assert trace[0]["ended"] == [] and trace[1]["live"] == []
    assert [(e["tokens"], e["score"]) for e in trace[1]["ended"]] == [
        ([B], pytest.approx(math.log(0.36))),
        ([A], pytest.approx(math.log(0.24))),
    ]
    assert [e["tokens"] for e in trace[1]["ended"]] == [h.tokens for h in hyps]


def test_beam_trace_normalized_scores_follow_the_length_penalty(tiny_model):
    model = PositionRamp(tiny_model(seed=16))
    trace: list[dict] = []
    record = first_sentence_steps(trace, alpha=1.0)
    (hyps,) = beam_search(model, sources(1, seed=45), beam=3, nbest=3, length_penalty=1.0, on_step=record)
    ended = [e for s in trace for e in s["ended"]]
    assert sorted(e["normalized"] for e in ended)[::-1][:3] == pytest.approx([h.score for h in hyps])
    for s in trace:
        for b in s["live"] + s["ended"]:
            assert b["normalized"] == pytest.approx(b["score"] / gnmt(s["step"], 1.0))
            assert len(b["tokens"]) <= s["step"]


def test_the_first_sentence_is_recorded_as_alone_until_it_is_done(tiny_model):
    """In the batch, the other sentences go on after the first is done (its last record has no live beams)."""
    model = EosRamp(tiny_model(seed=0))
    src = sources(4, seed=3)  # the first sentence is done 4 steps before the last
    alone: list[dict] = []
    in_batch: list[dict] = []
    beam_search(model, unpad(src, 0), beam=3, on_step=first_sentence_steps(alone, alpha=1.0))
    record, steps = first_sentence_steps(in_batch, alpha=1.0), []
    beam_search(model, src, beam=3, on_step=lambda step, *state: steps.append(step) or record(step, *state))
    assert in_batch[-1]["live"] == [] and len(in_batch) < len(steps)  # done, and not recorded past that
    assert [s["step"] for s in in_batch] == [s["step"] for s in alone]
    for kind in ("live", "ended"):
        assert [[b["tokens"] for b in s[kind]] for s in in_batch] == [[b["tokens"] for b in s[kind]] for s in alone]
        assert [b["score"] for s in in_batch for b in s[kind]] == pytest.approx(
            [b["score"] for s in alone for b in s[kind]], abs=1e-4
        )
