"""seq2seq.config: YAML loading, validation messages, --set overrides, round trips."""

from dataclasses import fields
from pathlib import Path

import pytest
from conftest import REPO

from seq2seq.config import (
    Config,
    DecodeConfig,
    ModelConfig,
    config_from_dict,
    decode_config_from_dict,
    load_config,
    parse_override,
    save_config,
)
from seq2seq.errors import UserError
from seq2seq.special import BOS, PAD

MINIMAL = """\
data:
  src: corpus.src
  tgt: corpus.tgt
train:
  max_steps: 10
"""


def _write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _minimal_plus(section: str, line: str) -> str:
    """MINIMAL with ``line`` added to ``section`` (one of model, data, train, decode)."""
    if f"{section}:\n" in MINIMAL:
        return MINIMAL.replace(f"{section}:\n", f"{section}:\n  {line}\n")
    return MINIMAL + f"{section}:\n  {line}\n"


def test_minimal_config_loads_with_defaults(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL))
    assert isinstance(cfg, Config)
    assert cfg.data.src == "corpus.src" and cfg.data.tgt == "corpus.tgt"
    assert cfg.train.max_steps == 10
    assert cfg.model == ModelConfig()
    assert cfg.train.adam_betas == (0.9, 0.98)


def test_config_is_frozen(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL))
    with pytest.raises(AttributeError):
        cfg.train.lr = 1.0  # type: ignore[misc]


def test_unknown_key_names_key_file_and_suggestion(tmp_path):
    path = _write(tmp_path, _minimal_plus("train", "lrr: 0.1"))
    with pytest.raises(UserError) as err:
        load_config(path)
    message = str(err.value)
    assert "lrr" in message
    assert str(path) in message
    assert "'lr'" in message


def test_unknown_section_is_rejected(tmp_path):
    with pytest.raises(UserError, match="modle"):
        load_config(_write(tmp_path, MINIMAL + "modle:\n  d_model: 64\n"))


def test_wrong_type_names_the_key(tmp_path):
    with pytest.raises(UserError, match=r"model\.d_model") as err:
        load_config(_write(tmp_path, _minimal_plus("model", 'd_model: "big"')))
    assert "big" in str(err.value)


@pytest.mark.parametrize("line", ["d_model: true", "d_model: 64.0", "heads: [4]"])
def test_other_wrong_int_types_rejected(tmp_path, line):
    with pytest.raises(UserError, match=r"model\."):
        load_config(_write(tmp_path, _minimal_plus("model", line)))


def test_literal_value_checked(tmp_path):
    with pytest.raises(UserError, match=r"model\.norm"):
        load_config(_write(tmp_path, _minimal_plus("model", "norm: middle")))


def test_the_options_marian_needs_load_and_are_checked(tmp_path):
    options = ("activation: silu", "output_bias: true", "decoder_start: pad")
    cfg = load_config(_write(tmp_path, MINIMAL + "model:\n" + "".join(f"  {line}\n" for line in options)))
    assert (cfg.model.activation, cfg.model.output_bias, cfg.model.decoder_start) == ("silu", True, "pad")
    assert cfg.model.decoder_start_id == PAD and ModelConfig().decoder_start_id == BOS
    with pytest.raises(UserError, match=r"model\.decoder_start: 'eos' is not one of \['bos', 'pad'\]"):
        load_config(_write(tmp_path, _minimal_plus("model", "decoder_start: eos")))
    with pytest.raises(UserError, match=r"model\.output_bias: expected bool"):
        load_config(_write(tmp_path, _minimal_plus("model", "output_bias: 1")))


def test_decode_settings_of_a_model_without_our_config():
    """An imported model's decoding settings: defaults, its own, then --set decode.KEY=VALUE, each checked."""
    assert decode_config_from_dict({}, "m") == DecodeConfig()
    assert decode_config_from_dict({"beam": 4}, "m", ["decode.length_penalty=0.6"]) == DecodeConfig(
        beam=4, length_penalty=0.6
    )
    with pytest.raises(UserError, match=r"m: decode\.beam and decode\.batch_sentences must be >= 1"):
        decode_config_from_dict({"beam": 0}, "m")
    with pytest.raises(UserError, match=r"only decode\.\* settings"):
        decode_config_from_dict({}, "m", ["train.lr=1"])
    with pytest.raises(UserError, match=r"unknown key 'bean'; did you mean 'beam'"):
        decode_config_from_dict({"bean": 2}, "m")


def test_negative_lr_rejected(tmp_path):
    with pytest.raises(UserError, match=r"train\.lr"):
        load_config(_write(tmp_path, _minimal_plus("train", "lr: -0.001")))


def test_heads_must_divide_d_model_unless_head_dim_given(tmp_path):
    with pytest.raises(UserError, match=r"model\.heads"):
        load_config(_write(tmp_path, _minimal_plus("model", "d_model: 30")))  # 30 % 4 != 0
    cfg = load_config(_write(tmp_path, _minimal_plus("model", "d_model: 30\n  head_dim: 8")))
    assert cfg.model.resolved_head_dim == 8
    assert load_config(_write(tmp_path, MINIMAL)).model.resolved_head_dim == 256 // 4


def test_missing_data_and_stop_condition_rejected(tmp_path):
    with pytest.raises(UserError, match=r"data\.src"):
        load_config(_write(tmp_path, "train:\n  max_steps: 10\n"))
    with pytest.raises(UserError, match="stop condition"):
        load_config(_write(tmp_path, "data:\n  tsv: corpus.tsv\n"))


def test_set_overrides(tmp_path):
    path = _write(tmp_path, MINIMAL)
    cfg = load_config(
        path,
        [
            "train.lr=3e-4",
            "model.d_model=64",
            "data.joint_vocab=false",
            "model.tie_embeddings=decoder",
            "model.head_dim=null",
        ],
    )
    assert cfg.train.lr == 0.0003 and isinstance(cfg.train.lr, float)
    assert cfg.model.d_model == 64 and isinstance(cfg.model.d_model, int)
    assert cfg.data.joint_vocab is False
    assert cfg.model.head_dim is None
    assert load_config(path).train.lr == 1e-3  # the file itself is untouched


def test_set_override_creates_missing_section(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL), ["decode.beam=1"])
    assert cfg.decode.beam == 1


def test_set_override_is_validated(tmp_path):
    path = _write(tmp_path, MINIMAL)
    with pytest.raises(UserError, match="'lr'"):
        load_config(path, ["train.lrr=1"])
    with pytest.raises(UserError, match=r"train\.lr"):
        load_config(path, ["train.lr=-1"])


@pytest.mark.parametrize("text", ["train.lr", "lr=3e-4", "train.lr.x=1", "=1"])
def test_bad_override_format(tmp_path, text):
    with pytest.raises(UserError, match="section.key=value"):
        load_config(_write(tmp_path, MINIMAL), [text])


def test_parse_override_reads_value_as_yaml():
    assert parse_override("decode.beam=4") == (["decode", "beam"], 4)
    assert parse_override("data.src=a=b.txt") == (["data", "src"], "a=b.txt")


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = _write(tmp_path, "data:\n  src: a\n  tgt: b: c\n")
    with pytest.raises(UserError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message
    assert "line 3" in message


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_to_dict_round_trip(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL), ["train.adam_betas=[0.8, 0.9]", "model.norm=pre", "model.head_dim=16"])
    raw = cfg.to_dict()
    assert raw["train"]["adam_betas"] == [0.8, 0.9]  # plain builtins, no tuples
    again = config_from_dict(raw, "checkpoint")
    assert again == cfg
    assert again.train.adam_betas == (0.8, 0.9)


def test_save_config_round_trip(tmp_path):
    cfg = load_config(_write(tmp_path, MINIMAL), ["model.tie_embeddings=decoder", "train.lr=5e-4"])
    saved = tmp_path / "saved.yaml"
    save_config(cfg, saved)
    assert load_config(saved) == cfg


def test_zero_heads_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"model\.heads"):
        load_config(_write(tmp_path, _minimal_plus("model", "heads: 0")))


def test_non_mapping_top_level_is_a_user_error(tmp_path):
    with pytest.raises(UserError):
        load_config(_write(tmp_path, "- data\n- train\n"))


# --- the shipped configs -----------------------------------------------------------------------
CONFIGS = REPO / "configs"


@pytest.mark.parametrize("name", ["zh-en.yaml", "toy.yaml", "zh-en-finetune-opus.yaml"])
def test_shipped_configs_load(name):
    assert isinstance(load_config(CONFIGS / name), Config)


def test_the_recipe_sets_and_explains_every_key():
    """configs/zh-en.yaml is the reference: every setting appears in it, under its section, with a comment."""
    lines = (CONFIGS / "zh-en.yaml").read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line and not line.startswith((" ", "#"))] + [len(lines)]
    for section in fields(Config):
        start = lines.index(f"{section.name}:")
        body = lines[start + 1 : starts[starts.index(start) + 1]]
        for setting in fields(section.type):
            (line,) = [line for line in body if line.startswith(f"  {setting.name}:")]
            assert "#" in line, f"{section.name}.{setting.name} has no comment"
