"""seq2seq.data.sources.download against a loopback server with faults: a dropped connection resumed with a
Range request, a server that ignores the range, the attempts given up with the partial file kept, a 404 not
retried."""

import hashlib
import random
from pathlib import Path

import pytest
from conftest import LoopbackFiles

from seq2seq.data.sources import download

FAST = download.Retry(attempts=3, backoff_s=0.0, timeout_s=10.0)  # retries without waiting


def test_download_resumes_after_a_dropped_connection(tmp_path: Path, loopback: LoopbackFiles) -> None:
    payload = random.Random(1).randbytes(300_000)
    loopback.files["/f.bin"] = payload
    loopback.drop_after["/f.bin"] = 100_000
    dest = tmp_path / "f.bin"
    waits: list[float] = []
    digest = download.download(
        f"{loopback.url}/f.bin",
        dest,
        sha256=hashlib.sha256(payload).hexdigest(),
        retry=download.Retry(attempts=3, backoff_s=0.25),
        sleep=waits.append,
        log=lambda message: None,
    )
    assert dest.read_bytes() == payload and digest == hashlib.sha256(payload).hexdigest()
    assert loopback.requests == [("/f.bin", None), ("/f.bin", "bytes=100000-")]  # the rest, not the whole
    assert waits == [0.25] and not download.part_path(dest).exists()


def test_download_starts_over_when_the_server_ignores_the_range(tmp_path: Path, loopback: LoopbackFiles) -> None:
    payload = random.Random(2).randbytes(200_000)
    loopback.files["/f.bin"] = payload
    loopback.drop_after["/f.bin"] = 50_000
    loopback.ignore_range = True
    dest = tmp_path / "f.bin"
    download.download(
        f"{loopback.url}/f.bin", dest, sha256=hashlib.sha256(payload).hexdigest(), retry=FAST, log=lambda m: None
    )
    assert dest.read_bytes() == payload  # the 200 reply rewrote the partial file instead of appending to it
    assert [r for _, r in loopback.requests] == [None, "bytes=50000-"]


def test_download_gives_up_after_its_attempts_and_keeps_the_part(tmp_path: Path, loopback: LoopbackFiles) -> None:
    loopback.files["/f.bin"] = b"x" * 1000
    loopback.stall_after["/f.bin"] = 10  # every request: 10 more bytes, then the connection ends short
    loopback.release.set()
    dest = tmp_path / "f.bin"
    with pytest.raises(
        download.DownloadError, match=r"gave up after 2 attempts \(the last: connection closed after 20 of 1000"
    ):
        download.download(
            f"{loopback.url}/f.bin",
            dest,
            sha256=hashlib.sha256(b"x" * 1000).hexdigest(),
            retry=download.Retry(attempts=2, backoff_s=0.0),
            log=lambda m: None,
        )
    assert not dest.exists() and download.part_path(dest).stat().st_size == 20  # the second resumed the first
    assert download.Retry(backoff_s=1.0, max_backoff_s=5.0).wait_s(4) == 5.0  # doubling, capped


def test_missing_file_is_not_retried(tmp_path: Path, loopback: LoopbackFiles) -> None:
    with pytest.raises(download.DownloadError, match="HTTP 404"):
        download.download(f"{loopback.url}/absent", tmp_path / "f", sha256=None, allow_unpinned=True, retry=FAST)
    assert len(loopback.requests) == 1
