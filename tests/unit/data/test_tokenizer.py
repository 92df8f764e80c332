"""seq2seq.data.tokenizer: SentencePiece training on the toy corpus, special ids, round trips, UNK, save/load."""

import pytest

from seq2seq.data.corpus import normalize
from seq2seq.data.tokenizer import JOINT, SRC, TGT, VOCABULARY, Tokenizer, seed_sampling
from seq2seq.errors import UserError
from seq2seq.special import BOS, EOS, PAD, UNK

VOCAB = 1200  # the toy corpus has ~1070 distinct characters; the vocabulary must hold them


def _train(pairs, joint=True, vocab_size=VOCAB, coverage=0.9995, model_type="unigram") -> Tokenizer:
    src, tgt = pairs
    return Tokenizer.train(src, tgt, vocab_size, joint, model_type, coverage)


@pytest.fixture(scope="module")
def joint(toy_pairs) -> Tokenizer:
    return _train(toy_pairs)


@pytest.fixture(scope="module")
def separate(toy_pairs) -> Tokenizer:
    return _train(toy_pairs, joint=False)


@pytest.fixture(scope="module")
def full_coverage(toy_pairs) -> Tokenizer:
    """Every character of the corpus in the vocabulary, so every sentence round-trips."""
    return _train(toy_pairs, coverage=1.0)


def test_special_ids_and_pieces(joint, separate):
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    for processor in (joint.src, separate.src, separate.tgt):
        assert [processor.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<start>", "<end>"]
        assert (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) == (0, 1, 2, 3)


def test_vocab_size(joint):
    assert joint.src_vocab_size == joint.tgt_vocab_size == VOCAB


@pytest.mark.parametrize("vocab_size", [200, 1000])
def test_too_small_vocab_is_a_user_error(toy_pairs, vocab_size):
    with pytest.raises(UserError, match=rf"data\.vocab_size={vocab_size}"):
        _train(toy_pairs, vocab_size=vocab_size)


def test_bpe_model_type_trains(toy_pairs):
    tok = _train(toy_pairs, model_type="bpe")
    text = toy_pairs[1][10]
    assert tok.decode_tgt(tok.encode_tgt(text)) == text


def test_round_trip_every_corpus_sentence(full_coverage, toy_pairs):
    src, tgt = toy_pairs
    for x in tgt:
        assert full_coverage.decode_tgt(full_coverage.encode_tgt(x)) == x
    for x in src:
        ids = full_coverage.encode_src(x)
        assert UNK not in ids
        assert full_coverage.src.decode(ids[:-1]) == x


def test_round_trip_with_default_coverage(joint, toy_pairs):
    """Below full coverage the rarest characters become <unk>; everything else round-trips."""
    src, tgt = toy_pairs
    lossy = 0
    for x in src + tgt:
        ids = joint.encode_tgt(x)
        if UNK in ids:
            lossy += 1
        else:
            assert joint.decode_tgt(ids) == x
    assert lossy < 0.02 * len(src + tgt)
    for x in tgt:  # Latin script is common enough never to fall to <unk>
        assert joint.decode_tgt(joint.encode_tgt(x)) == x


@pytest.mark.parametrize("raw", ["你好，朋友！  我们　走吧。", "  Tom  is   ＨＥＲＥ . "])
def test_round_trip_of_unnormalized_text_gives_normalized_text(full_coverage, raw):
    text = normalize(raw)
    assert UNK not in full_coverage.encode_tgt(text)
    assert full_coverage.decode_tgt(full_coverage.encode_tgt(text)) == text
    assert full_coverage.src.decode(full_coverage.encode_src(text)[:-1]) == text


def test_encode_src_ends_with_end_and_encode_tgt_has_no_specials(joint, toy_pairs):
    src, tgt = toy_pairs
    for x in src[:200]:
        ids = joint.encode_src(x)
        assert ids[-1] == EOS and EOS not in ids[:-1]
        assert BOS not in ids and PAD not in ids
    for y in tgt[:200]:
        ids = joint.encode_tgt(y)
        assert ids and all(i == UNK or i > EOS for i in ids)


def test_decode_tgt_drops_special_ids(joint):
    ids = joint.encode_tgt("Tom is here.")
    assert joint.decode_tgt([BOS, *ids, EOS, PAD, PAD]) == "Tom is here."


@pytest.mark.parametrize("unseen", ["鬱", "𠀀", "😀", "ж"])
def test_unseen_characters_become_unk(joint, toy_pairs, unseen):
    src, tgt = toy_pairs
    assert all(unseen not in line for line in src + tgt), "pick a character that is not in the corpus"
    text = f"我{unseen}你"
    ids = joint.encode_src(text)
    assert UNK in ids and ids[-1] == EOS
    assert joint.encode_tgt(unseen) in ([UNK], [joint.src.piece_to_id("▁"), UNK])
    decoded = joint.decode_tgt(joint.encode_tgt(text))  # must not crash
    assert unseen not in decoded and "我" in decoded and "你" in decoded


def test_joint_vocabulary_is_shared(joint):
    assert joint.joint and joint.src is joint.tgt
    assert joint.src.piece_to_id("你") != UNK and joint.src.piece_to_id("▁Tom") != UNK


def test_separate_vocabularies_are_per_side(separate):
    assert not separate.joint and separate.src is not separate.tgt
    assert separate.src.piece_to_id("你") != UNK
    assert separate.tgt.piece_to_id("你") == UNK  # English-only target side
    assert separate.tgt.piece_to_id("e") != UNK
    assert separate.encode_tgt("Tom is here.") != separate.src.encode("Tom is here.")


@pytest.mark.parametrize("kind", ["joint", "separate"])
def test_save_load_round_trip(request, tmp_path, toy_pairs, kind):
    tok = request.getfixturevalue(kind)
    tok.save(tmp_path)
    expected_files = {JOINT} if kind == "joint" else {SRC, TGT}
    assert {p.name for p in tmp_path.iterdir()} == expected_files
    loaded = Tokenizer.load(tmp_path)
    assert loaded.joint == tok.joint
    assert (loaded.src_vocab_size, loaded.tgt_vocab_size) == (tok.src_vocab_size, tok.tgt_vocab_size)
    src, tgt = toy_pairs
    for x, y in zip(src[::50], tgt[::50], strict=True):
        assert loaded.encode_src(x) == tok.encode_src(x)
        assert loaded.encode_tgt(y) == tok.encode_tgt(y)


def test_load_from_empty_dir_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no tokenizer"):
        Tokenizer.load(tmp_path)


def test_load_with_only_one_side_is_a_user_error(tmp_path, separate):
    separate.save(tmp_path)
    (tmp_path / TGT).unlink()
    with pytest.raises(UserError, match="no tokenizer"):
        Tokenizer.load(tmp_path)


# --- sampled segmentations (subword regularization) ----------------------------------------------
@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_sampled_segmentations_decode_to_the_text_and_vary(toy_pairs, model_type):
    tok = _train(toy_pairs, coverage=1.0, model_type=model_type)
    sentence = max(toy_pairs[1], key=len)  # the longest English sentence: many ways to split it
    best = tok.encode_tgt(sentence)
    seed_sampling(1)
    samples = [tok.encode_tgt(sentence, alpha=0.1) for _ in range(30)]
    assert all(tok.decode_tgt(ids) == sentence for ids in samples)
    assert any(ids != best for ids in samples)  # some samples split differently
    assert tok.encode_src(toy_pairs[0][3], alpha=0.1)[-1] == EOS  # sampled sources still end with <end>
    seed_sampling(1)
    assert [tok.encode_tgt(sentence, alpha=0.1) for _ in range(30)] == samples  # the seed decides


# --- one shared vocabulary over two segmenters (MarianMT's layout) ------------------------------
@pytest.fixture(scope="module")
def shared(separate) -> Tokenizer:
    """The separate side models, their pieces given ids by one vocabulary: the specials, then every piece of
    either side once, in reverse order (so the ids are not either model's own)."""
    pieces = [separate.src.id_to_piece(i) for i in range(4, separate.src.get_piece_size())]
    pieces += [
        p for p in (separate.tgt.id_to_piece(i) for i in range(4, separate.tgt.get_piece_size())) if p not in pieces
    ]
    vocabulary = ["<pad>", "<unk>", "<start>", "</s>", *reversed(pieces)]
    return Tokenizer(separate.src.serialized_model_proto(), separate.tgt.serialized_model_proto(), vocabulary)


def test_a_shared_vocabulary_gives_each_sides_pieces_its_ids(shared, toy_pairs):
    src, tgt = toy_pairs
    ids = {piece: i for i, piece in enumerate(shared.vocabulary)}
    assert shared.src_vocab_size == shared.tgt_vocab_size == len(shared.vocabulary)
    for x, y in zip(src[::50], tgt[::50], strict=True):
        assert shared.encode_src(x) == [ids.get(p, UNK) for p in shared.src.encode(x, out_type=str)] + [EOS]
        assert shared.encode_tgt(y) == [ids.get(p, UNK) for p in shared.tgt.encode(y, out_type=str)]
        if UNK not in shared.encode_tgt(y):  # a character the target model lacks is lost, as with its own ids
            assert shared.decode_tgt(shared.encode_tgt(y)) == y
    assert sum(UNK not in shared.encode_tgt(y) for y in tgt[::50]) > 0.8 * len(tgt[::50])
    assert shared.encode_src_batch(src[:20]) == [shared.encode_src(x) for x in src[:20]]
    assert shared.encode_tgt_batch(tgt[:20]) == [shared.encode_tgt(y) for y in tgt[:20]]
    assert shared.encode_tgt("鬱") in ([UNK], [ids["▁"], UNK])  # outside the vocabulary: <unk>
    assert shared.tgt_pieces(shared.encode_tgt("Tom")) == shared.tgt.encode("Tom", out_type=str)


def test_a_piece_of_the_other_side_decodes_as_its_text(shared):
    """A source piece in a translation (the vocabulary is shared, the target model does not know it)."""
    ids = {piece: i for i, piece in enumerate(shared.vocabulary)}
    assert shared.decode_tgt([*shared.encode_tgt("Tom said"), ids["你"]]) == "Tom said你"


def test_a_shared_vocabulary_saves_and_loads(shared, tmp_path, toy_pairs):
    shared.save(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {SRC, TGT, VOCABULARY}
    loaded = Tokenizer.load(tmp_path)
    assert loaded.vocabulary == shared.vocabulary and loaded.serialized() == shared.serialized()
    assert loaded.encode_src(toy_pairs[0][7]) == shared.encode_src(toy_pairs[0][7])
    (tmp_path / VOCABULARY).write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(UserError, match=r"spm\.vocab\.json: expected a JSON list of pieces"):
        Tokenizer.load(tmp_path)
