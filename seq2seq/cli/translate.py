"""``seq2seq translate``: sentences from the arguments, a file or stdin, translated as they come."""

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from seq2seq.cli.common import (
    add_engine,
    add_models,
    load_for,
    model_paths,
    positive_int,
    read_inputs,
    require_features,
)
from seq2seq.cli.output import translation_lines, warning_lines
from seq2seq.cli.parser import VERBS
from seq2seq.cli.streaming import prompted_lines, stream_chunks
from seq2seq.decode.attention import select
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.sampling import TokenSampler
from seq2seq.decode.trace import format_trace, trace_sentence
from seq2seq.decode.translator import Translation, Translator
from seq2seq.errors import UserError
from seq2seq.explain.heatmap import save_heatmap
from seq2seq.text.stage import TextOptions


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help=VERBS["translate"])
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: read stdin)")
    add_models(p)
    p.add_argument("-i", "--input", help="file with one sentence per line")
    p.add_argument("-o", "--output", help="write translations here (with a progress bar)")
    p.add_argument("--beam", type=positive_int, help="beam size (1 = greedy; default from the model's config)")
    p.add_argument("--nbest", type=positive_int, default=1, help="print the N best translations with scores")
    p.add_argument("--max-len", type=positive_int, help="maximum output length in tokens")
    add_engine(p)
    p.add_argument("--json", action="store_true", help="one JSON object per line, with warnings and confidence")
    p.add_argument("--no-split", action="store_true", help="translate each line whole, not sentence by sentence")
    p.add_argument(
        "--force", action="store_true", help="translate sentences that look like another language than the source"
    )
    p.add_argument(
        "--chunk-lines",
        type=positive_int,
        help="translate at most N lines at a time (default: 8 × decode.batch_sentences)",
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
    p.set_defaults(func=run)


def _check_options(args: argparse.Namespace) -> None:
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


def run(args: argparse.Namespace) -> None:
    _check_options(args)
    require_features(
        args,
        attention=(bool(args.attention), "attention"),
        trace=(args.trace, "trace"),
        sample=(args.sample, "sampling"),
        prefix=(args.prefix is not None, "prefixes"),
        prefix_tsv=(args.prefix_tsv, "prefixes"),
        glossary=(bool(args.glossary), "constraints"),
        model=(len(args.model or []) > 1, "ensembles"),
    )
    translator = load_for(args, model_paths(args))
    if args.max_len is not None:
        translator.decode = dataclasses.replace(translator.decode, max_len_a=0.0, max_len_b=args.max_len)
    decode = translator.decode
    sentences = read_inputs(args)
    glossary = Glossary.read(args.glossary) if args.glossary else None
    beam = 1 if args.sample else args.beam or decode.beam
    if args.trace:
        _trace(args, translator, sentences if sentences is not None else sys.stdin.read().splitlines(), beam, glossary)
        return
    nbest = args.nbest if args.sample else min(args.nbest, beam)
    sampler = (
        TokenSampler(args.temperature, args.top_k, args.top_p, args.seed, translator.device) if args.sample else None
    )
    size = args.chunk_lines or decode.batch_sentences * 8  # a sorting window long enough to batch well
    if sentences is not None:
        chunks: Iterable[list[str]] = (sentences[i : i + size] for i in range(0, len(sentences), size))
    elif sys.stdin.isatty():
        print("seq2seq: type a sentence and press Enter; Ctrl-D ends", file=sys.stderr)
        chunks = prompted_lines()
    else:
        chunks = stream_chunks(sys.stdin.buffer, size, args.chunk_ms / 1000)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115 (closed below)
    text = TextOptions(split=not args.no_split, check_language=not args.force)
    first, read = None, 0
    try:
        with tqdm(total=len(sentences) if sentences else None, disable=not args.output, unit="sent") as bar:
            for lines in chunks:
                chunk, prefixes = _split_prefixes(args, lines)
                results = translator.translate(
                    chunk, beam, nbest, sampler=sampler, prefixes=prefixes, glossary=glossary, text=text
                )
                out.write("".join(line + "\n" for line in translation_lines(results, args.json, nbest)))
                out.flush()  # a stream's reader sees each chunk as soon as it is translated
                if not args.json:
                    for number, result in enumerate(results, start=read + 1):
                        for warning in warning_lines(result, number):
                            tqdm.write(warning, file=sys.stderr)
                first = results[0] if first is None else first
                read += len(chunk)
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
