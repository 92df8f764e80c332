"""Documents into sentences and back: a model trained on sentences translates a paragraph one
sentence at a time.

Splitting is ``sentencex``'s (seq2seq[text]), which knows each language's sentence ends, abbreviations
("Dr.", "e.g."), decimals and quotes that close after the full stop (他说：“好。”). It was chosen over
``pysbd`` and ``blingfire``, which cut Chinese quotations after the full stop, leaving the closing
quote to open the next sentence, and (blingfire) split an English quotation in two
(docs/translate.md#documents). Translations are joined with the target language's spacing. A
sentence longer than the model reads is cut at clause boundaries (，；, ; …) before any other place.
"""

import re
from collections.abc import Callable
from functools import cache

from seq2seq.errors import UserError
from seq2seq.text.language import base_language

# Languages written without spaces between words (and so between sentences).
_SPACELESS = {"zh", "ja", "th", "lo", "km", "my", "bo"}
_CLAUSE_END = re.compile(r"[，；：、,;:—…]+\s*")


@cache
def _segmenter() -> Callable[[str, str], object]:
    try:
        from sentencex import segment
    except ImportError:
        raise UserError(
            "splitting documents into sentences needs sentencex: pip install 'seq2seq[text]' (or use --no-split)"
        ) from None
    return segment


def split_sentences(line: str, lang: str | None) -> list[str]:
    """The sentences of ``line`` in order, each stripped; an empty line has none. ``lang`` None splits
    by the rules sentencex falls back on for a language it does not know."""
    return [s.strip() for s in _segmenter()(base_language(lang) or "en", line) if s.strip()]


def join_sentences(sentences: list[str], lang: str | None) -> str:
    """Sentences of the target language ``lang`` as one line, with its spacing."""
    separator = "" if base_language(lang) in _SPACELESS else " "
    return separator.join(s for s in sentences if s)


def cut_long(sentence: str, too_long: Callable[[str], bool]) -> list[str]:
    """``sentence`` in parts none of which is ``too_long``: cut at the clause boundary nearest the middle,
    else at the space nearest it, else in the middle, until every part fits."""
    if not too_long(sentence) or len(sentence) < 2:
        return [sentence]
    middle = len(sentence) / 2
    cuts = [m.end() for m in _CLAUSE_END.finditer(sentence) if 0 < m.end() < len(sentence)]
    cuts = cuts or [m.end() for m in re.finditer(r"\s+", sentence) if 0 < m.end() < len(sentence)]
    cut = min(cuts, key=lambda c: abs(c - middle)) if cuts else int(middle)
    return cut_long(sentence[:cut].strip(), too_long) + cut_long(sentence[cut:].strip(), too_long)
