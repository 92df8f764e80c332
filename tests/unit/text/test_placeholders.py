"""seq2seq.text.placeholders: non-translatables masked and restored exactly, a span the model dropped
appended and reported, an invented placeholder removed; training pairs masked where both sides agree."""

import re

import pytest

from seq2seq.text.placeholders import PLACEHOLDERS, mask, mask_training_pair, restore


@pytest.mark.parametrize(
    ("sentence", "spans"),
    [
        ("我有3个苹果和12本书。", ["3", "12"]),
        ("我的电话号码是138-0013-8000。", ["138-0013-8000"]),
        ("访问 https://github.com/pytorch/pytorch 查看源代码。", ["https://github.com/pytorch/pytorch"]),
        ("请发邮件到 li.wei@example.com。", ["li.wei@example.com"]),
        ("你可以访问www.example.org了解更多。", ["www.example.org"]),  # a URL ends where Chinese text begins
        ("iPhone 15 很贵。", ["iPhone 15"]),
        ("版本 v2.1.3 修复了 read_file() 的问题。", ["v2.1.3", "read_file"]),
        ("价格是$3.50,折扣10%,共有1,234,567人。", ["$3.50", "10%", "1,234,567"]),
        ("我用 Visual Studio Code 打开 config.yaml。", ["Visual Studio Code", "config.yaml"]),
    ],
)
def test_every_non_translatable_of_a_chinese_sentence_is_masked_and_restored_exactly(sentence, spans):
    masked = mask(sentence, latin_words=True)
    assert masked.spans == spans
    assert not any(span in masked.text for span in spans)
    assert restore(masked.text, masked) == (sentence, [])


def test_the_same_span_twice_takes_one_placeholder():
    masked = mask("3个和3本", latin_words=True)
    assert masked.text == "⦅1⦆个和⦅1⦆本" and masked.spans == ["3"]


def test_in_a_latin_script_source_only_code_like_tokens_are_masked():
    masked = mask("Tom uses read_file and numpy 2.1 at www.foo.com, call 555-1234.", latin_words=False)
    assert masked.spans == ["read_file", "2.1", "www.foo.com", "555-1234"]
    assert masked.text.startswith("Tom uses ⦅1⦆ and numpy ⦅2⦆")


def test_a_span_the_model_dropped_is_appended_before_the_full_stop_and_reported():
    text, warnings = restore("I have ⦅1⦆ apples and books.", mask("我有3个苹果和12本书。", True))
    assert text == "I have 3 apples and books 12."
    assert warnings == ["'12' was dropped by the model: appended"]


def test_a_span_the_source_holds_twice_must_come_back_twice():
    masked = mask("今天是2025年1月1日。", True)
    assert masked.text == "今天是⦅1⦆年⦅2⦆月⦅2⦆日。"
    assert restore("Today is ⦅2⦆ ⦅2⦆, ⦅1⦆.", masked) == ("Today is 1 1, 2025.", [])
    assert restore("Today is ⦅2⦆, ⦅1⦆.", masked) == ("Today is 1, 2025 1.", ["'1' was dropped by the model: appended"])


def test_a_placeholder_the_model_invented_is_removed_and_reported():
    text, warnings = restore("I have ⦅1⦆ ⦅7⦆ apples.", mask("我有3个苹果。", True))
    assert text == "I have 3 apples."
    assert len(warnings) == 1 and "⦅7⦆" in warnings[0]


def test_a_span_written_more_often_than_the_source_has_it_is_kept_and_reported():
    text, warnings = restore("⦅1⦆ and ⦅1⦆.", mask("Tom来了。", True))
    assert text == "Tom and Tom." and "more often" in warnings[0]


def test_spans_past_the_placeholders_stay_as_text():
    numbers = [str(n) for n in range(10, 10 + len(PLACEHOLDERS) + 2)]
    masked = mask("和".join(numbers), latin_words=True)
    assert masked.spans == numbers[: len(PLACEHOLDERS)]
    assert masked.text.endswith("和".join(numbers[len(PLACEHOLDERS) :]))
    assert restore(masked.text, masked)[0] == "和".join(numbers)


def _symbols(text: str) -> list[str]:
    return re.findall(r"⦅\d+⦆", text)


def test_training_pairs_mask_spans_both_sides_share_with_one_placeholder():
    src, tgt = mask_training_pair("我用Python写了3个程序。", "I wrote 3 programs in Python.", True, rate=0.0)
    python, three = _symbols(src)  # numbered at random, so that every placeholder is learnt
    assert src == f"我用{python}写了{three}个程序。" and tgt == f"I wrote {three} programs in {python}."
    assert python != three and {python, three} <= set(PLACEHOLDERS)


def test_numerals_and_names_are_masked_in_the_share_asked_for():
    pair = ("汤姆有三个孩子。", "Tom has three children.")
    assert mask_training_pair(*pair, True, rate=0.0) == pair
    src, tgt = mask_training_pair(*pair, True, rate=1.0)
    tom, three = _symbols(src)
    assert src == f"{tom}有{three}个孩子。" and tgt == f"{tom} has {three} children."
    assert mask_training_pair(*pair, True, rate=1.0) == (src, tgt)  # the same pair is masked the same way
    pairs = [(f"汤姆有三个孩子{chr(0x4E00 + i)}。", "Tom has three children.") for i in range(200)]
    masked = sum(mask_training_pair(s, t, True, rate=0.5)[0] != s for s, t in pairs)
    assert 70 < masked < 130


def test_spans_without_a_counterpart_stay_as_they_are():
    for pair in [("他住在5号。", "He lives at number six."), ("肯定是汤姆。", "It must be Thomas.")]:
        assert mask_training_pair(*pair, True, rate=1.0) == pair


def test_a_span_is_aligned_only_where_it_stands_whole_on_the_other_side():
    """A 3 is not the 3 of "3.5" nor of "13": a pair whose target holds only those keeps its 3 on both sides."""
    for pair in [("我付了3元。", "I paid 3.5 yuan."), ("我付了3元。", "I paid 13 yuan.")]:
        assert mask_training_pair(*pair, True, rate=1.0) == pair
