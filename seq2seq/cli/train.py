"""``seq2seq train``: train a model, or continue its run directory."""

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

from seq2seq.cli.common import add_config, add_device
from seq2seq.config import load_config
from seq2seq.errors import UserError
from seq2seq.train.distributed import join_world
from seq2seq.train.runlock import RunLock
from seq2seq.train.trainer import Trainer


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model (continues an existing run directory)")
    add_config(p)
    add_device(p, default=None)
    p.add_argument("--resume", action="store_true", help="require an existing last.pt to continue from")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    cfg = load_config(args.config, args.set + ([f"train.device={args.device}"] if args.device else []))
    with join_world(cfg.train.device, cfg.train.collective_timeout_minutes) as world:  # torchrun: one rank of many
        if args.resume and world.main and not (Path(cfg.train.run_dir) / "last.pt").is_file():
            raise UserError(f"--resume: no {Path(cfg.train.run_dir) / 'last.pt'} to resume from")
        try:
            with RunLock(Path(cfg.train.run_dir)) if world.main else nullcontext() as lock:  # rank 0 writes the run
                if lock is not None and lock.stale_pid:
                    print(f"note: taking over the run directory from pid {lock.stale_pid}, which died", file=sys.stderr)
                run_dir = Trainer(cfg, world=world).fit()
        except KeyboardInterrupt:
            sys.exit(130)
    if world.main:
        print(f'done: best model in {run_dir / "best.pt"}; try: seq2seq translate --model {run_dir} "今天天气很好"')
