"""The Python API (seq2seq/api.py) on the shared toy run: ``seq2seq.load(...).translate`` gives what
``seq2seq translate`` prints, ``.score`` what ``seq2seq score`` prints, and ``seq2seq.train`` trains a run
directory as ``seq2seq train`` does; bad input is a one-line ``UserError``. The verbs run as
``seq2seq.cli.main`` in this process."""

import pytest
from conftest import REPO, TOY, write_lines

import seq2seq
from seq2seq.checkpoint import load_checkpoint
from seq2seq.cli import main
from seq2seq.config import load_config
from seq2seq.errors import UserError

SOURCES = ["我们明天去北京。", "他很喜欢喝茶。", "", "我很好。", "你好吗？", "我爱你。"]
REFERENCES = [
    "We are going to Beijing tomorrow.",
    "He likes tea very much.",
    "",
    "I'm fine.",
    "How are you?",
    "I love you.",
]


@pytest.fixture(scope="module")
def model(toy_run):
    return seq2seq.load(toy_run, device="cpu")


def _printed(capsys, *args: str) -> list[str]:
    capsys.readouterr()
    main(list(args))
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("beam", [None, 1, 3])
def test_translate_gives_what_the_verb_prints(model, toy_run, capsys, beam):
    beam_args = [] if beam is None else ["--beam", str(beam)]
    printed = _printed(capsys, "translate", "--model", str(toy_run), "--device", "cpu", *beam_args, *SOURCES)
    got = model.translate(SOURCES, beam=beam)
    assert got == printed and len(got) == len(SOURCES) and got[2] == ""
    assert sum(bool(text) for text in got) >= 3  # the toy model answers: the comparison is not of empty lines


def test_score_gives_what_the_verb_prints(model, toy_run, tmp_path, capsys):
    src, ref = write_lines(tmp_path / "src", SOURCES), write_lines(tmp_path / "ref", REFERENCES)
    printed = _printed(
        capsys, "score", "--model", str(toy_run), "--device", "cpu", "--src", str(src), "--ref", str(ref)
    )
    got = model.score(SOURCES, REFERENCES)
    assert [f"{value:.4f}" for value in got] == [line.split("\t")[0] for line in printed]
    assert all(value < 0 for value in got)


def test_load_takes_decode_overrides_as_a_mapping(toy_run):
    wide = seq2seq.load(toy_run, device="cpu", overrides={"decode.beam": 4, "decode.length_penalty": 0.5})
    assert (wide.translator.decode.beam, wide.translator.decode.length_penalty) == (4, 0.5)
    assert wide.translate(SOURCES) == wide.translate(SOURCES, beam=4)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda m: m.translate("嗨。"),
            r"^sentences: give a list of strings, one per sentence \(one sentence: \[text\]\)",
        ),
        (lambda m: m.translate(["嗨。"], beam=0), r"^beam=0: give an integer >= 1"),
        (lambda m: m.score(["嗨。", "等等！"], ["Hi."]), r"^2 sources but 1 references"),
        (lambda m: m.score(["嗨。"], [None]), r"^references: give a list of strings"),
    ],
)
def test_bad_input_is_a_user_error(model, call, message):
    with pytest.raises(UserError, match=message):
        call(model)


def test_load_refuses_what_the_verbs_refuse(tmp_path, toy_run):
    with pytest.raises(UserError, match=r"no trained model at .*best.pt; train first"):
        seq2seq.load(tmp_path, device="cpu")
    with pytest.raises(UserError, match=r"--set 'train.lr=1': a trained model takes only decode\.\* settings"):
        seq2seq.load(toy_run, device="cpu", overrides=["train.lr=1"])
    with pytest.raises(UserError, match=r"--engine 'marian': choose one of torch, ctranslate2"):
        seq2seq.load(toy_run, engine="marian")


def test_train_returns_the_run_directory_with_its_checkpoints(tmp_path, toy_cache, monkeypatch):
    monkeypatch.chdir(REPO)  # the toy config names its corpus relative to the repository
    run = tmp_path / "run"
    overrides = {
        "train.run_dir": run,
        "data.cache_dir": toy_cache,
        "train.max_steps": 3,
        "train.eval_every": 3,
        "train.eval_sentences": 2,
        "train.threads": 1,
        "train.device": "cpu",
        "train.adam_betas": [0.9, 0.99],
    }
    assert seq2seq.train(TOY, overrides, quiet=True) == run
    assert (run / "best.pt").is_file() and load_checkpoint(run / "last.pt")["progress"]["step"] == 3
    assert load_config(run / "config.yaml").train.adam_betas == (0.9, 0.99)  # a list value arrived as one
    texts = [f"{key}={value}" for key, value in overrides.items() if key != "train.adam_betas"]
    more = seq2seq.train(load_config(TOY), [*texts, "train.adam_betas=[0.9, 0.99]", "train.max_steps=4"], quiet=True)
    assert more == run and load_checkpoint(run / "last.pt")["progress"]["step"] == 4  # a Config, continued


def test_train_refuses_an_unknown_key_and_a_lone_string():
    with pytest.raises(UserError, match=r"unknown key 'max_step'; did you mean 'max_steps'\?"):
        seq2seq.train(REPO / TOY, {"train.max_step": 3})
    with pytest.raises(UserError, match=r"^overrides 'train.max_steps=3': give a list of 'section.key=value' texts"):
        seq2seq.train(REPO / TOY, "train.max_steps=3")
