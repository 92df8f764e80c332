"""scripts/docs/docs_reference.py: the generated configuration and CLI reference pages cover every key and option.
Run as a script, it prints both pages (the docs build runs it as a MkDocs hook)."""

import argparse
import dataclasses
import subprocess
import sys
import typing

import pytest
import yaml
from conftest import CLI_ENV, REPO

from seq2seq.cli import build_parser
from seq2seq.config import Config, CorpusConfig


@pytest.fixture(scope="module")
def pages() -> tuple[str, str]:
    """(configuration page, CLI page), as the script prints them."""
    done = subprocess.run(
        [sys.executable, "scripts/docs/docs_reference.py"],
        cwd=REPO,
        env=CLI_ENV,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    config, found, cli = done.stdout.partition("# CLI reference")
    assert found
    return config, found + cli


def _rows(page: str) -> dict[str, list[str]]:
    """First cell (the key, backticks stripped) -> the row's cells."""
    rows = {}
    for line in page.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_config_key_is_listed_with_its_default_and_a_meaning(pages):
    rows = _rows(pages[0])
    sections = typing.get_type_hints(Config)
    for section in dataclasses.fields(Config):
        for spec in dataclasses.fields(sections[section.name]):
            key = f"{section.name}.{spec.name}"
            assert key in rows, f"{key} is missing from the configuration reference"
            default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
            shown = yaml.safe_load(rows[key][2].strip("`").replace("\\|", "|"))
            assert shown == (list(default) if isinstance(default, tuple) else default), key
            assert rows[key][4], f"{key} has no comment, in the default recipe or seq2seq/config.py"
    for spec in dataclasses.fields(CorpusConfig):
        assert rows[spec.name][3], f"data.corpora[].{spec.name} has no comment in seq2seq/config.py"


def test_the_recipe_column_shows_the_recipes_values(pages):
    rows = _rows(pages[0])
    assert rows["model.dropout"][2:4] == ["`0.3`", "`0.1`"]  # the code's default beside the recipe's choice
    assert rows["train.adam_betas"][3] == "`[0.9, 0.98]`"
    assert rows["data.corpora"][3] == "`2 entries`"


def test_the_cli_reference_has_every_verb_and_every_option(pages):
    page = pages[1]
    (verbs,) = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    assert len(verbs.choices) >= 8
    for name, verb in verbs.choices.items():
        assert f"## `seq2seq {name}`" in page
        for action in verb._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert option in page, f"seq2seq {name} {option} is missing from the CLI reference"
