"""Decoding benchmark of a trained run: what the key/value cache buys, and speed next to quality.

Three measurements, printed as a table and written as JSON (``--out``):

(a) decoder steps with and without the cache. A batch of ``--batch`` test sources
    (encoded once, outside the timing) is decoded for ``--steps`` steps feeding
    back the argmax token (``<end>`` ignored, so both sides do the same work):
    *cached* runs ``model.decode`` on one new position per step with a
    ``DecoderCache``; *uncached* runs it on the whole prefix every step. The two
    alternate in one process, ``--repeats`` times; the ratio is the median of the
    per-repeat uncached/cached ratios (neighbouring measurements share the
    machine's load), and both token sequences are checked to agree.
(b) sentences/s on the test split (``--sentences``, 0 = all) through
    ``Translator.translate`` (length-sorted batches) for greedy and beam 5, in
    float32 and with bf16 autocast where the hardware does bf16 natively
    (``--force-bf16`` measures it anyway), each with its test BLEU and chrF.
(c) the wall time of the one-shot command ``seq2seq translate "今天天气很好。"``,
    model loading included.

    python scripts/bench_decode.py --model runs/zh-en --out docs/bench_decode.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from machine import machine_info
from torch import Tensor

from seq2seq.corpus import read_lines
from seq2seq.errors import UserError
from seq2seq.evaluate import score
from seq2seq.layers import DecoderCache
from seq2seq.masks import padding_mask
from seq2seq.model import Transformer
from seq2seq.precision import autocast, use_bf16
from seq2seq.search import pad_batch
from seq2seq.tokenizer import BOS, PAD
from seq2seq.train import resolve_device
from seq2seq.translate import Translator, load_model, source_normalizer

CLI_SENTENCE = "今天天气很好。"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """Seconds one call of ``fn`` takes (device work included) and its result."""
    _sync(device)
    start = time.perf_counter()
    result = fn()
    _sync(device)
    return time.perf_counter() - start, result


def _stats(seconds: list[float]) -> dict[str, float]:
    return {"min": min(seconds), "median": statistics.median(seconds), "max": max(seconds), "runs": seconds}


@torch.inference_mode()
def decode_steps(model: Transformer, memory: Tensor, src_mask: Tensor, steps: int, use_cache: bool) -> Tensor:
    """Feed back the argmax token for ``steps`` steps (no stop at <end>); returns the tokens (B, 1 + steps)."""
    tokens = torch.full((memory.size(0), 1), BOS, dtype=torch.long, device=memory.device)
    cache = DecoderCache() if use_cache else None
    for _ in range(steps):
        new = tokens[:, -1:] if use_cache else tokens  # (B, 1) or (B, t)
        states = model.decode(new, memory, src_mask, cache)  # (B, 1 or t, D)
        best = model.logits(states[:, -1]).argmax(dim=-1)  # (B,)
        tokens = torch.cat([tokens, best[:, None]], dim=1)  # (B, t+1)
    return tokens


def bench_cache(
    model: Transformer, sources: list[list[int]], steps: int, repeats: int, device: torch.device
) -> dict[str, Any]:
    """(a): cached vs uncached decoder steps on one batch, alternating, ``repeats`` times."""
    if steps + 1 > model.cfg.max_positions:
        raise UserError(f"--steps {steps}: the model has only {model.cfg.max_positions} positions")
    src = pad_batch(sources, device)
    src_mask = padding_mask(src, PAD)
    with torch.inference_mode():
        memory = model.encode(src, src_mask)  # (B, S, D), shared by both sides and not timed
    decode_steps(model, memory, src_mask, 2, True)  # warm-up: first-call allocations, kernel selection
    decode_steps(model, memory, src_mask, 2, False)
    cached, uncached, ratios = [], [], []
    same = True
    for repeat in range(repeats):
        order = (True, False) if repeat % 2 == 0 else (False, True)  # alternate who goes first
        results = {}
        for use_cache in order:
            results[use_cache] = _timed(lambda u=use_cache: decode_steps(model, memory, src_mask, steps, u), device)
        (t_cached, tok_cached), (t_uncached, tok_uncached) = results[True], results[False]
        cached.append(t_cached)
        uncached.append(t_uncached)
        ratios.append(t_uncached / t_cached)
        same = same and torch.equal(tok_cached, tok_uncached)
    return {
        "batch": len(sources),
        "source_width": src.size(1),
        "steps": steps,
        "repeats": repeats,
        "cached_s": _stats(cached),
        "uncached_s": _stats(uncached),
        "ratio_median": statistics.median(ratios),
        "ratio_of_medians": statistics.median(uncached) / statistics.median(cached),
        "same_tokens": same,
    }


def bench_translate(
    translator: Translator,
    sources: list[str],
    references: list[str],
    beams: list[int],
    precisions: list[str],
    repeats: int,
) -> list[dict[str, Any]]:
    """(b): sentences/s and test BLEU/chrF for every (precision, beam)."""
    rows = []
    device = translator.device
    for precision in precisions:
        for beam in beams:
            seconds, hyps = [], []
            for _ in range(repeats):
                with autocast(device, precision == "bf16"):
                    elapsed, results = _timed(lambda b=beam: translator.translate(sources, b), device)
                seconds.append(elapsed)
                hyps = [r.best.text for r in results]
            scores = score(hyps, references)
            median = statistics.median(seconds)
            rows.append(
                {
                    "precision": precision,
                    "beam": beam,
                    "sentences": len(sources),
                    "seconds": _stats(seconds),
                    "sentences_per_s": len(sources) / median,
                    "bleu": scores.bleu,
                    "chrf": scores.chrf,
                }
            )
    return rows


def bench_cli(model_dir: str, device: torch.device, threads: int, repeats: int) -> dict[str, Any]:
    """(c): wall time of ``seq2seq translate SENTENCE`` in a fresh process, model load included."""
    script = Path(sys.executable).with_name("seq2seq")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "seq2seq"]
    command += ["translate", "--model", model_dir, "--device", device.type, CLI_SENTENCE]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    seconds, output = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        seconds.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise UserError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
        output = done.stdout.strip()
    return {"command": command[-6:], "seconds": _stats(seconds), "translation": output}


def print_report(report: dict[str, Any]) -> None:
    """The table for humans; the JSON holds the same numbers and every repeat."""
    m = report["machine"]
    print(f"model {report['model']}  |  {m['cpu']}, {m['cores']} cores, torch {m['torch']}, {m['threads']} threads")
    print(f"device {m['device']}" + (f" ({m['gpu']})" if "gpu" in m else ""))
    c = report["cache"]
    print(f"\n(a) {c['steps']} decoder steps, batch {c['batch']}, {c['repeats']} repeats (seconds)")
    print(f"{'':10}{'min':>9}{'median':>9}{'max':>9}")
    for name in ("cached", "uncached"):
        s = c[f"{name}_s"]
        print(f"{name:10}{s['min']:9.3f}{s['median']:9.3f}{s['max']:9.3f}")
    print(f"uncached/cached: {c['ratio_median']:.2f}x (median of per-repeat ratios); same tokens: {c['same_tokens']}")
    rows = report["translate"]
    if rows:
        print(f"\n(b) test split, {rows[0]['sentences']} sentences, median of {report['repeats_translate']} repeats")
        print(f"{'precision':10}{'beam':>5}{'sent/s':>9}{'median s':>10}{'BLEU':>7}{'chrF':>7}")
        for r in rows:
            print(
                f"{r['precision']:10}{r['beam']:5}{r['sentences_per_s']:9.1f}{r['seconds']['median']:10.2f}"
                f"{r['bleu']:7.2f}{r['chrf']:7.2f}"
            )
    for note in report["notes"]:
        print(f"note: {note}")
    cli = report.get("cli")
    if cli:
        s = cli["seconds"]
        print(
            f'\n(c) one-shot `seq2seq translate "{CLI_SENTENCE}"`: median {s["median"]:.2f}s '
            f"(min {s['min']:.2f}, max {s['max']:.2f}) -> {cli['translation']!r}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark decoding of a trained run (cache, beams, bf16, CLI).")
    parser.add_argument("--model", default="runs/zh-en", help="run directory (best.pt, spm.model, test.src/tgt)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of the cached/uncached comparison")
    parser.add_argument("--repeats-translate", type=int, default=2, help="repeats of each translate setting")
    parser.add_argument("--repeats-cli", type=int, default=3, help="runs of the one-shot CLI command")
    parser.add_argument("--sentences", type=int, default=0, help="test sentences translated in (b); 0 = all")
    parser.add_argument("--batch", type=int, default=100, help="source sentences in the batch of (a)")
    parser.add_argument("--steps", type=int, default=40, help="decoder steps in (a)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5], help="beam sizes of (b); 1 = greedy")
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = all available cores")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--force-bf16", action="store_true", help="measure bf16 even where it is not native")
    parser.add_argument("--skip-cli", action="store_true", help="leave out (c)")
    parser.add_argument("--out", type=Path, default=Path("docs/bench_decode.json"), help="JSON report")
    args = parser.parse_args(argv)
    for name in ("repeats", "repeats_translate", "repeats_cli", "batch", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.sentences < 0 or args.threads < 0 or min(args.beams) < 1:
        parser.error("--sentences and --threads must be >= 0, --beams >= 1")
    try:
        report = run(args)
    except UserError as err:
        print(f"bench_decode: error: {err}", file=sys.stderr)
        return 2
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """All three measurements -> the report dict."""
    threads = args.threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    torch.set_num_threads(threads)
    device = resolve_device(args.device)
    run_dir = Path(args.model)
    model, tokenizer, cfg = load_model(run_dir, device)
    run_dir = run_dir if run_dir.is_dir() else run_dir.parent
    translator = Translator(model, tokenizer, cfg.decode, device, source_normalizer(cfg))
    test_src = read_lines(run_dir / "test.src", "test.src")
    test_tgt = read_lines(run_dir / "test.tgt", "test.tgt")
    if len(test_src) != len(test_tgt):
        raise UserError(f"{run_dir}: test.src has {len(test_src)} lines but test.tgt has {len(test_tgt)}")
    notes = []

    batch = [translator.encode(s) for s in test_src[: args.batch]]
    if len(batch) < args.batch:
        notes.append(f"(a) uses {len(batch)} sentences: the test split has no more")
    cache = bench_cache(model, batch, args.steps, args.repeats, device)

    n = args.sentences or len(test_src)
    precisions = ["float32"]
    if use_bf16("auto", device) or args.force_bf16:
        precisions.append("bf16")
    else:
        notes.append(f"bf16 skipped: {device} has no native bf16 (--force-bf16 measures it anyway)")
    rows = bench_translate(translator, test_src[:n], test_tgt[:n], args.beams, precisions, args.repeats_translate)

    report: dict[str, Any] = {
        "model": str(run_dir),
        "step": _checkpoint_step(run_dir),
        "machine": machine_info(device),
        "cache": cache,
        "repeats_translate": args.repeats_translate,
        "translate": rows,
        "notes": notes,
    }
    if not args.skip_cli:
        report["cli"] = bench_cli(str(run_dir), device, threads, args.repeats_cli)
    return report


def _checkpoint_step(run_dir: Path) -> int | None:
    """The training step best.pt was saved at (for the record)."""
    from seq2seq.checkpoint import load_checkpoint

    step = load_checkpoint(run_dir / "best.pt").get("step")
    return int(step) if step is not None else None


if __name__ == "__main__":
    sys.exit(main())
