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
  weights) where bf16 is native, else ``float32`` (decoding has no float16 mode).
* ``available_cpus``: the cores training threads, the tokenizer and the corpus workers share.

Training and decoding both import this module, so neither imports the other to find a device.
"""

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from seq2seq.errors import UserError

DECODE_PRECISIONS = ("auto", "float32", "bf16")


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


def available_cpus() -> int:
    """The CPU cores this process may run on: its affinity mask where the system keeps one, else all cores.

    ``os.process_cpu_count`` (Python 3.13+) is exactly that; before it only Linux has the mask
    (``os.sched_getaffinity``), and macOS and Windows count every core (``os.cpu_count``).
    """
    if hasattr(os, "process_cpu_count"):
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_has_fast_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU computes bf16 matmuls natively (AVX-512 BF16 or AMX), as Linux's ``cpuinfo`` lists
    its flags; False where there is no such file (macOS, Windows)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[-1].split()}
    return bool(flags & {"avx512_bf16", "amx_bf16"})


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


def decode_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` where ``device`` computes bf16 natively, else ``float32``; others unchanged."""
    if precision not in DECODE_PRECISIONS:
        raise UserError(f"--precision {precision!r}: choose one of {', '.join(DECODE_PRECISIONS)}")
    if precision == "auto":
        return "bf16" if use_bf16("auto", device) else "float32"
    return precision
