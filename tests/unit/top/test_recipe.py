"""The packaged recipes: found by name or path, summarized, and turned into a config for the user's own files."""

import dataclasses
import re

import pytest
import yaml
from conftest import REPO

from seq2seq.config import config_from_dict, load_config
from seq2seq.errors import UserError
from seq2seq.recipe import RECIPES, config_for, find_config, recipe_names, recipe_summary

# An entry that init replaces: its key line, or a deeper line (a list item or a continuation comment) under it.
REPLACED = re.compile(r"  (src|tgt|tsv|corpora):|    ")


def test_the_recipes_are_the_yaml_files_in_the_package():
    assert RECIPES == REPO / "seq2seq" / "recipes"
    assert recipe_names() == sorted(p.stem for p in RECIPES.glob("*.yaml"))
    assert {"zh-en", "toy", "en-zh"} <= set(recipe_names())


def test_a_name_finds_the_recipe_and_a_file_wins_over_it(tmp_path, monkeypatch):
    assert find_config("zh-en") == RECIPES / "zh-en.yaml"
    assert load_config("toy") == load_config(RECIPES / "toy.yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "zh-en").write_text((RECIPES / "toy.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert find_config("zh-en").resolve() == tmp_path / "zh-en"  # the user's own file of that name, not the package's


@pytest.mark.parametrize(
    "config, hint", [("zh-en-big", "zh-en"), ("configs/zh-en-24k.yaml", "zh-en-24k"), ("fr-de.yaml", None)]
)
def test_neither_a_file_nor_a_recipe_is_one_line_listing_the_recipes(config, hint):
    with pytest.raises(UserError) as err:
        load_config(config)
    message = str(err.value)
    assert "\n" not in message and config in message and "not found" in message
    assert ", ".join(recipe_names()) in message
    assert (f"(did you mean {hint}?)" in message) if hint else "did you mean" not in message


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_says_what_it_is_on_its_first_line(name):
    summary = recipe_summary(name)
    first = (RECIPES / f"{name}.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# {summary}" and len(summary) > 20 and summary.endswith(".")


@pytest.mark.parametrize("name", recipe_names())
def test_init_puts_the_users_files_in_and_keeps_every_other_key_and_comment(name):
    recipe_text = (RECIPES / f"{name}.yaml").read_text(encoding="utf-8")
    text = config_for(name, src="corpus/my.zh", tgt="corpus/my.en")
    recipe = load_config(name)
    expected = dataclasses.replace(
        recipe, data=dataclasses.replace(recipe.data, src="corpus/my.zh", tgt="corpus/my.en", tsv=None, corpora=())
    )
    assert config_from_dict(yaml.safe_load(text), "init") == expected
    lines = text.splitlines()
    missing = [line for line in recipe_text.splitlines() if line not in lines]
    assert all(REPLACED.match(line) for line in missing), missing  # only the data files and corpora went
    assert lines.index(recipe_text.splitlines()[0]) > 0  # the recipe's notes follow init's header


def test_init_with_a_tsv_and_without_files():
    cfg = config_from_dict(yaml.safe_load(config_for("zh-en", tsv="pairs.tsv")), "init")
    assert (cfg.data.tsv, cfg.data.src, cfg.data.tgt, cfg.data.corpora) == ("pairs.tsv", None, None, ())
    assert (cfg.data.src_column, cfg.data.tgt_column) == (1, 0)  # the recipe's columns, explained in its comments
    plain = config_for("zh-en")
    assert plain.endswith((RECIPES / "zh-en.yaml").read_text(encoding="utf-8"))
    assert config_from_dict(yaml.safe_load(plain), "init") == load_config("zh-en")


@pytest.mark.parametrize("path", ["my file.zh", "a #b.zh", "yes", "null", "[x].zh", "'q'.zh", "路径/语料.zh", " lead"])
def test_any_file_name_reads_back_as_itself(path):
    data = yaml.safe_load(config_for("toy", src=path, tgt="b.en"))["data"]
    assert (data["src"], data["tgt"]) == (path, "b.en")


def test_an_unknown_recipe_is_one_line():
    with pytest.raises(UserError, match=r"no recipe named 'zh-fr'; the recipes are en-zh, toy"):
        config_for("zh-fr")
