"""seq2seq.text.segment: sentences of Chinese and English paragraphs (quotes, decimals, abbreviations,
ellipses), joined with the target's spacing; a sentence too long for the model cut at clauses."""

import pytest

from seq2seq.data.corpus import normalize
from seq2seq.text.segment import cut_long, join_sentences, split_sentences


@pytest.mark.parametrize(
    ("paragraph", "lang", "expected"),
    [
        (  # a quotation closes after its full stop: the quote mark stays with its sentence
            "他说：“我明天去北京。”然后就走了。",
            "zh",
            ["他说:“我明天去北京。”", "然后就走了。"],
        ),
        (  # a decimal and a dotted address are no sentence ends; ! and ? are, with no space after them
            "价格是3.5元！网址是 www.example.com。真的吗？",
            "zh",
            ["价格是3.5元!", "网址是 www.example.com。", "真的吗?"],
        ),
        ("真的吗……我不信。", "zh", ["真的吗......", "我不信。"]),  # NFKC spells the ellipsis as full stops
        (
            "Dr. Smith paid $3.50 for it. He left at 5 p.m. yesterday. Was it e.g. a joke?",
            "en",
            ["Dr. Smith paid $3.50 for it.", "He left at 5 p.m. yesterday.", "Was it e.g. a joke?"],
        ),
        (
            'He said "Wait... what?" and left. Version 2.1 is out.',
            "en",
            ['He said "Wait... what?" and left.', "Version 2.1 is out."],
        ),
        ("", "zh", []),
        ("   ", "en", []),
    ],
)
def test_paragraphs_split_into_their_sentences(paragraph, lang, expected):
    assert split_sentences(normalize(paragraph), lang) == expected


def test_sentences_join_with_the_target_languages_spacing():
    assert join_sentences(["I am tired.", "", "He called."], "en") == "I am tired. He called."
    assert join_sentences(["我很累。", "他打电话了。"], "zh") == "我很累。他打电话了。"
    assert join_sentences(["我很累。", "他打电话了。"], "zh-Hant") == "我很累。他打电话了。"


def test_a_long_sentence_is_cut_at_clause_boundaries_and_nothing_is_lost():
    sentence = "我想早点睡觉,但是我的朋友打电话来了,他说他明天要来北京看我;我们可以一起去吃烤鸭。"
    parts = cut_long(sentence, lambda text: len(text) > 20)
    assert parts == ["我想早点睡觉,但是我的朋友打电话来了,", "他说他明天要来北京看我;", "我们可以一起去吃烤鸭。"]
    assert "".join(parts) == sentence


def test_a_sentence_without_clauses_is_cut_at_spaces_then_anywhere():
    assert cut_long("aaaa bbbb cccc dddd", lambda text: len(text) > 10) == ["aaaa bbbb", "cccc dddd"]
    parts = cut_long("一" * 50, lambda text: len(text) > 20)
    assert "".join(parts) == "一" * 50 and all(len(p) <= 20 for p in parts)
    assert cut_long("short", lambda text: len(text) > 20) == ["short"]
