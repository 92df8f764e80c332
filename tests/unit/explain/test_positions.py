"""seq2seq.explain.positions: the sin/cos values are the model's own position buffer and turn with the
wavelength shown; the similarity of two position vectors depends on their distance alone and is 1 at
distance 0; the token rows add up (embedding × √D + encoding)."""

import math

import pytest
import torch
from conftest import build_tiny_model

from seq2seq.explain.positions import dimension_pairs, distances, positions_section, wavelength

SRC = [5, 6, 7, 8, 9, 10, 3]


@pytest.fixture(scope="module")
def section():
    model = build_tiny_model()
    return model, positions_section(model, SRC, [str(i) for i in SRC])


def test_pairs_run_from_fast_to_slow():
    assert dimension_pairs(32) == [0, 1, 4, 8, 15]
    assert dimension_pairs(256) == [0, 1, 32, 64, 127]
    assert wavelength(0, 256) == pytest.approx(2 * math.pi)
    assert wavelength(64, 256) == pytest.approx(2 * math.pi * 100)  # 10000^(2·64/256)
    assert distances(512) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_sin_and_cos_turn_with_the_wavelength_shown(section):
    model, found = section
    assert [p["pair"] for p in found["pairs"]] == dimension_pairs(32)
    for pair in found["pairs"]:
        angle = 2 * math.pi * torch.arange(len(SRC)) / wavelength(pair["pair"], 32)
        assert torch.allclose(torch.tensor(pair["sin"]), angle.sin(), atol=1e-4)
        assert torch.allclose(torch.tensor(pair["cos"]), angle.cos(), atol=1e-4)
        i = pair["pair"]
        assert pair["sin"] == pytest.approx(model.src_embed.positions[: len(SRC), 2 * i].tolist(), abs=1e-4)


def test_similarity_depends_on_the_distance_alone(section):
    _, found = section
    omega = 2 * math.pi / torch.tensor([wavelength(i, 32) for i in range(16)])
    for row in found["similarity_by_distance"]:
        expected = torch.cos(row["distance"] * omega).mean()  # (sin a sin b + cos a cos b) = cos(a - b), averaged
        assert row["cosine"] == pytest.approx(float(expected), abs=1e-3)
    assert found["similarity_by_distance"][0] == {"distance": 0, "cosine": 1.0}
    near, far = found["similarity_by_distance"][1]["cosine"], found["similarity_by_distance"][-1]["cosine"]
    assert near > far
    matrix = torch.tensor(found["similarity"])  # (S, S) within the sentence: constant along each diagonal
    assert matrix.shape == (len(SRC), len(SRC))
    for offset in range(len(SRC)):
        diagonal = matrix.diagonal(offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-3)


def test_token_rows_add_up(section):
    model, found = section
    assert [t["piece"] for t in found["tokens"]] == [str(i) for i in SRC]
    scaled = model.src_embed.tokens.weight.detach()[SRC] * math.sqrt(32)
    summed = scaled + model.src_embed.positions[: len(SRC)]
    for token, vector, total in zip(found["tokens"], scaled, summed, strict=True):
        assert token["embedding_norm"] == pytest.approx(float(vector.norm()), abs=1e-3)
        assert token["position_norm"] == pytest.approx(math.sqrt(16), abs=1e-3)  # D/2 pairs of sin² + cos²
        assert token["sum_norm"] == pytest.approx(float(total.norm()), abs=1e-3)
        assert token["embedding"] == pytest.approx(vector[:8].tolist(), abs=1e-4)
