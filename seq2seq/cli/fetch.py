"""``seq2seq fetch``: download or copy a corpus (or the CC-CEDICT lexicon) into ``data/`` for the recipes."""

import argparse

from seq2seq.cli.parser import VERBS
from seq2seq.data.fetch import CORPUS_OUT, FetchError, add_arguments
from seq2seq.data.fetch import run as fetch
from seq2seq.errors import UserError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch",
        help=VERBS["fetch"],
        description="Fetch a training corpus into data/ of this directory, where the recipes look for it: "
        "a local copy (--local, or its environment variable), else its download, checked and renamed into place.",
    )
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    try:
        fetch(args)
    except FetchError as err:
        raise UserError(" ".join(str(err).split())) from None
    except OSError as err:  # the disk: name the file, else the output directory
        where = err.filename or args.out or CORPUS_OUT[args.corpus]
        raise UserError(f"{where}: {err.strerror or err}; check the path, free space and permissions") from None
