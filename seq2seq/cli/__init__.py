"""The ``seq2seq`` command: one module per verb (``add_parser`` declares its options, ``run`` wires the
packages together), ``seq2seq.cli.common`` for what several verbs share, ``seq2seq.cli.output`` for what
they print. Every error reaches the user as one line and exit status 2.

A command imports only its own verb's module: most verbs need torch, whose import takes seconds, and
``seq2seq recipes``, ``seq2seq init``, ``seq2seq --version`` and ``seq2seq --help`` need none of it. The
top level lists the other verbs by their summaries (``VERBS``), which is all ``--help`` and a mistyped
verb show; the docs build the whole parser.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence

from seq2seq import __version__
from seq2seq.cli.parser import VERBS, Parser
from seq2seq.errors import UserError


def build_parser(verbs: Sequence[str] = tuple(VERBS)) -> argparse.ArgumentParser:
    """The ``seq2seq`` parser, with the options of the subcommands ``verbs`` (each from its module
    ``seq2seq.cli.<verb>``) and every other verb by its summary alone."""
    parser = Parser(
        prog="seq2seq",
        description="Train and run encoder-decoder Transformers for translation.",
    )
    parser.add_argument("--version", action="version", version=f"seq2seq {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for verb, summary in VERBS.items():
        if verb in verbs:
            importlib.import_module(f"seq2seq.cli.{verb}").add_parser(sub)
        else:
            sub.add_parser(verb, help=summary)
    return parser


def _verbs_for(argv: Sequence[str]) -> Sequence[str]:
    """The verbs whose modules ``argv`` needs: its verb alone, else none (``--version``, ``--help``, a typo)."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return (first,) if first in VERBS else ()


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
