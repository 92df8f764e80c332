"""Damaged and foreign checkpoints: a flipped byte anywhere, a file cut anywhere, another project's file --
each is refused with a one-line error naming the file, or (a flip in bytes nothing reads) loads exactly the
saved content. A model with garbage weights is never returned."""

import shutil
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import FUZZ, build_tiny_model, one_line_error, random_batch, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.checkpoint import DIGEST_KEY, content_digest, load_checkpoint, save_checkpoint
from seq2seq.config import Config
from seq2seq.errors import UserError


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[dict, bytes]:
    """A small trainer-like checkpoint (model, optimizer state, progress) and its file's bytes."""
    model = build_tiny_model(seed=3, d_model=16, heads=2, ffn_dim=16, encoder_layers=1, decoder_layers=1)
    optimizer = torch.optim.AdamW(model.parameters())
    model(*random_batch()).sum().backward()
    optimizer.step()
    state = {
        "model": model.state_dict(),
        "config": Config().to_dict(),
        "optimizer": optimizer.state_dict(),
        "progress": {"step": 12, "elapsed": 3.5, "best": -2.25, "bad_evals": 0, "kept": []},
        "rng": {"torch": torch.get_rng_state(), "python": list(range(5))},
    }
    path = tmp_path_factory.mktemp("ckpt") / "last.pt"
    save_checkpoint(state, path)
    return load_checkpoint(path), path.read_bytes()


def _same(a, b) -> bool:
    """Equal content, tensors compared bit for bit."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and (a == b or a != a and b != b)


def _refused_or_intact(path: Path, original: dict) -> str:
    """Load ``path``: a one-line UserError naming it ('refused'), or exactly ``original`` ('intact')."""
    with warnings.catch_warnings(record=True) as caught:  # on the command line a warning is a second line
        warnings.simplefilter("always")
        try:
            loaded = load_checkpoint(path)
        except UserError as err:
            assert str(path) in str(err) and "\n" not in str(err)
            return "refused"
        finally:
            assert not caught, caught[0].message
    assert _same(loaded, original), "a damaged checkpoint loaded with different content"
    return "intact"


@settings(FUZZ, max_examples=120)
@given(where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255))
def test_a_flipped_byte_is_refused_or_harmless(saved, tmp_path_factory, where, mask):
    original, data = saved
    damaged = bytearray(data)
    damaged[int(where * len(data))] ^= mask
    path = tmp_path_factory.mktemp("flip") / "last.pt"
    path.write_bytes(bytes(damaged))
    _refused_or_intact(path, original)


def test_a_flipped_bit_in_the_weights_is_refused(saved, tmp_path):
    """The case torch.load alone misses: the file's structure is intact, one weight has changed."""
    original, data = saved
    weight = original["model"]["out_proj.weight"]
    needle = weight.reshape(-1)[:4].numpy().tobytes()  # the tensor's first bytes, as stored
    at = data.index(needle)
    damaged = bytearray(data)
    damaged[at] ^= 0x01
    path = tmp_path / "last.pt"
    path.write_bytes(bytes(damaged))
    with pytest.raises(UserError, match="corrupted checkpoint .*SHA-256"):
        load_checkpoint(path)


@settings(FUZZ, max_examples=60)
@given(keep=st.floats(0, 1, exclude_max=True))
def test_a_truncated_file_is_refused(saved, tmp_path_factory, keep):
    original, data = saved
    path = tmp_path_factory.mktemp("cut") / "best.pt"
    path.write_bytes(data[: int(keep * len(data))])
    assert _refused_or_intact(path, original) == "refused"


def test_digest_covers_every_value_and_checkpoints_without_one_still_load(saved, tmp_path):
    original, _ = saved
    base = content_digest(original)
    changed = {**original, "progress": {**original["progress"], "step": 13}}
    assert content_digest(changed) != base
    assert content_digest({**original, "rng": {**original["rng"], "python": [0, 1, 2, 3, 5]}}) != base
    # Written before checkpoints carried a digest: loads as it is.
    old = tmp_path / "old.pt"
    torch.save(original, old)
    loaded = load_checkpoint(old)
    assert DIGEST_KEY not in loaded and _same(loaded, original)


def _foreign_files(tmp_path: Path, original: dict) -> dict[str, Path]:
    """Files a user may point --model at by mistake."""
    files = {}

    def add(name: str, writer) -> None:
        files[name] = tmp_path / f"{name}.pt"
        writer(files[name])

    model = original["model"]
    add("plain_state_dict", lambda p: torch.save(model, p))
    add("lightning_like", lambda p: torch.save({"state_dict": model, "epoch": 3, "global_step": 9}, p))
    add("a_tensor", lambda p: torch.save(torch.zeros(3), p))
    add("whole_module", lambda p: torch.save(torch.nn.Linear(2, 2), p))
    add("model_is_a_list", lambda p: torch.save({"model": [1, 2], "config": {}}, p))
    add("config_is_a_string", lambda p: torch.save({"model": model, "config": "yaml"}, p))
    add("empty", lambda p: p.write_bytes(b""))
    add("text", lambda p: p.write_text("model: transformer\n"))

    def a_zip(p: Path) -> None:
        with zipfile.ZipFile(p, "w") as archive:
            archive.writestr("data.pkl", b"not a pickle")

    add("other_zip", a_zip)
    add("safetensors_like", lambda p: p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}" + bytes(16)))
    return files


def test_foreign_files_are_refused_naming_the_file(saved, tmp_path):
    original, _ = saved
    for name, path in _foreign_files(tmp_path, original).items():
        with pytest.raises(UserError) as info:
            load_checkpoint(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value), name


def test_translate_with_a_damaged_best_pt_is_a_one_line_error(toy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    data = bytearray((run / "best.pt").read_bytes())
    data[len(data) // 2] ^= 0x10  # the middle of the file: inside the weights
    (run / "best.pt").write_bytes(bytes(data))
    line = one_line_error(run_cli("translate", "--model", str(run), "--device", "cpu", "你好"))
    assert str(run / "best.pt") in line and "corrupted" in line
