"""Section 5 of the report: Add & Norm, per sub-layer of both stacks, from the residual stream the
model really carried (``seq2seq.explain.probe`` records every ``Residual``).

For each sub-layer: the norms of its input x (the stream entering), of its output F(x), of
x + F(x), and of the LayerNorm output — LN(x + F(x)) after the sum in post-norm, LN(x) before the
sub-layer in pre-norm — each the mean over the sentence's positions of a position vector's
Euclidean norm; and the cosine between x and x + F(x), how much of the direction the stream kept.
A LayerNorm output has norm about √D times its gain, whatever came in: that is what keeps the
scale of the stream fixed from layer to layer.
"""

import torch
import torch.nn.functional as F

from seq2seq.explain.numbers import number
from seq2seq.explain.probe import ResidualCall


def _mean_norm(values: torch.Tensor) -> float:
    """Mean over positions of the norm of each position vector of values (B, L, D)."""
    return number(values.float().norm(dim=-1).mean())


def residual_section(calls: list[ResidualCall], pre_norm: bool) -> dict:
    """One row per Add & Norm, in the order the model ran them."""
    rows = []
    for call in calls:
        summed = call.x + call.sublayer  # dropout is off in eval: this is the residual sum
        normed = call.read if pre_norm else call.out
        rows.append(
            {
                "name": call.name,
                "x": _mean_norm(call.x),
                "f": _mean_norm(call.sublayer),
                "sum": _mean_norm(summed),
                "norm": _mean_norm(normed),
                "kept": number(F.cosine_similarity(call.x.float(), summed.float(), dim=-1).mean()),
            }
        )
    return {"norm": "pre" if pre_norm else "post", "rows": rows}
