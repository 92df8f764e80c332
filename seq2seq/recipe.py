"""The recipes: the YAML configs shipped inside the package (``seq2seq/recipes/*.yaml``), so that an installed
``seq2seq`` trains without a checkout of the repository.

``--config`` takes a file or a recipe's name: ``--config zh-en`` is ``zh-en.yaml`` here, ``--config my.yaml``
the user's file. A file that exists wins over a recipe of the same name, so a user's own file named ``zh-en``
is never shadowed by the package. ``config_for`` turns a recipe into a config for the user's own corpus as
text, not through a YAML round trip: the recipe's comments are its documentation and are kept.
"""

import difflib
import json
from pathlib import Path

import yaml

from seq2seq.errors import UserError

RECIPES = Path(__file__).resolve().parent / "recipes"
DEFAULT_RECIPE = "zh-en"
COMMENT_COLUMN = 28  # where the recipes' comments start, so a replaced key lines up with the rest


def recipe_names() -> list[str]:
    """The recipes' names, sorted."""
    return sorted(path.stem for path in RECIPES.glob("*.yaml"))


def recipe_path(name: str) -> Path:
    """The file of the recipe ``name``; an unknown name is a one-line error listing the recipes."""
    if name not in recipe_names():
        raise UserError(f"no recipe named {name!r}; the recipes are {', '.join(recipe_names())} (seq2seq recipes)")
    return RECIPES / f"{name}.yaml"


def find_config(config: str | Path) -> Path:
    """The YAML file that ``--config`` names: an existing file, else the recipe of that name."""
    path = Path(config)
    if path.is_file():
        return path
    if str(config) in recipe_names():
        return RECIPES / f"{config}.yaml"
    close = difflib.get_close_matches(path.stem, recipe_names(), n=1)  # configs/zh-en.yaml of old: zh-en
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UserError(
        f"config {config} not found: no such file and no recipe of that name{hint}; "
        f"the recipes are {', '.join(recipe_names())} (seq2seq recipes)"
    )


def recipe_summary(name: str) -> str:
    """What the recipe is: the text of its first comment line."""
    for line in recipe_path(name).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def _yaml_scalar(text: str) -> str:
    """``text`` as a YAML value: bare where YAML reads it back unchanged, else double-quoted (JSON is YAML)."""
    try:
        plain = yaml.safe_load(f"key: {text}") == {"key": text}
    except yaml.YAMLError:
        plain = False
    return text if plain and text.strip() == text else json.dumps(text, ensure_ascii=False)


def _file_value(path: str | None) -> str:
    return "null" if path is None else _yaml_scalar(path)


def _entry(key: str, value: str, comment: str) -> str:
    """One key of the data section (``value`` as YAML text), its comment at the recipes' column."""
    line = f"  {key}: {value}"
    return f"{line.ljust(COMMENT_COLUMN - 1)} # {comment}" if len(line) < COMMENT_COLUMN - 1 else f"{line}  # {comment}"


def _section(lines: list[str], name: str) -> tuple[int, int]:
    """The first and one-past-last line of a top-level section (``name:`` up to the next top-level key)."""
    start = lines.index(f"{name}:")
    end = start + 1
    while end < len(lines) and not (lines[end][:1].strip() and not lines[end].startswith("#")):
        end += 1
    return start, end


def _without_keys(body: list[str], keys: set[str]) -> tuple[list[str], int | None]:
    """The section's lines without the entries of ``keys`` (a key's line and its deeper-indented or comment
    continuation lines), and where the first of them stood (None: none of them was there)."""
    kept, first, dropping = [], None, False
    for line in body:
        key = line[2:].split(":", 1)[0] if line.startswith("  ") and line[2:3].strip() and ":" in line else None
        if key is not None:
            dropping = key in keys
            if dropping and first is None:
                first = len(kept)
        if not dropping:
            kept.append(line)
    return kept, first


def config_for(
    recipe: str,
    src: str | None = None,
    tgt: str | None = None,
    tsv: str | None = None,
    languages: tuple[str | None, str | None] | None = None,
) -> str:
    """The recipe as YAML text for the user's corpus: ``src`` and ``tgt`` (or one ``tsv``) replace the recipe's
    data files and corpora, ``languages`` (source, target codes; None: unknown) its ``src_lang`` and
    ``tgt_lang``, every other key and every comment stays; with no files, the recipe itself."""
    text = recipe_path(recipe).read_text(encoding="utf-8")
    given = " ".join(f"--{flag} {value}" for flag, value in (("src", src), ("tgt", tgt), ("tsv", tsv)) if value)
    header = [
        f"# The {recipe} recipe{' for ' + given if given else ''} (written by seq2seq init; seq2seq recipes lists "
        "the others).",
        "# Train: seq2seq train --config THIS_FILE; any key can be overridden there with --set section.key=value.",
        "# Data paths are relative to the directory seq2seq runs in. The recipe's own notes follow.",
    ]
    if not given:
        return "\n".join(header) + "\n" + text
    lines = text.splitlines()
    start, end = _section(lines, "data")
    body, at = _without_keys(lines[start + 1 : end], {"corpora"})
    if at is not None:
        no_corpora = "several corpora mixed by weight instead of one (seq2seq init --recipe zh-en shows how)"
        body[at:at] = [_entry("corpora", "[]", no_corpora)]
    body, at = _without_keys(body, {"src", "tgt", "tsv"})
    at = 0 if at is None else at
    body[at:at] = [
        _entry("src", _file_value(src), "source side, one sentence per line"),
        _entry("tgt", _file_value(tgt), "target side, line-aligned with src"),
        _entry("tsv", _file_value(tsv), "alternatively one TSV file with both sides (src_column, tgt_column)"),
    ]
    if languages is not None:
        body, at = _without_keys(body, {"src_lang", "tgt_lang"})
        at = len(body) if at is None else at
        guessed = "guessed from the corpus by seq2seq init; null = unknown: set it (en, zh, de, ...)"
        body[at:at] = [
            _entry("src_lang", _file_value(languages[0]), f"source language, {guessed}"),
            _entry("tgt_lang", _file_value(languages[1]), f"target language, {guessed}"),
        ]
    return "\n".join(header + lines[: start + 1] + body + lines[end:]) + "\n"
