"""seq2seq.text.language: a sentence not in the source language is named and passed through; one in it
(Latin-script terms inside included) is translated; without a source language nothing is checked."""

import pytest

from seq2seq.text.language import LanguageCheck, has_own_script, uses_latin_script


@pytest.mark.parametrize(
    "sentence",
    ["The weather is nice today.", "Hello!", "I love you.", "Where is the station?", "OK, thanks.", "iPhone 15"],
)
def test_english_given_to_a_chinese_model_passes_through_as_the_target_language(sentence):
    verdict = LanguageCheck("zh", "en").verdict(sentence)
    assert not verdict.translate and verdict.language == "en"
    assert "already in the target language" in verdict.warning("en")


def test_a_third_language_is_flagged_by_name():
    verdict = LanguageCheck("zh", "en").verdict("Merci beaucoup, je suis très content de vous voir.")
    assert not verdict.translate and verdict.language == "fr"
    assert "looks like fr" in verdict.warning("en")


@pytest.mark.parametrize(
    "sentence", ["我用 Python 写了一个小程序。", "iPhone 15 很贵。", "今天天氣很好。", "138-0013-8000", "3.14"]
)
def test_chinese_and_text_without_letters_are_translated(sentence):
    verdict = LanguageCheck("zh", "en").verdict(sentence)
    assert verdict.translate and verdict.warning("en") is None


def test_a_latin_script_source_is_checked_by_the_classifier_alone():
    check = LanguageCheck("en", "zh")
    assert check.verdict("How are you doing today, my friend?").translate
    chinese = check.verdict("我今天很累,想早点睡觉。")
    assert not chinese.translate and chinese.language == "zh"


def test_without_a_source_language_every_sentence_is_translated():
    assert LanguageCheck(None, "en").verdict("The weather is nice today.").translate


def test_scripts():
    assert has_own_script("iPhone 15 很贵", "zh") and not has_own_script("iPhone 15", "zh")
    assert not has_own_script("anything", "en")
    assert uses_latin_script("en") and uses_latin_script(None) and not uses_latin_script("zh-Hant")
