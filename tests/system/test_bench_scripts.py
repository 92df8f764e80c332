"""The benchmark scripts run end to end on the toy config (tiny sizes; no timing asserted)."""

import json
import subprocess
import sys

from conftest import CLI_ENV, REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=CLI_ENV, capture_output=True, text=True, timeout=300)


def test_bench_train_reports_every_row(tmp_path, toy_cache):
    out = tmp_path / "train.json"
    cache = f"data.cache_dir={toy_cache}"
    sizes = "--rounds 2 --round-tokens 300 --rss-steps 3 --threads 1".split()
    bf16 = "train.precision=bf16"  # every row: bf16 weights, bf16 autocast and float32
    done = _run(
        "scripts/bench/bench_train.py",
        "--config",
        "toy",
        "--set",
        cache,
        "--set",
        bf16,
        *sizes,
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    names = [row["name"] for row in report["rows"]]
    assert names == [
        "ours, bucketed, bf16",
        "nn.Transformer, random batches, float32",
        "ours, bucketed, bf16-autocast",
        "ours, bucketed, float32",
        "nn.Transformer, bucketed, float32",
    ]
    for row in report["rows"]:
        assert row["tokens_per_s"]["min"] <= row["tokens_per_s"]["median"] <= row["tokens_per_s"]["max"]
        assert row["target_tokens_trained"] >= 2 * 300
        assert 0 < row["share_of_peak"] and row["dev_loss"] > 0
    assert report["rows"][0]["padding"] < report["rows"][1]["padding"]  # buckets pad less than random batches
    assert report["peak_rss_mb_default_recipe"] > 0
    assert (report["peak_gpu_mb_default_recipe"] is None) == (report["machine"]["device"] == "cpu")


def test_bench_decode_reports_cache_speedup_and_quality(tmp_path, toy_run):
    out = tmp_path / "decode.json"
    sizes = "--sentences 10 --repeats 1 --repeats-translate 1 --batch 8 --steps 5 --threads 0 1 --latency-sentences 3"
    sizes = [*sizes.split(), "--rows", "ours-float32", "ours-bf16", "ct2-int8", "--force-bf16"]
    done = _run("scripts/bench/bench_decode.py", "--model", str(toy_run), *sizes, "--skip-cli", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["cache"]["same_tokens"] and report["cache"]["ratio_median"] > 0  # cached == uncached output
    assert report["ctranslate2_beside_ours"] is False  # the CTranslate2 rows ran in their own process
    settings = {(row["engine"], row["precision"], row["beam"]) for row in report["translate"]}
    assert {("torch", "float32", 1), ("torch", "float32", 5), ("ctranslate2", "int8", 5)} <= settings
    for row in report["translate"]:
        assert row["sentences"] == 10 and row["sentences_per_s"] > 0 and 0 <= row["bleu"] <= 100
        assert row["latency_sentences"] == 3 and row["latency_p50_ms"] > 0
        assert 0 <= row["differs_from_ours_float32"] <= 10
    ours = [row for row in report["translate"] if row["engine"] == "torch" and row["precision"] == "float32"]
    assert all(row["differs_from_ours_float32"] == 0 and row["speedup_vs_ours_float32"] == 1 for row in ours)
    # every engine row at both thread settings (0: the default), each against the faster of the two
    by_row: dict[tuple, dict[int, dict]] = {}
    for row in report["translate"]:
        by_row.setdefault((row["engine"], row["precision"], row["beam"]), {})[row["threads_setting"]] = row
    for rows in by_row.values():
        assert set(rows) == {0, 1}
        assert max(r["vs_best_setting"] for r in rows.values()) == 1
        assert all(0 < r["vs_best_setting"] <= 1 and r["intra_threads"] >= 1 for r in rows.values())
    assert by_row["ctranslate2", "int8", 5][1]["workers"] == 1  # an explicit count: one worker


def test_bench_serve_reports_every_level(tmp_path, toy_run):
    out = tmp_path / "serve.json"
    sizes = "--clients 1,3 --sentences 6 --requests 6 --seconds 30 --singles 2 --rounds 1 --beam 2".split()
    done = _run("scripts/bench/bench_serve.py", "--model", str(toy_run), *sizes, "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert set(report["levels"]) == {"1", "3"}
    for level in report["levels"].values():
        assert level["sentences_per_s"] > 0 and 0 < level["p50_ms"] <= level["p95_ms"] <= level["p99_ms"]
    assert [r["clients_1"]["requests"] for r in report["rounds_raw"]] == [6]
    assert report["batch_sentences_per_s"] > 0 and report["single_sentence_ms"] > 0
    assert report["server_peak_rss_mib"] > 0
    assert set(report["ratios"]) == {"3_vs_1_clients", "3_clients_vs_batch", "p95_1_client_vs_single"}
    assert "| clients | sentences/s |" in done.stdout


def test_bench_data_reports_prepare_and_training_memory(tmp_path):
    out = tmp_path / "data.json"
    toy = ("--config", "toy", "--src", "tests/fixtures/toy.zh", "--tgt", "tests/fixtures/toy.en")
    sizes = ("--pairs", "1500", "--train-steps", "2", "--workdir", str(tmp_path))
    done = _run("scripts/bench/bench_data.py", *toy, *sizes, "--out", str(out))
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["pairs"] == 1500 and 0 < row["train_pairs"] <= 1500 - 200  # dev and test held out
    assert row["prepare_peak_rss_mb"] > 0 and row["train_peak_rss_mb"] > 0 and row["pairs_per_s"] > 0


def test_bench_explain_times_the_report(tmp_path, toy_run):
    out = tmp_path / "explain.json"
    done = _run(
        "scripts/bench/bench_explain.py", "--model", str(toy_run), "--repeats", "2", "--threads", "1", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["build_s"]["runs"] and 0 < report["build_s"]["min"] <= report["build_s"]["max"]
    assert report["first_build_s"] > 0 and report["page_bytes"] > report["json_bytes"] > 0
    assert report["source_pieces"] > 1 and "report of" in done.stdout
