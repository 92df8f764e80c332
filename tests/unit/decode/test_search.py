"""seq2seq.decode.search: beam 1 equals greedy, cached equals uncached, batch composition
does not change a sentence's output, a scripted decoder with hand-computed
hypotheses and scores, n-gram blocking, length limits, outputs that do not depend on the kernels."""

import math

import pytest
import torch
from conftest import (
    END,
    GREEDY_TRAP,
    PAD,
    SCRIPT_VOCAB,
    START,
    UNK,
    A,
    B,
    C,
    EosRamp,
    ScriptedModel,
    gnmt,
    mixed_lengths,
    script_src,
    sources,
    unpad,
)
from torch import Tensor

import seq2seq.decode.search as search
from seq2seq.decode.search import beam_search, greedy_search, length_limits


# -- a real (tiny, random) model --------------------------------------------
@pytest.fixture(params=["bos", "pad"])
def ramp_model(request, tiny_model):
    """Every invariant below holds for a decoder that starts from <start> and one that starts from <pad>."""
    return EosRamp(tiny_model(decoder_start=request.param))


class FirstInputs(EosRamp):
    """Records the decoder's first input ids of every search (the start tokens)."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.first: list[list[int]] = []

    def decode(self, tgt, memory, src_mask, cache=None):
        if cache is None or cache.length == 0:
            self.first.append(tgt[:, 0].tolist())
        return super().decode(tgt, memory, src_mask, cache)


@pytest.mark.parametrize(("start", "token"), [("bos", START), ("pad", PAD)])
def test_searches_start_from_the_models_start_token(tiny_model, start, token):
    model = FirstInputs(tiny_model(decoder_start=start))
    src = sources(3)
    greedy_search(model, src)
    greedy_search(model, src, use_cache=False)
    beam_search(model, src, beam=2)
    assert {3, 6} <= {len(ids) for ids in model.first}  # greedy's rows, beam search's 2 x 3 (and fewer as they end)
    assert all(ids == [token] * len(ids) for ids in model.first)


def test_the_start_token_changes_the_outputs(tiny_model):
    src = sources(8, seed=5)
    bos = greedy_search(EosRamp(tiny_model(decoder_start="bos")), src)
    pad = greedy_search(EosRamp(tiny_model(decoder_start="pad")), src)
    assert [h.tokens for h in bos] != [h.tokens for h in pad]


def test_ramp_model_mixes_eos_and_length_limit_endings(ramp_model):
    """Guard for the tests below: some outputs end with <end>, some at the limit."""
    src = sources(12)
    limits = length_limits(src, 1.5, 10, ramp_model.cfg.max_positions).tolist()
    lengths = [len(h.tokens) for h in greedy_search(ramp_model, src)]
    assert any(n < limit for n, limit in zip(lengths, limits, strict=True))
    assert any(n == limit for n, limit in zip(lengths, limits, strict=True))
    assert len(set(lengths)) > 2


def test_beam_size_one_equals_greedy(ramp_model):
    src = sources(12, seed=1)
    greedy = greedy_search(ramp_model, src)
    beam = beam_search(ramp_model, src, beam=1, length_penalty=0.0)
    for g, (b,) in zip(greedy, beam, strict=True):
        assert b.tokens == g.tokens
        assert b.score == pytest.approx(g.score, abs=1e-4)


def test_beam_size_one_equals_greedy_plain_random_model(tiny_model):
    """Without the <end> ramp (every output runs to its length limit)."""
    model = tiny_model(seed=3)
    src = sources(6, seed=2)
    greedy = greedy_search(model, src)
    beam = beam_search(model, src, beam=1, length_penalty=0.0)
    assert [b[0].tokens for b in beam] == [g.tokens for g in greedy]


def test_cached_equals_uncached_greedy(ramp_model):
    src = sources(10, seed=3)
    cached = greedy_search(ramp_model, src, use_cache=True)
    uncached = greedy_search(ramp_model, src, use_cache=False)
    assert [h.tokens for h in cached] == [h.tokens for h in uncached]
    assert [h.score for h in cached] == pytest.approx([h.score for h in uncached], abs=1e-4)


@pytest.mark.parametrize("beam", [2, 4])
def test_cached_equals_uncached_beam(ramp_model, beam):
    src = sources(8, seed=4)
    cached = beam_search(ramp_model, src, beam=beam, nbest=beam, use_cache=True)
    uncached = beam_search(ramp_model, src, beam=beam, nbest=beam, use_cache=False)
    for c, u in zip(cached, uncached, strict=True):
        assert [h.tokens for h in c] == [h.tokens for h in u]
        assert [h.score for h in c] == pytest.approx([h.score for h in u], abs=1e-4)


def test_batch_composition_does_not_change_outputs(ramp_model):
    """A sentence decodes the same alone as in a batch of 50 of mixed lengths."""
    src = sources(50, seed=5, max_len=14)
    greedy_batch = greedy_search(ramp_model, src)
    beam_batch = beam_search(ramp_model, src, beam=3, nbest=2)
    for row in range(src.size(0)):
        alone = unpad(src, row)
        (greedy_alone,) = greedy_search(ramp_model, alone)
        (beam_alone,) = beam_search(ramp_model, alone, beam=3, nbest=2)
        assert greedy_alone.tokens == greedy_batch[row].tokens
        assert greedy_alone.score == pytest.approx(greedy_batch[row].score, abs=1e-4)
        assert [h.tokens for h in beam_alone] == [h.tokens for h in beam_batch[row]]
        assert [h.score for h in beam_alone] == pytest.approx([h.score for h in beam_batch[row]], abs=1e-4)


def test_beam_outputs_are_sorted_and_nbest_sized(ramp_model):
    src = sources(6, seed=6)
    for hyps in beam_search(ramp_model, src, beam=4, nbest=3):
        assert len(hyps) == 3
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert all(START not in h.tokens and END not in h.tokens and PAD not in h.tokens for h in hyps)


# -- a scripted decoder with hand-set probabilities ------------------------
# Script 2: the short output [A] (p = 0.42, 2 tokens with <end>) beats the long
# [B, B] (p = 0.4·0.99·0.99 = 0.39204, 3 tokens) on raw log-probability, but
# loses with the length penalty α = 1: -0.8675/(7/6) = -0.7436 < -0.9364/(8/6) = -0.7023.
SHORT_VS_LONG = {
    (): {A: 0.6, B: 0.4},
    (A,): {END: 0.7, C: 0.3},
    (B,): {B: 0.99, END: 0.01},
    (A, C): {A: 0.6, C: 0.4},
    (B, B): {END: 0.99, B: 0.01},
}


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_scripted_beam_finds_better_path_than_greedy(alpha):
    model = ScriptedModel({7: GREEDY_TRAP})
    (hyps,) = beam_search(model, script_src(7), beam=2, nbest=2, length_penalty=alpha, use_cache=False)
    assert [h.tokens for h in hyps] == [[B], [A]]
    assert hyps[0].score == pytest.approx(math.log(0.4 * 0.9) / gnmt(2, alpha), abs=1e-6)
    assert hyps[1].score == pytest.approx(math.log(0.6 * 0.4) / gnmt(2, alpha), abs=1e-6)
    # nbest=1 keeps only the best
    (best,) = beam_search(model, script_src(7), beam=2, nbest=1, length_penalty=alpha, use_cache=False)
    assert [h.tokens for h in best] == [[B]]


def test_scripted_greedy_takes_the_locally_best_path():
    model = ScriptedModel({7: GREEDY_TRAP, 8: SHORT_VS_LONG})
    trap, short = greedy_search(model, script_src(7, 8), use_cache=False)
    assert trap.tokens == [A]
    assert trap.score == pytest.approx(math.log(0.6) + math.log(0.4), abs=1e-6)  # summed, no penalty
    assert short.tokens == [A]
    assert short.score == pytest.approx(math.log(0.6 * 0.7), abs=1e-6)


@pytest.mark.parametrize(
    ("alpha", "expected"),
    [
        (0.0, [([A], math.log(0.6 * 0.7)), ([B, B], math.log(0.4 * 0.99 * 0.99))]),
        (1.0, [([B, B], math.log(0.4 * 0.99 * 0.99) / (8 / 6)), ([A], math.log(0.6 * 0.7) / (7 / 6))]),
    ],
)
def test_scripted_length_penalty_changes_the_ranking(alpha, expected):
    model = ScriptedModel({8: SHORT_VS_LONG})
    (hyps,) = beam_search(model, script_src(8), beam=2, nbest=2, length_penalty=alpha, use_cache=False)
    assert [h.tokens for h in hyps] == [tokens for tokens, _ in expected]
    assert [h.score for h in hyps] == pytest.approx([score for _, score in expected], abs=1e-6)


def test_scripted_sentences_in_one_batch_do_not_interfere():
    """Two scripts in one batch give each its own result (beams stay within their sentence)."""
    model = ScriptedModel({7: GREEDY_TRAP, 8: SHORT_VS_LONG})
    trap, short = beam_search(model, script_src(7, 8), beam=2, nbest=2, length_penalty=1.0, use_cache=False)
    assert [h.tokens for h in trap] == [[B], [A]]
    assert [h.tokens for h in short] == [[B, B], [A]]
    assert short[0].score == pytest.approx(math.log(0.4 * 0.99 * 0.99) / (8 / 6), abs=1e-6)


def test_scripted_beam_stops_a_sentence_once_beam_hypotheses_finished():
    """SHORT_VS_LONG is done at the third step: no prefix longer than 2 tokens is ever scored."""
    model = ScriptedModel({8: SHORT_VS_LONG})
    beam_search(model, script_src(8), beam=2, use_cache=False)
    assert max(len(p) for p in model.prefixes if PAD not in p) == 2


# Script 3: at step 2 the 2N = 4 best candidates are A<end> .3, AA .24, B<end> .2,
# BB .16. A<end> (rank 1) finishes; B<end> ranks 3rd, beyond the beam, so it does
# not (only an <end> among the top N finishes a hypothesis); AA<end> .216 and
# BB<end> .144 finish at step 3.
LOW_RANKED_END = {
    (): {A: 0.6, B: 0.4},
    (A,): {END: 0.5, A: 0.4, C: 0.1},
    (B,): {END: 0.5, B: 0.4, C: 0.1},
    (A, A): {END: 0.9, A: 0.1},
    (B, B): {END: 0.9, B: 0.1},
}


def test_scripted_end_below_the_beam_does_not_finish():
    model = ScriptedModel({10: LOW_RANKED_END})
    (hyps,) = beam_search(model, script_src(10), beam=2, nbest=3, length_penalty=0.0, use_cache=False)
    assert [h.tokens for h in hyps] == [[A], [A, A], [B, B]]
    expected = [math.log(0.6 * 0.5), math.log(0.6 * 0.4 * 0.9), math.log(0.4 * 0.4 * 0.9)]
    assert [h.score for h in hyps] == pytest.approx(expected, abs=1e-6)


# A decoder that always prefers repeating its last token (A after <start>).
def _repeater(vocab: int = SCRIPT_VOCAB) -> ScriptedModel:
    class Repeater(ScriptedModel):
        def logits(self, states: Tensor) -> Tensor:
            out = torch.full((states.size(0), self.vocab), math.log(0.01))
            for i, row in enumerate(states.long().tolist()):
                last = row[-1] if row[-1] not in (START, PAD) else A
                out[i, last] = math.log(0.6)
                out[i, A + (last - A + 1) % 3] = math.log(0.2)  # the next of A, B, C
            out[:, [PAD, UNK, START]] = float("-inf")
            return out

    return Repeater({}, vocab=vocab)


def _repeated_bigrams(tokens: list[int]) -> list[tuple[int, int]]:
    bigrams = list(zip(tokens, tokens[1:], strict=False))
    return [g for g in set(bigrams) if bigrams.count(g) > 1]


def test_no_repeat_ngram_blocks_repeated_bigrams():
    model = _repeater()
    src = script_src(9, 9)
    (plain,), _ = beam_search(model, src, beam=3, use_cache=False)
    assert _repeated_bigrams(plain.tokens), "the repeater should repeat without blocking"
    for hyps in beam_search(model, src, beam=3, nbest=3, no_repeat_ngram=2, use_cache=False):
        for h in hyps:
            assert not _repeated_bigrams(h.tokens), h.tokens


def test_no_repeat_ngram_real_model(ramp_model):
    src = sources(8, seed=7)
    for hyps in beam_search(ramp_model, src, beam=3, nbest=3, no_repeat_ngram=2):
        for h in hyps:
            assert not _repeated_bigrams(h.tokens), h.tokens


@pytest.mark.parametrize(("a", "b"), [(1.5, 10), (0.0, 3), (2.0, 1)])
def test_outputs_never_exceed_the_length_limit(tiny_model, a, b):
    """A random model rarely says <end>: outputs run to exactly the limit, never past it."""
    model = tiny_model(seed=1)
    src = sources(6, seed=8)
    lengths = (src != PAD).sum(dim=1).tolist()
    limits = [int(a * n + b) for n in lengths]
    greedy = greedy_search(model, src, max_len_a=a, max_len_b=b)
    beam = beam_search(model, src, beam=3, nbest=3, max_len_a=a, max_len_b=b)
    for limit, g, hyps in zip(limits, greedy, beam, strict=True):
        assert len(g.tokens) <= limit
        assert all(len(h.tokens) <= limit for h in hyps)
    assert max(len(g.tokens) for g in greedy) == max(limits)


def test_scripted_never_ending_decoder_stops_at_the_limit():
    """With <end> impossible, greedy and beam return exactly ``a·len(src) + b`` tokens."""
    model = ScriptedModel({}, default={A: 0.5, B: 0.3, C: 0.2})
    src = torch.tensor([[4, 4, 4, END], [5, END, PAD, PAD]])  # lengths 4 and 2
    greedy = greedy_search(model, src, max_len_a=1.0, max_len_b=2, use_cache=False)
    assert [len(h.tokens) for h in greedy] == [6, 4]
    assert greedy[1].tokens == [A] * 4 and greedy[1].score == pytest.approx(4 * math.log(0.5), abs=1e-6)
    beam = beam_search(model, src, beam=2, nbest=2, max_len_a=1.0, max_len_b=2, length_penalty=1.0, use_cache=False)
    assert [[len(h.tokens) for h in hyps] for hyps in beam] == [[6, 6], [4, 4]]
    # live beams finished by the limit: scored over their tokens, no <end> counted
    assert beam[1][0].tokens == [A] * 4
    assert beam[1][0].score == pytest.approx(4 * math.log(0.5) / gnmt(4, 1.0), abs=1e-6)


def test_length_limits_values():
    src = torch.tensor([[5, 6, END, PAD, PAD], [5, 6, 7, 8, END], [END, PAD, PAD, PAD, PAD]])
    assert length_limits(src, 1.5, 10, 512).tolist() == [14, 17, 11]  # 1.5·3+10 = 14.5 -> 14
    assert length_limits(src, 0.0, 7, 512).tolist() == [7, 7, 7]
    assert length_limits(src, 2.0, 0, 512).tolist() == [6, 10, 2]
    assert length_limits(src, 10.0, 100, 64).tolist() == [63, 63, 63]  # within the position table
    assert length_limits(src, 0.0, 0, 64).tolist() == [1, 1, 1]  # at least one token


# -- the kernels (seq2seq.decode.kernels) change no output ---------------------
def test_beam_search_outputs_do_not_depend_on_the_grouped_topk(tiny_model, monkeypatch):
    """A vocabulary wide enough to be grouped (N·V = 5·400): the same hypotheses as with plain topk."""
    model = EosRamp(tiny_model(src_vocab=400, tgt_vocab=400))
    src = sources(6, vocab=400)
    grouped = beam_search(model, src, beam=5, nbest=5)
    monkeypatch.setattr(search, "row_topk", lambda scores, k: scores.topk(k, dim=1))
    assert beam_search(model, src, beam=5, nbest=5) == grouped


@pytest.mark.parametrize("nbest", [1, 3])
def test_searches_do_not_depend_on_the_reused_buffer(ramp_model, monkeypatch, nbest):
    """Sentences leave the batch at different steps (the rows shrink): the outputs of a fresh tensor per step."""
    src = sources(7)
    reused = beam_search(ramp_model, src, beam=3, nbest=nbest), greedy_search(ramp_model, src)
    step = search.step_log_probs
    monkeypatch.setattr(search, "step_log_probs", lambda *args: step(*args[:5]))  # no buffer: a fresh tensor per step
    assert (beam_search(ramp_model, src, beam=3, nbest=nbest), greedy_search(ramp_model, src)) == reused


def test_searches_do_not_depend_on_the_length_groups(ramp_model, monkeypatch):
    """The same hypotheses as from one padded encode; scores agree to rounding (the groups' products
    have other shapes, so float32 sums in another order)."""
    src = mixed_lengths([3, 20, 9, 2, 11, 5])
    grouped = [*beam_search(ramp_model, src, beam=3, nbest=2), *([h] for h in greedy_search(ramp_model, src))]
    monkeypatch.setattr(search, "encode_by_length", lambda model, s, m: model.encode(s, m))
    padded = [*beam_search(ramp_model, src, beam=3, nbest=2), *([h] for h in greedy_search(ramp_model, src))]
    assert [[h.tokens for h in hyps] for hyps in grouped] == [[h.tokens for h in hyps] for hyps in padded]
    assert [h.score for hyps in grouped for h in hyps] == pytest.approx(
        [h.score for hyps in padded for h in hyps], abs=1e-4
    )
