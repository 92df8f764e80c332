"""seq2seq.decode.translator and the engines: what an engine lacks is refused in one line naming it,
before anything is searched; the torch engine has every capability; the loader reads each checkpoint
of an ensemble once; the CLI refuses an option the engine lacks before loading a model."""

import pytest
import torch
from conftest import one_line_error, run_cli

import seq2seq.decode.loader as loader
from seq2seq.config import DecodeConfig
from seq2seq.data.tokenizer import PieceOptions, Tokenizer
from seq2seq.decode.batched import sentences_per_batch
from seq2seq.decode.ctranslate2 import CTranslate2Translator
from seq2seq.decode.glossary import Glossary
from seq2seq.decode.loader import engine_class, load_translator
from seq2seq.decode.sampling import TokenSampler
from seq2seq.decode.search import Hypothesis
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.decode.translator import PLAIN, Capabilities, Translator
from seq2seq.errors import UserError
from seq2seq.model.ensemble import Ensemble
from seq2seq.text.placeholders import PLACEHOLDERS

CPU = torch.device("cpu")


class EchoEngine(Translator):
    """An engine with no optional capability whose search returns each source's ids (without <end>)."""

    engine = "echo"

    def search(self, sources, beam, nbest, options=PLAIN):
        self.searched = sources
        return [[Hypothesis(ids[:-1], -1.0)] for ids in sources]


@pytest.fixture(scope="module")
def echo(toy_run) -> EchoEngine:
    tokenizer = load_translator([toy_run], CPU).tokenizer
    return EchoEngine(tokenizer, DecodeConfig(), CPU, max_positions=64)


def test_an_engine_without_a_capability_refuses_it_by_name(echo):
    refused = {
        "sampling": dict(sampler=TokenSampler(seed=1)),
        "prefixes": dict(prefixes=["We"]),
        "constraints": dict(glossary=Glossary([("北京", "Beijing")])),
    }
    for feature, options in refused.items():
        with pytest.raises(UserError, match=f"the echo engine does not support {feature}; use --engine torch"):
            echo.translate(["我们走吧。"], **options)
    with pytest.raises(UserError, match="the echo engine does not support scoring"):
        echo.score(["我们走吧。"], ["Let's go."])
    with pytest.raises(UserError, match="the echo engine does not support attention"):
        echo.attention("我们走吧。", [5, 6])


def test_plain_translation_runs_through_the_engines_search(echo):
    (result,) = echo.translate(["我们走吧。"], beam=2)
    assert echo.searched == [echo.encode("我们走吧。")]
    assert result.best.tokens == echo.encode("我们走吧。")[:-1] and result.best.score == -1.0


def test_the_engines_declare_what_they_support():
    assert TorchTranslator.capabilities == Capabilities(*[True] * 8)
    assert CTranslate2Translator.capabilities.missing(
        sampling=True,
        prefixes=True,
        constraints=True,
        attention=True,
        scoring=True,
        ensembles=True,
        trace=True,
        explain=True,
    ) == ["sampling", "prefixes", "constraints", "attention", "scoring", "ensembles", "trace", "explain"]
    assert engine_class("ctranslate2") is CTranslate2Translator
    with pytest.raises(UserError, match="--engine 'onnx'"):
        engine_class("onnx")


def test_an_ensemble_loads_each_checkpoint_once(toy_run, monkeypatch):
    loaded = []
    real = loader.load_checkpoint
    monkeypatch.setattr(loader, "load_checkpoint", lambda path: loaded.append(path) or real(path))
    translator = load_translator([toy_run, toy_run / "best.pt"], CPU)
    assert isinstance(translator.model, Ensemble) and len(translator.model.members) == 2
    assert loaded == [toy_run / "best.pt", toy_run / "best.pt"]


def test_ctranslate2_refuses_an_ensemble_before_loading(tmp_path):
    with pytest.raises(UserError, match="the ctranslate2 engine does not support ensembles"):
        load_translator([tmp_path / "a", tmp_path / "b"], CPU, engine="ctranslate2")


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--trace"], "--trace"),
        (["--sample"], "--sample"),
        (["--prefix", "We"], "--prefix"),
        (["--glossary", "terms.tsv"], "--glossary"),
        (["--model", "a", "--model", "b"], "--model"),
    ],
)
def test_the_cli_refuses_what_ctranslate2_lacks_before_loading(tmp_path, flags, named):
    line = one_line_error(run_cli("translate", "--engine", "ctranslate2", *flags, "你好", cwd=tmp_path))
    assert line.startswith(f"seq2seq: error: {named} needs ") and "the ctranslate2 engine lacks" in line


@pytest.mark.parametrize(
    ("configured", "precision", "device", "expected"),
    [
        (None, "float32", "cpu", 64),
        (None, "bf16", "cpu", 192),  # half the bytes per row, and products that gain from more rows
        (None, "bf16-autocast", "cpu", 64),  # training's float32 weights under autocast
        (None, "bf16", "cuda", 64),  # measured on CPUs only
        (8, "bf16", "cpu", 8),  # a size that is set stays
    ],
)
def test_an_unset_batch_size_depends_on_the_weights_and_the_device(configured, precision, device, expected):
    assert sentences_per_batch(configured, precision, torch.device(device)) == expected


def test_a_translator_decodes_in_batches_of_its_own_precision(toy_run):
    sizes = {p: load_translator([toy_run], CPU, precision=p).decode.batch_sentences for p in ("float32", "bf16")}
    assert sizes == {"float32": 64, "bf16": 192}  # the toy recipe leaves decode.batch_sentences unset
    assert load_translator([toy_run], CPU, ["decode.batch_sentences=8"], precision="bf16").decode.batch_sentences == 8


# --- The text stage around an engine ---------------------------------------------------------------


class DroppingEcho(EchoEngine):
    """An echo engine whose "model" leaves out the ids of ``dropped`` pieces, as a model may drop a span."""

    dropped: tuple[str, ...] = ()

    def search(self, sources, beam, nbest, options=PLAIN):
        ids = {self.tokenizer.tgt.piece_to_id(piece) for piece in self.dropped}
        echoed = super().search(sources, beam, nbest)
        return [[Hypothesis([i for i in h[0].tokens if i not in ids], -1.0)] for h in echoed]


@pytest.fixture(scope="module")
def placeholder_echo(toy_run, toy_pairs) -> DroppingEcho:
    """An echo engine over a tokenizer with the placeholder pieces and byte fallback, in the toy run's languages."""
    src, tgt = toy_pairs
    tokenizer = Tokenizer.train(src, tgt, 2000, True, "unigram", 0.9995, PieceOptions(PLACEHOLDERS, True))
    config = load_translator([toy_run], CPU).config
    return DroppingEcho(tokenizer, DecodeConfig(), CPU, max_positions=64, config=config)


def test_lines_are_translated_sentence_by_sentence_with_their_non_translatables_carried_through(placeholder_echo):
    lines = ["我有3个苹果和12本书。访问 https://github.com/x/y 看看 read_file() 吧!", "", "The weather is nice today."]
    paragraph, empty, english = placeholder_echo.translate(lines, beam=1)
    units = [placeholder_echo.tokenizer.decode_tgt(ids[:-1]) for ids in placeholder_echo.searched]
    assert units == ["我有⦅1⦆个苹果和⦅2⦆本书。", "访问 ⦅1⦆ 看看 ⦅2⦆() 吧!"]  # one batch, two sentences
    assert paragraph.best.text == "我有3个苹果和12本书。 访问 https://github.com/x/y 看看 read_file() 吧!"
    assert paragraph.warnings == [] and len(paragraph.sentences) == 2 and paragraph.confidence is not None
    assert empty.best.text == "" and empty.sentences == []
    assert english.best.text == "The weather is nice today." and "target language" in english.warnings[0]


def test_a_span_the_model_dropped_is_appended_and_reported(placeholder_echo):
    placeholder_echo.dropped = ("⦅2⦆",)
    try:
        (result,) = placeholder_echo.translate(["我有3个苹果和12本书。"], beam=1)
    finally:
        placeholder_echo.dropped = ()
    assert result.best.text == "我有3个苹果和本书 12。"
    assert result.warnings == ["'12' was dropped by the model: appended"]


def test_a_model_without_placeholders_reads_its_input_unmasked(echo):
    (result,) = echo.translate(["我有3个苹果。"])
    assert echo.searched == [echo.encode("我有3个苹果。")]
    assert "⦅" not in result.best.text
