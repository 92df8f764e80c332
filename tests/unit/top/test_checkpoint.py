"""seq2seq.checkpoint: round trip, atomic save, safe (weights-only) load, clear
errors for missing/truncated/foreign files, model averaging."""

import os
import pickle

import pytest
import torch

import seq2seq.checkpoint as checkpoint
from seq2seq.checkpoint import average_models, load_checkpoint, save_checkpoint
from seq2seq.config import Config
from seq2seq.errors import UserError


def _state(model) -> dict:
    return {
        "model": model.state_dict(),
        "config": Config().to_dict(),
        "progress": {"step": 7, "best": None},
        "rng": torch.get_rng_state(),
    }


def _assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_round_trip(tmp_path, tiny_model):
    model = tiny_model()
    state = _state(model)
    path = tmp_path / "sub" / "last.pt"  # parent directories are created
    save_checkpoint(state, path)
    loaded = load_checkpoint(path)
    _assert_same_weights(loaded["model"], state["model"])
    assert loaded["config"] == state["config"]
    assert loaded["progress"] == {"step": 7, "best": None}
    assert torch.equal(loaded["rng"], state["rng"])
    rebuilt = tiny_model(seed=99)
    rebuilt.load_state_dict(loaded["model"])
    _assert_same_weights(rebuilt.state_dict(), model.state_dict())


def test_save_overwrites_and_leaves_no_temp_files(tmp_path, tiny_model):
    path = tmp_path / "last.pt"
    save_checkpoint(_state(tiny_model(seed=1)), path)
    second = _state(tiny_model(seed=2))
    save_checkpoint(second, path)
    _assert_same_weights(load_checkpoint(path)["model"], second["model"])
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_crash_mid_write_keeps_previous_checkpoint(tmp_path, tiny_model, monkeypatch, error):
    path = tmp_path / "last.pt"
    previous = _state(tiny_model(seed=1))
    save_checkpoint(previous, path)
    before = path.read_bytes()

    def crashing_save(obj, handle, *args, **kwargs):
        handle.write(b"PK\x03\x04 half a checkpoint")
        raise error

    monkeypatch.setattr(checkpoint.torch, "save", crashing_save)
    with pytest.raises(type(error)):
        save_checkpoint(_state(tiny_model(seed=2)), path)
    monkeypatch.undo()

    assert path.read_bytes() == before
    _assert_same_weights(load_checkpoint(path)["model"], previous["model"])
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]


def test_crash_on_first_save_leaves_nothing(tmp_path, monkeypatch):
    def crashing_save(obj, handle, *args, **kwargs):
        handle.write(b"junk")
        raise OSError("no space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", crashing_save)
    with pytest.raises(UserError, match="best.pt.*no space left on device.*nothing was written"):
        save_checkpoint({"model": {}, "config": {}}, tmp_path / "best.pt")
    assert os.listdir(tmp_path) == []


class _RunsCodeOnLoad:
    """Unpickling this runs a shell command: what a tampered checkpoint could do."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch's note on plain pickle files
@pytest.mark.parametrize("writer", ["torch.save", "pickle.dump"])
def test_code_in_a_checkpoint_is_refused_not_run(tmp_path, writer):
    marker = tmp_path / "MARKER"
    payload = {"model": {"w": torch.zeros(2)}, "config": {}, "extra": _RunsCodeOnLoad(marker)}
    path = tmp_path / "evil.pt"
    if writer == "torch.save":
        torch.save(payload, path)
    else:
        with open(path, "wb") as handle:
            pickle.dump(payload, handle)
    with pytest.raises(UserError, match="refused to load|unreadable"):
        load_checkpoint(path)
    assert not marker.exists()


def test_truncated_checkpoint_is_a_user_error(tmp_path, tiny_model):
    good = tmp_path / "good.pt"
    save_checkpoint(_state(tiny_model()), good)
    data = good.read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="bad.pt"):
        load_checkpoint(bad)


def test_missing_checkpoint_says_to_train(tmp_path):
    with pytest.raises(UserError, match="train") as info:
        load_checkpoint(tmp_path / "nowhere.pt")
    assert "nowhere.pt" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_directory_is_not_a_checkpoint(tmp_path):
    with pytest.raises(UserError):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize(
    "content", [{"model": {}}, {"config": {}}, {"weights": torch.zeros(3)}, [1, 2, 3], torch.zeros(3)]
)
def test_foreign_file_without_model_and_config(tmp_path, content):
    path = tmp_path / "other.pt"
    torch.save(content, path)
    with pytest.raises(UserError, match="no model/config"):
        load_checkpoint(path)


def test_average_models_is_the_mean(tmp_path, tiny_model):
    models = [tiny_model(seed=s) for s in (1, 2, 3)]
    paths = []
    for i, model in enumerate(models):
        paths.append(tmp_path / f"snapshot-{i}.pt")
        save_checkpoint(_state(model), paths[-1])
    averaged = average_models(paths)
    states = [m.state_dict() for m in models]
    assert averaged.keys() == states[0].keys()
    for name, tensor in averaged.items():
        expected = sum(s[name].double() for s in states) / 3
        assert tensor.dtype == torch.float32
        torch.testing.assert_close(tensor, expected.float(), rtol=0, atol=1e-7)
    # the average loads back into the model
    tiny_model().load_state_dict(averaged)


def test_average_of_one_checkpoint_is_itself(tmp_path, tiny_model):
    model = tiny_model(seed=4)
    save_checkpoint(_state(model), tmp_path / "one.pt")
    _assert_same_weights(average_models([tmp_path / "one.pt"]), model.state_dict())


def test_average_models_missing_file_is_a_user_error(tmp_path, tiny_model):
    save_checkpoint(_state(tiny_model()), tmp_path / "a.pt")
    with pytest.raises(UserError, match="train"):
        average_models([tmp_path / "a.pt", tmp_path / "b.pt"])
