"""Training precision: float32, bf16 autocast, bf16 weights with float32 master weights, or float16
autocast with loss scaling.

Which one ``auto`` means on a device is decided in ``seq2seq.device``; this module holds what
training does with the choice.

* ``float32``: everything in float32.
* ``bf16-autocast``: float32 weights; autocast runs each matmul in bf16, casting the weights on
  the way in and their gradients on the way out. The activations are bf16 from the embeddings on
  (``seq2seq.model.layers.Embedding``); on CUDA, autocast runs LayerNorm in float32, so there the
  stream is float32 again after each LayerNorm and the matmuls cast it.
* ``bf16``: the forward and backward passes run on a bf16 copy of the model, so activations
  and gradients stay bf16 and nothing is cast per matmul; the optimizer updates the float32
  weights (``MasterWeights``), since a bf16 weight would lose updates smaller than 1/256 of it.
  Softmaxes, LayerNorm statistics and the loss still accumulate in float32.
* ``fp16``: float32 weights; autocast runs the matmuls in float16, whose range is narrow (at most
  65504; gradients below about 6e-8 vanish), so the loss is multiplied by a scale before the
  backward pass (``torch.amp.GradScaler``) and the gradients are divided by it again before
  clipping and the update. A step whose gradients overflowed (inf or NaN) is skipped: the weights
  and the optimizer's moments stay, the schedule and the step counter do not advance (so
  ``max_steps`` counts updates made and the learning rate follows them), the scale halves, and
  the batches it drew are not drawn again. The scaler's state is in the checkpoint, so a resume
  continues with the scale it had. Validation and its decoding run under the same autocast.
* ``auto``: ``bf16-autocast`` where the hardware does bf16 natively (CUDA GPUs of compute
  capability 8 and up, CPUs with AVX-512 BF16 or AMX), ``fp16`` on older CUDA GPUs (they only
  emulate bf16), else ``float32``. Autocast rather than ``bf16`` weights,
  because on the reference CPU the bf16 weights were no faster per step and the recipe's
  hour did not score better with them (docs/design.md#precision-auto). A small
  model on a large GPU is bound by kernel launches, which autocast's casts add to, so
  ``float32`` can be the faster choice there (docs/performance.md#precision).
"""

import copy

import torch
from torch import nn

DESCRIPTIONS = {
    "float32": "float32",
    "bf16-autocast": "bf16 autocast",
    "bf16": "bf16 weights (float32 master weights)",
    "fp16": "float16 autocast with loss scaling",
}
TRAIN_AUTOCAST = {"bf16-autocast": torch.bfloat16, "fp16": torch.float16}  # the dtype training passes autocast to
# Validation runs on the float32 master weights, so the bf16 weights' precision autocasts it to bf16 as well.
EVAL_AUTOCAST = {**TRAIN_AUTOCAST, "bf16": torch.bfloat16}


def loss_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """The ``GradScaler`` that float16 training needs (``precision`` fp16), None for every other precision."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


class MasterWeights:
    """A bf16 working copy of a float32 model: passes run on ``work``, updates on ``master``.

    Per optimizer step: forward/backward on ``work``, ``collect_grads()`` after each backward
    (adds the bf16 gradients into the float32 ``.grad`` of ``master``), the optimizer steps
    ``master``, then ``sync()`` rounds the new weights into ``work``. Tied parameters stay tied
    (the copy is a deep copy). Checkpoints and evaluation use ``master``.

    With ``bf16=False`` (the other precisions) ``work`` is ``master`` itself and both methods do
    nothing, so a training loop is written once for every precision.
    """

    def __init__(self, master: nn.Module, bf16: bool = True) -> None:
        self.master = master
        self.work = copy.deepcopy(master).to(torch.bfloat16) if bf16 else master
        self._pairs = list(zip(master.parameters(), self.work.parameters(), strict=True)) if bf16 else []

    @torch.no_grad()
    def collect_grads(self) -> None:
        """master.grad += float(work.grad); work's gradients are cleared."""
        for m, w in self._pairs:
            if w.grad is None:
                continue
            m.grad = w.grad.float() if m.grad is None else m.grad.add_(w.grad)
            w.grad = None

    @torch.no_grad()
    def sync(self) -> None:
        """work <- bf16(master), e.g. after an optimizer step or loading a checkpoint."""
        for m, w in self._pairs:
            w.copy_(m)
