"""seq2seq.decode.kernels: each kernel gives what its plain form gives. Grouped encoding equals one
padded encode at the real positions; the log-probability buffer holds the float32 log-softmax of the
logits, in the first step's tensor; the grouped top-k equals ``topk``, ties included."""

import pytest
import torch
import torch.nn.functional as F
from conftest import VOCAB, mixed_lengths, recorded_logits, sources

from seq2seq.decode.kernels import LogProbBuffer, encode_by_length, row_topk
from seq2seq.decode.search import start_beams, step_log_probs
from seq2seq.model.masks import padding_mask
from seq2seq.special import PAD


# -- the encoder, run on groups of similar length ------------------------------
def test_encode_by_length_equals_one_padded_encode_at_real_positions(tiny_model):
    model = tiny_model()
    src = mixed_lengths([3, 20, 9, 2, 11, 5])  # groups (longest first): 20 11; 9 5; 3 2
    src_mask = padding_mask(src, PAD)
    widths = []
    encode = model.encode
    model.encode = lambda s, m: widths.append(s.size(1)) or encode(s, m)
    memory = encode_by_length(model, src, src_mask)
    assert widths == [20, 9, 3]
    padded = encode(src, src_mask)
    real = src_mask[:, 0, 0, :, None]  # (B, S, 1)
    torch.testing.assert_close(memory * real, padded * real, rtol=0, atol=1e-5)
    assert memory[3, 3:].abs().sum() == 0  # the 2-token row's group is 3 wide: zeros past it


def test_encode_by_length_keeps_one_call_for_similar_lengths(tiny_model):
    model = tiny_model()
    src = mixed_lengths([8, 5, 4, 7])
    calls = []
    encode = model.encode
    model.encode = lambda s, m: calls.append(s) or encode(s, m)
    encode_by_length(model, src, padding_mask(src, PAD))
    assert len(calls) == 1 and calls[0] is src


# -- the log-probabilities' buffer, reused from step to step -----------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_later_steps_write_into_the_rows_of_the_first_steps_tensor(dtype):
    logits = torch.randn(10, VOCAB, generator=torch.Generator().manual_seed(0)).to(dtype) * 4
    buffer = LogProbBuffer()
    first = buffer.log_softmax(logits)  # (10, V)
    untouched = first[6:].clone()
    later = buffer.log_softmax(logits[:6] * 2)  # a later step, with rows that left the search
    assert later.data_ptr() == first.data_ptr() and later.shape == (6, VOCAB)
    assert torch.equal(first[6:], untouched)  # rows past the step's stay as they were
    for log_probs, step_logits in ((untouched, logits[6:]), (later, logits[:6] * 2)):
        assert log_probs.dtype == torch.float32
        fresh = F.log_softmax(step_logits, dim=-1, dtype=torch.float32)
        torch.testing.assert_close(log_probs, fresh, rtol=0, atol=1e-6)


def test_step_log_probs_of_a_bf16_model_are_the_float32_log_softmax_of_its_logits(tiny_model):
    """Fresh or written into the buffer: in bf16 a log-probability near -4 is off by up to 0.008 a step."""
    model = tiny_model().to(torch.bfloat16)
    memory, src_mask, tokens, _ = start_beams(model, sources(3), 2, use_cache=False)
    buffer = LogProbBuffer()
    with recorded_logits(model) as seen:
        fresh = step_log_probs(model, tokens, memory, src_mask, None)
        first = step_log_probs(model, tokens, memory, src_mask, None, buffer).clone()
        into = step_log_probs(model, tokens, memory, src_mask, None, buffer)  # in place, in the first's rows
    for log_probs, logits in zip((fresh, first, into), seen, strict=True):
        assert logits.dtype == torch.bfloat16 and log_probs.dtype == torch.float32
        expected = F.log_softmax(logits.double(), dim=-1)
        torch.testing.assert_close(log_probs.double(), expected, rtol=0, atol=1e-5)


# -- the grouped top-k of beam search's candidates ----------------------------
@pytest.mark.parametrize("width", [20_000, 5 * 257, 4_000, 640, 97, 12])  # grouped, and too narrow or prime
@pytest.mark.parametrize("k", [1, 10])
def test_row_topk_equals_topk(width, k):
    scores = torch.randn(6, width, generator=torch.Generator().manual_seed(width + k)) * 4
    scores[1] = float("-inf")  # a row of beams that start at -inf
    scores[2, : width // 2] = float("-inf")
    k = min(k, width)
    values, index = row_topk(scores, k)
    expected_values, expected_index = scores.topk(k, dim=1)
    assert torch.equal(values, expected_values)
    assert torch.equal(index[[0, 2, 3, 4, 5]], expected_index[[0, 2, 3, 4, 5]])  # distinct values: same entries
    assert torch.equal(scores.gather(1, index), values)  # the -inf row: any k of its equal entries


def test_row_topk_ties_give_the_tied_values():
    """bf16 log-probabilities tie often: the values stay those of topk, each index one of a tied entry."""
    scores = torch.randint(-40, 0, (8, 20_000), generator=torch.Generator().manual_seed(0)).float() / 8
    values, index = row_topk(scores, 10)
    assert torch.equal(values, scores.topk(10, dim=1).values)
    assert torch.equal(scores.gather(1, index), values)
    assert all(len(set(row)) == 10 for row in index.tolist())  # no entry taken twice
