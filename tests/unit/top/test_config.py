"""seq2seq.config: YAML loading, validation messages, --set overrides, round trips."""

import dataclasses
import re
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import REPO
from sacrebleu.metrics import BLEU

from seq2seq.config import (
    BLEU_TOKENIZERS,
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


@pytest.mark.parametrize("text", ["train.lr", "lr=3e-4", "train.lr.x=1", "=1", "data.corpora[-1].weight=1"])
def test_bad_override_format(tmp_path, text):
    with pytest.raises(UserError, match="section.key=value"):
        load_config(_write(tmp_path, MINIMAL), [text])


CORPORA = MINIMAL.replace(
    "  src: corpus.src\n  tgt: corpus.tgt\n",
    "  corpora:\n    - {name: a, src: a.src, tgt: a.tgt}\n    - {name: b, src: b.src, tgt: b.tgt, weight: 0.3}\n",
)


def test_set_reaches_a_field_of_a_list_entry(tmp_path):
    path = _write(tmp_path, CORPORA)
    cfg = load_config(path, ["data.corpora[1].weight=0.5", "data.corpora[0].vocab=false"])
    assert [(c.name, c.weight, c.vocab) for c in cfg.data.corpora] == [("a", 1.0, False), ("b", 0.5, True)]
    whole = load_config(path, ["data.corpora[0]={name: c, tsv: c.tsv}"]).data.corpora[0]
    assert (whole.name, whole.tsv, whole.src) == ("c", "c.tsv", None)
    assert load_config(path) == load_config(path, [])  # nothing of the file's lists was changed in place
    betas = load_config(
        _write(tmp_path, MINIMAL + "  adam_betas: [0.9, 0.98]\n", "b.yaml"), ["train.adam_betas[1]=0.99"]
    )
    assert betas.train.adam_betas == (0.9, 0.99)


def test_a_list_override_out_of_range_is_a_one_line_error(tmp_path):
    path = _write(tmp_path, CORPORA)
    with pytest.raises(UserError) as err:
        load_config(path, ["data.corpora[2].weight=0.5"])
    assert str(err.value) == (
        "--set 'data.corpora[2].weight=0.5': data.corpora[2] is out of range (data.corpora has entries 0-1)"
    )
    with pytest.raises(UserError, match=r"data.corpora is not a list in this config"):
        load_config(_write(tmp_path, MINIMAL, "m.yaml"), ["data.corpora[0].weight=0.5"])
    with pytest.raises(UserError, match=r"data.corpora\[0\]: unknown key 'wieght'; did you mean 'weight'"):
        load_config(path, ["data.corpora[0].wieght=0.5"])


def test_tgt_lang_must_be_a_language_code(tmp_path):
    assert load_config(_write(tmp_path, _minimal_plus("data", "tgt_lang: zh-Hant"))).data.tgt_lang == "zh-Hant"
    with pytest.raises(UserError, match="data.tgt_lang='chinese' is not a language code"):
        load_config(_write(tmp_path, _minimal_plus("data", "tgt_lang: chinese")))


def test_bleu_tokenize_is_one_of_sacrebleus_tokenizers(tmp_path):
    assert set(BLEU_TOKENIZERS) <= set(BLEU.TOKENIZERS)
    assert load_config(_write(tmp_path, MINIMAL), ["eval.bleu_tokenize=zh"]).eval.bleu_tokenize == "zh"
    with pytest.raises(UserError, match=r"eval\.bleu_tokenize"):
        load_config(_write(tmp_path, MINIMAL), ["eval.bleu_tokenize=jieba"])


def test_parse_override_reads_value_as_yaml():
    assert parse_override("decode.beam=4") == (["decode", "beam"], 4)
    assert parse_override("data.src=a=b.txt") == (["data", "src"], "a=b.txt")
    assert parse_override("data.corpora[1].weight=0.5") == (["data", "corpora", 1, "weight"], 0.5)


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


# --- the recipes -------------------------------------------------------------------------------
CONFIGS = REPO / "seq2seq" / "recipes"


@pytest.mark.parametrize("name", sorted(path.name for path in CONFIGS.glob("*.yaml")))
def test_shipped_configs_load(name):
    assert isinstance(load_config(CONFIGS / name), Config)


def test_en_zh_is_the_recipe_turned_round():
    """The en-zh recipe: the zh-en recipe's corpus the other way round, at the recipe's sizes and budget."""
    en_zh, zh_en = load_config(CONFIGS / "en-zh.yaml"), load_config(CONFIGS / "zh-en.yaml")
    sizes = lambda c: (  # noqa: E731
        dataclasses.replace(c.model, dropout=0.0),
        (c.data.vocab_size, c.data.batch_tokens, c.data.max_len, c.data.dev_size, c.data.test_size),
        dataclasses.replace(c.train, run_dir="", label_smoothing=0.0),
        c.decode,
    )
    assert sizes(en_zh) == sizes(zh_en)
    d = en_zh.data
    assert (d.tgt_lang, d.src_script, d.tgt_script, en_zh.train.run_dir) == ("zh", "keep", "simplified", "runs/en-zh")
    assert [(c.src, c.tgt, c.weight, c.eval) for c in d.corpora] == [
        ("data/tatoeba-cmn-eng-full/all.en", "data/tatoeba-cmn-eng-full/all.zh", 1.0, True),
        ("data/hsk-zh-en/all.en", "data/hsk-zh-en/all.zh", 0.1, False),
    ]


def test_the_recipe_sets_and_explains_every_key():
    """The zh-en recipe is the reference: every setting appears in it, under its section, with a comment."""
    lines = (CONFIGS / "zh-en.yaml").read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line and not line.startswith((" ", "#"))] + [len(lines)]
    for section in fields(Config):
        start = lines.index(f"{section.name}:")
        body = lines[start + 1 : starts[starts.index(start) + 1]]
        for setting in fields(section.type):
            (line,) = [line for line in body if line.startswith(f"  {setting.name}:")]
            assert "#" in line, f"{section.name}.{setting.name} has no comment"


def _as_yaml(value: object) -> str:
    """A default as docs/own-data.md writes it."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_as_yaml(v) for v in value) + "]"
    return str(value)


def test_the_own_data_page_lists_every_default():
    section, listed = None, {}
    for line in (REPO / "docs" / "own-data.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            section = None  # the tables of defaults end with their section of the page
        elif line.startswith("`") and line.endswith("`:"):
            section = line.strip("`:")
        elif (row := re.match(r"\| `(\w+)` \| `([^`]*)` \|", line)) and section:
            listed[f"{section}.{row[1]}"] = row[2]
    defaults = Config().to_dict()
    assert listed == {f"{s}.{k}": _as_yaml(v) for s in defaults for k, v in defaults[s].items()}
