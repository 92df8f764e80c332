"""seq2seq.explain.probe: recording changes nothing the model computes, leaves no trace on the model
afterwards, and records every attention (the weights equal ``seq2seq.decode.attention``'s) and every
Add & Norm in the order the model ran them."""

import pytest
import torch
from conftest import START, build_tiny_model, random_batch, unhooked

from seq2seq.decode.attention import attention_weights
from seq2seq.explain.probe import recording
from seq2seq.model.masks import padding_mask
from seq2seq.special import PAD


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_recording_leaves_the_outputs_and_the_model_unchanged(norm):
    model = build_tiny_model(norm=norm)
    src, tgt = random_batch()
    expected = model(src, tgt)
    with recording(model) as found:
        got = model(src, tgt)
    assert torch.equal(got, expected)
    assert unhooked(model)
    assert len(found.residual) == 2 * 2 + 3 * 2  # two per encoder layer, three per decoder layer
    assert [call.name for call in found.residual[:3]] == [
        "encoder 1 · self-attention",
        "encoder 1 · feed-forward",
        "encoder 2 · self-attention",
    ]
    assert all(len(calls) == 1 for calls in found.encoder + found.decoder + found.cross)


def test_recording_is_undone_when_the_pass_fails():
    model = build_tiny_model()
    with pytest.raises(ValueError, match="max_positions"), recording(model):
        model.encode(torch.ones(1, 600, dtype=torch.long), None)  # longer than the position table
    assert unhooked(model)


def test_recorded_weights_are_the_ones_the_model_used():
    model = build_tiny_model()
    src, tgt = [5, 6, 7, 8, 3], [9, 10, 11]
    src_ids = torch.tensor([src])
    mask = padding_mask(src_ids, PAD)
    with recording(model) as found:
        model.decode(torch.tensor([[START, *tgt]]), model.encode(src_ids, mask), mask)
    reference = attention_weights(model, src, tgt)
    for kind in ("encoder", "decoder", "cross"):
        recorded = torch.cat([calls[0].weights() for calls in getattr(found, kind)])  # (L, H, ·, ·)
        assert torch.allclose(recorded, getattr(reference, kind), atol=1e-6), kind


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_residual_records_are_the_add_and_norm(norm):
    """Post-norm: the sub-layer reads x and the result is LN(x + F); pre-norm: it reads LN(x) and the
    result is x + F. Either way each result is the next sub-layer's x within a stack."""
    model = build_tiny_model(norm=norm)
    src, tgt = random_batch()
    with recording(model) as found:
        model(src, tgt)
    first, norm_module = found.residual[0], model.encoder_layers[0].attn_res.norm
    if norm == "post":
        assert torch.equal(first.read, first.x)
        assert torch.allclose(first.out, norm_module(first.x + first.sublayer), atol=1e-6)
    else:
        assert torch.allclose(first.read, norm_module(first.x), atol=1e-6)
        assert torch.allclose(first.out, first.x + first.sublayer, atol=1e-6)
    encoder = found.residual[:4]
    for before, after in zip(encoder, encoder[1:], strict=False):
        assert torch.equal(before.out, after.x)
