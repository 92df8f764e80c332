"""seq2seq.train.tensorboard: ``seq2seq train --tensorboard`` writes metrics.jsonl's figures as TensorBoard
scalars at their steps, read back here with TensorBoard's own reader; a resume hides what a session that
died before its checkpoint wrote; without the package the option is a one-line error."""

import shutil
import sys

import pytest
from conftest import REPO, TOY, metrics_records, toy_train_args
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import seq2seq.train.runlog as runlog
from seq2seq.cli import main
from seq2seq.config import load_config
from seq2seq.errors import UserError
from seq2seq.train.tensorboard import DIRECTORY, TAGS
from seq2seq.train.trainer import Trainer

SETTINGS = ("train.eval_every=5", "train.eval_sentences=5", "train.precision=float32")


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the toy config names its corpus relative to the repository
    monkeypatch.setattr(runlog, "RECORD_EVERY", 5)  # a training record every 5 steps, not 20: shorter runs


def _scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the run's event files -> its (step, value) events, as TensorBoard shows them."""
    events = EventAccumulator(str(run_dir / DIRECTORY))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_the_scalars_are_the_metrics_records_at_their_steps(tmp_path, toy_cache, capsys):
    run = tmp_path / "run"
    main([*toy_train_args(run, toy_cache, "train.max_steps=10", *SETTINGS), "--tensorboard"])
    assert "done: best model in" in capsys.readouterr().out
    scalars = _scalars(run)
    assert set(scalars) == set(TAGS.values())  # train/loss, lr, tokens_per_s, grad_norm; dev/loss, ppl, bleu, chrf
    records = metrics_records(run)
    for key, tag in TAGS.items():
        expected = [(r["step"], r[key]) for r in records if key in r]
        assert [step for step, _ in scalars[tag]] == [step for step, _ in expected] == [5, 10], tag
        assert [value for _, value in scalars[tag]] == pytest.approx([value for _, value in expected], rel=1e-6)
    assert all(value > 0 for _, value in scalars["train/grad_norm"])


def test_a_resume_hides_the_events_of_a_session_that_died_before_its_checkpoint(tmp_path, toy_cache):
    """5 steps; a session to 10 whose last.pt is then lost (as if killed before writing it); the resume from
    step 5 trains steps 6-10 again, and TensorBoard shows each step once."""
    run = tmp_path / "run"
    overrides = [f"train.run_dir={run}", f"data.cache_dir={toy_cache}", "train.threads=1", "train.device=cpu"]
    overrides += [*SETTINGS, "train.tensorboard=true"]
    Trainer(load_config(TOY, [*overrides, "train.max_steps=5"])).fit(quiet=True)
    shutil.copy(run / "last.pt", tmp_path / "step-5.pt")
    Trainer(load_config(TOY, [*overrides, "train.max_steps=10"])).fit(quiet=True)
    shutil.copy(tmp_path / "step-5.pt", run / "last.pt")
    assert [step for step, _ in _scalars(run)["dev/loss"]] == [5, 10]
    Trainer(load_config(TOY, [*overrides, "train.max_steps=10"])).fit(quiet=True)
    assert len(list((run / DIRECTORY).iterdir())) == 3  # one event file per session
    for tag, events in _scalars(run).items():
        assert [step for step, _ in events] == [5, 10], tag
    assert [r["step"] for r in metrics_records(run) if "dev_loss" in r] == [5, 10]  # metrics.jsonl agrees


def test_without_the_tensorboard_package_it_is_a_one_line_error(tmp_path, toy_cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    cfg = load_config(
        TOY, [f"train.run_dir={tmp_path / 'run'}", f"data.cache_dir={toy_cache}", "train.tensorboard=true"]
    )
    with pytest.raises(
        UserError, match=r"^train.tensorboard needs the tensorboard package: pip install 'seq2seq\[tensorboard\]'"
    ):
        Trainer(cfg)
    assert not (tmp_path / "run").exists()  # refused before the data were read
