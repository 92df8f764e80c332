"""The training loop: teacher forcing, label-smoothed cross-entropy, warmup
schedule, clipping, accumulation, periodic validation (loss, BLEU, chrF),
atomic checkpoints and exact resume.

The trainer knows the model only through ``states(src, tgt_in)`` and its output
projection ``out_proj`` (the loss fuses the two, ``seq2seq.loss``), and the data
only through ``PreparedData``.
"""

import json
import math
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from seq2seq.batching import Batch, BucketSampler
from seq2seq.checkpoint import average_models, load_checkpoint, save_checkpoint
from seq2seq.config import Config, TrainConfig, save_config
from seq2seq.dataset import EncodedSplit, PreparedData, Resegmented, prepare_data
from seq2seq.errors import UserError
from seq2seq.evaluate import score
from seq2seq.loss import projected_cross_entropy
from seq2seq.model import Transformer
from seq2seq.precision import DESCRIPTIONS, MasterWeights, autocast, resolve_precision
from seq2seq.search import search_ids
from seq2seq.tokenizer import PAD


def resolve_device(name: str) -> torch.device:
    """'auto' -> CUDA when present, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {name!r} asked for, but no CUDA GPU is available; use --device cpu")
    return torch.device(name)


def spread(total: int, n: int) -> list[int]:
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
    """AdamW as configured, with the fused kernel: one pass over all parameters per step,
    half the optimizer time of the default per-parameter loop on the 2-core CPU."""
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


def batch_loss(model: Transformer, batch: Batch, label_smoothing: float, bf16_autocast: bool) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over non-pad target tokens (teacher forcing)."""
    with autocast(batch.src.device, bf16_autocast):
        states = model.states(batch.src, batch.tgt_in)  # (B, T, D)
        return projected_cross_entropy(states, model.out_proj.weight, batch.tgt_out, label_smoothing)


@torch.no_grad()
def dev_loss(model: nn.Module, dev: EncodedSplit, batch_tokens: int, device: torch.device, bf16: bool) -> float:
    """Per-token cross-entropy (no smoothing) on the dev split."""
    model.eval()
    total, tokens = 0.0, 0
    for idx in BucketSampler(dev.src_lengths, dev.tgt_lengths, batch_tokens, seed=0, shuffle=False).epoch_batches(0):
        batch = dev.batch(idx).to(device)
        total += float(batch_loss(model, batch, 0.0, bf16))
        tokens += batch.tokens
    model.train()
    return total / max(tokens, 1)


@dataclass
class Progress:
    """Counters that a checkpoint carries across a resume."""

    step: int = 0
    elapsed: float = 0.0  # seconds trained, over all sessions
    best: float | None = None
    bad_evals: int = 0
    kept: list[str] = field(default_factory=list)  # checkpoints kept for averaging


class Trainer:
    """Owns model, optimizer, schedule, sampler and run directory for one run."""

    def __init__(self, cfg: Config, device: torch.device | None = None) -> None:
        self.cfg, self.tc = cfg, cfg.train
        self.run_dir = Path(self.tc.run_dir)
        self.device = device or resolve_device(self.tc.device)
        self.precision = resolve_precision(self.tc.precision, self.device)
        self.bf16 = self.precision != "float32"  # validation and decoding autocast to bf16 in either bf16 mode
        torch.set_num_threads(self.tc.threads or len(os.sched_getaffinity(0)))
        torch.manual_seed(self.tc.seed)
        random.seed(self.tc.seed)
        self.data: PreparedData = prepare_data(cfg.data, self.run_dir)
        tok = self.data.tokenizer
        self.model = Transformer(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, PAD).to(self.device)
        # bf16: forward and backward run on a bf16 copy; the optimizer and checkpoints keep self.model in float32.
        self.weights = MasterWeights(self.model, bf16=self.precision == "bf16")
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
        self.sampler = BucketSampler(
            train.src_lengths,
            train.tgt_lengths,
            cfg.data.batch_tokens,
            self.tc.seed,
            lengths_at=self._resegment if self.resegmented else None,
        )

    def _resegment(self, epoch: int) -> tuple[Tensor, Tensor]:
        """The sampler's hook at the start of an epoch: sample its segmentation, return its lengths."""
        split = self.resegmented.split(epoch)
        return split.src_lengths, split.tgt_lengths

    def _train_split(self) -> EncodedSplit:
        """The training pairs as segmented for the epoch being served."""
        return self.resegmented.current if self.resegmented else self.data.train

    # -- checkpoints -----------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly from here."""
        p = self.progress
        return {
            "model": self.model.state_dict(),
            "config": self.cfg.to_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "sampler": self.sampler.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "python": list(random.getstate()[1]),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            },
            "progress": {
                "step": p.step,
                "elapsed": p.elapsed,
                "best": p.best,
                "bad_evals": p.bad_evals,
                "kept": p.kept,
            },
        }

    def resume(self) -> bool:
        """Continue from ``last.pt`` when the run directory has one; True if it did."""
        path = self.run_dir / "last.pt"
        if not path.is_file():
            return False
        state = load_checkpoint(path)
        for section in ("model", "data"):
            if state["config"][section] != self.cfg.to_dict()[section]:
                raise UserError(
                    f"{self.run_dir} was trained with a different '{section}' config; "
                    "resume with the same config or choose a new train.run_dir"
                )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.sampler.load_state_dict(state["sampler"])
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate((3, tuple(state["rng"]["python"]), None))
        if state["rng"]["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        self.progress = Progress(**state["progress"])
        self.weights.sync()
        return True

    # -- validation ------------------------------------------------------
    def validate(self) -> dict[str, float]:
        """Dev loss and perplexity; BLEU and chrF of greedy output."""
        loss = dev_loss(self.model, self.data.dev, self.cfg.data.batch_tokens, self.device, self.bf16)
        result = {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 50.0))}
        chosen = spread(len(self.data.dev), self.tc.eval_sentences)
        if chosen:
            self.model.eval()
            with autocast(self.device, self.bf16):
                found = search_ids(self.model, self.data.dev.sources(chosen), self.cfg.decode, self.device, beam=1)
            self.model.train()
            hyps = [self.data.tokenizer.decode_tgt(h[0].tokens) for h in found]
            scores = score(hyps, [self.data.dev_text.tgt[i] for i in chosen])
            result.update(dev_bleu=scores.bleu, dev_chrf=scores.chrf)
        return result

    def _metric(self, result: dict[str, float]) -> float:
        """The configured best-metric, oriented so that larger is better."""
        name = self.tc.best_metric
        return -result["dev_loss"] if name == "loss" or "dev_bleu" not in result else result[f"dev_{name}"]

    def _after_validation(self, result: dict[str, float]) -> None:
        """Save last/best (and an averaging snapshot); update early-stopping counters."""
        p = self.progress
        metric = self._metric(result)
        improved = p.best is None or metric > p.best
        p.best, p.bad_evals = (metric, 0) if improved else (p.best, p.bad_evals + 1)
        state = self.state()
        save_checkpoint(state, self.run_dir / "last.pt")
        if improved:
            save_checkpoint(
                {"model": state["model"], "config": state["config"], "step": p.step, **result}, self.run_dir / "best.pt"
            )
        if self.tc.average_last:
            name = f"snapshot-{p.step}.pt"
            save_checkpoint({"model": state["model"], "config": state["config"]}, self.run_dir / name)
            p.kept.append(name)
            while len(p.kept) > self.tc.average_last:
                (self.run_dir / p.kept.pop(0)).unlink(missing_ok=True)

    def _average(self, log: Any) -> None:
        """Average the kept snapshots; keep the average as best.pt if it validates better."""
        paths = [self.run_dir / name for name in self.progress.kept]
        if len(paths) < 2:
            return
        trained = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.model.load_state_dict(average_models(paths))
        result = self.validate()
        metric = self._metric(result)
        log(f"average of last {len(paths)} checkpoints: " + _format(result))
        if self.progress.best is None or metric > self.progress.best:
            self.progress.best = metric
            save_checkpoint(
                {
                    "model": self.model.state_dict(),
                    "config": self.cfg.to_dict(),
                    "step": self.progress.step,
                    "averaged": len(paths),
                    **result,
                },
                self.run_dir / "best.pt",
            )
            log("the average is the new best.pt")
        self.model.load_state_dict(trained)

    # -- the loop --------------------------------------------------------
    def _stop_reason(self, started: float, elapsed_before: float) -> str | None:
        tc, p = self.tc, self.progress
        if tc.max_steps and p.step >= tc.max_steps:
            return f"reached train.max_steps={tc.max_steps}"
        if tc.max_epochs and self.sampler.epoch >= tc.max_epochs:
            return f"reached train.max_epochs={tc.max_epochs}"
        if tc.max_minutes and elapsed_before + time.perf_counter() - started >= tc.max_minutes * 60:
            return f"reached train.max_minutes={tc.max_minutes:g}"
        if tc.patience and p.bad_evals >= tc.patience:
            return f"no dev improvement in {tc.patience} validations (train.patience)"
        return None

    def train_step(self) -> tuple[float, int]:
        """One optimizer step over ``accum_steps`` batches -> (mean loss per token, target tokens)."""
        sampler_before, rng_before = self.sampler.state_dict(), torch.get_rng_state()
        try:
            batches = []
            for _ in range(self.tc.accum_steps):
                indices = next(self._batches)  # first: it may start a new epoch (and segmentation)
                batches.append(self._train_split().batch(indices).to(self.device))
            tokens = sum(b.tokens for b in batches)
            total = 0.0
            for batch in batches:
                loss = batch_loss(self.weights.work, batch, self.tc.label_smoothing, self.precision == "bf16-autocast")
                (loss / tokens).backward()
                self.weights.collect_grads()
                total += loss.item()
        except KeyboardInterrupt:  # the step never happened: rewind so that resume repeats it
            self.sampler.load_state_dict(sampler_before)
            torch.set_rng_state(rng_before)
            self.weights.work.zero_grad(set_to_none=True)
            self.optimizer.zero_grad(set_to_none=True)
            raise
        with _stop_deferred():  # the update is all-or-nothing, so a checkpoint never holds half of it
            if self.tc.clip_norm > 0:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.clip_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.weights.sync()
            self.progress.step += 1
        return total / tokens, tokens

    def fit(self, quiet: bool = False) -> Path:
        """Train until a stop condition; returns the run directory.

        Ctrl-C or SIGTERM (``kill``, a job scheduler's stop) saves ``last.pt`` and raises
        KeyboardInterrupt; the same command resumes.
        """
        with _sigterm_interrupts():
            return self._fit(quiet)

    def _fit(self, quiet: bool) -> Path:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        resumed = self.resume()
        save_config(self.cfg, self.run_dir / "config.yaml")
        p = self.progress
        log = (lambda msg: None) if quiet else tqdm.write
        r = self.data.report
        source = "cache hit" if r["cache_hit"] else f"built in {r['build_seconds']}s"
        log(
            f"data: {r['pairs_read']} pairs read, {r['duplicates_removed']} duplicates, "
            f"filtered {r['filtered_empty']} empty / {r['filtered_too_long']} too long / {r['filtered_ratio']} ratio; "
            f"train {r['train']} dev {r['dev']} test {r['test']}; vocab {r['src_vocab']}/{r['tgt_vocab']}; "
            f"{source}"
        )
        n_params = sum(t.numel() for t in self.model.parameters())
        log(
            f"model: {n_params / 1e6:.1f}M parameters on {self.device}, {DESCRIPTIONS[self.precision]}"
            f", {torch.get_num_threads()} threads" + (f"; resumed at step {p.step}" if resumed else "")
        )
        metrics = (self.run_dir / "metrics.jsonl").open(
            "a", encoding="utf-8", buffering=1
        )  # line-buffered: tail -f works
        self._batches = iter(self.sampler)
        self.weights.work.train()
        started, elapsed_before = time.perf_counter(), p.elapsed
        bar = tqdm(total=self.tc.max_steps or None, initial=p.step, disable=quiet, unit="step", dynamic_ncols=True)
        window_tokens, window_start, reason = 0, time.perf_counter(), None
        validated_at = p.step if resumed else -1
        try:
            while (reason := self._stop_reason(started, elapsed_before)) is None:
                loss, tokens = self.train_step()
                window_tokens += tokens
                p.elapsed = elapsed_before + time.perf_counter() - started
                bar.update(1)
                if p.step % 20 == 0:
                    rate = window_tokens / (time.perf_counter() - window_start)
                    lr = self.scheduler.get_last_lr()[0]
                    eta = (
                        f"{max(self.tc.max_minutes * 60 - p.elapsed, 0) / 60:.0f}m left" if self.tc.max_minutes else ""
                    )
                    bar.set_postfix_str(f"loss {loss:.3f} lr {lr:.2e} {rate:,.0f} tok/s {eta}")
                    metrics.write(
                        json.dumps(
                            {
                                "step": p.step,
                                "loss": round(loss, 4),
                                "lr": lr,
                                "tokens_per_s": round(rate),
                                "epoch": self.sampler.epoch,
                                "minutes": round(p.elapsed / 60, 3),
                            }
                        )
                        + "\n"
                    )
                    window_tokens, window_start = 0, time.perf_counter()
                if p.step % self.tc.eval_every == 0:
                    self._validate_and_save(log, metrics)
                    validated_at = p.step
        except KeyboardInterrupt:
            bar.close()
            save_checkpoint(self.state(), self.run_dir / "last.pt")
            log(f"interrupted at step {p.step}: saved {self.run_dir / 'last.pt'}; run the same command to resume")
            metrics.close()
            raise
        bar.close()
        if validated_at != p.step:
            self._validate_and_save(log, metrics)
        log(f"stopped: {reason}")
        if self.tc.average_last:
            self._average(log)
        metrics.close()
        return self.run_dir

    def _validate_and_save(self, log: Any, metrics: Any) -> None:
        result = self.validate()
        self._after_validation(result)
        p = self.progress
        log(f"step {p.step} ({p.elapsed / 60:.1f} min, epoch {self.sampler.epoch}): " + _format(result))
        metrics.write(json.dumps({"step": p.step, "minutes": round(p.elapsed / 60, 3), **result}) + "\n")


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _heeded_stops() -> tuple[signal.Signals, ...]:
    """Ctrl-C and SIGTERM, less any this process ignores (``nohup cmd &`` starts it ignoring Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        return ()  # only the main thread may set signal handlers
    return tuple(stop for stop in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(stop) is not signal.SIG_IGN)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does (unless SIGTERM is ignored)."""
    if signal.SIGTERM not in _heeded_stops():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _stop_deferred() -> Iterator[None]:
    """Hold back Ctrl-C and SIGTERM until the block ends, then raise KeyboardInterrupt.

    An ignored signal stays ignored: it must not stop training just because it arrived here.
    """
    caught: list[int] = []
    previous = {stop: signal.getsignal(stop) for stop in _heeded_stops()}
    try:
        for stop in previous:
            signal.signal(stop, lambda signum, _frame: caught.append(signum))
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    if caught:
        raise KeyboardInterrupt


def _format(result: dict[str, float]) -> str:
    text = f"dev loss {result['dev_loss']:.3f} ppl {result['dev_ppl']:.1f}"
    if "dev_bleu" in result:
        text += f" BLEU {result['dev_bleu']:.2f} chrF {result['dev_chrf']:.2f}"
    return text
