"""seq2seq.explain.residual: one row per Add & Norm in the order the model ran them, each norm the
mean over positions of what the model carried, the LayerNorm output at about √D (unit gain) in
post-norm and pre-norm alike."""

import math

import pytest
import torch
from conftest import build_tiny_model, random_batch

from seq2seq.explain.probe import recording
from seq2seq.explain.residual import residual_section


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_rows_are_the_models_add_and_norms(norm):
    model = build_tiny_model(norm=norm)
    src, tgt = random_batch()
    with torch.no_grad(), recording(model) as found:
        model(src, tgt)
    section = residual_section(found.residual, norm == "pre")
    assert section["norm"] == norm
    assert [row["name"] for row in section["rows"]] == [call.name for call in found.residual]
    assert len(section["rows"]) == 2 * 2 + 3 * 2
    first, call = section["rows"][0], found.residual[0]
    assert first["x"] == pytest.approx(float(call.x.norm(dim=-1).mean()), abs=1e-3)
    assert first["f"] == pytest.approx(float(call.sublayer.norm(dim=-1).mean()), abs=1e-3)
    assert first["sum"] == pytest.approx(float((call.x + call.sublayer).norm(dim=-1).mean()), abs=1e-3)
    for row in section["rows"]:
        assert row["norm"] == pytest.approx(math.sqrt(32), rel=1e-3)  # fresh LayerNorm: gain 1, bias 0
        assert -1 <= row["kept"] <= 1
        assert row["sum"] <= row["x"] + row["f"] + 1e-3  # the triangle inequality, position by position


def test_the_residual_carries_the_input_forward():
    """x + F(x) keeps x's direction largely: the cosine is well above that of unrelated vectors (≈ 0)."""
    model = build_tiny_model()
    src, tgt = random_batch()
    with recording(model) as found:
        model(src, tgt)
    kept = [row["kept"] for row in residual_section(found.residual, False)["rows"]]
    assert min(kept) > 0.3
    assert torch.tensor(kept).mean() > 0.5
