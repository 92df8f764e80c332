"""The text stage around a model: lines of a user's text in, the model's inputs out, and back.

``TextStage.prepare`` turns each input line into units for the model: the line's sentences
(``segment``), those not in the source language set aside (``language``), any too long for the
model cut at clause boundaries, and the non-translatables of each masked (``placeholders``).
The caller translates every unit of every line in one batch; ``TextStage.finish`` restores the
masked spans, rejoins the sentences with the target language's spacing and says, per sentence,
what a user should check (``warnings``) and how sure the model was (``confidence``, the mean
log-probability per token). A line in is a line out; an empty line stays empty.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from seq2seq.text.language import LanguageCheck, base_language, has_own_script, uses_latin_script
from seq2seq.text.placeholders import Masked, mask, restore
from seq2seq.text.segment import cut_long, join_sentences, split_sentences

# An output's length in tokens against its source's, outside which it is flagged: the model most likely
# dropped part of the sentence, or repeated itself.
SHORT_RATIO, LONG_RATIO = 0.3, 3.0
SHORT_CHECK_FROM = 8  # source tokens: shorter sentences have outputs of too varied a length to judge
_REPEAT = re.compile(r"(\b.{3,}?)(?:\W*\1){3,}")  # a run of 3+ characters said four times in a row


@dataclass(frozen=True)
class TextOptions:
    """How the stage treats input: ``split`` lines into sentences, ``check_language`` (off: translate every
    sentence, as ``--force``), ``placeholders`` masked (on a model that has them)."""

    split: bool = True
    check_language: bool = True
    placeholders: bool = True


DEFAULTS = TextOptions()


@dataclass
class SentencePlan:
    """A sentence of a line: its ``units``, the model's inputs (parts of it, masked; none when it passes
    through), and what was noticed before translating it."""

    source: str
    units: list[Masked] = field(default_factory=list)
    language: str | None = None  # set when the sentence is not in the source language
    warnings: list[str] = field(default_factory=list)


@dataclass
class UnitOutput:
    """What the model made of a unit: its text, its tokens (with <end>) and their log-probability, and the
    unit's own length in tokens."""

    text: str
    tokens: int
    log_prob: float
    source_tokens: int


@dataclass
class SentenceResult:
    """A sentence's translation (or the sentence itself, passed through) and what to know about it."""

    source: str
    text: str
    translated: bool
    confidence: float | None  # mean log-probability per output token; None when passed through
    warnings: list[str]
    language: str | None = None  # a language other than the source's, when detected


@dataclass
class LineResult:
    """A line's translation: its sentences' translations joined, and the sentences themselves."""

    source: str
    text: str
    sentences: list[SentenceResult]

    @property
    def warnings(self) -> list[str]:
        return [w for s in self.sentences for w in s.warnings]


class TextStage:
    """Prepares lines for a model whose source language is ``src_lang`` and target ``tgt_lang``, and
    finishes them; ``too_long(text)`` says whether a text is longer than the model reads;
    ``has_placeholders`` whether its vocabulary holds the placeholder pieces (a model trained with
    ``data.placeholders``)."""

    def __init__(
        self,
        src_lang: str | None,
        tgt_lang: str | None,
        options: TextOptions,
        has_placeholders: bool,
        too_long: Callable[[str], bool],
    ) -> None:
        self.src_lang, self.tgt_lang, self.options = base_language(src_lang), base_language(tgt_lang), options
        self.masking = options.placeholders and has_placeholders
        self.latin_words = not uses_latin_script(src_lang)
        self.check = LanguageCheck(src_lang, tgt_lang) if options.check_language else None
        self.too_long = too_long

    def prepare(self, line: str) -> list[SentencePlan]:
        """A line's sentences, each with the units to translate."""
        sentences = split_sentences(line, self.src_lang) if self.options.split else [line.strip()] * bool(line.strip())
        return [self._plan(sentence) for sentence in sentences]

    def _plan(self, sentence: str) -> SentencePlan:
        plan = SentencePlan(sentence)
        verdict = self.check.verdict(sentence) if self.check else None
        if verdict is not None and not verdict.translate:
            plan.language = verdict.language
            plan.warnings.append(verdict.warning(self.tgt_lang))
            return plan
        parts = cut_long(sentence, self.too_long)
        if len(parts) > 1:
            plan.warnings.append(f"longer than the model reads: translated in {len(parts)} parts cut at clauses")
        # Latin words are carried through only inside text of the source's own script: a Latin-script sentence
        # translated with --force is text to translate.
        latin_words = self.latin_words and has_own_script(sentence, self.src_lang)
        plan.units = [mask(part, latin_words) if self.masking else Masked(part) for part in parts]
        return plan

    def finish(self, source: str, plans: list[SentencePlan], outputs: list[UnitOutput]) -> LineResult:
        """A line's result from its plans and the outputs of their units, in order."""
        results, position = [], 0
        for plan in plans:
            done = outputs[position : position + len(plan.units)]
            position += len(plan.units)
            results.append(self._sentence(plan, done))
        if position != len(outputs):
            raise ValueError(f"{len(outputs)} outputs for {position} units")
        return LineResult(source, join_sentences([r.text for r in results], self.tgt_lang), results)

    def _sentence(self, plan: SentencePlan, outputs: list[UnitOutput]) -> SentenceResult:
        if not plan.units:
            return SentenceResult(plan.source, plan.source, False, None, plan.warnings, plan.language)
        warnings, texts = list(plan.warnings), []
        for unit, output in zip(plan.units, outputs, strict=True):
            text, lost = restore(output.text, unit)
            warnings += lost
            texts.append(text)
        tokens = sum(o.tokens for o in outputs)
        source_tokens = sum(o.source_tokens for o in outputs)
        if source_tokens >= SHORT_CHECK_FROM and tokens < SHORT_RATIO * source_tokens:
            warnings.append(f"translation much shorter than its source ({tokens} tokens for {source_tokens})")
        if tokens > LONG_RATIO * source_tokens + 5:
            warnings.append(f"translation much longer than its source ({tokens} tokens for {source_tokens})")
        text = join_sentences(texts, self.tgt_lang)
        if _REPEAT.search(text):
            warnings.append("the translation repeats itself")
        confidence = sum(o.log_prob for o in outputs) / max(tokens, 1)
        return SentenceResult(plan.source, text, True, confidence, warnings)
