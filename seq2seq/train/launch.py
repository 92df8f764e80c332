"""One training run as ``seq2seq train`` and ``seq2seq.train()`` both start it: the config, the torchrun
world, the run directory's lock on rank 0, the trainer.

The command line and the Python API differ only in how the config arrives (a file and ``--set``, or
a path, a ``Config`` and overrides as a list or a mapping) and in what they do with the result; the
run itself is started here, once.
"""

import sys
from contextlib import nullcontext
from pathlib import Path

from seq2seq.config import Config, Overrides, config_from_dict, load_config, override_texts
from seq2seq.errors import UserError
from seq2seq.train.distributed import join_world
from seq2seq.train.runlock import RunLock
from seq2seq.train.trainer import Trainer


def resolve_config(config: str | Path | Config, overrides: Overrides = ()) -> Config:
    """A YAML file's config or a ``Config``, with ``overrides`` applied and the whole checked again."""
    texts = override_texts(overrides)
    if isinstance(config, Config):
        return config_from_dict(config.to_dict(), "the Config given", texts)
    return load_config(config, texts)


def train_run(cfg: Config, resume: bool = False, quiet: bool = False) -> Path | None:
    """Train ``cfg`` (continuing its run directory when it has a last.pt; ``resume``: it must) and return the
    run directory; None on the ranks other than 0 of a torchrun job, which write nothing.

    Ctrl-C or SIGTERM saves last.pt and raises KeyboardInterrupt (``Trainer.fit``).
    """
    run_dir = Path(cfg.train.run_dir)
    with join_world(cfg.train.device, cfg.train.collective_timeout_minutes) as world:  # torchrun: one rank of many
        if resume and world.main and not (run_dir / "last.pt").is_file():
            raise UserError(f"--resume: no {run_dir / 'last.pt'} to resume from")
        with RunLock(run_dir) if world.main else nullcontext() as lock:  # rank 0 writes the run
            if lock is not None and lock.stale_pid:
                print(f"note: taking over the run directory from pid {lock.stale_pid}, which died", file=sys.stderr)
            trained = Trainer(cfg, world=world).fit(quiet)
        return trained if world.main else None


def train(
    config: str | Path | Config, overrides: Overrides = (), *, resume: bool = False, quiet: bool = False
) -> Path | None:
    """``seq2seq train``: the run of a config file or ``Config`` with ``overrides`` (``["train.lr=3e-4"]`` or
    ``{"train.lr": 3e-4}``), as ``train_run`` trains it."""
    return train_run(resolve_config(config, overrides), resume, quiet)
