"""``seq2seq evaluate``: BLEU and chrF of a model (or a translation file) on a test set, by bucket;
with ``--compare RUN…`` or several ``--hyp``, the one way to compare systems: paired bootstrap
intervals and significance against the first."""

import argparse
import json
import sys
import time
from pathlib import Path

from seq2seq.cli.common import add_engine, add_models, load_for, model_paths, positive_int, read_aligned, run_files
from seq2seq.cli.output import evaluation_report
from seq2seq.data.corpus import normalize, read_lines
from seq2seq.decode.ctranslate2 import require_exported
from seq2seq.decode.loader import require_model
from seq2seq.errors import UserError
from seq2seq.evaluate.breakdown import LENGTH_BUCKETS, NOVELTY_BUCKETS, BucketScore, bucket_scores
from seq2seq.evaluate.compare import compare
from seq2seq.evaluate.metrics import corpus_scores


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score translations with BLEU/chrF (default: the run's test split)")
    add_models(p)
    p.add_argument("--src", help="source file (default: the run's test.src)")
    p.add_argument("--ref", help="reference file (default: the run's test.tgt)")
    p.add_argument(
        "--hyp", action="append", default=[], help="score this translation file instead of translating (twice: compare)"
    )
    p.add_argument(
        "--compare", nargs="+", metavar="RUN", help="translate with each run and compare them (the first: the baseline)"
    )
    p.add_argument(
        "--bootstrap", type=positive_int, default=1000, help="comparison: bootstrap resamples (intervals, paired test)"
    )
    p.add_argument("--trials", type=positive_int, default=10000, help="comparison: approximate randomization trials")
    p.add_argument("--bleu", action="store_true", help="report BLEU (default: BLEU and chrF)")
    p.add_argument("--chrf", action="store_true", help="report chrF (default: BLEU and chrF)")
    p.add_argument("--beam", type=positive_int, help="beam size (default from the model's config)")
    add_engine(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _novelty_for(run_dir: Path, src_path: Path, count: int) -> list[float] | None:
    """The run's ``test.novelty`` when ``src_path`` is one of the run's test sets (test.src or the
    test sources in another script, line-aligned with it); else None."""
    path = run_dir / "test.novelty"
    in_run = src_path.resolve().parent == run_dir.resolve()
    if not (in_run and src_path.name.startswith("test.") and src_path.name.endswith(".src") and path.is_file()):
        return None
    values = [float(x) for x in path.read_text(encoding="utf-8").split()]
    return values if len(values) == count else None


def _breakdown(
    run_dir: Path, src_path: Path, hypotheses: list[str], references: list[str]
) -> dict[str, list[BucketScore]]:
    """BLEU by novelty (for the run's test sets) and by source length (when the sources are at hand)."""
    if not src_path.is_file():
        return {}
    sources = read_lines(src_path, "--src")
    if len(sources) != len(hypotheses):
        return {}
    result = {"by_length": bucket_scores(hypotheses, references, [len(normalize(s)) for s in sources], LENGTH_BUCKETS)}
    novelty = _novelty_for(run_dir, src_path, len(sources))
    if novelty is not None:
        result["by_novelty"] = bucket_scores(hypotheses, references, novelty, NOVELTY_BUCKETS)
    return result


def _translate_file(models: list[str], args: argparse.Namespace, sources: list[str]) -> list[str]:
    translator = load_for(args, models)
    return [r.best.text for r in translator.translate(sources, args.beam or translator.decode.beam)]


def _compare(args: argparse.Namespace) -> None:
    """evaluate --compare RUN… (each run translates the test split) or --hyp A --hyp B…"""
    if args.compare is not None and len(args.compare) < 2:
        raise UserError("--compare needs at least two runs (the first is the baseline)")
    if args.compare and args.hyp:
        raise UserError("give either --compare RUN… or --hyp FILE…, not both")
    if args.hyp:
        systems = [(path, read_lines(path, "--hyp")) for path in args.hyp]
        references = read_lines(run_files(args, args.model[0] if args.model else None)[1], "--ref")
    else:
        sources, references = read_aligned(*run_files(args, args.compare[0]))
        for run in args.compare[1:]:
            if not args.ref and read_lines(run_files(args, run)[1], "--ref") != references:
                raise UserError(
                    f"--compare {run}: its test split differs from {args.compare[0]}'s; give --src and --ref"
                )
        for run in args.compare:
            require_model(run)
        systems = [(run, _translate_file([run], args, sources)) for run in args.compare]
    result = compare(systems, references, args.bootstrap, args.trials)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    sys.stdout.write(result.table())
    for metric, signature in result.signatures.items():
        print(f"{metric}: {signature}")


def run(args: argparse.Namespace) -> None:
    if args.compare is not None or len(args.hyp) > 1:
        _compare(args)
        return
    models = model_paths(args)
    if not args.hyp:  # no model: say how to make one before anything else
        require_model(models[0]) if args.engine == "torch" else require_exported(models[0])
    run_dir = Path(models[0]) if Path(models[0]).is_dir() else Path(models[0]).parent
    src_path, ref_path = run_files(args, models[0])
    start = time.perf_counter()
    if args.hyp:
        hypotheses, references = read_lines(args.hyp[0], "--hyp"), read_lines(ref_path, "--ref")
    else:
        sources, references = read_aligned(src_path, ref_path)
        translator = load_for(args, models)
        hypotheses = [r.best.text for r in translator.translate(sources, args.beam or translator.decode.beam)]
        if args.ref:  # the run's own references are in the model's target script already
            references = [translator.normalize_target(r) for r in references]
    seconds = time.perf_counter() - start
    scores = corpus_scores(hypotheses, references)
    breakdown = _breakdown(run_dir, src_path, hypotheses, references)
    show_bleu, show_chrf = (args.bleu, args.chrf) if (args.bleu or args.chrf) else (True, True)
    sys.stdout.write(evaluation_report(scores, breakdown, len(hypotheses), seconds, show_bleu, show_chrf, args.json))
