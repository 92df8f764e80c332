"""Hugging Face ``transformers`` export: a trained model as a MarianMT model directory.

``export_transformers`` writes what ``MarianMTModel.from_pretrained(DIR)``,
``MarianTokenizer.from_pretrained(DIR)`` and (transformers 4; version 5 removed the task)
``pipeline("translation", model=DIR)`` load:
config.json, model.safetensors, generation_config.json and the tokenizer files (source.spm,
target.spm, vocab.json, tokenizer_config.json). The files are written by ``transformers`` itself
(``save_pretrained``), so they are in the format the installed version reads; the weights and
settings come from ``seq2seq.interop.marian``, which owns the correspondence (and its reasons).

Our ids stay as they are (MarianMT takes its special ids from the config, so <pad> 0, <unk> 1,
<start> 2, <end> 3 need no permutation); the SentencePiece model is both source.spm and
target.spm, and vocab.json maps its pieces to their ids. The generation config asks for plain
search as ours does it: no forced <end> at the length limit, no banned tokens, the beam of
``decode.beam``, at most ``model.max_positions`` tokens. What MarianMT cannot hold is refused in
one line: pre-norm layers, heads wider or narrower than D/H, and anything but one vocabulary
shared by source, target and output (``model.tie_embeddings: all``).

Two things the directory does not carry: our text normalization (NFKC, the Chinese script of
``data.src_script``) — ``pipeline()`` reads text as given — and our length limit ``a·len(src) + b``
(``generate`` takes one ``max_length``).
"""

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import Config
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.loader import load_model
from seq2seq.errors import UserError
from seq2seq.interop.marian import marian_config, quiet, require_transformers, to_marian_state
from seq2seq.special import EOS, PAD, UNK

SENTENCEPIECE_FILES = ("source.spm", "target.spm")


def _exportable(cfg: Config, tokenizer: Tokenizer, where: str) -> None:
    """A one-line error for a model that MarianMT cannot express."""
    m = cfg.model
    if m.norm != "post":
        raise UserError(f"{where}: model.norm={m.norm!r}; MarianMT has post-norm layers only")
    if m.resolved_head_dim * m.heads != m.d_model:
        raise UserError(f"{where}: model.head_dim={m.head_dim}; MarianMT splits d_model across its heads")
    if m.tie_embeddings != "all" or not (tokenizer.joint or tokenizer.vocabulary is not None):
        raise UserError(
            f"{where}: model.tie_embeddings={m.tie_embeddings!r}; MarianMT export needs one vocabulary shared by "
            "source, target and output (data.joint_vocab: true, model.tie_embeddings: all)"
        )


def export_transformers(model_path: str | Path, out: str | Path) -> Path:
    """Write the MarianMT directory ``out`` for a run directory, checkpoint or MarianMT directory; returns ``out``.

    The directory appears whole or not at all: it is written beside ``out`` and renamed into place
    (an existing ``out`` is replaced).
    """
    transformers = require_transformers()
    model, tokenizer, cfg = load_model(model_path, torch.device("cpu"))
    _exportable(cfg, tokenizer, str(model_path))
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    vocabulary = tokenizer.src_vocabulary()
    settings = marian_config(cfg.model, len(vocabulary))
    with quiet(transformers):
        marian = transformers.MarianMTModel(transformers.MarianConfig(**settings, architectures=["MarianMTModel"]))
        missing, unexpected = marian.load_state_dict(to_marian_state(model.state_dict(), cfg.model), strict=False)
    if unexpected or any("embed_positions" not in name for name in missing):  # MarianMT computes its positions
        raise RuntimeError(f"MarianMT weights do not line up: missing {missing}, unexpected {unexpected}")
    marian.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=cfg.model.decoder_start_id,
        bos_token_id=settings["bos_token_id"],
        eos_token_id=EOS,
        pad_token_id=PAD,
        forced_eos_token_id=None,
        num_beams=cfg.decode.beam,
        max_length=cfg.model.max_positions,
    )

    tmp = _fresh_dir(out.parent / f".{out.name}.{os.getpid()}.tmp")
    try:
        with quiet(transformers):
            _write(marian, tokenizer, vocabulary, cfg.model.max_positions, transformers, tmp)
        if out.exists():  # moved aside, not deleted, until the new directory is in place
            old = _fresh_dir(out.parent / f".{out.name}.{os.getpid()}.old.tmp")
            os.replace(out, old / out.name)
            os.replace(tmp, out)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(
            f"cannot write {out} ({err.strerror or err}); check the directory's space and permissions"
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write(
    marian: Any, tokenizer: Tokenizer, vocabulary: list[str], max_length: int, transformers: Any, to: Path
) -> None:
    """The model's and MarianTokenizer's files into directory ``to``."""
    marian.save_pretrained(str(to))
    spm_dir = _fresh_dir(to / "spm")  # MarianTokenizer reads its files from paths
    for name, processor in zip(SENTENCEPIECE_FILES, (tokenizer.src, tokenizer.tgt), strict=True):
        (spm_dir / name).write_bytes(processor.serialized_model_proto())
    vocab_json = json.dumps({piece: i for i, piece in enumerate(vocabulary)}, ensure_ascii=False)
    (spm_dir / "vocab.json").write_text(vocab_json, encoding="utf-8")
    marian_tokenizer = transformers.MarianTokenizer(
        str(spm_dir / "source.spm"),
        str(spm_dir / "target.spm"),
        str(spm_dir / "vocab.json"),
        unk_token=vocabulary[UNK],
        eos_token=vocabulary[EOS],
        pad_token=vocabulary[PAD],
        model_max_length=max_length,
    )
    marian_tokenizer.save_pretrained(str(to))
    shutil.rmtree(spm_dir)


def _fresh_dir(path: Path) -> Path:
    """An empty directory at ``path`` (a leftover of an interrupted export removed first)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path
