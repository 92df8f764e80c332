"""Checkpoints: atomic save, safe load, averaging.

A checkpoint is a plain dict of tensors and builtins, so it loads with
``torch.load(weights_only=True)``: a tampered file cannot run code. Writes go to a
temporary file in the same directory, are fsynced, then renamed over the target,
so a crash at any moment leaves the previous checkpoint intact.
"""

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import DEFAULT_CONFIG
from seq2seq.errors import UserError


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` to ``path`` atomically (temp file + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; give it the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely; a missing, truncated or tampered file is a UserError."""
    if not path.is_file():
        raise UserError(f"checkpoint {path} not found; train first: seq2seq train --config {DEFAULT_CONFIG}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise UserError(f"{path}: refused to load, not a plain checkpoint ({_first_line(err)})") from None
    except Exception as err:  # truncated, empty or garbage files fail in many ways inside torch.load
        raise UserError(
            f"{path}: unreadable or truncated checkpoint ({type(err).__name__}: {_first_line(err)})"
        ) from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise UserError(f"{path}: not a seq2seq checkpoint (no model/config inside)")
    return state


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return lines[0][:120] if lines else "no details"


def average_models(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights of several checkpoints."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_checkpoint(path)["model"].items():
            total[name] = total.get(name, 0) + tensor.double()
    return {name: (tensor / len(paths)).to(torch.float32) for name, tensor in total.items()}
