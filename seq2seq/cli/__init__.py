"""The ``seq2seq`` command: one module per verb (``add_parser`` declares its options, ``run`` wires the
packages together), ``seq2seq.cli.common`` for what several verbs share, ``seq2seq.cli.output`` for what
they print. Every error reaches the user as one line and exit status 2.

A command imports only its own verb's module: most verbs need torch, whose import takes seconds, and
``seq2seq recipes``, ``seq2seq init`` and ``seq2seq --version`` need none of it. The whole parser (every
verb) is built for ``--help``, for a verb it does not know, and for the docs.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence

from seq2seq import __version__
from seq2seq.cli.parser import Parser
from seq2seq.errors import UserError

VERBS = ("recipes", "init", "fetch", "train", "prepare", "translate", "score", "evaluate", "export", "serve", "explain")


def build_parser(verbs: Sequence[str] = VERBS) -> argparse.ArgumentParser:
    """The ``seq2seq`` parser with the subcommands ``verbs`` (each module ``seq2seq.cli.<verb>``)."""
    parser = Parser(
        prog="seq2seq",
        description="Train and run encoder-decoder Transformers for translation.",
    )
    parser.add_argument("--version", action="version", version=f"seq2seq {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for verb in verbs:
        importlib.import_module(f"seq2seq.cli.{verb}").add_parser(sub)
    return parser


def _verbs_for(argv: Sequence[str]) -> Sequence[str]:
    """The verbs whose modules ``argv`` needs: its verb alone, none for ``--version``, else all."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    if first in VERBS:
        return (first,)
    return () if list(argv) == ["--version"] else VERBS


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(_verbs_for(argv)).parse_args(argv)
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
