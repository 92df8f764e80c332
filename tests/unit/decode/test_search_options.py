"""seq2seq.decode.search's options: forced prefixes (scripted, hand-computed; every output starts with its
prefix in greedy, beam and sampling; the greedy output's own prefix changes nothing)."""

import math

import pytest
import torch
from conftest import GREEDY_TRAP, A, B, PositionRamp, ScriptedModel, gnmt, script_src, sources, unpad

from seq2seq.config import DecodeConfig
from seq2seq.decode.batched import search_ids
from seq2seq.decode.sampling import TokenSampler
from seq2seq.decode.search import beam_search, force_prefixes, greedy_search

CPU = torch.device("cpu")


def test_scripted_prefix_greedy_and_beam():
    """GREEDY_TRAP forced to start with B: B <end> (.4 · .9). Beam search forced to start with A
    chooses among A <end> (.24), A A <end> (.6 · .35 · .97) and A C <end> (.6 · .25 · .97): the
    first with α = 0, the second with α = 1."""
    model = ScriptedModel({7: GREEDY_TRAP})
    src = script_src(7)
    (forced_b,) = greedy_search(model, src, processors=[force_prefixes([[B]])], use_cache=False)
    assert forced_b.tokens == [B] and forced_b.score == pytest.approx(math.log(0.4 * 0.9), abs=1e-6)
    for alpha, tokens, p in [(0.0, [A], 0.6 * 0.4), (1.0, [A, A], 0.6 * 0.35 * 0.97)]:
        ((best, *_),) = beam_search(
            model, src, beam=3, nbest=3, length_penalty=alpha, processors=[force_prefixes([[A]])], use_cache=False
        )
        assert best.tokens == tokens
        assert best.score == pytest.approx(math.log(p) / gnmt(len(tokens) + 1, alpha), abs=1e-6)


@pytest.mark.parametrize("mode", ["greedy", "beam", "sample"])
def test_every_output_starts_with_its_prefix(tiny_model, mode):
    model = PositionRamp(tiny_model(seed=14))
    source_ids = [unpad(sources(6, seed=43), row)[0].tolist() for row in range(6)]
    prefixes = [[5, 6, 7], [], [9], [10, 10], [11, 12, 13, 14], [4]]
    sampler = TokenSampler(seed=1) if mode == "sample" else None
    found = search_ids(
        model,
        source_ids,
        DecodeConfig(batch_sentences=4),
        CPU,
        beam=3 if mode == "beam" else 1,
        nbest=2,
        sampler=sampler,
        prefixes=prefixes,
    )
    for prefix, hyps in zip(prefixes, found, strict=True):
        assert hyps and all(h.tokens[: len(prefix)] == prefix for h in hyps)


def test_prefix_of_the_greedy_output_changes_nothing(tiny_model):
    model = PositionRamp(tiny_model(seed=15))
    src = sources(8, seed=44)
    greedy = greedy_search(model, src)
    prefixes = [h.tokens[:2] for h in greedy]
    forced = greedy_search(model, src, processors=[force_prefixes(prefixes)])
    assert [h.tokens for h in forced] == [h.tokens for h in greedy]
