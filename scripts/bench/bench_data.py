"""The data pipeline at scale: prepare time, pairs/s and peak memory on synthetic corpora of N pairs,
and the peak memory of a training process reading the prepared data.

The corpus of N pairs is made from the Tatoeba pairs by seeded recombination: line k joins two
pairs (i, j) chosen by a seeded bijection of k onto the (i, j) grid, so every line is unique
and the lengths are those of two-sentence inputs. Each measurement runs in a fresh process that
reports its own peak resident memory (``ru_maxrss``) and CPU time: ``prepare`` builds the cache from scratch
(a cache miss), then a training process runs ``--train-steps`` steps of the config's model on
the prepared data (a cache hit) and validates once. Prepare's worker processes (normalizing and
filtering on every core, ``seq2seq.data.hashsplit``) report separately: the largest of them, and the CPU
time includes theirs. The build's own report gives the seconds of each stage.

    python scripts/bench/bench_data.py --pairs 24000 1000000
    python scripts/bench/bench_data.py --pairs 2000 --config toy --train-steps 3  # quick
"""

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from benchlib import REPORTS, machine_info, write_report

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from seq2seq.config import DEFAULT_CONFIG  # noqa: E402
from seq2seq.data.corpus import read_pair_files  # noqa: E402

# Run in a child: the pipeline (or the trainer) on the given config, then its own peak RSS.
PREPARE = """
import json, resource, sys, time
from seq2seq.config import load_config
from seq2seq.data.pipeline import prepare_data
cfg = load_config(sys.argv[1], sys.argv[2:])
start = time.perf_counter()
data = prepare_data(cfg.data)
usage, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": time.perf_counter() - start, "train": data.report["train"],
                  "cpu_seconds": usage.ru_utime + usage.ru_stime + workers.ru_utime + workers.ru_stime,
                  "peak_rss_mb": usage.ru_maxrss / 1024, "worker_peak_rss_mb": workers.ru_maxrss / 1024,
                  "stage_seconds": data.report["stage_seconds"]}))
"""
TRAIN = """
import json, resource, sys
from seq2seq.config import load_config
from seq2seq.train.trainer import Trainer
Trainer(load_config(sys.argv[1], sys.argv[2:])).fit(quiet=True)
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_corpus(src: list[str], tgt: list[str], pairs: int, seed: int, out: Path) -> tuple[Path, Path]:
    """``pairs`` unique lines, line k = pair i + pair j for (i, j) = a seeded bijection of k onto the n×n grid."""
    n = len(src)
    grid = n * n
    if pairs > grid:
        raise SystemExit(f"at most {grid} distinct pairs from {n} sentences")
    step = 2 * seed * 1_000_003 + 1  # a step coprime with the grid visits every cell once
    while math.gcd(step, grid) != 1:
        step += 2
    offset = seed * 7_919 % grid
    src_path, tgt_path = out / f"corpus-{pairs}.zh", out / f"corpus-{pairs}.en"
    with src_path.open("w", encoding="utf-8") as zh, tgt_path.open("w", encoding="utf-8") as en:
        for k in range(pairs):
            i, j = divmod((offset + k * step) % grid, n)
            zh.write(f"{src[i]}{src[j]}\n")
            en.write(f"{tgt[i]} {tgt[j]}\n")
    return src_path, tgt_path


def child(code: str, config: str, overrides: list[str]) -> dict:
    """Run ``code`` in a fresh interpreter; its last stdout line is a JSON record."""
    done = subprocess.run(
        [sys.executable, "-c", code, config, *overrides], cwd=REPO, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, nargs="+", default=[24_000, 1_000_000])
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="data settings and the trained model's shape")
    parser.add_argument("--src", default="data/tatoeba-cmn-eng/all.zh", help="sentences to recombine")
    parser.add_argument("--tgt", default="data/tatoeba-cmn-eng/all.en")
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", help="where corpora and caches go (default: a temporary directory)")
    parser.add_argument(
        "--out", type=Path, default=REPORTS / "bench_data.json", help="JSON report (default: %(default)s)"
    )
    args = parser.parse_args()
    src, tgt = read_pair_files(args.src, args.tgt)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        work = Path(work)
        for pairs in args.pairs:
            corpus = write_corpus(src, tgt, pairs, args.seed, work)
            data = [f"data.src={corpus[0]}", f"data.tgt={corpus[1]}", f"data.cache_dir={work / 'cache'}"]
            prepared = child(PREPARE, args.config, data)
            train = [
                f"train.run_dir={work / f'run-{pairs}'}",
                f"train.max_steps={args.train_steps}",
                f"train.eval_every={args.train_steps}",
                "train.eval_sentences=10",
                "train.average_last=0",
                "train.max_minutes=0",
            ]
            trained = child(TRAIN, args.config, data + train)
            row = {
                "pairs": pairs,
                "prepare_s": round(prepared["seconds"], 1),
                "pairs_per_s": round(pairs / prepared["seconds"]),
                "prepare_cpu_s": round(prepared["cpu_seconds"], 1),  # all threads: steadier than wall time when shared
                "prepare_peak_rss_mb": round(prepared["peak_rss_mb"]),
                "prepare_worker_peak_rss_mb": round(prepared["worker_peak_rss_mb"]),
                "prepare_stage_s": prepared["stage_seconds"],
                "train_pairs": prepared["train"],
                "train_peak_rss_mb": round(trained["peak_rss_mb"]),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            for path in corpus:
                path.unlink()
    report = {"machine": machine_info(torch.device("cpu")), "config": args.config, "rows": rows, "date": time.ctime()}
    write_report(report, args.out)


if __name__ == "__main__":
    main()
