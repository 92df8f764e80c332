"""scripts/docs_reference.py: the generated configuration and CLI reference pages cover every key and option."""

import argparse
import dataclasses
import typing

from conftest import REPO
from docs_reference import RECIPE, cli_page, config_page, recipe_comments, verbs, yaml_value

from seq2seq.cli import build_parser
from seq2seq.config import Config, CorpusConfig


def _rows(page: str) -> dict[str, list[str]]:
    """First cell (the key, backticks stripped) -> the row's cells."""
    rows = {}
    for line in page.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_config_key_is_listed_with_its_default_and_a_meaning():
    rows = _rows(config_page(RECIPE.read_text(encoding="utf-8")))
    sections = typing.get_type_hints(Config)
    for section in dataclasses.fields(Config):
        for spec in dataclasses.fields(sections[section.name]):
            key = f"{section.name}.{spec.name}"
            assert key in rows, f"{key} is missing from the configuration reference"
            default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
            assert rows[key][2] == f"`{yaml_value(default)}`".replace("|", "\\|"), key
            assert rows[key][4], f"{key} has no comment, in {RECIPE.relative_to(REPO)} or seq2seq/config.py"
    for spec in dataclasses.fields(CorpusConfig):
        assert rows[spec.name][3], f"data.corpora[].{spec.name} has no comment in seq2seq/config.py"


def test_the_recipe_column_shows_the_recipes_values():
    rows = _rows(config_page(RECIPE.read_text(encoding="utf-8")))
    assert rows["model.dropout"][2:4] == ["`0.3`", "`0.2`"]  # the code's default beside the recipe's choice
    assert rows["train.adam_betas"][3] == "`[0.9, 0.98]`"
    assert rows["data.corpora"][3] == "`2 entries`"


def test_recipe_comments_join_continuations_and_skip_list_entries():
    text = (
        "model:\n"
        "  width: 4      # first part\n"
        "                #   second part\n"
        "data:\n"
        "  corpora:      # several corpora\n"
        "    - name: a   # one corpus\n"
        "      weight: 1 # its weight\n"
        "                #   not the key's text\n"
        "  other: x\n"
    )
    assert recipe_comments(text) == {
        "model.width": "first part second part",
        "data.corpora": "several corpora",
        "data.other": "",
    }


def test_the_cli_reference_has_every_verb_and_every_option():
    page = cli_page()
    parser = build_parser()
    names = verbs(parser)
    assert len(names) >= 8
    for name, verb in names.items():
        assert f"## `seq2seq {name}`" in page
        for action in verb._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert option in page, f"seq2seq {name} {option} is missing from the CLI reference"
