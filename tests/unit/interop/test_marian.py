"""seq2seq.interop.marian: a MarianMT directory (transformers' save_pretrained, random weights, OPUS-MT's
layout of ids) becomes our model and tokenizer; our greedy search then gives transformers' own
``generate()`` tokens on toy sentences, the teacher-forced logits agree, and a round trip through
our export is bit-identical. What our model cannot express is a one-line error."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import CLI_ENV, END, PAD, REPO, START, UNK, one_line_error, run_cli

from seq2seq.decode.loader import load_translator
from seq2seq.decode.search import greedy_search
from seq2seq.errors import UserError
from seq2seq.export.transformers import export_transformers
from seq2seq.interop.marian import import_marian, interleaving, is_marian_dir, require_transformers
from seq2seq.model.layers import sinusoids
from seq2seq.model.masks import padding_mask

LIMIT = 24  # tokens per output, the same for both (ours: max_len_a 0, max_len_b LIMIT; theirs: max_new_tokens)
SENTENCES = 100


@pytest.fixture(scope="module")
def theirs(marian_dir):
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(str(marian_dir)).eval(), MarianTokenizer.from_pretrained(str(marian_dir))


@pytest.fixture(scope="module")
def ours(marian_dir):
    return import_marian(marian_dir)


@pytest.fixture(scope="module")
def sentences(toy_pairs) -> list[str]:
    return toy_pairs[0][-SENTENCES:]


def _mapping(marian_dir, tokenizer) -> torch.Tensor:
    """(V_theirs,) our id of each MarianMT id (the import moves the special ids)."""
    vocab = json.loads((marian_dir / "vocab.json").read_text(encoding="utf-8"))
    ours = {piece: i for i, piece in enumerate(tokenizer.vocabulary)}
    mapping = torch.empty(len(vocab), dtype=torch.long)
    for piece, i in vocab.items():
        mapping[i] = ours[piece]
    return mapping


def test_special_ids_move_to_ours_and_a_start_row_is_added(marian_dir, ours):
    model, tokenizer, cfg = ours
    vocab = json.loads((marian_dir / "vocab.json").read_text(encoding="utf-8"))
    assert tokenizer.vocabulary[PAD] == "<pad>" and tokenizer.vocabulary[UNK] == "<unk>"
    assert tokenizer.vocabulary[END] == "</s>" and tokenizer.vocabulary[START] == "<start>"
    assert len(tokenizer.vocabulary) == len(vocab) + 1 == model.out_proj.weight.size(0)
    assert cfg.model.decoder_start == "pad" and cfg.model.activation == "silu" and cfg.model.output_bias
    assert torch.count_nonzero(model.src_embed.tokens.weight[START]) == 0  # the added row


def test_the_tokenizer_gives_marian_tokenizers_ids(marian_dir, theirs, ours, sentences):
    _, marian_tokenizer = theirs
    tokenizer = ours[1]
    mapping = _mapping(marian_dir, tokenizer)
    for text in sentences:
        expected = mapping[torch.tensor(marian_tokenizer(text).input_ids)].tolist()
        assert tokenizer.encode_src(text) == expected
    assert (
        tokenizer.encode_tgt("Tom is here.")
        == mapping[torch.tensor(marian_tokenizer(text_target="Tom is here.").input_ids[:-1])].tolist()
    )


def test_marian_sinusoids_are_ours_permuted(theirs):
    table = theirs[0].model.encoder.embed_positions.weight  # (128, 32): sines first, cosines second
    torch.testing.assert_close(table[:, interleaving(32)], sinusoids(128, 32), atol=1e-4, rtol=0)
    assert not torch.allclose(table, sinusoids(128, 32), atol=1e-2)  # the layouts do differ


def test_greedy_search_gives_generates_tokens(marian_dir, theirs, ours, sentences):
    marian, marian_tokenizer = theirs
    model, tokenizer, _ = ours
    mapping = _mapping(marian_dir, tokenizer)
    batch = marian_tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = marian.generate(**batch, max_new_tokens=LIMIT, num_beams=1, do_sample=False)  # (B, 1+T)
    src = mapping[batch.input_ids].masked_fill(batch.attention_mask == 0, PAD)  # ours, right-padded with our <pad>
    mine = greedy_search(model, src, max_len_a=0, max_len_b=LIMIT)
    expected = [row[: row.index(END)] if END in row else row for row in mapping[generated[:, 1:]].tolist()]
    # Guards: a random model repeats itself, but the source still steers it, and both endings occur.
    assert len({tuple(t) for t in expected}) > 5
    assert any(len(t) < LIMIT for t in expected) and any(len(t) == LIMIT for t in expected)
    assert [h.tokens for h in mine] == expected


def test_teacher_forced_logits_agree_on_the_references(marian_dir, theirs, ours, sentences, toy_pairs):
    """Every real position of every reference, MarianMT's ids picked out of our (one row longer) logits."""
    marian, marian_tokenizer = theirs
    model, tokenizer, _ = ours
    mapping = _mapping(marian_dir, tokenizer)
    references = toy_pairs[1][-SENTENCES:]
    batch = marian_tokenizer(sentences, text_target=references, return_tensors="pt", padding=True)
    labels = batch.pop("labels")  # (B, T): y… </s>, padded with MarianMT's <pad>
    start = torch.full_like(labels[:, :1], marian.config.decoder_start_token_id)
    decoder_in = torch.cat([start, labels[:, :-1]], dim=1)  # <pad> y…
    with torch.no_grad():
        their_logits = marian(**batch, decoder_input_ids=decoder_in).logits  # (B, T, V_theirs)
        src = mapping[batch.input_ids].masked_fill(batch.attention_mask == 0, PAD)
        src_mask = padding_mask(src, PAD)
        states = model.decode(mapping[decoder_in], model.encode(src, src_mask), src_mask)
        my_logits = model.logits(states)[..., mapping]
    real = labels != marian.config.pad_token_id
    assert real.sum() > 5 * SENTENCES  # guard: whole sentences, not a token each
    torch.testing.assert_close(my_logits[real], their_logits[real], atol=1e-4, rtol=1e-4)


def test_round_trip_through_our_export_is_bit_identical(marian_dir, ours, tmp_path):
    exported = export_transformers(marian_dir, tmp_path / "hf")
    model, tokenizer, cfg = ours
    again, tokenizer_again, cfg_again = import_marian(exported)
    assert cfg_again.model == cfg.model
    assert tokenizer_again.vocabulary == tokenizer.vocabulary
    assert tokenizer_again.serialized() == tokenizer.serialized()
    first, second = model.state_dict(), again.state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_translate_and_translator_take_a_marian_directory(marian_dir, ours, sentences):
    translator = load_translator([marian_dir], torch.device("cpu"), ["decode.beam=1"], precision="float32")
    assert translator.decode.beam == 1
    result = run_cli(
        "translate",
        "--model",
        str(marian_dir),
        "--device",
        "cpu",
        "--precision",
        "float32",
        "--beam",
        "1",
        sentences[0],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == translator.translate([sentences[0]], 1)[0].best.text


def _edited(marian_dir, tmp_path, **changes):
    copy = tmp_path / "edited"
    shutil.copytree(marian_dir, copy)
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    config.update(changes)
    (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scale_embedding": False}, "scale_embedding is not true"),
        ({"decoder_ffn_dim": 128}, "different feed-forward widths"),
        ({"activation_function": "tanh"}, "activation 'tanh'"),
        ({"share_encoder_decoder_embeddings": False}, "not shared"),
        ({"decoder_start_token_id": 5}, "decoder_start_token_id 5"),
    ],
)
def test_what_our_model_cannot_express_is_refused_in_one_line(marian_dir, tmp_path, changes, message):
    with pytest.raises(UserError, match=message):
        import_marian(_edited(marian_dir, tmp_path, **changes))


def test_the_command_line_refuses_an_unusable_marian_directory_in_one_line(marian_dir, tmp_path):
    edited = _edited(marian_dir, tmp_path, scale_embedding=False)
    line = one_line_error(run_cli("translate", "--model", str(edited), "--device", "cpu", "你好"))
    assert "scale_embedding" in line


def test_is_marian_dir(marian_dir, tmp_path):
    assert is_marian_dir(marian_dir)
    assert not is_marian_dir(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "bart"}', encoding="utf-8")
    assert not is_marian_dir(tmp_path)


def test_a_missing_extra_is_a_one_line_error_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` raise ImportError
    with pytest.raises(UserError, match=r"pip install 'seq2seq\[hf\]'"):
        require_transformers()


def test_the_command_lines_import_path_does_not_import_transformers():
    code = "import sys, seq2seq.cli; assert 'transformers' not in sys.modules, 'transformers imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=CLI_ENV)
    assert result.returncode == 0, result.stderr
