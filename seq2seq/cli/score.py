"""``seq2seq score``: forced decoding, the log-probability of each reference given its source."""

import argparse
import sys

from seq2seq.cli.common import add_engine, add_models, load_for, model_paths, read_aligned, run_files
from seq2seq.cli.output import score_line, score_summary
from seq2seq.cli.parser import VERBS
from seq2seq.decode.loader import engine_class, require_model


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help=VERBS["score"])
    add_models(p)
    p.add_argument("--src", help="source file (default: the run's test.src)")
    p.add_argument("--ref", help="reference file (default: the run's test.tgt)")
    add_engine(p)
    p.add_argument("--json", action="store_true", help="one JSON object per line, with per-token log-probabilities")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    engine_class(args.engine).require(scoring=True)
    models = model_paths(args)
    require_model(models[0])  # no model: say "train first" before anything else
    sources, references = read_aligned(*run_files(args, models[0]))
    translator = load_for(args, models)
    scores = translator.score(sources, references)
    tokenizer = translator.tokenizer
    lines = [
        score_line(source, reference, tokenizer.tgt_pieces(translator.target_ids(reference)), forced, args.json)
        for source, reference, forced in zip(sources, references, scores, strict=True)
    ]
    sys.stdout.write("".join(line + "\n" for line in lines))
    print(score_summary(scores), file=sys.stderr)
