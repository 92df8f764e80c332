"""``seq2seq recipes``: the packaged recipes, each with the first line of its notes."""

import argparse

from seq2seq.cli.parser import VERBS
from seq2seq.recipe import DEFAULT_RECIPE, recipe_names, recipe_summary


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "recipes",
        help=VERBS["recipes"],
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    names = recipe_names()
    width = max(map(len, names))
    for name in names:
        mark = " (default)" if name == DEFAULT_RECIPE else ""
        print(f"{name.ljust(width)}  {recipe_summary(name)}{mark}")
