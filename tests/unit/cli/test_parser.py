"""The command line explains itself: every option's help shows its default, ``--version`` prints the package's
version, ``--device`` has help, ``export`` takes ``--model`` like every other verb, and ``evaluate`` documents
its one way to compare systems; ``--version``, ``--help``, ``recipes``, ``init`` and a mistyped verb import
no torch, and a mistyped verb is refused naming the verbs. Parser-level: nothing is loaded or trained."""

import argparse
import subprocess
import sys

import pytest
from conftest import REPO, main_error

from seq2seq import __version__
from seq2seq.cli import build_parser, main


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


VERBS = verb_parsers()


def has_default(action: argparse.Action) -> bool:
    default = action.default
    return not (default is None or default is False or default is argparse.SUPPRESS or default == [])


def rendered(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One option's entry in ``--help``, as the parser's own formatter writes it, on one line."""
    formatter = parser._get_formatter()
    formatter.add_argument(action)
    return " ".join(formatter.format_help().split())


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_option_with_a_default_shows_it_and_no_other_does(verb):
    parser = VERBS[verb]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        entry = rendered(parser, action)
        assert action.help, f"{verb} {action.dest} has no help"
        if has_default(action):
            assert "default" in entry, f"seq2seq {verb}: {entry}"
        if has_default(action) and "default" not in action.help:
            assert entry.endswith(f"(default: {action.default})"), entry
    text = parser.format_help()
    for noise in ("default: None", "default: False", "default: []"):
        assert noise not in text, f"seq2seq {verb} --help shows {noise!r}"


def test_defaults_appear_in_the_help_a_user_reads(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "most sentences in one request (default: 64)" in text
    assert "port (default: 8000)" in text  # said by the help text itself: not twice
    assert "(default: 8000) (default" not in text


def test_version_is_the_packages(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"seq2seq {__version__}"
    project = (REPO / "pyproject.toml").read_text(encoding="utf-8")  # the wheel's version is seq2seq.__version__
    assert 'dynamic = ["version"]' in project and 'version = { attr = "seq2seq.__version__" }' in project


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["recipes"], ["init", "--help"], ["tranlsate"]])
def test_commands_without_a_model_do_not_import_torch(args):
    """Only the verb's own module is imported: these need no torch, whose import takes seconds."""
    code = f"import sys; from seq2seq.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
    code += "sys.exit(3 if 'torch' in sys.modules else 0)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).strip()  # it did print its version, its list, its help or its error


def test_the_top_level_help_is_the_same_without_the_verbs_modules():
    """``seq2seq --help`` lists every verb by its summary alone: what the verbs' own parsers say of them."""
    assert build_parser(()).format_help() == build_parser().format_help()


def test_an_unknown_verb_is_refused_naming_the_verbs(capsys):
    error = main_error(capsys, "tranlsate", "你好")
    assert "invalid choice: 'tranlsate'" in error and "translate" in error


def test_every_device_option_has_help():
    devices = {verb: a for verb, p in VERBS.items() for a in p._actions if "--device" in a.option_strings}
    assert {"train", "translate", "evaluate", "score", "serve", "explain"} <= set(devices)
    for verb, action in devices.items():
        assert "cpu" in action.help and "cuda" in action.help, verb


def test_export_takes_model_like_every_verb_and_the_positional_as_an_alias(capsys):
    parse = build_parser().parse_args
    assert parse(["export", "--model", "runs/a", "--out", "o"]).model == "runs/a"
    assert parse(["export", "runs/a", "--out", "o"]).path == "runs/a"
    model_verbs = {verb for verb, p in VERBS.items() for a in p._actions if "--model" in a.option_strings}
    assert {"translate", "evaluate", "score", "serve", "explain", "export"} <= model_verbs
    assert "two models given" in main_error(capsys, "export", "runs/a", "--model", "runs/b", "--out", "o")
    assert "which model?" in main_error(capsys, "export", "--out", "o")


def test_evaluate_documents_its_one_way_to_compare_systems():
    text = " ".join(VERBS["evaluate"].format_help().split())
    assert "Comparing systems has one way: --compare RUN RUN..." in text
    assert "several --hyp files" in text and "the first, the baseline" in text
