"""What the model computes inside one pass, recorded while it runs, without changing the model's code.

Every attention goes through ``MultiHeadAttention.attend`` and every Add & Norm through
``_Residual.inner`` and ``_Residual.add``; the layers call these methods directly, not through
``forward``, so forward hooks would miss them. ``recording(model)`` shadows them, for the duration
of a ``with`` block, with instance attributes that keep their inputs and outputs and then call the
class's own method, so the numbers are the model's own. Leaving the block deletes the attributes.

The model is changed while the block runs: a model that another thread runs at the same time
(``seq2seq serve``'s batcher) must be copied first (``seq2seq.explain.routes`` does).
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from torch import Tensor

from seq2seq.model.layers import MultiHeadAttention, _Residual, explicit_attention
from seq2seq.model.transformer import Transformer


@dataclass
class AttentionCall:
    """One call of ``attend``: the projected queries, keys and values and the mask it was given."""

    q: Tensor  # (B, H, T, K)
    keys: Tensor  # (B, H, S, K)
    values: Tensor  # (B, H, S, K)
    mask: Tensor | None  # broadcastable to (B, H, T, S); None: every key

    def weights(self) -> Tensor:
        """The attention weights (B, H, T, S) the call computed: softmax(QKᵀ/√K) under its mask."""
        return explicit_attention(self.q, self.keys, self.values, self.mask)[1]


@dataclass
class ResidualCall:
    """One Add & Norm: the residual stream x, what the sub-layer read, its output F and the result."""

    name: str  # e.g. "encoder 1 · self-attention"
    x: Tensor  # (B, L, D) the stream entering
    read: Tensor  # (B, L, D) the sub-layer's input: LN(x) in pre-norm, x in post-norm
    sublayer: Tensor  # (B, L, D) F(read)
    out: Tensor  # (B, L, D) LN(x + F) in post-norm, x + F in pre-norm


@dataclass
class Recording:
    """Everything one pass recorded, in call order; ``encoder[l]`` holds layer l's self-attention calls."""

    encoder: list[list[AttentionCall]] = field(default_factory=list)
    decoder: list[list[AttentionCall]] = field(default_factory=list)
    cross: list[list[AttentionCall]] = field(default_factory=list)
    residual: list[ResidualCall] = field(default_factory=list)


def _tap_attention(module: MultiHeadAttention, into: list[AttentionCall]) -> None:
    def attend(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        into.append(AttentionCall(q, keys, values, mask))
        return MultiHeadAttention.attend(module, q, keys, values, mask)

    module.attend = attend


def _tap_residual(module: _Residual, name: str, into: list[ResidualCall]) -> None:
    read: list[Tensor] = []  # inner's result, waiting for the add that follows it

    def inner(x: Tensor) -> Tensor:
        read.append(_Residual.inner(module, x))
        return read[-1]

    def add(x: Tensor, sublayer_out: Tensor) -> Tensor:
        out = _Residual.add(module, x, sublayer_out)
        into.append(ResidualCall(name, x, read.pop(), sublayer_out, out))
        return out

    module.inner, module.add = inner, add


def _residual_modules(model: Transformer) -> Iterator[tuple[_Residual, str]]:
    for index, layer in enumerate(model.encoder_layers, 1):
        yield layer.attn_res, f"encoder {index} · self-attention"
        yield layer.ffn_res, f"encoder {index} · feed-forward"
    for index, layer in enumerate(model.decoder_layers, 1):
        yield layer.self_res, f"decoder {index} · self-attention"
        yield layer.cross_res, f"decoder {index} · cross-attention"
        yield layer.ffn_res, f"decoder {index} · feed-forward"


@contextlib.contextmanager
def recording(model: Transformer) -> Iterator[Recording]:
    """While active, every attention and Add & Norm of ``model`` records into the yielded ``Recording``."""
    found = Recording(
        encoder=[[] for _ in model.encoder_layers],
        decoder=[[] for _ in model.decoder_layers],
        cross=[[] for _ in model.decoder_layers],
    )
    tapped: list[tuple[object, tuple[str, ...]]] = []
    try:
        for layer, calls in zip(model.encoder_layers, found.encoder, strict=True):
            _tap_attention(layer.self_attn, calls)
            tapped.append((layer.self_attn, ("attend",)))
        for layer, own, cross in zip(model.decoder_layers, found.decoder, found.cross, strict=True):
            _tap_attention(layer.self_attn, own)
            _tap_attention(layer.cross_attn, cross)
            tapped += [(layer.self_attn, ("attend",)), (layer.cross_attn, ("attend",))]
        for module, name in _residual_modules(model):
            _tap_residual(module, name, found.residual)
            tapped.append((module, ("inner", "add")))
        yield found
    finally:
        for module, names in tapped:
            for name in names:
                delattr(module, name)
