"""Our decoder's bf16 against float32, bf16 with and without its packed linear layers, side by side.

One process, the translators the verbs load (default threads: one intra-op thread per worker,
one worker per core), every setting decoding the same test sentences, the order of the settings
rotating every repeat. The settings: float32; bf16 as it was before ``seq2seq.decode.packed``
(a plain bf16 copy of the weights); bf16 as the verbs load it now (linear layers with their
weights laid out once for oneDNN). The ratios are medians of per-repeat ratios.

    python scripts/bench_bf16.py --model runs/zh-en-b2048 --beams 1 5 --repeats 3
"""

import argparse
import copy
import statistics
import sys
import time
from typing import Any

import torch
from benchlib import add_common_options, checkpoint_step, machine_info, run_or_exit, write_report

from seq2seq.data.corpus import read_lines
from seq2seq.decode.loader import load_translator
from seq2seq.decode.translator import Translator

SETTINGS = (("float32", False), ("bf16", False), ("bf16", True))  # (precision, packed)


def name(setting: tuple[str, bool]) -> str:
    precision, packed = setting
    return f"{precision}{' packed' if packed else ''}"


def measure(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device("cpu")
    translators: dict[tuple[str, bool], Translator] = {}
    for precision, packed in SETTINGS:
        translator = load_translator([args.model], device, precision=precision, threads=args.threads)
        if precision == "bf16" and not packed:  # the bf16 copy as it was before packing
            translator.search_model = copy.deepcopy(translator.model).to(torch.bfloat16)
        translators[precision, packed] = translator
    sentences = read_lines(f"{args.model}/test.src", "test.src")[: args.sentences or None]
    sources = [translators["float32", False].encode(s) for s in sentences]
    rows: list[dict[str, Any]] = []
    for beam in args.beams:
        seconds: dict[tuple, list[float]] = {s: [] for s in SETTINGS}
        outputs: dict[tuple, list] = {}
        for repeat in range(args.repeats + 1):  # repeat 0 warms up
            start = repeat % len(SETTINGS)
            for setting in SETTINGS[start:] + SETTINGS[:start]:
                began = time.perf_counter()
                found = translators[setting].search(sources, beam, 1)
                if repeat:
                    seconds[setting].append(time.perf_counter() - began)
                outputs[setting] = [h[0].tokens for h in found]
        base = seconds[SETTINGS[0]]
        for setting in SETTINGS:
            ratios = [b / s for b, s in zip(base, seconds[setting], strict=True)]
            same_as = next(s for s in SETTINGS if s[0] == setting[0])  # the first setting of its precision
            rows.append(
                {
                    "beam": beam,
                    "setting": name(setting),
                    "sentences_per_second": len(sources) / statistics.median(seconds[setting]),
                    "x_float32": statistics.median(ratios),
                    "same_outputs_as": name(same_as),
                    "same_outputs": outputs[setting] == outputs[same_as],
                    "seconds": seconds[setting],
                }
            )
    translator = translators["float32", False]
    return {
        "machine": machine_info(device),
        "model": args.model,
        "step": checkpoint_step(args.model),
        "sentences": len(sources),
        "repeats": args.repeats,
        "threads": translator.threads,
        "workers": translator.workers,
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/zh-en", help="run directory (best.pt, spm.model, test.src)")
    parser.add_argument("--sentences", type=int, default=0, help="first N test sentences; 0 = all")
    parser.add_argument("--beams", type=int, nargs="+", default=[5], help="beam sizes; 1 = greedy")
    parser.add_argument("--repeats", type=int, default=3)
    add_common_options(parser, "bench_bf16", device="cpu")
    args = parser.parse_args()
    report = run_or_exit("bench_bf16", measure, args)
    print(f"{report['sentences']} sentences, {report['threads']} thread(s) x {report['workers']} worker(s)")
    for row in report["rows"]:
        print(
            f"beam {row['beam']}  {row['setting']:<14}{row['sentences_per_second']:8.1f} sent/s"
            f"{row['x_float32']:7.2f}x float32  same outputs as {row['same_outputs_as']}: "
            f"{row['same_outputs']}"
        )
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
