"""Where a decode of the test split spends its time: the model's own work against the search around it.

The model is wrapped in a proxy that times its ``encode``, ``decode`` and ``logits`` calls
(the network itself); everything else in ``Translator.search`` — choosing candidates,
bookkeeping in Python, reordering and shrinking the cache, building the next step's
inputs — is the search's overhead. cProfile then names the functions that overhead is
spent in (a second pass: cProfile slows Python code, so read its figures as shares). A third
pass under torch's profiler adds up the operators' own time by operator; what the wall time
holds beyond it is Python and operator dispatch, the part no faster kernel would shorten.
Last, the search's top-k over a full batch's candidates (sentences × beam·vocabulary) is timed
both ways: ``row_topk``'s groups against one ``topk`` over every column.

    python scripts/profile_decode.py --model runs/zh-en --beam 5 --precision float32
"""

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from benchlib import add_common_options, set_threads, write_report
from torch import Tensor, nn
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile

from seq2seq.data.corpus import read_lines
from seq2seq.decode.loader import load_translator
from seq2seq.decode.search import row_topk
from seq2seq.device import DECODE_PRECISIONS, resolve_device
from seq2seq.model.layers import DecoderCache


class TimedModel(nn.Module):
    """A model proxy adding the wall time of every encode/decode/logits call to ``seconds``."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner, self.cfg = inner, inner.cfg
        self.seconds = {"encode": 0.0, "decode": 0.0, "logits": 0.0}
        self.calls = {"decode": 0}
        self.vocab = 0  # the width of the last logits

    def _timed(self, name: str, *args: Any) -> Tensor:
        start = time.perf_counter()
        out = getattr(self.inner, name)(*args)
        self.seconds[name] += time.perf_counter() - start
        return out

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return self._timed("encode", src, src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        self.calls["decode"] += 1
        return self._timed("decode", tgt, memory, src_mask, cache)

    def logits(self, states: Tensor) -> Tensor:
        out = self._timed("logits", states)
        self.vocab = out.size(-1)
        return out


def time_topk(rows: int, width: int, k: int, repeats: int = 200) -> dict[str, float]:
    """Microseconds per call (median of 5 blocks) of ``row_topk`` and ``topk`` on random (rows, width) scores."""
    scores = torch.randn(rows, width, generator=torch.Generator().manual_seed(0))
    timings = {}
    for name, topk in (("grouped", lambda: row_topk(scores, k)), ("plain", lambda: scores.topk(k, dim=1))):
        topk()  # warm-up
        blocks = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats // 5):
                topk()
            blocks.append((time.perf_counter() - start) / (repeats // 5) * 1e6)
        timings[f"{name}_us"] = statistics.median(blocks)
    return {"rows": rows, "width": width, "k": k, **timings}


def profile(args: argparse.Namespace) -> dict[str, Any]:
    """One decode of the split under the timing proxy, one under cProfile -> the report dict."""
    set_threads(args.threads)
    translator = load_translator(
        [args.model], resolve_device(args.device), precision=args.precision, threads=args.threads
    )
    run_dir = Path(args.model) if Path(args.model).is_dir() else Path(args.model).parent
    sentences = read_lines(run_dir / f"{args.split}.src", args.split)[: args.sentences or None]
    sources = [translator.encode(s) for s in sentences]
    translator.search(sources[:8], args.beam, 1)  # warm-up: first-call allocations
    timed = TimedModel(translator.search_model)
    translator.search_model = timed
    start = time.perf_counter()
    translator.search(sources, args.beam, 1)
    total = time.perf_counter() - start
    model_seconds, decoder_calls = dict(timed.seconds), timed.calls["decode"]
    model = sum(model_seconds.values())
    # A second pass under cProfile names the functions (cProfile slows Python code, so its
    # seconds are read as shares; the split above comes from the pass without it).
    profiler = cProfile.Profile()
    profiler.enable()
    translator.search(sources, args.beam, 1)
    profiler.disable()
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(args.top)
    with torch_profile(activities=[ProfilerActivity.CPU]) as operators:
        start = time.perf_counter()
        translator.search(sources, args.beam, 1)
        profiled = time.perf_counter() - start
    by_operator = sorted(
        ((e.key, e.self_cpu_time_total / 1e6, e.count) for e in operators.key_averages()), key=lambda r: -r[1]
    )
    in_operators = sum(seconds for _, seconds, _ in by_operator)
    return {
        "model_dir": str(args.model),
        "precision": translator.precision,
        "beam": args.beam,
        "sentences": len(sources),
        "threads": torch.get_num_threads(),
        "seconds": total,
        "model_seconds": model_seconds,
        "decoder_calls": decoder_calls,
        "search_overhead_seconds": total - model,
        "model_share": model / total,
        "cprofile_by_own_time": stream.getvalue(),
        "topk": time_topk(translator.decode.batch_sentences, args.beam * timed.vocab, 2 * args.beam),
        "operators": {
            "wall_seconds": profiled,
            "in_operators_seconds": in_operators,
            "outside_operators_share": 1 - in_operators / profiled,
            "top": [{"op": op, "seconds": sec, "calls": calls} for op, sec, calls in by_operator[: args.top]],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/zh-en", help="run directory")
    parser.add_argument("--split", default="test", choices=["test", "dev"])
    parser.add_argument("--sentences", type=int, default=0, help="first N sentences; 0 = all")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--precision", default="float32", choices=DECODE_PRECISIONS)
    parser.add_argument("--top", type=int, default=15, help="cProfile rows to print")
    add_common_options(parser, "profile_decode", device="cpu")
    args = parser.parse_args(argv)
    report = profile(args)
    s = report["model_seconds"]
    print(
        f"{report['sentences']} sentences, beam {report['beam']}, {report['precision']}, {report['threads']} threads: "
        f"{report['seconds']:.2f} s; model {sum(s.values()):.2f} s ({report['model_share']:.0%}: encode "
        f"{s['encode']:.2f}, decode {s['decode']:.2f} in {report['decoder_calls']} calls, logits {s['logits']:.2f}); "
        f"search overhead {report['search_overhead_seconds']:.2f} s"
    )
    print(report["cprofile_by_own_time"])
    ops = report["operators"]
    print(
        f"torch profiler: {ops['wall_seconds']:.2f} s, operators' own time {ops['in_operators_seconds']:.2f} s; "
        f"outside them (Python, dispatch) {ops['outside_operators_share']:.0%}"
    )
    for row in ops["top"]:
        print(f"  {row['op']:32}{row['seconds']:8.3f} s{row['calls']:8d} calls")
    topk = report["topk"]
    print(
        f"the search's top-{topk['k']} of {topk['rows']} x {topk['width']} candidates: "
        f"grouped {topk['grouped_us']:.0f} us, plain topk {topk['plain_us']:.0f} us "
        f"({topk['plain_us'] / topk['grouped_us']:.2f}x)"
    )
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
