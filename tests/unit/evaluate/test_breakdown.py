"""BLEU by novelty and by source length (seq2seq.evaluate.breakdown and evaluate's report of it)."""

import json
import shutil

import pytest
from conftest import run_cli, write_lines

from seq2seq.cli import main
from seq2seq.data.corpus import normalize
from seq2seq.data.neardup import NEAR_DUPLICATE, NOVEL, closest_similarity
from seq2seq.evaluate.breakdown import NOVELTY_BUCKETS, bucket_scores, length_buckets, source_lengths
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
    assert bucket_scores(hyps, refs, [3, 3, 3, 3], length_buckets("chars"))[0].sentences == 4  # empty buckets left out
    assert len(bucket_scores(hyps, refs, [3, 3, 3, 3], length_buckets("chars"))) == 1


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
    assert {b["bucket"] for b in record["by_length"]} <= {label for label, _, _ in length_buckets("chars")}
    text = run_cli("evaluate", "--model", str(toy_run), "--device", "cpu")
    assert "by novelty" in text.stdout and "by source length" in text.stdout
    # a test set from elsewhere has no known novelty, but still a length breakdown
    shutil.copy(toy_run / "test.src", tmp_path / "other.src")
    other = run_cli(
        "evaluate", "--model", str(toy_run), "--device", "cpu", "--json", "--src", str(tmp_path / "other.src")
    )
    record = json.loads(other.stdout)
    assert "by_novelty" not in record and "by_length" in record


def test_bucket_edges_belong_to_the_bucket_above():
    """[low, high): a similarity of exactly NOVEL is "similar", of exactly NEAR_DUPLICATE "near-duplicate";
    7 characters start the middle length bucket, 13 the last."""
    hyps = refs = ["a b c d"] * 6
    novelty = bucket_scores(
        hyps, refs, [0.0, NOVEL - 1e-9, NOVEL, NEAR_DUPLICATE - 1e-9, NEAR_DUPLICATE, 1.0], NOVELTY_BUCKETS
    )
    assert [b.sentences for b in novelty] == [2, 2, 2]
    lengths = bucket_scores(hyps, refs, [1, 6, 7, 12, 13, 400], length_buckets("chars"))
    assert [(b.label, b.sentences) for b in lengths] == [("1-6 chars", 2), ("7-12 chars", 2), ("13+ chars", 2)]


def _evaluate_json(capsys, *args: str) -> dict:
    capsys.readouterr()
    main(["evaluate", "--json", *args])
    return json.loads(capsys.readouterr().out)


def test_evaluate_bucket_scores_are_those_of_the_bucket_sentences(toy_run, tmp_path, capsys):
    """evaluate --hyp on the run's test split: each bucket's BLEU and chrF are the corpus scores of the
    hypotheses of exactly the sentences whose novelty (test.novelty) or normalized length falls in it."""
    sources = (toy_run / "test.src").read_text(encoding="utf-8").splitlines()
    references = (toy_run / "test.tgt").read_text(encoding="utf-8").splitlines()
    novelty = [float(x) for x in (toy_run / "test.novelty").read_text().split()]
    # Right on every third sentence, a different wrong answer elsewhere: every bucket scores differently.
    hypotheses = [r if i % 3 == 0 else f"wrong answer {i}" for i, r in enumerate(references)]
    hyp = write_lines(tmp_path / "hyp.txt", hypotheses)
    record = _evaluate_json(capsys, "--model", str(toy_run), "--hyp", str(hyp))
    lengths = [len(normalize(s)) for s in sources]
    by_length = length_buckets("chars")
    for name, values, buckets in (("by_novelty", novelty, NOVELTY_BUCKETS), ("by_length", lengths, by_length)):
        expected = []
        for label, low, high in buckets:
            chosen = [i for i, v in enumerate(values) if low <= v < high]
            if chosen:
                scores = corpus_scores([hypotheses[i] for i in chosen], [references[i] for i in chosen])
                expected.append(
                    {
                        "bucket": label,
                        "sentences": len(chosen),
                        "bleu": round(scores.bleu, 2),
                        "chrf": round(scores.chrf, 2),
                    }
                )
        assert record[name] == expected, name
        assert len(expected) >= 2 and sum(b["sentences"] for b in expected) == len(references)  # guard: not one bucket
    assert record["bleu"] == round(corpus_scores(hypotheses, references).bleu, 2)


def test_a_test_novelty_of_the_wrong_length_is_not_used(toy_run, tmp_path, capsys):
    """A test.novelty that does not hold one value per test sentence (a run directory edited by hand, another
    split's file) gives no novelty buckets, rather than buckets of the wrong sentences; the length buckets stay."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("test.src", "test.tgt", "test.novelty"):  # what evaluate --hyp reads of a run
        shutil.copy(toy_run / name, run / name)
    values = (run / "test.novelty").read_text(encoding="utf-8").splitlines()
    hyp = write_lines(tmp_path / "hyp.txt", (run / "test.tgt").read_text(encoding="utf-8").splitlines())
    for wrong in (values[:-1], values + ["0.5000"]):
        write_lines(run / "test.novelty", wrong)
        record = _evaluate_json(capsys, "--model", str(run), "--hyp", str(hyp))
        assert "by_novelty" not in record and sum(b["sentences"] for b in record["by_length"]) == len(values)
    write_lines(run / "test.novelty", values)
    assert "by_novelty" in _evaluate_json(capsys, "--model", str(run), "--hyp", str(hyp))  # guard: the copy has them


def test_lengths_count_characters_of_unspaced_sources_and_words_of_spaced_ones():
    assert source_lengths(["我想喝一杯咖啡。", "他昨天去了北京。", "Tom 来了。"]) == ("chars", [8, 8, 7])
    english = ["He went to Beijing yesterday.", "My brother reads a book every evening.", "Hi."]
    assert source_lengths(english) == ("words", [5, 7, 1])
    assert [label for label, _, _ in length_buckets("words")] == ["1-6 words", "7-12 words", "13+ words"]
