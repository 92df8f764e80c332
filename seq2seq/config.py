"""Typed, frozen, nested configuration loaded from YAML.

``Config`` holds five sections (model, data, train, decode, eval). Every key has its
default next to it; the ``zh-en`` recipe (``seq2seq/recipes/zh-en.yaml``) documents each, docs/own-data.md says why the
defaults are what they are. Unknown keys, wrong types and impossible values raise
``UserError`` naming the file, the key and a fix. ``--set`` overrides one key, or one field
of a list entry (``data.corpora[1].weight=0.5``).
"""

import dataclasses
import difflib
import json
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from seq2seq.atomic import write_text_atomically
from seq2seq.errors import UserError
from seq2seq.recipe import DEFAULT_RECIPE, find_config
from seq2seq.special import BOS, PAD

DEFAULT_CONFIG = DEFAULT_RECIPE
_LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*")  # ISO 639 with BCP 47 subtags: zh, zh-Hant


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the Transformer."""

    d_model: int = 256
    heads: int = 4
    head_dim: int | None = None  # None: d_model / heads (split); d_model: full width per head
    encoder_layers: int = 3
    decoder_layers: int = 3
    ffn_dim: int = 1024
    dropout: float = 0.3  # embeddings and sub-layer outputs (strong: a small corpus overfits)
    attention_dropout: float = 0.1  # attention weights
    activation_dropout: float = 0.0  # inside the feed-forward block
    activation: Literal["relu", "gelu", "silu"] = "relu"  # silu: MarianMT's "swish"
    norm: Literal["post", "pre"] = "post"
    tie_embeddings: Literal["all", "decoder", "none"] = "all"
    max_positions: int = 512
    attention: Literal["auto", "sdpa", "explicit"] = "auto"
    output_bias: bool = False  # a bias on the output projection (MarianMT's final_logits_bias)
    decoder_start: Literal["bos", "pad"] = "bos"  # the decoder's first input: <start>, or <pad> as MarianMT has it

    @property
    def resolved_head_dim(self) -> int:
        """Width K of one head."""
        return self.head_dim if self.head_dim is not None else self.d_model // self.heads

    @property
    def decoder_start_id(self) -> int:
        """The id every search, forced score and training batch feeds the decoder first."""
        return PAD if self.decoder_start == "pad" else BOS


Script = Literal["keep", "simplified", "traditional"]


@dataclass(frozen=True)
class CorpusConfig:
    """One corpus of several (``data.corpora``): its files, a name for reports and errors, a sampling weight."""

    name: str = "corpus"  # what reports, the training log and errors call it
    src: str | None = None  # line-aligned source file, or ...
    tgt: str | None = None  # ... target file
    tsv: str | None = None  # ... one TSV file with both sides
    src_column: int = 1
    tgt_column: int = 0
    weight: float = 1.0  # pairs per epoch relative to the other corpora's (see seq2seq.data.mixing)
    eval: bool = False  # dev/test are split off this corpus (default: the first)
    vocab: bool = True  # its training pairs teach the subword vocabulary; false: its pairs with unknown pieces go


@dataclass(frozen=True)
class DataConfig:
    """Where the corpus is and how it becomes batches."""

    src: str | None = None  # line-aligned source file, or ...
    tgt: str | None = None  # ... target file
    tsv: str | None = None  # ... one TSV file with both sides
    src_column: int = 1  # TSV column (0-based) of the source side
    tgt_column: int = 0  # TSV column (0-based) of the target side
    dev_src: str | None = None
    dev_tgt: str | None = None
    test_src: str | None = None
    test_tgt: str | None = None
    dev_size: int = 1000
    test_size: int = 1000
    split_seed: int = 1
    max_len: int = 100
    max_ratio: float = 9.0
    vocab_size: int = 4000  # suits 10k-100k pairs (docs/own-data.md)
    joint_vocab: bool = True
    spm_model_type: Literal["unigram", "bpe"] = "unigram"
    character_coverage: float = 0.9995
    spm_sample_sentences: int = 300_000  # the tokenizer learns from a seeded sample of this many pairs; 0: all
    subword_alpha: float = 0.0  # subword regularization: re-segment the training set each epoch; 0: off
    batch_tokens: int = 4096
    cache_dir: str = "data/cache"
    split_similarity: float = 0.8  # pairs whose source or target are this similar stay on one side; 1: identical only
    hash_split_above: int = 200_000  # corpora of more pairs (together) are split by hash (seq2seq.data.hashsplit)
    src_script: Script = "keep"  # Chinese script of the source side: keep | simplified | traditional (OpenCC)
    tgt_script: Script = "keep"  # ... of the target side
    tgt_lang: str | None = None  # language code of the target side (en, zh, ja, ko, ...): BLEU's tokenizer follows it
    src_lang: str | None = None  # language code of the source side: sentence splitting and the language check follow it
    placeholders: bool = False  # mask aligned non-translatables of training pairs as placeholders (seq2seq.text)
    placeholder_share: float = 0.5  # ... and numerals and names in this share of the pairs
    byte_fallback: bool = False  # characters outside the vocabulary become UTF-8 byte pieces instead of <unk>
    corpora: tuple[CorpusConfig, ...] = ()  # several corpora mixed by weight, instead of src/tgt/tsv

    def corpus_list(self) -> tuple[CorpusConfig, ...]:
        """The corpora to read: ``corpora``, or the single corpus of ``src``/``tgt``/``tsv``."""
        if self.corpora:
            return self.corpora
        return (CorpusConfig("corpus", self.src, self.tgt, self.tsv, self.src_column, self.tgt_column, eval=True),)

    def eval_corpus(self) -> int:
        """Index of the corpus dev/test are split off: the one marked ``eval``, else the first."""
        marked = [i for i, c in enumerate(self.corpus_list()) if c.eval]
        return marked[0] if marked else 0


@dataclass(frozen=True)
class TrainConfig:
    """The training loop."""

    run_dir: str = "runs/default"
    seed: int = 1
    lr: float = 1e-3
    warmup_steps: int = 800
    schedule: Literal["inverse_sqrt", "constant", "cosine"] = "cosine"  # cosine: over max_steps or max_minutes
    adam_betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 1e-4
    label_smoothing: float = 0.1
    word_dropout: float = 0.0  # share of source and decoder-input pieces replaced by <unk> in training
    clip_norm: float = 1.0
    accum_steps: int = 1
    max_steps: int = 0  # 0: no limit
    max_epochs: int = 0  # 0: no limit
    max_minutes: float = 0.0  # 0: no limit
    eval_every: int = 400
    eval_sentences: int = 500  # dev sentences decoded for BLEU at each validation; 0: all
    best_metric: Literal["bleu", "chrf", "loss"] = "bleu"
    patience: int = 0  # validations without improvement before stopping; 0: never
    average_last: int = 5  # average the last K validation checkpoints at the end (kept if better); 0: off
    device: str = "auto"  # auto: CUDA, else an Apple GPU (MPS), else the CPU
    precision: Literal["auto", "float32", "bf16", "bf16-autocast", "fp16"] = "auto"
    threads: int = 0  # 0: all available cores
    compile: bool = False  # torch.compile the model's teacher-forced pass (helps on a GPU, not on a CPU)
    init_from: str | None = None  # warm start: a run directory or checkpoint whose weights and tokenizer to start from
    collective_timeout_minutes: float = 10.0  # torchrun runs: a collective waiting longer fails instead of hanging
    tensorboard: bool = False  # also write metrics.jsonl's figures as TensorBoard scalars to RUN_DIR/tensorboard/


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings used by validation, translate and evaluate."""

    beam: int = 5
    length_penalty: float = 1.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    no_repeat_ngram: int = 0
    batch_sentences: int | None = None  # None: 64, or 192 in bf16 on a CPU (seq2seq.decode.batched.sentences_per_batch)


# sacrebleu's BLEU tokenizers (its deprecated alias "spm" left out); seq2seq.evaluate.metrics uses them.
BleuTokenizer = Literal["13a", "zh", "ja-mecab", "ko-mecab", "intl", "char", "none", "flores101", "flores200"]
BLEU_TOKENIZERS = typing.get_args(BleuTokenizer)


@dataclass(frozen=True)
class EvalConfig:
    """How translations are scored: the validation BLEU that picks best.pt, evaluate and its comparisons."""

    bleu_tokenize: BleuTokenizer | None = None  # None: from data.tgt_lang (seq2seq.evaluate.metrics)


@dataclass(frozen=True)
class Config:
    """The whole run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of builtins (for YAML, JSON and checkpoints)."""
        return dataclasses.asdict(
            self, dict_factory=lambda items: {k: list(v) if isinstance(v, tuple) else v for k, v in items}
        )


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(tp):
            return None
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(value, options[0], where)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise UserError(f"{where}: {value!r} is not one of {list(typing.get_args(tp))}")
        return value
    if origin is tuple and typing.get_args(tp)[1:] == (Ellipsis,):
        item = typing.get_args(tp)[0]
        if not isinstance(value, list | tuple):
            raise UserError(f"{where}: expected a list, got {value!r}")
        if dataclasses.is_dataclass(item):
            return tuple(_build(item, v, f"{where}[{i}]") for i, v in enumerate(value))
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list | tuple) or len(value) != len(args):
            raise UserError(f"{where}: expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args, strict=True))
    if tp is float and isinstance(value, int | str) and not isinstance(value, bool):
        try:  # YAML reads "3e-4" as a string
            value = float(value)
        except (ValueError, OverflowError):
            pass
    if tp is float and isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{where}: expected a finite number, got {value!r}")
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise UserError(f"{where}: expected {tp.__name__}, got {value!r}")
    if tp is int and not -(2**63) <= value < 2**63:  # torch holds sizes, steps and seeds in 64 bits
        raise UserError(f"{where}: {value} does not fit in a 64-bit integer")
    return value


def _build(cls: type, raw: Any, where: str) -> Any:
    """Build dataclass ``cls`` from a mapping, rejecting unknown keys."""
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a mapping of keys, got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in raw.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(fields)}"
            raise UserError(f"{where}: unknown key {str(key)!r}{hint}")
        if dataclasses.is_dataclass(hints[key]):
            kwargs[key] = _build(hints[key], value, f"{where}.{key}")
        else:
            kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    return cls(**kwargs)


def _validate(cfg: Config, where: str) -> None:
    """Reject impossible values with a message naming the key."""
    m, d, t, dec = cfg.model, cfg.data, cfg.train, cfg.decode
    # Each check is a lambda, so later ones (e.g. a modulo by heads) only run once earlier ones passed.
    checks = [
        (lambda: m.d_model > 0 and m.heads > 0, "model.d_model and model.heads must be positive"),
        (
            lambda: m.head_dim is not None or m.d_model % m.heads == 0,
            f"model.heads={m.heads} must divide model.d_model={m.d_model} (or set model.head_dim)",
        ),
        (lambda: m.head_dim is None or m.head_dim > 0, "model.head_dim must be positive"),
        (lambda: m.ffn_dim > 0, "model.ffn_dim must be positive"),
        (
            lambda: m.max_positions > d.max_len,
            f"model.max_positions={m.max_positions} must exceed data.max_len={d.max_len}",
        ),
        (lambda: m.d_model % 2 == 0, "model.d_model must be even (sinusoidal positions pair dimensions)"),
        (lambda: m.encoder_layers > 0 and m.decoder_layers > 0, "model.encoder_layers/decoder_layers must be > 0"),
        (
            lambda: all(0 <= p < 1 for p in (m.dropout, m.attention_dropout, m.activation_dropout)),
            "model.dropout, attention_dropout and activation_dropout must be in [0, 1)",
        ),
        (
            lambda: d.corpora or d.src is not None and d.tgt is not None or d.tsv is not None,
            "set data.src and data.tgt (two line-aligned files) or data.tsv",
        ),
        (
            lambda: not d.corpora or d.src is None and d.tgt is None and d.tsv is None,
            "data.corpora replaces data.src/tgt/tsv: set those to null, or list the corpus in data.corpora",
        ),
        *[
            check
            for i, c in enumerate(d.corpora)
            for check in (
                (
                    lambda c=c: c.src is not None and c.tgt is not None or c.tsv is not None,
                    f"data.corpora[{i}] ({c.name}): set src and tgt (two line-aligned files) or tsv",
                ),
                (lambda c=c: c.weight > 0, f"data.corpora[{i}] ({c.name}): weight must be positive"),
            )
        ],
        (
            lambda: len({c.name for c in d.corpora}) == len(d.corpora),
            "data.corpora: every corpus needs its own name",
        ),
        (lambda: sum(c.eval for c in d.corpora) <= 1, "data.corpora: mark at most one corpus eval: true"),
        (
            lambda: not d.corpora or any(c.vocab for c in d.corpora),
            "data.corpora: at least one corpus must teach the vocabulary (vocab: true)",
        ),
        (
            lambda: 0 < d.split_similarity <= 1,
            "data.split_similarity must be in (0, 1] (1 groups identical sentences only)",
        ),
        (lambda: (d.dev_src is None) == (d.dev_tgt is None), "set both data.dev_src and data.dev_tgt, or neither"),
        (lambda: (d.test_src is None) == (d.test_tgt is None), "set both data.test_src and data.test_tgt, or neither"),
        (lambda: d.vocab_size >= 16, "data.vocab_size must be at least 16"),
        (lambda: d.max_len > 0 and d.max_ratio > 0, "data.max_len and data.max_ratio must be positive"),
        (
            lambda: d.batch_tokens >= d.max_len + 2,
            f"data.batch_tokens must be at least data.max_len + 2 = {d.max_len + 2}",
        ),
        (lambda: 0 < d.character_coverage <= 1, "data.character_coverage must be in (0, 1]"),
        (lambda: d.spm_sample_sentences >= 0, "data.spm_sample_sentences must be >= 0 (0: every training pair)"),
        (lambda: d.hash_split_above >= 0, "data.hash_split_above must be >= 0 (0: always split by hash)"),
        (lambda: 0 <= d.subword_alpha < 1, "data.subword_alpha must be in [0, 1) (0 turns sampling off)"),
        (lambda: d.dev_size >= 0 and d.test_size >= 0, "data.dev_size and data.test_size must be >= 0"),
        (
            lambda: d.tgt_lang is None or _LANGUAGE_CODE.fullmatch(d.tgt_lang),
            f"data.tgt_lang={d.tgt_lang!r} is not a language code: use null or one like en, zh, ja, ko, zh-Hant",
        ),
        (
            lambda: d.src_lang is None or _LANGUAGE_CODE.fullmatch(d.src_lang),
            f"data.src_lang={d.src_lang!r} is not a language code: use null or one like zh, en, ja, ko, zh-Hant",
        ),
        (lambda: 0 <= d.placeholder_share <= 1, "data.placeholder_share must be in [0, 1]"),
        (lambda: t.lr > 0, f"train.lr must be positive, got {t.lr}"),
        (lambda: all(0 <= beta < 1 for beta in t.adam_betas), "train.adam_betas must both be in [0, 1)"),
        (lambda: t.weight_decay >= 0, "train.weight_decay must be >= 0"),
        (lambda: t.warmup_steps >= 0, "train.warmup_steps must be >= 0"),
        (lambda: 0 <= t.label_smoothing < 1, "train.label_smoothing must be in [0, 1)"),
        (lambda: 0 <= t.word_dropout < 1, "train.word_dropout must be in [0, 1)"),
        (lambda: t.clip_norm >= 0, "train.clip_norm must be >= 0 (0 disables clipping)"),
        (lambda: t.accum_steps >= 1, "train.accum_steps must be >= 1"),
        (lambda: t.max_steps >= 0 and t.max_epochs >= 0 and t.max_minutes >= 0, "train.max_* must be >= 0"),
        (
            lambda: t.max_steps or t.max_epochs or t.max_minutes,
            "set a stop condition: train.max_steps, max_epochs or max_minutes",
        ),
        (
            lambda: t.schedule != "cosine" or t.max_steps or t.max_minutes,
            "train.schedule=cosine (the default) decays over the budget: set train.max_steps or train.max_minutes, "
            "or train.schedule=inverse_sqrt",
        ),
        (lambda: t.eval_every > 0, "train.eval_every must be positive"),
        (lambda: t.collective_timeout_minutes > 0, "train.collective_timeout_minutes must be positive"),
        (lambda: t.patience >= 0 and t.average_last >= 0, "train.patience and train.average_last must be >= 0"),
        (
            lambda: t.device in ("auto", "cpu", "mps") or t.device.startswith("cuda"),
            f"train.device must be auto, cpu, cuda[:N] or mps, got {t.device!r}",
        ),
        *_decode_checks(dec),
        (lambda: m.tie_embeddings != "all" or d.joint_vocab, "model.tie_embeddings=all needs data.joint_vocab=true"),
    ]
    for ok, message in checks:
        if not ok():
            raise UserError(f"{where}: {message}")


def _decode_checks(dec: DecodeConfig) -> list[tuple[Any, str]]:
    return [
        (
            lambda: dec.beam >= 1 and (dec.batch_sentences is None or dec.batch_sentences >= 1),
            "decode.beam and decode.batch_sentences must be >= 1",
        ),
        (lambda: dec.max_len_a >= 0 and dec.max_len_b >= 1, "decode.max_len_a must be >= 0 and decode.max_len_b >= 1"),
        (lambda: dec.no_repeat_ngram >= 0, "decode.no_repeat_ngram must be >= 0 (0 turns it off)"),
    ]


def decode_config_from_dict(raw: dict[str, Any], where: str, overrides: Sequence[str] = ()) -> DecodeConfig:
    """A checked ``DecodeConfig`` from a mapping plus ``decode.key=value`` overrides, for a model that comes
    without a training config of ours (one imported from another toolkit)."""
    raw = dict(raw)
    for text in overrides:
        path, value = parse_override(text)
        if len(path) != 2 or path[0] != "decode":
            raise UserError(f"--set {text!r}: this model takes only decode.* settings, e.g. decode.beam=4")
        raw[path[1]] = value
    dec = _build(DecodeConfig, raw, f"{where}: decode")
    for ok, message in _decode_checks(dec):
        if not ok():
            raise UserError(f"{where}: {message}")
    return dec


_OVERRIDE_KEY = re.compile(r"(\w+)\.(\w+)(?:\[(\d+)\](?:\.(\w+))?)?")
_OVERRIDE_FORMS = "section.key=value or section.list[N].key=value, e.g. train.lr=3e-4 or data.corpora[1].weight=0.5"


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """'train.lr=3e-4' -> (['train', 'lr'], 0.0003); 'data.corpora[1].weight=0.5' -> (['data', 'corpora', 1,
    'weight'], 0.5); 'data.corpora[1]={...}' replaces the whole entry. The value is read as YAML."""
    key, equals, value = text.partition("=")
    match = _OVERRIDE_KEY.fullmatch(key.strip())
    if not equals or match is None:
        raise UserError(f"--set {text!r}: expected {_OVERRIDE_FORMS}")
    section, name, index, item = match.groups()
    path: list[str | int] = [section, name] + ([int(index)] if index is not None else []) + ([item] if item else [])
    try:
        return path, yaml.safe_load(value)
    except yaml.YAMLError as err:
        raise UserError(f"--set {text!r}: the value is not valid YAML ({_yaml_problem(err)}); quote it") from None


Overrides = Sequence[str] | Mapping[str, Any]  # --set texts, or a mapping of the same keys to values


def override_texts(overrides: Overrides) -> list[str]:
    """``--set`` texts from a list of them or from a mapping ``{"train.lr": 3e-4}`` (whose values are written
    as JSON, which ``parse_override`` reads back as the YAML it is)."""
    if isinstance(overrides, str):
        raise UserError(f"overrides {overrides!r}: give a list of 'section.key=value' texts or a mapping")
    if isinstance(overrides, Mapping):
        return [f"{key}={json.dumps(value, ensure_ascii=False, default=str)}" for key, value in overrides.items()]
    return list(overrides)


def _apply_override(raw: dict[str, Any], text: str) -> None:
    """Put one ``--set`` into the nested dict ``raw`` (whose sections are copies), copying what it changes
    below them, so that the caller's lists and entries stay as they were."""
    path, value = parse_override(text)
    section = raw.setdefault(path[0], {})
    if not isinstance(section, dict):
        raise UserError(f"--set {text!r}: {path[0]!r} is not a section")
    if len(path) == 2:
        section[path[1]] = value
        return
    key, index = f"{path[0]}.{path[1]}", path[2]
    entries = section.get(path[1])
    if not isinstance(entries, list | tuple):
        raise UserError(f"--set {text!r}: {key} is not a list in this config; set the whole list, e.g. {key}=[...]")
    if index >= len(entries):
        have = f"entries 0-{len(entries) - 1}" if entries else "no entries"
        raise UserError(f"--set {text!r}: {key}[{index}] is out of range ({key} has {have})")
    entries = section[path[1]] = list(entries)
    if len(path) == 3:
        entries[index] = value
        return
    if not isinstance(entries[index], dict):
        raise UserError(f"--set {text!r}: {key}[{index}] is not a mapping of keys")
    entries[index] = {**entries[index], path[3]: value}


def config_from_dict(raw: dict[str, Any], where: str, overrides: list[str] = ()) -> Config:
    """Build and validate a Config from a nested dict plus ``section.key=value`` overrides."""
    if not isinstance(raw, dict):
        raise UserError(
            f"{where}: expected a mapping of sections (model, data, train, decode, eval), got {type(raw).__name__}"
        )
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for text in overrides:
        _apply_override(raw, text)
    cfg = _build(Config, raw, where)
    _validate(cfg, where)
    return cfg


def load_config(config: str | Path, overrides: list[str] = ()) -> Config:
    """Read a YAML config file or packaged recipe (``seq2seq.recipes``; safe_load) and apply ``--set`` overrides."""
    path = find_config(config)
    try:
        raw = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not valid UTF-8 (byte {err.start}); save the file as UTF-8") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}{line}: not valid YAML ({_yaml_problem(err)})") from None
    return config_from_dict({} if raw is None else raw, str(path), overrides)


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What a YAML error says went wrong, on one line (PyYAML's own text spans several)."""
    problem = getattr(err, "problem", None) or getattr(err, "reason", None) or str(err)
    return " ".join(str(problem).split())


def save_config(cfg: Config, path: Path) -> None:
    """Write the resolved config as YAML."""
    write_text_atomically(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
