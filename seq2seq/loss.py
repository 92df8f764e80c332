"""The training loss: output projection and label-smoothed cross-entropy in one pass.

Written out, the loss of one target position with decoder state h, logits z = W h over V
classes, target t and smoothing ε is

    loss = (1 - ε)·(−log p_t) + ε·mean_v(−log p_v) = logsumexp(z) − (1 − ε)·z_t − ε·mean(z)

and its gradient is simple: ∂loss/∂z = softmax(z) − (1 − ε)·onehot(t) − ε/V.

``F.cross_entropy(model(src, tgt_in))`` builds the whole (N, V) logit matrix, keeps a
float32 log-softmax of it for the backward pass, and pays for padded positions too. Here the
non-pad rows are taken first and projected a chunk of rows at a time; each chunk's logits
become its gradient right away (the formula above) and are dropped, so the largest tensor
is (chunk, V), it stays in cache, and the backward pass is two stored products. Same value
and gradients as ``F.cross_entropy(..., ignore_index=PAD, label_smoothing=ε, reduction="sum")``
(tests/test_loss.py); under autocast the matmuls run in its dtype and the softmax in float32.
"""

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from seq2seq.tokenizer import PAD

CHUNK_ROWS = 256  # (256, V) float32 logits: 4 MB at V = 4,000; fastest of 64/256/1024 on the 2-core CPU


class _ProjectedCrossEntropy(torch.autograd.Function):
    """h (N, D), W (V, D), targets (N,) -> summed loss; gradients computed in forward if wanted."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx,
        h: Tensor,
        weight: Tensor,
        targets: Tensor,
        smoothing: float,
        dtype: torch.dtype,
        want_grad: bool,
    ) -> Tensor:
        acc = torch.promote_types(h.dtype, torch.float32)  # softmax precision: float32 at least
        h_c, w_c = h.to(dtype), weight.to(dtype)
        vocab = weight.size(0)
        total = torch.zeros((), dtype=acc, device=h.device)
        grad_h = torch.empty_like(h) if want_grad else None
        grad_w = torch.zeros(weight.shape, dtype=acc, device=h.device) if want_grad else None
        for start in range(0, h.size(0), CHUNK_ROWS):
            rows = slice(start, start + CHUNK_ROWS)
            t = targets[rows]
            z = (h_c[rows] @ w_c.t()).to(acc)  # (c, V)
            lse = torch.logsumexp(z, dim=1)
            picked = z.gather(1, t[:, None]).squeeze(1)
            total += (lse - (1 - smoothing) * picked - smoothing * z.mean(1)).sum()
            if want_grad:
                g = z.sub_(lse[:, None]).exp_().sub_(smoothing / vocab)  # softmax − ε/V, in place
                g[torch.arange(t.numel(), device=t.device), t] -= 1 - smoothing
                g = g.to(dtype)
                grad_h[rows] = g @ w_c
                grad_w += (g.t() @ h_c[rows]).to(acc)
        if want_grad:
            ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_out: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        grad_h, grad_w = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None


def projected_cross_entropy(states: Tensor, weight: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Summed label-smoothed cross-entropy of ``states @ weight.T`` over non-pad targets.

    states (..., D) decoder outputs, weight (V, D) output projection, targets (...) ids with
    ``PAD`` where nothing is predicted -> scalar loss (sum over the non-pad positions).
    """
    dtype = torch.get_autocast_dtype(states.device.type) if torch.is_autocast_enabled(states.device.type) else None
    want_grad = torch.is_grad_enabled() and (states.requires_grad or weight.requires_grad)
    keep = targets.reshape(-1) != PAD
    h = states.reshape(-1, states.size(-1))[keep]
    with torch.autocast(states.device.type, enabled=False):
        return _ProjectedCrossEntropy.apply(
            h, weight, targets.reshape(-1)[keep], label_smoothing, dtype or h.dtype, want_grad
        )
