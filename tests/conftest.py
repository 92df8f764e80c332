"""Shared test helpers: a tiny seeded Transformer, built on demand; the toy corpus and file helpers."""

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from seq2seq.config import ModelConfig
from seq2seq.corpus import normalize, read_pair_files
from seq2seq.model import Transformer

# Special ids used throughout the tests.
PAD, UNK, START, END = 0, 1, 2, 3
VOCAB = 40

# Tiny tensors gain nothing from intra-op threads, and on a shared 2-core machine
# OpenMP threads spin-waiting against another busy process slow tests ~20x.
torch.set_num_threads(1)


def build_tiny_model(seed: int = 0, src_vocab: int = VOCAB, tgt_vocab: int = VOCAB, **overrides) -> Transformer:
    """A 2+2-layer, d_model=32 Transformer in eval mode, initialised from ``seed``.

    ``overrides`` replace ModelConfig fields (e.g. ``norm="pre"``, ``attention="explicit"``).
    """
    settings = {"d_model": 32, "heads": 4, "ffn_dim": 64, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0}
    settings.update(overrides)
    torch.manual_seed(seed)
    return Transformer(ModelConfig(**settings), src_vocab=src_vocab, tgt_vocab=tgt_vocab, pad_id=PAD).eval()


def random_batch(
    seed: int = 0, src_lengths=(5, 3, 7), tgt_lengths=(4, 6, 2), vocab: int = VOCAB
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (src, tgt_in) with right padding; sources end with <end>, targets start with <start>."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.full((len(src_lengths), max(src_lengths)), PAD)
    tgt = torch.full((len(tgt_lengths), max(tgt_lengths)), PAD)
    for row, (s, t) in enumerate(zip(src_lengths, tgt_lengths, strict=True)):
        src[row, : s - 1] = torch.randint(4, vocab, (s - 1,), generator=gen)
        src[row, s - 1] = END
        tgt[row, 0] = START
        tgt[row, 1:t] = torch.randint(4, vocab, (t - 1,), generator=gen)
    return src, tgt


@pytest.fixture
def tiny_model() -> Callable[..., Transformer]:
    """Factory fixture: ``tiny_model(**overrides)`` -> a seeded tiny Transformer in eval mode."""
    return build_tiny_model


# --- Data pipeline helpers -------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOY_SRC, TOY_TGT = FIXTURES / "toy.zh", FIXTURES / "toy.en"  # 2000 line-aligned Tatoeba pairs


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write ``lines`` as a UTF-8 file, one per line; returns ``path``."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def toy_pairs() -> tuple[list[str], list[str]]:
    """The toy fixture corpus as (sources, targets), normalized."""
    src, tgt = read_pair_files(str(TOY_SRC), str(TOY_TGT))
    return [normalize(s) for s in src], [normalize(t) for t in tgt]
