"""seq2seq.device: what ``auto`` means for training and decoding precision on the CPU."""

import pytest
import torch

import seq2seq.device as device
from seq2seq.device import decode_precision, resolve_precision

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
