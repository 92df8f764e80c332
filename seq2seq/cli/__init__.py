"""The ``seq2seq`` command: one module per verb (``add_parser`` declares its options, ``run`` wires the
packages together), ``seq2seq.cli.common`` for what several verbs share, ``seq2seq.cli.output`` for what
they print. Every error reaches the user as one line and exit status 2."""

import argparse
import sys

from seq2seq import __version__
from seq2seq.cli import evaluate, explain, export, fetch, init, prepare, recipes, score, serve, train, translate
from seq2seq.cli.common import Parser
from seq2seq.errors import UserError

VERBS = (recipes, init, fetch, train, prepare, translate, score, evaluate, export, serve, explain)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="seq2seq",
        description="Train and run encoder-decoder Transformers for translation.",
    )
    parser.add_argument("--version", action="version", version=f"seq2seq {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for verb in VERBS:
        verb.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except UserError as err:
        print(f"seq2seq: error: {err}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as err:  # the machine, not the input: a full disk, a read-only or vanished file or directory
        where = f"{err.filename}: " if err.filename else ""
        print(f"seq2seq: error: {where}{err.strerror or err}", file=sys.stderr)
        sys.exit(2)
