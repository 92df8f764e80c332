"""bf16 decoding on a CPU with each linear layer's weight laid out once for oneDNN.

oneDNN's bf16 matmul kernels read their weight in a blocked layout; ``F.linear`` hands them
the plain row-major one, so every call rearranges it again, and a decoding step calls every
layer once per output token. ``pack_linears`` rearranges each weight once, when the model is
loaded, and the layers then call oneDNN with it. The products are the same, in the same order:
outputs do not change. The gain is largest where a call multiplies few rows (the last
sentences of a batch, one request's beams): docs/benchmarks.md measured it on the beam search.
A torch built without oneDNN decodes as before.
"""

import torch
from torch import Tensor, nn

ROWS_HINT = 64  # rows oneDNN lays the weight out for; larger hints lost the gain at a few rows


def can_pack(device: torch.device) -> bool:
    """Whether ``pack_linears`` applies: a CPU, and a torch with oneDNN's linear operators."""
    return (
        device.type == "cpu"
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


class PackedLinear(nn.Module):
    """``nn.Linear`` in bf16 with its weight pre-arranged for oneDNN; ``weight`` and ``bias`` stay readable."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        self.register_buffer(
            "packed", torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS_HINT), persistent=False
        )

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        rows = x.reshape(-1, x.size(-1))
        y = torch.ops.mkldnn._linear_pointwise(rows, self.packed, self.bias, "none", [], "")
        return y.view(*x.shape[:-1], y.size(-1))


def pack_linears(model: nn.Module) -> None:
    """Replace every bf16 ``nn.Linear`` of ``model`` (a decoding copy: inference only) by a ``PackedLinear``."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, nn.Linear) and child.weight.dtype == torch.bfloat16:
                setattr(module, name, PackedLinear(child))
