"""Tests for scripts/fetch_data.py: local copies, TSV/zip conversion, env var, idempotency, errors.

No test reaches the network: an autouse fixture makes ``urllib.request.urlopen`` raise, and every
subprocess run passes ``--local``.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import os
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "fetch_data.py"
SHARED = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_data", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_data"] = module
    spec.loader.exec_module(module)
    return module


fd = _load()


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any download attempt fails loudly; the env var is unset unless a test sets it."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("test tried to reach the network")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.delenv(fd.ENV_VAR, raising=False)


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
    env = {k: v for k, v in os.environ.items() if k != fd.ENV_VAR}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_copy_local_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "data" / "corpus"
    assert fd.fetch(out, src) == 3
    for name in ("all.zh", "all.en", "ATTRIBUTION.tsv", "README.md"):
        assert (out / name).read_bytes() == (src / name).read_bytes()
    line = capsys.readouterr().out.strip()
    assert "\n" not in line
    assert "3 pairs" in line and str(src) in line and str(out) in line
    assert fd.sha256(out / "all.zh") in line and fd.sha256(out / "all.en") in line
    assert leftovers(out.parent) == []


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared corpus copy {SHARED} is absent")
def test_copy_shared_corpus(tmp_path: Path) -> None:
    out = tmp_path / "tatoeba-cmn-eng"
    assert fd.fetch(out, SHARED) == 23993
    assert fd.sha256(out / "all.zh") == "27858b681a2032e731140909814415a8a4c0d80fcd926ed5a35c7725d67296f6"
    assert fd.sha256(out / "all.en") == "4e21d3834e616b0fac924d54abefb75763d6669453f534a541b56257a100b927"
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
    assert fd.fetch(out, tsv) == 3
    check_converted(out)
    line = capsys.readouterr().out
    assert "1 empty-side pairs dropped" in line and "1 malformed lines (first at line 4)" in line


def test_convert_zip_and_directory_with_tsv(tmp_path: Path) -> None:
    archive = tmp_path / "cmn-eng.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("_about.txt", "about")
        z.writestr("cmn.txt", TSV)
    assert fd.fetch(tmp_path / "from_zip", archive) == 3
    check_converted(tmp_path / "from_zip")

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "cmn.txt").write_text(TSV, encoding="utf-8")
    assert fd.fetch(tmp_path / "from_folder", folder) == 3
    check_converted(tmp_path / "from_folder")


def test_env_var_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setenv(fd.ENV_VAR, str(src))  # urlopen still raises: a download would fail the test
    assert fd.main(["--out", str(out)]) == 0
    assert (out / "all.zh").read_bytes() == (src / "all.zh").read_bytes()
    assert f"local directory {src}" in capsys.readouterr().out


def test_download_is_converted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("cmn.txt", TSV)
    seen: list[Any] = []

    def fake_urlopen(request: urllib.request.Request, timeout: float) -> io.BytesIO:
        seen.append((request.full_url, request.get_header("User-agent"), timeout))
        return io.BytesIO(buffer.getvalue())

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    assert fd.fetch(tmp_path / "out", None) == 3
    check_converted(tmp_path / "out")
    assert seen and seen[0][0] == fd.URL and seen[0][1] and seen[0][2] > 0


def test_download_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    assert fd.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fd.URL in err and "--local" in err
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_idempotent_and_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "out"
    assert fd.fetch(out, src) == 3
    (out / "marker").write_text("kept", encoding="utf-8")
    (src / "all.zh").write_text("一\n二\n", encoding="utf-8")
    (src / "all.en").write_text("one\ntwo\n", encoding="utf-8")
    (src / "ATTRIBUTION.tsv").unlink()
    capsys.readouterr()
    assert fd.fetch(out, src) == 3  # complete already: untouched
    assert (out / "marker").exists()
    assert "already complete" in capsys.readouterr().out
    assert fd.fetch(out, src, force=True) == 2
    assert not (out / "marker").exists()
    assert (out / "all.en").read_text(encoding="utf-8") == "one\ntwo\n"
    assert leftovers(tmp_path) == []


def test_incomplete_output_is_replaced(tmp_path: Path) -> None:
    src = tiny_dir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "all.zh").write_text("only one side\n", encoding="utf-8")
    assert fd.fetch(out, src) == 3
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
        result = run_script("--out", str(tmp_path / "out"), env_extra={fd.ENV_VAR: str(missing)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(missing) in result.stderr and "does not exist" in result.stderr


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tsv = tmp_path / "cmn.txt"
    tsv.write_bytes("Hi.\t嗨。\n".encode("gb18030"))
    assert fd.main(["--local", str(tsv), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err and str(tsv) in err


# --- --lexicon cedict --------------------------------------------------------------------------

# CC-CEDICT-format lines written for these tests (traditional simplified [pinyin] /sense/.../), one per rule.
CEDICT = """# CC-CEDICT
#! version=1
北京 北京 [Bei3 jing1] /Beijing, capital of the People's Republic of China/
咖啡 咖啡 [ka1 fei1] /coffee (loanword)/CL:杯[bei1]/
杯 杯 [bei1] /cup/trophy cup/classifier for certain containers of liquids: glass, cup/
個 个 [ge4] /CL:個|个[ge4]/individual/
們 们 [men5] /plural marker for pronouns, and nouns referring to individuals/
他 他 [ta1] /(literary) other/he; him (used for either sex)/
喫 吃 [chi1] /variant of 吃[chi1]/
李 李 [Li3] /surname Li/
蘋 苹 [ping2] /see 蘋果|苹果[ping2 guo3]/
打 打 [da3] /to beat sb/to strike sth/
天氣 天气 [tian1 qi4] /weather/
天氣 天气 [tian1 qi5] /the second entry of a headword/
3C 3C [san1 C] /computers, communications, and consumer electronics/
長篇 长篇 [chang2 pian1] /a very long definition that is not a short gloss at all/
嗯 嗯 [ng4] /(interjection)/
this line is not an entry
"""


def test_cedict_pairs_keep_the_first_usable_sense_and_count_the_rest():
    pairs, counts = fd.cedict_pairs(CEDICT.splitlines())
    assert pairs == [
        ("北京", "Beijing"),  # a comma ends the gloss
        ("咖啡", "coffee"),  # parenthetical and classifier note dropped
        ("杯", "cup"),
        ("个", "individual"),  # the classifier sense skipped, the next one used
        ("们", "plural marker for pronouns"),
        ("他", "other"),  # "(literary)" dropped; the first usable sense wins
        ("打", "to beat somebody"),  # CEDICT's sb/sth spelled out
        ("天气", "weather"),
    ]
    assert counts == {
        "kept": 8,
        "variant": 1,
        "surname": 1,
        "cross_reference": 1,
        "duplicate_headword": 1,
        "not_chinese": 1,
        "too_long": 1,
        "empty": 1,  # nothing left once the parenthetical goes
        "malformed": 1,
    }


def test_sense_gloss_reasons():
    assert fd.sense_gloss("CL:杯[bei1]") == (None, "classifier")
    assert fd.sense_gloss("old variant of 喫[chi1]") == (None, "variant")
    assert fd.sense_gloss("surname Wang") == (None, "surname")
    assert fd.sense_gloss("see also 北京[Bei3 jing1]") == (None, "cross_reference")
    assert fd.sense_gloss("abbr. for Beijing") == (None, "cross_reference")
    assert fd.sense_gloss("(Tw) (slang)") == (None, "empty")
    assert fd.sense_gloss("to drink (tea (or coffee))") == ("to drink", None)
    assert fd.sense_gloss("one two three four five") == (None, "too_long")


def test_fetch_lexicon_writes_aligned_pairs_and_attribution(tmp_path, capsys):
    source = tmp_path / "cedict.txt.gz"
    source.write_bytes(gzip.compress(CEDICT.encode()))
    out = tmp_path / "cedict"
    assert fd.main(["--lexicon", "cedict", "--local", str(source), "--out", str(out)]) == 0
    zh = (out / "all.zh").read_text(encoding="utf-8").splitlines()
    en = (out / "all.en").read_text(encoding="utf-8").splitlines()
    assert list(zip(zh, en, strict=True)) == fd.cedict_pairs(CEDICT.splitlines())[0]
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 4.0" in readme and "creativecommons.org/licenses/by-sa/4.0" in readme
    summary = capsys.readouterr().out
    assert "8 entries kept" in summary and "surname 1" in summary and "variant 1" in summary


def test_fetch_lexicon_errors_are_one_line(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("# only comments\n", encoding="utf-8")
    result = run_script("--lexicon", "cedict", "--local", str(empty), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no usable CC-CEDICT entries" in result.stderr and not (tmp_path / "out").exists()
