"""The translator interface: text in, translations out, whichever engine searches.

A ``Translator`` owns what every engine shares: source normalization (as the model's training
data was normalized), encoding with the model's SentencePiece model, truncation to what the
model can read, empty lines, and detokenization. An engine subclass implements ``search`` over
id sequences and declares in ``capabilities`` which of the optional features it has (sampling,
forced prefixes, glossary constraints, attention weights, forced scoring, ensembles, beam
traces, the model's own tensors); asking an engine for one it lacks is a one-line error naming the
engine. The engines: our own decoder (``seq2seq.decode.torch_engine``) and CTranslate2
(``seq2seq.decode.ctranslate2``); ``seq2seq.decode.loader`` builds either from a path.
"""

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import torch

from seq2seq.config import Config, DecodeConfig
from seq2seq.data.corpus import normalize, normalizer
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.attention import AttentionWeights
from seq2seq.decode.batched import sentences_per_batch
from seq2seq.decode.forced import ForcedScore
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.sampling import TokenSampler
from seq2seq.decode.search import Hypothesis
from seq2seq.errors import UserError
from seq2seq.special import EOS
from seq2seq.text.placeholders import PLACEHOLDERS
from seq2seq.text.stage import DEFAULTS, SentencePlan, SentenceResult, TextOptions, TextStage, UnitOutput


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do beyond plain greedy and beam search."""

    sampling: bool = False  # draw tokens (``TokenSampler``) instead of searching
    prefixes: bool = False  # force the start of each translation
    constraints: bool = False  # glossary terms that must appear (constrained beam search)
    attention: bool = False  # every layer's and head's attention weights for a sentence pair
    scoring: bool = False  # forced decoding: the log-probability of a given translation
    ensembles: bool = False  # several models decoded as one
    trace: bool = False  # the beams of every step of one sentence's search
    explain: bool = False  # the model's own tensors, for ``seq2seq explain``

    def missing(self, **wanted: bool) -> list[str]:
        """The names among ``wanted`` (name=True) that this engine lacks."""
        known = {f.name for f in fields(self)}
        return [name for name, asked in wanted.items() if asked and name in known and not getattr(self, name)]


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
    sentences: list[SentenceResult] = field(default_factory=list)  # the text stage's view, sentence by sentence

    @property
    def warnings(self) -> list[str]:
        """What a user should check in this translation (a dropped number, a repetition, a passed-through line)."""
        return [w for s in self.sentences for w in s.warnings]

    @property
    def confidence(self) -> float | None:
        """The mean log-probability per token of the translated sentences; None when none was translated."""
        scores = [s.confidence for s in self.sentences if s.confidence is not None]
        return sum(scores) / len(scores) if scores else None

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


@dataclass(frozen=True)
class SearchOptions:
    """What a search may be asked for beyond beam and n-best; each needs its capability."""

    sampler: TokenSampler | None = None  # draw tokens instead of searching
    prefixes: list[list[int]] | None = None  # per source, the target ids its output starts with
    constraints: list[list[list[int]]] | None = None  # per source, target phrases its output must contain

    def features(self) -> dict[str, bool]:
        """The capabilities these options need (name -> asked for)."""
        return {
            "sampling": self.sampler is not None,
            "prefixes": bool(self.prefixes),
            "constraints": bool(self.constraints),
        }


PLAIN = SearchOptions()  # plain greedy or beam search, which every engine has


class Translator(ABC):
    """A model behind text: its tokenizer, decoding settings and normalizations, and an engine's ``search``.

    ``normalize_source`` and ``normalize_target`` are ``source_normalizer(cfg)`` and
    ``target_normalizer(cfg)`` of the model's config: input is read as in training, and references
    and glossary terms are put in the script the model writes. ``max_positions`` is the longest
    input the model reads; ``precision`` the one it decodes in (``seq2seq.device.decode_precision``);
    ``config`` the model's whole config when known (its languages, which decide how its output is scored).
    """

    engine = "none"  # the name users give --engine
    capabilities = Capabilities()

    def __init__(
        self,
        tokenizer: Tokenizer,
        decode: DecodeConfig,
        device: torch.device,
        max_positions: int,
        normalize_source: Callable[[str], str] = normalize,
        normalize_target: Callable[[str], str] = normalize,
        precision: str = "float32",
        config: Config | None = None,
    ) -> None:
        self.tokenizer, self.device, self.max_positions = tokenizer, device, max_positions
        self.decode = replace(decode, batch_sentences=sentences_per_batch(decode.batch_sentences, precision, device))
        """The decoding settings, ``batch_sentences`` set for this translator's precision and device."""
        self.normalize_source, self.normalize_target = normalize_source, normalize_target
        self.precision, self.config = precision, config

    @classmethod
    def require(cls, **wanted: bool) -> None:
        """A one-line error naming the engine when it lacks a feature asked for (name=True)."""
        missing = cls.capabilities.missing(**wanted)
        if missing:
            raise UserError(f"the {cls.engine} engine does not support {', '.join(missing)}; use --engine torch")

    @abstractmethod
    def search(
        self, sources: list[list[int]], beam: int, nbest: int, options: SearchOptions = PLAIN
    ) -> list[list[Hypothesis]]:
        """Hypotheses for id sequences (input order), best first; ``options`` as in
        ``seq2seq.decode.batched.search_ids``, for an engine that has their capabilities."""

    def score(self, sentences: list[str], references: list[str]) -> list[ForcedScore]:
        """Forced decoding: each reference's log-probability given its sentence."""
        self.require(scoring=True)
        raise NotImplementedError(f"{type(self).__name__} declares scoring but does not implement score")

    def attention(self, source: str, tokens: list[int]) -> SentenceAttention:
        """All attention weights for ``source`` and its translation ``tokens`` (ids without <start>/<end>)."""
        self.require(attention=True)
        raise NotImplementedError(f"{type(self).__name__} declares attention but does not implement it")

    def encode(self, text: str) -> list[int]:
        """Normalized source ids ``x… <end>``, truncated (with a warning) to what the model can read."""
        ids = self.tokenizer.encode_src(self.normalize_source(text))
        limit = self.max_positions
        if len(ids) > limit:
            print(f"warning: input of {len(ids)} tokens truncated to {limit}: {text[:40]}…", file=sys.stderr)
            ids = ids[: limit - 1] + [EOS]
        return ids

    def target_ids(self, text: str) -> list[int]:
        """Normalized target ids (a prefix, a glossary term, a reference), without <start>/<end>."""
        return self.tokenizer.encode_tgt(self.normalize_target(text))

    def text_stage(self, options: TextOptions) -> TextStage:
        """The text stage for this model (its languages, placeholders and input length) with ``options``."""
        data = self.config.data if self.config else None
        limit = min(self.max_positions, data.max_len) if data else self.max_positions

        def too_long(text: str) -> bool:  # a character is at most 4 tokens (its bytes): short texts need no encoding
            return len(text) * 4 > limit and len(self.tokenizer.encode_src(self.normalize_source(text))) > limit

        return TextStage(
            data.src_lang if data else None,
            data.tgt_lang if data else None,
            options,
            self.tokenizer.has_piece(PLACEHOLDERS[0]),
            too_long,
        )

    def translate(
        self,
        lines: list[str],
        beam: int | None = None,
        nbest: int = 1,
        *,
        sampler: TokenSampler | None = None,
        prefixes: list[str] | None = None,
        glossary: Glossary | None = None,
        text: TextOptions = DEFAULTS,
    ) -> list[Translation]:
        """Translate lines of text (order kept) through the text stage (``seq2seq.text.stage``): each line's
        sentences, every line's in one batch, joined again; empty lines give empty translations.

        ``sampler`` draws ``nbest`` samples per sentence; ``prefixes`` (one per line, "" for none) force the
        start of each translation, and so translate each line whole; ``glossary`` terms found in a sentence
        must appear in its translation (constrained beam search). The k-th of ``nbest`` outputs of a line
        joins the k-th of each of its sentences. ``text``: splitting, the language check, placeholders.
        """
        beam = self.decode.beam if beam is None else beam
        stage = self.text_stage(replace(text, split=False) if prefixes else text)
        plans = [stage.prepare(self.normalize_source(line)) for line in lines]
        units = [
            (i, k, unit) for i, plan in enumerate(plans) for sentence in plan for k, unit in enumerate(sentence.units)
        ]
        found, lengths = self._translate_units(
            [unit.text for _, _, unit in units],
            beam,
            nbest,
            sampler=sampler,
            # a prefix starts the line: its first unit (a line cut into parts has more than one)
            prefixes=[prefixes[i] if k == 0 else "" for i, k, _ in units] if prefixes else None,
            glossary=glossary,
        )
        results, position = [], 0
        for line, plan in zip(lines, plans, strict=True):
            count = sum(len(s.units) for s in plan)
            done, done_lengths = found[position : position + count], lengths[position : position + count]
            position += count
            results.append(self._line(stage, line, plan, done, done_lengths, beam, nbest))
        return results

    def _line(
        self,
        stage: TextStage,
        line: str,
        plan: list[SentencePlan],
        done: list[Translation],
        source_tokens: list[int],
        beam: int,
        nbest: int,
    ) -> Translation:
        """One line's ``Translation`` from its units' (``source_tokens`` long each): its k-th output joins the
        k-th output of each of its units."""
        alpha = self.decode.length_penalty if beam > 1 else 0.0
        outputs, details = [], None
        for k in range(min([nbest, *(len(t.outputs) for t in done)])):
            chosen = [t.outputs[k] for t in done]
            unit_outputs = [
                UnitOutput(o.text, len(o.tokens) + 1, _log_prob(o, alpha), n)
                for o, n in zip(chosen, source_tokens, strict=True)
            ]
            result = stage.finish(line, plan, unit_outputs)
            details = details or result.sentences
            tokens = [i for o in chosen for i in o.tokens]
            pieces = [p for o in chosen for p in o.pieces]
            outputs.append(Output(result.text, sum((o.score for o in chosen), 0.0), tokens, pieces))
        terms = [term for t in done for term in (t.constraints or [])] if any(t.constraints for t in done) else None
        return Translation(line, outputs, terms, details or [])

    def _translate_units(
        self,
        sentences: list[str],
        beam: int | None,
        nbest: int,
        *,
        sampler: TokenSampler | None,
        prefixes: list[str] | None,
        glossary: Glossary | None,
    ) -> tuple[list[Translation], list[int]]:
        """Translate the model's inputs (order kept), one each, as they are; also their lengths in tokens."""
        self.require(sampling=sampler is not None, prefixes=bool(prefixes), constraints=glossary is not None)
        beam = self.decode.beam if beam is None else beam
        todo = [i for i, s in enumerate(sentences) if normalize(s)]
        terms = [glossary.targets_for(sentences[i]) for i in todo] if glossary else None
        options = SearchOptions(
            sampler,
            [self.target_ids(prefixes[i]) for i in todo] if prefixes else None,
            [[self.target_ids(t) for t in sentence_terms] for sentence_terms in terms] if terms else None,
        )
        ids = [self.encode(sentences[i]) for i in todo]
        found = self.search(ids, beam, max(nbest, 1), options)
        results = [Translation(s, [Output("", 0.0, [], [])]) for s in sentences]
        lengths = [0] * len(sentences)
        tok = self.tokenizer
        for k, (i, hyps) in enumerate(zip(todo, found, strict=True)):
            outputs = [Output(tok.decode_tgt(h.tokens), h.score, h.tokens, tok.tgt_pieces(h.tokens)) for h in hyps]
            results[i] = Translation(sentences[i], outputs, terms[k] if terms else None)
            lengths[i] = len(ids[k])
        return results, lengths


def _log_prob(output: Output, alpha: float) -> float:
    """An output's log-probability: its score with beam search's length penalty ((5 + L) / 6)^alpha undone
    (L counting <end>; alpha 0 for greedy and sampled scores, which are the log-probability already)."""
    return output.score * ((5 + len(output.tokens) + 1) / 6) ** alpha
