"""seq2seq.model.layers: shapes, the sinusoid formula, SDPA == explicit attention, the cache."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from seq2seq.config import ModelConfig
from seq2seq.model.layers import (
    DecoderCache,
    DecoderLayer,
    Embedding,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    explicit_attention,
    sinusoids,
)
from seq2seq.model.masks import causal_mask

B, S, T, D, H = 2, 5, 4, 32, 4


def _key_mask() -> torch.Tensor:
    """(B, 1, 1, S) with the last two keys of row 0 padded."""
    mask = torch.ones(B, 1, 1, S, dtype=torch.bool)
    mask[0, ..., 3:] = False
    return mask


@pytest.mark.parametrize("head_dim", [D // H, D])
def test_multi_head_attention_shapes(head_dim):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, head_dim, dropout=0.0)
    for proj in (mha.q_proj, mha.k_proj, mha.v_proj):
        assert proj.weight.shape == (H * head_dim, D)
    assert mha.out_proj.weight.shape == (D, H * head_dim)
    query, source = torch.randn(B, T, D), torch.randn(B, S, D)
    keys, values = mha.keys_values(source)
    assert keys.shape == values.shape == (B, H, S, head_dim)
    q = mha.queries(query)
    assert q.shape == (B, H, T, head_dim)
    assert mha(q, keys, values, _key_mask()).shape == (B, T, D)
    weights = explicit_attention(q, keys, values, _key_mask())[1]
    assert weights.shape == (B, H, T, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))
    assert (weights[0, ..., 3:] == 0).all()


def test_explicit_attention_matches_sdpa_functional():
    torch.manual_seed(0)
    q, k, v = torch.randn(B, H, T, 8), torch.randn(B, H, S, 8), torch.randn(B, H, S, 8)
    mask = _key_mask() & torch.ones(T, S, dtype=torch.bool).tril(diagonal=1)  # padding & a causal-ish band
    out, weights = explicit_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6, rtol=1e-5)
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
    # And against the formula written out without masking helpers.
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    reference = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
    torch.testing.assert_close(out, reference, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("head_dim", [D // H, D])
def test_multi_head_attention_sdpa_equals_explicit(head_dim):
    torch.manual_seed(0)
    fused = MultiHeadAttention(D, H, head_dim, dropout=0.0, kernel="sdpa")
    written = MultiHeadAttention(D, H, head_dim, dropout=0.0, kernel="explicit")
    written.load_state_dict(fused.state_dict())
    query, source = torch.randn(B, T, D), torch.randn(B, S, D)
    mask = _key_mask()
    q = fused.queries(query)
    out_fused = fused(q, *fused.keys_values(source), mask)
    out_written = written(q, *written.keys_values(source), mask)
    torch.testing.assert_close(out_fused, out_written, atol=1e-5, rtol=1e-5)
    # The mask matters: without it row 0 would read the padded keys and differ.
    unmasked = written(q, *written.keys_values(source), None)
    assert not torch.allclose(unmasked[0], out_written[0], atol=1e-4)
    torch.testing.assert_close(unmasked[1], out_written[1], atol=1e-5, rtol=1e-5)


def test_heads_are_the_named_projections_split():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, D // H, dropout=0.0)
    x = torch.randn(B, T, D)
    q, k, v = mha.queries_keys_values(x)
    for got, proj in ((q, mha.q_proj), (k, mha.k_proj), (v, mha.v_proj)):
        torch.testing.assert_close(got, proj(x).view(B, T, H, D // H).transpose(1, 2))  # (B, H, T, K)
    torch.testing.assert_close(mha.queries(x), q)
    merged = mha.attend(q, k, v, None).transpose(1, 2).reshape(B, T, D)  # (B, T, H·K)
    torch.testing.assert_close(mha(q, k, v, None), mha.out_proj(merged))


def test_attention_dropout_is_applied_in_the_explicit_path():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, D // H, dropout=0.5, kernel="explicit")
    x = torch.randn(B, T, D)
    qkv = mha.queries_keys_values(x)
    mha.eval()
    clean = mha(*qkv, None)
    torch.testing.assert_close(mha(*qkv, None), clean)
    mha.train()
    assert not torch.allclose(mha(*qkv, None), clean)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_explicit_attention_mask_fill_fits_half_precision(dtype):
    """The masked-logit fill must not overflow 16-bit floats (no -1e9, no NaN)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, 8, dtype=dtype) for _ in range(3))
    mask = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    mask[..., 0] = True  # one real key per row: the extreme case
    out, weights = explicit_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(out, v[:, :, :1].expand_as(out))


def test_self_attention_causal_mask_sdpa_equals_explicit():
    torch.manual_seed(1)
    fused = MultiHeadAttention(D, H, D // H, dropout=0.0, kernel="sdpa")
    written = MultiHeadAttention(D, H, D // H, dropout=0.0, kernel="explicit")
    written.load_state_dict(fused.state_dict())
    x = torch.randn(B, T, D)
    mask = causal_mask(T)
    torch.testing.assert_close(
        fused(*fused.queries_keys_values(x), mask), written(*written.queries_keys_values(x), mask), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize(
    ("activation", "function"), [("relu", F.relu), ("gelu", F.gelu), ("silu", lambda x: x * torch.sigmoid(x))]
)
def test_feed_forward_shape(activation, function):
    """silu is MarianMT's "swish": x·σ(x)."""
    torch.manual_seed(0)
    ffn = FeedForward(D, 64, dropout=0.0, activation=activation)
    assert ffn.up.weight.shape == (64, D) and ffn.down.weight.shape == (D, 64)
    x = torch.randn(B, T, D)
    assert ffn(x).shape == (B, T, D)
    torch.testing.assert_close(ffn(x), ffn.down(function(ffn.up(x))))


def test_sinusoids_formula():
    length, d_model = 50, 16
    table = sinusoids(length, d_model)
    assert table.shape == (length, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def _embedding(max_positions: int = 16) -> Embedding:
    torch.manual_seed(0)
    return Embedding(nn.Embedding(40, D, padding_idx=0), dropout=0.0, max_positions=max_positions).eval()


def test_embedding_shape_scale_and_offset():
    embed = _embedding()
    ids = torch.randint(1, 40, (B, 6))
    out = embed(ids)
    assert out.shape == (B, 6, D)
    torch.testing.assert_close(out, embed.tokens(ids) * math.sqrt(D) + sinusoids(16, D)[:6])
    # Positions continue from ``offset``: embedding a suffix equals the suffix of the whole.
    torch.testing.assert_close(embed(ids[:, 4:], offset=4), out[:, 4:])


def test_embedding_rejects_positions_past_max():
    embed = _embedding(max_positions=8)
    assert embed(torch.ones(1, 8, dtype=torch.long)).shape == (1, 8, D)  # exactly max is fine
    with pytest.raises(ValueError, match="max_positions"):
        embed(torch.ones(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="max_positions"):
        embed(torch.ones(1, 1, dtype=torch.long), offset=8)


def _layer_config(head_dim: int, pre_norm: bool) -> ModelConfig:
    return ModelConfig(
        d_model=D, heads=H, head_dim=head_dim, ffn_dim=64, dropout=0.0, norm="pre" if pre_norm else "post"
    )


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("head_dim", [D // H, D])
def test_encoder_layer_shape(pre_norm, head_dim):
    torch.manual_seed(0)
    layer = EncoderLayer(_layer_config(head_dim, pre_norm)).eval()
    assert layer(torch.randn(B, S, D), _key_mask()).shape == (B, S, D)


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("head_dim", [D // H, D])
def test_decoder_layer_shape_and_cache(pre_norm, head_dim):
    torch.manual_seed(0)
    layer = DecoderLayer(_layer_config(head_dim, pre_norm)).eval()
    x, memory, src_mask = torch.randn(B, T, D), torch.randn(B, S, D), _key_mask()
    full = layer(x, memory, causal_mask(T), src_mask)
    assert full.shape == (B, T, D)

    cache = DecoderCache()
    steps = [layer(x[:, t : t + 1], memory, None, src_mask, cache, 0) for t in range(T)]
    assert cache.length == T
    assert len(cache.self_kv) == 1 and len(cache.cross_kv) == 1
    assert cache.self_kv[0].shape == (2, B, H, T, head_dim)  # keys and values stacked
    assert cache.cross_kv[0].shape == (2, B, H, S, head_dim)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_decoder_cache_reorder_permutes_self_kv_only():
    k = torch.arange(4.0).view(4, 1, 1, 1)
    cross = torch.randn(2, 4, 1, 3, 1)
    cache = DecoderCache(self_kv=[torch.stack([k, -k])], cross_kv=[cross])
    cache.reorder(torch.tensor([1, 0, 3, 3]))
    assert cache.self_kv[0][0].flatten().tolist() == [1.0, 0.0, 3.0, 3.0]
    assert cache.self_kv[0][1].flatten().tolist() == [-1.0, -0.0, -3.0, -3.0]
    assert cache.cross_kv[0] is cross
