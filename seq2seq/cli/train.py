"""``seq2seq train``: train a model, or continue its run directory."""

import argparse
import sys

from seq2seq.cli.common import add_config, add_device
from seq2seq.cli.parser import VERBS
from seq2seq.train.launch import train


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help=VERBS["train"])
    add_config(p)
    add_device(p, default=None)
    p.add_argument("--resume", action="store_true", help="require an existing last.pt to continue from")
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="also write TensorBoard scalars to RUN_DIR/tensorboard/ (train.tensorboard=true)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    overrides = args.set + ([f"train.device={args.device}"] if args.device else [])
    overrides += ["train.tensorboard=true"] if args.tensorboard else []
    try:
        run_dir = train(args.config, overrides, resume=args.resume)
    except KeyboardInterrupt:
        sys.exit(130)
    if run_dir is not None:  # rank 0
        print(f'done: best model in {run_dir / "best.pt"}; try: seq2seq translate --model {run_dir} "今天天气很好"')
