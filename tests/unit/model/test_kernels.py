"""seq2seq.model.kernels against the plain path: the CPU dropout masks keep nn.Dropout's distribution,
the kernel rule picks the attention form, and grouped beam attention equals attention per beam."""

import pytest
import torch
from torch import nn

import seq2seq.model.kernels
import seq2seq.model.layers
from seq2seq.model.kernels import Dropout, keep_scale, stacked_projections, uses_explicit_attention
from seq2seq.model.layers import Attention, MultiHeadAttention

B, S, T, D, H = 2, 5, 4, 32, 4


def _key_mask() -> torch.Tensor:
    """(B, 1, 1, S) with the last two keys of row 0 padded."""
    mask = torch.ones(B, 1, 1, S, dtype=torch.bool)
    mask[0, ..., 3:] = False
    return mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_zeroes_a_share_p_and_keeps_the_expectation(dtype):
    torch.manual_seed(0)
    x = torch.full((400, 500), 2.0, dtype=dtype, requires_grad=True)
    y = Dropout(0.3).train()(x)
    kept = y != 0
    assert y.dtype == dtype
    assert abs(kept.float().mean().item() - 0.7) < 0.005  # 200k draws: sd 0.001
    torch.testing.assert_close(y[kept].float(), torch.full_like(y[kept].float(), 2.0 / 0.7), rtol=1e-2, atol=0)
    assert abs(y.float().mean().item() - 2.0) < 0.02  # inverted dropout: the mean is unchanged
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach() / 2.0)  # gradient: the same mask and scale


@pytest.mark.parametrize("shape", [(7,), (3, 5), (400, 501)])  # element counts not divisible by 4
def test_keep_scale_draws_16_bits_per_element(shape):
    torch.manual_seed(0)
    p, dropped = 0.3, round(0.3 * 65536)
    scale = keep_scale(torch.Size(shape), p, torch.float32)
    assert scale.shape == shape
    kept = torch.tensor(65536 / (65536 - dropped), dtype=torch.float32).item()
    assert set(scale.unique().tolist()) <= {0.0, kept}
    if scale.numel() > 1000:  # 200k draws: the share kept and the mean (exactly 1 in expectation)
        assert abs((scale != 0).float().mean().item() - 0.7) < 0.005
        assert abs(scale.mean().item() - 1.0) < 0.01
        lanes = (scale.flatten()[: 4 * (scale.numel() // 4)] != 0).view(-1, 4).float().mean(0)
        assert (lanes - 0.7).abs().max() < 0.01  # each 16-bit lane of a 64-bit draw is uniform


def test_dropout_is_identity_in_eval_mode_and_at_zero_and_follows_the_seed():
    x = torch.randn(50, 60)
    assert Dropout(0.3).eval()(x) is x and Dropout(0.0).train()(x) is x
    torch.manual_seed(3)
    first = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    assert torch.equal(first, Dropout(0.5).train()(x))


@pytest.mark.parametrize(("kernel", "explicit_on_cpu"), [("sdpa", False), ("explicit", True), ("auto", True)])
def test_kernel_selects_the_attention_path(monkeypatch, kernel, explicit_on_cpu):
    calls = []
    original = seq2seq.model.layers.explicit_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(seq2seq.model.layers, "explicit_attention", counting)
    mha = MultiHeadAttention(D, H, D // H, dropout=0.0, kernel=kernel)
    x = torch.randn(B, T, D)
    mha(*mha.queries_keys_values(x), None)
    assert len(calls) == (1 if explicit_on_cpu else 0)
    assert uses_explicit_attention(kernel, _CudaQuery(), None, False) == (kernel == "explicit")  # auto = SDPA on CUDA


class _CudaQuery:
    """What ``uses_explicit_attention`` reads of a query on a CUDA GPU, where this machine may have none."""

    device, dtype = torch.device("cuda"), torch.float32

    def size(self, dim: int) -> int:
        return 1


def test_auto_takes_sdpa_for_a_bf16_decoding_step_only_on_a_cpu_with_amx(monkeypatch):
    attend = Attention(dropout=0.0, kernel="auto").eval()
    step = torch.randn(B, H, 1, D // H, dtype=torch.bfloat16)  # one new position's queries
    keys, values = torch.randn(2, B, H, T, D // H, dtype=torch.bfloat16)  # the cached prefix
    outputs = {}
    for amx in (True, False):
        monkeypatch.setattr(seq2seq.model.kernels, "cpu_has_amx", lambda amx=amx: amx)
        assert uses_explicit_attention("auto", step, None, training=False) is not amx
        # Everything else keeps the written-out form: a mask, several queries, float32, training.
        assert uses_explicit_attention("auto", step, torch.ones(B, 1, 1, T, dtype=torch.bool), training=False)
        assert uses_explicit_attention("auto", torch.cat([step, step], dim=2), None, training=False)
        assert uses_explicit_attention("auto", step.float(), None, training=False)
        assert uses_explicit_attention("auto", step, None, training=True)
        outputs[amx] = attend(step, keys, values, None)
    torch.testing.assert_close(outputs[True], outputs[False], atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("kernel", ["sdpa", "explicit"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_queries_read_their_source_row_as_if_it_were_repeated(kernel, dtype):
    # A sentence's G beams against one row of keys/values equal each beam against its own copy.
    torch.manual_seed(0)
    groups = 3
    mha = MultiHeadAttention(D, H, D // H, dropout=0.0, kernel=kernel).to(dtype)
    query, source = torch.randn(B * groups, T, D, dtype=dtype), torch.randn(B, S, D, dtype=dtype)
    q, (keys, values) = mha.queries(query), mha.keys_values(source)
    shared = mha(q, keys, values, _key_mask())
    repeated = mha(
        q,
        keys.repeat_interleave(groups, 0),
        values.repeat_interleave(groups, 0),
        _key_mask().repeat_interleave(groups, 0),
    )
    assert shared.shape == (B * groups, T, D)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(shared, repeated, atol=tolerance, rtol=tolerance)
    # Row 0's beams read a padded source: its last keys must stay masked for all of them.
    unmasked = mha(q, keys, values, None)
    assert not torch.allclose(unmasked[:groups].float(), shared[:groups].float(), atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_stacked_projections_equal_each_projection_alone(dtype):
    torch.manual_seed(0)
    projections = [nn.Linear(D, D).to(dtype) for _ in range(3)]
    x = torch.randn(B, T, D, dtype=dtype)
    stacked = stacked_projections(x, projections, H)
    assert stacked.shape == (3, B, H, T, D // H)
    for got, proj in zip(stacked, projections, strict=True):
        assert torch.equal(got, proj(x).view(B, T, H, D // H).transpose(1, 2))  # (B, H, T, K)
