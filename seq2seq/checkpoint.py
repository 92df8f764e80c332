"""Checkpoints: where a run's model is, atomic save, safe and verified load, averaging.

A checkpoint is a plain dict of tensors and builtins, so it loads with
``torch.load(weights_only=True)``: a tampered file cannot run code. It is written
atomically (``seq2seq.atomic``), so a crash at any moment leaves the previous
checkpoint intact. It also carries a SHA-256 digest of its own content, checked on
load: a flipped bit on disk or an incomplete copy is refused, never loaded as a
model with garbage weights (files written before the digest existed load unchecked).
"""

import hashlib
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch

from seq2seq.atomic import write_atomically
from seq2seq.config import DEFAULT_CONFIG
from seq2seq.errors import UserError

DIGEST_KEY = "sha256"  # the key that holds the digest of everything else in the file


def resolve_checkpoint(model_path: str | Path) -> Path:
    """A run directory (-> its best.pt) or a checkpoint file."""
    path = Path(model_path)
    if path.is_dir():
        path = path / "best.pt"
    if not path.is_file():
        raise UserError(
            f"no trained model at {path}; train first: seq2seq train --config {DEFAULT_CONFIG} "
            "(or pass --model RUN_DIR)"
        )
    return path


def content_digest(state: Any) -> str:
    """SHA-256 of a checkpoint's content: tensors by dtype, shape and bytes, builtins by type and
    value, containers in order (pickle keeps dict order, so a loaded state hashes as it was saved).

    Hashing values rather than the file's bytes keeps the digest independent of torch's
    serialization format and lets it live inside the file it describes.
    """
    digest = hashlib.sha256()
    _feed(digest, state)
    return digest.hexdigest()


def _feed(digest: "hashlib._Hash", value: Any) -> None:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"T{tensor.dtype}{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
    elif isinstance(value, dict):
        digest.update(f"D{len(value)};".encode())
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, list | tuple):
        digest.update(f"{type(value).__name__}{len(value)};".encode())
        for item in value:
            _feed(digest, item)
    else:
        text = repr(value)
        digest.update(f"{type(value).__name__}{len(text)};{text}".encode())


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` and its digest to ``path`` atomically; a failed write is a UserError naming ``path``."""
    signed = {**state, DIGEST_KEY: content_digest(state)}
    write_atomically(path, lambda handle: torch.save(signed, handle))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and verify a checkpoint; a missing, truncated, corrupted, tampered or foreign file is a UserError."""
    if not path.is_file():
        raise UserError(f"checkpoint {path} not found; train first: seq2seq train --config {DEFAULT_CONFIG}")
    try:
        with warnings.catch_warnings():  # torch warns about odd bytes before failing on them: the error says it all
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise UserError(f"{path}: refused to load, not a plain checkpoint ({_first_line(err)})") from None
    except Exception as err:  # truncated, empty or garbage files fail in many ways inside torch.load
        raise UserError(
            f"{path}: unreadable or truncated checkpoint ({type(err).__name__}: {_first_line(err)})"
        ) from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise UserError(f"{path}: not a seq2seq checkpoint (no model/config inside)")
    expected = state.pop(DIGEST_KEY, None)
    if expected is not None and content_digest(state) != expected:
        raise UserError(
            f"{path}: corrupted checkpoint (its content does not match its SHA-256 digest); "
            "restore it from a copy or use another checkpoint"
        )
    model, config = state["model"], state["config"]
    if not isinstance(config, dict) or not isinstance(model, dict):
        raise UserError(f"{path}: not a seq2seq checkpoint (model/config are not mappings)")
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items()):
        raise UserError(f"{path}: not a seq2seq checkpoint (the model is not a mapping of names to tensors)")
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
