"""Fuzzing the config loader and the ``--set`` parser: random YAML trees, random files and random key paths
give a Config that is valid and usable, or a one-line UserError naming the file or the override -- never
another exception."""

import dataclasses
import datetime
import math
import re
import types
import typing

import pytest
import torch
import yaml
from conftest import FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.config import Config, config_from_dict, load_config, save_config
from seq2seq.errors import UserError
from seq2seq.train.trainer import adamw, lr_factor

SECTIONS = {f.name: f.type for f in dataclasses.fields(Config)}
KEYS = sorted({f.name for cls in (Config, *SECTIONS.values()) for f in dataclasses.fields(cls)})
HINTS = {section: typing.get_type_hints(cls) for section, cls in SECTIONS.items()}
PATHS = [(section, key) for section, hints in HINTS.items() for key in hints]
# A minimal valid config, so that random changes to it land past the "set a corpus / stop condition" checks.
BASE = {"data": {"src": "a.zh", "tgt": "a.en"}, "train": {"max_steps": 10}}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(-3, 3000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["auto", "cpu", "cuda", "cuda:1", "bleu", "post", "pre", "all", "bpe", "cosine", "3e-4", "nan"])
    | st.dates()
)
names = st.sampled_from(KEYS + list(SECTIONS)) | st.text(max_size=8)
trees = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=4))


def typed(tp: object) -> st.SearchStrategy:
    """Values of the annotated type, edges included: what a user might plausibly write for the key."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([typed(a) for a in args])
    if origin is tuple and args[-1] is Ellipsis:
        return st.lists(typed(args[0]), max_size=2)
    if origin is tuple:
        return st.tuples(*[typed(a) for a in args]).map(list)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return st.fixed_dictionaries({}, optional={key: typed(hint) for key, hint in hints.items()})
    return {
        int: st.integers(-2, 5000),
        float: st.floats(-1, 10) | st.sampled_from([0.0, 1.0, 1e-9, 0.999999]),
        bool: st.booleans(),
        str: st.text(max_size=10) | st.sampled_from(["cpu", "cuda", "auto", "a.zh"]),
        type(None): st.none(),
    }[tp]


@st.composite
def raw_configs(draw: st.DrawFn) -> dict:
    """The base config with random sections, keys and values put in (mostly at real key paths)."""
    raw = {section: dict(keys) for section, keys in BASE.items()}
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 9))
        if kind < 7:  # a real key, mostly with a value of its type: the configs that load are the interesting ones
            section, key = draw(st.sampled_from(PATHS))
            value = draw(typed(HINTS[section][key]) if kind < 5 else scalars if kind < 6 else trees)
        else:
            section, key, value = draw(st.sampled_from(list(SECTIONS)) | names), draw(names), draw(trees)
        if kind == 9 or not isinstance(raw.get(section, {}), dict):
            raw[section] = value
        else:
            raw.setdefault(section, {})[key] = value
    return raw


def _check_usable(cfg: Config, tmp_path) -> None:
    """An accepted config holds only values validation allows, survives a save/load round trip, builds its
    optimizer and has a finite schedule."""
    _check_validated(cfg.to_dict())
    assert cfg.train.lr > 0 and cfg.train.weight_decay >= 0 and all(0 <= b < 1 for b in cfg.train.adam_betas)
    path = tmp_path / "config.yaml"
    save_config(cfg, path)
    assert load_config(path) == cfg
    adamw(iter([torch.nn.Parameter(torch.zeros(2))]), cfg.train)
    assert all(0 <= lr_factor(step, cfg.train) < float("inf") for step in (0, 1, 10**6))


def _check_validated(tree: object) -> None:
    """Every number of an accepted config is finite and fits in 64 bits (what torch takes)."""
    if isinstance(tree, dict):
        for value in tree.values():
            _check_validated(value)
    elif isinstance(tree, list):
        for value in tree:
            _check_validated(value)
    elif isinstance(tree, float):
        assert math.isfinite(tree), tree
    elif isinstance(tree, int):
        assert -(2**63) <= tree < 2**63, tree


def _check_error(err: UserError, *named: str) -> None:
    message = str(err)
    assert "\n" not in message and "\r" not in message, message
    assert any(name in message for name in named), message


@settings(FUZZ, max_examples=150)
@given(raw=raw_configs())
def test_random_yaml_trees_load_or_are_a_one_line_error(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("cfg") / "random.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    try:
        cfg = load_config(path)
    except UserError as err:
        _check_error(err, str(path))
        return
    _check_usable(cfg, path.parent)


# Random bytes alone almost never load; after the base config's lines, random text sometimes does (a key
# redefined, a value appended), and what loads must be usable.
BASE_TEXT = yaml.safe_dump(BASE)


@settings(FUZZ, max_examples=150)
@given(
    data=st.binary(max_size=200)
    | st.text(max_size=200).map(str.encode)
    | st.text(max_size=200).map(lambda text: (BASE_TEXT + text).encode())
)
def test_random_files_load_or_are_a_one_line_error(tmp_path_factory, data):
    _check_file(tmp_path_factory.mktemp("cfg") / "random.yaml", data)


def _check_file(path, data: bytes) -> None:
    """``data`` written to ``path`` loads as a usable config or is a one-line error naming the file."""
    path.write_bytes(data)
    try:
        cfg = load_config(path)
    except UserError as err:
        _check_error(err, str(path))
        return
    _check_usable(cfg, path.parent)


# The base config written out whole, every key at its default: random characters in place of a few of its
# values make files that load with a changed value far more often than random bytes do, so the usability
# checks meet negative rates, zero sizes and the like that validation let through.
FULL_LINES = yaml.safe_dump(config_from_dict(BASE, "base.yaml").to_dict(), sort_keys=False).splitlines(keepends=True)
VALUE = re.compile(r"(\s+(?:\w+: |- ))\S.*\n")  # the prefix of a line holding a key's (or a list item's) value
VALUE_LINES = [i for i, line in enumerate(FULL_LINES) if VALUE.fullmatch(line)]
value_texts = (
    st.sampled_from(["-1", "0", "-0.5", "0.5", "1", "1.5", "2", "-1e-9", "1e9"])  # at and past the keys' limits
    | st.integers(-3, 5000).map(str)
    | st.floats(-2, 10).map(str)
    | st.text(st.sampled_from("0123456789-+.eE_ :,[]{}#'\"\t"), max_size=8)
    | st.text(max_size=8)
)


@st.composite
def edited_files(draw: st.DrawFn) -> bytes:
    """The whole base config with one or two values replaced by random text."""
    lines = list(FULL_LINES)
    for i in draw(st.lists(st.sampled_from(VALUE_LINES), min_size=1, max_size=2, unique=True)):
        lines[i] = VALUE.fullmatch(lines[i]).group(1) + draw(value_texts) + "\n"
    return "".join(lines).encode()


@settings(FUZZ, max_examples=150)
@given(data=edited_files())
def test_a_config_file_with_random_values_loads_usable_or_is_a_one_line_error(tmp_path_factory, data):
    _check_file(tmp_path_factory.mktemp("cfg") / "edited.yaml", data)


key_paths = st.lists(names, min_size=0, max_size=4).map(".".join) | st.text(max_size=20)
typed_overrides = st.sampled_from(PATHS).flatmap(
    lambda path: typed(HINTS[path[0]][path[1]]).map(lambda v: f"{path[0]}.{path[1]}={yaml.safe_dump(v)}")
)
values = (
    st.integers(-3, 5000).map(str)
    | st.floats().map(repr)
    | st.text(max_size=20)
    | st.sampled_from(
        ["[1", "{a: 1", "!!python/object:os.system", "*x", "&a 1", "- 1", ": :", "[0.9, 0.98]", "bf16", "1e9"]
    )
)


@settings(FUZZ, max_examples=300)
@given(overrides=st.lists(typed_overrides | st.tuples(key_paths, values).map("=".join) | st.text(), max_size=3))
def test_random_overrides_apply_or_are_a_one_line_error(tmp_path_factory, overrides):
    try:
        cfg = config_from_dict(BASE, "base.yaml", overrides)
    except UserError as err:
        _check_error(err, "base.yaml", "--set")
        return
    _check_usable(cfg, tmp_path_factory.mktemp("cfg"))


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("data", "src", datetime.date(2020, 1, 1), "expected str"),
        ("model", "d_model", 2**70, "does not fit in a 64-bit integer"),
        ("train", "seed", -(2**63) - 1, "does not fit in a 64-bit integer"),
        ("train", "lr", float("nan"), "expected a finite number"),
        ("train", "weight_decay", float("inf"), "expected a finite number"),
        ("train", "weight_decay", -0.01, "must be >= 0"),
        ("train", "adam_betas", [1.5, 0.9], "must both be in [0, 1)"),
    ],
)
def test_dates_huge_numbers_and_impossible_values_are_named_errors(section, key, value, message):
    raw = {s: dict(k) for s, k in BASE.items()}
    raw.setdefault(section, {})[key] = value
    with pytest.raises(UserError, match=rf"^x\.yaml\b.*{re.escape(f'{section}.{key}')}.*{re.escape(message)}") as err:
        config_from_dict(raw, "x.yaml")
    _check_error(err.value, f"{section}.{key}")
