"""What the model computes inside one pass, recorded while it runs, without changing the model's code.

Every attention is a call of a ``MultiHeadAttention``'s core (``attend``), every Add & Norm a call of
a ``Residual``; ``recording(model)`` puts forward hooks on them for the duration of a ``with`` block,
which keep their inputs and outputs, so the numbers are the model's own. Leaving the block removes
the hooks.

The hooks see every pass while the block runs: a model that another thread runs at the same time
(``seq2seq serve``'s batcher) must be copied first (``seq2seq.explain.routes`` does).
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from torch import Tensor, nn

from seq2seq.decode.attention import Hook, forward_hooks
from seq2seq.model.layers import Residual, explicit_attention
from seq2seq.model.transformer import Transformer


@dataclass
class AttentionCall:
    """One call of an attention core (``attend``): the projected queries, keys and values and the mask it was given."""

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


def _attention_hook(into: list[AttentionCall]) -> Hook:
    def record(module: nn.Module, args: tuple[Tensor, Tensor, Tensor, Tensor | None], output: Tensor) -> None:
        into.append(AttentionCall(*args))

    return record


def _residual_hook(name: str, into: list[ResidualCall]) -> Hook:
    def record(module: nn.Module, args: tuple[Tensor, Tensor], output: Tensor) -> None:
        x, sublayer_out = args
        into.append(ResidualCall(name, x, module.read(x), sublayer_out, output))  # read: LayerNorm recomputed

    return record


def _residual_modules(model: Transformer) -> Iterator[tuple[Residual, str]]:
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
    hooks: list[tuple[nn.Module, Hook]] = []
    for layer, calls in zip(model.encoder_layers, found.encoder, strict=True):
        hooks.append((layer.self_attn.attend, _attention_hook(calls)))
    for layer, own, cross in zip(model.decoder_layers, found.decoder, found.cross, strict=True):
        hooks += [(layer.self_attn.attend, _attention_hook(own)), (layer.cross_attn.attend, _attention_hook(cross))]
    hooks += [(module, _residual_hook(name, found.residual)) for module, name in _residual_modules(model)]
    with forward_hooks(hooks):
        yield found
