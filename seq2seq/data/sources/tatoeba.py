"""``seq2seq fetch --corpus tatoeba`` (the default): the manythings.org selection of Tatoeba's Chinese-English
pairs (https://www.manythings.org/anki/cmn-eng.zip, about 29k pairs) into ``data/tatoeba-cmn-eng``.

Taken from ``--local`` (a built corpus directory, the manythings ``cmn.txt`` or ``cmn-eng.zip``), else
downloaded. manythings rebuilds its zip as Tatoeba grows, so its digest cannot be pinned: a download
needs ``--allow-unpinned``.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.data.overlap import Overlap
from seq2seq.data.sources.common import (
    DATA,
    REQUIRED,
    TATOEBA_LICENSE,
    WHAT_TO_DO,
    FetchError,
    PairWriter,
    Remote,
    copy_directory,
    decode,
    digest_section,
    fetch_corpus,
    overlap_note,
)

OUT = DATA / "tatoeba-cmn-eng"
MANYTHINGS = "https://www.manythings.org/anki"
TSV_NAME = "cmn.txt"
ZIP_NAME = "cmn-eng.zip"
URL = f"{MANYTHINGS}/{ZIP_NAME}"
PIN = None  # manythings rebuilds its zip as Tatoeba grows: no digest stays right


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


def fill(tmp: Path, local: Path | None, remote: Remote, overlap: Overlap | None = None) -> tuple[int, str]:
    """Write the manythings corpus into the empty directory ``tmp``; return (pairs, description of the source)."""
    if local is None:
        archive, origin = remote.fetch(MANYTHINGS, ZIP_NAME, PIN)
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


def fetch(
    out: Path,
    local: Path | None,
    *,
    force: bool = False,
    remote: Remote | None = None,
    exclude: Sequence[Path] = (),
) -> int:
    """Put the manythings corpus into ``out`` from ``local`` (or a download when None); return the pair count."""
    return fetch_corpus(
        out, lambda tmp, overlap: fill(tmp, local, remote or Remote(), overlap), force=force, exclude=exclude
    )
