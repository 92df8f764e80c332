"""seq2seq.decode.attention: ``cross_attention`` returns the (T, S) weights the decoder really
used (rows are distributions, head selection and the head mean agree, bad layer/head
numbers are user errors), and ``attention_weights`` holds every layer and head of all three kinds.
Forward hooks on the attention core also see beam search's grouped cross-attention.

The model is the session's shared toy run (conftest.toy_run); these invariants hold for any weights.
"""

import pytest
import torch
from conftest import build_tiny_model, recorded_logits, unhooked
from torch import Tensor

from seq2seq.decode.attention import attention_weights, cross_attention, forward_hooks
from seq2seq.decode.loader import load_model
from seq2seq.decode.search import beam_search
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.errors import UserError
from seq2seq.model.layers import explicit_attention
from seq2seq.model.masks import padding_mask
from seq2seq.special import BOS, EOS, PAD

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def translator(toy_run) -> TorchTranslator:
    model, tokenizer, cfg = load_model(toy_run, torch.device("cpu"))
    return TorchTranslator(model, tokenizer, cfg.decode, torch.device("cpu"))


def _pair(translator: TorchTranslator) -> tuple[list[int], list[int]]:
    src = translator.encode("我们明天去公园散步。")  # x… <end>
    tgt = translator.tokenizer.encode_tgt("We will take a walk in the park tomorrow.")
    return src, tgt


def test_rows_are_distributions_over_the_source(translator):
    src, tgt = _pair(translator)
    weights = cross_attention(translator.model, src, tgt)
    assert weights.shape == (len(tgt) + 1, len(src))  # rows: positions predicting tgt… <end>
    assert weights.dtype == torch.float32 and weights.device.type == "cpu"
    assert (weights >= 0).all()
    assert torch.allclose(weights.sum(dim=1), torch.ones(len(tgt) + 1), atol=1e-5)


def test_empty_translation_gives_one_row(translator):
    src, _ = _pair(translator)
    weights = cross_attention(translator.model, src, [])
    assert weights.shape == (1, len(src))  # only <start> -> <end>
    assert weights.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_head_selection_and_mean(translator):
    model = translator.model
    src, tgt = _pair(translator)
    per_head = torch.stack([cross_attention(model, src, tgt, head=h) for h in range(model.cfg.heads)])  # (H, T, S)
    assert torch.allclose(cross_attention(model, src, tgt), per_head.mean(dim=0), atol=1e-6)
    assert not torch.allclose(per_head[0], per_head[1])  # heads differ, so selection is not a no-op
    for h in range(model.cfg.heads):
        assert torch.allclose(per_head[h].sum(dim=1), torch.ones(len(tgt) + 1), atol=1e-5)


def test_layer_selection(translator):
    model = translator.model
    src, tgt = _pair(translator)
    last = len(model.decoder_layers) - 1
    assert torch.equal(cross_attention(model, src, tgt, layer=-1), cross_attention(model, src, tgt, layer=last))
    assert not torch.allclose(cross_attention(model, src, tgt, layer=0), cross_attention(model, src, tgt, layer=last))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_weights_are_the_ones_the_decoder_used(norm):
    """The returned weights, applied to the layer's values, reproduce the cross-attention output."""
    model = build_tiny_model(norm=norm)
    src = [5, 6, 7, 8, 9, EOS]
    tgt = [10, 11, 12, 13]
    layer = model.decoder_layers[-1].cross_attn
    seen = {}
    hook = layer.register_forward_hook(lambda _m, args, out: seen.update(args=args, out=out))
    try:
        src_ids, tgt_in = torch.tensor([src]), torch.tensor([[BOS, *tgt]])
        src_mask = padding_mask(src_ids, PAD)
        with torch.no_grad():
            model.decode(tgt_in, model.encode(src_ids, src_mask), src_mask)
    finally:
        hook.remove()
    q, keys, values, _mask = seen["args"]  # the queries come projected, (1, H, T, K)
    heads = torch.stack([cross_attention(model, src, tgt, head=h) for h in range(model.cfg.heads)])  # (H, T, S)
    mixed = heads[None] @ values  # (1, H, T, K)
    out = layer.out_proj(mixed.transpose(1, 2).reshape(1, len(tgt) + 1, -1))  # (1, T, H*K) -> (1, T, D)
    assert torch.allclose(out, seen["out"], atol=1e-5)
    # and they are softmax(QKᵀ/√K) of that query, not of some other input
    assert torch.allclose(heads, explicit_attention(q, keys, values, None)[1][0], atol=1e-6)


@pytest.mark.parametrize(
    ("layer", "head", "named"),
    [(2, None, "--layer 2"), (-3, None, "--layer -3"), (-1, 4, "--head 4"), (-1, -1, "--head -1")],
)
def test_bad_layer_or_head_is_a_user_error(layer, head, named):
    model = build_tiny_model()  # 2 decoder layers, 4 heads
    with pytest.raises(UserError, match=named):
        cross_attention(model, [5, 6, EOS], [7], layer=layer, head=head)


def test_all_three_kinds_every_layer_and_head(translator):
    model = translator.model
    src, tgt = _pair(translator)
    weights = attention_weights(model, src, tgt)
    s, t, h = len(src), len(tgt) + 1, model.cfg.heads
    assert weights.encoder.shape == (len(model.encoder_layers), h, s, s)
    assert weights.decoder.shape == (len(model.decoder_layers), h, t, t)
    assert weights.cross.shape == (len(model.decoder_layers), h, t, s)
    for kind in (weights.encoder, weights.decoder, weights.cross):
        assert torch.allclose(kind.sum(-1), torch.ones(kind.shape[:-1]), atol=1e-5)
    assert (weights.decoder.triu(1) == 0).all() and (weights.decoder.diagonal(dim1=-2, dim2=-1) > 0).all()
    assert not torch.allclose(weights.encoder[0], weights.encoder[-1])  # layers are not copies of one another
    assert torch.equal(weights.cross[-1].mean(0), cross_attention(model, src, tgt))
    assert unhooked(model)  # the recording left no trace on the modules


@pytest.mark.parametrize("kernel", ["explicit", "sdpa"])
def test_hooks_see_beam_searchs_grouped_cross_attention(kernel):
    """Beam search's cross-attention reads each source once for its N beams (the grouped path): a forward
    hook on the attention core sees every such call, with the N beams as one source row's N queries, and
    what the hook sees gives the call's output."""
    model, beam = build_tiny_model(attention=kernel), 3
    src = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    calls: list[tuple[tuple, Tensor]] = []
    hooks = [
        (layer.cross_attn.attend, lambda _m, args, out: calls.append((args, out))) for layer in model.decoder_layers
    ]
    with recorded_logits(model) as steps, forward_hooks(hooks):
        hooked = beam_search(model, src, beam=beam, nbest=beam, max_len_a=0.0, max_len_b=6)
    assert unhooked(model) and hooked == beam_search(model, src, beam=beam, nbest=beam, max_len_a=0.0, max_len_b=6)
    assert len(calls) == len(steps) * len(model.decoder_layers)  # every step, every layer: none went around
    assert steps[0].size(0) == 2 * beam  # the decoder ran B·N rows ...
    for (q, keys, values, mask), out in calls:
        assert q.shape[0] == keys.shape[0] and q.shape[2] == beam  # ... the core saw (B, H, N·1, K): one row per source
        torch.testing.assert_close(out, explicit_attention(q, keys, values, mask)[0], rtol=0, atol=1e-5)
