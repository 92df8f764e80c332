"""seq2seq.train.trainer and the command line on the toy config: the loss goes down,
resume continues exactly, the run directory holds everything, the schedule has
the right shape, config errors are one line, and the verbs work end to end.

Everything writes under pytest's tmp directories; the toy corpus is read from
tests/fixtures through the repository-relative paths of the toy recipe.
"""

import copy
import math
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import CLI_ENV, PAD, REPO, TOY, metrics_records, toy_train_args

import seq2seq.train.trainer as train_module
from seq2seq.checkpoint import DIGEST_KEY, load_checkpoint, save_checkpoint
from seq2seq.config import TrainConfig, load_config
from seq2seq.special import EOS, UNK
from seq2seq.train.signals import stop_deferred
from seq2seq.train.trainer import Trainer, budget_used, dev_loss, even_sample, lr_factor

# Small and quick: one thread (a shared CPU), few dev sentences decoded per validation.
FAST = ["train.threads=1", "train.eval_sentences=5", "train.device=cpu"]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the toy config names its corpus relative to the repository


def _toy(run_dir: Path, cache: Path, *overrides: str):
    return load_config(TOY, [f"train.run_dir={run_dir}", f"data.cache_dir={cache}", *FAST, *overrides])


# -- the training loop -------------------------------------------------------
@pytest.mark.parametrize("precision", ["float32", "bf16"])
def test_loss_decreases(tmp_path, toy_cache, precision):
    cfg = _toy(tmp_path / "run", toy_cache, "train.max_steps=60", "train.eval_every=60", f"train.precision={precision}")
    trainer = Trainer(cfg)
    initial = dev_loss(trainer.model, trainer.data.dev, cfg.data.batch_tokens, trainer.device, None)
    assert initial > 0.9 * math.log(trainer.data.tokenizer.tgt_vocab_size)  # an untrained model guesses
    trainer.fit(quiet=True)
    records = metrics_records(tmp_path / "run")
    (final,) = [r for r in records if "dev_loss" in r]
    assert final["step"] == 60
    assert final["dev_loss"] < 0.75 * initial
    assert final["dev_ppl"] == pytest.approx(math.exp(final["dev_loss"]))
    train_logs = [r for r in records if "loss" in r]
    assert [r["step"] for r in train_logs] == [20, 40, 60]
    assert train_logs[-1]["loss"] < train_logs[0]["loss"]
    # the logged learning rate follows the schedule
    for r in train_logs:
        assert r["lr"] == pytest.approx(cfg.train.lr * lr_factor(r["step"], cfg.train))


RESUME = ["train.eval_every=20", "train.precision=float32"]


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory, toy_cache) -> Trainer:
    """40 uninterrupted steps, validating every 20: the reference for the resume tests."""
    run = tmp_path_factory.mktemp("straight") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        trainer = Trainer(_toy(run, toy_cache, "train.max_steps=40", *RESUME))
        assert trainer.cfg.model.dropout > 0  # so the restored RNG state matters
        trainer.fit(quiet=True)
    return trainer


def _assert_same_training_state(a: Trainer, b: Trainer) -> None:
    assert a.progress.step == b.progress.step
    sa, sb = a.model.state_dict(), b.model.state_dict()
    for name in sa:
        assert torch.allclose(sa[name], sb[name], rtol=0, atol=1e-6), name
    assert a.sampler.state_dict() == b.sampler.state_dict()
    assert a.scheduler.get_last_lr() == pytest.approx(b.scheduler.get_last_lr())
    oa, ob = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    for key in oa:
        assert torch.allclose(oa[key]["exp_avg_sq"], ob[key]["exp_avg_sq"], rtol=0, atol=1e-9)


def test_resume_continues_exactly(tmp_path, toy_cache, straight_run):
    """40 steps in one go == 20 steps, stop, then resume to 40 (dropout on, so RNG state matters)."""
    Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=20", *RESUME)).fit(quiet=True)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["progress"]["step"] == 20
    resumed = Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=40", *RESUME))
    resumed.fit(quiet=True)

    assert resumed.progress.step == 40
    _assert_same_training_state(straight_run, resumed)
    # the step-40 validation (and the run's log) agree
    dev_a = [r for r in metrics_records(straight_run.run_dir) if "dev_loss" in r]
    dev_b = [r for r in metrics_records(tmp_path / "b") if "dev_loss" in r]
    assert [r["step"] for r in dev_a] == [r["step"] for r in dev_b] == [20, 40]
    assert dev_b[-1]["dev_loss"] == pytest.approx(dev_a[-1]["dev_loss"], abs=1e-6)
    # last.pt holds the final state of the resumed run
    last = load_checkpoint(tmp_path / "b" / "last.pt")
    assert last["progress"]["step"] == 40
    for name, tensor in resumed.model.state_dict().items():
        assert torch.equal(last["model"][name], tensor)


def test_bf16_master_weights_resume_exactly_and_checkpoint_float32(tmp_path, toy_cache):
    """precision bf16: passes run on a bf16 copy; 10 steps + resume to 20 == 20 straight; checkpoints are float32."""
    bf16 = ["train.eval_every=10", "train.precision=bf16"]
    straight = Trainer(_toy(tmp_path / "a", toy_cache, "train.max_steps=20", *bf16))
    assert all(p.dtype == torch.bfloat16 for p in straight.weights.work.parameters())
    straight.fit(quiet=True)
    Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=10", *bf16)).fit(quiet=True)
    resumed = Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=20", *bf16))
    resumed.fit(quiet=True)
    _assert_same_training_state(straight, resumed)
    for name, tensor in resumed.weights.work.state_dict().items():  # the working copy is the rounded master
        assert torch.equal(tensor, resumed.model.state_dict()[name].to(torch.bfloat16)), name
    for path in ("last.pt", "best.pt"):
        weights = load_checkpoint(tmp_path / "b" / path)["model"]
        assert all(t.dtype == torch.float32 for t in weights.values() if t.is_floating_point())


# float16 on the CPU is emulated and slow: a narrower model keeps these steps quick.
FP16 = ["train.precision=fp16", "model.d_model=32", "model.ffn_dim=64", "train.eval_every=3", "train.eval_sentences=1"]


def test_fp16_resumes_exactly_with_its_loss_scale(tmp_path, toy_cache):
    """precision fp16: float16 autocast and a GradScaler; 2 steps + resume to 4 == 4 straight, because last.pt
    carries the scaler's state (its growth tracker counts the steps since the last change of scale)."""
    fp16 = [*FP16, "train.eval_every=2"]
    straight = Trainer(_toy(tmp_path / "a", toy_cache, "train.max_steps=4", *fp16))
    assert straight.train_autocast == straight.eval_autocast == torch.float16 and straight.scaler.is_enabled()
    straight.fit(quiet=True)
    Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=2", *fp16)).fit(quiet=True)
    saved = load_checkpoint(tmp_path / "b" / "last.pt")["scaler"]
    assert saved["_growth_tracker"] == 2 and saved["scale"] == straight.scaler.state_dict()["scale"]
    resumed = Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=4", *fp16))
    resumed.fit(quiet=True)
    _assert_same_training_state(straight, resumed)
    assert resumed.scaler.state_dict() == straight.scaler.state_dict()
    assert resumed.scaler.state_dict()["_growth_tracker"] == 4


def _overflow_on(monkeypatch, calls: set[int]) -> list[int]:
    """Make the training passes numbered in ``calls`` (1-based) overflow: their loss times inf, so their
    gradients hold inf and NaN. Returns the list that counts the training passes."""
    real, count = train_module.batch_loss, []

    def overflowing(model, *args):
        loss = real(model, *args)
        if not model.training:  # validation's dev loss
            return loss
        count.append(1)
        return loss * float("inf") if len(count) in calls else loss

    monkeypatch.setattr(train_module, "batch_loss", overflowing)
    return count


def test_an_fp16_overflow_skips_the_update_the_schedule_and_the_step(tmp_path, toy_cache, monkeypatch):
    trainer = Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=3", *FP16))
    _overflow_on(monkeypatch, {2})
    assert trainer.train_step().update.applied and trainer.progress.step == 1
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    moments = {k: {n: t.clone() for n, t in v.items()} for k, v in trainer.optimizer.state_dict()["state"].items()}
    lr, scale = trainer.scheduler.get_last_lr(), trainer.scaler.get_scale()

    skipped = trainer.train_step()
    assert not skipped.update.applied and not torch.isfinite(skipped.update.grad_norm)
    assert trainer.progress.step == 1 and trainer.scheduler.get_last_lr() == lr
    assert trainer.scaler.get_scale() == scale / 2
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
    for key, state in trainer.optimizer.state_dict()["state"].items():  # the moments and the step count stay
        for name, tensor in state.items():
            assert torch.equal(tensor, moments[key][name]), (key, name)

    after = trainer.train_step()
    assert after.update.applied and torch.isfinite(after.update.grad_norm) and trainer.progress.step == 2
    assert trainer.scheduler.get_last_lr() != lr


def test_fp16_max_steps_counts_updates_made(tmp_path, toy_cache, monkeypatch):
    """A skipped step is neither logged nor validated: validation at steps 3 and 6 once each, after 7 passes."""
    passes = _overflow_on(monkeypatch, {3})
    trainer = Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=6", *FP16))
    trainer.fit(quiet=True)
    assert trainer.progress.step == 6 and len(passes) == 7
    assert [r["step"] for r in metrics_records(tmp_path / "run") if "dev_loss" in r] == [3, 6]


def test_fp16_that_overflows_every_step_stops_with_a_one_line_error(tmp_path, toy_cache, monkeypatch):
    from seq2seq.errors import UserError

    passes = _overflow_on(monkeypatch, set(range(1, 100)))
    monkeypatch.setattr(train_module, "MAX_SKIPPED_IN_A_ROW", 3)  # 24 in earnest; each overflowing pass is slow
    trainer = Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=50", *FP16))
    with pytest.raises(UserError, match=r"overflowed float16 in 3 steps in a row after step 0; train in bf16"):
        trainer.fit(quiet=True)
    assert len(passes) == 3 and trainer.progress.step == 0


def test_interrupt_inside_a_step_is_repeated_on_resume(tmp_path, toy_cache, straight_run, monkeypatch):
    """Ctrl-C during step 28's forward pass: last.pt rewinds to before it, and resuming matches 40 straight steps."""
    interrupted = Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=40", *RESUME))
    real_batch_loss = train_module.batch_loss
    fired = []

    def interrupting_batch_loss(*args, **kwargs):
        if interrupted.progress.step == 27 and not fired:
            fired.append(True)
            raise KeyboardInterrupt
        return real_batch_loss(*args, **kwargs)

    monkeypatch.setattr(train_module, "batch_loss", interrupting_batch_loss)
    with pytest.raises(KeyboardInterrupt):
        interrupted.fit(quiet=True)
    monkeypatch.setattr(train_module, "batch_loss", real_batch_loss)
    assert fired and load_checkpoint(tmp_path / "run" / "last.pt")["progress"]["step"] == 27

    resumed = Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=40", *RESUME))
    resumed.fit(quiet=True)
    _assert_same_training_state(straight_run, resumed)


def test_compiled_training_equals_eager(tmp_path, toy_cache):
    """train.compile: the torch.compile'd teacher-forced pass trains as the eager one does (float32, no dropout)."""
    same = ["train.max_steps=3", "train.eval_every=3", "model.dropout=0.0", "train.precision=float32"]
    eager = Trainer(_toy(tmp_path / "a", toy_cache, *same))
    eager.fit(quiet=True)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    compiled = Trainer(_toy(tmp_path / "b", toy_cache, *same, "train.compile=true"))
    compiled.fit(quiet=True)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > graphs  # the compiled code ran
    want, got = eager.model.state_dict(), load_checkpoint(tmp_path / "b" / "last.pt")["model"]
    assert got.keys() == want.keys()  # checkpoints are those of an eager model
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=1e-4, rtol=0, msg=name)


def test_subword_sampling_trains_and_resumes_exactly(tmp_path, toy_cache):
    """With data.subword_alpha every epoch is segmented anew, across epoch boundaries and a resume."""
    sampled = [*RESUME, "data.subword_alpha=0.1", "data.batch_tokens=4096"]  # several epochs in 30 steps
    straight = Trainer(_toy(tmp_path / "a", toy_cache, "train.max_steps=30", *sampled))
    straight.fit(quiet=True)
    served = straight.sampler.epoch - (straight.sampler.position == 0)  # the epoch of the last batch
    assert served >= 2 and straight.resegmented.epoch == served
    assert not torch.equal(straight.resegmented.current.tgt_tokens, straight.data.train.tgt_tokens)
    assert straight._train_split() is straight.resegmented.current  # batches come from the sampled split
    Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=17", *sampled)).fit(quiet=True)
    resumed = Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=30", *sampled))
    resumed.fit(quiet=True)
    _assert_same_training_state(straight, resumed)


def test_resume_refuses_a_different_model_config(tmp_path, toy_cache):
    from seq2seq.errors import UserError

    Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=1", "train.eval_every=1")).fit(quiet=True)
    other = Trainer(_toy(tmp_path / "run", toy_cache, "train.max_steps=2", "model.ffn_dim=96"))
    with pytest.raises(UserError, match=r"was trained with a different 'model' config; resume with the same config"):
        other.fit(quiet=True)


def _cross_entropy(model: torch.nn.Module, batch, smoothing: float) -> float:
    """Per-token cross-entropy of ``model`` on ``batch`` by torch's own loss: the independent expected value."""
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in).flatten(0, 1).float()
    return float(
        F.cross_entropy(logits, batch.tgt_out.flatten(), ignore_index=PAD, label_smoothing=smoothing, reduction="mean")
    )


def test_train_label_smoothing_reaches_the_training_loss(tmp_path, toy_cache):
    # Without dropout the step's loss is a function of the weights before the update and the batch alone.
    settings = ("train.label_smoothing=0.3", "model.dropout=0.0", "train.precision=float32", "train.accum_steps=1")
    trainer = Trainer(_toy(tmp_path / "run", toy_cache, *settings))
    before, drawn, batches = copy.deepcopy(trainer.model).eval(), [], trainer.batches

    def watched():
        for indices in batches:
            drawn.append(indices)
            yield indices

    trainer.batches = watched()
    step = trainer.train_step()
    (indices,) = drawn
    batch = trainer.data.train.batch(indices, trainer.cfg.model.decoder_start_id)
    smoothed, plain = _cross_entropy(before, batch, 0.3), _cross_entropy(before, batch, 0.0)
    assert smoothed - plain > 0.02  # hundreds of times the tolerance below: the check tells them apart
    assert step.loss == pytest.approx(smoothed, abs=1e-4)


def test_train_word_dropout_reaches_the_training_batches(tmp_path, toy_cache):
    trainer = Trainer(_toy(tmp_path / "run", toy_cache, "train.word_dropout=0.5", "train.accum_steps=1"))
    seen = []
    for embed in (trainer.weights.work.src_embed, trainer.weights.work.tgt_embed):
        embed.register_forward_pre_hook(lambda _module, args: seen.append(args[0].clone()))
    trainer.train_step()
    src, tgt_in = seen
    for ids in (src, tgt_in[:, 1:]):
        words = (ids != PAD) & (ids != EOS)
        assert 0.3 < (ids[words] == UNK).float().mean().item() < 0.7  # the toy corpus itself holds no <unk>


def test_the_dev_loss_is_unsmoothed_whatever_the_training_smoothing(tmp_path, toy_cache):
    trainer = Trainer(_toy(tmp_path / "run", toy_cache, "train.label_smoothing=0.3", "train.eval_sentences=1"))
    dev = trainer.data.dev
    batch = dev.batch(torch.arange(len(dev)), trainer.cfg.model.decoder_start_id)  # one batch: padding changes nothing
    expected = _cross_entropy(trainer.model.eval(), batch, 0.0)
    assert _cross_entropy(trainer.model, batch, 0.1) - expected > 0.01  # smoothing 0.1 would show
    assert trainer.validate()["dev_loss"] == pytest.approx(expected, abs=1e-4)


def test_even_sample_covers_every_part_of_the_dev_split():
    assert even_sample(10, 0) == even_sample(10, 10) == even_sample(10, 20) == list(range(10))
    chosen = even_sample(1000, 500)
    assert len(set(chosen)) == 500 and chosen == sorted(chosen)
    assert chosen[0] == 0 and chosen[-1] == 998  # not just the first half (a sorted corpus: the shortest)
    assert even_sample(7, 3) == [0, 2, 4]


# -- the learning-rate schedule ----------------------------------------------
@pytest.mark.parametrize("schedule", ["inverse_sqrt", "cosine", "constant"])
def test_warmup_is_linear(schedule):
    tc = TrainConfig(warmup_steps=10, schedule=schedule, max_minutes=60)  # at elapsed=0 cosine is still at 1
    assert [lr_factor(s, tc) for s in range(10)] == pytest.approx([(s + 1) / 10 for s in range(10)])


def test_inverse_sqrt_decay():
    tc = TrainConfig(warmup_steps=100, schedule="inverse_sqrt")
    assert lr_factor(99, tc) == pytest.approx(1.0)  # the peak, at the end of warmup
    for step in (100, 399, 1000, 9999):
        assert lr_factor(step, tc) == pytest.approx(math.sqrt(100 / (step + 1)))
    assert lr_factor(399, tc) == pytest.approx(0.5)  # four times the steps, half the rate
    after = [lr_factor(s, tc) for s in range(100, 2000)]
    assert all(x > y for x, y in zip(after, after[1:], strict=False))


def test_cosine_reaches_zero_at_max_steps():
    tc = TrainConfig(warmup_steps=100, schedule="cosine", max_steps=1000)
    assert lr_factor(99, tc) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.099)))  # warmup ramp x cosine
    assert lr_factor(500, tc) == pytest.approx(0.5)  # half the budget, half the rate
    assert lr_factor(999, tc) < 1e-4
    assert lr_factor(1000, tc) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(1500, tc) == pytest.approx(0.0, abs=1e-12)  # stays at zero past the end
    decay = [lr_factor(s, tc) for s in range(100, 1001)]
    assert all(x >= y for x, y in zip(decay, decay[1:], strict=False))


def test_cosine_follows_the_clock_under_max_minutes():
    tc = TrainConfig(warmup_steps=10, schedule="cosine", max_minutes=10)
    assert lr_factor(50, tc, elapsed=0.0) == pytest.approx(1.0)
    assert lr_factor(50, tc, elapsed=300.0) == pytest.approx(0.5)  # 5 of 10 minutes, whatever the step
    assert lr_factor(5000, tc, elapsed=300.0) == pytest.approx(0.5)
    assert lr_factor(50, tc, elapsed=600.0) == pytest.approx(0.0, abs=1e-12)
    both = TrainConfig(warmup_steps=10, schedule="cosine", max_minutes=10, max_steps=100)
    assert lr_factor(50, both, elapsed=60.0) == pytest.approx(0.5)  # the budget that runs out first decides
    assert budget_used(50, 450.0, both) == pytest.approx(0.75)


def test_constant_schedule_and_no_warmup():
    assert lr_factor(500, TrainConfig(warmup_steps=100, schedule="constant")) == 1.0
    assert lr_factor(0, TrainConfig(warmup_steps=0)) == pytest.approx(1.0)  # no warmup: full rate at once


def _default_stop_signals() -> None:
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_DFL)


def test_a_stop_signal_waits_for_the_update_and_an_ignored_one_stays_ignored():
    """stop_deferred holds Ctrl-C back until its block ends; a Ctrl-C the process ignores stays ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        finished = False
        with pytest.raises(KeyboardInterrupt):
            with stop_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                finished = True  # the block ran to its end despite the signal
        assert finished
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `nohup seq2seq train &` starts it
        with stop_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


STEPS = 100_000
# The bar on stderr counting a finished step ("… | 1/100000 […]"; tqdm redraws it after "\r").
A_FINISHED_STEP = re.compile(rf"\b[1-9]\d*/{STEPS}\b")


class _Watched:
    """A process's stderr, read to its end by a thread; ``first_step`` is set once the bar shows a finished
    step or the stream ended, whichever comes first."""

    def __init__(self, stream) -> None:
        self.text, self.stepped, self.first_step = "", False, threading.Event()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        while char := stream.read(1):
            self.text += char
            if not self.stepped and char in "]\r\n" and A_FINISHED_STEP.search(self.text[-200:]):
                self.stepped = True
                self.first_step.set()
        self.first_step.set()

    def join(self, timeout: float) -> str:
        self._thread.join(timeout)
        return self.text


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C, and kill / a job scheduler
def test_a_stop_signal_saves_last_checkpoint_and_exits_130(tmp_path, toy_cache, stop):
    run = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "seq2seq",
        *toy_train_args(run, toy_cache, f"train.max_steps={STEPS}", f"train.eval_every={STEPS}"),
    ]
    with subprocess.Popen(
        args,
        cwd=REPO,
        env=CLI_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_stop_signals,  # pytest itself may run with Ctrl-C ignored (started by `cmd &`)
    ) as proc:
        try:
            err = _Watched(proc.stderr)
            out = []
            reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
            reader.start()
            # Minutes at most on a busy machine: the data cache is the session's, the toy model tiny.
            assert err.first_step.wait(timeout=300), f"no finished step within 300 s: {err.text}"
            assert err.stepped, f"training ended before its first step: {err.join(10)}"
            proc.send_signal(stop)
            proc.wait(timeout=60)
            reader.join(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    stderr = err.join(10)
    assert proc.returncode == 130, stderr
    assert "interrupted at step" in out[0]
    assert "Traceback" not in stderr
    state = load_checkpoint(run / "last.pt")
    assert state["progress"]["step"] >= 1
    assert not list(run.glob(".*.tmp"))


def test_resume_with_several_corpora_is_exact(tmp_path, toy_cache, toy_pairs):
    """Two corpora mixed by weight: 30 steps straight == 13 steps, stop, resume to 30 (epochs cross a boundary)."""
    src, tgt = toy_pairs
    lexicon = {"zh": [s[:2] for s in src[:200]], "en": [t.split()[0] for t in tgt[:200]]}
    for side, lines in lexicon.items():
        (tmp_path / f"lex.{side}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    corpora = [
        {"name": "toy", "src": "tests/fixtures/toy.zh", "tgt": "tests/fixtures/toy.en"},
        {"name": "lex", "src": str(tmp_path / "lex.zh"), "tgt": str(tmp_path / "lex.en"), "weight": 0.3},
    ]
    mixed = [*RESUME, "data.src=null", "data.tgt=null", f"data.corpora={corpora}", "data.batch_tokens=4096"]
    straight = Trainer(_toy(tmp_path / "a", toy_cache, "train.max_steps=30", *mixed))
    assert straight.mix is not None and straight.mix.per_epoch()[1] == round(0.3 * straight.mix.sizes[0])
    straight.fit(quiet=True)
    assert straight.sampler.epoch >= 2  # the resume below lands inside a later epoch's mix
    Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=13", *mixed)).fit(quiet=True)
    resumed = Trainer(_toy(tmp_path / "b", toy_cache, "train.max_steps=30", *mixed))
    resumed.fit(quiet=True)
    _assert_same_training_state(straight, resumed)


# -- the BLEU that picks best.pt ---------------------------------------------
@pytest.mark.parametrize(("setting", "tokenizer"), [("data.tgt_lang=zh", "zh"), ("eval.bleu_tokenize=char", "char")])
def test_validation_scores_bleu_with_the_configured_tokenizer(tmp_path, toy_cache, setting, tokenizer):
    cfg = _toy(tmp_path / "run", toy_cache, "train.max_steps=2", "train.eval_every=2", setting)
    Trainer(cfg).fit(quiet=True)
    (record,) = [r for r in metrics_records(tmp_path / "run") if "dev_bleu" in r]
    assert f"tok:{tokenizer}|" in record["dev_bleu_signature"]
    best = load_checkpoint(tmp_path / "run" / "best.pt")  # chosen on that BLEU: its validation result is stored
    assert best["dev_bleu_signature"] == record["dev_bleu_signature"] and best["dev_bleu"] == record["dev_bleu"]


def test_a_run_saved_before_the_language_keys_existed_resumes(tmp_path, toy_cache):
    run = tmp_path / "run"
    Trainer(_toy(run, toy_cache, "train.max_steps=2", "train.eval_every=2")).fit(quiet=True)
    state = load_checkpoint(run / "last.pt")
    del state["config"]["data"]["tgt_lang"], state["config"]["eval"]  # as an older seq2seq wrote it
    save_checkpoint({k: v for k, v in state.items() if k != DIGEST_KEY}, run / "last.pt")
    resumed = Trainer(_toy(run, toy_cache, "train.max_steps=4", "train.eval_every=2", "data.tgt_lang=zh"))
    assert resumed.resume() and resumed.progress.step == 2  # the language only steers scoring
