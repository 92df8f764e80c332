"""What every benchmark script shares: the machine record, the options that mean one thing everywhere
(--threads, --device, --out), clocks that include device work, statistics, a served model, the
checkpoint's step, and the JSON report.

* ``--threads N``: N torch threads; 0 (the default) = every core this process may run on, and for a
  decoding translator its default threads (``seq2seq.decode.threads``), as the verbs give it.
* ``--device``: auto (CUDA when present), cpu, cuda, cuda:N.
* ``--out FILE``: where the JSON report goes; by default ``runs/bench/<script>.json``. The reports that
  the benchmarks page (docs/benchmarks.md#machines) quotes are in benchmarks/results/, copied by hand.
"""

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoint import load_checkpoint, resolve_checkpoint
from seq2seq.device import available_cpus
from seq2seq.errors import UserError

REPORTS = Path("runs/bench")


def add_common_options(parser: argparse.ArgumentParser, name: str, device: str = "auto", threads: bool = True) -> None:
    """--threads (unless the script declares its own), --device and --out, with the meanings of the module docstring."""
    if threads:
        parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = every available core")
    parser.add_argument("--device", default=device, help="auto, cpu, cuda, cuda:N (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=REPORTS / f"{name}.json", help="JSON report (default: %(default)s)")


def set_threads(threads: int) -> int:
    """Use ``threads`` torch threads (0: every available core); returns the number set."""
    if threads < 0:
        sys.exit("--threads must be >= 0 (0: every available core)")
    count = threads or available_cpus()
    torch.set_num_threads(count)
    return count


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's processor string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(device: torch.device) -> dict[str, Any]:
    """CPU model, cores, threads, torch and Python versions, the device (and the GPU when there is one)."""
    info: dict[str, Any] = {
        "cpu": cpu_name(),
        "cores": available_cpus(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so that a clock reading includes it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """Seconds one call of ``fn`` takes (device work included) and its result."""
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


def stats(values: list[float]) -> dict[str, Any]:
    """min, median and max of repeated measurements, and the measurements."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "runs": list(values)}


def checkpoint_step(model_path: str | Path) -> int | None:
    """The training step a run's best.pt (or a checkpoint file) was saved at, for the record."""
    step = load_checkpoint(resolve_checkpoint(model_path)).get("step")
    return int(step) if step is not None else None


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model: str, port: int, flags: list[str], threads: int = 0) -> subprocess.Popen:
    """``seq2seq serve`` as a child process (``threads`` > 0: that many torch threads); returns once /health answers."""
    command = [sys.executable, "-m", "seq2seq", "serve", "--model", model, "--port", str(port), *flags]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)} if threads > 0 else None
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and server.poll() is None:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.3)
    server.kill()
    sys.exit(f"the server did not start ({' '.join(command)})")


def run_or_exit(name: str, run: Callable[[argparse.Namespace], dict[str, Any]], args: argparse.Namespace) -> dict:
    """``run(args)``'s report; a ``UserError`` is the script's one-line error and exit status 2."""
    try:
        return run(args)
    except UserError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident set (VmRSS) or its peak (VmHWM), in MiB, from Linux's /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no {field} for pid {pid}")


def write_report(report: dict[str, Any], out: Path) -> None:
    """Write the JSON report (UTF-8, indented) and say where."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
