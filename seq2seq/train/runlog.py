"""What a training run tells its user: the progress bar, log lines and ``metrics.jsonl``.

The trainer says what happened (a step, a validation, a stop); this object decides how it is
shown and recorded. ``metrics.jsonl`` in the run directory gets a record every
``RECORD_EVERY`` steps (loss, lr, tokens/s, gradient norm, epoch, minutes) and one per validation
(dev loss, perplexity, BLEU with its sacrebleu signature, chrF); it is line-buffered, so ``tail -f``
follows it. With ``train.tensorboard`` the same records also go to TensorBoard
(``seq2seq.train.tensorboard``).

``metrics.jsonl`` is the history of the model in ``last.pt``: a session that resumes at step N
first drops the records past N (written by a session that died before its next checkpoint, e.g.
``kill -9``: those steps are trained again and recorded again) and a torn last line, so after
any number of crashes and resumes every step is recorded once. The trainer writes a
validation's record before the checkpoint that follows it, so no record can go missing either.
"""

import json
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from tqdm import tqdm

from seq2seq.atomic import write_text_atomically
from seq2seq.errors import UserError
from seq2seq.train.tensorboard import ScalarWriter

RECORD_EVERY = 20  # steps between training records (and progress-bar postfix updates)


class RunLog:
    """The progress bar, log lines and metrics records of one training session."""

    def __init__(
        self,
        run_dir: Path,
        total_steps: int,
        first_step: int,
        quiet: bool = False,
        records: bool = True,
        tensorboard: bool = False,
    ) -> None:
        """``records`` False: no metrics.jsonl (the ranks of a data-parallel run other than rank 0);
        ``tensorboard``: the records go to TensorBoard as well."""
        self._quiet = quiet
        _keep_records_up_to(run_dir / "metrics.jsonl", first_step)
        self._bar = tqdm(total=total_steps or None, initial=first_step, disable=quiet, unit="step", dynamic_ncols=True)
        self._metrics = (run_dir / "metrics.jsonl").open("a", encoding="utf-8", buffering=1) if records else None
        self._scalars = ScalarWriter(run_dir, first_step) if records and tensorboard else None
        self._window_tokens, self._window_start = 0, time.perf_counter()

    def __enter__(self) -> "RunLog":
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._bar.close()
        if self._metrics is not None:
            self._metrics.close()
        if self._scalars is not None:
            self._scalars.close()

    def line(self, message: str) -> None:
        """One line above the progress bar (nothing when quiet)."""
        if not self._quiet:
            tqdm.write(message)

    def summary(self, report: dict[str, Any], model: str) -> None:
        """The data pipeline's report and a description of the model, at the start of a session."""
        source = "cache hit" if report["cache_hit"] else f"built in {report['build_seconds']}s"
        self.line(
            f"data: {report['pairs_read']} pairs read, {report['duplicates_removed']} duplicates, "
            f"filtered {report['filtered_empty']} empty / {report['filtered_too_long']} too long / "
            f"{report['filtered_ratio']} ratio; train {report['train']} dev {report['dev']} test {report['test']}; "
            f"vocab {report['src_vocab']}/{report['tgt_vocab']}; {source}"
        )
        self.line(f"model: {model}")

    def step(
        self,
        step: int,
        loss: float,
        tokens: int,
        lr: float,
        epoch: int,
        minutes: float,
        left: str,
        grad_norm: torch.Tensor | float,
    ) -> None:
        """After optimizer step ``step``: advance the bar; every RECORD_EVERY steps, show and record the rates.

        ``loss`` is per target token, ``tokens`` the step's target tokens, ``left`` the budget left ("" if none),
        ``grad_norm`` the gradients' norm before clipping (a GPU tensor is read only on the steps recorded).
        """
        self._bar.update(1)
        self._window_tokens += tokens
        if step % RECORD_EVERY:
            return
        rate = self._window_tokens / (time.perf_counter() - self._window_start)
        self._bar.set_postfix_str(f"loss {loss:.3f} lr {lr:.2e} {rate:,.0f} tok/s {left}")
        record = {
            "step": step,
            "loss": round(loss, 4),
            "lr": lr,
            "tokens_per_s": round(rate),
            "grad_norm": round(float(grad_norm), 4),
            "epoch": epoch,
            "minutes": round(minutes, 3),
        }
        self._write(record)
        self._window_tokens, self._window_start = 0, time.perf_counter()

    def validation(self, step: int, minutes: float, epoch: int, result: dict[str, float | str]) -> None:
        """One validation's figures: a log line and a metrics record."""
        self.line(f"step {step} ({minutes:.1f} min, epoch {epoch}): {describe(result)}")
        self._write({"step": step, "minutes": round(minutes, 3), **result})

    def _write(self, record: dict[str, Any]) -> None:
        if self._metrics is not None:
            self._metrics.write(json.dumps(record) + "\n")
        if self._scalars is not None:
            self._scalars.record(record)


def _keep_records_up_to(path: Path, step: int) -> None:
    """Rewrite ``path`` (atomically) without the records past ``step`` and without a torn last line."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]:  # [:-1]: torn or empty
        try:
            record_step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            continue  # not a record: a line torn by a crash mid-write
        if isinstance(record_step, int) and record_step <= step:
            kept.append(line + "\n")
    write_text_atomically(path, "".join(kept))


def describe(result: dict[str, float | str]) -> str:
    """A validation result as text: dev loss and perplexity, BLEU and chrF when decoded."""
    text = f"dev loss {result['dev_loss']:.3f} ppl {result['dev_ppl']:.1f}"
    if "dev_bleu" in result:
        text += f" BLEU {result['dev_bleu']:.2f} chrF {result['dev_chrf']:.2f}"
    return text


def read_validations(run_dir: Path) -> list[dict[str, Any]]:
    """The validation records (those with ``dev_bleu``) of a run's ``metrics.jsonl``, in file order;
    a missing file, a line that is not JSON or a run not yet validated is a UserError naming it."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{path}: not found; is {run_dir} a run directory of seq2seq train?")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise UserError(f"{path} line {number}: not valid JSON") from None
        if isinstance(record, dict) and "dev_bleu" in record:
            records.append(record)
    if not records:
        raise UserError(f"{path}: no validation lines (with dev_bleu) yet")
    return records
