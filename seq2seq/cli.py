"""The ``seq2seq`` command: train, prepare, translate, evaluate, export, serve. Wiring only."""

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Iterable
from contextlib import nullcontext
from pathlib import Path

from tqdm import tqdm

from seq2seq.attention_map import save_heatmap, select
from seq2seq.batching import BucketSampler, padding_fraction
from seq2seq.breakdown import LENGTH_BUCKETS, NOVELTY_BUCKETS, BucketScore, bucket_scores
from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import DEFAULT_CONFIG, load_config
from seq2seq.corpus import normalize, read_lines, split_lines
from seq2seq.ct2 import QUANTIZATIONS, SETTINGS, require_exported
from seq2seq.dataset import prepare_data
from seq2seq.distributed import join_world
from seq2seq.errors import UserError
from seq2seq.evaluate import score
from seq2seq.inference import ENGINES, PRECISIONS, load_translator
from seq2seq.mixing import CorpusMix
from seq2seq.runlock import RunLock
from seq2seq.streaming import prompted_lines, stream_chunks
from seq2seq.train import Trainer, resolve_device
from seq2seq.translate import Translation, Translator, resolve_checkpoint


def _default_run_dir() -> str:
    """The run directory of the default recipe, for translate/evaluate (``runs/zh-en`` away from the repository)."""
    return load_config(DEFAULT_CONFIG).train.run_dir if Path(DEFAULT_CONFIG).is_file() else "runs/zh-en"


def cmd_train(args: argparse.Namespace) -> None:
    cfg = load_config(args.config, args.set + ([f"train.device={args.device}"] if args.device else []))
    with join_world(cfg.train.device, cfg.train.collective_timeout_minutes) as world:  # torchrun: one rank of many
        if args.resume and world.main and not (Path(cfg.train.run_dir) / "last.pt").is_file():
            raise UserError(f"--resume: no {Path(cfg.train.run_dir) / 'last.pt'} to resume from")
        try:
            with RunLock(Path(cfg.train.run_dir)) if world.main else nullcontext() as lock:  # rank 0 writes the run
                if lock is not None and lock.stale_pid:
                    print(f"note: taking over the run directory from pid {lock.stale_pid}, which died", file=sys.stderr)
                run_dir = Trainer(cfg, world=world).fit()
        except KeyboardInterrupt:
            sys.exit(130)
    if world.main:
        print(f'done: best model in {run_dir / "best.pt"}; try: seq2seq translate --model {run_dir} "今天天气很好"')


def cmd_prepare(args: argparse.Namespace) -> None:
    cfg = load_config(args.config, args.set)
    data = prepare_data(cfg.data)
    train = data.train
    mix = CorpusMix.from_config(cfg.data, data.corpus_sizes, cfg.train.seed)
    sampler = BucketSampler(
        train.src_lengths,
        train.tgt_lengths,
        cfg.data.batch_tokens,
        cfg.train.seed,
        items_at=mix.epoch_items if mix else None,
    )
    batches = sampler.epoch_batches(0)
    report = dict(
        data.report,
        **({"mix": mix.describe()} if mix else {}),
        batches_per_epoch=len(batches),
        padding_fraction=round(padding_fraction(batches, train.src_lengths, train.tgt_lengths), 4),
    )
    print(json.dumps(report, indent=1))


def _read_inputs(args: argparse.Namespace) -> list[str] | None:
    """The sentences of the arguments or of ``-i FILE``; None when they are to come from stdin."""
    if args.sentences:
        return args.sentences
    if args.input:
        path = Path(args.input)
        if not path.is_file():
            raise UserError(f"-i {path}: file not found")
        return split_lines(path.read_bytes(), f"-i {path}")
    return None


def _load_translator(args: argparse.Namespace, model_path: str | Path) -> Translator:
    """The translator of ``--engine`` in ``--precision`` (CTranslate2 runs on the CPU: ``auto`` means cpu)."""
    cpu_engine = args.engine == "ctranslate2" and args.device == "auto"
    device = resolve_device("cpu" if cpu_engine else args.device)
    return load_translator(model_path, device, args.set, args.precision, args.engine)


def _format(results: list[Translation], as_json: bool, nbest: int) -> list[str]:
    """Output lines: the best translation, ``rank<TAB>score<TAB>text`` lines for n-best, or JSON objects."""
    lines = []
    for result in results:
        if as_json:
            best = result.best
            record = {
                "source": result.source,
                "translation": best.text,
                "score": round(best.score, 4),
                "tokens": best.pieces,
            }
            if nbest > 1:
                record["nbest"] = [{"translation": o.text, "score": round(o.score, 4)} for o in result.outputs]
            lines.append(json.dumps(record, ensure_ascii=False))
        elif nbest > 1:
            lines += [f"{rank}\t{o.score:.4f}\t{o.text}" for rank, o in enumerate(result.outputs, start=1)]
        else:
            lines.append(result.best.text)
    return lines


def cmd_translate(args: argparse.Namespace) -> None:
    if args.attention and args.engine != "torch":
        raise UserError("--attention needs our own decoder (--engine torch)")
    translator = _load_translator(args, args.model or _default_run_dir())
    if args.max_len is not None:
        translator.decode = dataclasses.replace(translator.decode, max_len_a=0.0, max_len_b=args.max_len)
    decode = translator.decode
    sentences = _read_inputs(args)
    beam = args.beam or decode.beam
    nbest = min(args.nbest, beam)
    size = args.chunk_lines or decode.batch_sentences * 8  # a sorting window long enough to batch well
    if sentences is not None:
        chunks: Iterable[list[str]] = (sentences[i : i + size] for i in range(0, len(sentences), size))
    elif sys.stdin.isatty():
        print("seq2seq: type a sentence and press Enter; Ctrl-D ends", file=sys.stderr)
        chunks = prompted_lines()
    else:
        chunks = stream_chunks(sys.stdin.buffer, size, args.chunk_ms / 1000)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115 (closed below)
    first = None
    try:
        with tqdm(total=len(sentences) if sentences else None, disable=not args.output, unit="sent") as bar:
            for chunk in chunks:
                results = translator.translate(chunk, beam, nbest)
                out.write("".join(line + "\n" for line in _format(results, args.json, nbest)))
                out.flush()  # a stream's reader sees each chunk as soon as it is translated
                first = results[0] if first is None else first
                bar.update(len(chunk))
    finally:
        if out is not sys.stdout:
            out.close()
    if args.attention and first is not None:
        _save_attention(args, translator, first)


def _save_attention(args: argparse.Namespace, translator: Translator, result: Translation) -> None:
    attention = translator.attention(result.source, result.best.tokens)
    weights = select(attention.weights.cross, args.layer, args.head)
    which = f"layer {args.layer}, " + ("mean over heads" if args.head is None else f"head {args.head}")
    save_heatmap(
        weights, attention.source_pieces, attention.target_pieces, Path(args.attention), f"cross-attention ({which})"
    )
    print(f"attention map saved to {args.attention}", file=sys.stderr)


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


def cmd_evaluate(args: argparse.Namespace) -> None:
    run_dir = Path(args.model or _default_run_dir())
    if not args.hyp:  # no model: say how to make one before anything else
        resolve_checkpoint(run_dir) if args.engine == "torch" else require_exported(run_dir)
    run_dir = run_dir if run_dir.is_dir() else run_dir.parent
    src_path = Path(args.src) if args.src else run_dir / "test.src"
    ref_path = Path(args.ref) if args.ref else run_dir / "test.tgt"
    references = read_lines(ref_path, "--ref")
    start = time.perf_counter()
    if args.hyp:
        hypotheses = read_lines(args.hyp, "--hyp")
    else:
        translator = _load_translator(args, args.model or run_dir)
        sources = read_lines(src_path, "--src")
        if len(sources) != len(references):
            raise UserError(f"{src_path} has {len(sources)} lines but {ref_path} has {len(references)}")
        hypotheses = [r.best.text for r in translator.translate(sources, args.beam or translator.decode.beam)]
        if args.ref:  # the run's own references are in the model's target script already
            references = [translator.normalize_target(r) for r in references]
    seconds = time.perf_counter() - start
    scores = score(hypotheses, references)
    breakdown = _breakdown(run_dir, src_path, hypotheses, references) if len(hypotheses) == len(references) else {}
    show_bleu, show_chrf = (args.bleu, args.chrf) if (args.bleu or args.chrf) else (True, True)
    if args.json:
        record = {
            "sentences": len(hypotheses),
            "seconds": round(seconds, 2),
            "sentences_per_s": round(len(hypotheses) / max(seconds, 1e-9), 2),
        }
        if show_bleu:
            record.update(bleu=round(scores.bleu, 2), bleu_signature=scores.bleu_signature)
        if show_chrf:
            record.update(chrf=round(scores.chrf, 2), chrf_signature=scores.chrf_signature)
        for name, buckets in breakdown.items():
            record[name] = [
                {"bucket": b.label, "sentences": b.sentences, "bleu": round(b.bleu, 2), "chrf": round(b.chrf, 2)}
                for b in buckets
            ]
        print(json.dumps(record))
        return
    if show_bleu:
        print(f"BLEU = {scores.bleu:.2f}  ({scores.bleu_signature})")
    if show_chrf:
        print(f"chrF = {scores.chrf:.2f}  ({scores.chrf_signature})")
    titles = {
        "by_novelty": "by novelty (similarity of the source to its closest training source):",
        "by_length": "by source length:",
    }
    for name in ("by_novelty", "by_length"):
        if name in breakdown:
            print(titles[name])
            for b in breakdown[name]:
                print(f"  {b.label:<24} {b.sentences:>5} sentences  BLEU {b.bleu:5.2f}  chrF {b.chrf:5.2f}")
    print(f"{len(hypotheses)} sentences in {seconds:.1f}s ({len(hypotheses) / max(seconds, 1e-9):.1f} sentences/s)")


def cmd_export(args: argparse.Namespace) -> None:
    from seq2seq.ct2 import export_ctranslate2

    out = export_ctranslate2(args.model, args.out, args.quantization)
    print(f"exported {args.model} to {out} ({args.quantization})")
    print(f'try: seq2seq translate --engine ctranslate2 --model {out} "今天天气很好"')


def _model_step(args: argparse.Namespace, model_path: str | Path) -> int | None:
    """The training step of the model served (an exported model records the one it came from)."""
    if args.engine == "torch":
        return load_checkpoint(resolve_checkpoint(model_path)).get("step")
    return json.loads((require_exported(model_path) / SETTINGS).read_text(encoding="utf-8")).get("step")


def cmd_serve(args: argparse.Namespace) -> None:
    try:
        from seq2seq.batcher import BatchLimits
        from seq2seq.serve import RequestLimits, create_app, serve
    except ImportError as err:
        raise UserError(f"serve needs {err.name}: pip install 'seq2seq[serve]'") from None
    model_path = args.model or _default_run_dir()
    translator = _load_translator(args, model_path)
    app = create_app(
        translator,
        str(model_path),
        _model_step(args, model_path),
        RequestLimits(args.max_body_bytes, args.max_sentences, args.max_chars),
        BatchLimits(args.batch_wait_ms, args.batch_sentences or translator.decode.batch_sentences, args.batch_tokens),
    )
    try:
        serve(app, args.host, args.port)
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has finished the requests in flight
        sys.exit(130)


def _add_engine(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="torch",
        help="torch: our decoder on a run directory; ctranslate2: a directory from `seq2seq export`",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="decoding precision; auto: bf16 where the CPU/GPU computes it natively, else float32",
    )


def _add_decode_set(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="decode.KEY=VALUE",
        help="override a decoding setting of the model's config, e.g. decode.length_penalty=0.6",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seq2seq", description="Train and run encoder-decoder Transformers for translation."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    for name, help_text in (
        ("train", "train a model (continues an existing run directory)"),
        ("prepare", "run the data pipeline only and print its report"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"YAML config (default {DEFAULT_CONFIG})")
        p.add_argument(
            "--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override one config key"
        )
        if name == "train":
            p.add_argument("--device", help="auto, cpu, cuda, cuda:N (overrides train.device)")
            p.add_argument("--resume", action="store_true", help="require an existing last.pt to continue from")
            p.set_defaults(func=cmd_train)
        else:
            p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("translate", help="translate sentences (arguments, stdin or -i FILE)")
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: read stdin)")
    p.add_argument("--model", help="run directory or checkpoint file (default: the zh-en recipe's run directory)")
    p.add_argument("-i", "--input", help="file with one sentence per line")
    p.add_argument("-o", "--output", help="write translations here (with a progress bar)")
    p.add_argument("--beam", type=int, help="beam size (1 = greedy; default from the model's config)")
    p.add_argument("--nbest", type=int, default=1, help="print the N best translations with scores")
    p.add_argument("--max-len", type=int, help="maximum output length in tokens")
    p.add_argument("--device", default="auto")
    _add_engine(p)
    _add_decode_set(p)
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--chunk-lines", type=int, help="translate at most N lines at a time (default: 8 × decode.batch_sentences)"
    )
    p.add_argument("--chunk-ms", type=float, default=100, help="stdin stream: wait at most T ms to fill a chunk")
    p.add_argument(
        "--attention",
        metavar="FILE.svg|FILE.png",
        help="save the cross-attention map of the first sentence (.svg keeps labels as text)",
    )
    p.add_argument("--layer", type=int, default=-1, help="decoder layer for --attention (default: last)")
    p.add_argument("--head", type=int, help="head for --attention (default: mean over heads)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="score translations with BLEU/chrF (default: the run's test split)")
    p.add_argument("--model", help="run directory or checkpoint file (default: the zh-en recipe's run directory)")
    p.add_argument("--src", help="source file (default: the run's test.src)")
    p.add_argument("--ref", help="reference file (default: the run's test.tgt)")
    p.add_argument("--hyp", help="score this translation file instead of translating")
    p.add_argument("--bleu", action="store_true", help="report BLEU (default: BLEU and chrF)")
    p.add_argument("--chrf", action="store_true", help="report chrF (default: BLEU and chrF)")
    p.add_argument("--beam", type=int, help="beam size (default from the model's config)")
    p.add_argument("--device", default="auto")
    _add_engine(p)
    _add_decode_set(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", help="convert a trained model for another inference engine (CTranslate2)")
    p.add_argument("model", help="run directory or checkpoint file")
    p.add_argument("--to", choices=["ctranslate2"], default="ctranslate2", help="target format")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="float32",
        help="weight type stored (int8 variants: int8 matmuls; the suffix is the type of everything else)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("serve", help="serve a model over HTTP: JSON API and an attention explorer page")
    p.add_argument("--model", help="run directory or checkpoint file (default: the zh-en recipe's run directory)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--device", default="auto")
    _add_engine(p)
    _add_decode_set(p)
    p.add_argument("--max-body-bytes", type=int, default=64 * 1024, help="largest request body")
    p.add_argument("--max-sentences", type=int, default=64, help="most sentences in one request")
    p.add_argument("--max-chars", type=int, default=500, help="longest sentence, in characters")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long a batch waits for more requests")
    p.add_argument("--batch-sentences", type=int, help="most sentences per batch (default: decode.batch_sentences)")
    p.add_argument("--batch-tokens", type=int, default=4096, help="most source tokens per batch")
    p.set_defaults(func=cmd_serve)
    return parser


# Flags that must be >= 1 when given.
POSITIVE_FLAGS = (
    "beam",
    "nbest",
    "max_len",
    "chunk_lines",
    "max_body_bytes",
    "max_sentences",
    "max_chars",
    "batch_sentences",
    "batch_tokens",
)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    for name in POSITIVE_FLAGS:
        value = getattr(args, name, None)
        if value is not None and value < 1:
            print(f"seq2seq: error: --{name.replace('_', '-')} must be >= 1", file=sys.stderr)
            sys.exit(2)
    try:
        args.func(args)
    except UserError as err:
        print(f"seq2seq: error: {err}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as err:  # the machine, not the input: a full disk, a read-only or vanished file or directory
        where = f"{err.filename}: " if err.filename else ""
        print(f"seq2seq: error: {where}{err.strerror or err}", file=sys.stderr)
        sys.exit(2)
