"""seq2seq.decode.forced: the forced score of the model's own greedy output is greedy search's score, the
normalized score of a beam output is beam search's score, per-token log-probabilities sum to the
total, and batching (composition, order) does not change a sentence's score."""

import pytest
import torch
import torch.nn.functional as F
from conftest import END, PAD, PositionRamp, recorded_logits, sources, unpad
from torch import Tensor

from seq2seq.decode.batched import pad_batch
from seq2seq.decode.forced import score_ids, target_log_probs
from seq2seq.decode.search import beam_search, greedy_search, length_limits
from seq2seq.model.ensemble import Ensemble


def _ids(src: Tensor) -> list[list[int]]:
    return [unpad(src, row)[0].tolist() for row in range(src.size(0))]


@pytest.fixture(params=["bos", "pad"])
def ramp(request, tiny_model):
    """A decoder starting from <start>, and one starting from <pad> as MarianMT's does."""
    return PositionRamp(tiny_model(seed=9, decoder_start=request.param))


def test_greedy_output_scores_as_greedy_search(ramp):
    src = sources(16, seed=31)
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
    src = sources(10, seed=32)
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
    src = sources(9, seed=33)
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


def test_a_bf16_models_scores_are_the_float32_log_softmax_of_its_logits(tiny_model):
    """The scorer's softmax runs in float32 whatever the model's dtype: in bf16 a log-probability near -4 is off
    by up to 0.008, and the errors add up over a sentence."""
    model = tiny_model(seed=12).to(torch.bfloat16)
    gen = torch.Generator().manual_seed(2)
    targets = [[*torch.randint(4, 40, (n,), generator=gen).tolist(), END] for n in (3, 7, 1, 5)]
    src, tgt = sources(4, seed=35), pad_batch(targets, torch.device("cpu"))
    with recorded_logits(model) as seen:
        got = target_log_probs(model, src, tgt)
    (logits,) = seen
    assert logits.dtype == torch.bfloat16 and got.dtype == torch.float32
    expected = F.log_softmax(logits.double(), dim=-1).gather(-1, tgt[:, :, None]).squeeze(-1)
    torch.testing.assert_close(got.double(), expected.masked_fill(tgt == PAD, 0.0), rtol=0, atol=1e-5)
