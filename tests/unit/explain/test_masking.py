"""seq2seq.explain.masking: the grids are the project's masks with the True counts their definitions
give; masking padded query rows whole with −∞ puts NaN into the attention output of exactly those
rows and into the gradient of a loss that ignores them, in float32 and bfloat16, while masking keys
(this project's convention) gives none, whatever the fill."""

import pytest
import torch
from conftest import END, PAD, START, build_tiny_model

from seq2seq.explain.masking import mask_grids, masks_section, nan_experiment

SRC = torch.tensor([[5, 6, 7, END, PAD, PAD, PAD], [5, 6, 7, 8, 9, 10, END]])  # lengths 4 and 7
TGT_IN = torch.tensor([[START, 11, 12, PAD, PAD], [START, 11, 12, 13, 14]])  # lengths 3 and 5


def test_grids_have_the_true_counts_of_their_definitions():
    grids = mask_grids(SRC, TGT_IN)
    assert torch.tensor(grids["encoder"]).shape == (2, 7, 7)
    assert torch.tensor(grids["decoder"]).shape == (2, 5, 5)
    assert torch.tensor(grids["cross"]).shape == (2, 5, 7)
    assert grids["true_counts"]["encoder"] == [7 * 4, 7 * 7]  # every query row sees the real keys
    assert grids["true_counts"]["cross"] == [5 * 4, 5 * 7]
    # causal & padding: query t sees keys 0..min(t, length - 1)
    assert grids["true_counts"]["decoder"] == [sum(min(t + 1, 3) for t in range(5)), sum(t + 1 for t in range(5))]
    assert grids["encoder"][0][6] == [True] * 4 + [False] * 3  # a padded query row keeps its real keys
    assert grids["decoder"][1][0] == [True, False, False, False, False]


@pytest.fixture(scope="module")
def cases():
    return {(c["mask"], c["fill"], c["dtype"]): c for c in nan_experiment(build_tiny_model(), SRC)}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_query_row_masking_with_minus_infinity_spreads_nan(cases, dtype):
    case = cases[("query rows", "-inf", dtype)]
    assert case["nan_output"] == 3 * 32  # the 3 padded rows of the first sentence, all D values
    assert case["output_size"] == 2 * 7 * 32
    assert case["nan_gradient"] > 0  # the loss reads only real positions, yet the gradient holds NaN
    assert case["gradient_size"] == 2 * 7 * 32 + 4 * (32 * 32 + 32)  # the inputs and the four projections


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_key_masking_gives_no_nan(cases, dtype):
    for fill in ("-inf", "dtype min"):
        case = cases[("keys", fill, dtype)]
        assert case["nan_output"] == 0 and case["nan_gradient"] == 0
    assert cases[("query rows", "dtype min", dtype)]["nan_gradient"] == 0  # a finite fill: uniform rows, no NaN


def test_without_padding_no_row_is_masked():
    for case in nan_experiment(build_tiny_model(), SRC[1:]):
        assert case["nan_output"] == 0 and case["nan_gradient"] == 0, case


def test_section_labels_every_sentence():
    section = masks_section(build_tiny_model(), SRC, TGT_IN, [["s"] * 7] * 2, [["t"] * 5] * 2)
    assert section["lengths"] == {"source": [4, 7], "target": [3, 5]}
    assert len(section["experiment"]) == 2 * 2 * 2  # dtypes × masks × fills
