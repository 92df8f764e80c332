"""``seq2seq recipes`` and ``seq2seq init``, in this process: what they print and their one-line errors."""

import pytest
import yaml
from conftest import TOY_SRC, TOY_TGT, main_error, write_lines

from seq2seq.cli import main
from seq2seq.config import config_from_dict, load_config
from seq2seq.recipe import recipe_names, recipe_summary


def test_recipes_lists_each_with_its_first_line(capsys):
    main(["recipes"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == recipe_names()
    for name, line in zip(recipe_names(), lines, strict=True):
        assert recipe_summary(name) in line
    assert [line for line in lines if line.endswith("(default)")] == [lines[recipe_names().index("zh-en")]]


def test_init_writes_a_config_train_accepts(capsys):
    main(["init", "--recipe", "toy", "--src", str(TOY_SRC), "--tgt", str(TOY_TGT)])
    text = capsys.readouterr().out
    cfg = config_from_dict(yaml.safe_load(text), "init")
    assert (cfg.data.src, cfg.data.tgt) == (str(TOY_SRC), str(TOY_TGT))
    assert cfg.model == load_config("toy").model and text.startswith("# The toy recipe for --src ")


def test_init_without_files_is_the_default_recipe_to_edit(capsys):
    main(["init"])
    assert config_from_dict(yaml.safe_load(capsys.readouterr().out), "init") == load_config("zh-en")


@pytest.mark.parametrize(
    "args, says",
    [
        (["--src", "nope.zh", "--tgt", str(TOY_TGT)], "--src nope.zh: file not found"),
        (["--src", str(TOY_SRC)], "--src and --tgt go together"),
        (["--tsv", str(TOY_SRC), "--src", str(TOY_SRC), "--tgt", str(TOY_TGT)], "not both"),
        (["--recipe", "zh-fr"], "invalid choice: 'zh-fr'"),
    ],
)
def test_init_errors_are_one_line(capsys, args, says):
    assert says in main_error(capsys, "init", *args)


def test_train_with_an_unknown_config_lists_the_recipes(capsys):
    line = main_error(capsys, "train", "--config", "zh-en-big")
    assert "config zh-en-big not found" in line and ", ".join(recipe_names()) in line


def test_init_guesses_the_languages_of_a_corpus_it_was_not_written_for(tmp_path, capsys):
    german = ["Ich habe heute keine Zeit.", "Wo ist der Bahnhof?", "Das Wetter ist schön.", "Wir gehen ins Kino."]
    english = ["I have no time today.", "Where is the station?", "The weather is nice.", "We go to the cinema."]
    src, tgt = write_lines(tmp_path / "my.de", german * 5), write_lines(tmp_path / "my.en", english * 5)
    main(["init", "--src", str(src), "--tgt", str(tgt)])
    data = yaml.safe_load(capsys.readouterr().out)["data"]
    assert (data["src_lang"], data["tgt_lang"]) == ("de", "en")
