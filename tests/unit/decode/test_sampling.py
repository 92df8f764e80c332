"""seq2seq.decode.sampling: temperature → 0, top-k 1 and top-p 0 are greedy; draw frequencies of a
scripted distribution match the truncated, renormalised one; a seed reproduces the draws; scores are
the model's log-probabilities."""

import math
from types import SimpleNamespace

import pytest
import torch
from conftest import (
    END,
    START,
    UNK,
    A,
    B,
    C,
    PositionRamp,
    sources,
    unpad,
)
from torch import Tensor, nn

from seq2seq.config import DecodeConfig
from seq2seq.decode.batched import search_ids
from seq2seq.decode.forced import score_ids
from seq2seq.decode.sampling import TokenSampler
from seq2seq.decode.search import greedy_search
from seq2seq.model.layers import DecoderCache

CPU = torch.device("cpu")


class FixedNext(nn.Module):
    """Every step the same hand-set next-token distribution (it ignores the prefix, so the cache is fine)."""

    def __init__(self, probs: dict[int, float], vocab: int = 7) -> None:
        super().__init__()
        self.cfg = SimpleNamespace(max_positions=64, decoder_start_id=START)
        self.table = torch.full((vocab,), float("-inf"))
        for token, p in probs.items():
            self.table[token] = math.log(p)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return src.float()[:, :, None]

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        return torch.zeros(tgt.size(0), tgt.size(1), 1)

    def logits(self, states: Tensor) -> Tensor:
        return self.table.expand(*states.shape[:-1], self.table.size(0))


FIXED = {A: 0.5, B: 0.25, C: 0.15, END: 0.07, UNK: 0.03}


def _first_token_counts(sampler: TokenSampler, draws: int = 4000) -> dict[int, int]:
    src = torch.tensor([[A, END]]).repeat(draws, 1)
    found = greedy_search(FixedNext(FIXED), src, max_len_a=0.0, max_len_b=1, sampler=sampler)
    counts: dict[int, int] = {}
    for h in found:
        token = h.tokens[0] if h.tokens else END
        counts[token] = counts.get(token, 0) + 1
    return counts


def _truncated(keep: dict[int, float], temperature: float = 1.0) -> dict[int, float]:
    weights = {t: p ** (1 / temperature) for t, p in keep.items()}
    return {t: w / sum(weights.values()) for t, w in weights.items()}


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, FIXED),
        ({"top_k": 3}, _truncated({A: 0.5, B: 0.25, C: 0.15})),
        ({"top_p": 0.8}, _truncated({A: 0.5, B: 0.25, C: 0.15})),  # A+B = .75 < .8: C is needed
        ({"top_p": 0.7}, _truncated({A: 0.5, B: 0.25})),
        ({"temperature": 2.0}, _truncated(FIXED, 2.0)),
        ({"temperature": 0.5, "top_k": 2}, _truncated({A: 0.5, B: 0.25}, 0.5)),
    ],
)
def test_draw_frequencies_match_the_truncated_distribution(settings, expected):
    """4,000 seeded draws; chi-square against the expected distribution below the 0.1% critical value."""
    draws = 4000
    counts = _first_token_counts(TokenSampler(seed=3, **settings), draws)
    assert set(counts) <= set(expected)  # nothing truncated away is ever drawn
    chi2 = sum((counts.get(t, 0) - draws * p) ** 2 / (draws * p) for t, p in expected.items())
    critical = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47}[len(expected) - 1]
    assert chi2 < critical, (counts, expected, chi2)


def test_sampler_truncated_distribution_values():
    log_probs = torch.log(torch.tensor([[0.0, 0.0, 0.0, 0.07, 0.5, 0.25, 0.18]]))
    got = TokenSampler(top_p=0.8).truncated(log_probs).exp()[0]
    torch.testing.assert_close(got, torch.tensor([0, 0, 0, 0, 0.5, 0.25, 0.18]) / 0.93)
    assert TokenSampler(top_p=0.0).truncated(log_probs).exp()[0].tolist() == [0, 0, 0, 0, 1, 0, 0]


@pytest.mark.parametrize("settings", [{"temperature": 0.0}, {"temperature": 1e-4}, {"top_k": 1}, {"top_p": 0.0}])
def test_sampling_limits_are_greedy(tiny_model, settings):
    model = PositionRamp(tiny_model(seed=12))
    src = sources(12, seed=41)
    greedy = greedy_search(model, src)
    sampled = greedy_search(model, src, sampler=TokenSampler(seed=5, **settings))
    assert [h.tokens for h in sampled] == [h.tokens for h in greedy]
    assert [h.score for h in sampled] == pytest.approx([h.score for h in greedy], abs=1e-5)


def test_seed_reproduces_draws_and_scores_are_model_log_probs(tiny_model):
    model = PositionRamp(tiny_model(seed=13))
    source_ids = [unpad(sources(10, seed=42), row)[0].tolist() for row in range(10)]
    decode = DecodeConfig(batch_sentences=4)

    def draw(seed: int):
        return search_ids(
            model, source_ids, decode, CPU, beam=1, nbest=3, sampler=TokenSampler(temperature=1.5, seed=seed)
        )

    first, again, other = draw(7), draw(7), draw(8)
    tokens = [[h.tokens for h in hyps] for hyps in first]
    assert tokens == [[h.tokens for h in hyps] for hyps in again]
    assert tokens != [[h.tokens for h in hyps] for hyps in other]
    assert all(len(hyps) == 3 for hyps in first)
    assert len({tuple(h.tokens) for hyps in first for h in hyps}) > 10  # the draws differ
    flat = [(i, h) for i, hyps in enumerate(first) for h in hyps]
    forced = score_ids(model, [source_ids[i] for i, _ in flat], [h.tokens for _, h in flat], CPU, 64, 1.0)
    for (_, h), f in zip(flat, forced, strict=True):  # untempered log-probabilities (with <end> when drawn)
        assert h.score == pytest.approx(f.log_prob, abs=1e-4) or h.score == pytest.approx(
            sum(f.token_log_probs[:-1]), abs=1e-4
        )
    for hyps in first:
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
