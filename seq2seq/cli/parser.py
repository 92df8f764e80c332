"""What the ``seq2seq`` command's top level is built from, apart from ``seq2seq.cli.common`` so that it
imports nothing heavy: the parser class and ``VERBS``, each verb's one-line summary."""

import argparse
import sys

VERBS = {
    "recipes": "list the packaged recipes (train --config NAME; init --recipe NAME writes one for your own data)",
    "init": "write a commented config for your own data: seq2seq init --src F --tgt F > my.yaml",
    "fetch": "fetch a corpus the recipes train on into data/ (tatoeba, tatoeba-full, hsk; --lexicon cedict)",
    "train": "train a model (continues an existing run directory)",
    "prepare": "run the data pipeline only and print its report",
    "translate": "translate sentences (arguments, stdin or -i FILE)",
    "score": "forced decoding: the log-probability of each reference given its source",
    "evaluate": "score translations with BLEU/chrF (default: the run's test split)",
    "export": "convert a trained model for another inference engine (CTranslate2, transformers' MarianMT)",
    "serve": "serve a model over HTTP: JSON API and an attention explorer page",
    "explain": "show what the model does with one sentence, idea by idea (an HTML page)",
}
"""Each verb (module ``seq2seq.cli.<verb>``) and the line ``seq2seq --help`` lists it with, in that order."""


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
