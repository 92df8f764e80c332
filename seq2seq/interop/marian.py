"""MarianMT (Hugging Face ``transformers``) and our Transformer: how one's weights, ids and settings are the other's.

``import_marian`` turns a local MarianMT directory (what ``huggingface_hub.snapshot_download`` of an
OPUS-MT model writes) into our model, tokenizer and config; ``translate``/``evaluate``/``serve
--model DIR`` (``seq2seq.decode.loader``) and ``train.init_from`` (``seq2seq.train.warmstart``) take
it from here. ``marian_config`` and ``to_marian_state`` give the other direction, which
``seq2seq.export.transformers`` writes out. The ``transformers`` package (the ``hf`` extra) is
imported here and in that export only.

How the two architectures differ, and what resolves each difference:

* feed-forward activation: MarianMT's "swish" is SiLU, ``model.activation: silu``;
* output bias: MarianMT adds ``final_logits_bias`` to the logits, ``model.output_bias: true``.
  An all-zero bias (which is what our own exports carry) imports as no bias, so our models
  round-trip exactly. In MarianMT the bias is a buffer that fine-tuning leaves alone; here it
  is a parameter and trains, as Marian itself trains it;
* decoder start: MarianMT starts the decoder from <pad>, ``model.decoder_start: pad``; every
  search, forced score and training batch reads it from ``ModelConfig.decoder_start_id``;
* special ids: MarianMT has </s> 0, <unk> 1, <pad> V-1 and no <start>; ours are fixed
  (``seq2seq.special``). The importer permutes the vocabulary rows of the embedding and the bias
  (and the vocabulary itself) so <pad>, <unk> and <end> land on 0, 1 and 3, and adds a zero row
  for <start> (id 2), which a <pad>-started model never reads; its logit is 0, so our
  log-probabilities carry one more term in the softmax's sum than MarianMT's (the logits of
  every MarianMT token are the same);
* sinusoid layout: MarianMT puts the sines in the first half of the width and the cosines in the
  second, ours interleaves them. Rather than a config key, the importer permutes the width of
  the residual stream (dimension 2j is MarianMT's j, 2j+1 is its D/2+j): the embedding columns,
  every LayerNorm, every projection's input columns or output rows. LayerNorm, attention and the
  feed-forward block do not care in which order the width comes, so the permuted model computes
  the same function exactly; only the order of float sums in the matmuls changes. The weights
  themselves are only moved, so a round trip is bit-identical, and the model code keeps one layout;
* tokenizer: MarianMT has one SentencePiece model per side that only segments, and a shared
  vocabulary (vocab.json) that gives pieces their ids; ``Tokenizer``'s ``vocabulary`` is that;
* the same in both, so nothing to do: post-norm layers, √D-scaled embeddings
  (``scale_embedding: true``; false is refused), LayerNorm epsilon 1e-5 (torch's default in
  both), biases on every attention and feed-forward projection, positions counted from 0 on both
  sides, one embedding matrix shared by source, target and output (``tie_embeddings: all``),
  attention scaled by 1/√K (MarianMT scales the queries, we the scores: the same product).

What our model cannot express is refused in one line: different encoder and decoder widths or
head counts, unshared or untied embeddings, separate vocabularies, embeddings without √D.
"""

import contextlib
import dataclasses
import json
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seq2seq.config import Config, DataConfig, ModelConfig, decode_config_from_dict
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS, EOS, PAD, UNK

HF_INSTALL = "pip install 'seq2seq[hf]'"
# MarianMT's names for our activations (ACT2FN in transformers), and ours for theirs.
TO_MARIAN_ACTIVATION = {"relu": "relu", "gelu": "gelu", "silu": "swish"}
FROM_MARIAN_ACTIVATION = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}
START_PIECE = "<start>"  # the name of the row added for our <start> when MarianMT's vocabulary has none


def require_transformers() -> Any:
    """Import transformers, or a one-line error naming the extra."""
    try:
        import transformers
    except ImportError:
        raise UserError(f"MarianMT import and export need the hf extra: {HF_INSTALL}") from None
    return transformers


@contextlib.contextmanager
def quiet(transformers: Any) -> Iterator[None]:
    """transformers' progress bars, advice and warnings off while it loads or saves: what our commands print
    (one line on an error) stays theirs."""
    logging = transformers.utils.logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def is_marian_dir(path: str | Path) -> bool:
    """Whether ``path`` is a MarianMT model directory (its config.json says model_type marian)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "marian"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return False


def interleaving(d_model: int) -> Tensor:
    """(D,) index: our residual dimension i is MarianMT's dimension ``interleaving(D)[i]``
    (2j <- j, the sine; 2j+1 <- D/2 + j, the cosine)."""
    return torch.arange(d_model).view(2, d_model // 2).t().reshape(-1)


def _weight_pairs(cfg: ModelConfig) -> list[tuple[str, str, int | None]]:
    """(our name, MarianMT's name, axis along the residual width or None) of every weight but the embeddings
    and the output bias."""
    pairs: list[tuple[str, str, int | None]] = []

    def attention(ours: str, theirs: str) -> None:
        for proj in ("q_proj", "k_proj", "v_proj"):  # the width is their input
            pairs.extend(
                [
                    (f"{ours}.{proj}.weight", f"{theirs}.{proj}.weight", 1),
                    (f"{ours}.{proj}.bias", f"{theirs}.{proj}.bias", None),
                ]
            )
        pairs.extend(
            [
                (f"{ours}.out_proj.weight", f"{theirs}.out_proj.weight", 0),
                (f"{ours}.out_proj.bias", f"{theirs}.out_proj.bias", 0),
            ]
        )

    def norm(ours: str, theirs: str) -> None:
        pairs.extend([(f"{ours}.weight", f"{theirs}.weight", 0), (f"{ours}.bias", f"{theirs}.bias", 0)])

    def ffn(ours: str, theirs: str) -> None:
        pairs.extend(
            [
                (f"{ours}.up.weight", f"{theirs}.fc1.weight", 1),
                (f"{ours}.up.bias", f"{theirs}.fc1.bias", None),
                (f"{ours}.down.weight", f"{theirs}.fc2.weight", 0),
                (f"{ours}.down.bias", f"{theirs}.fc2.bias", 0),
            ]
        )

    for i in range(cfg.encoder_layers):
        ours, theirs = f"encoder_layers.{i}", f"model.encoder.layers.{i}"
        attention(f"{ours}.self_attn", f"{theirs}.self_attn")
        norm(f"{ours}.attn_res.norm", f"{theirs}.self_attn_layer_norm")
        ffn(f"{ours}.ffn", theirs)
        norm(f"{ours}.ffn_res.norm", f"{theirs}.final_layer_norm")
    for i in range(cfg.decoder_layers):
        ours, theirs = f"decoder_layers.{i}", f"model.decoder.layers.{i}"
        attention(f"{ours}.self_attn", f"{theirs}.self_attn")
        norm(f"{ours}.self_res.norm", f"{theirs}.self_attn_layer_norm")
        attention(f"{ours}.cross_attn", f"{theirs}.encoder_attn")
        norm(f"{ours}.cross_res.norm", f"{theirs}.encoder_attn_layer_norm")
        ffn(f"{ours}.ffn", theirs)
        norm(f"{ours}.ffn_res.norm", f"{theirs}.final_layer_norm")
    return pairs


EMBEDDINGS = ("src_embed.tokens.weight", "tgt_embed.tokens.weight", "out_proj.weight")  # one tied matrix (V, D)
MARIAN_EMBEDDINGS = (
    "model.shared.weight",
    "model.encoder.embed_tokens.weight",
    "model.decoder.embed_tokens.weight",
    "lm_head.weight",
)


def to_marian_state(state: dict[str, Tensor], cfg: ModelConfig) -> dict[str, Tensor]:
    """Our state dict (ids as ours) -> MarianMT's (the same ids, its width order, ``final_logits_bias`` (1, V))."""
    back = torch.argsort(interleaving(cfg.d_model))
    out = {
        theirs: state[ours] if axis is None else state[ours].index_select(axis, back)
        for ours, theirs, axis in _weight_pairs(cfg)
    }
    embedding = state[EMBEDDINGS[0]].index_select(1, back)  # (V, D)
    out.update(dict.fromkeys(MARIAN_EMBEDDINGS, embedding))
    bias = state.get("out_proj.bias")
    out["final_logits_bias"] = (bias if bias is not None else embedding.new_zeros(embedding.size(0)))[None, :]
    return out


def from_marian_state(state: dict[str, Tensor], cfg: ModelConfig, rows: Sequence[int | None]) -> dict[str, Tensor]:
    """MarianMT's state dict -> ours; our vocabulary row i is MarianMT's row ``rows[i]`` (None: a zero row)."""
    width = interleaving(cfg.d_model)
    out = {
        ours: state[theirs] if axis is None else state[theirs].index_select(axis, width)
        for ours, theirs, axis in _weight_pairs(cfg)
    }
    out = {name: tensor.clone() for name, tensor in out.items()}  # own storage, not views of the HF model's
    have = [i for i, row in enumerate(rows) if row is not None]
    source = torch.tensor([rows[i] for i in have])

    def remap(table: Tensor) -> Tensor:  # (V_theirs, ...) -> (V_ours, ...): rows moved, missing rows zero
        moved = table.new_zeros((len(rows), *table.shape[1:]))
        moved[have] = table.index_select(0, source)
        return moved

    embedding = remap(state["model.shared.weight"]).index_select(1, width)  # (V, D)
    out.update(dict.fromkeys(EMBEDDINGS, embedding))
    if cfg.output_bias:
        out["out_proj.bias"] = remap(state["final_logits_bias"][0])
    return out


def _get(config: dict[str, Any], key: str, where: str) -> Any:
    if key not in config:
        raise UserError(f"{where}: no {key!r}; is this a MarianMT config.json?")
    return config[key]


def _refuse(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise UserError(f"{where}: {what}; our Transformer cannot express that model")


def model_config_from_marian(config: dict[str, Any], output_bias: bool, start: str, where: str) -> ModelConfig:
    """Our ``ModelConfig`` for a MarianMT config.json (as a dict), or a one-line error naming what does not fit."""
    heads, ffn = _get(config, "encoder_attention_heads", where), _get(config, "encoder_ffn_dim", where)
    vocab = _get(config, "vocab_size", where)
    _refuse(
        config.get("decoder_attention_heads", heads) == heads, where, "encoder and decoder have different head counts"
    )
    _refuse(config.get("decoder_ffn_dim", ffn) == ffn, where, "encoder and decoder have different feed-forward widths")
    _refuse(
        config.get("scale_embedding") is True, where, "scale_embedding is not true (ours multiply embeddings by √D)"
    )
    _refuse(
        config.get("share_encoder_decoder_embeddings", True), where, "encoder and decoder embeddings are not shared"
    )
    _refuse(config.get("tie_word_embeddings", True), where, "the output projection is not tied to the embeddings")
    _refuse(config.get("decoder_vocab_size") in (None, vocab), where, "the decoder has its own vocabulary")
    activation = _get(config, "activation_function", where)
    _refuse(
        activation in FROM_MARIAN_ACTIVATION,
        where,
        f"activation {activation!r} is not one of {list(FROM_MARIAN_ACTIVATION)}",
    )
    return ModelConfig(
        d_model=_get(config, "d_model", where),
        heads=heads,
        encoder_layers=_get(config, "encoder_layers", where),
        decoder_layers=_get(config, "decoder_layers", where),
        ffn_dim=ffn,
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        activation_dropout=float(config.get("activation_dropout", 0.0)),
        activation=FROM_MARIAN_ACTIVATION[activation],
        norm="post",
        tie_embeddings="all",
        max_positions=_get(config, "max_position_embeddings", where),
        output_bias=output_bias,
        decoder_start=start,
    )


def marian_config(cfg: ModelConfig, vocab_size: int) -> dict[str, Any]:
    """MarianMT's config (``MarianConfig`` keyword arguments) for our model; our ids stay as they are."""
    return {
        "vocab_size": vocab_size,
        "decoder_vocab_size": vocab_size,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.encoder_layers,
        "decoder_layers": cfg.decoder_layers,
        "encoder_attention_heads": cfg.heads,
        "decoder_attention_heads": cfg.heads,
        "encoder_ffn_dim": cfg.ffn_dim,
        "decoder_ffn_dim": cfg.ffn_dim,
        "activation_function": TO_MARIAN_ACTIVATION[cfg.activation],
        "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        "activation_dropout": cfg.activation_dropout,
        "max_position_embeddings": cfg.max_positions,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
        "pad_token_id": PAD,
        "eos_token_id": EOS,
        "bos_token_id": BOS,
        "decoder_start_token_id": cfg.decoder_start_id,
        "forced_eos_token_id": None,  # our searches stop at the length limit without forcing <end>
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: not found; a MarianMT directory holds it (download the whole model)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: not readable JSON ({err})") from None


def _token_name(value: Any) -> str:
    """A special token as tokenizer_config.json stores it: a string, or an AddedToken's mapping."""
    return str(value["content"]) if isinstance(value, dict) and "content" in value else str(value)


def vocabulary_rows(
    vocab: dict[str, int], size: int, ids: dict[str, int], where: str
) -> tuple[list[str], list[int | None]]:
    """Our vocabulary (pieces in our id order) and, for each of our ids, MarianMT's row (None: the added <start>).

    ``ids`` holds MarianMT's pad, unk, eos and, when it has a distinct one, bos ids; the special
    ids move to ours, every other row follows in MarianMT's order.
    """
    pieces: dict[int, str] = {}
    for piece, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < size or i in pieces:
            raise UserError(f"{where}: {piece!r} -> {i!r}: ids must be distinct rows of the {size}-row embedding")
        pieces[i] = piece
    for name, i in ids.items():
        if i not in pieces:
            raise UserError(f"{where}: the {name} id {i} has no piece in the vocabulary")
    start = ids.get("bos")
    if start is None and START_PIECE in vocab:
        raise UserError(f"{where}: the vocabulary already holds {START_PIECE!r}, the name our added <start> needs")
    rows: list[int | None] = [None] * 4
    rows[PAD], rows[UNK], rows[BOS], rows[EOS] = ids["pad"], ids["unk"], start, ids["eos"]
    special = set(rows)
    rows += [i for i in range(size) if i not in special]
    names = [pieces.get(i, f"<row {i}>") if i is not None else START_PIECE for i in rows]
    return names, rows


def import_marian(path: str | Path, overrides: Sequence[str] = ()) -> tuple[Transformer, Tokenizer, Config]:
    """Our model (float32, CPU, eval mode), tokenizer and config for a local MarianMT directory.

    ``overrides`` (``decode.key=value``) change the decoding settings, which start from ours with
    the beam of its generation_config.json.
    """
    transformers = require_transformers()
    path = Path(path)
    where = str(path / "config.json")
    config = _read_json(path / "config.json")
    tokenizer_config = _read_json(path / "tokenizer_config.json") if (path / "tokenizer_config.json").is_file() else {}
    if tokenizer_config.get("separate_vocabs"):
        raise UserError(f"{path}: separate source and target vocabularies; only a shared vocab.json can be imported")
    vocab = _read_json(path / "vocab.json")
    if not isinstance(vocab, dict):
        raise UserError(f"{path / 'vocab.json'}: expected a mapping of pieces to ids")
    unk_piece = _token_name(tokenizer_config.get("unk_token", "<unk>"))
    if unk_piece not in vocab:
        raise UserError(f"{path / 'vocab.json'}: no unknown-token piece {unk_piece!r}")
    pad, eos, bos = _get(config, "pad_token_id", where), _get(config, "eos_token_id", where), config.get("bos_token_id")
    if not (isinstance(pad, int) and isinstance(eos, int)):
        raise UserError(f"{where}: pad_token_id and eos_token_id must be single ids, got {pad!r} and {eos!r}")
    ids = {"pad": pad, "unk": vocab[unk_piece], "eos": eos}
    if bos is not None and bos not in ids.values():
        ids["bos"] = bos
    first = config.get("decoder_start_token_id", pad)
    if first not in (pad, ids.get("bos")):
        raise UserError(f"{where}: decoder_start_token_id {first} is neither the pad nor a distinct bos id")
    size = _get(config, "vocab_size", where)
    pieces, rows = vocabulary_rows(vocab, size, ids, str(path / "vocab.json"))
    cfg = model_config_from_marian(config, True, "pad" if first == pad else "bos", where)

    try:
        with quiet(transformers):
            marian = transformers.MarianMTModel.from_pretrained(str(path))  # our parameters take any dtype as float32
    except (OSError, ValueError) as err:
        raise UserError(
            f"{path}: transformers cannot load the MarianMT weights ({' '.join(str(err).split())[:200]})"
        ) from None
    state = marian.state_dict()
    # An all-zero bias is a model without one (our own exports carry zeros): no bias keeps the round trip exact.
    cfg = dataclasses.replace(cfg, output_bias=bool(state["final_logits_bias"].any()))
    model = Transformer(cfg, len(pieces), len(pieces), PAD)
    model.load_state_dict(from_marian_state(state, cfg, rows))

    spm = {name: (path / name).read_bytes() for name in ("source.spm", "target.spm") if (path / name).is_file()}
    if len(spm) != 2:
        raise UserError(f"{path}: source.spm and target.spm (MarianTokenizer's SentencePiece models) are missing")
    tokenizer = Tokenizer(spm["source.spm"], spm["target.spm"], pieces)
    generation = _read_json(path / "generation_config.json") if (path / "generation_config.json").is_file() else {}
    decode = {"beam": generation["num_beams"]} if isinstance(generation.get("num_beams"), int) else {}
    run = Config(
        model=cfg, data=DataConfig(joint_vocab=True), decode=decode_config_from_dict(decode, str(path), overrides)
    )
    return model.eval(), tokenizer, run
