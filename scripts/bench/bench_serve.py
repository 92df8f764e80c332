"""Benchmark ``seq2seq serve``: N concurrent clients each sending single test-split sentences.

Starts the server on a free loopback port and, in rounds, measures side by side:
- the server with 1 (a sequential client), 8, 32 … concurrent clients: sentences/s and
  p50/p95/p99 latency, each level bounded by ``--requests`` and ``--seconds``;
- ``seq2seq evaluate``'s batch path (``Translator.translate`` over the sentence list) in this process;
- one sentence at a time through the same call: the CLI's decode time without the model load.
Reports medians over rounds and the server's peak RSS; writes JSON with ``--out``.

    python scripts/bench/bench_serve.py --model runs/zh-en --beam 5
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from benchlib import add_common_options, free_port, machine_info, rss_mib, set_threads, start_server, write_report

from seq2seq.decode.loader import load_translator
from seq2seq.device import DECODE_PRECISIONS, resolve_device


def load_test(port: int, sentences: list[str], clients: int, beam: int, requests: int, seconds: float) -> dict:
    """``clients`` threads, each with its own keep-alive connection, POST one sentence at a time."""
    latencies: list[float] = []
    errors: list[str] = []
    taken = iter(range(requests))
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Content-Type": "application/json"}
        while time.monotonic() < stop_at:
            with lock:
                index = next(taken, None)
            if index is None:
                return
            body = json.dumps({"text": sentences[index % len(sentences)], "beam": beam})
            start = time.perf_counter()
            connection.request("POST", "/translate", body, headers)
            response = connection.getresponse()
            response.read()
            with lock:
                if response.status == 200:
                    latencies.append(time.perf_counter() - start)
                else:
                    errors.append(f"HTTP {response.status}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors or not latencies:
        sys.exit(f"bench_serve: {len(errors)} failed requests ({errors[:3]}), {len(latencies)} answered")
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {
        "requests": len(latencies),
        "sentences_per_s": len(latencies) / wall,
        "p50_ms": 1000 * q[49],
        "p95_ms": 1000 * q[94],
        "p99_ms": 1000 * q[98],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="run directory (its test.src is the input)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument(
        "--precision", choices=DECODE_PRECISIONS, default="auto", help="as for translate/evaluate/serve"
    )
    parser.add_argument("--clients", default="1,8,32", help="comma-separated client counts; 1 = sequential")
    parser.add_argument("--sentences", type=int, default=500, help="test sentences used (and batch-decoded)")
    parser.add_argument("--requests", type=int, default=400, help="at most this many requests per level")
    parser.add_argument("--seconds", type=float, default=30, help="at most this long per level")
    parser.add_argument("--singles", type=int, default=50, help="sentences timed one at a time")
    parser.add_argument("--rounds", type=int, default=3)
    add_common_options(parser, "bench_serve", device="cpu")  # --threads: here and in the server
    args = parser.parse_args()

    sentences = [s for s in (Path(args.model) / "test.src").read_text(encoding="utf-8").splitlines() if s]
    sentences = sentences[: args.sentences]
    levels = [int(n) for n in args.clients.split(",")]
    device = resolve_device(args.device)
    set_threads(args.threads)
    # as serve loads it; --threads 0 leaves both to the decoding default (seq2seq.decode.threads)
    translator = load_translator([args.model], device, precision=args.precision, threads=args.threads)
    port = free_port()
    server = start_server(args.model, port, ["--device", args.device, "--precision", args.precision], args.threads)
    rounds: list[dict] = []
    try:
        for number in range(args.rounds):
            record: dict = {}
            start = time.perf_counter()
            translator.translate(sentences, args.beam)
            record["batch_sentences_per_s"] = len(sentences) / (time.perf_counter() - start)
            singles = []
            for sentence in sentences[: args.singles]:
                start = time.perf_counter()
                translator.translate([sentence], args.beam)
                singles.append(time.perf_counter() - start)
            record["single_ms"] = 1000 * statistics.median(singles)
            for clients in levels:
                record[f"clients_{clients}"] = load_test(
                    port, sentences, clients, args.beam, args.requests, args.seconds
                )
            rounds.append(record)
            print(f"round {number + 1}/{args.rounds}: {json.dumps(record)}", file=sys.stderr)
        rss = rss_mib(server.pid, "VmHWM")
    finally:
        server.terminate()
        server.wait(timeout=60)

    def median(*keys: str) -> float:
        values = []
        for record in rounds:
            value = record
            for key in keys:
                value = value[key]
            values.append(value)
        return statistics.median(values)

    summary = {
        "model": args.model,
        "beam": args.beam,
        "precision": translator.precision,
        "sentences": len(sentences),
        "rounds": args.rounds,
        "machine": machine_info(device),
        "load_average_1min": os.getloadavg()[0],  # others' work on a shared machine shows here
        "server_peak_rss_mib": round(rss, 1),
        "batch_sentences_per_s": round(median("batch_sentences_per_s"), 1),
        "single_sentence_ms": round(median("single_ms"), 1),
        "levels": {
            n: {k: round(median(f"clients_{n}", k), 1) for k in ("sentences_per_s", "p50_ms", "p95_ms", "p99_ms")}
            for n in levels
        },
        "rounds_raw": rounds,
    }
    one, top = summary["levels"][levels[0]], summary["levels"][levels[-1]]
    summary["ratios"] = {
        f"{levels[-1]}_vs_{levels[0]}_clients": round(top["sentences_per_s"] / one["sentences_per_s"], 2),
        f"{levels[-1]}_clients_vs_batch": round(top["sentences_per_s"] / summary["batch_sentences_per_s"], 2),
        f"p95_{levels[0]}_client_vs_single": round(one["p95_ms"] / summary["single_sentence_ms"], 2),
    }
    print("| clients | sentences/s | p50 ms | p95 ms | p99 ms |")
    print("|---|---|---|---|---|")
    for n, level in summary["levels"].items():
        row = f"| {n} | {level['sentences_per_s']} | {level['p50_ms']} | {level['p95_ms']} | {level['p99_ms']} |"
        print(row)
    print(
        f"batch (evaluate's path): {summary['batch_sentences_per_s']} sentences/s; "
        f"one sentence: {summary['single_sentence_ms']} ms; server peak RSS {summary['server_peak_rss_mib']} MiB"
    )
    print(json.dumps(summary["ratios"]))
    write_report(summary, args.out)


if __name__ == "__main__":
    main()
