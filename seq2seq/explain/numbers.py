"""How the explainer's tensors become JSON: nested lists of floats rounded to a fixed number of
decimals (enough for a picture and a table, and a page a fraction of the size), and never NaN or
infinity, which JSON cannot hold: a report that would contain one is a bug, so it raises."""

import math

import torch
from torch import Tensor

DECIMALS = 4


def rounded(values: Tensor, decimals: int = DECIMALS) -> list:
    """A tensor of any shape as nested lists of floats with ``decimals`` decimals."""
    values = values.detach().double()
    if not torch.isfinite(values).all():
        raise ValueError("a report value is not finite")
    scale = 10.0**decimals
    return values.mul(scale).round().div(scale).tolist()


def number(value: float | Tensor, decimals: int = DECIMALS) -> float:
    """One float (or 0-d tensor) with ``decimals`` decimals."""
    value = float(value.detach()) if isinstance(value, Tensor) else float(value)
    if not math.isfinite(value):
        raise ValueError("a report value is not finite")
    return round(value, decimals)
