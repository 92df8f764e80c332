"""The fused projection + label-smoothed cross-entropy equals the reference loss on the logits
(``label_smoothed_cross_entropy``), which is the library's ``F.cross_entropy``."""

import pytest
import torch
from conftest import PAD, START, VOCAB

from seq2seq.data.batching import Batch
from seq2seq.train import loss as loss_module
from seq2seq.train.loss import label_smoothed_cross_entropy, projected_cross_entropy
from seq2seq.train.trainer import batch_loss


def plain_loss(states: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, smoothing: float) -> torch.Tensor:
    return label_smoothed_cross_entropy(states @ weight.t(), targets, smoothing)


def inputs(dtype: torch.dtype = torch.float32, vocab: int = 50) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """states (3, 7, 16) and weight (vocab, 16) needing gradients; targets (3, 7) with padded tails."""
    torch.manual_seed(0)
    states = torch.randn(3, 7, 16, dtype=dtype, requires_grad=True)
    weight = torch.randn(vocab, 16, dtype=dtype, requires_grad=True)
    targets = torch.randint(4, vocab, (3, 7))
    targets[0, 5:] = PAD
    targets[2, 1:] = PAD
    return states, weight, targets


@pytest.mark.parametrize("chunk", [1, 4, 256])  # 13 real rows: chunks of one row, a partial last chunk, one chunk
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_value_and_gradients_match_plain_cross_entropy(monkeypatch, chunk, smoothing):
    monkeypatch.setattr(loss_module, "CHUNK_ROWS", chunk)
    states, weight, targets = inputs()
    expected = plain_loss(states, weight, targets, smoothing)
    expected_grads = torch.autograd.grad(expected, (states, weight))
    got = projected_cross_entropy(states, weight, targets, smoothing)
    got_grads = torch.autograd.grad(got, (states, weight))
    torch.testing.assert_close(got, expected)
    for g, e in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e)
    assert got_grads[0][targets == PAD].abs().max() == 0  # padded positions get no gradient


def test_a_target_far_below_the_best_logit_gives_a_finite_exact_loss():
    """p_t ≈ exp(-335) underflows float32; the loss goes through log(max p), which cannot."""
    states, weight, targets = inputs()
    weight.data[targets[0, 0]] = -12.5 * states.data[0, 0]  # target logit ≈ -167 at the first position
    weight.data[5] = 12.5 * states.data[0, 0]  # and another logit ≈ +167
    got = projected_cross_entropy(states, weight, targets, 0.1)
    assert torch.isfinite(got)
    torch.testing.assert_close(got, plain_loss(states, weight, targets, 0.1))


def test_logits_buffer_is_reused_and_grown():
    like = torch.zeros(1, dtype=torch.bfloat16)
    first = loss_module.logits_buffer(30, 50, like)
    smaller = loss_module.logits_buffer(20, 50, like)
    assert smaller.shape == (20, 50) and smaller.dtype == torch.bfloat16
    assert smaller.data_ptr() == first.data_ptr()  # the same memory, not a fresh allocation
    larger = loss_module.logits_buffer(40, 50, like)
    assert larger.shape == (40, 50)
    assert loss_module.logits_buffer(40, 50, torch.zeros(1)).dtype == torch.float32  # one buffer per dtype


def test_consecutive_calls_of_different_sizes_are_each_correct():
    states, weight, targets = inputs()
    expected = [plain_loss(states[:n], weight, targets[:n], 0.1) for n in (3, 1, 2)]
    for n, want in zip((3, 1, 2), expected, strict=True):  # the buffer shrinks, then grows, between calls
        torch.testing.assert_close(projected_cross_entropy(states[:n], weight, targets[:n], 0.1), want)


def test_gradcheck_in_double(monkeypatch):
    monkeypatch.setattr(loss_module, "CHUNK_ROWS", 5)
    states, weight, targets = inputs(torch.float64, vocab=9)
    targets = targets % 9
    assert torch.autograd.gradcheck(lambda s, w: projected_cross_entropy(s, w, targets, 0.1), (states, weight))


def test_upstream_gradient_scales_the_result():
    states, weight, targets = inputs()
    (projected_cross_entropy(states, weight, targets, 0.1) / 4).backward()
    scaled = states.grad.clone()
    states.grad = None
    projected_cross_entropy(states, weight, targets, 0.1).backward()
    torch.testing.assert_close(scaled * 4, states.grad)


def test_all_padding_gives_zero_loss_and_gradients():
    states, weight, targets = inputs()
    loss = projected_cross_entropy(states, weight, torch.full_like(targets, PAD), 0.1)
    loss.backward()
    assert loss.item() == 0 and states.grad.abs().max() == 0 and weight.grad.abs().max() == 0


@pytest.mark.parametrize("grad", [False, True])
def test_gradients_are_computed_only_when_wanted(monkeypatch, grad):
    monkeypatch.setattr(loss_module, "CHUNK_ROWS", 4)  # 13 real rows: 4 chunks
    states, weight, targets = inputs()
    with torch.set_grad_enabled(grad), torch.autograd.profiler.profile() as prof:
        loss = projected_cross_entropy(states, weight, targets, 0.0)
    assert loss.requires_grad == grad
    matmuls = sum(event.name == "aten::mm" for event in prof.function_events)
    assert matmuls == (3 if grad else 1)  # all rows at once: logits, and with gradients dL/dh and dL/dW
    torch.testing.assert_close(loss, plain_loss(states, weight, targets, 0.0).detach())


def test_bf16_autocast_matches_the_plain_loss_under_autocast():
    states, weight, targets = inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = projected_cross_entropy(states, weight, targets, 0.1)
        expected = plain_loss(states, weight, targets, 0.1)
    assert got.dtype == torch.float32  # the softmax and the sum stay in float32
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=0)
    got_grad = torch.autograd.grad(got, weight)[0]
    expected_grad = torch.autograd.grad(expected, weight)[0]
    assert got_grad.dtype == torch.float32
    torch.testing.assert_close(got_grad, expected_grad, rtol=0.05, atol=0.05)


@pytest.mark.parametrize(
    "settings",
    [{"tie_embeddings": "all"}, {"tie_embeddings": "none"}, {"output_bias": True}],
    ids=["all", "none", "bias"],
)
def test_the_trainers_batch_loss_is_the_plain_loss_of_the_models_logits(tiny_model, settings):
    """batch_loss wires states and the output projection (tied or not, with a bias or not) into the fused loss."""
    model = tiny_model(**settings)
    torch.manual_seed(1)
    if model.out_proj.bias is not None:  # it starts at zero: make it matter
        torch.nn.init.normal_(model.out_proj.bias)
    src = torch.randint(4, VOCAB, (3, 6))
    tgt_out = torch.randint(4, VOCAB, (3, 5))
    src[1, 4:] = PAD
    tgt_out[2, 3:] = PAD
    tgt_in = torch.cat([torch.full((3, 1), START), tgt_out[:, :-1]], dim=1).masked_fill(tgt_out == PAD, PAD)
    batch = Batch(src, tgt_in, tgt_out)
    expected = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, 0.1)
    torch.testing.assert_close(batch_loss(model, batch, 0.1, autocast_dtype=None), expected)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_an_output_bias_adds_to_the_logits_and_gets_its_gradient(monkeypatch, smoothing):
    """``model.output_bias``: the loss of states @ W.T + b, and b's gradient, as the plain loss has them."""
    monkeypatch.setattr(loss_module, "CHUNK_ROWS", 4)
    states, weight, targets = inputs()
    bias = torch.randn(weight.size(0), requires_grad=True)
    expected = label_smoothed_cross_entropy(states @ weight.t() + bias, targets, smoothing)
    expected_grads = torch.autograd.grad(expected, (states, weight, bias))
    got = projected_cross_entropy(states, weight, targets, smoothing, bias)
    got_grads = torch.autograd.grad(got, (states, weight, bias))
    torch.testing.assert_close(got, expected)
    for g, e in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e)
    assert not torch.allclose(got, projected_cross_entropy(states, weight, targets, smoothing))  # the bias counts


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_the_reference_is_the_smoothed_negative_log_likelihood_written_out(smoothing):
    """(1 − ε)·(−log p_t) + ε·mean_v(−log p_v), summed over the non-pad positions."""
    states, weight, targets = inputs()
    log_probs = (states @ weight.t()).log_softmax(-1)  # (3, 7, V)
    real = targets != PAD
    nll = -log_probs.gather(-1, targets[..., None]).squeeze(-1)  # (3, 7)
    expected = ((1 - smoothing) * nll - smoothing * log_probs.mean(-1))[real].sum()
    torch.testing.assert_close(label_smoothed_cross_entropy(states @ weight.t(), targets, smoothing), expected)
