"""seq2seq.data.sources.cedict: which CC-CEDICT sense becomes an entry's gloss, why the others are dropped, and
the lexicon directory it writes."""

import gzip
from pathlib import Path

import pytest
from conftest import main_error

from seq2seq.data.sources import cedict

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
    pairs, counts = cedict.cedict_pairs(CEDICT.splitlines())
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
    assert cedict.sense_gloss("CL:杯[bei1]") == (None, "classifier")
    assert cedict.sense_gloss("old variant of 喫[chi1]") == (None, "variant")
    assert cedict.sense_gloss("surname Wang") == (None, "surname")
    assert cedict.sense_gloss("see also 北京[Bei3 jing1]") == (None, "cross_reference")
    assert cedict.sense_gloss("abbr. for Beijing") == (None, "cross_reference")
    assert cedict.sense_gloss("(Tw) (slang)") == (None, "empty")
    assert cedict.sense_gloss("to drink (tea (or coffee))") == ("to drink", None)
    assert cedict.sense_gloss("one two three four five") == (None, "too_long")


def test_fetch_lexicon_writes_aligned_pairs_and_attribution(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "cedict.txt.gz"
    source.write_bytes(gzip.compress(CEDICT.encode()))
    out = tmp_path / "cedict"
    assert cedict.fetch_lexicon(out, source) == 8
    zh = (out / "all.zh").read_text(encoding="utf-8").splitlines()
    en = (out / "all.en").read_text(encoding="utf-8").splitlines()
    assert list(zip(zh, en, strict=True)) == cedict.cedict_pairs(CEDICT.splitlines())[0]
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 4.0" in readme and "creativecommons.org/licenses/by-sa/4.0" in readme
    summary = capsys.readouterr().out
    assert "8 entries kept" in summary and "surname 1" in summary and "variant 1" in summary


def test_fetch_lexicon_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("# only comments\n", encoding="utf-8")
    error = main_error(capsys, "fetch", "--lexicon", "cedict", "--local", str(empty), "--out", str(tmp_path / "out"))
    assert "no usable CC-CEDICT entries" in error and not (tmp_path / "out").exists()
