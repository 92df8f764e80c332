"""seq2seq.model.masks: shapes, values and the no-empty-row guarantee."""

import torch

from seq2seq.model.masks import causal_mask, decoder_self_mask, padding_mask
from seq2seq.special import PAD


def test_padding_mask_shape_and_values():
    tokens = torch.tensor([[5, 6, 3, PAD, PAD], [7, 3, PAD, PAD, PAD], [4, 5, 6, 7, 3]])
    mask = padding_mask(tokens, PAD)
    assert mask.shape == (3, 1, 1, 5)
    assert mask.dtype == torch.bool
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask[:, 0, 0], expected)


def test_padding_mask_uses_given_pad_id():
    tokens = torch.tensor([[0, 9, 9]])
    assert torch.equal(padding_mask(tokens, 9)[0, 0, 0], torch.tensor([True, False, False]))


def test_causal_mask_is_lower_triangular():
    mask = causal_mask(5)
    assert mask.shape == (1, 1, 5, 5)
    assert mask.dtype == torch.bool
    for t in range(5):
        for s in range(5):
            assert bool(mask[0, 0, t, s]) == (s <= t), (t, s)


def test_decoder_self_mask_is_causal_and_key_padding():
    tgt = torch.tensor([[2, 5, 6, PAD], [2, 7, PAD, PAD]])
    mask = decoder_self_mask(tgt, PAD)
    assert mask.shape == (2, 1, 4, 4)
    for b in range(2):
        for t in range(4):
            for s in range(4):
                allowed = s <= t and int(tgt[b, s]) != PAD
                assert bool(mask[b, 0, t, s]) == allowed, (b, t, s)


def test_masks_broadcast_to_attention_scores():
    src = torch.tensor([[5, 3, PAD], [5, 6, 3]])
    tgt = torch.tensor([[2, 5, PAD, PAD], [2, 5, 6, 7]])
    heads = 4
    assert torch.broadcast_shapes(padding_mask(src, PAD).shape, (2, heads, 4, 3)) == (2, heads, 4, 3)
    assert torch.broadcast_shapes(decoder_self_mask(tgt, PAD).shape, (2, heads, 4, 4)) == (2, heads, 4, 4)


def test_no_query_row_fully_masked():
    torch.manual_seed(0)
    lengths = torch.tensor([1, 2, 5, 8])
    tokens = torch.randint(4, 20, (4, 8))
    tokens[torch.arange(8)[None, :] >= lengths[:, None]] = PAD  # real token always at position 0
    self_mask = decoder_self_mask(tokens, PAD)  # (B, 1, T, T)
    assert self_mask.any(dim=-1).all()
    src_mask = padding_mask(tokens, PAD).expand(4, 1, 8, 8)  # every query row sees the same keys
    assert src_mask.any(dim=-1).all()


def test_a_pad_start_token_is_a_key_and_later_padding_is_not():
    """MarianMT's decoder starts from <pad>: position 0 stays visible to every query, padding after it does not."""
    tgt = torch.tensor([[PAD, 5, 6, PAD], [PAD, PAD, PAD, PAD]])
    mask = decoder_self_mask(tgt, PAD)[:, 0]  # (B, T, T)
    assert mask[:, :, 0].all()  # every query row keeps the start key
    assert mask.any(dim=-1).all()
    assert mask[0, 3].tolist() == [True, True, True, False]
    assert mask[1, 3].tolist() == [True, False, False, False]
