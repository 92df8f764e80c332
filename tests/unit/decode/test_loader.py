"""seq2seq.decode.loader: the decoding precision (auto, float32, bf16; bf16 on a CPU sizes oneDNN's kernel caches)
and the loader the verbs share."""

import os

import pytest
import torch
from conftest import attention_as_without_amx, greedy_score, main_error, one_line_error, run_cli

import seq2seq.cli.common
import seq2seq.decode.threads
from seq2seq.cli import build_parser, main
from seq2seq.cli.common import load_for
from seq2seq.data.corpus import read_lines
from seq2seq.decode.batched import pad_batch
from seq2seq.decode.forced import score_ids
from seq2seq.decode.loader import load_translator
from seq2seq.decode.search import length_limits
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


# The most a bf16 greedy score may differ from the float32 model's score of the same output: this much per
# token (its <end> counted) and three tokens' worth more for short outputs. Measured on the toy run's 100 test
# sentences on an AMX Xeon: at most 0.62 of it with the AMX kernels and with those of a CPU without (oneDNN
# held to AVX-512 BF16 or AVX2 as well); 2% noise in the bf16 weights goes to 2.2 of it, 1% to 1.7, 10% to 4.8.
BF16_PER_TOKEN = 0.012


@pytest.mark.parametrize("kernels", ["as the CPU picks", "without AMX"])
def test_bf16_greedy_scores_are_the_float32_models_scores(toy_run, monkeypatch, kernels):
    """Each sentence's bf16 greedy score against the float32 model's log-probability of that output: an error
    in the bf16 copy (its weights, its kernels, its softmax) shows; running greedy and the scorer on the same bf16
    weights would shift both sides alike."""
    if kernels == "without AMX":
        attention_as_without_amx(monkeypatch)
    float32 = load_translator([toy_run], CPU, precision="float32")
    bf16 = load_translator([toy_run], CPU, precision="bf16")
    assert bf16.precision == "bf16" and float32.precision == "float32"
    assert next(bf16.model.parameters()).dtype == torch.float32  # attention maps etc. read the float32 model
    assert next(bf16.search_model.parameters()).dtype == torch.bfloat16
    sources = [bf16.encode(s) for s in read_lines(toy_run / "test.src", "test.src")]
    found = [hyps[0] for hyps in bf16.search(sources, beam=1, nbest=1)]
    assert sum(bool(h.tokens) for h in found) >= 0.8 * len(sources)  # guard: the toy model says something
    forced = score_ids(float32.model, sources, [h.tokens for h in found], CPU, 64, 1.0)
    decode, positions = bf16.decode, float32.model.cfg.max_positions
    limits = length_limits(pad_batch(sources, CPU), decode.max_len_a, decode.max_len_b, positions).tolist()
    for h, f, limit in zip(found, forced, limits, strict=True):
        allowed = BF16_PER_TOKEN * (len(h.tokens) + 1 + 3)
        assert h.score == pytest.approx(greedy_score(f.token_log_probs, len(h.tokens), limit), abs=allowed), (h, f)


def test_a_bf16_decode_on_a_cpu_sizes_onednns_kernel_caches_unless_the_user_did(toy_run, monkeypatch):
    for name in ONEDNN_CACHES:
        monkeypatch.delenv(name, raising=False)
    load_translator([toy_run], CPU, precision="float32")
    assert not any(name in os.environ for name in ONEDNN_CACHES)  # float32 never reaches oneDNN
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "64")
    load_translator([toy_run], CPU, precision="bf16")
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(ONEDNN_CACHE_ENTRIES)
    assert os.environ["LRU_CACHE_CAPACITY"] == "64"


@pytest.mark.parametrize(("precision", "dtype"), [("float32", torch.float32), ("bf16", torch.bfloat16)])
def test_cli_precision_flag(toy_run, monkeypatch, capsys, precision, dtype):
    loaded = []
    monkeypatch.setattr(
        seq2seq.cli.common, "load_translator", lambda *a: loaded.append(load_translator(*a)) or loaded[0]
    )
    main(["translate", "--model", str(toy_run), "--device", "cpu", "--precision", precision, "我们走吧。"])
    assert capsys.readouterr().out.strip()
    (translator,) = loaded  # the flag reached the translator, and its searches ran on weights of that dtype
    assert translator.precision == precision and next(translator.search_model.parameters()).dtype == dtype
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
