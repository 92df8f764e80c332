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
        "scripts/bench_train.py",
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
    done = _run("scripts/bench_decode.py", "--model", str(toy_run), *sizes, "--skip-cli", "--out", str(out))
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


def test_profile_step_splits_the_time_of_every_precision(tmp_path, toy_cache):
    out = tmp_path / "profile.json"
    cache = f"data.cache_dir={toy_cache}"
    done = _run("scripts/profile_step.py", "--config", "toy", "--set", cache, "--steps", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    for precision in ("float32", "bf16-autocast", "bf16"):
        r = report[precision]
        assert r["seconds"]["matmul"] > 0 and r["matmul_flops"] > 0
        assert set(r["phases"]) == {"forward + loss", "backward", "clip + optimizer"}
    assert "matmul GFLOP/s" in done.stdout


def test_bench_serve_reports_every_level(tmp_path, toy_run):
    out = tmp_path / "serve.json"
    sizes = "--clients 1,3 --sentences 6 --requests 6 --seconds 30 --singles 2 --rounds 1 --beam 2".split()
    done = _run("scripts/bench_serve.py", "--model", str(toy_run), *sizes, "--out", str(out))
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
    done = _run("scripts/bench_data.py", *toy, *sizes, "--out", str(out))
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["pairs"] == 1500 and 0 < row["train_pairs"] <= 1500 - 200  # dev and test held out
    assert row["prepare_peak_rss_mb"] > 0 and row["train_peak_rss_mb"] > 0 and row["pairs_per_s"] > 0


def test_bench_search_options_reports_every_mode(tmp_path, toy_run):
    out = tmp_path / "options.json"
    done = _run(
        "scripts/bench_search_options.py",
        "--model",
        str(toy_run),
        "--sentences",
        "12",
        "--rounds",
        "1",
        "--threads",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert [row["mode"] for row in report["rows"]][:2] == ["greedy", "beam 5"] and len(report["rows"]) == 5
    for row in report["rows"]:
        assert row["sentences_per_s"] > 0 and 0 <= row["bleu"] <= 100
    (glossary,) = [row for row in report["rows"] if "sentences_with_terms" in row]
    assert glossary["all_terms_in_output"] <= glossary["sentences_with_terms"]


def test_bench_explain_times_the_report(tmp_path, toy_run):
    out = tmp_path / "explain.json"
    done = _run(
        "scripts/bench_explain.py", "--model", str(toy_run), "--repeats", "2", "--threads", "1", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["build_s"]["runs"] and 0 < report["build_s"]["min"] <= report["build_s"]["max"]
    assert report["first_build_s"] > 0 and report["page_bytes"] > report["json_bytes"] > 0
    assert report["source_pieces"] > 1 and "report of" in done.stdout


def test_bench_onednn_cache_decodes_in_one_process_per_cache_size(tmp_path, toy_run):
    out = tmp_path / "cache.json"
    args = ("--model", str(toy_run), "--sizes", "64", "1024", "--rounds", "1", "--sentences", "4", "--beam", "2")
    done = _run("scripts/bench_onednn_cache.py", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [row["entries"] for row in rows] == [64, 1024]
    assert all(row["sentences_per_s"] > 0 and 0 < row["rss_mib"] <= row["peak_rss_mib"] for row in rows)
    missing = _run("scripts/bench_onednn_cache.py", "--model", str(tmp_path / "absent"), "--rounds", "1")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "error" in missing.stderr


def test_profile_decode_splits_model_search_and_python(tmp_path, toy_run):
    out = tmp_path / "profile.json"
    done = _run(
        "scripts/profile_decode.py",
        "--model",
        str(toy_run),
        "--sentences",
        "6",
        "--beam",
        "2",
        "--threads",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert 0 < report["model_share"] < 1 and report["decoder_calls"] > 0
    ops = report["operators"]
    assert 0 < ops["in_operators_seconds"] < ops["wall_seconds"] and 0 < ops["outside_operators_share"] < 1
    assert ops["top"] and all(row["calls"] > 0 for row in ops["top"])
    topk = report["topk"]
    assert topk["k"] == 4 and topk["width"] % 2 == 0 and topk["grouped_us"] > 0 and topk["plain_us"] > 0
