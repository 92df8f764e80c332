"""``seq2seq init``: a recipe as a commented config for the user's own corpus, on stdout."""

import argparse
import itertools
import sys
from pathlib import Path

import yaml

from seq2seq.cli.parser import VERBS
from seq2seq.config import DataConfig, config_from_dict
from seq2seq.errors import UserError
from seq2seq.recipe import DEFAULT_RECIPE, config_for, recipe_names
from seq2seq.text.language import guess_language


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help=VERBS["init"],
        description="Print a recipe as a config for your own corpus: its data files replaced by --src/--tgt "
        "(or --tsv), every other setting and comment kept. Without files: the recipe itself, to edit.",
    )
    p.add_argument("--recipe", default=DEFAULT_RECIPE, choices=recipe_names(), help="the recipe to start from")
    p.add_argument("--src", help="source side of your corpus, one sentence per line")
    p.add_argument("--tgt", help="target side, line-aligned with --src")
    p.add_argument("--tsv", help="instead of --src/--tgt: one TSV file with both sides (see data.src_column)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if args.tsv and (args.src or args.tgt):
        raise UserError("init: give --src and --tgt, or --tsv, not both")
    if bool(args.src) != bool(args.tgt):
        raise UserError("init: --src and --tgt go together (or give one --tsv)")
    for flag in ("src", "tgt", "tsv"):
        path = getattr(args, flag)
        if path and not Path(path).is_file():
            raise UserError(f"--{flag} {path}: file not found")
    text = config_for(args.recipe, args.src, args.tgt, args.tsv)
    if args.src or args.tsv:
        data = config_from_dict(yaml.safe_load(text), "seq2seq init").data
        text = config_for(args.recipe, args.src, args.tgt, args.tsv, _languages(data))
    config_from_dict(yaml.safe_load(text), "seq2seq init")  # what init writes, train accepts
    sys.stdout.write(text)


def _languages(data: DataConfig) -> tuple[str | None, str | None]:
    """The languages of the corpus's two sides, guessed from its first lines (None where no guess is sure)."""
    if data.tsv:
        rows = [line.split("\t") for line in _first_lines(data.tsv)]
        columns = (data.src_column, data.tgt_column)
        src, tgt = ([row[c] for row in rows if len(row) > c] for c in columns)
    else:
        src, tgt = _first_lines(data.src), _first_lines(data.tgt)
    return guess_language(src), guess_language(tgt)


def _first_lines(path: str, most: int = 500) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return [line.strip() for line in itertools.islice(handle, most)]
