"""Building blocks of the Transformer, in the order the paper introduces them.

scaled dot-product attention -> multi-head attention -> feed-forward -> positional encoding ->
embeddings -> Add & Norm -> encoder layer -> decoder layer. Masks come from ``seq2seq.model.masks``
(boolean, True = may attend). Where a faster kernel computes the same thing (dropout masks on a CPU,
the attention kernel, beams sharing their source), the layers call it from ``seq2seq.model.kernels``.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.config import ModelConfig
from seq2seq.model.kernels import Dropout, grouped_attention, stacked_projections, uses_explicit_attention


def explicit_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout: Callable[[Tensor], Tensor] | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ / √K) V, written out; returns (output, weights).

    q (B, H, T, K), k and v (B, H, S, K), mask broadcastable to (B, H, T, S);
    ``dropout`` (e.g. a ``Dropout`` module) is applied to the weights.
    Dividing by √K keeps the dot products at unit variance whatever the head
    width, so softmax does not saturate into one-hot weights with tiny gradients.
    Masked logits get the dtype's most negative finite value (not -1e9, which
    overflows float16); since no row is fully masked, no NaN can appear.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights  # (B, H, T, K), (B, H, T, S)


class Attention(nn.Module):
    """Scaled dot-product attention of every head: ``explicit_attention`` or SDPA, the same numbers.

    Every attention of the model is a call of this module, so a forward hook on it sees the
    queries, keys, values and mask of each one (``seq2seq.decode.attention`` records the weights
    so). ``kernel`` (``model.attention``: ``sdpa``, ``explicit`` or ``auto``) picks the form by
    ``seq2seq.model.kernels.uses_explicit_attention``.
    """

    def __init__(self, dropout: float, kernel: str = "sdpa") -> None:
        super().__init__()
        self.kernel = kernel
        self.dropout = Dropout(dropout)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """q (B, H, T, K), k and v (B, H, S, K), mask broadcastable to (B, H, T, S) -> (B, H, T, K)."""
        if uses_explicit_attention(self.kernel, q, mask, self.training):
            return explicit_attention(q, k, v, mask, self.dropout)[0]
        p = self.dropout.p if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)


class MultiHeadAttention(nn.Module):
    """Project to H heads of width K, attend in each, concatenate, project back.

    ``head_dim = d_model / heads`` splits the width across heads (the paper's
    choice: same cost as one full-width head); ``head_dim = d_model`` gives every
    head the full width (H times the cost, more capacity per head).

    W^Q, W^K, W^V and W^O are ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj``; the projections
    of one input run as one matmul (``seq2seq.model.kernels.stacked_projections``).
    """

    def __init__(self, d_model: int, heads: int, head_dim: int, dropout: float, kernel: str = "sdpa") -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.q_proj = nn.Linear(d_model, heads * head_dim)
        self.k_proj = nn.Linear(d_model, heads * head_dim)
        self.v_proj = nn.Linear(d_model, heads * head_dim)
        self.out_proj = nn.Linear(heads * head_dim, d_model)
        self.attend = Attention(dropout, kernel)

    def queries(self, x: Tensor) -> Tensor:
        """Queries (B, H, T, K) of x (B, T, D)."""
        b, t, _ = x.shape
        return self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, K)

    def keys_values(self, source: Tensor) -> Tensor:
        """Keys and values (2, B, H, S, K) of a source (B, S, D), which a decoder caches."""
        return stacked_projections(source, (self.k_proj, self.v_proj), self.heads)

    def queries_keys_values(self, x: Tensor) -> Tensor:
        """Self-attention's queries, keys and values (3, B, H, L, K) of x (B, L, D)."""
        return stacked_projections(x, (self.q_proj, self.k_proj, self.v_proj), self.heads)

    def forward(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """Queries (B·G, H, T, K), keys/values (B, H, S, K), mask broadcastable to (B, H, G·T, S) -> (B·G, T, D).

        G = 1 but in beam search, where each row of keys/values serves a sentence's G beams
        (``seq2seq.model.kernels.grouped_attention``).
        """
        if q.size(0) == keys.size(0):
            b, _, t, _ = q.shape
            out = self.attend(q, keys, values, mask).transpose(1, 2).reshape(b, t, -1)  # (B, T, H·K)
        else:
            out = grouped_attention(self.attend, q, keys, values, mask)  # (B·G, T, H·K)
        return self.out_proj(out)


# ReLU overwrites the up-projection's output, which nothing else reads (its gradient needs only
# its own output): one (L, F) tensor fewer per layer (docs/design.md#relu-in-place).
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": lambda: nn.ReLU(inplace=True),
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}


class FeedForward(nn.Module):
    """Position-wise D -> F -> D with ReLU, GELU or SiLU (dropout on the F-wide activation)."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float, activation: str) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, ffn_dim)
        self.down = nn.Linear(ffn_dim, d_model)
        self.act = ACTIVATIONS[activation]()
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, L, D)."""
        return self.down(self.dropout(self.act(self.up(x))))


def sinusoids(length: int, d_model: int) -> Tensor:
    """Positional table (L, D): sin on even dimensions, cos on odd ones.

    Dimension pair i has wavelength 2π·10000^(2i/D), so every position gets a
    unique code and a fixed offset is a linear map of it.
    """
    position = torch.arange(length, dtype=torch.float32)[:, None]  # (L, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


class Embedding(nn.Module):
    """Token embedding scaled by √D, plus sinusoidal positions, then dropout.

    The scaling puts token vectors (initialised with std D^-1/2) on the same
    unit scale as the positional code they are added to. Under autocast the output is in
    autocast's dtype (see ``forward``).
    """

    def __init__(self, tokens: nn.Embedding, dropout: float, max_positions: int) -> None:
        super().__init__()
        self.tokens = tokens
        self.scale = math.sqrt(tokens.embedding_dim)
        self.dropout = Dropout(dropout)
        self.register_buffer("positions", sinusoids(max_positions, tokens.embedding_dim), persistent=False)

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:
        """ids (B, L) starting at position ``offset`` -> (B, L, D)."""
        end = offset + ids.size(1)
        if end > self.positions.size(0):
            raise ValueError(f"sequence of {end} positions exceeds max_positions={self.positions.size(0)}")
        x = self.tokens(ids) * self.scale + self.positions[offset:end].to(self.tokens.weight.dtype)
        if torch.is_autocast_enabled(x.device.type):
            # Start the residual stream in autocast's dtype: the matmuls then need no cast of their
            # input, and sums, dropout and (on a CPU) LayerNorm work on half the bytes.
            x = x.to(torch.get_autocast_dtype(x.device.type))
        return self.dropout(x)


class Residual(nn.Module):
    """Add & Norm around one sub-layer F: post-norm LN(x + F(x)), pre-norm x + F(LN(x)).

    ``read(x)`` is what F reads; calling the module with x and F's output adds them (F's output
    after dropout) and, in post-norm, normalises the sum. A forward hook sees x, F's output and the
    result (``seq2seq.explain.probe`` records them so).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.dropout = Dropout(cfg.dropout)
        self.pre_norm = cfg.norm == "pre"

    def read(self, x: Tensor) -> Tensor:
        """What the sub-layer reads (B, L, D): LN(x) in pre-norm, x itself in post-norm."""
        return self.norm(x) if self.pre_norm else x

    def forward(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """The stream x (B, L, D) plus the sub-layer's output (B, L, D), normalised after in post-norm."""
        x = x + self.dropout(sublayer_out)
        return x if self.pre_norm else self.norm(x)


def _attention(cfg: ModelConfig) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.d_model, cfg.heads, cfg.resolved_head_dim, cfg.attention_dropout, cfg.attention)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in Add & Norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = _attention(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.activation)
        self.attn_res, self.ffn_res = Residual(cfg), Residual(cfg)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D)."""
        h = self.attn_res.read(x)  # (B, S, D)
        x = self.attn_res(x, self.self_attn(*self.self_attn.queries_keys_values(h), src_mask))
        h = self.ffn_res.read(x)
        return self.ffn_res(x, self.ffn(h))


@dataclass
class DecoderCache:
    """Keys/values kept between decoding steps, one entry per decoder layer.

    Self-attention keys/values (2, B·G, H, T, K) grow by one position per step; cross-attention
    keys/values (2, B, H, S, K) are computed from the encoder output once per sentence. Keys and
    values of a layer are one tensor (index 0 keys, 1 values): a beam search's step grows and
    reorders each layer's in one operation.
    """

    self_kv: list[Tensor] = field(default_factory=list)
    cross_kv: list[Tensor] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Target positions already decoded."""
        return self.self_kv[0].size(3) if self.self_kv else 0

    def extend(self, index: int, kv: Tensor) -> Tensor:
        """Layer ``index``'s self-attention keys/values with the new positions' kv (2, B·G, H, T, K) appended
        -> (2, B·G, H, length + T, K)."""
        if index < len(self.self_kv):
            kv = torch.cat([self.self_kv[index], kv], dim=3)
            self.self_kv[index] = kv
        else:
            self.self_kv.append(kv)
        return kv

    def reorder(self, index: Tensor) -> None:
        """Reorder the self-attention cache rows (beam search keeps beams (index)).

        ``index`` (B'*N,) must map each row to a row of the same sentence: the
        cross-attention keys/values are one row per sentence, shared by its beams, so
        they need no copy. Rows of sentences that are done may be left out
        (B' < B); ``keep_cross_rows`` then drops those sentences from the cross-attention too.
        """
        self.self_kv = [kv.index_select(1, index) for kv in self.self_kv]

    def keep_cross_rows(self, index: Tensor) -> None:
        """Keep only the cross-attention rows ``index``, one per sentence (sentences that are done leave the batch)."""
        self.cross_kv = [kv.index_select(1, index) for kv in self.cross_kv]


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn, self.cross_attn = _attention(cfg), _attention(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.activation)
        self.self_res, self.cross_res, self.ffn_res = Residual(cfg), Residual(cfg), Residual(cfg)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        src_mask: Tensor,
        cache: DecoderCache | None = None,
        index: int = 0,
    ) -> Tensor:
        """x (B·G, T, D), memory (B, S, D) -> (B·G, T, D).

        G consecutive rows of x (a sentence's beams; G = 1 outside beam search) share one row of
        memory (``MultiHeadAttention.forward``). With ``cache``, x holds only the new positions;
        this layer's entry ``index`` of the cache is extended (self) or created once (cross).
        """
        h = self.self_res.read(x)  # (B·G, T, D)
        qkv = self.self_attn.queries_keys_values(h)  # (3, B·G, H, T, K)
        q, kv = qkv[0], qkv[1:]
        if cache is not None:
            kv = cache.extend(index, kv)  # (2, B·G, H, cached + T, K)
        x = self.self_res(x, self.self_attn(q, kv[0], kv[1], self_mask))

        if cache is None:
            keys, values = self.cross_attn.keys_values(memory)  # (B, H, S, K) each
        else:
            if index == len(cache.cross_kv):  # the first step: once per sentence
                # Stored contiguous: as views into the stacked projection, every later step's attention
                # matmuls would first copy them into a layout they can batch over.
                cache.cross_kv.append(self.cross_attn.keys_values(memory).contiguous())  # (2, B, H, S, K)
            keys, values = cache.cross_kv[index]
        h = self.cross_res.read(x)
        x = self.cross_res(x, self.cross_attn(self.cross_attn.queries(h), keys, values, src_mask))

        h = self.ffn_res.read(x)
        return self.ffn_res(x, self.ffn(h))
