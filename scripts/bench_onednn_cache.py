"""What the size of oneDNN's kernel caches costs and saves in a bf16 decode on a CPU.

oneDNN runs a CPU's bf16 matrix products and keeps a compiled kernel for every shape it meets, in two
caches (its own, ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, and torch's wrapper's, ``LRU_CACHE_CAPACITY``)
of 1,024 entries each unless those variables say otherwise. A beam search of the test split runs in
a fresh process per size (the libraries read the variables once, so one process cannot hold two),
the sizes alternating ``--rounds`` times; reported per size: sentences/s (median of the processes'
second passes: the first fills the caches) and resident memory after the decode. The default sizes are
the libraries' 1,024 and ``seq2seq.device.ONEDNN_CACHE_ENTRIES``, what a bf16 decode here sets. Linux only
(/proc).

    python scripts/bench_onednn_cache.py --model runs/zh-en-b2048 --sizes 64 1024 8192 --rounds 4
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import torch
from benchlib import add_common_options, machine_info, rss_mib, run_or_exit, write_report

from seq2seq.data.corpus import read_lines
from seq2seq.decode.loader import load_translator
from seq2seq.device import ONEDNN_CACHE_ENTRIES, ONEDNN_CACHES
from seq2seq.errors import UserError


def decode_once(args: argparse.Namespace) -> dict[str, Any]:
    """In the child: two bf16 decodes of the split (one thread) -> sentences/s of each, RSS after."""
    translator = load_translator([args.model], torch.device("cpu"), precision="bf16", threads=1)
    sentences = read_lines(f"{args.model}/test.src", "test.src")[: args.sentences or None]
    sources = [translator.encode(s) for s in sentences]
    rates = []
    for _ in range(2):
        start = time.perf_counter()
        translator.search(sources, args.beam, 1)
        rates.append(len(sources) / (time.perf_counter() - start))
    return {"sentences_per_s": rates, "rss_mib": rss_mib(os.getpid()), "peak_rss_mib": rss_mib(os.getpid(), "VmHWM")}


def run(args: argparse.Namespace) -> dict[str, Any]:
    child = [sys.executable, __file__, "--child", "--model", args.model, "--beam", str(args.beam)]
    child += ["--sentences", str(args.sentences)]
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in args.sizes}
    for round_ in range(args.rounds):
        for size in args.sizes[round_ % len(args.sizes) :] + args.sizes[: round_ % len(args.sizes)]:
            env = {**os.environ, **{name: str(size) for name in ONEDNN_CACHES}}
            done = subprocess.run(child, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise UserError(f"the decode with {size} cache entries failed: {last}")
            runs[size].append(json.loads(done.stdout.splitlines()[-1]))
            print(f"round {round_ + 1}, {size} entries: {runs[size][-1]}", flush=True)
    rows = [
        {
            "entries": size,
            "sentences_per_s": statistics.median(r["sentences_per_s"][1] for r in found),
            "rss_mib": statistics.median(r["rss_mib"] for r in found),
            "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in found),
            "processes": found,
        }
        for size, found in runs.items()
    ]
    return {"machine": machine_info(torch.device("cpu")), "model": args.model, "beam": args.beam, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/zh-en", help="run directory")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1024, ONEDNN_CACHE_ENTRIES], help="cache entries to compare"
    )
    parser.add_argument("--rounds", type=int, default=3, help="processes per size, alternating")
    parser.add_argument("--sentences", type=int, default=0, help="first N test sentences; 0 = all")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_common_options(parser, "bench_onednn_cache", device="cpu", threads=False)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_or_exit("bench_onednn_cache", decode_once, args)))
        return 0
    report = run_or_exit("bench_onednn_cache", run, args)
    for row in report["rows"]:
        print(
            f"{row['entries']:6d} entries: {row['sentences_per_s']:.1f} sentences/s, "
            f"{row['rss_mib']:.0f} MiB after the decode (peak {row['peak_rss_mib']:.0f})"
        )
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
