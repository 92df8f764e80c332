"""Training precision: float32, bf16 autocast, or bf16 weights with float32 master weights.

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
* ``auto``: ``bf16-autocast`` where the hardware does bf16 natively (CUDA GPUs with bf16,
  CPUs with AVX-512 BF16 or AMX), else ``float32``. Autocast rather than ``bf16`` weights,
  because on the reference CPU the bf16 weights were no faster per step and the recipe's
  hour did not score better with them (docs/experiments.md, docs/benchmarks.md). A small
  model on a large GPU is bound by kernel launches, which autocast's casts add to, so
  ``float32`` can be the faster choice there (docs/benchmarks.md, GPU section).
"""

import copy

import torch
from torch import nn

DESCRIPTIONS = {
    "float32": "float32",
    "bf16-autocast": "bf16 autocast",
    "bf16": "bf16 weights (float32 master weights)",
}


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
