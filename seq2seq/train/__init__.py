"""Training: the loop and its update, the fused loss, precision, validation, checkpoints of a run,
distributed ranks, signals, the run lock, the run log and its TensorBoard curves, warm starts, and the
start of a run (``launch``).

May import: the top-level modules, ``seq2seq.model.transformer``, ``seq2seq.data``, ``seq2seq.interop`` (warm
starts from MarianMT), ``seq2seq.decode`` (validation decodes the dev split), ``seq2seq.evaluate.metrics`` (its BLEU
and chrF).

The package is also the Python API's ``seq2seq.train(config, overrides)``: the name ``seq2seq.train``
can hold one object, and importing any module of this package binds the package to it, so the
package itself is callable (its module class has ``__call__``) and runs ``launch.train``.
"""

import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seq2seq.config import Config, Overrides


class _CallablePackage(types.ModuleType):
    def __call__(
        self, config: "str | Path | Config", overrides: "Overrides" = (), *, resume: bool = False, quiet: bool = False
    ) -> Path | None:
        """Train the run of ``config`` (a YAML file or a ``Config``) with ``overrides`` (``["train.lr=3e-4"]`` or
        ``{"train.lr": 3e-4}``) as ``seq2seq train`` does; the run directory (None on torchrun's other ranks)."""
        from seq2seq.train.launch import train  # here: the loop's modules import this package first

        return train(config, overrides, resume=resume, quiet=quiet)


sys.modules[__name__].__class__ = _CallablePackage
