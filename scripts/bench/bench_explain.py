"""How long ``seq2seq explain`` takes to build the report of one sentence (model loading excluded),
and to turn it into the page: the first build (torch's one-time kernel set-up included) and the
median of ``--repeats`` more, one process, the model in float32 as the explainer runs it. Each
build is timed by the wall clock and by the process's CPU time, which a busy machine inflates
less (on a CPU device the two agree when the process has its cores to itself).

    python scripts/bench/bench_explain.py --model runs/zh-en --threads 1
"""

import argparse
import os
import sys
import time
from typing import Any

from benchlib import (
    add_common_options,
    checkpoint_step,
    machine_info,
    run_or_exit,
    set_threads,
    stats,
    timed,
    write_report,
)

from seq2seq.decode.loader import load_translator
from seq2seq.device import resolve_device
from seq2seq.errors import UserError
from seq2seq.explain.page import render_page, report_json
from seq2seq.explain.report import explain


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="runs/zh-en", help="run directory or checkpoint")
    p.add_argument("--text", default="今天天气很好。", help="the sentence explained")
    p.add_argument("--ref", default="The weather is nice today.", help="its reference ('' for none)")
    p.add_argument("--repeats", type=int, default=5, help="builds timed after the first (median reported)")
    add_common_options(p, "bench_explain", device="cpu")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.repeats < 1:
        raise UserError("--repeats must be >= 1")
    set_threads(args.threads)
    device = resolve_device(args.device)
    translator = load_translator([args.model], device, precision="float32", threads=args.threads)
    ref = args.ref or None

    def build() -> dict:
        return explain(translator, args.text, ref)

    first, report = timed(build, device)
    builds, cpu = [], []
    for _ in range(args.repeats):
        start = time.process_time()
        builds.append(timed(build, device)[0])
        cpu.append(time.process_time() - start)
    pages = [timed(lambda: render_page(report), device)[0] for _ in range(args.repeats)]
    return {
        "model": str(args.model),
        "step": checkpoint_step(args.model),
        "text": args.text,
        "reference": ref,
        "source_pieces": len(report["source_pieces"]),
        "translation": report["translation"]["text"],
        "machine": machine_info(device),
        "first_build_s": round(first, 4),
        "build_s": stats([round(t, 4) for t in builds]),
        "build_cpu_s": stats([round(t, 4) for t in cpu]),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "page_s": stats([round(t, 4) for t in pages]),
        "json_bytes": len(report_json(report).encode("utf-8")),
        "page_bytes": len(render_page(report).encode("utf-8")),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run_or_exit("bench_explain", run, args)
    build, page, cpu = report["build_s"]["median"], report["page_s"]["median"], report["build_cpu_s"]["median"]
    print(
        f"report of {report['source_pieces']} source pieces: first build {report['first_build_s'] * 1000:.0f} ms, "
        f"then {build * 1000:.0f} ms (median of {args.repeats}; CPU time {cpu * 1000:.0f} ms, "
        f"load average {report['load_average_1min']}); page {page * 1000:.1f} ms, {report['page_bytes'] / 1024:.0f} KiB"
    )
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
