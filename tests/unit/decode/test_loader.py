"""seq2seq.decode.loader: the decoding precision (auto, float32, bf16; bf16 on a CPU sizes oneDNN's kernel caches)
and the loader the verbs share."""

import os

import pytest
import torch
from conftest import main_error, one_line_error, run_cli

import seq2seq.decode.threads
from seq2seq.cli import build_parser
from seq2seq.cli.common import load_for
from seq2seq.data.corpus import read_lines
from seq2seq.decode.loader import load_translator
from seq2seq.device import ONEDNN_CACHE_ENTRIES, ONEDNN_CACHES, decode_precision
from seq2seq.errors import UserError

CPU = torch.device("cpu")


def test_auto_on_cuda_is_bf16_where_supported(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert decode_precision("auto", torch.device("cuda")) == "bf16"


def test_unknown_precision_or_engine_is_a_user_error(toy_run):
    with pytest.raises(UserError, match="--precision"):
        load_translator([toy_run], CPU, precision="fp8")
    with pytest.raises(UserError, match="--engine"):
        load_translator([toy_run], CPU, engine="onnx")


def test_bf16_decodes_with_bf16_weights_and_keeps_the_model_float32(toy_run):
    float32 = load_translator([toy_run], CPU, precision="float32")
    bf16 = load_translator([toy_run], CPU, precision="bf16")
    assert bf16.precision == "bf16" and float32.precision == "float32"
    assert next(bf16.model.parameters()).dtype == torch.float32  # attention maps etc. read the float32 model
    assert next(bf16.search_model.parameters()).dtype == torch.bfloat16
    sentences = read_lines(toy_run / "test.src", "test.src")
    a = [t.best.text for t in float32.translate(sentences, beam=1)]
    b = [t.best.text for t in bf16.translate(sentences, beam=1)]
    # bf16 rounds the logits: where the toy model's best tokens nearly tie, greedy choices flip (68-72 of
    # these 100 outputs stayed the same on a CPU with AMX), but what bf16 picks stays as probable under the
    # float32 model as float32's own picks.
    assert sum(bool(t) for t in a) >= len(sentences) // 4  # guard: the toy model says something
    assert sum(x == y for x, y in zip(a, b, strict=True)) >= 0.5 * len(sentences)
    assert sum(bool(t) for t in b) >= 0.8 * sum(bool(t) for t in a)
    own, picked = (sum(s.log_prob for s in float32.score(sentences, out)) / len(sentences) for out in (a, b))
    assert picked >= own - 0.5  # outputs of the wrong sentences scored 1.2 lower


def test_a_bf16_decode_on_a_cpu_sizes_onednns_kernel_caches_unless_the_user_did(toy_run, monkeypatch):
    for name in ONEDNN_CACHES:
        monkeypatch.delenv(name, raising=False)
    load_translator([toy_run], CPU, precision="float32")
    assert not any(name in os.environ for name in ONEDNN_CACHES)  # float32 never reaches oneDNN
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "64")
    load_translator([toy_run], CPU, precision="bf16")
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(ONEDNN_CACHE_ENTRIES)
    assert os.environ["LRU_CACHE_CAPACITY"] == "64"


def test_cli_precision_flag(toy_run):
    done = run_cli("translate", "--model", str(toy_run), "--precision", "float32", "我们走吧。")
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    error = one_line_error(run_cli("translate", "--engine", "ctranslate2", "--attention", "a.png", "你好"))
    assert "--attention" in error


def test_threads_default_to_the_rule_and_an_explicit_count_overrides_it(toy_run, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(seq2seq.decode.threads, "available_cpus", lambda: 2)
    default = load_translator([toy_run], CPU, precision="float32")
    assert (default.threads, default.workers) == (1, 2)
    given = load_translator([toy_run], CPU, precision="float32", threads=3)
    assert (given.threads, given.workers) == (3, 1)


def test_several_workers_give_the_outputs_of_one(toy_run):
    sentences = read_lines(toy_run / "test.src", "test.src")
    small = ["decode.batch_sentences=4"]  # many batches, so that two workers both get some
    one = load_translator([toy_run], CPU, small, precision="float32", threads=1)
    two = load_translator([toy_run], CPU, small, precision="float32", threads=1)
    two.workers = 2
    assert len(sentences) > 8
    for beam in (1, 3):
        expected = [(t.best.text, t.best.score) for t in one.translate(sentences, beam=beam)]
        assert [(t.best.text, t.best.score) for t in two.translate(sentences, beam=beam)] == expected


def test_a_translator_searches_with_its_own_thread_count(toy_run):
    before = torch.get_num_threads()
    two = load_translator([toy_run], CPU, precision="float32", threads=2)
    one = load_translator([toy_run], CPU, precision="float32", threads=1)
    try:
        two.translate(["我们走吧。"], beam=1)
        assert torch.get_num_threads() == 2
        one.translate(["我们走吧。"], beam=1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_cli_threads_flag_reaches_the_translator(toy_run, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    parser = build_parser()
    given = parser.parse_args(["translate", "--model", str(toy_run), "--device", "cpu", "--threads", "2", "x"])
    default = parser.parse_args(["translate", "--model", str(toy_run), "--device", "cpu", "x"])
    assert load_for(given, [str(toy_run)]).threads == 2
    assert (load_for(default, [str(toy_run)]).threads, load_for(given, [str(toy_run)]).workers) == (1, 1)


def test_cli_negative_threads_is_a_one_line_error(capsys):
    assert "--threads" in main_error(capsys, "translate", "--threads", "-1", "你好")
