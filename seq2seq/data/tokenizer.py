"""SentencePiece subwords: training on the training split, loading, encoding.

SentencePiece is trained to give the special tokens the ids of ``seq2seq.special``
(<pad> 0, <unk> 1, <start> 2, <end> 3). The tokenizer files live in the run directory next to the
checkpoints (``spm.model`` for a joint vocabulary, ``spm.src.model`` and
``spm.tgt.model`` for separate ones), so a run directory alone can translate.

A third layout comes from MarianMT (``seq2seq.interop.marian``): one SentencePiece model per side
that only segments, and one shared vocabulary (``spm.vocab.json``, the pieces in id order, the
special ids first) that gives the pieces of both sides their ids; a piece outside it is <unk>,
as ``MarianTokenizer`` has it.
"""

import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from seq2seq.atomic import write_text_atomically
from seq2seq.device import available_cpus
from seq2seq.errors import UserError
from seq2seq.special import BOS, EOS, PAD, UNK

JOINT, SRC, TGT, VOCABULARY = "spm.model", "spm.src.model", "spm.tgt.model", "spm.vocab.json"
FILES = (JOINT, SRC, TGT, VOCABULARY)  # every file a tokenizer may be saved as


@dataclass(frozen=True)
class PieceOptions:
    """What a vocabulary holds beyond what SentencePiece learns: ``symbols`` that are always one piece each
    (the placeholders of ``seq2seq.text.placeholders``), and with ``byte_fallback`` a piece for each of the
    256 bytes, so a character outside the vocabulary is spelt in UTF-8 bytes instead of becoming <unk>."""

    symbols: tuple[str, ...] = ()
    byte_fallback: bool = False


def train_sentencepiece(
    sentences: Iterable[str],
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    options: PieceOptions = PieceOptions(),
) -> bytes:
    """Train one SentencePiece model; returns its serialized bytes.

    ``character_coverage`` < 1 lets the rarest Chinese characters fall to <unk> (or to bytes, with
    ``options.byte_fallback``) instead of each taking a vocabulary slot. Normalization is ours (see
    ``seq2seq.data.corpus.normalize``), so SentencePiece's own is switched off and
    decode(encode(x)) gives back exactly x.
    """
    model = io.BytesIO()
    try:
        _train(sentences, model, vocab_size, model_type, character_coverage, options)
    except RuntimeError as err:
        detail = str(err).strip().splitlines()[-1].split("] ")[-1]
        raise UserError(f"data.vocab_size={vocab_size}: SentencePiece cannot train ({detail})") from None
    return model.getvalue()


def _train(
    sentences: Iterable[str],
    model: io.BytesIO,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    options: PieceOptions,
) -> None:
    extra = {"user_defined_symbols": list(options.symbols)} if options.symbols else {}
    spm.SentencePieceTrainer.train(
        **extra,
        byte_fallback=options.byte_fallback,
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


def _encode(processor: spm.SentencePieceProcessor, text: str, alpha: float, out_type: type = int) -> list:
    """Best segmentation, or with ``alpha`` > 0 a sampled one: for a unigram model drawn from all
    segmentations with probability ~ P(segmentation)^alpha (small alpha: more varied), for BPE by
    dropping each merge with probability alpha (BPE-dropout). The random generator is SentencePiece's
    own; ``seed_sampling`` makes it repeatable. ``out_type`` int gives ids, str pieces."""
    if alpha <= 0:
        return processor.encode(text, out_type=out_type)
    return processor.encode(text, out_type=out_type, enable_sampling=True, alpha=alpha, nbest_size=-1)


def seed_sampling(seed: int) -> None:
    """Seed SentencePiece's sampling generator (process-wide)."""
    spm.set_random_generator_seed(seed)


class Tokenizer:
    """Source and target SentencePiece processors (the same one for a joint vocabulary), and optionally
    one shared ``vocabulary`` (pieces in id order) that gives both sides' pieces their ids."""

    def __init__(
        self, src_model: bytes, tgt_model: bytes | None = None, vocabulary: Sequence[str] | None = None
    ) -> None:
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = self.src if tgt_model is None else spm.SentencePieceProcessor(model_proto=tgt_model)
        self.joint = tgt_model is None
        self.vocabulary = None if vocabulary is None else list(vocabulary)
        self._ids = None if vocabulary is None else {piece: i for i, piece in enumerate(self.vocabulary)}

    @classmethod
    def train(
        cls,
        src: list[str],
        tgt: list[str],
        vocab_size: int,
        joint: bool,
        model_type: str,
        character_coverage: float,
        options: PieceOptions = PieceOptions(),
    ) -> "Tokenizer":
        """Learn a joint vocabulary from both sides, or one per side."""
        if joint:
            return cls(train_sentencepiece(src + tgt, vocab_size, model_type, character_coverage, options))
        return cls(
            train_sentencepiece(src, vocab_size, model_type, character_coverage, options),
            train_sentencepiece(tgt, vocab_size, model_type, character_coverage, options),
        )

    def save(self, directory: Path) -> None:
        """Write the model file(s) into ``directory``."""
        if self.joint:
            (directory / JOINT).write_bytes(self.src.serialized_model_proto())
        else:
            (directory / SRC).write_bytes(self.src.serialized_model_proto())
            (directory / TGT).write_bytes(self.tgt.serialized_model_proto())
        if self.vocabulary is not None:
            write_text_atomically(directory / VOCABULARY, json.dumps(self.vocabulary, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, directory: Path) -> "Tokenizer":
        """Load from a run (or cache) directory."""
        vocabulary = _read_vocabulary(directory / VOCABULARY) if (directory / VOCABULARY).is_file() else None
        if (directory / JOINT).is_file():
            return cls((directory / JOINT).read_bytes(), vocabulary=vocabulary)
        if (directory / SRC).is_file() and (directory / TGT).is_file():
            return cls((directory / SRC).read_bytes(), (directory / TGT).read_bytes(), vocabulary)
        raise UserError(f"{directory}: no tokenizer ({JOINT} or {SRC}/{TGT}); train a model there first")

    def serialized(self) -> bytes:
        """Everything that decides the ids, as bytes (to compare two tokenizers or key a cache)."""
        vocabulary = b"" if self.vocabulary is None else json.dumps(self.vocabulary).encode()
        return self.src.serialized_model_proto() + self.tgt.serialized_model_proto() + vocabulary

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size() if self.vocabulary is None else len(self.vocabulary)

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size() if self.vocabulary is None else len(self.vocabulary)

    def has_piece(self, piece: str) -> bool:
        """Whether both sides hold ``piece`` as one piece of their own (a placeholder, say)."""
        if self._ids is not None:
            return piece in self._ids
        return all(side.piece_to_id(piece) != UNK for side in (self.src, self.tgt))

    def src_vocabulary(self) -> list[str]:
        """Every source piece in id order."""
        return self.vocabulary or [self.src.id_to_piece(i) for i in range(self.src.get_piece_size())]

    def tgt_vocabulary(self) -> list[str]:
        """Every target piece in id order."""
        return self.vocabulary or [self.tgt.id_to_piece(i) for i in range(self.tgt.get_piece_size())]

    def _ids_of(self, pieces: list[str]) -> list[int]:
        return [self._ids.get(piece, UNK) for piece in pieces]

    def _side(self, processor: spm.SentencePieceProcessor, text: str, alpha: float) -> list[int]:
        if self._ids is None:
            return _encode(processor, text, alpha)
        return self._ids_of(_encode(processor, text, alpha, str))

    def _sides(self, processor: spm.SentencePieceProcessor, texts: list[str]) -> list[list[int]]:
        if self._ids is None:
            return processor.encode(texts, num_threads=available_cpus())
        return [self._ids_of(pieces) for pieces in processor.encode(texts, out_type=str, num_threads=available_cpus())]

    def encode_src(self, text: str, alpha: float = 0.0) -> list[int]:
        """Source ids ``x… <end>``; ``alpha`` > 0 samples a segmentation (see ``_encode``)."""
        return self._side(self.src, text, alpha) + [EOS]

    def encode_tgt(self, text: str, alpha: float = 0.0) -> list[int]:
        """Target ids ``y…`` without <start>/<end> (the batcher adds them)."""
        return self._side(self.tgt, text, alpha)

    def encode_src_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode_src`` of many sentences at once, best segmentation, on one SentencePiece thread per core."""
        return [ids + [EOS] for ids in self._sides(self.src, texts)]

    def encode_tgt_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode_tgt`` of many sentences at once, best segmentation, on one SentencePiece thread per core."""
        return self._sides(self.tgt, texts)

    def decode_tgt(self, ids: list[int]) -> str:
        """Target ids (special ids dropped) -> detokenized text."""
        kept = [i for i in ids if i > EOS]
        if self.vocabulary is None:
            return self.tgt.decode(kept)
        # SentencePiece passes a piece it does not know through with its "▁" (word boundary) unchanged;
        # MarianTokenizer turns those into spaces afterwards, and so do we.
        return self.tgt.decode_pieces([self.vocabulary[i] for i in kept]).replace("\u2581", " ").strip()

    def src_pieces(self, ids: list[int]) -> list[str]:
        """Readable source pieces (for attention plots)."""
        if self.vocabulary is not None:
            return [self.vocabulary[i] for i in ids]
        return [self.src.id_to_piece(i) for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        """Readable target pieces (for attention plots)."""
        if self.vocabulary is not None:
            return [self.vocabulary[i] for i in ids]
        return [self.tgt.id_to_piece(i) for i in ids]


def _read_vocabulary(path: Path) -> list[str]:
    """A saved shared vocabulary: a JSON list of pieces; anything else is a one-line error."""
    try:
        vocabulary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: not a readable vocabulary ({err}); restore it from the model it came with") from None
    if not isinstance(vocabulary, list) or not all(isinstance(p, str) for p in vocabulary) or len(vocabulary) <= EOS:
        raise UserError(f"{path}: expected a JSON list of pieces, the special tokens first")
    return vocabulary
