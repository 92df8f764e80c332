"""seq2seq.data.batching: collate, token-limited length buckets, seeded epoch orders, exact resume, padding."""

import json

import pytest
import torch

from seq2seq.data.batching import Batch, BucketSampler, cut_batches, drop_words, padding_fraction
from seq2seq.data.encoded import EncodedSplit
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.special import BOS, EOS, PAD, UNK


def _ids(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


@pytest.fixture(scope="module")
def toy_lengths(toy_pairs) -> tuple[torch.Tensor, torch.Tensor]:
    """(source ids incl. <end>, target ids) lengths of the toy corpus under a 1200-piece joint vocabulary."""
    src, tgt = toy_pairs
    tok = Tokenizer.train(src, tgt, 1200, True, "unigram", 0.9995)
    return (torch.tensor([len(tok.encode_src(s)) for s in src]), torch.tensor([len(tok.encode_tgt(t)) for t in tgt]))


@pytest.fixture(scope="module")
def random_lengths() -> tuple[torch.Tensor, torch.Tensor]:
    """300 sentences of 1..16 ids, plus three longer than the 64-token limit used below."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(1, 17, (300,), generator=g)
    tgt = torch.randint(1, 17, (300,), generator=g)
    src[[10, 150]] = 90  # source over the limit
    tgt[200] = 70  # target over the limit (71 decoder positions)
    return src, tgt


# --- collate ------------------------------------------------------------------------------------


def collate(src: list[torch.Tensor], tgt: list[torch.Tensor]) -> Batch:
    """A Batch of all the given id sequences, through the flat storage training reads from."""
    split = EncodedSplit.from_lists([x.tolist() for x in src], [y.tolist() for y in tgt])
    return split.batch(torch.arange(len(src)))


def test_collate_pads_and_wraps_targets():
    batch = collate([_ids(5, 6, EOS), _ids(7, EOS)], [_ids(8, 9, 10), _ids(11)])
    assert batch.src.tolist() == [[5, 6, EOS], [7, EOS, PAD]]
    assert batch.tgt_in.tolist() == [[BOS, 8, 9, 10], [BOS, 11, PAD, PAD]]
    assert batch.tgt_out.tolist() == [[8, 9, 10, EOS], [11, EOS, PAD, PAD]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.tokens == 6  # non-pad positions of tgt_out


def test_collate_teacher_forcing_shift():
    tgt = [_ids(4, 5, 6, 7), _ids(8, 9)]
    batch = collate([_ids(EOS), _ids(EOS)], tgt)
    # tgt_out is tgt_in shifted left by one, wherever tgt_in is a real token.
    real = batch.tgt_in != PAD
    assert torch.equal(batch.tgt_in[:, 1:][real[:, 1:]], batch.tgt_out[:, :-1][real[:, 1:]])
    assert (batch.tgt_in[:, 0] == BOS).all()
    assert ((batch.tgt_out == EOS).sum(dim=1) == 1).all()


def test_collate_empty_target():
    batch = collate([_ids(5, EOS)], [torch.zeros(0, dtype=torch.long)])
    assert batch.tgt_in.tolist() == [[BOS]] and batch.tgt_out.tolist() == [[EOS]]
    assert batch.tokens == 1


def test_batch_to_keeps_values():
    batch = collate([_ids(5, EOS)], [_ids(6)])
    moved = batch.to(torch.device("cpu"))
    assert isinstance(moved, Batch)
    assert torch.equal(moved.src, batch.src) and torch.equal(moved.tgt_out, batch.tgt_out)


# --- token limit --------------------------------------------------------------------------------


def _width(idx: torch.Tensor, src_len: torch.Tensor, tgt_len: torch.Tensor) -> int:
    return int(torch.maximum(src_len[idx], tgt_len[idx] + 1).max())


@pytest.mark.parametrize("shuffle", [True, False])
def test_no_batch_exceeds_the_token_limit(random_lengths, shuffle):
    src_len, tgt_len = random_lengths
    sampler = BucketSampler(src_len, tgt_len, batch_tokens=64, seed=1, shuffle=shuffle)
    for epoch in range(3):
        batches = sampler.epoch_batches(epoch)
        for idx in batches:
            width = _width(idx, src_len, tgt_len)
            assert len(idx) * width <= 64 or len(idx) == 1
        alone = [int(idx) for idx in batches if len(idx) == 1 and _width(idx, src_len, tgt_len) > 64]
        assert sorted(alone) == [10, 150, 200]
        assert len(batches) < len(src_len) / 3  # sentences are actually grouped (>= 3 fit in 64 tokens)


def test_cut_batches_is_greedy(random_lengths):
    """In length order, each batch stops only because the next sentence would break the limit."""
    src_len, tgt_len = random_lengths
    sampler = BucketSampler(src_len, tgt_len, batch_tokens=64, seed=1, shuffle=False)
    batches = sampler.epoch_batches(0)
    for idx, following in zip(batches, batches[1:], strict=False):
        grown = torch.cat([idx, following[:1]])
        assert len(grown) * _width(grown, src_len, tgt_len) > 64


def test_cut_batches_by_hand():
    src_len, dec_len = _ids(3, 3, 5, 5, 9), _ids(2, 4, 1, 5, 2)  # dec_len already counts <start>/<end>
    batches = cut_batches(_ids(0, 1, 2, 3, 4), src_len, dec_len, batch_tokens=10)
    assert [b.tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    batches = cut_batches(_ids(4, 0, 1), src_len, dec_len, batch_tokens=8)
    assert [b.tolist() for b in batches] == [[4], [0, 1]]


# --- epochs and order ---------------------------------------------------------------------------


def _as_lists(batches: list[torch.Tensor]) -> list[list[int]]:
    return [b.tolist() for b in batches]


def test_every_sentence_once_per_epoch_and_epoch_counts(toy_lengths):
    src_len, tgt_len = toy_lengths
    n = len(src_len)
    sampler = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=3)
    stream = iter(sampler)
    assert sampler.epoch == 0
    for epoch in range(3):
        served = []
        expected_batches = len(sampler.epoch_batches(epoch))
        for position in range(expected_batches):
            assert sampler.state_dict() == {"epoch": epoch, "position": position}
            served.extend(next(stream).tolist())
        assert sampler.epoch == epoch + 1, "epoch counts completed epochs"
        assert sorted(served) == list(range(n))


def test_epochs_differ_and_seed_decides(toy_lengths):
    src_len, tgt_len = toy_lengths
    a = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=3)
    b = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=3)
    c = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=4)
    assert _as_lists(a.epoch_batches(0)) == _as_lists(b.epoch_batches(0))
    assert _as_lists(a.epoch_batches(2)) == _as_lists(b.epoch_batches(2))
    assert _as_lists(a.epoch_batches(0)) != _as_lists(a.epoch_batches(1))
    assert _as_lists(a.epoch_batches(0)) != _as_lists(c.epoch_batches(0))
    # Equal-length sentences are regrouped too, not only the batch order reshuffled.
    groups = [{frozenset(b.tolist()) for b in a.epoch_batches(e)} for e in (0, 1)]
    assert groups[0] != groups[1]


def test_batches_are_served_in_shuffled_order(toy_lengths):
    src_len, tgt_len = toy_lengths
    shuffled = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=3).epoch_batches(0)
    in_length_order = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=3, shuffle=False).epoch_batches(0)
    widths = [_width(idx, src_len, tgt_len) for idx in shuffled]
    assert sorted(widths) == sorted(_width(idx, src_len, tgt_len) for idx in in_length_order)
    assert widths != [_width(idx, src_len, tgt_len) for idx in in_length_order]


def test_unshuffled_order_is_fixed_and_length_sorted(toy_lengths):
    src_len, tgt_len = toy_lengths
    sampler = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=3, shuffle=False)
    first, second = sampler.epoch_batches(0), sampler.epoch_batches(1)
    assert _as_lists(first) == _as_lists(second)
    widths = [_width(idx, src_len, tgt_len) for idx in first]
    assert widths[0] == min(widths) and widths[-1] == max(widths)


def _take(stream, count: int) -> list[list[int]]:
    return [next(stream).tolist() for _ in range(count)]


def test_resume_continues_at_exactly_the_next_batch(toy_lengths):
    src_len, tgt_len = toy_lengths

    def sampler() -> BucketSampler:
        return BucketSampler(src_len, tgt_len, batch_tokens=256, seed=7)

    per_epoch = [len(sampler().epoch_batches(e)) for e in range(3)]
    total = sum(per_epoch) + 3
    reference = _take(iter(sampler()), total)
    boundary = per_epoch[0]
    for stop in (0, 1, boundary // 2, boundary - 1, boundary, boundary + 1, boundary + per_epoch[1] - 1):
        first = sampler()
        before = _take(iter(first), stop)
        state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint as plain data
        second = sampler()
        second.load_state_dict(state)
        assert second.epoch == first.epoch
        after = _take(iter(second), total - stop)
        assert before + after == reference, f"resume after {stop} batches"


def test_state_dict_at_epoch_boundary_names_the_next_epoch(toy_lengths):
    src_len, tgt_len = toy_lengths
    sampler = BucketSampler(src_len, tgt_len, batch_tokens=256, seed=7)
    count = len(sampler.epoch_batches(0))
    stream = iter(sampler)
    _take(stream, count - 1)
    assert sampler.state_dict() == {"epoch": 0, "position": count - 1}
    _take(stream, 1)
    assert sampler.state_dict() == {"epoch": 1, "position": 0}
    assert next(stream).tolist() == sampler.epoch_batches(1)[0].tolist()


# --- padding ------------------------------------------------------------------------------------


def test_padding_fraction_by_hand():
    src_len, tgt_len = _ids(2, 4, 3), _ids(1, 3, 3)  # decoder positions: 2, 4, 4
    # One batch of sentences 0 and 1: padded 2 * (4 + 4) = 16, real (2 + 4) + (2 + 4) = 12.
    assert padding_fraction([_ids(0, 1)], src_len, tgt_len) == pytest.approx(0.25)
    # Adding batch [2] alone: padded 16 + 7, real 12 + 7.
    assert padding_fraction([_ids(0, 1), _ids(2)], src_len, tgt_len) == pytest.approx(1 - 19 / 23)
    assert padding_fraction([_ids(1, 2)], src_len, tgt_len) == pytest.approx(1 - 15 / 16)


def test_bucketing_pads_far_less_than_random_batches(toy_lengths):
    src_len, tgt_len = toy_lengths
    bucketed = BucketSampler(src_len, tgt_len, batch_tokens=1024, seed=1).epoch_batches(0)
    random_order = torch.randperm(len(src_len), generator=torch.Generator().manual_seed(0))
    unsorted = cut_batches(random_order, src_len, tgt_len + 1, 1024)
    assert padding_fraction(bucketed, src_len, tgt_len) < 0.5 * padding_fraction(unsorted, src_len, tgt_len)


def test_lengths_at_gives_each_epoch_its_own_lengths_when_it_starts(toy_lengths):
    src_len, tgt_len = toy_lengths
    asked: list[int] = []

    def lengths_at(epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        asked.append(epoch)
        return src_len * (epoch + 1), tgt_len * (epoch + 1)  # longer sequences every epoch

    sampler = BucketSampler(src_len, tgt_len, batch_tokens=512, seed=7, lengths_at=lengths_at)
    stream = iter(sampler)
    served = [next(stream)]
    while sampler.position != 0:  # the rest of epoch 0
        served.append(next(stream))
    assert asked == [0]  # epoch 1 is not segmented before its first batch is asked for
    assert sorted(torch.cat(served).tolist()) == list(range(len(src_len)))
    epoch1 = [next(stream)]
    assert asked == [0, 1]
    while sampler.position != 0:
        epoch1.append(next(stream))
    for idx in epoch1:  # batches are cut with the epoch's own lengths
        assert len(idx) * max(int((2 * src_len[idx]).max()), int((2 * tgt_len[idx]).max()) + 1) <= 512
    assert len(epoch1) > len(served)


def test_collate_starts_the_decoder_input_with_the_models_start_token():
    """A model that starts from <pad> (MarianMT's way) reads <pad> first; nothing else moves."""
    split = EncodedSplit.from_lists([[5, EOS], [7, 6, EOS]], [[8, 9], [11]])
    bos, pad = split.batch(torch.arange(2)), split.batch(torch.arange(2), start=PAD)
    assert pad.tgt_in.tolist() == [[PAD, 8, 9], [PAD, 11, PAD]]
    assert torch.equal(pad.tgt_in[:, 1:], bos.tgt_in[:, 1:]) and torch.equal(pad.tgt_out, bos.tgt_out)
    assert torch.equal(pad.src, bos.src)


def test_word_dropout_replaces_about_its_rate_of_the_pieces_and_keeps_specials_and_targets():
    g = torch.Generator().manual_seed(0)
    words = torch.randint(10, 100, (64, 30), generator=g)
    src = torch.cat([words, torch.full((64, 1), EOS), torch.full((64, 5), PAD)], dim=1)
    tgt_in = torch.cat([torch.full((64, 1), BOS), words, torch.full((64, 5), PAD)], dim=1)
    tgt_out = torch.cat([words, torch.full((64, 1), EOS), torch.full((64, 5), PAD)], dim=1)
    batch = Batch(src, tgt_in, tgt_out)
    assert drop_words(batch, 0.0) is batch
    torch.manual_seed(1)
    dropped = drop_words(batch, 0.25)
    for before, after in ((src, dropped.src), (tgt_in, dropped.tgt_in)):
        changed = before != after
        assert (after[changed] == UNK).all()
        assert not changed[before < 4].any()  # <pad>, <start>, <end> stay
        assert changed[before >= 4].float().mean().item() == pytest.approx(0.25, abs=0.04)  # 4 sigma of 1,920 draws
    assert not torch.equal(dropped.src[:, :30] == UNK, dropped.tgt_in[:, 1:31] == UNK)  # two sides, two draws
    assert torch.equal(dropped.tgt_out, tgt_out)
    torch.manual_seed(1)
    assert torch.equal(drop_words(batch, 0.25).src, dropped.src)  # the global generator decides: resumable
