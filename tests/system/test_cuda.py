"""The CUDA paths, where a GPU is: training runs on SDPA's fused kernels, the fused loss and
dropout are right on the GPU, training and resuming work on CUDA (in float16 with loss scaling
too), checkpoints load on a CPU, and decoding on the GPU gives the CPU's output.

CI has no GPU, so there this module is reported as skipped; on a GPU machine
``python -m pytest tests/system/test_cuda.py`` runs it (docs/benchmarks.md#training has the GPU's figures).
"""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import END, PAD, TOY, VOCAB, build_tiny_model, random_batch, run_torchrun, toy_train_args
from torch.nn.attention import SDPBackend, sdpa_kernel

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import DecodeConfig, TrainConfig, load_config
from seq2seq.data.batching import Batch
from seq2seq.decode.batched import search_ids
from seq2seq.decode.loader import load_model
from seq2seq.device import cuda_has_native_bf16
from seq2seq.model.kernels import Dropout
from seq2seq.train.loss import projected_cross_entropy
from seq2seq.train.precision import TRAIN_AUTOCAST, MasterWeights
from seq2seq.train.trainer import Trainer, adamw, batch_loss, dev_loss, optimizer_update

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CUDA, CPU = torch.device("cuda"), torch.device("cpu")
REPO = Path(__file__).resolve().parents[2]
# SDPA's fused kernels; the unfused "math" fallback is left out, so SDPA raises if none applies.
FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]


def _training_batch() -> Batch:
    """A right-padded batch whose targets are padded where the decoder input is."""
    src, tgt_in = random_batch(src_lengths=(9, 3, 14, 6), tgt_lengths=(7, 12, 2, 5))
    tgt_out = torch.randint(4, VOCAB, tgt_in.shape, generator=torch.Generator().manual_seed(1))
    return Batch(src, tgt_in, tgt_out.masked_fill(tgt_in == PAD, PAD))


def _sdpa_ops(fn) -> set[str]:
    """Names of the scaled-dot-product-attention ops that ``fn`` runs."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return {event.key for event in prof.key_averages() if "scaled_dot_product" in event.key}


@pytest.mark.parametrize("precision", ["bf16-autocast", "fp16", "float32"])
@pytest.mark.parametrize("head_dim", [None, 64])  # d_model / heads = 8, and the recipe's 64
def test_a_training_step_runs_on_fused_attention_kernels(precision, head_dim):
    model = build_tiny_model(attention="auto", dropout=0.1, head_dim=head_dim).to(CUDA).train()
    batch = _training_batch().to(CUDA)

    def step() -> None:
        with sdpa_kernel(FUSED):
            batch_loss(model, batch, 0.1, TRAIN_AUTOCAST.get(precision)).backward()

    ops = _sdpa_ops(step)
    assert any(kind in op for op in ops for kind in ("flash", "efficient", "cudnn")), ops
    assert not any("math" in op for op in ops), ops
    for name, param in model.named_parameters():
        assert torch.isfinite(param.grad).all(), name


def test_fused_attention_equals_the_written_out_attention():
    fused = build_tiny_model(attention="auto").to(CUDA)
    written = build_tiny_model(attention="explicit").to(CUDA)
    written.load_state_dict(fused.state_dict())
    src, tgt = (t.to(CUDA) for t in random_batch())
    with sdpa_kernel(FUSED):
        out = fused(src, tgt)
    torch.testing.assert_close(out, written(src, tgt), atol=1e-4, rtol=1e-4)


def test_dropout_keeps_the_right_share_at_the_right_scale():
    y = Dropout(0.3).train()(torch.ones(1_000_000, device=CUDA))
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.003  # 6.5 standard deviations
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.7))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fused_loss_matches_cross_entropy(smoothing):
    gen = torch.Generator(CUDA).manual_seed(0)
    states = torch.randn(5, 9, 32, device=CUDA, generator=gen).requires_grad_()
    weight = torch.randn(300, 32, device=CUDA, generator=gen).requires_grad_()
    targets = torch.randint(4, 300, (5, 9), device=CUDA, generator=gen)
    targets[1, 4:], targets[3, 1:] = PAD, PAD
    logits = (states @ weight.t()).flatten(0, 1)
    expected = F.cross_entropy(logits, targets.flatten(), ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    got = projected_cross_entropy(states, weight, targets, smoothing)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)
    got_grads, expected_grads = (
        torch.autograd.grad(got, (states, weight)),
        torch.autograd.grad(expected, (states, weight)),
    )
    for g, e in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def _toy(tmp_path: Path, run: str, *overrides: str):
    return load_config(
        str(REPO / TOY),
        [f"train.run_dir={tmp_path / run}", f"data.cache_dir={tmp_path / 'cache'}", "train.device=cuda", *overrides],
    )


def test_trains_on_cuda_in_bf16_and_the_checkpoint_loads_on_a_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the toy config names its corpus relative to the repository
    cfg = _toy(tmp_path, "run", "train.precision=auto", "train.max_steps=60", "train.eval_every=60")
    trainer = Trainer(cfg)
    assert trainer.device.type == "cuda"
    assert trainer.precision == ("bf16-autocast" if cuda_has_native_bf16() else "fp16")
    initial = dev_loss(trainer.model, trainer.data.dev, cfg.data.batch_tokens, trainer.device, trainer.eval_autocast)
    trainer.fit(quiet=True)
    final = dev_loss(trainer.model, trainer.data.dev, cfg.data.batch_tokens, trainer.device, trainer.eval_autocast)
    assert final < 0.75 * initial

    on_cpu, _, _ = load_model(tmp_path / "run", CPU)
    on_gpu, _, _ = load_model(tmp_path / "run", CUDA)
    src, tgt = random_batch(vocab=100)
    torch.testing.assert_close(on_gpu(src.to(CUDA), tgt.to(CUDA)).cpu(), on_cpu(src, tgt), atol=1e-4, rtol=1e-4)


def test_resume_on_cuda_continues_where_it_stopped(tmp_path, monkeypatch):
    """40 steps straight == 20, stop, resume to 40 (dropout on: the CUDA RNG state is restored).

    Float32, to a tolerance: GPU kernels may sum in a different order from run to run.
    """
    monkeypatch.chdir(REPO)
    fixed = ["train.precision=float32", "train.eval_every=20"]
    straight = Trainer(_toy(tmp_path, "a", "train.max_steps=40", *fixed))
    straight.fit(quiet=True)
    Trainer(_toy(tmp_path, "b", "train.max_steps=20", *fixed)).fit(quiet=True)
    resumed = Trainer(_toy(tmp_path, "b", "train.max_steps=40", *fixed))
    resumed.fit(quiet=True)
    assert resumed.progress.step == 40
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    for name in a:
        torch.testing.assert_close(b[name], a[name], atol=1e-4, rtol=0, msg=name)


def test_fp16_trains_on_cuda_and_resumes_with_its_loss_scale(tmp_path, monkeypatch):
    """precision fp16: float16 autocast and a GradScaler; the dev loss falls, and 30 steps + resume to 60
    ends where 60 straight do, the scaler's state (scale, steps since its last change) restored from last.pt.

    Weights to a loose tolerance: float16 rounds each product, and GPU kernels may sum in another order."""
    monkeypatch.chdir(REPO)
    fixed = ["train.precision=fp16", "train.eval_every=30"]
    straight = Trainer(_toy(tmp_path, "a", "train.max_steps=60", *fixed))
    assert straight.train_autocast == straight.eval_autocast == torch.float16 and straight.scaler.is_enabled()
    initial = dev_loss(straight.model, straight.data.dev, straight.cfg.data.batch_tokens, CUDA, torch.float16)
    straight.fit(quiet=True)
    final = dev_loss(straight.model, straight.data.dev, straight.cfg.data.batch_tokens, CUDA, torch.float16)
    assert final < 0.75 * initial
    Trainer(_toy(tmp_path, "b", "train.max_steps=30", *fixed)).fit(quiet=True)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["scaler"]["scale"] > 0
    resumed = Trainer(_toy(tmp_path, "b", "train.max_steps=60", *fixed))
    resumed.fit(quiet=True)
    assert resumed.progress.step == 60
    assert resumed.scaler.state_dict() == straight.scaler.state_dict()
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    for name in a:
        torch.testing.assert_close(b[name], a[name], atol=2e-2, rtol=0, msg=name)


def test_an_fp16_overflow_on_cuda_changes_no_weight_moment_or_schedule():
    """The fused AdamW kernel skips the update itself when the scaler found an inf (no host-side skip)."""
    model = build_tiny_model().to(CUDA).train()
    weights, optimizer = MasterWeights(model, bf16=False), adamw(model.parameters(), TrainConfig(max_steps=1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    scaler, batch = torch.amp.GradScaler("cuda"), _training_batch().to(CUDA)

    def step(factor: float):
        scaler.scale(batch_loss(model, batch, 0.1, torch.float16) / batch.tokens * factor).backward()
        return optimizer_update(weights, optimizer, scheduler, 1.0, scaler)

    assert step(1.0).applied
    params = {k: v.clone() for k, v in model.state_dict().items()}
    moments = {k: {n: t.clone() for n, t in v.items()} for k, v in optimizer.state_dict()["state"].items()}
    lr, scale = scheduler.get_last_lr(), scaler.get_scale()
    skipped = step(float("inf"))
    assert not skipped.applied and scheduler.get_last_lr() == lr and scaler.get_scale() == scale / 2
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, params[name]), name
    for key, state in optimizer.state_dict()["state"].items():
        for name, tensor in state.items():
            assert torch.equal(tensor, moments[key][name]), (key, name)
    assert step(1.0).applied and scheduler.get_last_lr() != lr


@pytest.mark.parametrize("beam", [1, 5])
def test_decoding_on_cuda_gives_the_cpu_output(beam):
    model = build_tiny_model(seed=3, attention="auto")
    gen = torch.Generator().manual_seed(4)
    sources = [torch.randint(4, VOCAB, (n,), generator=gen).tolist() + [END] for n in (2, 9, 5, 13, 7, 4)]
    decode = DecodeConfig(beam=beam)
    on_cpu = search_ids(model, sources, decode, CPU, beam, nbest=beam)
    on_gpu = search_ids(model.to(CUDA), sources, decode, CUDA, beam, nbest=beam)
    for cpu_hyps, gpu_hyps in zip(on_cpu, on_gpu, strict=True):
        assert [h.tokens for h in gpu_hyps] == [h.tokens for h in cpu_hyps]
        assert [h.score for h in gpu_hyps] == pytest.approx([h.score for h in cpu_hyps], abs=1e-4)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_train_one_model_over_nccl(tmp_path):
    run = tmp_path / "run"
    steps = ("train.max_steps=20", "train.eval_every=10", "train.eval_sentences=2")
    args = toy_train_args(run, tmp_path / "cache", *steps)
    result = run_torchrun(*[a if a != "cpu" else "cuda" for a in args])  # --device cuda: one GPU per rank
    assert result.returncode == 0, result.stderr
    assert "on cuda:0 x 2 ranks" in result.stdout
    state = load_checkpoint(run / "last.pt")
    assert state["world_size"] == 2 and state["progress"]["step"] == 20
