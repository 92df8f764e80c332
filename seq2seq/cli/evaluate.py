"""``seq2seq evaluate``: BLEU and chrF of a model (or a translation file) on a test set, by bucket;
with ``--compare RUN…`` or several ``--hyp``, the one way to compare systems: paired bootstrap
intervals and significance against the first. Several ``--ref`` score against all of them
(multi-reference BLEU and chrF).

BLEU's tokenizer is ``--tokenize``, else the model's (``eval.bleu_tokenize``, else from its
``data.tgt_lang``; ``seq2seq.evaluate.metrics``), else ``13a``; the printed signature names it.
Scoring ``--hyp`` files takes the model's from the run directory's ``config.yaml``.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from seq2seq.cli.common import (
    add_engine,
    add_models,
    load_for,
    model_paths,
    positive_int,
    run_directory,
)
from seq2seq.cli.output import evaluation_report
from seq2seq.cli.parser import VERBS
from seq2seq.config import BLEU_TOKENIZERS, Config, load_config
from seq2seq.data.corpus import normalize, read_lines
from seq2seq.decode.ctranslate2 import require_exported
from seq2seq.decode.loader import require_model
from seq2seq.decode.translator import Translator
from seq2seq.errors import UserError
from seq2seq.evaluate.breakdown import NOVELTY_BUCKETS, BucketScore, bucket_scores, length_buckets, source_lengths
from seq2seq.evaluate.compare import compare
from seq2seq.evaluate.metrics import DEFAULT_TOKENIZER, bleu_metric, configured_tokenizer, corpus_scores
from seq2seq.text.stage import TextOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help=VERBS["evaluate"],
        description="BLEU and chrF of a model, or of a translation file (--hyp), on a test set, by bucket. "
        "Comparing systems has one way: --compare RUN RUN... (each run translates the test set) or several "
        "--hyp files, on the same references: each system's BLEU, chrF and chrF++ with a 95% interval, and "
        "paired tests (bootstrap resampling, approximate randomization) of its difference from the first, the "
        "baseline.",
    )
    add_models(p)
    p.add_argument("--src", help="source file (default: the run's test.src)")
    p.add_argument(
        "--ref",
        action="append",
        default=[],
        help="reference file (default: the run's test.tgt); again for more references of the same sentences",
    )
    p.add_argument(
        "--hyp",
        action="append",
        default=[],
        help="score this translation file instead of translating; several: compare them (the first: the baseline)",
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
    p.add_argument(
        "--tokenize",
        choices=BLEU_TOKENIZERS,
        help="BLEU's tokenizer (default: the model's eval.bleu_tokenize, else the one for its data.tgt_lang, else 13a)",
    )
    p.add_argument("--beam", type=positive_int, help="beam size (default from the model's config)")
    p.add_argument("--no-split", action="store_true", help="translate each line whole, not sentence by sentence")
    p.add_argument("--force", action="store_true", help="translate lines that look like another language too")
    add_engine(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _files(args: argparse.Namespace, run: str | None) -> tuple[Path, list[Path]]:
    """The source file and the reference files: --src/--ref, else the run directory's test split."""
    run_dir = run_directory(run)
    return Path(args.src) if args.src else run_dir / "test.src", [Path(r) for r in args.ref] or [run_dir / "test.tgt"]


def _read_aligned(src_path: Path, ref_paths: list[Path]) -> tuple[list[str], list[list[str]]]:
    """Sources and the reference streams, each with as many lines as the sources."""
    sources = read_lines(src_path, "--src")
    streams = [read_lines(path, "--ref") for path in ref_paths]
    for path, stream in zip(ref_paths, streams, strict=True):
        if len(stream) != len(sources):
            raise UserError(f"{src_path} has {len(sources)} lines but {path} has {len(stream)}")
    return sources, streams


def _tokenizer(args: argparse.Namespace, cfg: Config | None) -> str:
    """BLEU's tokenizer: --tokenize, else the model config's, else 13a; checked now, before any translating."""
    tokenize = args.tokenize or (configured_tokenizer(cfg) if cfg is not None else DEFAULT_TOKENIZER)
    bleu_metric(tokenize)  # a tokenizer without its extra is a one-line error here
    return tokenize


def _run_config(run_dir: Path) -> Config | None:
    """The config a run directory was trained with (None where there is none, e.g. plain files)."""
    path = run_dir / "config.yaml"
    return load_config(path) if path.is_file() else None


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
    run_dir: Path, src_path: Path, hypotheses: list[str], references: list[list[str]], tokenize: str
) -> dict[str, list[BucketScore]]:
    """BLEU by novelty (for the run's test sets) and by source length (when the sources are at hand)."""
    if not src_path.is_file():
        return {}
    sources = read_lines(src_path, "--src")
    if len(sources) != len(hypotheses):
        return {}
    unit, lengths = source_lengths([normalize(s) for s in sources])
    result = {"by_length": bucket_scores(hypotheses, references, lengths, length_buckets(unit), tokenize)}
    novelty = _novelty_for(run_dir, src_path, len(sources))
    if novelty is not None:
        result["by_novelty"] = bucket_scores(hypotheses, references, novelty, NOVELTY_BUCKETS, tokenize)
    return result


def _translate_with(translator: Translator, args: argparse.Namespace, sources: list[str]) -> list[str]:
    text = TextOptions(split=not args.no_split, check_language=not args.force)
    return [r.best.text for r in translator.translate(sources, args.beam or translator.decode.beam, text=text)]


def _compare(args: argparse.Namespace) -> None:
    """evaluate --compare RUN… (each run translates the test split) or --hyp A --hyp B…"""
    if args.compare is not None and len(args.compare) < 2:
        raise UserError("--compare needs at least two runs (the first is the baseline)")
    if args.compare and args.hyp:
        raise UserError("give either --compare RUN… or --hyp FILE…, not both")
    if args.hyp:
        run = args.model[0] if args.model else None
        references = [read_lines(path, "--ref") for path in _files(args, run)[1]]
        tokenize = _tokenizer(args, _run_config(run_directory(run)))
        systems = [(path, read_lines(path, "--hyp")) for path in args.hyp]
    else:
        sources, references = _read_aligned(*_files(args, args.compare[0]))
        for run in args.compare[1:]:
            if not args.ref and [read_lines(p, "--ref") for p in _files(args, run)[1]] != references:
                raise UserError(
                    f"--compare {run}: its test split differs from {args.compare[0]}'s; give --src and --ref"
                )
        for run in args.compare:
            require_model(run)
        translators = [load_for(args, [run]) for run in args.compare]
        chosen = {run: _tokenizer(args, t.config) for run, t in zip(args.compare, translators, strict=True)}
        if len(set(chosen.values())) > 1:
            named = ", ".join(f"{run} tok:{tok}" for run, tok in chosen.items())
            raise UserError(
                f"--compare: the runs score BLEU with different tokenizers ({named}); choose with --tokenize"
            )
        tokenize = chosen[args.compare[0]]
        systems = [(run, _translate_with(t, args, sources)) for run, t in zip(args.compare, translators, strict=True)]
    result = compare(systems, references, args.bootstrap, args.trials, tokenize)
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
    run_dir = run_directory(models[0])
    src_path, ref_paths = _files(args, models[0])
    start = time.perf_counter()
    if args.hyp:
        hypotheses = read_lines(args.hyp[0], "--hyp")
        references = [read_lines(path, "--ref") for path in ref_paths]
        tokenize = _tokenizer(args, _run_config(run_dir))
    else:
        sources, references = _read_aligned(src_path, ref_paths)
        translator = load_for(args, models)
        tokenize = _tokenizer(args, translator.config)
        hypotheses = _translate_with(translator, args, sources)
        if args.ref:  # the run's own references are in the model's target script already
            references = [[translator.normalize_target(r) for r in stream] for stream in references]
    seconds = time.perf_counter() - start
    scores = corpus_scores(hypotheses, references, tokenize)
    breakdown = _breakdown(run_dir, src_path, hypotheses, references, tokenize)
    show_bleu, show_chrf = (args.bleu, args.chrf) if (args.bleu or args.chrf) else (True, True)
    sys.stdout.write(evaluation_report(scores, breakdown, len(hypotheses), seconds, show_bleu, show_chrf, args.json))
