"""seq2seq.data.neardup and the near-duplicate-aware split: the similarity by hand, LSH against brute force,
closest similarity against brute force, and near-duplicates kept on one side of the split."""

import random

import pytest

from seq2seq.data.corpus import group_split
from seq2seq.data.neardup import closest_similarity, dice, grams, near_duplicates, similarity


def test_grams_are_units_and_adjacent_pairs():
    assert grams("我想喝") == {"我", "想", "喝", "我 想", "想 喝"}
    # English units are words, lower-cased; punctuation is a unit of its own
    assert grams("I like Tea.") == {"i", "like", "tea", ".", "i like", "like tea", "tea ."}
    assert grams("") == frozenset() and grams("  ") == frozenset()


def test_similarity_by_hand():
    # 我想喝咖啡。 : 6 characters + 5 pairs = 11 grams; 我想喝一杯咖啡。 : 8 + 7 = 15; shared: 6 + 4 = 10
    assert similarity("我想喝咖啡。", "我想喝一杯咖啡。") == pytest.approx(2 * 10 / (11 + 15))
    # one character differs: 9 distinct characters (们 twice) + 9 pairs each; all but 他/她 and 他们/她们 shared
    assert similarity("他们嫉妒我们的成功。", "她们嫉妒我们的成功。") == pytest.approx(2 * 16 / 36)
    assert similarity("今天很好。", "今天很好。") == 1.0
    assert similarity("", "") == 0.0 and similarity("好", "") == 0.0
    assert similarity("Hello there.", "hello THERE.") == 1.0  # case is ignored


def _brute_force_pairs(texts: list[str], threshold: float) -> set[tuple[str, str]]:
    unique = sorted({t for t in texts if grams(t)})
    sets = [grams(t) for t in unique]
    return {
        (unique[i], unique[j])
        for i in range(len(unique))
        for j in range(i + 1, len(unique))
        if dice(sets[i], sets[j]) >= threshold
    }


@pytest.mark.parametrize("side", [0, 1])
def test_lsh_finds_what_brute_force_finds(toy_pairs, side):
    texts = toy_pairs[side][:600]
    expected = _brute_force_pairs(texts, 0.8)
    assert len(expected) >= 3  # the toy corpus has near-duplicates on both sides: the test is not vacuous
    found = near_duplicates(texts, 0.8)
    assert set(found) == expected and len(found) == len(set(found))
    assert near_duplicates(texts, 0.8) == found  # deterministic (no per-process hash)


def test_closest_similarity_equals_brute_force(toy_pairs):
    src = toy_pairs[0]
    queries, corpus = src[:40] + ["", "完全没有关系的句子"], src[40:]
    got = closest_similarity(queries, corpus)
    want = [max((similarity(q, c) for c in corpus), default=0.0) for q in queries]
    assert got == pytest.approx(want)
    assert got[-2] == 0.0


def _twin_corpus(n: int = 60) -> tuple[list[str], list[str]]:
    """n pairs in n/2 near-duplicate twins: the sources differ in one character, the targets are unrelated."""
    rng = random.Random(0)
    letters = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年"
    src, tgt = [], []
    for i in range(n // 2):
        base = "".join(rng.choice(letters) for _ in range(12))
        src += [base + "。", base[:-1] + "好。"]
        tgt += [f"sentence {i} a", f"unrelated {i} b"]
    return src, tgt


def test_split_keeps_near_duplicates_on_one_side():
    src, tgt = _twin_corpus()
    twins = {src[i]: src[i ^ 1] for i in range(len(src))}
    assert all(similarity(a, b) >= 0.8 for a, b in twins.items())
    train, dev, test = group_split(src, tgt, 10, 10, seed=3, similar=0.8)
    side = {src[i]: name for name, part in (("train", train), ("dev", dev), ("test", test)) for i in part}
    assert all(side[a] == side[b] for a, b in twins.items())
    assert len(test) == 10 and len(dev) == 10
    # identical-only grouping (similar=1) separates some twins: the grouping above is what keeps them together
    train, dev, test = group_split(src, tgt, 10, 10, seed=3, similar=1.0)
    side = {src[i]: name for name, part in (("train", train), ("dev", dev), ("test", test)) for i in part}
    assert any(side[a] != side[b] for a, b in twins.items())


def test_split_links_near_duplicate_targets_too():
    src = [f"第{i}句。" for i in range(40)]  # distinct sources
    tgt = [f"This is the sentence number {i // 2} of the test." for i in range(40)]
    tgt = [t if i % 2 == 0 else t.replace("This", "That") for i, t in enumerate(tgt)]  # twins: one word differs
    assert similarity(tgt[0], tgt[1]) >= 0.8
    train, dev, test = group_split(src, tgt, 8, 8, seed=1, similar=0.8)
    for part in (train, dev, test):
        assert all(i ^ 1 in part for i in part)
