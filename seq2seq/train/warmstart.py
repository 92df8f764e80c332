"""Warm start: a new run that begins from a trained model (``train.init_from``).

Fine-tuning the zh→en model on one's own domain data: the new run takes the old model's
weights and its tokenizer (the new corpus is encoded with it, so every id keeps its meaning),
and starts a fresh optimizer, schedule and step count. The model shape and the tokenizer
settings must be the old run's; anything else could not reuse the weights and is refused.

``init_from`` may also be a local MarianMT directory (an OPUS-MT download): it is converted
(``seq2seq.interop.marian``) and its tokenizer is MarianMT's own, so no data setting is compared;
the model section of the config must be the one the conversion gives (the error names each key).
"""

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from seq2seq.checkpoint import load_checkpoint, resolve_checkpoint
from seq2seq.config import Config
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError
from seq2seq.interop.marian import import_marian, is_marian_dir

# The data settings that decide the tokenizer; the corpus and everything else may change.
TOKENIZER_SETTINGS = ("vocab_size", "joint_vocab", "spm_model_type", "character_coverage")


@dataclass
class WarmStart:
    """What a new run takes from a trained one."""

    model: dict[str, Tensor]  # the weights (state dict)
    tokenizer: Tokenizer
    checkpoint: Path  # the checkpoint file, or the MarianMT directory


def load_warm_start(init_from: str, cfg: Config) -> WarmStart:
    """The weights and tokenizer of ``init_from`` (a run directory -> its best.pt, or a checkpoint file),
    checked against ``cfg``: the same model shape and tokenizer settings, else a UserError naming the key.
    A MarianMT directory is converted; only its model shape is checked."""
    if is_marian_dir(init_from):
        model, tokenizer, imported = import_marian(init_from)
        _same_model(init_from, asdict(imported.model), cfg)
        return WarmStart(model.state_dict(), tokenizer, Path(init_from))
    path = resolve_checkpoint(init_from)
    state = load_checkpoint(path)
    old = state["config"]
    _same_model(init_from, old["model"], cfg)
    for key in TOKENIZER_SETTINGS:
        if old["data"][key] != getattr(cfg.data, key):
            raise UserError(
                f"train.init_from={init_from}: its tokenizer was trained with data.{key}={old['data'][key]!r}, "
                f"this config has {getattr(cfg.data, key)!r}; a warm start reuses that tokenizer, so set the same"
            )
    return WarmStart(state["model"], Tokenizer.load(path.parent), path)


def _same_model(init_from: str, old: dict[str, Any], cfg: Config) -> None:
    """A UserError naming the first model key where ``cfg`` differs from the model it starts from."""
    for key, value in cfg.to_dict()["model"].items():
        if old.get(key) != value:
            raise UserError(
                f"train.init_from={init_from}: that model has model.{key}={old.get(key)!r}, this config "
                f"{value!r}; a warm start keeps the model's shape (set model.{key}: {old.get(key)!r})"
            )
