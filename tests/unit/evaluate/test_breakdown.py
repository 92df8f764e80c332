"""BLEU by novelty and by source length (seq2seq.evaluate.breakdown and evaluate's report of it)."""

import json
import shutil

import pytest
from conftest import run_cli

from seq2seq.data.neardup import closest_similarity
from seq2seq.evaluate.breakdown import LENGTH_BUCKETS, NOVELTY_BUCKETS, bucket_scores
from seq2seq.evaluate.metrics import corpus_scores


def test_buckets_score_their_own_sentences():
    hyps = ["the cat sat on the mat", "a dog", "completely wrong words here", "I like tea very much"]
    refs = ["the cat sat on the mat", "a dog barked", "the bird flew over the house", "I like tea very much"]
    values = [0.9, 0.7, 0.1, 0.95]
    got = bucket_scores(hyps, refs, values, NOVELTY_BUCKETS)
    assert [(b.label, b.sentences) for b in got] == [
        ("novel (< 0.6)", 1),
        ("similar (0.6-0.8)", 1),
        ("near-duplicate (>= 0.8)", 2),
    ]
    assert got[2].bleu == pytest.approx(100.0)
    assert got[0].bleu == pytest.approx(corpus_scores([hyps[2]], [refs[2]]).bleu)
    assert bucket_scores(hyps, refs, [3, 3, 3, 3], LENGTH_BUCKETS)[0].sentences == 4  # empty buckets left out
    assert len(bucket_scores(hyps, refs, [3, 3, 3, 3], LENGTH_BUCKETS)) == 1


def test_run_dir_novelty_is_the_closest_training_similarity(toy_run, toy_pairs):
    test_src = (toy_run / "test.src").read_text(encoding="utf-8").splitlines()
    novelty = [float(x) for x in (toy_run / "test.novelty").read_text().split()]
    assert len(novelty) == len(test_src)
    held = set(test_src) | set((toy_run / "dev.src").read_text(encoding="utf-8").splitlines())
    train_src = [s for s in toy_pairs[0] if s not in held]
    assert novelty == pytest.approx(closest_similarity(test_src, train_src), abs=1e-4)
    assert max(novelty) < 0.8  # the split kept near-duplicates of the test set out of training


def test_evaluate_reports_novelty_and_length_buckets(toy_run, tmp_path):
    result = run_cli("evaluate", "--model", str(toy_run), "--device", "cpu", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert sum(b["sentences"] for b in record["by_novelty"]) == record["sentences"] == 100
    assert sum(b["sentences"] for b in record["by_length"]) == 100
    assert {b["bucket"] for b in record["by_length"]} <= {label for label, _, _ in LENGTH_BUCKETS}
    text = run_cli("evaluate", "--model", str(toy_run), "--device", "cpu")
    assert "by novelty" in text.stdout and "by source length" in text.stdout
    # a test set from elsewhere has no known novelty, but still a length breakdown
    shutil.copy(toy_run / "test.src", tmp_path / "other.src")
    other = run_cli(
        "evaluate", "--model", str(toy_run), "--device", "cpu", "--json", "--src", str(tmp_path / "other.src")
    )
    record = json.loads(other.stdout)
    assert "by_novelty" not in record and "by_length" in record
