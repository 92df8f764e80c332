"""The parser class of the ``seq2seq`` command, apart from ``seq2seq.cli.common`` so that building the
command's top level imports nothing heavy."""

import argparse
import sys


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends each option's line with its default, unless the text already says it or there is none
    worth saying (None, off, an empty list): ``--beam`` says "default from the model's config" itself."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        unset = default is None or default is False or default is argparse.SUPPRESS or default == []
        if unset or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``seq2seq: error: …``) and exit 2, like every other error,
    and whose help shows each option's default."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 (argparse's own signature)
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"seq2seq: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)
