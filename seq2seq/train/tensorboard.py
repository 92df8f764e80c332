"""TensorBoard curves of a run (``train.tensorboard``): the figures of ``metrics.jsonl`` as scalars in
``RUN_DIR/tensorboard/``, written with ``torch.utils.tensorboard`` (the ``tensorboard`` package, the
``seq2seq[tensorboard]`` extra).

``RunLog`` hands this writer every record it writes to ``metrics.jsonl``, so the two cannot disagree:
the training figures every ``RECORD_EVERY`` steps under ``train/``, the validation figures under
``dev/``, each at its optimizer step. A session that resumes at step N has TensorBoard hide the
events past N (``purge_step``), as ``metrics.jsonl`` drops those records: a session that died before
its next checkpoint wrote them, and the steps are trained and recorded again.
"""

from pathlib import Path
from typing import Any

from seq2seq.errors import UserError

TAGS = {  # metrics.jsonl key -> TensorBoard tag
    "loss": "train/loss",
    "lr": "train/lr",
    "tokens_per_s": "train/tokens_per_s",
    "grad_norm": "train/grad_norm",
    "dev_loss": "dev/loss",
    "dev_ppl": "dev/ppl",
    "dev_bleu": "dev/bleu",
    "dev_chrf": "dev/chrf",
}
DIRECTORY = "tensorboard"  # under the run directory


def summary_writer_class() -> type:
    """``torch.utils.tensorboard.SummaryWriter``; a one-line error naming the extra when it is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError(
            "train.tensorboard needs the tensorboard package: pip install 'seq2seq[tensorboard]' "
            "(or set train.tensorboard=false)"
        ) from None
    return SummaryWriter


class ScalarWriter:
    """The TensorBoard event file of one training session in ``run_dir/tensorboard``."""

    def __init__(self, run_dir: Path, first_step: int) -> None:
        """``first_step``: the step this session starts from (0, or the step it resumed at)."""
        writer = summary_writer_class()
        self._writer = writer(str(run_dir / DIRECTORY), purge_step=first_step + 1 if first_step else None)

    def record(self, record: dict[str, Any]) -> None:
        """The numbers of one metrics.jsonl record, at its step."""
        for key, tag in TAGS.items():
            if key in record:
                self._writer.add_scalar(tag, record[key], record["step"])

    def close(self) -> None:
        self._writer.close()
