"""seq2seq.decode.constrained and seq2seq.decode.glossary: without constraints the search is plain beam search;
constraints appear in the output (scripted decoder with hand-computed results, and a tiny random
model); phrase progress is lost when a phrase is left half-way; glossary files and term matching."""

import math

import pytest
import torch
from conftest import END, GREEDY_TRAP, A, B, C, EosRamp, ScriptedModel, gnmt, script_src, sources, write_lines

from seq2seq.decode.constrained import advance, allowed_next, bank_sizes, constrained_beam_search, is_complete
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.search import beam_search
from seq2seq.errors import UserError


@pytest.fixture
def ramp_model(tiny_model):
    return EosRamp(tiny_model())


def _contains(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[k : k + len(phrase)] == phrase for k in range(len(tokens) - len(phrase) + 1))


@pytest.mark.parametrize("beam", [2, 4])
def test_no_constraints_is_plain_beam_search(ramp_model, beam):
    src = sources(12, seed=11)
    plain = beam_search(ramp_model, src, beam=beam, nbest=beam)
    constrained = constrained_beam_search(ramp_model, src, [[]] * 12, beam=beam, nbest=beam)
    for p, c in zip(plain, constrained, strict=True):
        assert [h.tokens for h in c] == [h.tokens for h in p]
        assert [h.score for h in c] == pytest.approx([h.score for h in p], abs=1e-5)


def test_scripted_constraint_appears_and_unconstrained_sentence_is_unchanged():
    """GREEDY_TRAP's best output is [B]; forcing C gives A C <end> (p = .6 · .25 · .97), since C
    cannot come first and after B it has only .05. The second sentence, without constraints,
    in the same batch, gets plain beam search's result."""
    model = ScriptedModel({7: GREEDY_TRAP})
    src = script_src(7, 7)
    (plain, _) = beam_search(model, src, beam=3, nbest=2, use_cache=False)
    assert plain[0].tokens == [B]
    forced, free = constrained_beam_search(model, src, [[[C]], []], beam=3, nbest=2, use_cache=False)
    assert forced[0].tokens == [A, C]
    assert forced[0].score == pytest.approx(math.log(0.6 * 0.25 * 0.97) / gnmt(3, 1.0), abs=1e-6)
    assert all(C in h.tokens for h in forced)
    assert [h.tokens for h in free] == [h.tokens for h in plain]
    assert [h.score for h in free] == pytest.approx([h.score for h in plain], abs=1e-6)


def test_constraints_appear_on_a_real_model(ramp_model):
    """Random two-token phrases (and one single token) appear, contiguous, in every best output."""
    src = sources(8, seed=12)
    gen = torch.Generator().manual_seed(0)
    phrases = [
        [torch.randint(4, 40, (2,), generator=gen).tolist(), [int(torch.randint(4, 40, (1,), generator=gen))]]
        for _ in range(8)
    ]
    results = constrained_beam_search(ramp_model, src, phrases, beam=4, nbest=1, max_len_a=0.0, max_len_b=12)
    for constraint, (best,) in zip(phrases, results, strict=True):
        for phrase in constraint:
            assert _contains(best.tokens, phrase), (best.tokens, phrase)


def test_phrase_progress_is_lost_when_the_phrase_is_left():
    phrases = [[A, B], [C]]
    state = advance(phrases, (0, 0), A)
    assert state == (1, 0) and allowed_next(phrases, state) == {B}
    assert advance(phrases, state, C) == (0, 1)  # left [A, B] half-way; C starts the other phrase
    assert advance(phrases, state, A) == (1, 0)  # A again restarts the phrase
    done = advance(phrases, advance(phrases, advance(phrases, (0, 0), A), B), C)
    assert done == (2, 1) and is_complete(phrases, done) and allowed_next(phrases, done) == set()
    assert allowed_next(phrases, (0, 0)) == {A, C}


def test_bank_sizes_share_the_beam():
    assert bank_sizes(5, 1) == [5]
    assert bank_sizes(5, 3) == [1, 2, 2]  # the remainder goes to the banks with most constraints met
    assert bank_sizes(2, 4) == [0, 0, 1, 1]
    assert sum(bank_sizes(7, 4)) == 7


def test_glossary_reads_terms_and_matches_sources(tmp_path):
    path = write_lines(tmp_path / "terms.tsv", ["# comment", "北京\tBeijing", "", "上海\tShanghai", "京\tBeijing"])
    glossary = Glossary.read(path)
    assert glossary.terms == (("北京", "Beijing"), ("上海", "Shanghai"), ("京", "Beijing"))
    assert glossary.targets_for("他昨天去了北京。") == ["Beijing"]  # once, though two terms match
    assert glossary.targets_for("从上海到北京") == ["Beijing", "Shanghai"]
    assert glossary.targets_for("你好") == []


@pytest.mark.parametrize("line", ["北京 Beijing", "北京\t", "北京\tBeijing\textra"])
def test_glossary_bad_line_is_an_error_naming_the_line(tmp_path, line):
    path = write_lines(tmp_path / "terms.tsv", ["上海\tShanghai", line])
    with pytest.raises(UserError, match=r"terms.tsv:2: expected"):
        Glossary.read(path)


def test_glossary_missing_file_is_an_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        Glossary.read(tmp_path / "missing.tsv")


def test_scripted_end_token_needs_every_constraint():
    """The default distribution prefers <end> at once (.97); with constraint [A, B] the output
    is A B (then <end>)."""
    model = ScriptedModel({}, default={END: 0.97, A: 0.01, B: 0.01, C: 0.01})
    ((best,),) = constrained_beam_search(model, script_src(9), [[[A, B]]], beam=3, use_cache=False)
    assert best.tokens == [A, B]
    assert best.score == pytest.approx(math.log(0.01 * 0.01 * 0.97) / gnmt(3, 1.0), abs=1e-6)
