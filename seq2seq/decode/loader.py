"""Loading a model for decoding: which engine runs it and in which precision.

``load_translator`` is the one entry point the verbs (translate, evaluate, serve) call:

* engine ``torch``: our own decoder (``seq2seq.search``) on a run directory or checkpoint;
  precision ``float32`` or ``bf16`` (a bf16 copy of the weights; the search's softmax and
  scores stay float32). ``auto`` is bf16 where the hardware computes it natively (a CUDA GPU
  with bf16, a CPU with AVX-512 BF16 or AMX: ``seq2seq.precision``), float32 elsewhere.
* engine ``ctranslate2``: a directory written by ``seq2seq export --to ctranslate2``
  (``seq2seq.ct2``); precision ``auto`` runs the exported quantization, ``float32``/``bf16``
  ask CTranslate2 to compute in that type.
"""

from pathlib import Path

import torch

from seq2seq.errors import UserError
from seq2seq.precision import use_bf16
from seq2seq.translate import Translator, load_model, source_normalizer, target_normalizer

ENGINES = ("torch", "ctranslate2")
PRECISIONS = ("auto", "float32", "bf16")
_CT2_COMPUTE = {"auto": "default", "float32": "float32", "bf16": "bfloat16"}


def decode_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` where ``device`` computes bf16 natively, else ``float32``; others unchanged."""
    if precision not in PRECISIONS:
        raise UserError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if use_bf16("auto", device) else "float32"
    return precision


def load_translator(
    model_path: str | Path,
    device: torch.device,
    overrides: list[str] = (),
    precision: str = "auto",
    engine: str = "torch",
) -> Translator:
    """A ready ``Translator`` for ``model_path`` (``overrides``: ``decode.key=value`` settings)."""
    if precision not in PRECISIONS:
        raise UserError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if engine == "ctranslate2":
        from seq2seq.ct2 import CTranslate2Translator

        if device.type != "cpu":
            raise UserError("--engine ctranslate2 runs on the CPU here; use --device cpu")
        return CTranslate2Translator(model_path, overrides, _CT2_COMPUTE[precision])
    if engine != "torch":
        raise UserError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    model, tokenizer, cfg = load_model(model_path, device, overrides)
    return Translator(
        model,
        tokenizer,
        cfg.decode,
        device,
        decode_precision(precision, device),
        normalize_source=source_normalizer(cfg),
        normalize_target=target_normalizer(cfg),
    )
