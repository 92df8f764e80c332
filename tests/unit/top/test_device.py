"""seq2seq.device: which device ``auto`` picks (CUDA, then MPS, then the CPU), what ``auto`` means for
training and decoding precision, and how many CPU cores a process may use."""

import os

import pytest
import torch

import seq2seq.device as device
from seq2seq.config import config_from_dict
from seq2seq.device import (
    available_cpus,
    cpu_has_fast_bf16,
    cuda_has_native_bf16,
    decode_precision,
    resolve_device,
    resolve_precision,
)
from seq2seq.errors import UserError

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


@pytest.mark.parametrize("native", [True, False])
def test_auto_on_cuda_is_bf16_autocast_where_native_else_fp16(monkeypatch, native):
    """A GPU that only emulates bf16 (torch says yes unless asked ``including_emulation=False``) trains in fp16
    and decodes in float32."""
    asked = []

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        asked.append(including_emulation)
        return native or including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    cuda = torch.device("cuda")
    assert resolve_precision("auto", cuda) == ("bf16-autocast" if native else "fp16")
    assert decode_precision("auto", cuda) == ("bf16" if native else "float32")
    assert set(asked) == {False}


@pytest.mark.parametrize("native", [True, False])
def test_a_torch_without_the_emulation_argument_is_asked_plainly(monkeypatch, native):
    """Before ``including_emulation`` existed, ``is_bf16_supported()`` counted native bf16 only."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: native)
    assert cuda_has_native_bf16() is native
    assert resolve_precision("auto", torch.device("cuda")) == ("bf16-autocast" if native else "fp16")


@pytest.mark.parametrize(("cuda", "mps", "chosen"), [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")])
def test_auto_picks_cuda_then_mps_then_the_cpu(monkeypatch, cuda, mps, chosen):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert resolve_device("auto") == torch.device(chosen)


def test_mps_named_is_used_when_present_and_a_user_error_when_absent(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("mps") == torch.device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(UserError, match="no Apple GPU"):
        resolve_device("mps")


def test_an_unknown_device_is_a_user_error():
    with pytest.raises(UserError, match="choose auto, cpu, cuda, cuda:N or mps"):
        resolve_device("tpu")


def test_auto_precision_on_mps_is_float32():
    mps = torch.device("mps")
    assert resolve_precision("auto", mps) == "float32"
    assert decode_precision("auto", mps) == "float32"
    assert resolve_precision("bf16-autocast", mps) == "bf16-autocast"  # asked for: used


def test_train_device_accepts_mps_and_names_it_when_refusing():
    base = {"data": {"src": "a", "tgt": "b"}, "train": {"max_steps": 1}}
    assert config_from_dict({**base, "train": {"max_steps": 1, "device": "mps"}}, "x.yaml").train.device == "mps"
    with pytest.raises(UserError, match=r"train.device must be auto, cpu, cuda\[:N\] or mps"):
        config_from_dict({**base, "train": {"max_steps": 1, "device": "gpu"}}, "x.yaml")


def test_available_cpus_without_an_affinity_mask_counts_every_core(monkeypatch):
    for name in ("process_cpu_count", "sched_getaffinity"):
        monkeypatch.delattr(os, name, raising=False)
    monkeypatch.setattr(device, "cgroup_cpu_quota", lambda: None)
    assert available_cpus() == os.cpu_count()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="the affinity mask is Linux's")
def test_available_cpus_follows_the_affinity_mask(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(device, "cgroup_cpu_quota", lambda: None)
    assert available_cpus() == 1


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


def _cgroup(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "cpus"),
    [
        ({"cpu.max": "200000 100000\n"}, 2),  # cgroup v2: two CPUs' worth
        ({"cpu.max": "150000 100000\n"}, 2),  # one and a half: rounded up
        ({"cpu.max": "max 100000\n"}, None),  # no quota
        ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # cgroup v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),  # no cgroup files at all (macOS, Windows)
    ],
)
def test_cgroup_cpu_quota_reads_v2_and_v1(tmp_path, files, cpus):
    assert device.cgroup_cpu_quota(_cgroup(tmp_path, files)) == cpus


def test_available_cpus_is_capped_by_a_cgroup_quota(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(device, "cgroup_cpu_quota", lambda: 2)
    assert available_cpus() == 2
    monkeypatch.setattr(device, "cgroup_cpu_quota", lambda: 8)  # a quota above the mask changes nothing
    assert available_cpus() == 4
