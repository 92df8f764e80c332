"""Non-translatables: spans the model must carry through unchanged, masked as placeholder tokens.

A URL, an e-mail address, a number, a version string, a file or code name, or (in a source written in
a non-Latin script, such as Chinese) any run of Latin-script words is replaced by a placeholder ``⦅1⦆``,
``⦅2⦆``, … before the model reads the sentence; the same text gets the same placeholder. After
decoding, ``restore`` puts each span back where its placeholder came out. The placeholders are
SentencePiece user-defined symbols (one piece each, never split), and a model learns to carry them
because training masks them in too: ``mask_training_pair`` replaces spans aligned between a pair's
two sides (the same span on both sides, a number written as a numeral or a word, a name from a small
table of transliterations) with one placeholder on each side.

A span the model dropped is appended to the sentence and reported; an unknown or repeated
placeholder is reported too: nothing the source held is lost in silence.
"""

import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field

MAX_PLACEHOLDERS = 12  # distinct spans masked per sentence; any further ones reach the model as text
PLACEHOLDERS = tuple(f"⦅{i}⦆" for i in range(1, MAX_PLACEHOLDERS + 1))  # NFKC-stable, absent from real text
_PLACEHOLDER = re.compile(r"⦅(\d+)⦆")

# Alternatives in priority order: URL, e-mail, a number with thousands separators, then a token of Latin
# letters and digits that may hold the punctuation of versions, paths, identifiers and decimals inside it.
_URL = r"(?:https?://|www\.)[^\s<>\"'\u3000-\u303f\u3400-\u9fff\uff00-\uffef]+"  # up to a space or CJK text
_EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
_GROUPED = r"[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?"
_TOKEN = r"[$€£¥]?[A-Za-z0-9](?:[A-Za-z0-9_+#%]|[-.'/:@](?=[A-Za-z0-9]))*[+#%]*"
_SPAN = re.compile(f"{_URL}|{_EMAIL}|{_GROUPED}|{_TOKEN}")
_TRAILING = ".,;:!?)]}'\""  # sentence punctuation a URL's match may have swallowed
_CODE_LIKE = re.compile(r"\d|_|[a-z][A-Z]|\w[./:@]\w")  # in a Latin-script source: digits, snake/camelCase, dots


@dataclass
class Masked:
    """A sentence with its non-translatables masked: ``text`` holds placeholders, ``spans[i]`` is what
    placeholder i + 1 stands for."""

    text: str
    spans: list[str] = field(default_factory=list)


def find_spans(text: str, latin_words: bool) -> list[tuple[int, int]]:
    """Character ranges of the non-translatables in ``text``, in order, neighbours joined by single spaces
    merged ("iPhone 15", "Visual Studio Code"). ``latin_words``: every Latin-script word is one (a Chinese
    source); else only URLs, e-mails and tokens with digits, underscores, inner capitals or dots."""
    found: list[tuple[int, int]] = []
    for match in _SPAN.finditer(text):
        start, end = match.span()
        if text.startswith(("http", "www."), start):
            end = start + len(match.group().rstrip(_TRAILING))
        if not latin_words and not _CODE_LIKE.search(text[start:end]) and "@" not in text[start:end]:
            continue
        if found and text[found[-1][1] : start] == " " and latin_words:
            found[-1] = (found[-1][0], end)
        else:
            found.append((start, end))
    return found


def mask(text: str, latin_words: bool) -> Masked:
    """Replace the non-translatables of ``text`` (``find_spans``) by placeholders; the same span text
    takes the same placeholder, and spans past ``MAX_PLACEHOLDERS`` distinct ones stay as text."""
    spans: list[str] = []
    pieces, last = [], 0
    for start, end in find_spans(text, latin_words):
        span = text[start:end]
        if span not in spans:
            if len(spans) == MAX_PLACEHOLDERS:
                continue
            spans.append(span)
        pieces += [text[last:start], PLACEHOLDERS[spans.index(span)]]
        last = end
    return Masked("".join(pieces) + text[last:], spans)


def restore(output: str, masked: Masked) -> tuple[str, list[str]]:
    """Put each span of ``masked`` back at its placeholder in ``output``; returns the text and warnings. A
    span the model wrote fewer times than the source holds it is appended (before final punctuation) as
    often as it is missing; a placeholder the model invented is removed."""
    spans, warnings = masked.spans, []
    wanted = Counter(int(number) for number in _PLACEHOLDER.findall(masked.text))
    written: Counter[int] = Counter()

    def put_back(match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= len(spans):
            warnings.append(f"the model wrote a placeholder {match.group()} the source does not have: removed")
            return ""
        written[number] += 1
        if written[number] == wanted[number] + 1:
            warnings.append(f"{spans[number - 1]!r} appears more often in the translation than in the source")
        return spans[number - 1]

    text = _PLACEHOLDER.sub(put_back, output)
    missing = [spans[n - 1] for n in sorted(wanted) for _ in range(wanted[n] - written[n])]
    if missing:
        body = text.rstrip(".!?。！？ ")
        text = " ".join([body, *missing]).strip() + text[len(body) :].strip()
        warnings += [f"{span!r} was dropped by the model: appended" for span in missing]
    return re.sub(r" {2,}", " ", text).strip(), warnings


# --- training: aligned spans -------------------------------------------------------------------------------

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
_MEASURE = "个本天年岁次只张件位分小条块杯双辆台家名层周点月星座首页"
# A Chinese numeral from 2 to 20 before a measure word ("三个", "十二本"); 一 is left out: it is "a" as often.
_ZH_NUMERAL = re.compile(
    f"(?<![零一二三四五六七八九十两百千万第])(十[一二三四五六七八九]?|[二三四五六七八九两]|二十)(?=[{_MEASURE}])"
)
# Names Tatoeba's sentences use most, in their usual Chinese transliteration.
_NAMES = {"汤姆": "Tom", "玛丽": "Mary", "约翰": "John", "鲍勃": "Bob", "比尔": "Bill", "露西": "Lucy"}


def _zh_number(numeral: str) -> int:
    if numeral.startswith("十"):
        return 10 + (_DIGITS[numeral[1]] if len(numeral) > 1 else 0)
    if numeral.endswith("十"):
        return _DIGITS[numeral[0]] * 10
    return _DIGITS[numeral]


def _whole(span: str, ignore_case: bool = False) -> re.Pattern:
    """``span`` where it is not part of a longer Latin word or number (the "3" of "3.5" is not "3")."""
    return re.compile(rf"(?<![A-Za-z0-9.]){re.escape(span)}(?![A-Za-z0-9]|\.\d)", re.IGNORECASE if ignore_case else 0)


def _aligned(src: str, tgt: str, latin_words: bool, with_names: bool) -> list[tuple[str, str]]:
    """(source text, target text) of each span of ``src`` with a counterpart in ``tgt``, in source order."""
    found: list[tuple[int, str, str]] = []
    for start, end in find_spans(src, latin_words):
        span = src[start:end]
        if _whole(span).search(tgt):
            found.append((start, span, span))
        elif span.isdigit() and int(span) < len(_NUMBER_WORDS):
            if word := _whole(_NUMBER_WORDS[int(span)], True).search(tgt):
                found.append((start, span, word.group()))
    if with_names:
        for match in _ZH_NUMERAL.finditer(src):
            value = _zh_number(match.group())
            word = _whole(_NUMBER_WORDS[value], True).search(tgt) if value < len(_NUMBER_WORDS) else None
            if word or (word := _whole(str(value)).search(tgt)):
                found.append((match.start(), match.group(), word.group()))
        for zh, en in _NAMES.items():
            if (start := src.find(zh)) >= 0 and _whole(en).search(tgt):
                found.append((start, zh, en))
    found.sort()
    return [(s, t) for _, s, t in found]


def mask_training_pair(src: str, tgt: str, latin_words: bool, rate: float) -> tuple[str, str]:
    """A training pair with its aligned non-translatables masked, each pair of spans by one placeholder.

    Spans the same on both sides are always masked, as translation masks them; numerals and names are
    masked in a share ``rate`` of the pairs (drawn from a hash of the source, so a corpus always masks the
    same pairs), so the model still learns to translate them and learns where a placeholder goes in a sentence.
    """
    draw = random.Random(hashlib.blake2b(src.encode(), digest_size=8).digest())
    pairs = _aligned(src, tgt, latin_words, with_names=draw.random() < rate)
    spans: list[tuple[str, str]] = []
    for pair in pairs:
        if pair not in spans and len(spans) < MAX_PLACEHOLDERS:
            spans.append(pair)
    # Numbered at random, not 1, 2, … as translation numbers them: few sentences hold several spans, and
    # this way every placeholder is seen, alone or not, and carried by its identity rather than its rank.
    symbols = draw.sample(PLACEHOLDERS, len(spans))
    # Longest first, so that a span inside another ("3" in "3.5") does not break it.
    for index in sorted(range(len(spans)), key=lambda i: -len(spans[i][0])):
        (s, t), symbol = spans[index], symbols[index]
        src = _replace_whole(src, s, symbol)
        tgt = _replace_whole(tgt, t, symbol)
    return src, tgt


def _replace_whole(text: str, span: str, symbol: str) -> str:
    """``span`` replaced by ``symbol`` wherever it is not part of a longer Latin word or number."""
    if not re.match(r"[A-Za-z0-9$€£¥]", span):
        return text.replace(span, symbol)
    return _whole(span).sub(symbol, text)
