"""seq2seq.explain.scaling: the head shown step by step is the model's own (its weights are the ones
the model used, rows sum to 1), and on the same scores the softmax without the √K division is
sharper — a higher largest weight, a lower entropy — with a smaller Jacobian, on tiny seeded
models; the statistics themselves match hand computations and autograd."""

import math

import pytest
import torch
from conftest import build_tiny_model

from seq2seq.errors import UserError
from seq2seq.explain.probe import recording
from seq2seq.explain.scaling import check_choice, entropy, head_section, jacobian_norm, softmax_summary
from seq2seq.model.masks import padding_mask
from seq2seq.special import PAD

SRC = [5, 6, 7, 8, 9, 10, 11, 12, 3]


def _encoder_calls(model):
    src = torch.tensor([SRC])
    with recording(model) as found:
        model.encode(src, padding_mask(src, PAD))
    return [calls[0] for calls in found.encoder]


@pytest.fixture(scope="module")
def model():
    return build_tiny_model()


def test_the_head_shown_is_the_one_the_model_ran(model):
    calls = _encoder_calls(model)
    section = head_section(calls, layer=1, head=2)
    assert (section["layer"], section["head"], section["head_dim"]) == (1, 2, 8)
    assert section["shapes"] == {"q": [1, 4, 9, 8], "k": [1, 4, 9, 8], "v": [1, 4, 9, 8]}
    used = calls[1].weights()[0, 2]  # (S, S) what explicit_attention computed in the forward pass
    assert torch.allclose(torch.tensor(section["weights"]), used, atol=1e-4)
    scores, scaled = torch.tensor(section["scores"]), torch.tensor(section["scaled_scores"])
    assert torch.allclose(scaled, scores / math.sqrt(8), atol=1e-3)
    for key in ("weights", "unscaled_weights"):
        assert torch.allclose(torch.tensor(section[key]).sum(-1), torch.ones(len(SRC)), atol=1e-3)
    assert section["uniform_entropy"] == pytest.approx(math.log(len(SRC)), abs=1e-4)
    assert len(section["summary"]) == 2 * 4


@pytest.mark.parametrize("shape", [{}, {"d_model": 64, "heads": 1}])  # K = 8 and K = 64
def test_without_the_division_the_softmax_is_sharper(shape):
    """Softmax of βz sharpens as β grows, so this holds for every head."""
    calls = _encoder_calls(build_tiny_model(**shape))
    for row in head_section(calls, 0, 0)["summary"]:
        scaled, unscaled = row["scaled"], row["unscaled"]
        assert unscaled["spread"] > scaled["spread"]
        assert unscaled["largest"] > scaled["largest"], row
        assert unscaled["entropy"] < scaled["entropy"], row


def test_without_the_division_the_softmax_gradient_is_smaller():
    """At the recipe's head width (K = 64) in every head; at K = 8 on average over the heads. The norm
    of the Jacobian is not monotone in the sharpness — a near-uniform row gains some as it sharpens
    before it loses it all — so a head of small K with narrow scores can come out slightly above
    (docs/explain.md); what the division prevents is the wide spread of large K."""
    wide = head_section(_encoder_calls(build_tiny_model(d_model=64, heads=1)), 0, 0)["summary"]
    for row in wide:
        assert row["unscaled"]["jacobian"] < row["scaled"]["jacobian"], row
    narrow = head_section(_encoder_calls(build_tiny_model()), 0, 0)["summary"]
    mean = {side: sum(row[side]["jacobian"] for row in narrow) / len(narrow) for side in ("scaled", "unscaled")}
    assert mean["unscaled"] < mean["scaled"]


def test_softmax_depends_on_the_spread_not_the_size_of_the_scores():
    near = softmax_summary(torch.tensor([[100.0, 101.0, 102.0]]), None)
    assert near["rows"]["largest"] == [pytest.approx(0.6652, abs=1e-4)]  # softmax([0, 1, 2]), not one-hot
    assert near["rows"]["spread"] == [2.0]
    wide = softmax_summary(torch.tensor([[0.0, 10.0, 20.0]]), None)
    assert wide["rows"]["largest"][0] > 0.9999
    assert wide["rows"]["jacobian"][0] <= 1e-4 < near["rows"]["jacobian"][0] / 1000  # saturated: almost no gradient


def test_masked_keys_are_left_out():
    logits = torch.tensor([[1.0, 2.0, 50.0]])
    summary = softmax_summary(logits, torch.tensor([[True, True, False]]))
    assert summary["rows"]["spread"] == [1.0]
    assert summary["rows"]["largest"] == [pytest.approx(1 / (1 + math.exp(-1)), abs=1e-4)]


def test_jacobian_norm_and_entropy_match_autograd_and_hand_values():
    logits = torch.tensor([0.3, -1.2, 2.0, 0.5])
    jacobian = torch.autograd.functional.jacobian(lambda z: z.softmax(-1), logits)  # (4, 4)
    assert jacobian_norm(logits.softmax(-1)) == pytest.approx(float(jacobian.norm()), abs=1e-6)
    assert entropy(torch.full((5,), 0.2)) == pytest.approx(math.log(5))
    assert entropy(torch.tensor([0.0, 1.0, 0.0])) == 0.0
    assert jacobian_norm(torch.tensor([0.0, 1.0, 0.0])) == 0.0  # saturated: no gradient at all


def test_layer_and_head_out_of_range_are_user_errors():
    assert check_choice(-1, 3, layers=2, heads=4) == (1, 3)
    with pytest.raises(UserError, match="layer 2: the encoder has 2 layers"):
        check_choice(2, 0, layers=2, heads=4)
    with pytest.raises(UserError, match="head 4: the model has 4 heads"):
        check_choice(0, 4, layers=2, heads=4)
