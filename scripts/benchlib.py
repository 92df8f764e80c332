"""The machine a benchmark ran on, as recorded in every benchmark report (shared by scripts/bench_*.py)."""

import os
import platform
from pathlib import Path
from typing import Any

import torch


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
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
