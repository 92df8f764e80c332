"""The ``seq2seq`` command: train, prepare, translate, score, evaluate, export, serve. Wiring only."""

import argparse
import dataclasses
import json
import math
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
from seq2seq.compare import compare
from seq2seq.config import DEFAULT_CONFIG, load_config
from seq2seq.corpus import normalize, read_lines, split_lines
from seq2seq.ct2 import QUANTIZATIONS, SETTINGS, require_exported
from seq2seq.dataset import prepare_data
from seq2seq.distributed import join_world
from seq2seq.errors import UserError
from seq2seq.evaluate import score
from seq2seq.glossary import Glossary
from seq2seq.inference import ENGINES, PRECISIONS, load_translator
from seq2seq.mixing import CorpusMix
from seq2seq.runlock import RunLock
from seq2seq.search import Sampler
from seq2seq.streaming import prompted_lines, stream_chunks
from seq2seq.trace import format_trace, trace_sentence
from seq2seq.train import Trainer, resolve_device
from seq2seq.translate import Translation, Translator, load_models, resolve_checkpoint


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


def _load_translator(args: argparse.Namespace, model_paths: list[str]) -> Translator:
    """The translator of ``--engine`` in ``--precision`` (CTranslate2 runs on the CPU: ``auto`` means cpu);
    several ``--model``: an ensemble of them (our own decoder only)."""
    cpu_engine = args.engine == "ctranslate2" and args.device == "auto"
    device = resolve_device("cpu" if cpu_engine else args.device)
    translator = load_translator(model_paths[0], device, args.set, args.precision, args.engine)
    if len(model_paths) == 1:
        return translator
    if args.engine != "torch":
        raise UserError("an ensemble of several --model needs our own decoder (--engine torch)")
    ensemble, _, _ = load_models(model_paths, device, args.set)
    return Translator(
        ensemble,
        translator.tokenizer,
        translator.decode,
        device,
        translator.precision,
        normalize_source=translator.normalize_source,
        normalize_target=translator.normalize_target,
    )


def _models(args: argparse.Namespace) -> list[str]:
    return args.model or [_default_run_dir()]


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
            if result.constraints is not None:
                record["constraints"] = result.constraints
            if nbest > 1:
                record["nbest"] = [{"translation": o.text, "score": round(o.score, 4)} for o in result.outputs]
            lines.append(json.dumps(record, ensure_ascii=False))
        elif nbest > 1:
            lines += [f"{rank}\t{o.score:.4f}\t{o.text}" for rank, o in enumerate(result.outputs, start=1)]
        else:
            lines.append(result.best.text)
    return lines


def _check_decoding_options(args: argparse.Namespace) -> None:
    """Options that cannot go together, or values out of range: a one-line error."""
    if args.sample and args.beam not in (None, 1):
        raise UserError("--sample draws tokens one at a time: drop --beam (--nbest K draws K samples)")
    if args.sample and args.glossary:
        raise UserError("--glossary needs beam search: drop --sample")
    if args.temperature < 0 or not 0 <= args.top_p <= 1 or args.top_k < 0:
        raise UserError("--temperature must be >= 0, --top-k >= 0 and --top-p between 0 and 1")
    if args.prefix is not None and args.prefix_tsv:
        raise UserError("give either --prefix TEXT (one prefix for every sentence) or --prefix-tsv, not both")
    if args.attention and len(args.model or []) > 1:
        raise UserError("--attention shows one model's attention: give one --model")


def _split_prefixes(args: argparse.Namespace, lines: list[str]) -> tuple[list[str], list[str] | None]:
    """Sentences and their prefixes: --prefix for all, or --prefix-tsv's second column (SOURCE<TAB>PREFIX)."""
    if args.prefix is not None:
        return lines, [args.prefix] * len(lines)
    if not args.prefix_tsv:
        return lines, None
    pairs = [line.split("\t", 1) if "\t" in line else [line, ""] for line in lines]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def cmd_translate(args: argparse.Namespace) -> None:
    _check_decoding_options(args)
    if args.attention and args.engine != "torch":
        raise UserError("--attention needs our own decoder (--engine torch)")
    translator = _load_translator(args, _models(args))
    if args.max_len is not None:
        translator.decode = dataclasses.replace(translator.decode, max_len_a=0.0, max_len_b=args.max_len)
    decode = translator.decode
    sentences = _read_inputs(args)
    glossary = Glossary.read(args.glossary) if args.glossary else None
    beam = 1 if args.sample else args.beam or decode.beam
    if args.trace:
        _trace(args, translator, sentences if sentences is not None else sys.stdin.read().splitlines(), beam, glossary)
        return
    nbest = args.nbest if args.sample else min(args.nbest, beam)
    sampler = Sampler(args.temperature, args.top_k, args.top_p, args.seed, translator.device) if args.sample else None
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
            for lines in chunks:
                chunk, prefixes = _split_prefixes(args, lines)
                results = translator.translate(
                    chunk, beam, nbest, sampler=sampler, prefixes=prefixes, glossary=glossary
                )
                out.write("".join(line + "\n" for line in _format(results, args.json, nbest)))
                out.flush()  # a stream's reader sees each chunk as soon as it is translated
                first = results[0] if first is None else first
                bar.update(len(chunk))
    finally:
        if out is not sys.stdout:
            out.close()
    if args.attention and first is not None:
        _save_attention(args, translator, first)


def _trace(
    args: argparse.Namespace, translator: Translator, lines: list[str], beam: int, glossary: Glossary | None
) -> None:
    sentences, prefixes = _split_prefixes(args, lines)
    if len(sentences) != 1:
        raise UserError(f"--trace shows one sentence's search; got {len(sentences)} sentences")
    if translator.model is None:
        raise UserError("--trace needs our own decoder (--engine torch)")
    trace = trace_sentence(translator, sentences[0], beam, prefixes[0] if prefixes else "", glossary)
    sys.stdout.write(json.dumps(trace, ensure_ascii=False) + "\n" if args.json else format_trace(trace))


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


def _run_files(args: argparse.Namespace, run: str | None) -> tuple[Path, Path]:
    """The source and reference files: --src/--ref, else the run directory's test split."""
    run_dir = Path(run or _default_run_dir())
    run_dir = run_dir if run_dir.is_dir() else run_dir.parent
    return (Path(args.src) if args.src else run_dir / "test.src"), (
        Path(args.ref) if args.ref else run_dir / "test.tgt"
    )


def _read_aligned(src_path: Path, ref_path: Path) -> tuple[list[str], list[str]]:
    sources, references = read_lines(src_path, "--src"), read_lines(ref_path, "--ref")
    if len(sources) != len(references):
        raise UserError(f"{src_path} has {len(sources)} lines but {ref_path} has {len(references)}")
    return sources, references


def _translate_file(models: list[str], args: argparse.Namespace, sources: list[str]) -> list[str]:
    translator = _load_translator(args, models)
    return [r.best.text for r in translator.translate(sources, args.beam or translator.decode.beam)]


def cmd_score(args: argparse.Namespace) -> None:
    models = _models(args)
    resolve_checkpoint(models[0])  # no model: say "train first" before anything else
    sources, references = _read_aligned(*_run_files(args, models[0]))
    translator = _load_translator(args, models)
    tokenizer = translator.tokenizer
    scores = translator.score(sources, references)
    lines = []
    for source, reference, forced in zip(sources, references, scores, strict=True):
        if args.json:
            ids = translator.target_ids(reference)
            record = {
                "source": source,
                "reference": reference,
                "tokens": [*tokenizer.tgt_pieces(ids), "<end>"],
                "token_log_probs": [round(v, 4) for v in forced.token_log_probs],
                "log_prob": round(forced.log_prob, 4),
                "normalized": round(forced.normalized, 4),
            }
            lines.append(json.dumps(record, ensure_ascii=False))
        else:
            lines.append(f"{forced.log_prob:.4f}\t{forced.normalized:.4f}\t{reference}")
    sys.stdout.write("".join(line + "\n" for line in lines))
    tokens = sum(len(f.token_log_probs) for f in scores)
    total = sum(f.log_prob for f in scores)
    print(
        f"{len(scores)} sentences, {tokens} tokens: log-probability {total:.2f}, "
        f"{total / max(tokens, 1):.4f} per token (perplexity {math.exp(-total / max(tokens, 1)):.2f})",
        file=sys.stderr,
    )


def cmd_compare(args: argparse.Namespace) -> None:
    """evaluate --compare RUN… (each run translates the test split) or --hyp A --hyp B…"""
    if args.compare is not None and len(args.compare) < 2:
        raise UserError("--compare needs at least two runs (the first is the baseline)")
    if args.compare and args.hyp:
        raise UserError("give either --compare RUN… or --hyp FILE…, not both")
    if args.hyp:
        systems = [(path, read_lines(path, "--hyp")) for path in args.hyp]
        references = read_lines(_run_files(args, args.model[0] if args.model else None)[1], "--ref")
    else:
        src_path, ref_path = _run_files(args, args.compare[0])
        sources, references = _read_aligned(src_path, ref_path)
        for run in args.compare[1:]:
            if not args.ref and read_lines(_run_files(args, run)[1], "--ref") != references:
                raise UserError(
                    f"--compare {run}: its test split differs from {args.compare[0]}'s; give --src and --ref"
                )
        for run in args.compare:
            resolve_checkpoint(run)
        systems = [(run, _translate_file([run], args, sources)) for run in args.compare]
    result = compare(systems, references, args.bootstrap, args.trials)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    sys.stdout.write(result.table())
    for metric, signature in result.signatures.items():
        print(f"{metric}: {signature}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    if args.compare is not None or len(args.hyp) > 1:
        cmd_compare(args)
        return
    run_dir = Path(_models(args)[0])
    if not args.hyp:  # no model: say how to make one before anything else
        resolve_checkpoint(run_dir) if args.engine == "torch" else require_exported(run_dir)
    run_dir = run_dir if run_dir.is_dir() else run_dir.parent
    src_path = Path(args.src) if args.src else run_dir / "test.src"
    ref_path = Path(args.ref) if args.ref else run_dir / "test.tgt"
    references = read_lines(ref_path, "--ref")
    start = time.perf_counter()
    if args.hyp:
        hypotheses = read_lines(args.hyp[0], "--hyp")
    else:
        translator = _load_translator(args, args.model or [str(run_dir)])
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
    translator = _load_translator(args, [str(model_path)])
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


def _add_models(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        action="append",
        help="run directory or checkpoint file (default: the zh-en recipe's run directory); "
        "several: an ensemble averaging their log-probabilities",
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
    _add_models(p)
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
    p.add_argument("--sample", action="store_true", help="draw tokens instead of searching (--nbest K: K samples)")
    p.add_argument("--temperature", type=float, default=1.0, help="--sample: divide log-probabilities (0: greedy)")
    p.add_argument("--top-k", type=int, default=0, help="--sample: draw from the K most probable tokens (0: all)")
    p.add_argument("--top-p", type=float, default=1.0, help="--sample: draw from the top tokens holding P (1: all)")
    p.add_argument("--seed", type=int, default=0, help="--sample: random seed (same seed, same draws)")
    p.add_argument("--prefix", help="force every translation to start with this text")
    p.add_argument("--prefix-tsv", action="store_true", help="input lines are SOURCE<TAB>PREFIX (prefix may be empty)")
    p.add_argument("--glossary", metavar="TERMS.tsv", help="source<TAB>target terms the translation must use")
    p.add_argument("--trace", action="store_true", help="show one sentence's beams at every step (--json: as JSON)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("score", help="forced decoding: the log-probability of each reference given its source")
    _add_models(p)
    p.add_argument("--src", help="source file (default: the run's test.src)")
    p.add_argument("--ref", help="reference file (default: the run's test.tgt)")
    p.add_argument("--device", default="auto")
    _add_engine(p)
    _add_decode_set(p)
    p.add_argument("--json", action="store_true", help="one JSON object per line, with per-token log-probabilities")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("evaluate", help="score translations with BLEU/chrF (default: the run's test split)")
    _add_models(p)
    p.add_argument("--src", help="source file (default: the run's test.src)")
    p.add_argument("--ref", help="reference file (default: the run's test.tgt)")
    p.add_argument(
        "--hyp", action="append", default=[], help="score this translation file instead of translating (twice: compare)"
    )
    p.add_argument("--compare", nargs="+", metavar="RUN", help="translate with each run and compare (first: baseline)")
    p.add_argument("--bootstrap", type=int, default=1000, help="comparison: bootstrap resamples (CIs, paired test)")
    p.add_argument("--trials", type=int, default=10000, help="comparison: approximate randomization trials")
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
    "bootstrap",
    "trials",
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
