"""Translating text with a trained run: load, normalize, batch by length, search, detokenize."""

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from seq2seq.attention_map import AttentionWeights, attention_weights
from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import DEFAULT_CONFIG, Config, DecodeConfig, config_from_dict, parse_override
from seq2seq.corpus import normalize, normalizer
from seq2seq.ensemble import Ensemble
from seq2seq.errors import UserError
from seq2seq.forced import ForcedScore, score_ids
from seq2seq.glossary import Glossary
from seq2seq.model import Transformer
from seq2seq.search import Hypothesis, Sampler, search_ids
from seq2seq.tokenizer import EOS, PAD, Tokenizer


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


def load_model(
    model_path: str | Path, device: torch.device, overrides: list[str] = ()
) -> tuple[Transformer, Tokenizer, Config]:
    """Rebuild model, tokenizer and config from a checkpoint (its run directory holds the tokenizer).

    ``overrides`` (``decode.key=value``) change the stored decoding settings for this use only.
    """
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
        if _tokenizer_bytes(other) != _tokenizer_bytes(tokenizer):
            raise UserError(
                f"--model {path}: its tokenizer differs from that of --model {model_paths[0]}; "
                "an ensemble needs models trained with the same SentencePiece model"
            )
    return Ensemble([m for m, _, _ in loaded]).eval(), tokenizer, cfg


def _tokenizer_bytes(tokenizer: Tokenizer) -> tuple[bytes, bytes]:
    return tokenizer.src.serialized_model_proto(), tokenizer.tgt.serialized_model_proto()


@dataclass
class Output:
    """One translation of a sentence."""

    text: str
    score: float
    tokens: list[int]  # target ids, without <start>/<end>
    pieces: list[str]  # the same as SentencePiece pieces


@dataclass
class Translation:
    """One input sentence and its n-best translations (best first)."""

    source: str
    outputs: list[Output]
    constraints: list[str] | None = None  # the glossary's target terms for this sentence

    @property
    def best(self) -> Output:
        return self.outputs[0]


@dataclass
class SentenceAttention:
    """A sentence pair's attention weights with the pieces that label their rows and columns."""

    weights: AttentionWeights
    source_pieces: list[str]  # S: x… <end>
    target_pieces: list[str]  # T: y… <end>, what each decoder position (<start> y…) predicted


def source_normalizer(cfg: Config) -> Callable[[str], str]:
    """How a model's input is normalized: as its training sources were (``data.src_script`` included)."""
    return normalizer(cfg.data.src_script, "data.src_script")


def target_normalizer(cfg: Config) -> Callable[[str], str]:
    """How text in the target language is normalized to compare with outputs (``data.tgt_script`` included)."""
    return normalizer(cfg.data.tgt_script, "data.tgt_script")


class Translator:
    """A loaded model with its tokenizer, decoding settings and source normalization.

    ``precision`` is the decoding precision (``float32`` or ``bf16``, see ``seq2seq.inference``):
    ``bf16`` decodes with a bf16 copy of the model's weights. Subclasses running another engine override ``search``
    (``model`` is then None and ``max_positions`` says how long an input may be). ``normalize_source`` and
    ``normalize_target`` are ``source_normalizer(cfg)`` and ``target_normalizer(cfg)`` of the model's config: input
    is read as in training, and references are put in the script the model writes.
    """

    def __init__(
        self,
        model: Transformer | Ensemble | None,
        tokenizer: Tokenizer,
        decode: DecodeConfig,
        device: torch.device,
        precision: str = "float32",
        max_positions: int | None = None,
        normalize_source: Callable[[str], str] = normalize,
        normalize_target: Callable[[str], str] = normalize,
    ) -> None:
        self.model, self.tokenizer, self.decode, self.device = model, tokenizer, decode, device
        self.precision = precision
        self.max_positions = max_positions if model is None else model.cfg.max_positions
        self.normalize_source, self.normalize_target = normalize_source, normalize_target
        # A bf16 copy of the weights rather than autocast: autocast would cast every weight again at
        # every decoding step.
        bf16 = model is not None and precision == "bf16"
        self._search_model = copy.deepcopy(model).to(torch.bfloat16) if bf16 else model

    def encode(self, text: str) -> list[int]:
        """Normalized source ids ``x… <end>``, truncated (with a warning) to what the model can read."""
        ids = self.tokenizer.encode_src(self.normalize_source(text))
        limit = self.max_positions
        if len(ids) > limit:
            print(f"warning: input of {len(ids)} tokens truncated to {limit}: {text[:40]}…", file=sys.stderr)
            ids = ids[: limit - 1] + [EOS]
        return ids

    def search(self, sources: list[list[int]], beam: int, nbest: int, **options) -> list[list[Hypothesis]]:
        """Hypotheses for id sequences (input order), best first; ``options``: ``search_ids``'s sampler,
        prefixes and constraints."""
        return search_ids(self._search_model, sources, self.decode, self.device, beam, nbest, **options)

    def attention(self, source: str, tokens: list[int]) -> "SentenceAttention":
        """All attention weights for ``source`` and its translation ``tokens`` (ids without <start>/<end>)."""
        if self.model is None:
            raise UserError("attention weights need our own decoder (--engine torch)")
        if isinstance(self.model, Ensemble):
            raise UserError("attention weights show one model's attention: give one --model")
        src = self.encode(source)
        return SentenceAttention(
            attention_weights(self.model, src, tokens),
            [*self.tokenizer.src_pieces(src[:-1]), "<end>"],
            [*self.tokenizer.tgt_pieces(tokens), "<end>"],
        )

    def target_ids(self, text: str) -> list[int]:
        """Normalized target ids (a prefix, a glossary term, a reference), without <start>/<end>."""
        return self.tokenizer.encode_tgt(self.normalize_target(text))

    def translate(
        self,
        sentences: list[str],
        beam: int | None = None,
        nbest: int = 1,
        *,
        sampler: Sampler | None = None,
        prefixes: list[str] | None = None,
        glossary: Glossary | None = None,
    ) -> list[Translation]:
        """Translate sentences (order kept); empty lines give empty translations.

        ``sampler`` draws ``nbest`` samples per sentence; ``prefixes`` (one per sentence, "" for
        none) force the start of each translation; ``glossary`` terms found in a sentence must
        appear in its translation (constrained beam search).
        """
        beam = self.decode.beam if beam is None else beam
        todo = [i for i, s in enumerate(sentences) if normalize(s)]
        terms = [glossary.targets_for(sentences[i]) for i in todo] if glossary else None
        options = {}
        if sampler is not None:
            options["sampler"] = sampler
        if prefixes:
            options["prefixes"] = [self.target_ids(prefixes[i]) for i in todo]
        if terms:
            options["constraints"] = [[self.target_ids(t) for t in sentence_terms] for sentence_terms in terms]
        if options and self.model is None:
            raise UserError("sampling, prefixes and glossaries need our own decoder (--engine torch)")
        found = self.search([self.encode(sentences[i]) for i in todo], beam, max(nbest, 1), **options)
        results = [Translation(s, [Output("", 0.0, [], [])]) for s in sentences]
        tok = self.tokenizer
        for k, (i, hyps) in enumerate(zip(todo, found, strict=True)):
            outputs = [Output(tok.decode_tgt(h.tokens), h.score, h.tokens, tok.tgt_pieces(h.tokens)) for h in hyps]
            results[i] = Translation(sentences[i], outputs, terms[k] if terms else None)
        return results

    def score(self, sentences: list[str], references: list[str]) -> list[ForcedScore]:
        """Forced decoding: each reference's log-probability given its sentence (``seq2seq.forced``)."""
        if self.model is None:
            raise UserError("scoring needs our own decoder (--engine torch)")
        return score_ids(
            self._search_model,
            [self.encode(s) for s in sentences],
            [self.target_ids(r) for r in references],
            self.device,
            self.decode.batch_sentences,
            self.decode.length_penalty,
        )
