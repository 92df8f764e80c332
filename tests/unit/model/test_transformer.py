"""seq2seq.model.transformer: shapes, causality, padding invariance, no NaN, parity of the
two attention paths, embedding tying, cached decoding and a toy overfit."""

import pytest
import torch
import torch.nn.functional as F
from conftest import END, FIXTURES, PAD, START, random_batch

from seq2seq.model.layers import DecoderCache, MultiHeadAttention
from seq2seq.model.masks import padding_mask

ATOL = 1e-5


def _encode(model, src):
    src_mask = padding_mask(src, PAD)
    return model.encode(src, src_mask), src_mask


def _pad_right(x: torch.Tensor, extra: int) -> torch.Tensor:
    return F.pad(x, (0, extra), value=PAD)


# ---------------------------------------------------------------- shapes


def test_forward_encode_decode_shapes(tiny_model):
    model = tiny_model()
    src, tgt = random_batch()
    memory, src_mask = _encode(model, src)
    assert memory.shape == (3, src.size(1), 32)
    states = model.decode(tgt, memory, src_mask)
    assert states.shape == (3, tgt.size(1), 32)
    assert model.logits(states).shape == (3, tgt.size(1), 40)
    logits = model(src, tgt)
    assert logits.shape == (3, tgt.size(1), 40)
    torch.testing.assert_close(logits, model.logits(states))


def test_different_vocab_sizes(tiny_model):
    model = tiny_model(src_vocab=30, tgt_vocab=50, tie_embeddings="decoder")
    src, tgt = random_batch(vocab=30)
    assert model(src, tgt).shape == (3, tgt.size(1), 50)


# ---------------------------------------------------------------- causality and padding


@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_causality(tiny_model, attention):
    model = tiny_model(attention=attention)
    src, tgt = random_batch(tgt_lengths=(6, 6, 6))
    base = model(src, tgt)
    for t in range(1, tgt.size(1)):
        changed = tgt.clone()
        changed[:, t] = (changed[:, t] - 4 + 1) % 36 + 4  # a different real token
        logits = model(src, changed)
        torch.testing.assert_close(logits[:, :t], base[:, :t], atol=ATOL, rtol=0)
        assert not torch.allclose(logits[:, t], base[:, t], atol=1e-4), f"position {t} ignores its own token"


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_source_padding_invariance(tiny_model, norm, attention):
    model = tiny_model(norm=norm, attention=attention)
    src, tgt = random_batch()
    real_src = src != PAD
    memory, src_mask = _encode(model, src)
    states = model.decode(tgt, memory, src_mask)

    padded = _pad_right(src, 4)
    memory_p, src_mask_p = _encode(model, padded)
    torch.testing.assert_close(memory_p[:, : src.size(1)][real_src], memory[real_src], atol=ATOL, rtol=0)
    states_p = model.decode(tgt, memory_p, src_mask_p)
    torch.testing.assert_close(states_p, states, atol=ATOL, rtol=0)
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=ATOL, rtol=0)


@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_target_padding_invariance(tiny_model, attention):
    model = tiny_model(attention=attention)
    src, tgt = random_batch()
    real_tgt = tgt != PAD
    base = model(src, tgt)
    padded = model(src, _pad_right(tgt, 5))
    assert padded.shape == (3, tgt.size(1) + 5, 40)
    torch.testing.assert_close(padded[:, : tgt.size(1)][real_tgt], base[real_tgt], atol=ATOL, rtol=0)


# ---------------------------------------------------------------- no NaN at the extremes


def _extreme_batch(long: int = 200):
    """Row 0: one real token then padding; row 1: ``long`` real tokens (source and target)."""
    gen = torch.Generator().manual_seed(0)
    src = torch.full((2, long), PAD)
    src[0, 0] = END
    src[1] = torch.randint(4, 40, (long,), generator=gen)
    tgt = torch.full((2, long), PAD)
    tgt[:, 0] = START
    tgt[1, 1:] = torch.randint(4, 40, (long - 1,), generator=gen)
    return src, tgt


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_extreme_padding_is_finite(tiny_model, attention, dtype):
    model = tiny_model(attention=attention, max_positions=256).to(dtype)
    src, tgt = _extreme_batch()
    with torch.no_grad():
        memory, src_mask = _encode(model, src)
        logits = model.logits(model.decode(tgt, memory, src_mask))
    assert memory.dtype == logits.dtype == dtype
    assert torch.isfinite(memory).all()
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_extreme_padding_gradients_are_finite(tiny_model, attention, dtype):
    model = tiny_model(attention=attention, max_positions=256, dropout=0.1, attention_dropout=0.1).to(dtype)
    model.train()
    src, tgt = _extreme_batch()
    tgt_out = torch.cat([tgt[:, 1:], torch.full((2, 1), PAD)], dim=1)
    tgt_out[0, 0] = END
    logits = model(src, tgt)
    loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
    loss.backward()
    assert torch.isfinite(loss)
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name


def test_under_autocast_the_residual_stream_is_bf16_and_close_to_float32(tiny_model):
    """The embeddings hand autocast's dtype to the stack; weights stay float32."""
    model = tiny_model()
    src, tgt = _extreme_batch(12)
    expected = model.states(src, tgt)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.src_embed(src).dtype == torch.bfloat16
        got = model.states(src, tgt)
    assert got.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in model.parameters())
    torch.testing.assert_close(got.float(), expected, rtol=0.05, atol=0.05)


# ---------------------------------------------------------------- variants


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("head_dim", [None, 32])
def test_sdpa_model_equals_explicit_model(tiny_model, norm, head_dim):
    fused = tiny_model(norm=norm, head_dim=head_dim, attention="sdpa")
    written = tiny_model(norm=norm, head_dim=head_dim, attention="explicit", seed=123)
    written.load_state_dict(fused.state_dict())
    src, tgt = random_batch()
    torch.testing.assert_close(written(src, tgt), fused(src, tgt), atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_norm_variants_run(tiny_model, norm):
    model = tiny_model(norm=norm)
    src, tgt = random_batch()
    logits = model(src, tgt)
    assert logits.shape == (3, tgt.size(1), 40) and torch.isfinite(logits).all()
    has_final_norm = isinstance(model.encoder_norm, torch.nn.LayerNorm)
    assert has_final_norm == (norm == "pre")
    assert model.encoder_layers[0].attn_res.pre_norm == (norm == "pre")


@pytest.mark.parametrize("attention", ["auto", "sdpa", "explicit"])
def test_attention_config_reaches_every_layer(tiny_model, attention):
    model = tiny_model(attention=attention)
    kernels = [m.attend.kernel for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert kernels == [attention] * (2 + 2 * 2)  # encoder self; decoder self and cross


def test_pre_and_post_norm_differ(tiny_model):
    src, tgt = random_batch()
    post, pre = tiny_model(norm="post"), tiny_model(norm="pre")
    assert not torch.allclose(post(src, tgt), pre(src, tgt), atol=1e-3)


def test_tie_embeddings_all(tiny_model):
    model = tiny_model(tie_embeddings="all")
    assert model.src_embed.tokens is model.tgt_embed.tokens
    assert model.out_proj.weight is model.tgt_embed.tokens.weight
    assert model.src_embed.tokens.weight is model.tgt_embed.tokens.weight
    params = list(model.parameters())
    assert sum(p is model.out_proj.weight for p in params) == 1  # registered once


def test_tie_embeddings_decoder(tiny_model):
    model = tiny_model(tie_embeddings="decoder")
    assert model.out_proj.weight is model.tgt_embed.tokens.weight
    assert model.src_embed.tokens.weight is not model.tgt_embed.tokens.weight


def test_tie_embeddings_none(tiny_model):
    model = tiny_model(tie_embeddings="none")
    weights = [model.out_proj.weight, model.tgt_embed.tokens.weight, model.src_embed.tokens.weight]
    assert len({id(w) for w in weights}) == 3


def test_tie_embeddings_all_needs_one_vocabulary(tiny_model):
    with pytest.raises(ValueError, match="joint vocabulary"):
        tiny_model(tie_embeddings="all", src_vocab=30, tgt_vocab=40)


def test_pad_embedding_is_zero(tiny_model):
    model = tiny_model(tie_embeddings="none")
    assert (model.src_embed.tokens.weight[PAD] == 0).all()
    assert (model.tgt_embed.tokens.weight[PAD] == 0).all()


# ---------------------------------------------------------------- options MarianMT needs

# build_tiny_model(0)'s weights, a batch and its logits, saved before the MarianMT options existed (torch.save of
# {"model": state_dict, "src", "tgt_in", "logits"}): a committed file, not a digest of seeded initial weights,
# so it checks the model's names, shapes and arithmetic whatever torch's random generator draws.
TINY_MODEL = FIXTURES / "tiny_model.pt"


def test_the_defaults_build_the_model_of_before(tiny_model):
    """relu, no output bias, the decoder starting from <start>: the same parameters as before those
    options existed, and the same outputs as with the defaults spelled out."""
    saved = torch.load(TINY_MODEL, weights_only=True)
    model = tiny_model(seed=1)
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in saved["model"].items()}
    model.load_state_dict(saved["model"])
    with torch.no_grad():
        torch.testing.assert_close(model(saved["src"], saved["tgt_in"]), saved["logits"], rtol=1e-5, atol=1e-5)
    assert "out_proj.bias" not in model.state_dict()
    spelled = tiny_model(seed=1, activation="relu", output_bias=False, decoder_start="bos")
    spelled.load_state_dict(saved["model"])  # strict: the same names and shapes
    src, tgt = random_batch()
    assert torch.equal(spelled(src, tgt), model(src, tgt))
    assert model.cfg.decoder_start_id == START


def test_output_bias_is_added_to_every_logit(tiny_model):
    plain, biased = tiny_model(seed=0), tiny_model(seed=0, output_bias=True)
    assert biased.state_dict().keys() - plain.state_dict().keys() == {"out_proj.bias"}
    assert torch.count_nonzero(biased.out_proj.bias) == 0  # starts at zero
    with torch.no_grad():
        biased.load_state_dict({**plain.state_dict(), "out_proj.bias": torch.arange(40.0)})
    src, tgt = random_batch()
    torch.testing.assert_close(biased(src, tgt), plain(src, tgt) + torch.arange(40.0))


def test_silu_changes_the_model(tiny_model):
    src, tgt = random_batch()
    assert not torch.allclose(tiny_model(activation="silu")(src, tgt), tiny_model()(src, tgt), atol=1e-3)


# ---------------------------------------------------------------- cached decoding


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_cached_one_token_at_a_time_equals_full(tiny_model, norm, attention):
    model = tiny_model(norm=norm, attention=attention)
    src, tgt = random_batch(tgt_lengths=(6, 6, 6))
    full = model(src, tgt)
    memory, src_mask = _encode(model, src)
    cache = DecoderCache()
    steps = []
    for t in range(tgt.size(1)):
        assert cache.length == t
        steps.append(model.logits(model.decode(tgt[:, t : t + 1], memory, src_mask, cache)))
    assert len(cache.self_kv) == len(cache.cross_kv) == 2
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=0)


@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_cached_several_tokens_after_prefix_equals_full(tiny_model, attention):
    model = tiny_model(attention=attention)
    src, tgt = random_batch(tgt_lengths=(7, 7, 7))
    full = model(src, tgt)
    memory, src_mask = _encode(model, src)
    cache = DecoderCache()
    first = model.logits(model.decode(tgt[:, :3], memory, src_mask, cache))  # several at once, empty cache
    second = model.logits(model.decode(tgt[:, 3:4], memory, src_mask, cache))  # one
    third = model.logits(model.decode(tgt[:, 4:], memory, src_mask, cache))  # several after a prefix
    assert cache.length == 7
    torch.testing.assert_close(torch.cat([first, second, third], dim=1), full, atol=ATOL, rtol=0)


@pytest.mark.parametrize("index", [[1, 0, 3, 2], [0, 0, 2, 2], [1, 1, 2, 3]])
@pytest.mark.parametrize("attention", ["sdpa", "explicit"])
def test_cache_reorder_within_sentence_groups(tiny_model, attention, index):
    model = tiny_model(attention=attention)
    gen = torch.Generator().manual_seed(1)
    source_a = torch.tensor([5, 6, 7, 8, END])
    source_b = torch.tensor([9, 10, END, PAD, PAD])  # shorter: exercises padding too
    src = torch.stack([source_a, source_a, source_b, source_b])  # rows 0,1 and 2,3 share a source
    tgt = torch.randint(4, 40, (4, 6), generator=gen)
    tgt[:, 0] = START
    prefix = 3
    memory, src_mask = _encode(model, src)

    cache = DecoderCache()
    before = [model.logits(model.decode(tgt[:, t : t + 1], memory, src_mask, cache)) for t in range(prefix)]
    torch.testing.assert_close(torch.cat(before, dim=1), model(src, tgt[:, :prefix]), atol=ATOL, rtol=0)

    order = torch.tensor(index)
    cache.reorder(order)
    # After the reorder, row i continues the prefix of row index[i] with its own new tokens.
    reordered = torch.cat([tgt[order, :prefix], tgt[:, prefix:]], dim=1)
    after = [
        model.logits(model.decode(reordered[:, t : t + 1], memory, src_mask, cache)) for t in range(prefix, tgt.size(1))
    ]
    full = model(src, reordered)
    torch.testing.assert_close(torch.cat(after, dim=1), full[:, prefix:], atol=ATOL, rtol=0)
    # The reorder is observable: without it the continuations would differ.
    assert not torch.allclose(full[:, prefix:], model(src, tgt)[:, prefix:], atol=1e-4)


# ---------------------------------------------------------------- learning


def _reverse_task(n: int = 32, seed: int = 0):
    """Sources y… <end>; targets <start> reversed(y)… and reversed(y)… <end>; tokens 4..19, length 3..8."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.full((n, 9), PAD)
    tgt_in = torch.full((n, 9), PAD)
    tgt_out = torch.full((n, 9), PAD)
    for row in range(n):
        length = int(torch.randint(3, 9, (1,), generator=gen))
        y = torch.randint(4, 20, (length,), generator=gen)
        src[row, :length], src[row, length] = y, END
        rev = y.flip(0)
        tgt_in[row, 0], tgt_in[row, 1 : length + 1] = START, rev
        tgt_out[row, :length], tgt_out[row, length] = rev, END
    return src, tgt_in, tgt_out


def test_overfits_reverse_task(tiny_model):
    model = tiny_model(tie_embeddings="all").train()
    src, tgt_in, tgt_out = _reverse_task()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    for _ in range(200):  # reaches 100% after ~75 steps with this seed
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        predictions = model(src, tgt_in).argmax(-1)
    real = tgt_out != PAD
    accuracy = (predictions[real] == tgt_out[real]).float().mean().item()
    assert accuracy >= 0.99, f"token accuracy {accuracy:.3f}, final loss {loss.item():.3f}"
