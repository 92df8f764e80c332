"""seq2seq.train.precision: which precision 'auto' picks, and bf16 weights with float32 master weights."""

import pytest
import torch
from torch import nn

from seq2seq.config import ModelConfig
from seq2seq.model.transformer import Transformer
from seq2seq.train.precision import MasterWeights

CFG = ModelConfig(d_model=32, heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64, dropout=0.0)


def _model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(CFG, 50, 50, 0)


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    src, tgt = torch.randint(1, 50, (4, 7)), torch.randint(1, 50, (4, 6))
    src[0, 5:] = 0  # some padding
    return src, tgt[:, :-1], tgt[:, 1:]


def _loss(model: nn.Module) -> torch.Tensor:
    src, tgt_in, tgt_out = _batch()
    logits = model(src, tgt_in).float()
    return nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0)


def test_work_copy_is_bf16_and_keeps_tied_weights_tied():
    master = _model()
    weights = MasterWeights(master)
    assert all(p.dtype == torch.float32 for p in master.parameters())
    assert all(p.dtype == torch.bfloat16 for p in weights.work.parameters())
    assert weights.work.out_proj.weight is weights.work.src_embed.tokens.weight  # tie_embeddings: all
    assert len(list(weights.work.parameters())) == len(list(master.parameters()))


def test_bf16_loss_and_gradients_are_close_to_float32():
    master = _model()
    weights = MasterWeights(master)
    reference = _loss(master)
    reference.backward()
    expected = {name: p.grad.clone() for name, p in master.named_parameters()}
    master.zero_grad(set_to_none=True)

    loss = _loss(weights.work)
    assert loss.item() == pytest.approx(reference.item(), rel=2e-2)
    loss.backward()
    weights.collect_grads()
    assert all(p.grad.dtype == torch.float32 for p in master.parameters())
    got = torch.cat([p.grad.flatten() for p in master.parameters()])
    want = torch.cat([expected[name].flatten() for name, _ in master.named_parameters()])
    assert nn.functional.cosine_similarity(got, want, dim=0) > 0.99
    assert got.norm().item() == pytest.approx(want.norm().item(), rel=5e-2)
    assert all(p.grad is None for p in weights.work.parameters())


def test_collect_grads_accumulates_over_backward_passes():
    master = _model()
    weights = MasterWeights(master)
    _loss(weights.work).backward()
    first = weights.work.out_proj.weight.grad.float().clone()
    weights.collect_grads()
    _loss(weights.work).backward()
    weights.collect_grads()
    assert torch.allclose(master.out_proj.weight.grad, 2 * first)


def test_sync_rounds_master_into_work_and_master_keeps_small_updates():
    master = _model()
    weights = MasterWeights(master)
    with torch.no_grad():
        master.out_proj.weight.fill_(1.0)
        weights.sync()
        for _ in range(10):  # 10 updates of 1e-3: each alone is below bf16's resolution at 1.0 (2^-7)
            master.out_proj.weight.add_(1e-3)
            weights.sync()
    assert torch.allclose(master.out_proj.weight, torch.full_like(master.out_proj.weight, 1.01))
    assert torch.equal(weights.work.out_proj.weight, master.out_proj.weight.to(torch.bfloat16))
    assert not torch.equal(weights.work.out_proj.weight, torch.ones_like(weights.work.out_proj.weight))


def test_without_bf16_the_work_model_is_the_master_and_nothing_is_copied():
    master = _model()
    weights = MasterWeights(master, bf16=False)
    assert weights.work is master
    _loss(weights.work).backward()
    grads = [p.grad.clone() for p in master.parameters()]
    weights.collect_grads()
    weights.sync()
    assert all(torch.equal(p.grad, g) for p, g in zip(master.parameters(), grads, strict=True))
