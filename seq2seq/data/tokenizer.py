"""SentencePiece subwords: training on the training split, loading, encoding.

SentencePiece is trained to give the special tokens the ids of ``seq2seq.special``
(<pad> 0, <unk> 1, <start> 2, <end> 3). The tokenizer files live in the run directory next to the
checkpoints (``spm.model`` for a joint vocabulary, ``spm.src.model`` and
``spm.tgt.model`` for separate ones), so a run directory alone can translate.
"""

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from seq2seq.device import available_cpus
from seq2seq.errors import UserError
from seq2seq.special import BOS, EOS, PAD, UNK

JOINT, SRC, TGT = "spm.model", "spm.src.model", "spm.tgt.model"


def train_sentencepiece(sentences: Iterable[str], vocab_size: int, model_type: str, character_coverage: float) -> bytes:
    """Train one SentencePiece model; returns its serialized bytes.

    ``character_coverage`` < 1 lets the rarest Chinese characters fall to <unk>
    instead of each taking a vocabulary slot. Normalization is ours (see
    ``seq2seq.data.corpus.normalize``), so SentencePiece's own is switched off and
    decode(encode(x)) gives back exactly x.
    """
    model = io.BytesIO()
    try:
        _train(sentences, model, vocab_size, model_type, character_coverage)
    except RuntimeError as err:
        detail = str(err).strip().splitlines()[-1].split("] ")[-1]
        raise UserError(f"data.vocab_size={vocab_size}: SentencePiece cannot train ({detail})") from None
    return model.getvalue()


def _train(
    sentences: Iterable[str], model: io.BytesIO, vocab_size: int, model_type: str, character_coverage: float
) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="<start>",
        eos_piece="<end>",
        normalization_rule_name="identity",
        hard_vocab_limit=False,
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
    )


def _encode(processor: spm.SentencePieceProcessor, text: str, alpha: float) -> list[int]:
    """Best segmentation, or with ``alpha`` > 0 a sampled one: for a unigram model drawn from all
    segmentations with probability ~ P(segmentation)^alpha (small alpha: more varied), for BPE by
    dropping each merge with probability alpha (BPE-dropout). The random generator is SentencePiece's
    own; ``seed_sampling`` makes it repeatable."""
    if alpha <= 0:
        return processor.encode(text)
    return processor.encode(text, enable_sampling=True, alpha=alpha, nbest_size=-1)


def seed_sampling(seed: int) -> None:
    """Seed SentencePiece's sampling generator (process-wide)."""
    spm.set_random_generator_seed(seed)


class Tokenizer:
    """Source and target SentencePiece processors (the same one for a joint vocabulary)."""

    def __init__(self, src_model: bytes, tgt_model: bytes | None = None) -> None:
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = self.src if tgt_model is None else spm.SentencePieceProcessor(model_proto=tgt_model)
        self.joint = tgt_model is None

    @classmethod
    def train(
        cls, src: list[str], tgt: list[str], vocab_size: int, joint: bool, model_type: str, character_coverage: float
    ) -> "Tokenizer":
        """Learn a joint vocabulary from both sides, or one per side."""
        if joint:
            return cls(train_sentencepiece(src + tgt, vocab_size, model_type, character_coverage))
        return cls(
            train_sentencepiece(src, vocab_size, model_type, character_coverage),
            train_sentencepiece(tgt, vocab_size, model_type, character_coverage),
        )

    def save(self, directory: Path) -> None:
        """Write the model file(s) into ``directory``."""
        if self.joint:
            (directory / JOINT).write_bytes(self.src.serialized_model_proto())
        else:
            (directory / SRC).write_bytes(self.src.serialized_model_proto())
            (directory / TGT).write_bytes(self.tgt.serialized_model_proto())

    @classmethod
    def load(cls, directory: Path) -> "Tokenizer":
        """Load from a run (or cache) directory."""
        if (directory / JOINT).is_file():
            return cls((directory / JOINT).read_bytes())
        if (directory / SRC).is_file() and (directory / TGT).is_file():
            return cls((directory / SRC).read_bytes(), (directory / TGT).read_bytes())
        raise UserError(f"{directory}: no tokenizer ({JOINT} or {SRC}/{TGT}); train a model there first")

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, text: str, alpha: float = 0.0) -> list[int]:
        """Source ids ``x… <end>``; ``alpha`` > 0 samples a segmentation (see ``_encode``)."""
        return _encode(self.src, text, alpha) + [EOS]

    def encode_tgt(self, text: str, alpha: float = 0.0) -> list[int]:
        """Target ids ``y…`` without <start>/<end> (the batcher adds them)."""
        return _encode(self.tgt, text, alpha)

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode_src`` of many sentences at once, best segmentation, on one SentencePiece thread per core."""
        return [ids + [EOS] for ids in self.src.encode(texts, num_threads=available_cpus())]

    def encode_tgt_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode_tgt`` of many sentences at once, best segmentation, on one SentencePiece thread per core."""
        return self.tgt.encode(texts, num_threads=available_cpus())

    def decode_tgt(self, ids: list[int]) -> str:
        """Target ids (special ids dropped) -> detokenized text."""
        return self.tgt.decode([i for i in ids if i > EOS])

    def src_pieces(self, ids: list[int]) -> list[str]:
        """Readable source pieces (for attention plots)."""
        return [self.src.id_to_piece(i) for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        """Readable target pieces (for attention plots)."""
        return [self.tgt.id_to_piece(i) for i in ids]
