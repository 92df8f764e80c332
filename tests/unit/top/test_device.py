"""seq2seq.device: what ``auto`` means for training and decoding precision on the CPU."""

import pytest
import torch

import seq2seq.device as device
from seq2seq.device import cpu_has_fast_bf16, decode_precision, resolve_precision

CPU = torch.device("cpu")


@pytest.mark.parametrize("fast", [True, False])
def test_auto_on_cpu_follows_native_bf16(monkeypatch, fast):
    monkeypatch.setattr(device, "cpu_has_fast_bf16", lambda: fast)
    assert resolve_precision("auto", torch.device("cpu")) == ("bf16-autocast" if fast else "float32")
    for explicit in ("float32", "bf16", "bf16-autocast"):
        assert resolve_precision(explicit, torch.device("cpu")) == explicit


@pytest.mark.parametrize("fast", [True, False])
def test_auto_on_cpu_is_bf16_only_with_native_bf16(monkeypatch, fast):
    monkeypatch.setattr(device, "cpu_has_fast_bf16", lambda: fast)
    assert decode_precision("auto", CPU) == ("bf16" if fast else "float32")
    assert decode_precision("float32", CPU) == "float32"
    assert decode_precision("bf16", CPU) == "bf16"


@pytest.mark.parametrize("supported", [True, False])
def test_auto_on_cuda_autocasts(monkeypatch, supported):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: supported)
    assert resolve_precision("auto", torch.device("cuda")) == ("bf16-autocast" if supported else "float32")


# The parts of /proc/cpuinfo that matter: one "flags" line per core (here two cores, trimmed).
CPUINFO = """processor\t: {n}
model name\t: Some CPU with avx512_bf16 in its name
flags\t\t: fpu sse2 avx2 avx512f avx512bw {extra}
bugs\t\t: spectre_v1

"""


@pytest.mark.parametrize(
    ("extra", "fast"),
    [
        ("avx512_bf16 avx512_vnni", True),  # Cooper Lake, Zen 4
        ("amx_tile amx_bf16 amx_int8", True),  # Sapphire Rapids
        ("avx512_vnni", False),  # AVX-512 without bf16
        ("", False),
    ],
    ids=["avx512-bf16", "amx", "avx512-without-bf16", "none"],
)
def test_cpu_has_fast_bf16_reads_the_flags_lines(tmp_path, extra, fast):
    """Only the flags lines count, not a model name that happens to contain a flag's name."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("".join(CPUINFO.format(n=n, extra=extra) for n in range(2)))
    assert cpu_has_fast_bf16(cpuinfo) is fast


def test_cpu_has_fast_bf16_is_false_without_a_cpuinfo_file(tmp_path):
    assert cpu_has_fast_bf16(tmp_path / "missing") is False  # macOS, Windows
