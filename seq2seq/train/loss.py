"""The loss: label-smoothed cross-entropy of the next token under teacher forcing.

``label_smoothed_cross_entropy`` is the loss as the library writes it, on the model's logits; the dev
loss uses it (unsmoothed). Training uses ``projected_cross_entropy``: the output projection and the
same loss in one pass, with the same value and gradients (tests/unit/train/test_loss.py) in less
memory and time.

Written out, the loss of one target position with decoder state h, logits z = W h over V
classes, target t and smoothing ε is

    loss = (1 - ε)·(−log p_t) + ε·mean_v(−log p_v) = logsumexp(z) − (1 − ε)·z_t − ε·mean(z)

and its gradient is simple: ∂loss/∂z = softmax(z) − (1 − ε)·onehot(t) − ε/V.

A bias b (``model.output_bias``) adds to z before the softmax; its gradient is ∂loss/∂z summed
over positions.

``F.cross_entropy(model(src, tgt_in))`` builds the whole (N, V) logit matrix, keeps a
float32 log-softmax of it for the backward pass, and pays for padded positions too. Here the
non-pad rows are taken first and projected in one matmul; the softmax runs in float32 a chunk
of rows at a time and writes each chunk's gradient (the formula above) over its logits, so the
largest tensor is the (N, V) logits in the matmul's dtype (bf16 under autocast: half of the
float32 log-softmax), and the two gradient products are each one large matmul, computed here
and stored for the backward pass. Same value
and gradients as ``F.cross_entropy(..., ignore_index=PAD, label_smoothing=ε, reduction="sum")``
(tests/unit/train/test_loss.py); under autocast the matmuls run in its dtype and the softmax in float32.
"""

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from seq2seq.special import PAD


def label_smoothed_cross_entropy(logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
    """Summed cross-entropy of logits (..., V) against target ids (...), over the positions whose target is
    not ``PAD``, with a share ε = ``smoothing`` of the target's probability spread over the vocabulary; in float32."""
    logits = logits.flatten(0, -2).float()  # (N, V)
    return F.cross_entropy(logits, targets.flatten(), ignore_index=PAD, label_smoothing=smoothing, reduction="sum")


CHUNK_ROWS = 256  # rows per float32 softmax chunk: small enough to stay in cache, large enough to amortise the loop


_buffers: dict[tuple[torch.device, torch.dtype], Tensor] = {}


def logits_buffer(rows: int, cols: int, like: Tensor) -> Tensor:
    """A reusable (rows, cols) buffer with ``like``'s device and dtype, grown as needed.

    A fresh (N, V) tensor every step is slow on a CPU: glibc maps large blocks afresh, so the
    kernel page-faults and zero-fills tens of megabytes again each time; a reused buffer is
    already mapped (docs/design.md#logits-buffer). Its contents are
    overwritten by the next call.
    """
    key = (like.device, like.dtype)
    buffer = _buffers.get(key)
    if buffer is None or buffer.numel() < rows * cols:
        buffer = _buffers[key] = like.new_empty(rows * cols)
    return buffer[: rows * cols].view(rows, cols)


class _ProjectedCrossEntropy(torch.autograd.Function):
    """h (N, D), W (V, D), bias (V,) or None, targets (N,) -> summed loss; gradients computed in forward if wanted."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        h: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        targets: Tensor,
        smoothing: float,
        dtype: torch.dtype,
        want_grad: bool,
    ) -> Tensor:
        acc = torch.promote_types(h.dtype, torch.float32)  # softmax precision: float32 at least
        h_c, w_c = h.to(dtype), weight.to(dtype)
        vocab = weight.size(0)
        logits = torch.mm(h_c, w_c.t(), out=logits_buffer(h_c.size(0), vocab, h_c))  # (N, V); becomes its gradient
        if bias is not None:
            logits += bias.to(dtype)
        total = torch.zeros((), dtype=acc, device=h.device)
        # Two float32 chunk buffers reused across chunks: fresh megabyte-sized tensors per chunk
        # page-fault again, as in logits_buffer.
        z_buffer = logits.new_empty((min(CHUNK_ROWS, h.size(0)), vocab), dtype=acc)
        p_buffer = torch.empty_like(z_buffer)
        for start in range(0, h.size(0), CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            t = targets[rows]
            z = z_buffer[: t.numel()].copy_(logits[rows])  # (c, V) in float32
            p = torch.softmax(z, 1, out=p_buffer[: t.numel()])
            # logsumexp(z) = max(z) − log(max(p)); max(p) ≥ 1/V, so unlike p_t it cannot underflow
            lse = z.amax(1) - p.amax(1).log()
            picked, mean = z.gather(1, t[:, None]).squeeze(1), z.mean(1)
            total += (lse - (1 - smoothing) * picked - smoothing * mean).sum()
            if want_grad:  # softmax − ε/V − (1 − ε)·onehot(t), written over the chunk's logits
                g = p.sub_(smoothing / vocab)
                g[torch.arange(t.numel(), device=t.device), t] -= 1 - smoothing
                logits[rows] = g
        if want_grad:
            grad_h = (logits @ w_c).to(h.dtype)
            grad_w = (logits.t() @ h_c).to(weight.dtype)
            # The bias's gradient is the logits' gradient summed over positions (a zero-size stand-in without one).
            grad_b = logits.sum(0, dtype=acc).to(bias.dtype) if bias is not None else grad_w.new_empty(0)
            ctx.save_for_backward(grad_h, grad_w, grad_b)
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_out: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        grad_h, grad_w, grad_b = ctx.saved_tensors  # type: ignore[attr-defined]
        grad_bias = grad_b * grad_out if ctx.needs_input_grad[2] else None
        return grad_h * grad_out, grad_w * grad_out, grad_bias, None, None, None, None


def projected_cross_entropy(
    states: Tensor, weight: Tensor, targets: Tensor, label_smoothing: float = 0.0, bias: Tensor | None = None
) -> Tensor:
    """Summed label-smoothed cross-entropy of ``states @ weight.T + bias`` over non-pad targets.

    states (..., D) decoder outputs, weight (V, D) output projection, bias (V,) or None, targets (...)
    ids with ``PAD`` where nothing is predicted -> scalar loss (sum over the non-pad positions).
    """
    dtype = torch.get_autocast_dtype(states.device.type) if torch.is_autocast_enabled(states.device.type) else None
    want_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (states, weight, bias))
    keep = targets.reshape(-1) != PAD
    h = states.reshape(-1, states.size(-1))[keep]
    with torch.autocast(states.device.type, enabled=False):
        return _ProjectedCrossEntropy.apply(
            h, weight, bias, targets.reshape(-1)[keep], label_smoothing, dtype or h.dtype, want_grad
        )
