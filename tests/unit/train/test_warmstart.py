"""Warm start (``train.init_from``): a new run on a shifted corpus begins where the trained toy
model is, not from scratch, with its tokenizer; another model shape or tokenizer setting is refused.
A MarianMT directory is a starting point too, converted, with its own tokenizer."""

import math
import shutil

import pytest
import torch
from conftest import PAD, REPO, TOY, TOY_SRC, TOY_TGT, metrics_records, run_cli, toy_train_args, write_lines

from seq2seq.config import load_config
from seq2seq.data.tokenizer import VOCABULARY
from seq2seq.errors import UserError
from seq2seq.interop.marian import import_marian
from seq2seq.train.trainer import Trainer


@pytest.fixture
def shifted_corpus(tmp_path):
    """The toy pairs joined two by two: longer sentences than the toy model was trained on."""
    src, tgt = TOY_SRC.read_text(encoding="utf-8").splitlines(), TOY_TGT.read_text(encoding="utf-8").splitlines()
    joined = [(src[i] + src[i + 1], f"{tgt[i]} {tgt[i + 1]}") for i in range(0, len(src) - 1, 2)]
    return (
        write_lines(tmp_path / "shifted.zh", [s for s, _ in joined]),
        write_lines(tmp_path / "shifted.en", [t for _, t in joined]),
    )


def _on_shifted(tmp_path, corpus, name, *overrides):
    src, tgt = corpus
    return load_config(
        REPO / TOY,
        [
            f"data.src={src}",
            f"data.tgt={tgt}",
            f"data.cache_dir={tmp_path / 'cache'}",
            f"train.run_dir={tmp_path / name}",
            "train.threads=1",
            "train.eval_sentences=0",
            *overrides,
        ],
    )


def test_fine_tuning_starts_at_the_trained_models_dev_loss(tmp_path, toy_run, shifted_corpus):
    trained = tmp_path / "trained"
    shutil.copytree(toy_run, trained)
    warm = Trainer(_on_shifted(tmp_path, shifted_corpus, "warm", f"train.init_from={trained}"))
    scratch = Trainer(_on_shifted(tmp_path, shifted_corpus, "scratch"))
    assert warm.data.tokenizer.src.serialized_model_proto() == (trained / "spm.model").read_bytes()
    assert warm.optimizer.state == {} and warm.progress.step == 0  # only the weights are carried over
    at_start = warm.validate()["dev_loss"]
    assert at_start < scratch.validate()["dev_loss"] - 1.0
    # Through the command line: a few fine-tuning steps on the new corpus stay near that loss, far from scratch.
    src, tgt = shifted_corpus
    result = run_cli(
        *toy_train_args(
            tmp_path / "cli",
            tmp_path / "cache",
            f"data.src={src}",
            f"data.tgt={tgt}",
            f"train.init_from={trained}",
            "train.max_steps=3",
            "train.eval_sentences=2",
        )
    )
    assert result.returncode == 0, result.stderr
    (first,) = [r for r in metrics_records(tmp_path / "cli") if "dev_loss" in r]
    assert first["dev_loss"] < at_start + 0.3


@pytest.mark.parametrize(
    ("override", "key"), [("data.vocab_size=1000", "data.vocab_size"), ("model.ffn_dim=96", "model.ffn_dim")]
)
def test_another_tokenizer_setting_or_model_shape_is_refused(tmp_path, toy_run, shifted_corpus, override, key):
    with pytest.raises(UserError, match=f"train.init_from=.*{key}"):
        Trainer(_on_shifted(tmp_path, shifted_corpus, "run", f"train.init_from={toy_run}", override))


# The model section the toy MarianMT directory (conftest's marian_dir) converts to.
MARIAN_TOY_MODEL = (
    "model.d_model=32",
    "model.heads=4",
    "model.encoder_layers=2",
    "model.decoder_layers=2",
    "model.ffn_dim=64",
    "model.activation=silu",
    "model.output_bias=true",
    "model.decoder_start=pad",
    "model.max_positions=128",
)


def _from_marian(tmp_path, marian_dir, *overrides):
    return load_config(
        REPO / TOY,
        [
            f"data.cache_dir={tmp_path / 'cache'}",
            f"train.run_dir={tmp_path / 'run'}",
            "train.threads=1",
            f"train.init_from={marian_dir}",
            *overrides,
        ],
    )


def test_fine_tuning_starts_from_a_marian_directory(tmp_path, marian_dir):
    """The converted weights and MarianMT's tokenizer, the run's batches starting the decoder from <pad>."""
    trainer = Trainer(_from_marian(tmp_path, marian_dir, *MARIAN_TOY_MODEL))
    model, tokenizer, _ = import_marian(marian_dir)
    assert trainer.data.tokenizer.vocabulary == tokenizer.vocabulary
    assert (tmp_path / "run" / VOCABULARY).is_file()  # the run directory can translate on its own
    state = trainer.model.state_dict()
    assert all(torch.equal(state[name], tensor) for name, tensor in model.state_dict().items())
    batch = trainer.data.train.batch(torch.arange(4), trainer.cfg.model.decoder_start_id)
    assert (batch.tgt_in[:, 0] == PAD).all()
    step = trainer.train_step()
    assert step.tokens > 0 and math.isfinite(step.loss)


def test_a_marian_directory_with_another_model_section_is_refused(tmp_path, marian_dir):
    with pytest.raises(UserError, match=r"train.init_from=.*model\.activation='silu'.*set model\.activation: 'silu'"):
        Trainer(_from_marian(tmp_path, marian_dir, *MARIAN_TOY_MODEL[:5]))
