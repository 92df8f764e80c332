"""What the decoding options cost: sentences/s and BLEU of greedy, beam 5, sampling, beam 5 with a
glossary (constrained beam search) and an ensemble of the model with itself, on the same test
sentences, the modes alternating in one process (``--rounds`` times; medians), so neighbouring
measurements share the machine's load.

The glossary row also reports how many sentences a term matched and in how many best outputs
every matched term appears.

    python scripts/bench_search_options.py --model runs/zh-en --out docs/bench_search_options.json
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import add_common_options, checkpoint_step, machine_info, run_or_exit, set_threads, write_report

from seq2seq.data.corpus import read_lines
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.loader import load_model
from seq2seq.decode.search import TokenSampler
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.device import resolve_device
from seq2seq.evaluate.metrics import corpus_scores
from seq2seq.model.ensemble import Ensemble

# Everyday terms with one usual English rendering, so a fair share of test sentences carries one.
DEFAULT_TERMS = (
    ("北京", "Beijing"),
    ("汤姆", "Tom"),
    ("学校", "school"),
    ("老师", "teacher"),
    ("昨天", "yesterday"),
    ("明天", "tomorrow"),
    ("猫", "cat"),
    ("狗", "dog"),
    ("书", "book"),
    ("朋友", "friend"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="runs/zh-en", help="run directory")
    p.add_argument("--sentences", type=int, default=300, help="first N test sentences (0 = all)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians are reported)")
    add_common_options(p, "bench_search_options", device="cpu")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    set_threads(args.threads)
    device = resolve_device(args.device)
    run_dir = Path(args.model)
    model, tokenizer, cfg = load_model(run_dir, device)
    sources = read_lines(run_dir / "test.src", "test.src")
    references = read_lines(run_dir / "test.tgt", "test.tgt")
    n = args.sentences or len(sources)
    sources, references = sources[:n], references[:n]
    single = TorchTranslator(model, tokenizer, cfg.decode, device)
    pair = TorchTranslator(Ensemble([model, model]).eval(), tokenizer, cfg.decode, device)
    glossary = Glossary(DEFAULT_TERMS)
    modes = {
        "greedy": lambda: single.translate(sources, 1),
        "beam 5": lambda: single.translate(sources, 5),
        "sampling (top-p 0.9, seed 1)": lambda: single.translate(sources, 1, sampler=TokenSampler(top_p=0.9, seed=1)),
        "beam 5 + glossary": lambda: single.translate(sources, 5, glossary=glossary),
        "ensemble of 2 (the model twice), beam 5": lambda: pair.translate(sources, 5),
    }
    speeds: dict[str, list[float]] = {name: [] for name in modes}
    outputs: dict[str, list] = {}
    for _ in range(args.rounds):
        for name, translate in modes.items():
            start = time.perf_counter()
            outputs[name] = translate()
            speeds[name].append(len(sources) / (time.perf_counter() - start))
    rows = []
    for name in modes:
        texts = [r.best.text for r in outputs[name]]
        quality = corpus_scores(texts, references)
        row = {
            "mode": name,
            "sentences_per_s": round(statistics.median(speeds[name]), 1),
            "bleu": round(quality.bleu, 2),
            "chrf": round(quality.chrf, 2),
        }
        if name == "beam 5 + glossary":
            constrained = [r for r in outputs[name] if r.constraints]
            row["sentences_with_terms"] = len(constrained)
            row["all_terms_in_output"] = sum(all(t in r.best.text for t in r.constraints) for r in constrained)
        rows.append(row)
    return {
        "model": str(run_dir),
        "step": checkpoint_step(run_dir),
        "sentences": len(sources),
        "rounds": args.rounds,
        "machine": machine_info(device),
        "glossary": [list(t) for t in DEFAULT_TERMS],
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run_or_exit("bench_search_options", run, args)
    print(f"{report['sentences']} sentences, median of {report['rounds']} alternating rounds")
    for row in report["rows"]:
        extra = (
            f"  terms in {row['sentences_with_terms']} sentences, all present in {row['all_terms_in_output']}"
            if "sentences_with_terms" in row
            else ""
        )
        print(f"{row['mode']:<42} {row['sentences_per_s']:>7.1f} sent/s  BLEU {row['bleu']:5.2f}{extra}")
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
