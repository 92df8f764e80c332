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
(b) the engines side by side on the test split (``--sentences``, 0 = all), greedy and beam 5:
    our decoder in float32 and bf16 (bf16 where the hardware does it natively; ``--force-bf16``
    measures it anyway) and the model exported to CTranslate2 in float32, int8 and
    int8_bfloat16 (exported into a temporary directory). The same sentences; every repeat runs
    all rows, one at a time, rotating which goes first. Our rows run in this process, the
    CTranslate2 rows in a child process of their own (``CTranslate2Rows``). Per row: sentences/s (median
    repeat), BLEU and chrF, how many outputs differ from our float32 at the same beam, and
    the p50 latency of one sentence translated alone (``--latency-sentences`` sentences,
    the rows alternating sentence by sentence). ``--threads`` takes several counts: every
    engine row then runs at each, side by side (0, the default: the threads translate and
    evaluate choose, ``seq2seq.decode.threads``; N: N intra-op threads, one worker), and each
    row's rate is also given against the best count of the same engine row.
(c) the wall time of the one-shot command ``seq2seq translate "今天天气很好。"``,
    model loading included.

    python scripts/bench/bench_decode.py --model runs/zh-en
    python scripts/bench/bench_decode.py --model runs/zh-en --threads 0 1 2 --skip-cli   # the thread rule's evidence
"""

import argparse
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from benchlib import (
    add_common_options,
    checkpoint_step,
    machine_info,
    run_or_exit,
    set_threads,
    stats,
    timed,
    write_report,
)
from torch import Tensor

from seq2seq.data.corpus import read_lines
from seq2seq.decode.batched import pad_batch
from seq2seq.decode.loader import load_model, load_translator
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.decode.translator import Translator, source_normalizer
from seq2seq.device import resolve_device, use_bf16
from seq2seq.errors import UserError
from seq2seq.evaluate.metrics import corpus_scores
from seq2seq.export.ctranslate2 import export_ctranslate2
from seq2seq.model.layers import DecoderCache
from seq2seq.model.masks import padding_mask
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS, PAD

CLI_SENTENCE = "今天天气很好。"


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
            results[use_cache] = timed(lambda u=use_cache: decode_steps(model, memory, src_mask, steps, u), device)
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
        "cached_s": stats(cached),
        "uncached_s": stats(uncached),
        "ratio_median": statistics.median(ratios),
        "ratio_of_medians": statistics.median(uncached) / statistics.median(cached),
        "same_tokens": same,
    }


ENGINE_ROWS = ("ours-float32", "ours-bf16", "ct2-float32", "ct2-int8", "ct2-int8_bfloat16")


def row_label(name: str, threads: int, settings: list[int]) -> str:
    """A row's key: the engine row's name, with ``@threads`` when several thread counts are compared."""
    return name if len(settings) == 1 else f"{name}@{threads}"


class CTranslate2Rows:
    """The CTranslate2 rows, in a child process: importing ctranslate2 (with its own OpenMP runtime)
    slowed our float32 decoder in the same process (docs/design.md#ctranslate2-in-a-child), and no user
    of our engine loads it. The child exports the model and loads a translator per row; each request
    then goes over a pipe, one at a time, and the child times the ``translate`` call itself, so the
    pipe is not in the figures. Use as a context manager: leaving it stops the child."""

    def __init__(self, run_dir: Path, rows: dict[str, tuple[str, int]], overrides: list[str]) -> None:
        """``rows``: label -> (quantization, thread setting)."""
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of ours is copied in
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve_rows, args=(child, str(run_dir), rows, overrides), daemon=True)
        self.process.start()
        child.close()
        self.plans: dict[str, tuple[int, int, str]] = self._reply()
        """label -> (intra-op threads, workers, compute type) of each row's translator."""

    def _reply(self) -> Any:
        reply = self.conn.recv()
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def measure(self, label: str, sources: list[str], beam: int) -> tuple[float, list[str]]:
        """Seconds the row's ``translate(sources, beam)`` took in the child, and its best translations."""
        self.conn.send((label, sources, beam))
        return self._reply()

    def __enter__(self) -> "CTranslate2Rows":
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.send(None)
        self.process.join(timeout=60)


def _serve_rows(conn: Any, run_dir: str, rows: dict[str, tuple[str, int]], overrides: list[str]) -> None:
    """The child of ``CTranslate2Rows``: replies to each (label, sources, beam) until None, an exception
    in place of a reply."""
    cpu = torch.device("cpu")
    with tempfile.TemporaryDirectory() as workdir:
        try:
            kinds = {kind for kind, _ in rows.values()}  # each quantization exported once
            exported = {kind: export_ctranslate2(Path(run_dir), Path(workdir) / kind, kind) for kind in kinds}
            translators = {
                label: load_translator([exported[kind]], cpu, overrides, engine="ctranslate2", threads=threads)
                for label, (kind, threads) in rows.items()
            }
            conn.send({label: (*thread_plan(t), t.compute_type) for label, t in translators.items()})
        except Exception as err:  # noqa: BLE001 (the parent raises it)
            conn.send(err)
            return
        for request in iter(conn.recv, None):
            label, sources, beam = request
            try:
                conn.send(measure(translators[label], sources, beam))
            except Exception as err:  # noqa: BLE001
                conn.send(err)


class ChildRow:
    """One CTranslate2 row as ``bench_engines`` sees it: its thread plan and compute type, and translations
    measured in the child process."""

    def __init__(self, rows: CTranslate2Rows, label: str) -> None:
        self.rows, self.label = rows, label
        self.threads, self.workers, self.compute_type = rows.plans[label]
        self.precision, self.device = self.compute_type, torch.device("cpu")  # as CTranslate2Translator's

    def measure(self, sources: list[str], beam: int) -> tuple[float, list[str]]:
        return self.rows.measure(self.label, sources, beam)


Row = Translator | ChildRow


def make_translators(
    run_dir: Path,
    device: torch.device,
    rows: list[str],
    settings: list[int],
    overrides: list[str],
    stack: contextlib.ExitStack,
) -> dict[str, tuple[str, int, Row]]:
    """Row label -> (row name, thread setting, its translator) for every row name (``ours-PRECISION``
    or ``ct2-QUANTIZATION``) at every thread setting, each with the ``decode.*`` ``overrides``. The
    CTranslate2 rows live in one ``CTranslate2Rows`` child, which ``stack`` stops."""
    labels = {(name, threads): row_label(name, threads, settings) for name in rows for threads in settings}
    kinds = {(name, threads): name.split("-", 1)[1] for name, threads in labels}
    ct2 = {label: (kinds[key], key[1]) for key, label in labels.items() if key[0].startswith("ct2")}
    child = stack.enter_context(CTranslate2Rows(run_dir, ct2, overrides)) if ct2 else None
    translators: dict[str, tuple[str, int, Row]] = {}
    for (name, threads), label in labels.items():
        if label in ct2:
            translator: Row = ChildRow(child, label)
        else:
            translator = load_translator([run_dir], device, overrides, precision=kinds[name, threads], threads=threads)
        translators[label] = (name, threads, translator)
    return translators


def measure(translator: Row, sources: list[str], beam: int) -> tuple[float, list[str]]:
    """Seconds one ``translate(sources, beam)`` takes, and its best translations."""
    if isinstance(translator, ChildRow):
        return translator.measure(sources, beam)
    elapsed, results = timed(lambda: translator.translate(sources, beam), translator.device)
    return elapsed, [r.best.text for r in results]


def thread_plan(translator: Row) -> tuple[int, int]:
    """(intra-op threads, workers) a translator decodes with (torch: 0 = torch's count as it is)."""
    return getattr(translator, "threads", 0) or torch.get_num_threads(), getattr(translator, "workers", 1)


def _p50_ms(seconds: list[float]) -> float:
    return 1000 * statistics.median(seconds)


def bench_engines(
    rows: dict[str, tuple[str, int, Row]],
    sources: list[str],
    references: list[str],
    beams: list[int],
    repeats: int,
    latency_sentences: int,
) -> list[dict[str, Any]]:
    """(b): every row on the same sentences, alternating; sentences/s, BLEU, outputs changed, latency."""
    translators = {label: translator for label, (_, _, translator) in rows.items()}
    names = list(translators)
    seconds: dict[tuple[str, int], list[float]] = {(name, beam): [] for name in names for beam in beams}
    outputs: dict[tuple[str, int], list[str]] = {}
    for beam in beams:  # warm-up, untimed: first-call allocations, kernel selection, thread pools
        for name in names:
            measure(translators[name], sources[:8], beam)
    for repeat in range(repeats):
        for beam in beams:
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:  # rotate who goes first
                elapsed, outputs[name, beam] = measure(translators[name], sources, beam)
                seconds[name, beam].append(elapsed)
    latency: dict[tuple[str, int], list[float]] = {key: [] for key in seconds}
    for beam in beams:
        for index, sentence in enumerate(sources[:latency_sentences]):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                latency[name, beam].append(measure(translators[name], [sentence], beam)[0])
    report = []
    for beam in beams:
        best: dict[str, float] = {}  # engine row -> its fastest median over the thread settings
        for label, (name, _, _) in rows.items():
            best[name] = min(best.get(name, float("inf")), statistics.median(seconds[label, beam]))
        for name in names:
            row_name, setting, translator = rows[name]
            base_label = next((k for k, (n, t, _) in rows.items() if n == "ours-float32" and t == setting), None)
            base = outputs.get((base_label, beam))
            base_median = statistics.median(seconds[base_label, beam]) if base else None
            hyps = outputs[name, beam]
            scores = corpus_scores(hyps, references)
            median = statistics.median(seconds[name, beam])
            intra, workers = thread_plan(translator)
            row = {
                "engine": "torch" if name.startswith("ours") else "ctranslate2",
                "precision": row_name.split("-", 1)[1],
                "compute_type": getattr(translator, "compute_type", translator.precision),
                "threads_setting": setting,
                "intra_threads": intra,
                "workers": workers,
                "vs_best_setting": best[row_name] / median,
                "beam": beam,
                "sentences": len(sources),
                "seconds": stats(seconds[name, beam]),
                "sentences_per_s": len(sources) / median,
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "latency_p50_ms": _p50_ms(latency[name, beam]) if latency[name, beam] else None,
                "latency_sentences": len(latency[name, beam]),
            }
            if base is not None:
                row["differs_from_ours_float32"] = sum(a != b for a, b in zip(hyps, base, strict=True))
                row["speedup_vs_ours_float32"] = base_median / median
            report.append(row)
    return report


def bench_cli(model_dir: str, device: torch.device, threads: int, repeats: int) -> dict[str, Any]:
    """(c): wall time of ``seq2seq translate SENTENCE`` in a fresh process, model load included
    (``threads`` 0: the command's own default)."""
    script = Path(sys.executable).with_name("seq2seq")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "seq2seq"]
    command += ["translate", "--model", model_dir, "--device", device.type, CLI_SENTENCE]
    if threads:
        command[-1:-1] = ["--threads", str(threads)]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # the flag alone decides
    seconds, output = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        seconds.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise UserError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
        output = done.stdout.strip()
    return {"command": command[-6:], "seconds": stats(seconds), "translation": output}


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
        print(
            f"{'engine':12}{'precision':15}{'compute':14}{'threads':>12}{'beam':>5}{'sent/s':>9}{'x best':>7}"
            f"{'x f32':>7}{'BLEU':>7}{'chrF':>7}{'differ':>7}{'p50 ms':>8}"
        )
        for r in rows:
            speedup = f"{r['speedup_vs_ours_float32']:7.2f}" if "speedup_vs_ours_float32" in r else f"{'':7}"
            differ = f"{r['differs_from_ours_float32']:7d}" if "differs_from_ours_float32" in r else f"{'':7}"
            latency = f"{r['latency_p50_ms']:8.1f}" if r["latency_p50_ms"] is not None else f"{'':8}"
            threads = ("default " if r["threads_setting"] == 0 else "") + f"{r['intra_threads']}x{r['workers']}"
            print(
                f"{r['engine']:12}{r['precision']:15}{r['compute_type']:14}{threads:>12}{r['beam']:5}"
                f"{r['sentences_per_s']:9.1f}{r['vs_best_setting']:7.2f}{speedup}{r['bleu']:7.2f}{r['chrf']:7.2f}"
                f"{differ}{latency}"
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
    add_common_options(parser, "bench_decode", threads=False)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[0],
        help="thread counts of (b), each row at each; 0 = the decoding default (seq2seq.decode.threads); "
        "(a) runs at the first (0 there: every core)",
    )
    parser.add_argument("--force-bf16", action="store_true", help="measure bf16 even where it is not native")
    parser.add_argument("--rows", nargs="+", default=list(ENGINE_ROWS), choices=ENGINE_ROWS, help="engine rows of (b)")
    parser.add_argument(
        "--latency-sentences", type=int, default=100, help="sentences translated one by one for the p50 latency"
    )
    parser.add_argument("--skip-cli", action="store_true", help="leave out (c)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="decode.KEY=VALUE",
        help="a decoding setting of every row of (b), as translate's --set; e.g. decode.batch_sentences=null, "
        "what a model trained from the recipes stores",
    )
    args = parser.parse_args(argv)
    for name in ("repeats", "repeats_translate", "repeats_cli", "batch", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.sentences < 0 or min(args.threads) < 0 or args.latency_sentences < 0 or min(args.beams) < 1:
        parser.error("--sentences, --threads and --latency-sentences must be >= 0, --beams >= 1")
    report = run_or_exit("bench_decode", run, args)
    print_report(report)
    write_report(report, args.out)
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """All three measurements -> the report dict."""
    settings = list(dict.fromkeys(args.threads))  # each count once, in the order given
    set_threads(settings[0])
    device = resolve_device(args.device)
    run_dir = Path(args.model)
    model, tokenizer, cfg = load_model(run_dir, device)
    run_dir = run_dir if run_dir.is_dir() else run_dir.parent
    # (a) encodes with it
    translator = TorchTranslator(model, tokenizer, cfg.decode, device, normalize_source=source_normalizer(cfg))
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
    rows = list(args.rows)
    if "ours-bf16" in rows and not (use_bf16("auto", device) or args.force_bf16):
        rows.remove("ours-bf16")
        notes.append(f"bf16 skipped: {device} has no native bf16 (--force-bf16 measures it anyway)")
    with contextlib.ExitStack() as stack:
        translators = make_translators(run_dir, device, rows, settings, args.set, stack)
        engine_rows = bench_engines(
            translators, test_src[:n], test_tgt[:n], args.beams, args.repeats_translate, args.latency_sentences
        )
    for name, _, translator in translators.values():
        kind = name.split("-", 1)[1]
        if name.startswith("ct2") and translator.compute_type not in (kind, f"{kind}_float32"):
            note = f"{name} ran as {translator.compute_type}: this CPU has no faster type for it in CTranslate2"
            notes += [note] if note not in notes else []

    report: dict[str, Any] = {
        "model": str(run_dir),
        "step": checkpoint_step(run_dir),
        "machine": machine_info(device),
        "cache": cache,
        "repeats_translate": args.repeats_translate,
        "overrides": args.set,
        "ctranslate2_beside_ours": "ctranslate2" in sys.modules,  # False: our rows ran without it loaded
        "translate": engine_rows,
        "notes": notes,
    }
    if not args.skip_cli:
        report["cli"] = bench_cli(str(run_dir), device, settings[0], args.repeats_cli)
    return report


if __name__ == "__main__":
    sys.exit(main())
