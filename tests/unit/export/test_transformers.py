"""seq2seq.export.transformers: the toy run as a MarianMT directory for Hugging Face transformers.

``MarianMTModel.from_pretrained`` and ``MarianTokenizer.from_pretrained`` load it; transformers' greedy
``generate()`` gives our greedy search's tokens on every toy test sentence and the teacher-forced
logits agree within float32 rounding; MarianTokenizer gives our ids and decodes generate()'s output into
our translations; importing the export back
gives our model bit for bit. The command line, and the shapes MarianMT cannot hold, in one line.
"""

import json

import pytest
import torch
from conftest import END, PAD, START, one_line_error, run_cli

from seq2seq.checkpoint import load_checkpoint, save_checkpoint
from seq2seq.config import config_from_dict
from seq2seq.data.corpus import read_lines
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.loader import load_model
from seq2seq.decode.search import greedy_search
from seq2seq.errors import UserError
from seq2seq.export.transformers import export_transformers
from seq2seq.interop.marian import import_marian
from seq2seq.model.masks import padding_mask
from seq2seq.model.transformer import Transformer

CPU = torch.device("cpu")
LIMIT = 30  # tokens per output, the same for both: ours max_len_a 0, max_len_b LIMIT; theirs max_new_tokens


@pytest.fixture(scope="module")
def exported(toy_run, tmp_path_factory):
    return export_transformers(toy_run, tmp_path_factory.mktemp("hf") / "toy-marian")


@pytest.fixture(scope="module")
def theirs(exported):
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(str(exported)).eval(), MarianTokenizer.from_pretrained(str(exported))


def test_the_directory_holds_what_transformers_reads(exported):
    names = {p.name for p in exported.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json"} <= names
    assert {"source.spm", "target.spm", "vocab.json", "tokenizer_config.json"} <= names
    config = json.loads((exported / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "marian" and config["architectures"] == ["MarianMTModel"]
    assert (config["pad_token_id"], config["eos_token_id"], config["decoder_start_token_id"]) == (PAD, END, START)


def test_generate_gives_our_greedy_tokens_on_every_test_sentence(toy_run, theirs):
    marian, marian_tokenizer = theirs
    model, tokenizer, _ = load_model(toy_run, CPU)
    sentences = read_lines(toy_run / "test.src", "test.src")
    batch = marian_tokenizer(sentences, return_tensors="pt", padding=True)
    ids = [tokenizer.encode_src(s) for s in sentences]
    assert [row[: len(mine)] for row, mine in zip(batch.input_ids.tolist(), ids, strict=True)] == ids
    with torch.no_grad():
        generated = marian.generate(**batch, max_new_tokens=LIMIT, num_beams=1, do_sample=False)  # (B, 1+T)
    src = batch.input_ids.masked_fill(batch.attention_mask == 0, PAD)  # our ids: the export keeps them
    mine = greedy_search(model, src, max_len_a=0, max_len_b=LIMIT)
    expected = [row[: row.index(END)] if END in row else row for row in generated[:, 1:].tolist()]
    assert len({tuple(t) for t in expected}) > len(sentences) // 4  # guard: varied, non-empty outputs
    assert [h.tokens for h in mine] == expected

    # Teacher-forced on those outputs: the logits of every real position agree.
    with torch.no_grad():
        their_logits = marian(**batch, decoder_input_ids=generated[:, :-1]).logits  # (B, T, V)
        src_mask = padding_mask(src, PAD)
        my_logits = model.logits(model.decode(generated[:, :-1], model.encode(src, src_mask), src_mask))
    real = torch.zeros(generated[:, 1:].shape, dtype=torch.bool)
    for row, tokens in enumerate(expected):
        real[row, : len(tokens) + 1] = True  # the outputs and their <end>
    torch.testing.assert_close(my_logits[real], their_logits[real], atol=1e-4, rtol=1e-4)


def test_marian_tokenizer_decodes_generate_into_our_translations(toy_run, theirs):
    """What ``pipeline("translation")`` did up to transformers 4 (version 5 removed that task): tokenize,
    ``generate``, ``batch_decode`` without the special tokens."""
    marian, marian_tokenizer = theirs
    model, tokenizer, _ = load_model(toy_run, CPU)
    sentences = read_lines(toy_run / "test.src", "test.src")[:16]
    mine = [
        tokenizer.decode_tgt(greedy_search(model, torch.tensor([tokenizer.encode_src(s)]), 0, LIMIT)[0].tokens)
        for s in sentences
    ]
    with torch.no_grad():
        batch = marian_tokenizer(sentences, return_tensors="pt", padding=True)
        generated = marian.generate(**batch, num_beams=1, max_new_tokens=LIMIT)
    got = marian_tokenizer.batch_decode(generated, skip_special_tokens=True)
    assert sum(bool(t) for t in mine) >= 4  # guard: the toy model says something
    # MarianTokenizer strips the ends, where SentencePiece keeps the spaces of trailing "▁" pieces (an
    # undertrained model emits them).
    assert got == [t.strip() for t in mine]


def test_importing_the_export_gives_our_model_bit_for_bit(toy_run, exported):
    model, tokenizer, cfg = load_model(toy_run, CPU)
    again, tokenizer_again, cfg_again = import_marian(exported)
    assert cfg_again.model == cfg.model
    assert tokenizer_again.src_vocabulary() == tokenizer.src_vocabulary()
    sentences = read_lines(toy_run / "test.src", "test.src")
    assert [tokenizer_again.encode_src(s) for s in sentences] == [tokenizer.encode_src(s) for s in sentences]
    stored = load_checkpoint(toy_run / "best.pt")["model"]
    state = again.state_dict()
    assert state.keys() == stored.keys()
    assert all(torch.equal(state[name], stored[name]) for name in stored)


def test_cli_export_and_its_one_line_errors(tmp_path, toy_run):
    out = tmp_path / "hf"
    done = run_cli("export", str(toy_run), "--to", "transformers", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "model.safetensors").is_file() and f"MarianMTModel.from_pretrained('{out}')" in done.stdout
    again = run_cli("export", str(toy_run), "--to", "transformers", "--out", str(out))  # replaces it whole
    assert again.returncode == 0, again.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directories left
    line = one_line_error(
        run_cli("export", str(toy_run), "--to", "transformers", "--out", str(out), "--quantization", "int8")
    )
    assert "--quantization" in line
    line = one_line_error(run_cli("export", str(tmp_path / "none"), "--to", "transformers", "--out", str(out)))
    assert "no trained model" in line


@pytest.mark.parametrize(
    ("model", "message"),
    [({"norm": "pre"}, "post-norm"), ({"head_dim": 64}, "splits d_model"), ({"tie_embeddings": "none"}, "shared")],
)
def test_what_marian_cannot_hold_is_refused_in_one_line(tmp_path, toy_run, model, message):
    state = load_checkpoint(toy_run / "best.pt")
    raw = {**state["config"], "model": {**state["config"]["model"], **model}}
    cfg = config_from_dict(raw, "test")
    tokenizer = Tokenizer.load(toy_run)
    net = Transformer(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    run = tmp_path / "run"
    run.mkdir()
    tokenizer.save(run)
    save_checkpoint({"model": net.state_dict(), "config": raw, "step": 0}, run / "best.pt")
    with pytest.raises(UserError, match=message):
        export_transformers(run, tmp_path / "out")
    assert not (tmp_path / "out").exists()
