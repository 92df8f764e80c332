"""seq2seq.explain.forcing: teacher forcing's position t gives the same next-token distribution as
incremental (cached) greedy decoding's step t when both read the same prefix — all the way for a
reference equal to greedy's output, up to the first difference otherwise, which is where they are
said to diverge; the reference's probabilities are those of forced scoring."""

import pytest
import torch
from conftest import END, START, PositionRamp, build_tiny_model

from seq2seq.config import DecodeConfig
from seq2seq.decode.forced import target_log_probs
from seq2seq.explain.forcing import TOP, forcing_section, greedy_steps

SRC = [5, 6, 7, 8, 9, 3]
DECODE = DecodeConfig(max_len_a=0.0, max_len_b=8)


def labels(ids: list[int]) -> list[str]:
    return [str(i) for i in ids]


@pytest.fixture(params=["plain", "ramp"], scope="module")
def model(request):
    """The tiny model as it is (greedy runs to the length limit) and with a growing <end> logit (it stops)."""
    tiny = build_tiny_model(seed=3)
    return tiny if request.param == "plain" else PositionRamp(tiny, slope=1.0, offset=-4.0).eval()


def _same_distribution(a: dict, b: dict) -> None:
    assert [t["id"] for t in a["top"]] == [t["id"] for t in b["top"]]
    assert [t["p"] for t in a["top"]] == pytest.approx([t["p"] for t in b["top"]], abs=2e-4)


def test_a_reference_equal_to_greedy_never_diverges(model):
    greedy = greedy_steps(model, SRC, DECODE)
    section = forcing_section(model, SRC, greedy[0], greedy, labels)
    assert section["divergence"] is None
    assert len(section["teacher_forced"]) == len(greedy[0]) + 1  # y… <end>
    for forced, step in zip(section["teacher_forced"], section["greedy"], strict=False):
        assert forced["input"] == step["input"]
        _same_distribution(forced, step)
        assert forced["target_p"] == pytest.approx(step["chosen_p"], abs=2e-4)
    assert section["greedy"][0]["input"] == str(START)
    for before, after in zip(section["greedy"], section["greedy"][1:], strict=False):
        assert after["input"] == before["chosen"]  # inference reads back what it chose


def test_they_agree_up_to_the_first_difference(model):
    greedy = greedy_steps(model, SRC, DECODE)
    tokens = greedy[0]
    assert len(tokens) >= 3
    ref = [*tokens[:2], 4 if tokens[2] != 4 else 5, *tokens[3:]]
    section = forcing_section(model, SRC, ref, greedy, labels)
    assert section["divergence"] == 2
    for forced, step in zip(section["teacher_forced"][:3], section["greedy"][:3], strict=True):
        _same_distribution(forced, step)  # same prefix read: same distribution, the divergent step included
    assert section["teacher_forced"][3]["input"] != section["greedy"][3]["input"]


def test_reference_probabilities_are_forced_scorings(model):
    ref = [10, 11, 12, 13]
    section = forcing_section(model, SRC, ref, greedy_steps(model, SRC, DECODE), labels)
    expected = target_log_probs(model, torch.tensor([SRC]), torch.tensor([[*ref, END]]))[0].exp()
    assert [row["target_p"] for row in section["teacher_forced"]] == pytest.approx(expected.tolist(), abs=1e-4)
    assert [row["target"] for row in section["teacher_forced"]] == labels([*ref, END])
    for row in section["teacher_forced"] + section["greedy"]:
        probs = [t["p"] for t in row["top"]]
        assert len(probs) == TOP and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-3


def test_without_a_reference_greedy_stands_alone(model):
    greedy = greedy_steps(model, SRC, DECODE)
    section = forcing_section(model, SRC, None, greedy, labels)
    assert section["teacher_forced"] is None and section["divergence"] is None
    assert section["greedy_reached_limit"] == (len(greedy[0]) == 8)
    chosen = [row["chosen_id"] for row in section["greedy"]]
    assert chosen == (greedy[0] if section["greedy_reached_limit"] else [*greedy[0], END])
    assert all(row["chosen_id"] == row["top"][0]["id"] for row in section["greedy"])  # greedy takes the top one
