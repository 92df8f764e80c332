"""What every source of ``seq2seq fetch`` shares: a corpus directory of line-aligned ``all.zh`` / ``all.en`` /
``ATTRIBUTION.tsv`` (with a README listing their sha256), read, checked, copied and written a pair at a time,
and built beside its destination then installed in its place, so an interrupted fetch leaves no corpus behind.

Each source (``tatoeba``, ``tatoeba_full``, ``hsk``, ``cedict``) fills a temporary directory through
``PairWriter`` and ``fetch_corpus`` installs it; ``seq2seq.cli.fetch`` picks the source.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from seq2seq.atomic import install_directory
from seq2seq.data.overlap import Overlap
from seq2seq.data.sources.download import DownloadError, Retry, download
from seq2seq.data.sources.download import file_sha256 as sha256

DATA = Path("data")  # relative to the working directory, as the recipes' corpus paths are
DOWNLOADS = DATA / "downloads"
REQUIRED = ("all.zh", "all.en")
OPTIONAL = ("ATTRIBUTION.tsv", "README.md")
ALIGNED = ("all.zh", "all.en", "ATTRIBUTION.tsv")  # files that must have one line per pair
ENV_VAR = "SEQ2SEQ_DATA_LOCAL"  # the manythings corpus's local copy, named in the advice below
WHAT_TO_DO = f"pass --local PATH (or set {ENV_VAR}) to a directory with all.zh/all.en, a cmn.txt or a cmn-eng.zip"
TATOEBA_LICENSE = "Tatoeba sentences are licensed CC-BY 2.0 France (https://creativecommons.org/licenses/by/2.0/fr/)."
T = TypeVar("T")


class FetchError(Exception):
    """A problem the user can fix; reported as one line on stderr, exit status 2."""


@dataclass(frozen=True)
class Remote:
    """How to download what has no local copy: where to, from which mirror, whether unpinned files are taken."""

    downloads: Path = DOWNLOADS
    mirror: str | None = None  # replaces the base URL (MANYTHINGS or TATOEBA_EXPORTS)
    allow_unpinned: bool = False
    retry: Retry = Retry()

    def fetch(self, base: str, name: str, pin: str | None) -> tuple[Path, str]:
        """Download ``name`` from ``base`` (or the mirror), checked against the sha256 ``pin`` (None: a file that
        cannot be pinned, refused unless allowed); return (local file, "URL (sha256 …)")."""
        url = f"{(self.mirror or base).rstrip('/')}/{name}"
        dest = self.downloads / Path(name).name
        try:
            digest = download(url, dest, sha256=pin, allow_unpinned=self.allow_unpinned, retry=self.retry)
        except DownloadError as e:
            raise FetchError(str(e)) from None
        return dest, f"{url} (sha256 {digest})"


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


def read_overlap(files: Sequence[Path]) -> Overlap:
    """The --exclude files' sentences (each read as UTF-8 text)."""
    return Overlap({str(path): read_text(path) for path in files})


def collapse(text: str) -> str:
    """Whitespace inside a sentence collapsed to single spaces, none around it."""
    return " ".join(text.split())


def build_into(out: Path, fill_directory: Callable[[Path], T]) -> T:
    """Fill a temporary directory next to ``out`` (checked line-aligned), then install it in ``out``'s place
    (``seq2seq.atomic.install_directory``: durable once renamed); a corpus already there is moved aside first."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the corpus directory should not be
        result = fill_directory(tmp)
        check_aligned(tmp, tmp)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            old.rmdir()
            out.rename(old)
        install_directory(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
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
    overlap = read_overlap(exclude) if exclude else None
    pairs, source = build_into(out, lambda tmp: fill_directory(tmp, overlap))
    print(
        f"fetch: {pairs} pairs from {source} -> {out} "
        f"(sha256 all.zh {sha256(out / 'all.zh')}, all.en {sha256(out / 'all.en')})"
    )
    return pairs


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
