"""Cutting sources into length-sorted batches; the decoding settings reach every search."""

import pytest
import torch
from conftest import VOCAB, build_tiny_model

from seq2seq.config import DecodeConfig
from seq2seq.decode.batched import length_sorted_batches, search_ids
from seq2seq.decode.sampling import TokenSampler
from seq2seq.special import EOS


def test_batches_run_longest_first_and_the_short_remainder_comes_last():
    lengths = [3, 9, 1, 7, 5, 9, 2]
    batches = list(length_sorted_batches(lengths, 3))
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert [[lengths[i] for i in batch] for batch in batches] == [[9, 9, 7], [5, 3, 2], [1]]
    assert batches[0] == [1, 5, 3]  # equal lengths keep their input order


def _repeats(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("sampled", [False, True])
def test_greedy_search_and_sampling_honour_no_repeat_ngram(sampled):
    """An untrained model loops; with ``decode.no_repeat_ngram`` no output of greedy search or sampling
    holds any bigram twice (beam search had it already: the setting must reach every search)."""
    model = build_tiny_model(seed=3)
    sources = [[4 + (i * 7 + j) % (VOCAB - 4) for j in range(4 + i % 6)] + [EOS] for i in range(12)]

    def outputs(no_repeat: int) -> list[list[int]]:
        decode = DecodeConfig(beam=1, max_len_a=0.0, max_len_b=30, no_repeat_ngram=no_repeat, batch_sentences=8)
        sampler = TokenSampler(temperature=0.5, seed=1) if sampled else None
        found = search_ids(model, sources, decode, torch.device("cpu"), beam=1, sampler=sampler)
        return [hyps[0].tokens for hyps in found]

    assert any(_repeats(tokens, 2) for tokens in outputs(0))  # the loop the setting is for
    assert not any(_repeats(tokens, 2) for tokens in outputs(2))
