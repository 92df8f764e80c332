"""Faster forms of what ``seq2seq.model.layers`` computes, and the one rule that picks between them.

Each kernel here gives what its plain form gives (the same distribution, or the same numbers up to
float rounding), and tests/unit/model/test_kernels.py compares the two:

* ``Dropout``: inverted dropout whose CPU masks come from ``keep_scale``'s 16-bit random lanes
  (docs/design.md#dropout-masks).
* ``stacked_projections``: an attention's projections of one input (Q, K and V, or K and V) as one matmul
  (docs/design.md#qkv-one-matmul).
* ``uses_explicit_attention``: which attention kernel a call takes, written-out
  (``seq2seq.model.layers.explicit_attention``) or ``F.scaled_dot_product_attention``
  (docs/design.md#cpu-attention, docs/design.md#amx-attention).
* ``grouped_attention``: a sentence's beams attend to its source once, as one longer query block
  (docs/design.md#beams-share-the-source).
"""

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.device import cpu_has_amx


def keep_scale(shape: torch.Size, p: float, dtype: torch.dtype) -> Tensor:
    """Inverted-dropout multiplier on the CPU: 0 with probability p, else 1 / (1 - p).

    Each element is decided by 16 random bits, four elements per 64-bit draw, because random
    bits, not arithmetic, are what a CPU dropout mask costs: one draw serves four elements where
    ``torch.rand`` and ``F.dropout``'s Bernoulli sampler spend a float per element. p is rounded
    to a multiple of 2⁻¹⁶ (0.3 → 0.300003) and the scale uses the rounded value, so the
    expectation stays exact.
    """
    n = math.prod(shape)
    dropped = round(p * 65536)  # of the 65,536 values a lane can take
    draws = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None)  # 64 uniform bits each
    lanes = draws.view(torch.int16)[:n].view(shape)  # uniform on [-32768, 32767]
    # As 0/1 bytes: torch converts uint8 to bf16 far faster than bool.
    keep = (lanes >= dropped - 32768).view(torch.uint8)
    return keep.to(dtype).mul_(65536 / (65536 - dropped))


class Dropout(nn.Module):
    """Inverted dropout: in training, zero each element with probability p and scale the rest by 1/(1-p).

    Same distribution as ``nn.Dropout`` (up to p rounded to 2⁻¹⁶ on a CPU). On a CPU the mask
    comes from ``keep_scale``, because ``F.dropout``'s Bernoulli masks were a visible share of a
    CPU training step. Elsewhere ``F.dropout`` runs its fused kernel.
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


def stacked_projections(x: Tensor, projections: Sequence[nn.Linear], heads: int) -> Tensor:
    """P projections of one input x (B, L, D), split into H heads -> (P, B, H, L, K).

    Each slice equals that projection alone, split into heads. Stacking the weights makes the P
    products one, and in training makes x's gradient one product too: P separate ones would be
    summed in x's dtype, in bf16 under autocast, rounding each partial sum. Kept stacked, a
    decoder's keys and values are one tensor that its cache grows and reorders in one operation.
    """
    weight = torch.cat([p.weight for p in projections])  # (P·H·K, D)
    bias = torch.cat([p.bias for p in projections])
    b, length, _ = x.shape
    stacked = F.linear(x, weight, bias).view(b, length, len(projections), heads, -1)  # (B, L, P, H, K)
    return stacked.permute(2, 0, 3, 1, 4)  # (P, B, H, L, K)


def uses_explicit_attention(kernel: str, q: Tensor, mask: Tensor | None, training: bool) -> bool:
    """Whether attention of queries ``q`` (B, H, T, K) under ``mask`` runs written out (else SDPA).

    ``kernel`` is ``model.attention``: ``sdpa`` and ``explicit`` take that kernel; ``auto`` takes SDPA
    on a GPU (fused kernels) and the written-out form on a CPU, where it is faster for this project's
    small shapes and takes its dropout mask from ``Dropout`` rather than SDPA's Bernoulli sampler. The
    exception on a CPU is a bf16 decoding step's self-attention (one query, no mask) on a CPU with AMX,
    where SDPA's fused kernel is the faster one (and the slower one without AMX).
    """
    if kernel != "auto":
        return kernel == "explicit"
    if q.device.type != "cpu":
        return False
    cached_bf16_step = q.dtype == torch.bfloat16 and q.size(2) == 1 and mask is None and not training
    return not (cached_bf16_step and cpu_has_amx())


def grouped_attention(
    attend: Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor],
    q: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None,
) -> Tensor:
    """q (B·G, H, T, K), keys/values (B, H, S, K), mask broadcastable to (B, H, G·T, S) -> (B·G, T, H·K).

    G consecutive rows of q (a sentence's beams) share one row of keys and values (its source), and
    ``attend`` reads them as that row's G·T queries: the keys and values are neither projected nor
    stored nor read G times, and each matmul multiplies G·T query rows instead of T. The result is
    what ``attend`` gives for each beam against its own copy of the source, heads merged.
    """
    b, groups = keys.size(0), q.size(0) // keys.size(0)
    _, h, t, k = q.shape
    q = q.view(b, groups, h, t, k).transpose(1, 2).reshape(b, h, groups * t, k)  # (B, H, G·T, K)
    out = attend(q, keys, values, mask)  # (B, H, G·T, K)
    return out.view(b, h, groups, t, k).permute(0, 2, 3, 1, 4).reshape(b * groups, t, h * k)  # (B·G, T, H·K)
