"""The docs site's two generated pages: the configuration reference and the CLI reference.

A MkDocs hook (``hooks:`` in mkdocs.yml): at every build, ``on_files`` adds ``reference/config.md``,
made from the config dataclasses of ``seq2seq.config``, and ``reference/cli.md``, made from the
parser of ``seq2seq.cli``. Built from the code at each build, not committed, so there is no copy to
forget to regenerate: a new key or option is on the site the next time it is built, and the verbs
other branches add merge without a generated file to reconcile. Run as a script it prints both.

A key's text is its comment in the recipe (``RECIPE``, where every key is documented for users),
else the comment beside its field in seq2seq/config.py; the page shows the code's default beside the
recipe's value.
"""

import argparse
import contextlib
import dataclasses
import html
import inspect
import os
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # document this checkout's code, whatever else is installed
    sys.path.insert(0, str(REPO))

from seq2seq.cli import build_parser  # noqa: E402  (after the path above)
from seq2seq.config import Config, CorpusConfig, DataConfig  # noqa: E402
from seq2seq.recipe import DEFAULT_RECIPE, recipe_path  # noqa: E402

RECIPE = recipe_path(DEFAULT_RECIPE)
CONFIG_PAGE = "reference/config.md"
CLI_PAGE = "reference/cli.md"
HELP_COLUMNS = "100"  # argparse wraps help to the terminal; the page is the same on every machine
_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?P<value>[^#]*?)(\s+#\s?(?P<comment>.*))?$")
_COMMENT_LINE = re.compile(r"^\s+#\s*(?P<comment>.*)$")
_FIELD_COMMENT = re.compile(r"^\s+(?P<name>[a-z_][a-z0-9_]*)\s*:[^#]*#\s?(?P<comment>.*)$")


def recipe_comments(text: str) -> dict[str, str]:
    """``section.key`` -> its comment in a commented config, continuation lines joined.

    Keys of list entries (``data.corpora``'s) are left out: they describe one corpus, not the key.
    """
    comments: dict[str, str] = {}
    section, last = None, None
    for line in text.splitlines():
        key_line = _KEY_LINE.match(line)
        if key_line:
            depth = len(key_line["indent"])
            if depth == 0:
                section, last = key_line["key"], None
            elif depth == 2 and section is not None:
                last = f"{section}.{key_line['key']}"
                comments[last] = (key_line["comment"] or "").strip()
            else:
                last = None
            continue
        continuation = _COMMENT_LINE.match(line)
        if continuation and last is not None:
            comments[last] = f"{comments[last]} {continuation['comment'].strip()}".strip()
        elif line.strip().startswith("-"):
            last = None
    return comments


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment beside it in the dataclass's source."""
    found = {}
    for line in inspect.getsource(cls).splitlines():
        match = _FIELD_COMMENT.match(line)
        if match:
            found[match["name"]] = match["comment"].strip()
    return found


def type_name(tp: Any) -> str:
    """An annotation as a reader writes it: ``int``, ``str | null``, ``relu | gelu | silu``, ``list``."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(str(arg) for arg in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join("null" if arg is type(None) else type_name(arg) for arg in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"list of {type_name(args[0])}"
        return "[" + ", ".join(type_name(arg) for arg in args) + "]"
    if dataclasses.is_dataclass(tp):
        return tp.__name__
    return getattr(tp, "__name__", str(tp))


def yaml_value(value: Any) -> str:
    """A value as it is written in a config file."""
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return f"{len(value)} entries"
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _default(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    return spec.default_factory()  # type: ignore[misc]


def _cell(text: str) -> str:
    """Table-cell text: a pipe would end the cell, and ``<start>`` would be read as an HTML tag."""
    if text.startswith("`"):
        return text.replace("|", "\\|")
    return html.escape(text, quote=False).replace("|", "\\|")


def config_page(recipe_text: str) -> str:
    """Markdown: one table per config section, every field with its type, default, recipe value and text."""
    comments = recipe_comments(recipe_text)
    recipe = yaml.safe_load(recipe_text) or {}
    lines = [
        "# Configuration reference",
        "",
        "Every key of a config file, by section: its type, the code's default, the value in the default",
        f"recipe (`{RECIPE.relative_to(REPO)}`) and what it does. `--set SECTION.KEY=VALUE` overrides one key",
        "for one command. Generated from `seq2seq/config.py` and the recipe's comments when the site is built.",
        "",
    ]
    sections = typing.get_type_hints(Config)
    for section in dataclasses.fields(Config):
        cls = sections[section.name]
        hints = typing.get_type_hints(cls)
        own = field_comments(cls)
        lines += [f"## `{section.name}`", "", (inspect.getdoc(cls) or "").split("\n")[0], ""]
        lines += ["| key | type | default | recipe | meaning |", "|---|---|---|---|---|"]
        for spec in dataclasses.fields(cls):
            key = f"{section.name}.{spec.name}"
            in_recipe = recipe.get(section.name, {}) or {}
            shown = f"`{yaml_value(in_recipe[spec.name])}`" if spec.name in in_recipe else "–"
            text = comments.get(key) or own.get(spec.name, "")
            row = [f"`{key}`", type_name(hints[spec.name]), f"`{yaml_value(_default(spec))}`", shown, text]
            lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
        lines.append("")
    lines += corpus_section(comments)
    return "\n".join(lines)


def corpus_section(comments: dict[str, str]) -> list[str]:
    """The keys of one ``data.corpora`` entry; a key it shares with ``data`` (``src_column``) has that text."""
    hints = typing.get_type_hints(CorpusConfig)
    own = field_comments(CorpusConfig)
    shared = field_comments(DataConfig)
    lines = [
        "## `data.corpora` entries",
        "",
        (inspect.getdoc(CorpusConfig) or "").split("\n")[0],
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for spec in dataclasses.fields(CorpusConfig):
        text = own.get(spec.name) or comments.get(f"data.{spec.name}") or shared.get(spec.name, "")
        row = [f"`{spec.name}`", type_name(hints[spec.name]), f"`{yaml_value(_default(spec))}`", text]
        lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
    return [*lines, ""]


@contextlib.contextmanager
def _help_width() -> Iterator[None]:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Verb name -> its parser, in the order ``seq2seq --help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_page() -> str:
    """Markdown: ``seq2seq --help``, then every verb's ``--help``."""
    parser = build_parser()
    lines = [
        "# CLI reference",
        "",
        "What `seq2seq --help` and `seq2seq VERB --help` print, for every verb. Generated from the parser",
        "(`seq2seq/cli/`) when the site is built.",
        "",
    ]
    with _help_width():
        lines += ["## `seq2seq`", "", "```text", parser.format_help().rstrip(), "```", ""]
        for name, verb in verbs(parser).items():
            lines += [f"## `seq2seq {name}`", "", "```text", verb.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def on_files(files: Any, config: Any) -> Any:
    """MkDocs event: add the two generated pages to the site's files."""
    from mkdocs.structure.files import File

    recipe_text = RECIPE.read_text(encoding="utf-8")
    files.append(File.generated(config, CONFIG_PAGE, content=config_page(recipe_text)))
    files.append(File.generated(config, CLI_PAGE, content=cli_page()))
    return files


if __name__ == "__main__":
    print(config_page(RECIPE.read_text(encoding="utf-8")))
    print(cli_page())
