"""Where a model runs and in which precision, and how many CPU cores it may use: the one place that decides ``auto``.

* ``resolve_device``: ``auto`` is CUDA when a GPU is present, else an Apple GPU (MPS), else the CPU.
* ``resolve_precision`` (training): ``auto`` is ``bf16-autocast`` where the device computes bf16
  natively (CUDA GPUs of compute capability 8 and up, CPUs with AVX-512 BF16 or AMX); ``fp16``
  (float16 autocast with loss scaling) on a CUDA GPU without native bf16, where torch only
  emulates bf16 (no faster than float32) while float16 is native; else ``float32``. What
  training does with each precision is ``seq2seq.train.precision``. On MPS ``auto`` is ``float32``:
  bf16 there needs macOS 14 and is not native arithmetic on every Apple GPU, so it runs only when
  asked for.
* ``decode_precision`` (translate, evaluate, serve): ``auto`` is ``bf16`` (a bf16 copy of the
  weights) where bf16 is native, else ``float32`` (decoding has no float16 mode);
  ``size_onednn_caches`` gives a bf16 decode on a CPU room to keep its compiled kernels.
* ``available_cpus``: the cores training and decoding threads, the tokenizer and the corpus workers
  share: the affinity mask, capped by a cgroup CPU quota (a container limited to 2 CPUs on a
  64-core host has 2, whatever its mask says).

Training and decoding both import this module, so neither imports the other to find a device.
"""

import functools
import math
import os
from collections.abc import MutableMapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from seq2seq.errors import UserError

DECODE_PRECISIONS = ("auto", "float32", "bf16")
# The two caches of compiled oneDNN kernels, oneDNN's own and the one of torch's wrapper around it.
ONEDNN_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
ONEDNN_CACHE_ENTRIES = 8192  # eight times the libraries' default: docs/design.md#onednn-cache


def resolve_device(name: str) -> torch.device:
    """'auto' -> CUDA when present, else MPS when present, else CPU; a named device must be there."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {name!r} asked for, but no CUDA GPU is available; use --device cpu")
    if name == "mps" and not torch.backends.mps.is_available():
        raise UserError("device 'mps' asked for, but no Apple GPU (MPS) is available; use --device cpu")
    try:
        return torch.device(name)
    except RuntimeError:
        raise UserError(f"device {name!r}: choose auto, cpu, cuda, cuda:N or mps") from None


CGROUP = Path("/sys/fs/cgroup")


def cgroup_cpu_quota(root: Path = CGROUP) -> int | None:
    """The CPUs a cgroup quota lets this process use (rounded up), or None where there is no quota.

    cgroup v2 keeps the quota in ``cpu.max`` ("QUOTA PERIOD", or "max PERIOD" for none), v1 in
    ``cpu/cpu.cfs_quota_us`` (-1 for none) and ``cpu/cpu.cfs_period_us``; both are read at the
    hierarchy's root, which is this process's own cgroup inside a container.
    """
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, math.ceil(quota_us / period_us))


def available_cpus() -> int:
    """The CPU cores this process may run on: its affinity mask where the system keeps one, else all
    cores; never more than a cgroup CPU quota allows.

    ``os.process_cpu_count`` (Python 3.13+) is the mask; before it only Linux has the mask
    (``os.sched_getaffinity``), and macOS and Windows count every core (``os.cpu_count``).
    """
    if hasattr(os, "process_cpu_count"):
        cores = os.process_cpu_count() or 1
    elif hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return min(cores, quota) if quota else cores


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as the flags lines of Linux's ``cpuinfo`` list them; empty where there is no
    such file (macOS, Windows)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    return frozenset(
        flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[-1].split()
    )


def cpu_has_fast_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU computes bf16 matmuls natively (AVX-512 BF16 or AMX); False where ``cpu_flags`` finds
    no flags."""
    return bool(cpu_flags(cpuinfo) & {"avx512_bf16", "amx_bf16"})


@functools.cache
def cpu_has_amx() -> bool:
    """True when the CPU multiplies bf16 matrices in AMX tiles (``amx_bf16``); read once per process, as the
    attention layers ask at every decoding step."""
    return "amx_bf16" in cpu_flags()


def cuda_has_native_bf16() -> bool:
    """True when the current CUDA GPU computes bf16 in hardware, not in float32 emulation.

    ``torch.cuda.is_bf16_supported()`` also says yes where torch merely emulates bf16 (before
    compute capability 8) unless told ``including_emulation=False``; a torch from before that
    argument counted native support only, so without the argument the plain call is the answer.
    """
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:
        return torch.cuda.is_bf16_supported()


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' -> ``bf16-autocast`` where ``device`` does bf16 natively, ``fp16`` on a CUDA GPU without it,
    else ``float32``; other values unchanged."""
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16-autocast" if cuda_has_native_bf16() else "fp16"
    return "bf16-autocast" if device.type == "cpu" and cpu_has_fast_bf16() else "float32"


def use_bf16(precision: str, device: torch.device) -> bool:
    """Whether ``precision`` computes in bf16 on ``device`` (either way of doing it)."""
    return resolve_precision(precision, device) in ("bf16", "bf16-autocast")


def autocast(device: torch.device, dtype: torch.dtype | None) -> Any:
    """An autocast context to ``dtype`` (bf16 or float16), or a no-op for None."""
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def size_onednn_caches(environ: MutableMapping[str, str] = os.environ) -> None:
    """Give oneDNN's kernel caches ``ONEDNN_CACHE_ENTRIES`` entries each, unless the user sized them.

    A CPU runs bf16 matrix products through oneDNN, which compiles a kernel for every shape and
    keeps it in two caches of 1,024 entries by default. A decode meets new shapes at every step
    (the self-attention keys grow) and at every batch size, more than 1,024 of them, so at the
    default it compiles again the kernels it dropped; larger caches decode faster and hold more
    memory (docs/design.md#onednn-cache, docs/performance.md#onednn-kernel-caches). The libraries
    read the sizes when they first build a kernel: this must run before the process's first bf16
    product to count.
    """
    for name in ONEDNN_CACHES:
        environ.setdefault(name, str(ONEDNN_CACHE_ENTRIES))


def decode_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` where ``device`` computes bf16 natively, else ``float32``; others unchanged."""
    if precision not in DECODE_PRECISIONS:
        raise UserError(f"--precision {precision!r}: choose one of {', '.join(DECODE_PRECISIONS)}")
    if precision == "auto":
        return "bf16" if use_bf16("auto", device) else "float32"
    return precision
