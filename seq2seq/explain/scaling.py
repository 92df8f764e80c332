"""Section 2 of the report: one head of the encoder's self-attention, step by step, and why the
scores are divided by √K.

From the queries and keys the model really computed (``seq2seq.explain.probe``): the scores QKᵀ,
the scaled scores QKᵀ/√K and their softmax (the weights the model used); beside them the softmax
of the unscaled scores. Each is summarised per query row by its largest weight, its entropy, the
Frobenius norm of the softmax's Jacobian diag(y) − yyᵀ at that row (how much the weights move
when the scores move: the gradient that reaches Q and K), and the spread max − min of the row's
scores. Softmax depends on the differences between scores only, so it is the spread, √K times
wider without the division, that pushes the weights towards one-hot and the Jacobian towards 0.
The Jacobian is taken with respect to the softmax's own input, scaled or not, so both sides
measure saturation alone.
"""

import math

import torch
from torch import Tensor

from seq2seq.errors import UserError
from seq2seq.explain.numbers import number, rounded
from seq2seq.explain.probe import AttentionCall

PREVIEW_DIMS = 8  # leading columns of Q, K and V shown as numbers


def entropy(weights: Tensor) -> Tensor:
    """Entropy in nats of every row of weights (..., n) -> (...); 0·log 0 counts as 0."""
    return -torch.special.xlogy(weights, weights).sum(dim=-1)


def jacobian_norm(weights: Tensor) -> Tensor:
    """Frobenius norm of the softmax Jacobian diag(y) − yyᵀ at every row y of weights (..., n) -> (...)."""
    jacobian = torch.diag_embed(weights) - weights[..., :, None] * weights[..., None, :]  # (..., n, n)
    return jacobian.flatten(-2).norm(dim=-1)


def masked_logits(logits: Tensor, mask: Tensor | None) -> Tensor:
    """Masked keys get the dtype's most negative value, as ``seq2seq.model.layers.explicit_attention`` does."""
    return logits if mask is None else logits.masked_fill(~mask, torch.finfo(logits.dtype).min)


def softmax_summary(logits: Tensor, mask: Tensor | None) -> dict:
    """Per-row statistics of softmax(logits) for logits (T, S) and a mask broadcastable to them."""
    weights = masked_logits(logits, mask).softmax(dim=-1)
    allowed = torch.ones_like(logits, dtype=torch.bool) if mask is None else mask.expand_as(logits)
    spread = logits.masked_fill(~allowed, -math.inf).amax(-1) - logits.masked_fill(~allowed, math.inf).amin(-1)
    rows = {
        "largest": weights.amax(dim=-1),
        "entropy": entropy(weights),
        "jacobian": jacobian_norm(weights),
        "spread": spread,
    }
    return {
        "rows": {name: rounded(values) for name, values in rows.items()},
        "mean": {name: number(values.mean()) for name, values in rows.items()},
    }


def _scores(call: AttentionCall, head: int) -> tuple[Tensor, Tensor | None]:
    """Unscaled scores QKᵀ (T, S) of one head of a one-sentence call, and its mask as (T, S) or None."""
    q, k = call.q[0, head].float(), call.keys[0, head].float()  # (T, K), (S, K)
    scores = q @ k.T  # (T, S)
    mask = None if call.mask is None else call.mask[0, 0].expand_as(scores)
    return scores, mask


def check_choice(layer: int, head: int, layers: int, heads: int) -> tuple[int, int]:
    """``layer`` (negative: from the end) and ``head`` as indices, or a one-line error naming the range."""
    if not -layers <= layer < layers:
        raise UserError(f"layer {layer}: the encoder has {layers} layers (0 to {layers - 1}, or -1 for the last)")
    if not 0 <= head < heads:
        raise UserError(f"head {head}: the model has {heads} heads (0 to {heads - 1})")
    return layer % layers, head


def head_section(calls: list[AttentionCall], layer: int, head: int) -> dict:
    """Step by step for head ``head`` of encoder layer ``layer``; ``calls[l]`` is layer l's one-sentence call."""
    call = calls[layer]
    width = call.q.size(-1)
    scores, mask = _scores(call, head)
    scaled = scores / math.sqrt(width)
    summary = []
    for index, other in enumerate(calls):
        for h in range(other.q.size(1)):
            raw, raw_mask = _scores(other, h)
            summary.append(
                {
                    "layer": index,
                    "head": h,
                    "scaled": softmax_summary(raw / math.sqrt(other.q.size(-1)), raw_mask)["mean"],
                    "unscaled": softmax_summary(raw, raw_mask)["mean"],
                }
            )
    return {
        "layer": layer,
        "head": head,
        "head_dim": width,
        "sqrt_head_dim": number(math.sqrt(width)),
        "shapes": {name: list(t.shape) for name, t in (("q", call.q), ("k", call.keys), ("v", call.values))},
        "q": rounded(call.q[0, head, :, :PREVIEW_DIMS].float()),
        "k": rounded(call.keys[0, head, :, :PREVIEW_DIMS].float()),
        "v": rounded(call.values[0, head, :, :PREVIEW_DIMS].float()),
        "scores": rounded(scores),
        "scaled_scores": rounded(scaled),
        "weights": rounded(masked_logits(scaled, mask).softmax(dim=-1)),
        "unscaled_weights": rounded(masked_logits(scores, mask).softmax(dim=-1)),
        "scaled": softmax_summary(scaled, mask),
        "unscaled": softmax_summary(scores, mask),
        "uniform_entropy": number(math.log(scores.size(-1))),
        "summary": summary,
    }
