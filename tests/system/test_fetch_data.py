"""Tests for ``seq2seq fetch`` (seq2seq/cli/fetch.py and the sources of seq2seq/data/sources/): local copies, TSV/zip
conversion, env var, idempotency, errors; Tatoeba's exports and the HSK sentences on fixtures; downloads from a
loopback server that drops connections, ignores ranges, serves a wrong file or is left mid-file by a killed
fetch; and the proportions of one epoch of the default recipe's mixed corpora.

No test reaches the network: an autouse fixture makes ``urllib.request.urlopen`` refuse every host but
127.0.0.1, and every subprocess run passes ``--local`` or a loopback ``--mirror``.
"""

from __future__ import annotations

import bz2
import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
from conftest import TOY_SRC, TOY_TGT, LoopbackFiles

from seq2seq.cli import main as cli_main
from seq2seq.cli.fetch import LOCAL_ENV
from seq2seq.config import load_config
from seq2seq.data.batching import BucketSampler
from seq2seq.data.corpus import read_pair_files
from seq2seq.data.mixing import CorpusMix
from seq2seq.data.pipeline import prepare_data
from seq2seq.data.sources import common, download, hsk, tatoeba, tatoeba_full

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"


def fetch_main(argv: list[str]) -> int:
    """``seq2seq fetch ARGV`` in this process; its exit status."""
    try:
        cli_main(["fetch", *argv])
    except SystemExit as done:
        return int(done.code)
    return 0


FAST = download.Retry(attempts=3, backoff_s=0.0, timeout_s=10.0)  # retries without waiting


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any download from another host than 127.0.0.1 fails loudly; the env vars are unset unless a test sets them."""
    real = urllib.request.urlopen

    def loopback_only(request: Any, *args: Any, **kwargs: Any) -> Any:
        url = request.full_url if isinstance(request, urllib.request.Request) else str(request)
        if urllib.parse.urlsplit(url).hostname != "127.0.0.1":
            raise AssertionError(f"test tried to reach the network: {url}")
        return real(request, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", loopback_only)
    for variable in LOCAL_ENV.values():
        monkeypatch.delenv(variable, raising=False)


def make_dir(path: Path, zh: list[str], en: list[str], attribution: list[str] | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "all.zh").write_text("".join(x + "\n" for x in zh), encoding="utf-8")
    (path / "all.en").write_text("".join(x + "\n" for x in en), encoding="utf-8")
    if attribution is not None:
        (path / "ATTRIBUTION.tsv").write_text("".join(x + "\n" for x in attribution), encoding="utf-8")
    (path / "README.md").write_text("# tiny\n", encoding="utf-8")
    return path


def tiny_dir(tmp_path: Path) -> Path:
    return make_dir(tmp_path / "src", ["嗨。", "等等！", "你好。"], ["Hi.", "Wait!", "Hello."], ["a", "b", "c"])


TSV = (
    "Hi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #891077 (Martha)\n"
    "  Wait!  \t 等等！ \tattr 2\n"
    "Empty.\t   \tattr 3\n"
    "no tab here\n"
    "Run.\t跑。\n"
)


def run_script(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``seq2seq fetch ARGS`` in this process (the command line's own error handling, without an interpreter
    start: the killed-download test below runs the real process), the local-copy variables unset but for
    ``env_extra``; its exit status and output as a finished process would have them."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env_extra or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for name in set(LOCAL_ENV.values()) - set(env_extra or {}):
            os.environ.pop(name, None)
        status = fetch_main(list(args))
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_copy_local_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "data" / "corpus"
    assert tatoeba.fetch(out, src) == 3
    for name in ("all.zh", "all.en", "ATTRIBUTION.tsv", "README.md"):
        assert (out / name).read_bytes() == (src / name).read_bytes()
    line = capsys.readouterr().out.strip()
    assert "\n" not in line
    assert "3 pairs" in line and str(src) in line and str(out) in line
    assert common.sha256(out / "all.zh") in line and common.sha256(out / "all.en") in line
    assert leftovers(out.parent) == []


@pytest.mark.skipif(not (SHARED / "tatoeba-cmn-eng").is_dir(), reason=f"shared corpus copy {SHARED} is absent")
def test_copy_shared_corpus(tmp_path: Path) -> None:
    out = tmp_path / "tatoeba-cmn-eng"
    assert tatoeba.fetch(out, SHARED / "tatoeba-cmn-eng") == 23993
    assert common.sha256(out / "all.zh") == "27858b681a2032e731140909814415a8a4c0d80fcd926ed5a35c7725d67296f6"
    assert common.sha256(out / "all.en") == "4e21d3834e616b0fac924d54abefb75763d6669453f534a541b56257a100b927"
    assert (out / "ATTRIBUTION.tsv").is_file()


def check_converted(out: Path) -> None:
    assert (out / "all.en").read_text(encoding="utf-8") == "Hi.\nWait!\nRun.\n"
    assert (out / "all.zh").read_text(encoding="utf-8") == "嗨。\n等等！\n跑。\n"
    attribution = (out / "ATTRIBUTION.tsv").read_text(encoding="utf-8").split("\n")
    assert attribution[1:] == ["attr 2", "", ""]
    assert attribution[0].startswith("CC-BY 2.0 (France)")


def test_convert_tsv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tsv = tmp_path / "cmn.txt"
    tsv.write_text(TSV, encoding="utf-8")
    out = tmp_path / "out"
    assert tatoeba.fetch(out, tsv) == 3
    check_converted(out)
    line = capsys.readouterr().out
    assert "1 empty-side pairs dropped" in line and "1 malformed lines (first at line 4)" in line


def test_convert_zip_and_directory_with_tsv(tmp_path: Path) -> None:
    archive = tmp_path / "cmn-eng.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("_about.txt", "about")
        z.writestr("cmn.txt", TSV)
    assert tatoeba.fetch(tmp_path / "from_zip", archive) == 3
    check_converted(tmp_path / "from_zip")

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "cmn.txt").write_text(TSV, encoding="utf-8")
    assert tatoeba.fetch(tmp_path / "from_folder", folder) == 3
    check_converted(tmp_path / "from_folder")


def test_env_var_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setenv(common.ENV_VAR, str(src))  # urlopen still raises: a download would fail the test
    assert fetch_main(["--out", str(out)]) == 0
    assert (out / "all.zh").read_bytes() == (src / "all.zh").read_bytes()
    assert f"local directory {src}" in capsys.readouterr().out


def test_download_is_converted(tmp_path: Path, loopback: LoopbackFiles) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("cmn.txt", TSV)
    loopback.files["/anki/cmn-eng.zip"] = buffer.getvalue()
    remote = common.Remote(tmp_path / "downloads", f"{loopback.url}/anki", allow_unpinned=True, retry=FAST)
    assert tatoeba.fetch(tmp_path / "out", None, remote=remote) == 3
    check_converted(tmp_path / "out")
    assert loopback.requests == [("/anki/cmn-eng.zip", None)]
    assert (tmp_path / "downloads" / "cmn-eng.zip").read_bytes() == buffer.getvalue()  # kept for the next run
    assert "not overlap-filtered" in (tmp_path / "out" / "README.md").read_text(encoding="utf-8")


def test_download_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    args = ["--out", str(tmp_path / "out"), "--downloads", str(tmp_path / "dl"), "--allow-unpinned", "--retries", "1"]
    assert fetch_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and tatoeba.URL in err and "no route to host" in err and "--local" in err
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_unpinned_download_is_refused_before_any_request(
    tmp_path: Path, loopback: LoopbackFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    for corpus, mirror in (("tatoeba", f"{loopback.url}/anki"), ("tatoeba-full", f"{loopback.url}/exports")):
        out = tmp_path / corpus
        args = ["--corpus", corpus, "--out", str(out), "--downloads", str(tmp_path / "dl"), "--mirror", mirror]
        assert fetch_main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no pinned sha256" in err and "--allow-unpinned" in err and mirror in err
        assert not out.exists()
    assert loopback.requests == []


def test_idempotent_and_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "out"
    assert tatoeba.fetch(out, src) == 3
    (out / "marker").write_text("kept", encoding="utf-8")
    (src / "all.zh").write_text("一\n二\n", encoding="utf-8")
    (src / "all.en").write_text("one\ntwo\n", encoding="utf-8")
    (src / "ATTRIBUTION.tsv").unlink()
    capsys.readouterr()
    assert tatoeba.fetch(out, src) == 3  # complete already: untouched
    assert (out / "marker").exists()
    assert "already complete" in capsys.readouterr().out
    assert tatoeba.fetch(out, src, force=True) == 2
    assert not (out / "marker").exists()
    assert (out / "all.en").read_text(encoding="utf-8") == "one\ntwo\n"
    assert leftovers(tmp_path) == []


def test_incomplete_output_is_replaced(tmp_path: Path) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "all.zh").write_text("only one side\n", encoding="utf-8")
    assert tatoeba.fetch(out, src) == 3
    assert (out / "all.en").is_file()


def test_misaligned_local_files(tmp_path: Path) -> None:
    src = make_dir(tmp_path / "src", ["一", "二", "三"], ["one", "two"])
    out = tmp_path / "out"
    result = run_script("--local", str(src), "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(src) in result.stderr and "line-aligned" in result.stderr
    assert not out.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("via", ["option", "env"])
def test_missing_local_path(tmp_path: Path, via: str) -> None:
    missing = tmp_path / "nowhere"
    if via == "option":
        result = run_script("--local", str(missing), "--out", str(tmp_path / "out"))
    else:
        result = run_script("--out", str(tmp_path / "out"), env_extra={common.ENV_VAR: str(missing)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(missing) in result.stderr and "does not exist" in result.stderr


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tsv = tmp_path / "cmn.txt"
    tsv.write_bytes("Hi.\t嗨。\n".encode("gb18030"))
    assert fetch_main(["--local", str(tsv), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err and str(tsv) in err


# --- Tatoeba's exports (--corpus tatoeba-full) ----------------------------------------------------

# (id, lang, text, contributor): both scripts, whitespace to collapse, a row of another language, a
# sentence whose only link points to an English sentence that is not in the export.
CMN_ROWS = [
    (1, "cmn", "我們試試看！", "sysko"),
    (2, "cmn", "我们试试看！", None),
    (3, "cmn", "  你好，  世界。 ", "fu"),
    (4, "jpn", "日本語です。", "x"),
    (6, "cmn", "他昨天去了北京。", "a"),
]
ENG_ROWS = [(10, "eng", "Let's try something.", "CK"), (11, "eng", "Hello, world.", None), (12, "eng", "Spare.", "CK")]
# a repeated link, a link to a missing English sentence (99) and one from a missing Chinese sentence (77)
LINKS = [(1, 10), (2, 10), (3, 11), (1, 10), (6, 99), (77, 10)]
EXPECTED_ZH = ["我們試試看！", "我们试试看！", "你好， 世界。"]
EXPECTED_EN = ["Let's try something.", "Let's try something.", "Hello, world."]
EXPECTED_CREDITS = [
    "CC-BY 2.0 (France) Attribution: tatoeba.org #10 (CK) & #1 (sysko)",
    "CC-BY 2.0 (France) Attribution: tatoeba.org #10 (CK) & #2",  # \N: contributor unknown
    "CC-BY 2.0 (France) Attribution: tatoeba.org #11 & #3 (fu)",
]


UNKNOWN = "\\N"  # how the detailed exports write an unknown contributor or date


def sentences_export(rows: list[tuple[int, str, str, str | None]], detailed: bool) -> bytes:
    """A sentences export of ``rows`` (``_detailed``: with contributor and dates), a malformed line 3 inserted."""
    lines = [
        f"{i}\t{lang}\t{text}\t{user or UNKNOWN}\t2010-01-01 00:00:00\t{UNKNOWN}"
        if detailed
        else f"{i}\t{lang}\t{text}"
        for i, lang, text, user in rows
    ]
    lines.insert(2, "this line has no columns")  # malformed: line 3
    return "".join(line + "\n" for line in lines).encode()


def links_export() -> bytes:
    return "".join(f"{a}\t{b}\n" for a, b in LINKS).encode() + b"1\tten\n"  # malformed: line 7


def write_exports(directory: Path, *, detailed: bool = True, compress: bool = True) -> dict[str, bytes]:
    """The three export files, as Tatoeba names them, in ``directory``; returns their bytes by name."""
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ("_detailed" if detailed else "") + ".tsv" + (".bz2" if compress else "")
    files = {
        f"cmn_sentences{suffix}": sentences_export(CMN_ROWS, detailed),
        f"eng_sentences{suffix}": sentences_export(ENG_ROWS, detailed),
        "cmn-eng_links.tsv" + (".bz2" if compress else ""): links_export(),
    }
    files = {name: bz2.compress(data) if compress else data for name, data in files.items()}
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


def corpus_lines(out: Path) -> tuple[list[str], list[str], list[str]]:
    return tuple((out / name).read_text(encoding="utf-8").splitlines() for name in common.ALIGNED)  # type: ignore[return-value]


def test_tatoeba_full_from_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_exports(tmp_path / "exports")
    out = tmp_path / "full"
    assert fetch_main(["--corpus", "tatoeba-full", "--local", str(tmp_path / "exports"), "--out", str(out)]) == 0
    assert corpus_lines(out) == (EXPECTED_ZH, EXPECTED_EN, EXPECTED_CREDITS)  # ordered by Chinese, then English id
    summary = capsys.readouterr().out
    assert summary.count("\n") == 1
    assert "cmn_sentences_detailed.tsv.bz2: 4 rows, 1 malformed (first at line 3), 1 in another language" in summary
    assert "cmn-eng_links.tsv.bz2: 6 rows, 1 malformed (first at line 7)" in summary
    assert "2 links to a missing sentence" in summary and "not overlap-filtered" in summary
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "CC-BY 2.0 France" in readme and "NOT filtered" in readme
    assert common.verify_listed_digests(out) == 3  # the README lists the digest of every aligned file
    assert leftovers(tmp_path) == []


def test_tatoeba_full_from_plain_exports_given_as_files(tmp_path: Path) -> None:
    """The non-detailed exports (no contributor column), uncompressed, named one --local at a time."""
    files = write_exports(tmp_path / "exports", detailed=False, compress=False)
    out = tmp_path / "full"
    local = [arg for name in files for arg in ("--local", str(tmp_path / "exports" / name))]
    assert fetch_main(["--corpus", "tatoeba-full", *local, "--out", str(out)]) == 0
    zh, en, credits = corpus_lines(out)
    assert (zh, en) == (EXPECTED_ZH, EXPECTED_EN)
    assert credits == [c.replace(" (CK)", "").replace(" (sysko)", "").replace(" (fu)", "") for c in EXPECTED_CREDITS]


def test_tatoeba_full_export_errors_are_one_line(tmp_path: Path) -> None:
    write_exports(tmp_path / "exports")
    (tmp_path / "exports" / "cmn-eng_links.tsv.bz2").unlink()
    result = run_script("--corpus", "tatoeba-full", "--local", str(tmp_path / "exports"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "no Chinese-English links export" in result.stderr and "tatoeba.org/downloads" in result.stderr

    write_exports(tmp_path / "bad")
    data = (tmp_path / "bad" / "eng_sentences_detailed.tsv.bz2").read_bytes()
    (tmp_path / "bad" / "eng_sentences_detailed.tsv.bz2").write_bytes(data[: len(data) // 2])  # a truncated archive
    result = run_script("--corpus", "tatoeba-full", "--local", str(tmp_path / "bad"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "eng_sentences_detailed.tsv.bz2" in result.stderr and "re-download" in result.stderr
    assert not (tmp_path / "o").exists() and leftovers(tmp_path) == []


def test_tatoeba_full_copies_a_built_corpus_and_checks_its_digests(tmp_path: Path) -> None:
    write_exports(tmp_path / "exports")
    built = tmp_path / "built"
    assert fetch_main(["--corpus", "tatoeba-full", "--local", str(tmp_path / "exports"), "--out", str(built)]) == 0
    copy = tmp_path / "copy"
    assert fetch_main(["--corpus", "tatoeba-full", "--local", str(built), "--out", str(copy)]) == 0
    for name in (*common.ALIGNED, "README.md"):
        assert (copy / name).read_bytes() == (built / name).read_bytes()
    (built / "all.en").write_text("\n".join(EXPECTED_EN).replace("world", "word") + "\n", encoding="utf-8")
    result = run_script("--corpus", "tatoeba-full", "--local", str(built), "--out", str(tmp_path / "o"), "--force")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    got = hashlib.sha256((built / "all.en").read_bytes()).hexdigest()
    assert (
        str(built / "all.en") in result.stderr
        and got in result.stderr
        and common.sha256(copy / "all.en") in result.stderr
    )


@pytest.mark.parametrize(
    ("corpus", "pairs", "zh_digest"),
    [
        ("tatoeba-cmn-eng-full", 45284, "eadf8ac6c7a4f8a74ad7600e29e147e6727077782d3933d4554266a15a5c8735"),
        ("hsk-zh-en", 4322, "435d252d9b49764ab0b0dc579c9cd02a166718fdf1590480332915c42e4cc39d"),
    ],
)
def test_copy_of_the_shared_corpora(tmp_path: Path, corpus: str, pairs: int, zh_digest: str) -> None:
    if not (SHARED / corpus).is_dir():
        pytest.skip(f"shared corpus copy {SHARED / corpus} is absent")
    flag = "tatoeba-full" if corpus.startswith("tatoeba") else "hsk"
    out = tmp_path / corpus
    assert fetch_main(["--corpus", flag, "--local", str(SHARED / corpus), "--out", str(out)]) == 0
    assert common.complete_pairs(out) == pairs and common.sha256(out / "all.zh") == zh_digest


def test_exclude_drops_pairs_sharing_a_side_after_normalization(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_exports(tmp_path / "exports")
    chinese = tmp_path / "eval.zh"
    chinese.write_text("我们试试看\n", encoding="utf-8")  # simplified, unpunctuated: matches both scripts' lines
    out = tmp_path / "full"
    args = ["--corpus", "tatoeba-full", "--local", str(tmp_path / "exports"), "--out", str(out)]
    assert fetch_main([*args, "--exclude", str(chinese)]) == 0
    assert corpus_lines(out) == (EXPECTED_ZH[2:], EXPECTED_EN[2:], EXPECTED_CREDITS[2:])
    assert "2 pairs sharing a side with --exclude dropped" in capsys.readouterr().out
    assert "2 pairs sharing a side with 1 Chinese and 0 English sentences" in (out / "README.md").read_text("utf-8")

    full = tmp_path / "unfiltered"
    assert fetch_main([*args[:-1], str(full)]) == 0
    english = tmp_path / "eval.tsv"
    english.write_text("eng\tHELLO WORLD!!\n", encoding="utf-8")  # tab-separated fields, case and punctuation apart
    copy = tmp_path / "copy"
    assert (
        fetch_main(["--corpus", "tatoeba-full", "--local", str(full), "--out", str(copy), "--exclude", str(english)])
        == 0
    )
    assert corpus_lines(copy) == (EXPECTED_ZH[:2], EXPECTED_EN[:2], EXPECTED_CREDITS[:2])
    assert common.verify_listed_digests(copy) == 3  # the filtered copy's README lists its new digests last


# --- The HSK sentences (--corpus hsk) -----------------------------------------------------------

HSK_RECORDS = [
    {"id": "hsk1-0001", "chinese": "老师，您好！", "translation": {"en": "Hello,  teacher!"}},
    {"id": "hsk1-0002", "chinese": "我们试试看！", "translation": {}},  # malformed: no English
    {"id": "hsk1-0003", "chinese": " ", "translation": {"en": "Empty."}},  # an empty side
    "not a record",  # malformed
    {"id": "hsk2-0001", "chinese": "他昨天去了北京。", "translation": {"en": "He went to Beijing yesterday."}},
]


def test_hsk_from_a_sentences_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "pkg" / "hsk_sentences_audio" / "data" / "sentences.json"
    source.parent.mkdir(parents=True)
    source.write_text(json.dumps(HSK_RECORDS, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "hsk"
    assert fetch_main(["--corpus", "hsk", "--local", str(tmp_path / "pkg"), "--out", str(out)]) == 0  # found inside
    assert corpus_lines(out) == (
        ["老师，您好！", "他昨天去了北京。"],
        ["Hello, teacher!", "He went to Beijing yesterday."],
        ["CC BY-SA 4.0: hsk-sentences-audio hsk1-0001", "CC BY-SA 4.0: hsk-sentences-audio hsk2-0001"],
    )
    summary = capsys.readouterr().out
    assert "3 records, 2 malformed (first at record 2), 1 with an empty side dropped" in summary
    assert "CC BY-SA 4.0" in (out / "README.md").read_text(encoding="utf-8")


def test_hsk_from_the_package_checks_its_pinned_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hsk"
    assert fetch_main(["--corpus", "hsk", "--out", str(out)]) == 0  # hsk-sentences-audio is a dev install (make test)
    assert common.complete_pairs(out) == 4354 and "1.0.0 package" in capsys.readouterr().out
    assert (out / "ATTRIBUTION.tsv").read_text(encoding="utf-8").startswith("CC BY-SA 4.0: hsk-sentences-audio 1.0.0 ")

    monkeypatch.setattr(hsk, "HSK_PINS", {"1.0.0": "0" * 64})
    assert fetch_main(["--corpus", "hsk", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "0" * 64 in err and hsk.HSK_FILE.split("/")[-1] in err
    monkeypatch.setattr(hsk, "HSK_PINS", {"9.9.9": "0" * 64})
    assert fetch_main(["--corpus", "hsk", "--out", str(tmp_path / "o")]) == 2
    assert "--allow-unpinned" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert fetch_main(["--corpus", "hsk", "--out", str(tmp_path / "o"), "--allow-unpinned"]) == 0


# --- Fetching over the network (loopback), and interruptions -----------------------------------------


def serve_exports(loopback: LoopbackFiles, tmp_path: Path) -> dict[str, str]:
    """The fixture exports served at Tatoeba's paths under /exports; returns {path under the base: sha256}."""
    files = write_exports(tmp_path / "exports-src")
    served = {}
    for name in tatoeba_full.FILES:
        data = files[Path(name).name]
        loopback.files[f"/exports/{name}"] = data
        served[name] = hashlib.sha256(data).hexdigest()
    return served


def full_args(tmp_path: Path, loopback: LoopbackFiles, *extra: str) -> list[str]:
    return [
        "--corpus", "tatoeba-full", "--out", str(tmp_path / "full"), "--downloads", str(tmp_path / "dl"),
        "--mirror", f"{loopback.url}/exports", *extra,
    ]  # fmt: skip


def test_tatoeba_full_download_survives_a_dropped_connection(tmp_path: Path, loopback: LoopbackFiles) -> None:
    serve_exports(loopback, tmp_path)
    english = f"/exports/{tatoeba_full.FILES[1]}"
    loopback.drop_after[english] = 40
    assert fetch_main([*full_args(tmp_path, loopback, "--allow-unpinned"), "--retries", "2"]) == 0
    assert corpus_lines(tmp_path / "full") == (EXPECTED_ZH, EXPECTED_EN, EXPECTED_CREDITS)
    assert [r for p, r in loopback.requests if p == english] == [None, "bytes=40-"]
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == sorted(Path(n).name for n in tatoeba_full.FILES)


def test_a_wrong_file_is_a_one_line_digest_error_and_leaves_no_corpus(
    tmp_path: Path, loopback: LoopbackFiles, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    digests = serve_exports(loopback, tmp_path)
    monkeypatch.setitem(tatoeba_full.PINS, tatoeba_full.FILES[0], digests[tatoeba_full.FILES[0]])
    monkeypatch.setitem(tatoeba_full.PINS, tatoeba_full.FILES[1], digests[tatoeba_full.FILES[1]])
    monkeypatch.setitem(tatoeba_full.PINS, tatoeba_full.FILES[2], digests[tatoeba_full.FILES[2]])
    english = f"/exports/{tatoeba_full.FILES[1]}"
    wrong = bz2.compress(b"10\teng\tSomething else.\n")
    loopback.files[english] = wrong
    assert fetch_main(full_args(tmp_path, loopback)) == 2  # all pinned: no --allow-unpinned needed
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{loopback.url}{english}" in err
    assert hashlib.sha256(wrong).hexdigest() in err and digests[tatoeba_full.FILES[1]] in err
    assert not (tmp_path / "full").exists() and leftovers(tmp_path) == []
    assert not list((tmp_path / "dl").glob("*.part"))  # the wrong bytes are not kept to be resumed


def test_an_interrupted_build_leaves_no_partial_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_exports(tmp_path / "exports")
    old = make_dir(tmp_path / "full", ["旧。"], ["Old."], ["old credit"])  # a complete earlier corpus
    add = common.PairWriter.add
    written: list[str] = []

    def interrupted(self: Any, zh: str, en: str, attribution: str) -> None:
        if written:
            raise KeyboardInterrupt  # Ctrl-C in the middle of writing the new corpus
        written.append(zh)
        add(self, zh, en, attribution)

    monkeypatch.setattr(common.PairWriter, "add", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch_main(["--corpus", "tatoeba-full", "--local", str(tmp_path / "exports"), "--out", str(old), "--force"])
    assert corpus_lines(old) == (["旧。"], ["Old."], ["old credit"]) and leftovers(tmp_path) == []


def test_a_killed_download_leaves_no_corpus_and_the_next_run_resumes(tmp_path: Path, loopback: LoopbackFiles) -> None:
    """A fetch killed (SIGKILL) mid-file leaves its .part only; rerun, it asks for the rest and builds the corpus."""
    serve_exports(loopback, tmp_path)
    english = f"/exports/{tatoeba_full.FILES[1]}"
    half = len(loopback.files[english]) // 2
    loopback.stall_after[english] = half
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_ENV.values()}
    process = subprocess.Popen(
        [sys.executable, "-m", "seq2seq", "fetch", *full_args(tmp_path, loopback, "--allow-unpinned")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert loopback.stalled.wait(timeout=60)
        part = download.part_path(tmp_path / "dl" / Path(tatoeba_full.FILES[1]).name)
        deadline = time.monotonic() + 30
        while not (part.is_file() and part.stat().st_size == half) and time.monotonic() < deadline:
            time.sleep(0.01)  # the fetch writes what it received unbuffered; wait until it is all on disk
        assert part.stat().st_size == half
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert not (tmp_path / "full").exists()
    assert not (tmp_path / "dl" / Path(tatoeba_full.FILES[1]).name).exists()
    del loopback.stall_after[english]
    loopback.release.set()
    assert fetch_main(full_args(tmp_path, loopback, "--allow-unpinned")) == 0
    assert corpus_lines(tmp_path / "full") == (EXPECTED_ZH, EXPECTED_EN, EXPECTED_CREDITS)
    assert loopback.requests[-2:] == [(english, f"bytes={half}-"), (f"/exports/{tatoeba_full.FILES[2]}", None)]


# --- The default recipe's corpora, mixed ------------------------------------------------------------

RECIPE = REPO / "seq2seq" / "recipes" / "zh-en.yaml"  # data.corpora: Tatoeba-full (eval) and HSK, weighted


def test_one_epoch_of_the_recipe_holds_every_tatoeba_pair_and_a_tenth_as_many_hsk(tmp_path: Path) -> None:
    """Corpora fetched from fixtures (1600 toy pairs as Tatoeba exports, 400 as HSK records), mixed as the recipe."""
    zh, en = read_pair_files(str(TOY_SRC), str(TOY_TGT))
    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "cmn_sentences.tsv").write_text("".join(f"{i}\tcmn\t{s}\n" for i, s in enumerate(zh[:1600])), "utf-8")
    (exports / "eng_sentences.tsv").write_text("".join(f"{i}\teng\t{s}\n" for i, s in enumerate(en[:1600])), "utf-8")
    (exports / "cmn-eng_links.tsv").write_text("".join(f"{i}\t{i}\n" for i in range(1600)), "utf-8")
    records = [
        {"id": f"h{i}", "chinese": s, "translation": {"en": t}} for i, (s, t) in enumerate(zip(zh, en, strict=True))
    ]
    (tmp_path / "sentences.json").write_text(json.dumps(records[1600:], ensure_ascii=False), encoding="utf-8")
    out = {"tatoeba-full": tmp_path / "full", "hsk": tmp_path / "hsk"}
    assert fetch_main(["--corpus", "tatoeba-full", "--local", str(exports), "--out", str(out["tatoeba-full"])]) == 0
    assert fetch_main(["--corpus", "hsk", "--local", str(tmp_path / "sentences.json"), "--out", str(out["hsk"])]) == 0
    recipe = load_config(RECIPE).data.corpora
    assert [c.name for c in recipe] == ["tatoeba-full", "hsk"] and recipe[0].eval
    files = {"src": "all.zh", "tgt": "all.en"}
    overrides = [
        f"data.corpora[{i}].{side}={out[c.name] / name}" for i, c in enumerate(recipe) for side, name in files.items()
    ]
    overrides += ["data.vocab_size=1200", "data.byte_fallback=false"]  # the toy corpus's characters fill 1,200 pieces
    overrides += ["data.dev_size=100", "data.test_size=100", f"data.cache_dir={tmp_path / 'c'}"]
    cfg = load_config(RECIPE, overrides)
    data = prepare_data(cfg.data)
    mix = CorpusMix.from_config(cfg.data, data.corpus_sizes, cfg.train.seed)
    assert mix is not None
    n_tatoeba, n_hsk = data.corpus_sizes
    assert n_tatoeba > 1000 and n_hsk > 300  # what survived the split and the filters
    sampler = BucketSampler(
        data.train.src_lengths, data.train.tgt_lengths, cfg.data.batch_tokens, cfg.train.seed, items_at=mix.epoch_items
    )
    for epoch in range(2):
        served = torch.cat(list(sampler.epoch_batches(epoch))).tolist()
        tatoeba = [i for i in served if i < n_tatoeba]
        assert sorted(tatoeba) == list(range(n_tatoeba))  # every eval-corpus training pair, once
        hsk = [i for i in served if i >= n_tatoeba]
        share = recipe[1].weight / recipe[0].weight
        assert len(hsk) == round(share * n_tatoeba) == len(set(hsk))  # the recipe's share (a tenth), none twice
