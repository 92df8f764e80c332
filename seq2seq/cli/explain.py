"""``seq2seq explain``: one sentence through a trained model, shown idea by idea, as a self-contained
HTML page (or the report's JSON)."""

import argparse
import sys
from pathlib import Path

from seq2seq.atomic import write_text_atomically
from seq2seq.checkpoint import resolve_checkpoint
from seq2seq.cli.common import add_engine, add_models, default_run_dir, load_for
from seq2seq.cli.parser import VERBS
from seq2seq.decode.loader import engine_class
from seq2seq.explain.page import render_page, report_json
from seq2seq.explain.report import explain


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help=VERBS["explain"])
    p.add_argument("sentence", help="the sentence to explain")
    p.add_argument("--ref", help="a reference translation: teacher forcing beside greedy decoding")
    add_models(p, several=False)
    p.add_argument("--out", help="file to write (default: explain.html, or stdout with --json)")
    p.add_argument("--json", action="store_true", help="write the report as JSON instead of the HTML page")
    p.add_argument("--layer", type=int, default=0, help="encoder layer shown step by step (default 0; -1: the last)")
    p.add_argument("--head", type=int, default=0, help="head shown step by step (default 0)")
    add_engine(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    engine_class(args.engine).require(explain=True)
    model = args.model or default_run_dir()
    resolve_checkpoint(model)  # no model: say "train first" before anything else
    report = explain(load_for(args, [model]), args.sentence, args.ref, args.layer, args.head)
    if args.json and args.out is None:
        sys.stdout.write(report_json(report) + "\n")
        return
    out = Path(args.out or "explain.html")
    write_text_atomically(out, report_json(report) + "\n" if args.json else render_page(report))
    print(f"wrote {out}", file=sys.stderr)
