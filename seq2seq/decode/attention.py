"""Attention weights of one sentence pair: encoder self-, decoder self- and cross-attention, every
layer and head (``translate --attention`` draws them with ``seq2seq.explain.heatmap``; ``serve``
sends them to its page).

Weights are recorded while the model runs teacher-forced on ``<start> y…`` (the decoder's input
for a finished translation), so they are the ones the decoder used to predict ``y… <end>``.
"""

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seq2seq.errors import UserError
from seq2seq.model.layers import MultiHeadAttention, explicit_attention
from seq2seq.model.masks import padding_mask
from seq2seq.model.transformer import Transformer
from seq2seq.special import PAD


@dataclass
class AttentionWeights:
    """All attention weights of one sentence pair, float32 on the CPU.

    S counts the source ids ``x… <end>``; T counts the decoder positions ``<start> y…``, the rows
    that predicted ``y… <end>``. Every row is a distribution over its keys.
    """

    encoder: Tensor  # (L_enc, H, S, S) encoder self-attention
    decoder: Tensor  # (L_dec, H, T, T) decoder self-attention (causal: zero above the diagonal)
    cross: Tensor  # (L_dec, H, T, S) decoder queries over the encoder output


Hook = Callable[[nn.Module, tuple, Tensor], None]


@contextlib.contextmanager
def forward_hooks(hooks: Iterable[tuple[nn.Module, Hook]]) -> Iterator[None]:
    """While active, each ``(module, hook)`` pair's hook is a forward hook of its module; leaving the
    block (also by an error) removes them, so the model keeps no trace of the recording."""
    handles = []
    try:
        for module, hook in hooks:
            handles.append(module.register_forward_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _recording(modules: list[MultiHeadAttention], into: list[Tensor]) -> contextlib.AbstractContextManager[None]:
    """While active, each attention of ``modules`` appends its weights (B, H, T, S) to ``into``, recomputed
    from the queries, keys, values and mask its attention core was called with."""

    def record(module: nn.Module, args: tuple[Tensor, Tensor, Tensor, Tensor | None], output: Tensor) -> None:
        into.append(explicit_attention(*args)[1].float())

    return forward_hooks((module.attend, record) for module in modules)


@torch.no_grad()
def attention_weights(model: Transformer, src: list[int], tgt: list[int]) -> AttentionWeights:
    """Every layer's and head's attention for source ids ``x… <end>`` and translation ``tgt`` (no <start>/<end>)."""
    device = next(model.parameters()).device
    src_ids = torch.tensor([src], device=device)
    tgt_in = torch.tensor([[model.cfg.decoder_start_id, *tgt]], device=device)
    src_mask = padding_mask(src_ids, PAD)
    encoder: list[Tensor] = []
    decoder_self: list[Tensor] = []
    cross: list[Tensor] = []
    with _recording([layer.self_attn for layer in model.encoder_layers], encoder):
        memory = model.encode(src_ids, src_mask)
    with (
        _recording([layer.self_attn for layer in model.decoder_layers], decoder_self),
        _recording([layer.cross_attn for layer in model.decoder_layers], cross),
    ):
        model.decode(tgt_in, memory, src_mask)
    return AttentionWeights(
        *(torch.cat(kind).cpu() for kind in (encoder, decoder_self, cross))  # L × (1, H, ·, ·) -> (L, H, ·, ·)
    )


def select(weights: Tensor, layer: int = -1, head: int | None = None) -> Tensor:
    """One layer of weights (L, H, T, S) -> (T, S): one head, or the mean over heads for ``head=None``."""
    layers, heads = weights.shape[:2]
    if not -layers <= layer < layers:
        raise UserError(f"--layer {layer}: the model has {layers} decoder layers")
    if head is not None and not 0 <= head < heads:
        raise UserError(f"--head {head}: the model has {heads} heads")
    return weights[layer].mean(0) if head is None else weights[layer, head]


def cross_attention(
    model: Transformer, src: list[int], tgt: list[int], layer: int = -1, head: int | None = None
) -> Tensor:
    """Weights (T, S) of one decoder layer's cross-attention for one sentence pair.

    ``tgt`` is the translation without <start>/<end>; rows are the positions that
    predicted ``tgt… <end>``. ``head=None`` averages over heads.
    """
    return select(attention_weights(model, src, tgt).cross, layer, head)
