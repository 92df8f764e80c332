"""Is a sentence in the language the model reads? A per-sentence check before translation.

A sentence that holds no character of its source language's script (no Han character in a "Chinese"
sentence) is not in that language, whatever a classifier says; for the rest, and to name the language
a sentence is in, ``py3langid`` (seq2seq[text]) classifies it with the model it ships (97 languages,
offline). Input already in the target language passes through unchanged; input in a third language is
passed through and flagged; ``force`` translates everything.
"""

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

from seq2seq.errors import UserError

# Languages whose own script is not Latin, with a pattern for a character of it. A Latin-script word inside
# a sentence of one of these is a name or a term to carry through, not text to translate.
_SCRIPTS = {
    "zh": r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]",
    "ja": r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]",
    "ko": r"[\uac00-\ud7af\u1100-\u11ff]",
    "ru": r"[\u0400-\u04ff]",
    "uk": r"[\u0400-\u04ff]",
    "bg": r"[\u0400-\u04ff]",
    "el": r"[\u0370-\u03ff]",
    "ar": r"[\u0600-\u06ff]",
    "fa": r"[\u0600-\u06ff]",
    "he": r"[\u0590-\u05ff]",
    "hi": r"[\u0900-\u097f]",
    "th": r"[\u0e00-\u0e7f]",
}
_LETTER = re.compile(r"[^\W\d_]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
CONFIDENT = 0.9  # a classifier's probability above which a sentence in another language is called so


def base_language(code: str | None) -> str | None:
    """``zh-Hant`` -> ``zh``; None stays None."""
    return None if code is None else re.split(r"[-_]", code)[0].lower()


def uses_latin_script(code: str | None) -> bool:
    """Whether a language is written in Latin script (unknown languages are taken to be)."""
    return base_language(code) not in _SCRIPTS


def has_own_script(sentence: str, code: str | None) -> bool:
    """Whether ``sentence`` holds a character of the script of ``code``'s language, when that is not Latin."""
    pattern = _SCRIPTS.get(base_language(code) or "")
    return pattern is not None and re.search(pattern, sentence) is not None


@cache
def _identifier():  # noqa: ANN202 (py3langid's class, imported only here)
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise UserError("the language check needs py3langid: pip install 'seq2seq[text]' (or use --force)") from None
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def guess_language(lines: list[str]) -> str | None:
    """The language most of ``lines`` are in (a corpus side), or None when the classifier is missing or
    no language holds a clear majority of them."""
    try:
        identifier = _identifier()
    except UserError:
        return None
    votes = Counter(identifier.classify(line)[0] for line in lines if _LETTER.search(line))
    if not votes:
        return None
    language, count = votes.most_common(1)[0]
    return language if count >= 0.6 * sum(votes.values()) else None


@dataclass(frozen=True)
class Verdict:
    """What the check says of one sentence: ``language`` (None: the source language, or no letters to
    judge by) and whether to translate it."""

    language: str | None
    translate: bool

    def warning(self, tgt_lang: str | None) -> str | None:
        """The line a user is shown, or None for a sentence that is translated."""
        if self.translate:
            return None
        if self.language == base_language(tgt_lang):
            return f"already in the target language ({self.language}): passed through unchanged (--force translates)"
        return f"not in the source language (looks like {self.language}): passed through unchanged (--force translates)"


class LanguageCheck:
    """Decides per sentence whether it is in ``src_lang`` (see the module docstring)."""

    def __init__(self, src_lang: str | None, tgt_lang: str | None) -> None:
        self.src, self.tgt = base_language(src_lang), base_language(tgt_lang)
        self._script = re.compile(_SCRIPTS[self.src]) if self.src in _SCRIPTS else None

    def verdict(self, sentence: str) -> Verdict:
        """``sentence``'s verdict; one without letters (a number alone) is the source language's."""
        if self.src is None or not _LETTER.search(sentence):
            return Verdict(None, True)
        if self._script is not None and self._script.search(sentence):
            return Verdict(None, True)
        language, probability = _identifier().classify(sentence)
        # Letters, none of the source's script: another language for certain.
        if self._script is not None or not _LATIN.search(sentence):
            return Verdict(self._name(sentence, language, probability), False)
        if language != self.src and probability >= CONFIDENT:
            return Verdict(language, False)
        return Verdict(None, True)

    def _name(self, sentence: str, language: str, probability: float) -> str:
        """A name for the language of a sentence known not to be the source's: the classifier's when it is
        confident, else the target language when that shares the sentence's script (a short English line)."""
        if probability >= CONFIDENT or self.tgt is None:
            return language
        if uses_latin_script(self.tgt) == (not any(re.search(p, sentence) for p in _SCRIPTS.values())):
            return self.tgt
        return language
