"""seq2seq.explain.heads: the split-width and full-width costs are the real parameter counts of an
attention block of each shape and the real multiply-adds of a self-attention (counted by torch's
FLOP counter); every head's map is a set of distributions over the source."""

import pytest
import torch
from conftest import START, build_tiny_model
from torch.utils.flop_counter import FlopCounterMode

from seq2seq.explain.heads import attention_costs, heads_section
from seq2seq.explain.probe import recording
from seq2seq.model.masks import padding_mask
from seq2seq.special import PAD


@pytest.mark.parametrize("head_dim", [None, 32])  # split (K = D/H = 8) and full width (K = D)
def test_costs_are_the_blocks_real_parameters_and_multiply_adds(head_dim):
    model = build_tiny_model(head_dim=head_dim, attention="explicit")
    attention = model.encoder_layers[0].self_attn
    k = model.cfg.resolved_head_dim
    length = 7
    costs = attention_costs(32, 4, k, length)
    assert costs["params"] == sum(p.numel() for p in attention.parameters())
    x = torch.randn(1, length, 32)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        attention(*attention.queries_keys_values(x), None)
    assert costs["macs"] == counter.get_total_flops() // 2  # one multiply-add = two FLOPs


def test_full_width_costs_h_times_the_projections():
    split, full = attention_costs(256, 4, 64, 10), attention_costs(256, 4, 256, 10)
    assert split["params"] == 4 * 256 * 256 + 4 * 256  # the cost of one full-width head
    assert full["params"] == 4 * 4 * 256 * 256 + 3 * 4 * 256 + 256
    assert full["macs"] == 4 * split["macs"]


def test_every_heads_map_is_a_distribution():
    model = build_tiny_model()
    src, tokens = torch.tensor([[5, 6, 7, 8, 3]]), [9, 10, 11]
    mask = padding_mask(src, PAD)
    with recording(model) as found:
        model.decode(torch.tensor([[START, *tokens]]), model.encode(src, mask), mask)
    section = heads_section(model, found, layer=1, length=5)
    encoder, cross = torch.tensor(section["encoder"]), torch.tensor(section["cross"])
    assert encoder.shape == (4, 5, 5) and cross.shape == (4, 4, 5)  # H heads; T = <start> + 3 pieces
    assert torch.allclose(encoder.sum(-1), torch.ones(4, 5), atol=1e-3)
    assert torch.allclose(cross.sum(-1), torch.ones(4, 4), atol=1e-3)
    assert not torch.allclose(encoder[0], encoder[1])  # the heads differ
    assert section["cross_layer"] == 1
    costs = section["costs"]
    assert (costs["head_dim"], costs["blocks"], costs["length"]) == (8, 2 + 2 * 2, 5)
    assert costs["forms"]["this_model"] == costs["forms"]["split"]
