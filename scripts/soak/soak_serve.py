"""Soak ``seq2seq serve``: minutes of overload and faulty clients (outside CI; the short version in CI is
tests/system/test_serve_faults.py, whose clients, tests/faulty_clients.py, this harness drives).

Client threads loop until ``--seconds``, each request of a kind drawn by weight: well-formed ones
(some with a short ``timeout_ms``), malformed bodies (bad JSON, a wrong type, 600 KB declared and
chunked), slow clients trickling their bodies, and clients that leave mid-body or right after
sending. Every request goes on its own connection with ``Connection: close``, so the reply is read to
the connection's end: exactly one response, nothing after it. Checked for every request: its status
is one its kind allows (no 5xx but the 503 and 504 the server promises), a well-behaved client got
an answer (no reset, no timeout), and a 200 answers its own sentence. Then SIGTERM, and the time to
exit. Reports requests, counts by status, p50/p99 latency of the accepted (200) ones, the server's
RSS (start, end, peak); writes JSON with ``--out``.

    python scripts/soak/soak_serve.py --model runs/toy --seconds 300
"""

import argparse
import json
import random
import signal
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "scripts" / "bench"), str(REPO / "tests")]  # benchlib; the clients CI runs too
from benchlib import add_common_options, free_port, machine_info, rss_mib, set_threads, start_server, write_report  # noqa: E402
from faulty_clients import SENTENCES, WEIGHTS, Outcome, client, problems  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="run directory")
    parser.add_argument("--seconds", type=float, default=300, help="how long the traffic runs")
    parser.add_argument("--clients", type=int, default=48, help="client threads (several times the queue)")
    parser.add_argument("--max-queue-sentences", type=int, default=16)
    parser.add_argument("--request-timeout-s", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    add_common_options(parser, "soak_serve", device="cpu")
    args = parser.parse_args()

    threads = set_threads(args.threads)
    port = free_port()
    flags = ["--device", args.device, "--max-queue-sentences", str(args.max_queue_sentences)]
    flags += ["--request-timeout-s", str(args.request_timeout_s), "--max-body-bytes", "16384"]
    server = start_server(args.model, port, flags, threads)
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + args.seconds
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())

    def loop(number: int) -> None:
        rng = random.Random(args.seed * 1000 + number)
        serial = 0
        while time.monotonic() < stop_at:
            serial += 1
            sentence = f"{rng.choice(SENTENCES)}{number}-{serial}"  # unique: a 200 must answer this one
            outcome = client(rng.choices(kinds, weights)[0], port, sentence, rng, args.request_timeout_s)
            with lock:
                outcomes.append(outcome)

    try:
        rss_start = rss_mib(server.pid)
        workers = [threading.Thread(target=loop, args=(n,)) for n in range(args.clients)]
        for worker in workers:
            worker.start()
        rss_samples = []
        while any(worker.is_alive() for worker in workers):
            rss_samples.append(rss_mib(server.pid))
            time.sleep(1)
        for worker in workers:
            worker.join()
        rss_end, rss_peak = rss_mib(server.pid), rss_mib(server.pid, "VmHWM")
        stopped = time.monotonic()
        server.send_signal(signal.SIGTERM)
        exit_status = server.wait(timeout=args.request_timeout_s + 60)
        exit_s = time.monotonic() - stopped
    finally:
        if server.poll() is None:
            server.kill()
    found = [p for outcome in outcomes for p in problems(outcome)]
    statuses = Counter(o.reply.status if o.reply else ("left" if o.error is None else "error") for o in outcomes)
    accepted = sorted(o.reply.seconds for o in outcomes if o.reply and o.reply.status == 200)
    q = statistics.quantiles(accepted, n=100) if len(accepted) > 1 else accepted * 99
    report = {
        "model": args.model,
        "seconds": args.seconds,
        "clients": args.clients,
        "max_queue_sentences": args.max_queue_sentences,
        "request_timeout_s": args.request_timeout_s,
        "machine": machine_info(torch.device(args.device)),
        "requests": len(outcomes),
        "by_kind": dict(Counter(o.kind for o in outcomes)),
        "by_status": {str(k): v for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))},
        "2xx": sum(v for k, v in statuses.items() if isinstance(k, int) and 200 <= k < 300),
        "4xx": sum(v for k, v in statuses.items() if isinstance(k, int) and 400 <= k < 500),
        "503": statuses[503],
        "504": statuses[504],
        "other_5xx": sum(v for k, v in statuses.items() if isinstance(k, int) and k >= 500 and k not in (503, 504)),
        "accepted_p50_ms": round(1000 * q[49], 1) if accepted else None,
        "accepted_p99_ms": round(1000 * q[98], 1) if accepted else None,
        "server_rss_mib": {"start": round(rss_start, 1), "end": round(rss_end, 1), "peak": round(rss_peak, 1)},
        "server_rss_mib_each_quarter": [round(rss_samples[len(rss_samples) * q // 4 - 1], 1) for q in (1, 2, 3, 4)],
        "exit_status": exit_status,
        "exit_seconds_after_sigterm": round(exit_s, 2),
        "problems": found[:50],
        "problem_count": len(found),
    }
    print(json.dumps({k: v for k, v in report.items() if k != "problems"}, indent=1))
    write_report(report, args.out)
    if found:
        sys.exit(f"soak_serve: {len(found)} problems, e.g. {found[:3]}")


if __name__ == "__main__":
    main()
