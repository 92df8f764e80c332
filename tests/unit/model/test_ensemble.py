"""seq2seq.model.ensemble: one member decodes like the model itself; two copies of one model too; the
step distribution is the renormalised mean of the members' log-probabilities; members of different
widths and depths decode with the cache exactly as without it, in greedy and beam search."""

import pytest
import torch
import torch.nn.functional as F
from conftest import PAD, START, EosRamp, sources

from seq2seq.decode.search import beam_search, greedy_search
from seq2seq.model.ensemble import Ensemble
from seq2seq.model.layers import DecoderCache
from seq2seq.model.masks import padding_mask


def _same(found, expected):
    assert [h.tokens for h in found] == [h.tokens for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-4)


@pytest.mark.parametrize("copies", [1, 2])
def test_copies_of_one_model_decode_like_the_model(tiny_model, copies):
    model = EosRamp(tiny_model(seed=4))
    ensemble = Ensemble([model] * copies)
    src = sources(8, seed=21)
    _same(greedy_search(ensemble, src), greedy_search(model, src))
    for e, m in zip(beam_search(ensemble, src, beam=3, nbest=3), beam_search(model, src, beam=3, nbest=3), strict=True):
        _same(e, m)


def test_step_distribution_is_the_mean_of_log_probabilities(tiny_model):
    members = [tiny_model(seed=1), tiny_model(seed=2, d_model=48, decoder_layers=3)]
    ensemble = Ensemble(members)
    src = sources(3, seed=22)
    tgt = torch.tensor([[START, 5, 6], [START, 7, 8], [START, 9, PAD]])
    mask = padding_mask(src, PAD)
    got = F.log_softmax(ensemble.logits(ensemble.decode(tgt, ensemble.encode(src, mask), mask)), dim=-1)
    each = [F.log_softmax(m(src, tgt), dim=-1) for m in members]  # (B, T, V) per member
    expected = F.log_softmax((each[0] + each[1]) / 2, dim=-1)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_members_of_different_shapes_cached_equals_uncached(tiny_model):
    ensemble = Ensemble([EosRamp(tiny_model(seed=5)), tiny_model(seed=6, d_model=48, decoder_layers=3, heads=6)])
    src = sources(8, seed=23)
    _same(greedy_search(ensemble, src, use_cache=True), greedy_search(ensemble, src, use_cache=False))
    cached = beam_search(ensemble, src, beam=3, nbest=3, use_cache=True)
    uncached = beam_search(ensemble, src, beam=3, nbest=3, use_cache=False)
    for c, u in zip(cached, uncached, strict=True):
        _same(c, u)


def test_one_shared_cache_holds_every_members_layers(tiny_model):
    ensemble = Ensemble([tiny_model(seed=7), tiny_model(seed=8, decoder_layers=3)])
    src = sources(2, seed=24)
    mask = padding_mask(src, PAD)
    cache = DecoderCache()
    ensemble.decode(torch.full((2, 1), START), ensemble.encode(src, mask), mask, cache)
    assert len(cache.self_kv) == len(cache.cross_kv) == 2 + 3
    assert cache.length == 1
