"""Loading trained models for decoding: checkpoints into models, models into a translator of an engine.

``load_translator`` is the one entry point the verbs (translate, evaluate, score, serve) call:

* engine ``torch``: our own decoder (``seq2seq.decode.torch_engine``) on run directories,
  checkpoints or local MarianMT directories (converted by ``seq2seq.interop.marian``), one model or
  an ensemble of several, each loaded once; precision ``float32`` or
  ``bf16`` (a bf16 copy of the weights; the search's softmax and scores stay float32), ``auto``
  as ``seq2seq.device.decode_precision`` decides.
* engine ``ctranslate2``: a directory written by ``seq2seq export --to ctranslate2``
  (``seq2seq.decode.ctranslate2``); precision ``auto`` runs the exported quantization,
  ``float32``/``bf16`` ask CTranslate2 to compute in that type.

On the CPU each engine gets the threads ``seq2seq.decode.threads`` chooses (``threads`` > 0
overrides); on a GPU torch's CPU threads are left as they are.
"""

from collections.abc import Sequence
from pathlib import Path

import torch

from seq2seq.checkpoint import load_checkpoint, resolve_checkpoint
from seq2seq.config import Config, config_from_dict, parse_override
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.ctranslate2 import CTranslate2Translator
from seq2seq.decode.threads import decode_threads
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.decode.translator import Translator, source_normalizer, target_normalizer
from seq2seq.device import DECODE_PRECISIONS, decode_precision, resolve_device
from seq2seq.errors import UserError
from seq2seq.interop.marian import import_marian, is_marian_dir
from seq2seq.model.ensemble import Ensemble
from seq2seq.model.transformer import Transformer
from seq2seq.special import PAD

ENGINES: dict[str, type[Translator]] = {"torch": TorchTranslator, "ctranslate2": CTranslate2Translator}
_CT2_COMPUTE = {"auto": "default", "float32": "float32", "bf16": "bfloat16"}


def load_model(
    model_path: str | Path, device: torch.device, overrides: list[str] = ()
) -> tuple[Transformer, Tokenizer, Config]:
    """Rebuild model, tokenizer and config from a checkpoint (its run directory holds the tokenizer),
    or convert a MarianMT directory.

    ``overrides`` (``decode.key=value``) change the stored decoding settings for this use only.
    """
    if is_marian_dir(model_path):
        model, tokenizer, cfg = import_marian(model_path, overrides)
        return model.to(device), tokenizer, cfg
    path = resolve_checkpoint(model_path)
    state = load_checkpoint(path)
    for text in overrides:
        if parse_override(text)[0][0] != "decode":
            raise UserError(
                f"--set {text!r}: a trained model takes only decode.* settings, e.g. decode.length_penalty=0.6"
            )
    cfg = config_from_dict(state["config"], f"{path} (stored config{' with --set' if overrides else ''})", overrides)
    tokenizer = Tokenizer.load(path.parent)
    model = Transformer(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError:
        raise UserError(
            f"{path} does not match the tokenizer in {path.parent}; "
            "the checkpoint and its run directory must come from the same training run"
        ) from None
    return model.to(device).eval(), tokenizer, cfg


def load_models(
    model_paths: list[str | Path], device: torch.device, overrides: list[str] = ()
) -> tuple[Transformer | Ensemble, Tokenizer, Config]:
    """One model, or an ``Ensemble`` of several that share one tokenizer; the first model's config
    (its decoding settings) applies."""
    loaded = [load_model(path, device, overrides) for path in model_paths]
    model, tokenizer, cfg = loaded[0]
    if len(loaded) == 1:
        return model, tokenizer, cfg
    for path, (_, other, _) in zip(model_paths[1:], loaded[1:], strict=True):
        if other.serialized() != tokenizer.serialized():
            raise UserError(
                f"--model {path}: its tokenizer differs from that of --model {model_paths[0]}; "
                "an ensemble needs models trained with the same SentencePiece model"
            )
    return Ensemble([m for m, _, _ in loaded]).eval(), tokenizer, cfg


def require_model(model_path: str | Path) -> None:
    """A one-line error ("train first") unless ``model_path`` is a checkpoint, run directory or MarianMT directory."""
    if not is_marian_dir(model_path):
        resolve_checkpoint(model_path)


def model_step(model_path: str | Path) -> int | None:
    """The training step of a checkpoint (None for a MarianMT directory, which does not record one)."""
    return None if is_marian_dir(model_path) else load_checkpoint(resolve_checkpoint(model_path)).get("step")


def engine_class(engine: str) -> type[Translator]:
    """The translator class of an engine's name (its ``capabilities`` say what it can do before loading)."""
    if engine not in ENGINES:
        raise UserError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    return ENGINES[engine]


def engine_device(engine: str, name: str) -> torch.device:
    """The device an engine runs on for a ``--device`` name: CTranslate2 runs on the CPU here, so ``auto``
    means cpu for it."""
    return resolve_device("cpu" if engine == "ctranslate2" and name == "auto" else name)


def load_translator(
    model_paths: Sequence[str | Path],
    device: torch.device,
    overrides: Sequence[str] = (),
    precision: str = "auto",
    engine: str = "torch",
    threads: int = 0,
) -> Translator:
    """A ready ``Translator`` for ``model_paths`` (several: an ensemble; ``overrides``: ``decode.key=value``),
    with the CPU threads of ``seq2seq.decode.threads.decode_threads(threads)``."""
    if precision not in DECODE_PRECISIONS:
        raise UserError(f"--precision {precision!r}: choose one of {', '.join(DECODE_PRECISIONS)}")
    engine_class(engine).require(ensembles=len(model_paths) > 1)
    plan = decode_threads(threads)
    if engine == "ctranslate2":
        if device.type != "cpu":
            raise UserError("--engine ctranslate2 runs on the CPU here; use --device cpu")
        return CTranslate2Translator(
            model_paths[0], list(overrides), _CT2_COMPUTE[precision], threads=plan.intra, workers=plan.workers
        )
    model, tokenizer, cfg = load_models(list(model_paths), device, list(overrides))
    return TorchTranslator(
        model,
        tokenizer,
        cfg.decode,
        device,
        decode_precision(precision, device),
        normalize_source=source_normalizer(cfg),
        normalize_target=target_normalizer(cfg),
        config=cfg,
        threads=plan.intra if device.type == "cpu" else 0,
        workers=plan.workers if device.type == "cpu" else 1,
    )
