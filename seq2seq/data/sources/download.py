"""Downloads that cannot corrupt data: retried, resumed, checked against a pinned sha256, renamed into place.

A file is fetched into ``DEST.part`` beside its destination and renamed to ``DEST`` only once it is
whole and its digest is the pinned one, so ``DEST`` is always a complete, verified download. An
interrupted download leaves only the ``.part``; the next attempt (a retry in this process, or the
next run) asks for the rest with an HTTP Range request and appends it when the server answers 206,
and starts over when the server answers 200 (it ignored the range). A dropped connection, a
timeout, a short body, a 5xx, 408 or 429 reply is retried with exponential backoff; any other 4xx
is not (asking again for a missing file cannot help).

A digest can only be pinned for a file that never changes. The caller passes the pin (``None``
where none is known); a file without one is refused before anything is fetched unless the caller
allows unpinned files, and then its digest is reported so that it can be pinned. A mismatch deletes
the ``.part`` (a resumed file that no longer matches is worthless) and is one line naming the URL
and both digests.

Written here rather than through ``pooch``: pooch downloads each attempt into a fresh temporary file, so a
dropped connection or a killed fetch starts Tatoeba's English export (the largest file) over from its first
byte, and it retries every HTTP error, a 404 included; resuming is what this module is for.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

USER_AGENT = "seq2seq-fetch/2.0"
CHUNK = 1 << 16  # bytes read and written at a time: a download never sits in memory
RETRYABLE_STATUS = (408, 429)  # request timeout, too many requests: worth asking again, unlike other 4xx


class DownloadError(Exception):
    """A download that failed for good; its message is one line naming the URL and what to do."""


class _Retryable(Exception):
    """One attempt failed in a way another attempt may not (the message says how)."""


@dataclass(frozen=True)
class Retry:
    """How hard to try: ``attempts`` in all; the wait before attempt k+1 is ``backoff_s * 2**(k-1)``, capped."""

    attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    timeout_s: float = 60.0  # per socket operation (connect, each read), not for the whole file

    def wait_s(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt number ``failed_attempt`` (1-based) failed."""
        return min(self.backoff_s * 2 ** (failed_attempt - 1), self.max_backoff_s)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read a block at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def part_path(dest: Path) -> Path:
    """Where the download of ``dest`` is written until it is whole and verified."""
    return dest.with_name(dest.name + ".part")


def download(
    url: str,
    dest: Path,
    *,
    sha256: str | None,
    allow_unpinned: bool = False,
    retry: Retry = Retry(),
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = _stderr,
) -> str:
    """Put the file at ``url`` into ``dest`` and return its sha256; raise DownloadError on failure.

    ``dest`` already there and matching the pin (or unpinned, when allowed) is kept as it is: it
    was only ever renamed into place whole. ``sha256=None`` without ``allow_unpinned`` is refused.
    """
    if sha256 is None and not allow_unpinned:
        raise DownloadError(
            f"{url} has no pinned sha256, so what it serves cannot be verified; "
            "rerun with --allow-unpinned to accept it (make: FETCH_FLAGS=--allow-unpinned); its digest is printed"
        )
    if dest.is_file():
        have = file_sha256(dest)
        if sha256 is None or have == sha256:
            log(f"fetch: using the earlier download {dest} (sha256 {have}); delete it to fetch {url} again")
            return have
        dest.unlink()  # an earlier download of another version of the file: fetch the pinned one
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    for attempt in range(1, retry.attempts + 1):
        try:
            _attempt(url, part, retry.timeout_s)
            break
        except _Retryable as failure:
            if attempt == retry.attempts:
                raise DownloadError(
                    f"download of {url} gave up after {retry.attempts} attempts (the last: {failure}); "
                    f"rerun to resume from {part}, or download it by hand and pass --local"
                ) from None
            wait = retry.wait_s(attempt)
            log(f"fetch: {url}: {failure}; attempt {attempt + 1}/{retry.attempts} in {wait:g} s")
            sleep(wait)
    got = file_sha256(part)
    if sha256 is not None and got != sha256:
        part.unlink()
        raise DownloadError(f"{url}: sha256 {got} does not match the pinned {sha256}; the download was deleted")
    os.replace(part, dest)
    if sha256 is None:
        log(f"fetch: {url} is unpinned; its sha256 is {got}")
    return got


def _attempt(url: str, part: Path, timeout_s: float) -> None:
    """One request: append the rest of the file to ``part`` (or rewrite it); _Retryable if it stays short."""
    offset = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:  # the range starts past the server's file: the .part is of another file
            part.unlink()
            raise _Retryable("the partial file is longer than the server's; starting over") from None
        if e.code >= 500 or e.code in RETRYABLE_STATUS:
            raise _Retryable(f"HTTP {e.code} {e.reason}") from None
        raise DownloadError(f"download of {url} failed (HTTP {e.code} {e.reason}); check the URL") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        raise _Retryable(str(getattr(e, "reason", None) or e)) from None
    with response:
        resumed = offset > 0 and response.status == 206 and _range_start(response) == offset
        start = offset if resumed else 0
        length = response.headers.get("Content-Length")
        expected = start + int(length) if length is not None and length.isdigit() else None
        if response.status == 206 and not resumed:  # a part of the file we did not ask for
            part.unlink(missing_ok=True)
            raise _Retryable("the server answered another range than asked; starting over")
        received = start
        # unbuffered: what arrived is on disk when the connection drops, for the next attempt to resume
        with part.open("ab" if resumed else "wb", buffering=0) as f:
            while True:
                try:
                    chunk = response.read1(CHUNK)  # what has arrived: read() would wait for a whole chunk
                except (http.client.HTTPException, OSError) as e:  # a write error below is not retried
                    raise _Retryable(f"connection lost after {received} bytes ({e or type(e).__name__})") from None
                if not chunk:
                    break
                f.write(chunk)
                received += len(chunk)
            os.fsync(f.fileno())
    if expected is not None and received < expected:
        raise _Retryable(f"connection closed after {received} of {expected} bytes")


def _range_start(response: http.client.HTTPResponse) -> int | None:
    """First byte of a 206 reply's ``Content-Range: bytes START-END/TOTAL``; None when absent or unreadable."""
    value = response.headers.get("Content-Range", "")
    unit, _, span = value.partition(" ")
    start = span.partition("-")[0]
    return int(start) if unit == "bytes" and start.isdigit() else None
