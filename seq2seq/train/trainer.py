"""The training loop: teacher forcing, label-smoothed cross-entropy, warmup
schedule, clipping, accumulation, periodic validation (loss, BLEU, chrF),
atomic checkpoints and exact resume.

The trainer knows the model only through ``states(src, tgt_in)`` and its output
projection ``out_proj`` (the loss fuses the two, ``seq2seq.train.loss``), and the data
only through ``PreparedData``. What the user sees of a run (bar, log lines,
metrics.jsonl, TensorBoard) is ``seq2seq.train.runlog``; how Ctrl-C and SIGTERM stop it, ``seq2seq.train.signals``;
how several processes share one run (``torchrun``), ``seq2seq.train.distributed``.
"""

import dataclasses
import math
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from seq2seq.checkpoint import average_models, load_checkpoint, save_checkpoint
from seq2seq.config import Config, TrainConfig, config_from_dict, save_config
from seq2seq.data.batching import Batch, BucketSampler, drop_words
from seq2seq.data.encoded import EncodedSplit, Resegmented
from seq2seq.data.mixing import CorpusMix
from seq2seq.data.pipeline import PreparedData, prepare_data
from seq2seq.decode.batched import search_ids, sentences_per_batch
from seq2seq.device import autocast, available_cpus, resolve_device, resolve_precision
from seq2seq.errors import UserError
from seq2seq.evaluate.metrics import bleu_metric, configured_tokenizer, corpus_scores
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS, PAD
from seq2seq.train.distributed import SINGLE, World
from seq2seq.train.loss import label_smoothed_cross_entropy, projected_cross_entropy
from seq2seq.train.precision import DESCRIPTIONS, EVAL_AUTOCAST, TRAIN_AUTOCAST, MasterWeights, loss_scaler
from seq2seq.train.runlog import RunLog, describe
from seq2seq.train.signals import StopRequest, sigterm_interrupts, stop_deferred, stop_requests
from seq2seq.train.tensorboard import summary_writer_class
from seq2seq.train.warmstart import load_warm_start


def even_sample(total: int, n: int) -> list[int]:
    """``n`` indices spread evenly over ``range(total)`` (all of them if ``n`` is 0 or ``total`` or more).

    Corpora often come sorted (Tatoeba's export by sentence length, and the split keeps that
    order), so the first ``n`` dev sentences would be the shortest; an even spread is a sample
    of every length.
    """
    if n <= 0 or n >= total:
        return list(range(total))
    return [i * total // n for i in range(n)]


def budget_used(step: int, elapsed: float, cfg: TrainConfig) -> float:
    """Share of the training budget spent, in [0, 1]: steps or minutes, whichever runs out first."""
    shares = [step / cfg.max_steps] if cfg.max_steps else []
    shares += [elapsed / (cfg.max_minutes * 60)] if cfg.max_minutes else []
    return min(max(shares, default=0.0), 1.0)


def adamw(params: Iterator[nn.Parameter], cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW as configured, with the fused kernel: one pass over all parameters per step rather
    than the default loop over them (docs/design.md#fused-adamw)."""
    return torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.adam_betas), weight_decay=cfg.weight_decay, fused=True)


def lr_factor(step: int, cfg: TrainConfig, elapsed: float = 0.0) -> float:
    """Multiplier of ``cfg.lr`` at ``step`` after ``elapsed`` seconds: linear warmup times the chosen decay.

    ``cosine`` follows the budget (``budget_used``), so with ``max_minutes`` it anneals to zero exactly when
    the time is up, however many steps that turns out to be (the price: the schedule depends on the clock).
    """
    warmup = (step + 1) / cfg.warmup_steps if step < cfg.warmup_steps else 1.0
    if cfg.schedule == "inverse_sqrt":
        return warmup * math.sqrt(max(cfg.warmup_steps, 1) / max(step + 1, cfg.warmup_steps))
    if cfg.schedule == "cosine":
        return warmup * 0.5 * (1.0 + math.cos(math.pi * budget_used(step, elapsed, cfg)))
    return warmup


def batch_loss(
    model: Transformer, batch: Batch, label_smoothing: float, autocast_dtype: torch.dtype | None
) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over non-pad target tokens (teacher forcing), the passes under
    autocast to ``autocast_dtype`` (None: none)."""
    with autocast(batch.src.device, autocast_dtype):
        states = model.states(batch.src, batch.tgt_in)  # (B, T, D)
        return projected_cross_entropy(
            states, model.out_proj.weight, batch.tgt_out, label_smoothing, model.out_proj.bias
        )


@torch.no_grad()
def dev_loss(
    model: nn.Module,
    dev: EncodedSplit,
    batch_tokens: int,
    device: torch.device,
    autocast_dtype: torch.dtype | None,
    world: World = SINGLE,
    start: int = BOS,
) -> float:
    """Per-token cross-entropy (no smoothing) on the dev split; each rank of ``world`` takes its share of it
    (``start``: the model's decoder start token)."""
    model.eval()
    total, tokens = 0.0, 0
    batches = BucketSampler(dev.src_lengths, dev.tgt_lengths, batch_tokens, seed=0, shuffle=False).epoch_batches(0)
    for idx in world.mine(batches):
        batch = dev.batch(idx, start).to(device)
        with autocast(batch.src.device, autocast_dtype):
            total += float(label_smoothed_cross_entropy(model(batch.src, batch.tgt_in), batch.tgt_out))
        tokens += batch.tokens
    model.train()
    total, tokens = world.sum([total, tokens])
    return total / max(tokens, 1)


class Update(NamedTuple):
    """What one optimizer update did."""

    grad_norm: Tensor  # 0-dim: the gradients' norm before clipping, left on the device until someone reads it
    applied: bool  # False: float16 gradients overflowed and the update was skipped (seq2seq.train.precision)


def gradient_norm(params: Sequence[nn.Parameter]) -> Tensor:
    """The 2-norm of all the parameters' gradients together (0-dim)."""
    norms = [torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())


def optimizer_update(
    weights: MasterWeights,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    clip_norm: float,
    scaler: torch.amp.GradScaler | None = None,
) -> Update:
    """One optimizer update from the gradients the backward passes left.

    Collects the working copy's gradients into the float32 master (a no-op if already
    collected, and for float32 or autocast training), divides out the loss scale of float16
    training (``scaler``), clips their norm (``clip_norm`` 0: off), steps the optimizer and the
    schedule, clears the gradients and rounds the new weights into the working copy. With a
    ``scaler``, gradients holding an inf or NaN skip the optimizer and the schedule. The trainer
    and the benchmark scripts all update through here.
    """
    weights.collect_grads()
    if scaler is not None:
        scaler.unscale_(optimizer)
    params = list(weights.master.parameters())
    grad_norm = nn.utils.clip_grad_norm_(params, clip_norm) if clip_norm > 0 else gradient_norm(params)
    applied = True
    if scaler is None:
        optimizer.step()
    else:
        scale = scaler.get_scale()
        scaler.step(optimizer)  # no update where unscale_ found an inf or NaN
        scaler.update()
        applied = scaler.get_scale() >= scale  # the scale shrinks exactly when the step was skipped
    if scheduler is not None and applied:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    weights.sync()
    return Update(grad_norm.detach(), applied)


class TrainStep(NamedTuple):
    """One optimizer step of the trainer."""

    loss: float  # mean per target token
    tokens: int  # target tokens, all ranks
    update: Update


# Each overflow halves float16's loss scale: this many in a row take it from 2**16 to 2**-8, scaling the
# gradients down, so an overflow that still comes is the forward pass's own and no scale will cure it.
MAX_SKIPPED_IN_A_ROW = 24


@dataclass
class Progress:
    """Counters that a checkpoint carries across a resume."""

    step: int = 0
    elapsed: float = 0.0  # seconds trained, over all sessions
    best: float | None = None
    bad_evals: int = 0
    kept: list[str] = field(default_factory=list)  # checkpoints kept for averaging


INTERRUPTED = "interrupted"  # the stop reason of Ctrl-C or SIGTERM in a data-parallel run


class Trainer:
    """Owns model, optimizer, schedule, sampler and run directory for one run.

    ``world``: this process's rank when ``torchrun`` started several (``seq2seq.train.distributed``).
    """

    def __init__(self, cfg: Config, device: torch.device | None = None, world: World = SINGLE) -> None:
        self.cfg, self.tc, self.world = cfg, cfg.train, world
        self.run_dir = Path(self.tc.run_dir)
        self.device = device or (world.device if world.distributed else resolve_device(self.tc.device))
        self.precision = resolve_precision(self.tc.precision, self.device)
        self.train_autocast = TRAIN_AUTOCAST.get(self.precision)  # the dtype the training passes autocast to
        self.eval_autocast = EVAL_AUTOCAST.get(self.precision)  # ... and validation and its decoding
        self.scaler = loss_scaler(self.precision, self.device)  # float16 only
        self.skipped_in_a_row = 0  # float16 updates skipped for an overflow since the last one made
        self.bleu_tokenize = configured_tokenizer(cfg)
        bleu_metric(self.bleu_tokenize)  # a tokenizer missing its extra fails now, not after the data and an epoch
        if self.tc.tensorboard:
            summary_writer_class()  # so does TensorBoard without its package
        # The ranks on one machine share its cores.
        torch.set_num_threads(self.tc.threads or max(available_cpus() // world.local_size, 1))
        torch.manual_seed(self.tc.seed)
        random.seed(self.tc.seed)
        warm = load_warm_start(self.tc.init_from, cfg) if self.tc.init_from else None
        self.data: PreparedData = prepare_data(
            cfg.data, self.run_dir if world.main else None, warm.tokenizer if warm else None
        )
        tok = self.data.tokenizer
        self.model = Transformer(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, PAD).to(self.device)
        if warm:  # fresh optimizer, schedule and step count; a resume below still wins over these weights
            self.model.load_state_dict(warm.model)
        # bf16: forward and backward run on a bf16 copy; the optimizer and checkpoints keep self.model in float32.
        self.weights = MasterWeights(self.model, bf16=self.precision == "bf16")
        if world.distributed:  # the same initial weights everywhere (same seed), then a dropout stream per rank
            torch.manual_seed(self.tc.seed * 100_003 + world.rank)
        if self.tc.compile:  # the teacher-forced pass only: loss, search and checkpoints stay as they are
            self.weights.work.states = torch.compile(self.weights.work.states, dynamic=True)
        self.optimizer = adamw(self.model.parameters(), self.tc)
        self.progress = Progress()
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, self.tc, self.progress.elapsed)
        )
        train = self.data.train
        self.resegmented = (
            Resegmented(self.data.train_text, tok, cfg.data.subword_alpha, self.tc.seed, cfg.data.max_len)
            if cfg.data.subword_alpha
            else None
        )
        self.mix = CorpusMix.from_config(cfg.data, self.data.corpus_sizes, self.tc.seed)
        self.sampler = BucketSampler(
            train.src_lengths,
            train.tgt_lengths,
            cfg.data.batch_tokens,
            self.tc.seed,
            lengths_at=self._resegment if self.resegmented else None,
            items_at=self.mix.epoch_items if self.mix else None,
        )
        # Lazy: the first batch is drawn by the first train_step, after resume() has restored the sampler.
        self.batches = iter(self.sampler)
        self.stop = StopRequest()  # raised by a stop signal in a data-parallel run (see fit)

    def _resegment(self, epoch: int) -> tuple[Tensor, Tensor]:
        """The sampler's hook at the start of an epoch: sample its segmentation, return its lengths."""
        split = self.resegmented.split(epoch)
        return split.src_lengths, split.tgt_lengths

    def _train_split(self) -> EncodedSplit:
        """The training pairs as segmented for the epoch being served."""
        return self.resegmented.current if self.resegmented else self.data.train

    # -- checkpoints -----------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly from here (on every rank: it gathers the ranks' RNG states)."""
        rng = {
            "torch": torch.get_rng_state(),
            "python": list(random.getstate()[1]),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "mps": torch.mps.get_rng_state() if self.device.type == "mps" else None,  # MPS dropout draws from its own
        }
        ranks = {"world_size": self.world.size, "rank_rng": self.world.gather(rng)} if self.world.distributed else {}
        return {
            "model": self.model.state_dict(),
            "config": self.cfg.to_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "sampler": self.sampler.state_dict(),
            "rng": rng,
            "progress": dataclasses.asdict(self.progress),
            **({"scaler": self.scaler.state_dict()} if self.scaler is not None else {}),
            **ranks,
        }

    def _save_last(self) -> None:
        """last.pt (a collective: every rank calls it, rank 0 writes)."""
        state = self.state()
        if self.world.main:
            save_checkpoint(state, self.run_dir / "last.pt")

    def resume(self) -> bool:
        """Continue from ``last.pt`` when the run directory has one; True if it did."""
        path = self.run_dir / "last.pt"
        state = self.world.from_main(lambda: load_checkpoint(path) if path.is_file() else None)
        if state is None:
            return False
        stored = config_from_dict(state["config"], f"{path} (stored config)")  # keys added since: their defaults
        # The target language only steers scoring (BLEU's tokenizer); everything else must match.
        stored = dataclasses.replace(stored, data=dataclasses.replace(stored.data, tgt_lang=self.cfg.data.tgt_lang))
        for section in ("model", "data"):
            if getattr(stored, section) != getattr(self.cfg, section):
                raise UserError(
                    f"{self.run_dir} was trained with a different '{section}' config; "
                    "resume with the same config or choose a new train.run_dir"
                )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.sampler.load_state_dict(state["sampler"])  # counts global batches: right on any world size
        if self.scaler is not None and "scaler" in state:  # a run that trained in another precision has none
            self.scaler.load_state_dict(state["scaler"])
        self.progress = Progress(**state["progress"])
        if state.get("world_size", 1) == self.world.size:
            rng = state["rank_rng"][self.world.rank] if self.world.distributed else state["rng"]
            torch.set_rng_state(rng["torch"])
            random.setstate((3, tuple(rng["python"]), None))
            if rng["cuda"] and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(rng["cuda"])
            if rng.get("mps") is not None and self.device.type == "mps":
                torch.mps.set_rng_state(rng["mps"])
        else:  # another world size: the batches are dealt anew, each rank's dropout stream starts afresh
            torch.manual_seed(self.tc.seed * 100_003 + self.progress.step * 1_009 + self.world.rank)
        self.weights.sync()
        return True

    # -- validation ------------------------------------------------------
    def validate(self) -> dict[str, float | str]:
        """Dev loss and perplexity; BLEU (tokenized for the target language, its signature recorded) and chrF
        of greedy output."""
        world = self.world
        loss = dev_loss(
            self.model,
            self.data.dev,
            self.cfg.data.batch_tokens,
            self.device,
            self.eval_autocast,
            world,
            self.cfg.model.decoder_start_id,
        )
        result = {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 50.0))}
        chosen = even_sample(len(self.data.dev), self.tc.eval_sentences)
        if chosen:
            mine = world.mine(chosen)  # each rank decodes every world.size-th sentence
            found = []
            self.model.eval()
            with autocast(self.device, self.eval_autocast):
                if mine:
                    size = sentences_per_batch(self.cfg.decode.batch_sentences, self.precision, self.device)
                    decode = dataclasses.replace(self.cfg.decode, batch_sentences=size)
                    found = search_ids(self.model, self.data.dev.sources(mine), decode, self.device, beam=1)
            self.model.train()
            shares = world.gather([self.data.tokenizer.decode_tgt(h[0].tokens) for h in found])
            hyps = [shares[i % world.size][i // world.size] for i in range(len(chosen))]  # back in chosen's order
            scores = corpus_scores(hyps, [self.data.dev_text.tgt[i] for i in chosen], self.bleu_tokenize)
            result.update(dev_bleu=scores.bleu, dev_chrf=scores.chrf, dev_bleu_signature=scores.bleu_signature)
        return result

    def _metric(self, result: dict[str, float | str]) -> float:
        """The configured best-metric, oriented so that larger is better."""
        name = self.tc.best_metric
        return -result["dev_loss"] if name == "loss" or "dev_bleu" not in result else result[f"dev_{name}"]

    def _after_validation(self, result: dict[str, float | str]) -> None:
        """Save best/last (and an averaging snapshot); update early-stopping counters.

        The order survives a kill at any point: best.pt and the snapshot are written before the
        last.pt that counts them, and a snapshot is deleted only once last.pt no longer lists it;
        a kill in between resumes from the previous last.pt, which repeats this validation.
        """
        p = self.progress
        metric = self._metric(result)
        improved = p.best is None or metric > p.best
        p.best, p.bad_evals = (metric, 0) if improved else (p.best, p.bad_evals + 1)
        main = self.world.main
        if improved and main:
            self._save_best(result)
        dropped: list[str] = []
        if self.tc.average_last:
            name = f"snapshot-{p.step}.pt"
            if main:
                save_checkpoint({"model": self.model.state_dict(), "config": self.cfg.to_dict()}, self.run_dir / name)
            p.kept.append(name)
            dropped, p.kept = p.kept[: -self.tc.average_last], p.kept[-self.tc.average_last :]
        state = self.state()  # on every rank: it gathers their random states
        if main:
            save_checkpoint(state, self.run_dir / "last.pt")
            for name in dropped:
                (self.run_dir / name).unlink(missing_ok=True)

    def _save_best(self, result: dict[str, float | str], **extra: int) -> None:
        """best.pt: the model as it is now, its config, the step and the validation ``result``."""
        record = {"model": self.model.state_dict(), "config": self.cfg.to_dict(), "step": self.progress.step}
        save_checkpoint({**record, **extra, **result}, self.run_dir / "best.pt")

    def _average(self, log: RunLog) -> None:
        """Average the kept snapshots; keep the average as best.pt if it validates better."""
        paths = [self.run_dir / name for name in self.progress.kept]
        if len(paths) < 2:
            return
        trained = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.model.load_state_dict(self.world.from_main(lambda: average_models(paths)))
        result = self.validate()
        metric = self._metric(result)
        log.line(f"average of last {len(paths)} checkpoints: " + describe(result))
        if self.progress.best is None or metric > self.progress.best:
            self.progress.best = metric
            if self.world.main:
                self._save_best(result, averaged=len(paths))
            log.line("the average is the new best.pt")
        self.model.load_state_dict(trained)

    # -- the loop --------------------------------------------------------
    def _stop_reason(self, started: float, elapsed_before: float) -> str | None:
        """Why to stop now, or None; on every rank the same answer (each rank's clock is asked, any one stops all)."""
        tc, p = self.tc, self.progress
        reasons = {
            INTERRUPTED: self.stop.requested,
            f"reached train.max_steps={tc.max_steps}": bool(tc.max_steps and p.step >= tc.max_steps),
            f"reached train.max_epochs={tc.max_epochs}": bool(tc.max_epochs and self.sampler.epoch >= tc.max_epochs),
            f"reached train.max_minutes={tc.max_minutes:g}": bool(
                tc.max_minutes and elapsed_before + time.perf_counter() - started >= tc.max_minutes * 60
            ),
            f"no dev improvement in {tc.patience} validations (train.patience)": bool(
                tc.patience and p.bad_evals >= tc.patience
            ),
        }
        agreed = self.world.any_of(list(reasons.values()))
        return next((reason for reason, stop in zip(reasons, agreed, strict=True) if stop), None)

    def train_step(self) -> TrainStep:
        """One optimizer step over ``accum_steps`` batches per rank.

        Of the ``accum_steps × world.size`` batches drawn, this rank trains on every world.size-th;
        losses are divided by the target tokens of all of them (``seq2seq.train.distributed``).
        A float16 step whose gradients overflowed is skipped: ``progress.step`` stays.
        """
        sampler_before, rng_before = self.sampler.state_dict(), torch.get_rng_state()
        world, start = self.world, self.cfg.model.decoder_start_id
        try:
            batches = []
            for i in range(self.tc.accum_steps * world.size):
                indices = next(self.batches)  # first: it may start a new epoch (and segmentation)
                if i % world.size == world.rank:
                    batch = drop_words(self._train_split().batch(indices, start), self.tc.word_dropout)
                    batches.append(batch.to(self.device))
            (tokens,) = world.sum([sum(b.tokens for b in batches)])
            tokens = int(tokens)
            total = 0.0
            for batch in batches:
                loss = batch_loss(self.weights.work, batch, self.tc.label_smoothing, self.train_autocast)
                scaled = loss / tokens
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
                self.weights.collect_grads()  # per batch: accumulating in float32, not in the bf16 copy
                total += loss.item()
        except KeyboardInterrupt:  # the step never happened: rewind so that resume repeats it
            self.sampler.load_state_dict(sampler_before)
            torch.set_rng_state(rng_before)
            self.weights.work.zero_grad(set_to_none=True)
            self.optimizer.zero_grad(set_to_none=True)
            raise
        world.sum_grads(self.model)  # the master weights' gradients, all batches accumulated
        (total,) = world.sum([total])
        # The update is all-or-nothing, so a checkpoint never holds half of it. A data-parallel run
        # takes signals as a flag (see fit): nothing to defer.
        with stop_deferred() if not world.distributed else nullcontext():
            update = optimizer_update(self.weights, self.optimizer, self.scheduler, self.tc.clip_norm, self.scaler)
            if update.applied:
                self.progress.step += 1
        self.skipped_in_a_row = 0 if update.applied else self.skipped_in_a_row + 1
        if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
            raise UserError(
                f"train.precision=fp16: the gradients overflowed float16 in {MAX_SKIPPED_IN_A_ROW} steps in a row "
                f"after step {self.progress.step}; train in bf16-autocast or float32, or lower train.lr"
            )
        return TrainStep(total / tokens, tokens, update)

    def fit(self, quiet: bool = False) -> Path:
        """Train until a stop condition; returns the run directory.

        Ctrl-C or SIGTERM (``kill``, a job scheduler's stop) saves ``last.pt`` and raises
        KeyboardInterrupt; the same command resumes. In a data-parallel run the signal only
        raises a flag that the ranks agree on at the next step boundary, so all stop together.
        """
        if self.world.distributed:
            with stop_requests() as self.stop:
                return self._fit(quiet)
        with sigterm_interrupts():
            return self._fit(quiet)

    def _fit(self, quiet: bool) -> Path:
        main = self.world.main
        if main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        resumed = self.resume()
        if main:
            save_config(self.cfg, self.run_dir / "config.yaml")
        p, tc = self.progress, self.tc
        n_params = sum(t.numel() for t in self.model.parameters())
        ranks = f" x {self.world.size} ranks" if self.world.distributed else ""
        model = (
            f"{n_params / 1e6:.1f}M parameters on {self.device}{ranks}, {DESCRIPTIONS[self.precision]}, "
            f"{torch.get_num_threads()} threads" + (f"; resumed at step {p.step}" if resumed else "")
        )
        self.weights.work.train()
        started, elapsed_before = time.perf_counter(), p.elapsed
        validated_at = p.step if resumed else -1
        with RunLog(self.run_dir, tc.max_steps, p.step, quiet or not main, main, tc.tensorboard) as log:
            log.summary(self.data.report, model)
            if self.mix:
                log.line(f"data mix: {self.mix.describe()}")
            try:
                while (reason := self._stop_reason(started, elapsed_before)) is None:
                    loss, tokens, update = self.train_step()
                    # One clock for all ranks: the schedule reads it, and their weights must stay equal.
                    p.elapsed = self.world.max(elapsed_before + time.perf_counter() - started)
                    if not update.applied:  # no step was made: nothing to log or validate
                        continue
                    left = f"{max(tc.max_minutes * 60 - p.elapsed, 0) / 60:.0f}m left" if tc.max_minutes else ""
                    lr = self.scheduler.get_last_lr()[0]
                    log.step(p.step, loss, tokens, lr, self.sampler.epoch, p.elapsed / 60, left, update.grad_norm)
                    if p.step % tc.eval_every == 0:
                        self._validate_and_save(log)
                        validated_at = p.step
                if reason == INTERRUPTED:
                    raise KeyboardInterrupt
            except KeyboardInterrupt:
                self._save_last()
                log.line(
                    f"interrupted at step {p.step}: saved {self.run_dir / 'last.pt'}; run the same command to resume"
                )
                raise
            if validated_at != p.step:
                self._validate_and_save(log)
            log.line(f"stopped: {reason}")
            if tc.average_last:
                self._average(log)
        return self.run_dir

    def _validate_and_save(self, log: RunLog) -> None:
        result = self.validate()
        # Recorded before the checkpoint: a kill in between resumes before this step and re-records it (RunLog).
        log.validation(self.progress.step, self.progress.elapsed / 60, self.sampler.epoch, result)
        self._after_validation(result)
