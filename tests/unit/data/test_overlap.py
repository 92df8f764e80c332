"""seq2seq.data.overlap: a pair shares a side with an evaluation sentence when either side matches one after
NFKC, simplified script and letters/digits only; a sentence of punctuation alone matches nothing."""

import pytest

from seq2seq.data.overlap import Overlap

pytest.importorskip("opencc")


def test_a_side_matches_after_normalization():
    overlap = Overlap({"test.zh": "我們試試看！\n", "test.tsv": "Hello, World!\t他昨天去了北京。\n"})
    assert overlap.shares_a_side("我们试试看。", "Something else.")  # traditional, other punctuation
    assert overlap.shares_a_side("别的。", "hello world")  # case and punctuation
    assert overlap.shares_a_side("他昨天去了北京", "x")  # a tab-separated column
    assert not overlap.shares_a_side("别的。", "Hello, world, again!")


def test_punctuation_alone_matches_nothing_and_the_files_are_named():
    overlap = Overlap({"a.txt": "！？\n...\n", "b.txt": "Hi.\n"})
    assert not overlap.shares_a_side("！", "...")
    assert overlap.describe() == "0 Chinese and 1 English sentences from a.txt, b.txt"
