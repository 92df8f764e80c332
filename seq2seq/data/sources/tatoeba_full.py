"""``seq2seq fetch --corpus tatoeba-full``: every Tatoeba Chinese sentence linked to an English one, built from
Tatoeba's own weekly exports (https://tatoeba.org/downloads) into ``data/tatoeba-cmn-eng-full``.

The Chinese and English sentence files and the Chinese-English links: both Chinese scripts kept as they
are, one line per link, ``ATTRIBUTION.tsv`` naming both sentence ids and, from the ``*_sentences_detailed``
exports, their contributors. Taken from ``--local`` (a built corpus directory, or the export files
``cmn_sentences[_detailed].tsv[.bz2]``, ``eng_sentences[_detailed].tsv[.bz2]``, ``cmn-eng_links.tsv[.bz2]``
or a directory holding them), else downloaded. The exports are read a line at a time: only the Chinese
sentences, the links and the English sentences the links name are held in memory, never the English export.
"""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from seq2seq.data.overlap import Overlap
from seq2seq.data.sources.common import (
    DATA,
    REQUIRED,
    TATOEBA_LICENSE,
    ExportCounts,
    FetchError,
    PairWriter,
    Remote,
    collapse,
    copy_directory,
    digest_section,
    overlap_note,
)

OUT = DATA / "tatoeba-cmn-eng-full"
TATOEBA_EXPORTS = "https://downloads.tatoeba.org/exports"
FILES = (  # what is downloaded, under TATOEBA_EXPORTS (or --mirror)
    "per_language/cmn/cmn_sentences_detailed.tsv.bz2",
    "per_language/eng/eng_sentences_detailed.tsv.bz2",
    "per_language/cmn/cmn-eng_links.tsv.bz2",
)
PINS: dict[str, str | None] = dict.fromkeys(FILES)  # Tatoeba re-exports every week: no digest stays right


@dataclass(frozen=True)
class TatoebaExports:
    """The three export files the corpus is built from (``links_zh_first``: the links file is cmn-eng)."""

    cmn: Path
    eng: Path
    links: Path
    links_zh_first: bool = True

    @classmethod
    def find(cls, paths: Sequence[Path]) -> TatoebaExports:
        """Pick the exports out of files and directories, by Tatoeba's names (a detailed export preferred)."""
        files: list[Path] = []
        for path in paths:
            if not path.exists():
                raise FetchError(f"local data path {path} does not exist; {TATOEBA_WHAT_TO_DO}")
            files += sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
        files = [p for p in files if not p.name.endswith(".part")]  # a download in progress is not an export
        where = ", ".join(map(str, paths))

        def one(prefix: str, what: str) -> Path:
            found = sorted((p for p in files if p.name.startswith(prefix)), key=lambda p: "_detailed" not in p.name)
            if not found:
                raise FetchError(f"no {what} export ({prefix}[_detailed].tsv[.bz2]) in {where}; {TATOEBA_WHAT_TO_DO}")
            return found[0]

        cmn, eng = one("cmn_sentences", "Chinese sentences"), one("eng_sentences", "English sentences")
        links = [p for p in files if p.name.startswith(("cmn-eng_links", "eng-cmn_links"))]
        if not links:
            raise FetchError(
                f"no Chinese-English links export (cmn-eng_links.tsv[.bz2]) in {where}; {TATOEBA_WHAT_TO_DO}"
            )
        return cls(cmn, eng, links[0], links_zh_first=links[0].name.startswith("cmn"))


TATOEBA_WHAT_TO_DO = (
    "save cmn_sentences_detailed.tsv.bz2, eng_sentences_detailed.tsv.bz2 and cmn-eng_links.tsv.bz2 "
    f"from https://tatoeba.org/downloads (under {TATOEBA_EXPORTS}/per_language/) and pass --local DIR, "
    "or pass a built corpus directory"
)


def export_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of an export file, a line at a time, decompressing .bz2/.gz as it reads."""
    try:
        with path.open("rb") as probe:
            magic = probe.read(3)
        opener: Callable[[Path], IO[bytes]] = (
            bz2.open if magic == b"BZh" else gzip.open if magic[:2] == b"\x1f\x8b" else lambda p: p.open("rb")
        )
        with opener(path) as stream:
            for number, raw in enumerate(stream, start=1):
                try:
                    text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError:
                    raise FetchError(f"{path} line {number} is not UTF-8; re-download the export") from None
                yield number, text.rstrip("\n").rstrip("\r")
    except (OSError, EOFError) as e:  # a truncated or damaged archive included
        raise FetchError(f"cannot read {path} ({e}); re-download the export") from None


def read_sentences(
    path: Path, lang: str, wanted: set[int] | None = None
) -> tuple[dict[int, tuple[str, str]], ExportCounts]:
    """``{id: (text, contributor)}`` of a sentences export (of ``wanted`` ids only, when given).

    Rows are ``id<TAB>lang<TAB>text`` (``sentences``) or followed by ``<TAB>username<TAB>added<TAB>
    modified`` (``sentences_detailed``, whose unknown username is ``\\N``). A row without three
    columns or with a non-numeric id is malformed; a row of another language is skipped.
    """
    sentences: dict[int, tuple[str, str]] = {}
    counts = ExportCounts(path.name)
    for number, line in export_lines(path):
        columns = line.split("\t")
        if len(columns) < 3 or not columns[0].isdigit():
            counts.bad(number)
            continue
        if columns[1] != lang:
            counts.other_language += 1
            continue
        counts.rows += 1
        sentence_id = int(columns[0])
        if wanted is None or sentence_id in wanted:
            user = columns[3] if len(columns) > 3 and columns[3] != "\\N" else ""
            sentences[sentence_id] = (collapse(columns[2]), user.strip())
    if not counts.rows:
        raise FetchError(f"{path} holds no '{lang}' sentences (id<TAB>{lang}<TAB>text rows); {TATOEBA_WHAT_TO_DO}")
    return sentences, counts


def read_links(path: Path, zh_first: bool) -> tuple[set[tuple[int, int]], ExportCounts]:
    """The ``(Chinese id, English id)`` links of a cmn-eng (or eng-cmn) links export, without repeats."""
    links: set[tuple[int, int]] = set()
    counts = ExportCounts(path.name)
    for number, line in export_lines(path):
        columns = line.split("\t")
        if len(columns) != 2 or not all(c.isdigit() for c in columns):
            counts.bad(number)
            continue
        first, second = int(columns[0]), int(columns[1])
        links.add((first, second) if zh_first else (second, first))
        counts.rows += 1
    return links, counts


def tatoeba_credit(en_id: int, en_user: str, zh_id: int, zh_user: str) -> str:
    """An ATTRIBUTION.tsv line in manythings' form: English sentence first, contributors where known."""

    def one(sentence_id: int, user: str) -> str:
        return f"#{sentence_id}" + (f" ({user})" if user else "")

    return f"CC-BY 2.0 (France) Attribution: tatoeba.org {one(en_id, en_user)} & {one(zh_id, zh_user)}"


def build_tatoeba_full(exports: TatoebaExports, tmp: Path, overlap: Overlap | None, source: str) -> tuple[int, str]:
    """The corpus from the exports into ``tmp``: one line per link, ordered by Chinese then English id.

    Memory holds the Chinese sentences, the links and the English sentences the links name; the
    English export (millions of rows) is streamed past once.
    """
    cmn, cmn_counts = read_sentences(exports.cmn, "cmn")
    links, link_counts = read_links(exports.links, exports.links_zh_first)
    missing = sum(1 for zh_id, _ in links if zh_id not in cmn)
    links = {(zh_id, en_id) for zh_id, en_id in links if zh_id in cmn}
    eng, eng_counts = read_sentences(exports.eng, "eng", wanted={en_id for _, en_id in links})
    empty = 0
    with PairWriter(tmp, overlap) as writer:
        for zh_id, en_id in sorted(links):
            if en_id not in eng:
                missing += 1
                continue
            (zh, zh_user), (en, en_user) = cmn[zh_id], eng[en_id]
            if not zh or not en:
                empty += 1
                continue
            writer.add(zh, en, tatoeba_credit(en_id, en_user, zh_id, zh_user))
    if not writer.pairs:
        raise FetchError(f"the exports {source} hold no Chinese-English pair; {TATOEBA_WHAT_TO_DO}")
    counted = "; ".join(c.describe() for c in (cmn_counts, eng_counts, link_counts))
    summary = f"{counted}; {missing} links to a missing sentence and {empty} with an empty side skipped" + overlap_note(
        writer.dropped if overlap is not None else None
    )
    filtered = (
        f"{writer.dropped} pairs sharing a side with {overlap.describe()} were dropped (--exclude)."
        if overlap is not None
        else "NOT filtered for overlap with public Tatoeba evaluation sets (see --exclude in data/README.md)."
    )
    (tmp / "README.md").write_text(
        "# Tatoeba cmn-eng, all links (Chinese-English), traditional and simplified\n\n"
        f"Built by seq2seq fetch --corpus tatoeba-full from Tatoeba's exports: {source}.\n"
        f"{writer.pairs} pairs, one line per Chinese-English link ({summary}). Both Chinese scripts are kept\n"
        "as Tatoeba has them; whitespace inside a line is collapsed. ATTRIBUTION.tsv names the English\n"
        "and the Chinese sentence of each line (https://tatoeba.org/sentences/show/ID) and, where the export\n"
        f"has it, its contributor.\n{filtered}\n\n{TATOEBA_LICENSE}\n\n{digest_section(tmp)}",
        encoding="utf-8",
    )
    return writer.pairs, f"{source}, {summary}"


def fill(tmp: Path, local: Sequence[Path], remote: Remote, overlap: Overlap | None) -> tuple[int, str]:
    """--corpus tatoeba-full into ``tmp``: a built corpus copied, or the exports (local or downloaded) read."""
    if len(local) == 1 and local[0].is_dir() and all((local[0] / name).is_file() for name in REQUIRED):
        return copy_directory(local[0], tmp, overlap)
    if local:
        exports = TatoebaExports.find(local)
        source = "local " + ", ".join(str(p) for p in (exports.cmn, exports.eng, exports.links))
    else:
        (cmn, cmn_origin), (eng, eng_origin), (links, links_origin) = (
            remote.fetch(TATOEBA_EXPORTS, name, PINS[name]) for name in FILES
        )
        exports, source = TatoebaExports(cmn, eng, links), f"download {cmn_origin}, {eng_origin}, {links_origin}"
    return build_tatoeba_full(exports, tmp, overlap, source)
