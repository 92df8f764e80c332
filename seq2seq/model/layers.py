"""Building blocks of the Transformer, in the order the paper introduces them.

dropout -> attention -> multi-head attention -> feed-forward -> positional
encoding -> embeddings -> encoder layer -> decoder layer. Masks follow ``seq2seq.model.masks``
(boolean, True = may attend).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.config import ModelConfig
from seq2seq.device import cpu_has_amx


def keep_scale(shape: torch.Size, p: float, dtype: torch.dtype) -> Tensor:
    """Inverted-dropout multiplier on the CPU: 0 with probability p, else 1 / (1 - p).

    Each element is decided by 16 random bits, four elements per 64-bit draw, because random
    bits, not arithmetic, are what a CPU dropout mask costs: one draw serves four elements where
    ``torch.rand`` and ``F.dropout``'s Bernoulli sampler spend a float per element
    (docs/design.md#dropout-masks). p is rounded to a multiple of 2⁻¹⁶ (0.3 → 0.300003) and
    the scale uses the rounded value, so the expectation stays exact.
    """
    n = math.prod(shape)
    dropped = round(p * 65536)  # of the 65,536 values a lane can take
    draws = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None)  # 64 uniform bits each
    lanes = draws.view(torch.int16)[:n].view(shape)  # uniform on [-32768, 32767]
    keep = (lanes >= dropped - 32768).view(
        torch.uint8
    )  # as 0/1 bytes: torch converts uint8 to bf16 far faster than bool
    return keep.to(dtype).mul_(65536 / (65536 - dropped))


class Dropout(nn.Module):
    """Inverted dropout: in training, zero each element with probability p and scale the rest by 1/(1-p).

    Same distribution as ``nn.Dropout`` (up to p rounded to 2⁻¹⁶ on a CPU). On a CPU the mask
    comes from ``keep_scale``, because ``F.dropout``'s Bernoulli masks cost a CPU training step more
    (docs/design.md#dropout-masks). Elsewhere ``F.dropout`` runs its fused kernel.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        """(...) -> (...)."""
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p)
        return x * keep_scale(x.shape, self.p, x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"


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


class MultiHeadAttention(nn.Module):
    """Project to H heads of width K, attend in each, concatenate, project back.

    ``head_dim = d_model / heads`` splits the width across heads (the paper's
    choice: same cost as one full-width head); ``head_dim = d_model`` gives every
    head the full width (H times the cost, more capacity per head).

    ``kernel`` picks how the attention itself is computed: ``sdpa`` is
    ``F.scaled_dot_product_attention`` (fused kernels on CUDA), ``explicit`` is
    ``explicit_attention``, ``auto`` is ``sdpa`` on CUDA and ``explicit`` on a CPU, where
    the written-out form is faster for this project's small shapes, in training and in
    the teacher-forced dev pass (docs/design.md#cpu-attention); in training it also takes its dropout
    mask from ``Dropout`` rather than SDPA's Bernoulli sampler. One exception on a CPU: a
    decoding step's self-attention in bf16 (one query, no mask) on a CPU with AMX takes
    ``sdpa``, whose fused kernel is faster there and slower without AMX (docs/design.md#amx-attention).
    """

    def __init__(self, d_model: int, heads: int, head_dim: int, dropout: float, kernel: str = "sdpa") -> None:
        super().__init__()
        self.heads, self.head_dim, self.kernel = heads, head_dim, kernel
        self.q_proj = nn.Linear(d_model, heads * head_dim)
        self.k_proj = nn.Linear(d_model, heads * head_dim)
        self.v_proj = nn.Linear(d_model, heads * head_dim)
        self.out_proj = nn.Linear(heads * head_dim, d_model)
        self.dropout = Dropout(dropout)

    def _split(self, x: Tensor) -> Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.heads, self.head_dim).transpose(1, 2)  # (B, H, L, K)

    def _project(self, x: Tensor, projections: tuple[nn.Linear, ...]) -> Tensor:
        """P projections of one input (B, L, D) as one matmul (weights stacked) -> (P, B, H, L, K).

        The result unpacks into the P projections (``q, k, v = ...``); kept stacked, keys and values
        are one tensor, so a decoder cache grows and reorders them in one operation, not two.
        """
        weight = torch.cat([p.weight for p in projections])
        bias = torch.cat([p.bias for p in projections])
        b, length, _ = x.shape
        stacked = F.linear(x, weight, bias).view(b, length, len(projections), self.heads, self.head_dim)
        return stacked.permute(2, 0, 3, 1, 4)

    def keys_values(self, source: Tensor) -> Tensor:
        """Keys and values (2, B, H, S, K) of a source (B, S, D); cacheable."""
        return self._project(source, (self.k_proj, self.v_proj))

    def queries_keys_values(self, x: Tensor) -> Tensor:
        """Self-attention's queries, keys and values (3, B, H, L, K) of x (B, L, D), in one matmul."""
        return self._project(x, (self.q_proj, self.k_proj, self.v_proj))

    def weights(self, query: Tensor, keys: Tensor, mask: Tensor | None) -> Tensor:
        """Attention weights (B, H, T, S), for inspection (e.g. heat maps)."""
        q = self._split(self.q_proj(query))
        return explicit_attention(q, keys, keys, mask)[1]

    def uses_explicit_attention(self, q: Tensor, mask: Tensor | None) -> bool:
        """Whether attention of queries ``q`` (B, H, T, K) under ``mask`` is computed by ``explicit_attention``."""
        if self.kernel != "auto":
            return self.kernel == "explicit"
        if q.device.type != "cpu":
            return False
        cached_bf16_step = q.dtype == torch.bfloat16 and q.size(2) == 1 and mask is None and not self.training
        return not (cached_bf16_step and cpu_has_amx())

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """query (B·G, T, D), keys/values (B, H, S, K), mask broadcastable to (B, H, G·T, S) -> (B·G, T, D).

        G > 1: each row of keys/values serves G consecutive query rows (a sentence's beams share
        its source), attended as that row's G·T queries, so the keys/values are neither projected
        nor stored nor read G times, and each matmul multiplies G·T query rows instead of T.
        """
        q = self._split(self.q_proj(query))  # (B·G, H, T, K)
        b, groups = keys.size(0), query.size(0) // keys.size(0)
        if groups == 1:
            return self.attend(q, keys, values, mask)
        _, h, t, k = q.shape
        q = q.view(b, groups, h, t, k).transpose(1, 2).reshape(b, h, groups * t, k)  # (B, H, G·T, K)
        out = self._heads(q, keys, values, mask)  # (B, H, G·T, K)
        out = out.view(b, h, groups, t, k).permute(0, 2, 3, 1, 4).reshape(b * groups, t, h * k)  # (B·G, T, H*K)
        return self.out_proj(out)

    def attend(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """Projected queries (B, H, T, K), keys/values (B, H, S, K), mask -> (B, T, D)."""
        out = self._heads(q, keys, values, mask)
        b, _, t, _ = out.shape
        out = out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)  # (B, T, H*K)
        return self.out_proj(out)

    def _heads(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """Every head's attention output (B, H, T, K), by the kernel ``kernel`` picks."""
        if self.uses_explicit_attention(q, mask):
            return explicit_attention(q, keys, values, mask, self.dropout)[0]
        p = self.dropout.p if self.training else 0.0
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=p)


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
            # input, and sums, dropout and (on a CPU) LayerNorm work on half the bytes
            # (docs/design.md#bf16-residual-stream).
            x = x.to(torch.get_autocast_dtype(x.device.type))
        return self.dropout(x)


class _Residual(nn.Module):
    """Add & Norm around one sub-layer: post-norm LN(x + f(x)) or pre-norm x + f(LN(x))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.dropout = Dropout(cfg.dropout)
        self.pre_norm = cfg.norm == "pre"

    def inner(self, x: Tensor) -> Tensor:
        """What the sub-layer reads: LN(x) in pre-norm, x itself in post-norm."""
        return self.norm(x) if self.pre_norm else x

    def add(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """Residual sum, normalised afterwards in post-norm."""
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
        self.attn_res, self.ffn_res = _Residual(cfg), _Residual(cfg)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D)."""
        x = self.attn_res.add(
            x, self.self_attn.attend(*self.self_attn.queries_keys_values(self.attn_res.inner(x)), src_mask)
        )
        return self.ffn_res.add(x, self.ffn(self.ffn_res.inner(x)))


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
        self.self_res, self.cross_res, self.ffn_res = _Residual(cfg), _Residual(cfg), _Residual(cfg)

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
        qkv = self.self_attn.queries_keys_values(self.self_res.inner(x))  # (3, B·G, H, T, K)
        kv = qkv[1:]
        if cache is not None:
            if index < len(cache.self_kv):
                kv = torch.cat([cache.self_kv[index], kv], dim=3)
                cache.self_kv[index] = kv
            else:
                cache.self_kv.append(kv)
        x = self.self_res.add(x, self.self_attn.attend(qkv[0], kv[0], kv[1], self_mask))

        if cache is not None and index < len(cache.cross_kv):
            cross_kv = cache.cross_kv[index]
        else:
            cross_kv = self.cross_attn.keys_values(memory)  # (2, B, H, S, K)
            if cache is not None:
                # Stored contiguous: as views into the fused K/V projection, every later step's
                # attention matmuls would first copy them into a layout they can batch over.
                cross_kv = cross_kv.contiguous()
                cache.cross_kv.append(cross_kv)
        h = self.cross_res.inner(x)
        x = self.cross_res.add(x, self.cross_attn(h, cross_kv[0], cross_kv[1], src_mask))
        return self.ffn_res.add(x, self.ffn(self.ffn_res.inner(x)))
