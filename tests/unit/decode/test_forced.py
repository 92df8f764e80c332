"""seq2seq.forced: the forced score of the model's own greedy output is greedy search's score, the
normalized score of a beam output is beam search's score, per-token log-probabilities sum to the
total, and batching (composition, order) does not change a sentence's score."""

import pytest
import torch
from conftest import END, PAD, START
from test_search import _sources, _unpad
from torch import Tensor, nn

from seq2seq.ensemble import Ensemble
from seq2seq.forced import score_ids
from seq2seq.layers import DecoderCache
from seq2seq.search import beam_search, greedy_search, length_limits


class PositionRamp(nn.Module):
    """A tiny model whose <end> logit grows with the position, whole targets or one step at a time,
    so outputs end at different lengths (with <end>) and teacher forcing sees the same logits;
    like a trained model, it never predicts <pad> or <start>."""

    def __init__(self, inner: nn.Module, slope: float = 0.5, offset: float = -3.0) -> None:
        super().__init__()
        self.inner, self.cfg, self.slope, self.offset = inner, inner.cfg, slope, offset
        self.first = 0

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self.inner.encode(src, src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        self.first = cache.length if cache is not None else 0
        return self.inner.decode(tgt, memory, src_mask, cache)

    def logits(self, states: Tensor) -> Tensor:
        out = self.inner.logits(states).clone()
        if states.dim() == 2:  # the searches ask for the last position only
            positions = torch.tensor(float(self.first + 1))
        else:  # (B, T, D): every position
            positions = self.first + torch.arange(1, states.size(1) + 1, dtype=torch.float)[None, :]
        out[..., END] += self.slope * positions + self.offset
        out[..., [PAD, START]] = float("-inf")  # like a trained model: no output is <pad> or <start>
        return out


def _ids(src: Tensor) -> list[list[int]]:
    return [_unpad(src, row)[0].tolist() for row in range(src.size(0))]


@pytest.fixture
def ramp(tiny_model):
    return PositionRamp(tiny_model(seed=9))


def test_greedy_output_scores_as_greedy_search(ramp):
    src = _sources(16, seed=31)
    greedy = greedy_search(ramp, src)
    limits = length_limits(src, 1.5, 10, ramp.cfg.max_positions).tolist()
    forced = score_ids(ramp, _ids(src), [h.tokens for h in greedy], torch.device("cpu"), 5, 1.0)
    ended = 0
    for h, f, limit in zip(greedy, forced, limits, strict=True):
        assert len(f.token_log_probs) == len(h.tokens) + 1  # the tokens and <end>
        assert f.log_prob == pytest.approx(sum(f.token_log_probs), abs=1e-5)
        if len(h.tokens) < limit:  # ended with <end>, which greedy's score counts
            ended += 1
            assert f.log_prob == pytest.approx(h.score, abs=1e-4)
        else:  # stopped by the limit: greedy never chose <end>
            assert sum(f.token_log_probs[:-1]) == pytest.approx(h.score, abs=1e-4)
    assert 0 < ended < len(greedy)  # both kinds of ending were checked


def test_beam_output_normalized_score_is_beam_searchs(ramp):
    src = _sources(10, seed=32)
    limits = length_limits(src, 1.5, 10, ramp.cfg.max_positions).tolist()
    best = [hyps[0] for hyps in beam_search(ramp, src, beam=4, length_penalty=0.6)]
    forced = score_ids(ramp, _ids(src), [h.tokens for h in best], torch.device("cpu"), 64, 0.6)
    checked = 0
    for h, f, limit in zip(best, forced, limits, strict=True):
        if len(h.tokens) < limit:
            checked += 1
            assert f.normalized == pytest.approx(h.score, abs=1e-4)
    assert checked > 0


def test_batching_does_not_change_scores(tiny_model):
    model = Ensemble([tiny_model(seed=10), tiny_model(seed=11, d_model=48)])  # ensembles score too
    src = _sources(9, seed=33)
    gen = torch.Generator().manual_seed(1)
    targets = [
        torch.randint(4, 40, (int(n),), generator=gen).tolist() for n in torch.randint(1, 9, (9,), generator=gen)
    ]
    together = score_ids(model, _ids(src), targets, torch.device("cpu"), 64, 1.0)
    for size in (1, 4):
        apart = score_ids(model, _ids(src), targets, torch.device("cpu"), size, 1.0)
        for a, t in zip(apart, together, strict=True):
            assert a.token_log_probs == pytest.approx(t.token_log_probs, abs=1e-5)
    assert all(PAD not in t for t in targets)
