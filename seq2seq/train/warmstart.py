"""Warm start: a new run that begins from a trained model (``train.init_from``).

Fine-tuning the zh→en model on one's own domain data: the new run takes the old model's
weights and its tokenizer (the new corpus is encoded with it, so every id keeps its meaning),
and starts a fresh optimizer, schedule and step count. The model shape and the tokenizer
settings must be the old run's; anything else could not reuse the weights and is refused.
"""

from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from seq2seq.checkpoint import load_checkpoint, resolve_checkpoint
from seq2seq.config import Config
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError

# The data settings that decide the tokenizer; the corpus and everything else may change.
TOKENIZER_SETTINGS = ("vocab_size", "joint_vocab", "spm_model_type", "character_coverage")


@dataclass
class WarmStart:
    """What a new run takes from a trained one."""

    model: dict[str, Tensor]  # the weights (state dict)
    tokenizer: Tokenizer
    checkpoint: Path


def load_warm_start(init_from: str, cfg: Config) -> WarmStart:
    """The weights and tokenizer of ``init_from`` (a run directory -> its best.pt, or a checkpoint file),
    checked against ``cfg``: the same model shape and tokenizer settings, else a UserError naming the key."""
    path = resolve_checkpoint(init_from)
    state = load_checkpoint(path)
    old = state["config"]
    for key, value in cfg.to_dict()["model"].items():
        if old["model"].get(key) != value:
            raise UserError(
                f"train.init_from={init_from}: that model has model.{key}={old['model'].get(key)!r}, this config "
                f"{value!r}; a warm start keeps the model's shape (set model.{key}: {old['model'].get(key)!r})"
            )
    for key in TOKENIZER_SETTINGS:
        if old["data"][key] != getattr(cfg.data, key):
            raise UserError(
                f"train.init_from={init_from}: its tokenizer was trained with data.{key}={old['data'][key]!r}, "
                f"this config has {getattr(cfg.data, key)!r}; a warm start reuses that tokenizer, so set the same"
            )
    return WarmStart(state["model"], Tokenizer.load(path.parent), path)
