"""CTranslate2: export a trained model to its format, and translate with the exported model.

``export_ctranslate2`` describes our Transformer with CTranslate2's own specification classes
(``ctranslate2.specs``), the way its converters for other toolkits do, and saves a model
directory that CTranslate2 loads directly. ``CTranslate2Translator`` runs such a directory
behind our ``Translator`` interface: our normalization, SentencePiece pieces in, pieces out,
our detokenization, so outputs compare line for line with our own decoder.

How our model maps onto the specification:

* post-norm or pre-norm layers: ``pre_norm``; pre-norm stacks end with a LayerNorm, which
  the specification has under that architecture too;
* embeddings multiplied by √D, then the sinusoidal table added: ``scale_embeddings`` and our
  own table stored as the position encodings (ours interleaves sin/cos, so it is stored
  rather than left for CTranslate2 to generate);
* self-attention's Q, K, V as one fused projection, cross-attention's K, V as one;
* tied embeddings: the same array in several places, which CTranslate2 stores once;
* the vocabularies are the SentencePiece pieces in id order, so ids agree: <pad>, <unk>,
  <start> (BOS and decoder start), <end> (EOS); the source is given with its <end> already
  appended, as our encoder reads it;
* LayerNorm epsilon 1e-5 (torch's default; CTranslate2's own differs).

Every ``ModelConfig`` option has a counterpart (full-width heads through ``head_dim``, GELU
through ``activation``; ``tests/test_ct2.py`` exports each shape); should the specification
refuse a model, ``export_ctranslate2`` says so in one line with CTranslate2's reason.

Decoding settings are translated per call (``CTranslate2Translator.search``): our length
limit ``a·len(src) + b`` is per sentence, CTranslate2's ``max_decoding_length`` per call, so
sentences are grouped by limit; ``min_decoding_length=0`` (ours allows an immediate <end>);
``length_penalty`` keeps its exponent, but CTranslate2 divides by ``L^α`` (L without <end>)
where we divide by GNMT's ``((5 + L) / 6)^α`` (L with <end>): the two rank alike only at α = 0.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import config_from_dict
from seq2seq.errors import UserError
from seq2seq.layers import MultiHeadAttention
from seq2seq.model import Transformer
from seq2seq.search import Hypothesis, length_limits, pad_batch
from seq2seq.tokenizer import BOS, EOS, JOINT, SRC, TGT, UNK, Tokenizer
from seq2seq.translate import Translator, source_normalizer, target_normalizer

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_bfloat16", "bfloat16")
SETTINGS = "seq2seq.json"  # our config (decoding settings, max_positions) next to CTranslate2's files
# so ``evaluate --model DIR`` finds the run's splits, with their novelty and other-script sources when present
COPIED = ("test.src", "test.tgt", "dev.src", "dev.tgt", "test.novelty", "test.traditional.src", "test.simplified.src")


def require_ctranslate2() -> Any:
    """Import ctranslate2, or a one-line error naming the extra."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError('the ctranslate2 engine needs the ct2 extra: pip install -e ".[ct2]"') from None
    return ctranslate2


def _array(tensor: torch.Tensor) -> Any:
    """A float32 numpy copy (what the specification stores)."""
    return tensor.detach().float().cpu().numpy().copy()


def _set_linear(spec: Any, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _array(weight)
    if bias is not None:
        spec.bias = _array(bias)


def _set_norm(spec: Any, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _set_attention(spec: Any, attention: MultiHeadAttention, residual: torch.nn.Module, self_attention: bool) -> None:
    """Fill a MultiHeadAttentionSpec: self-attention [QKV, out], cross-attention [Q, KV, out]."""
    _set_norm(spec.layer_norm, residual.norm)
    q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
    if self_attention:
        _set_linear(spec.linear[0], torch.cat([q.weight, k.weight, v.weight]), torch.cat([q.bias, k.bias, v.bias]))
    else:
        _set_linear(spec.linear[0], q.weight, q.bias)
        _set_linear(spec.linear[1], torch.cat([k.weight, v.weight]), torch.cat([k.bias, v.bias]))
    _set_linear(spec.linear[-1], attention.out_proj.weight, attention.out_proj.bias)


def _set_ffn(spec: Any, layer: Any) -> None:
    _set_norm(spec.layer_norm, layer.ffn_res.norm)
    _set_linear(spec.linear_0, layer.ffn.up.weight, layer.ffn.up.bias)
    _set_linear(spec.linear_1, layer.ffn.down.weight, layer.ffn.down.bias)


def _pieces(processor: Any) -> list[str]:
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def build_spec(model: Transformer, tokenizer: Tokenizer) -> Any:
    """Our model as a ``ctranslate2.specs.TransformerSpec`` (weights set, vocabularies registered)."""
    ct2 = require_ctranslate2()
    specs = ct2.specs
    cfg = model.cfg
    shape: dict[str, Any] = {
        "num_heads": cfg.heads,
        "pre_norm": cfg.norm == "pre",
        "activation": specs.Activation.GELU if cfg.activation == "gelu" else specs.Activation.RELU,
    }
    if cfg.resolved_head_dim * cfg.heads != cfg.d_model:
        shape["head_dim"] = cfg.resolved_head_dim
    encoder = specs.TransformerEncoderSpec(cfg.encoder_layers, **shape)
    decoder = specs.TransformerDecoderSpec(cfg.decoder_layers, **shape)
    spec = specs.TransformerSpec(encoder, decoder)

    positions = _array(model.src_embed.positions)  # (max_positions, D), ours: sin/cos interleaved
    for side, embed in ((encoder, model.src_embed), (decoder, model.tgt_embed)):
        embeddings = side.embeddings[0] if isinstance(side.embeddings, list) else side.embeddings
        embeddings.weight = _array(embed.tokens.weight)
        side.scale_embeddings = True  # × √D, as ``Embedding`` does
        side.position_encodings.encodings = positions
    for layer_spec, layer in zip(encoder.layer, model.encoder_layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.attn_res, self_attention=True)
        _set_ffn(layer_spec.ffn, layer)
    for layer_spec, layer in zip(decoder.layer, model.decoder_layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.self_res, self_attention=True)
        _set_attention(layer_spec.attention, layer.cross_attn, layer.cross_res, self_attention=False)
        _set_ffn(layer_spec.ffn, layer)
    if cfg.norm == "pre":
        _set_norm(encoder.layer_norm, model.encoder_norm)
        _set_norm(decoder.layer_norm, model.decoder_norm)
    decoder.projection.weight = _array(model.out_proj.weight)

    spec.register_source_vocabulary(_pieces(tokenizer.src))
    spec.register_target_vocabulary(_pieces(tokenizer.tgt))
    pieces = _pieces(tokenizer.tgt)
    spec.config.unk_token = pieces[UNK]
    spec.config.bos_token = pieces[BOS]
    spec.config.eos_token = pieces[EOS]
    spec.config.decoder_start_token = pieces[BOS]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False  # our source ids already end with <end>
    spec.config.layer_norm_epsilon = model.encoder_layers[0].attn_res.norm.eps
    return spec


def export_ctranslate2(model_path: str | Path, out: str | Path, quantization: str = "float32") -> Path:
    """Write the CTranslate2 model directory ``out`` for a run directory or checkpoint.

    ``out`` receives CTranslate2's files (model.bin, config.json, vocabularies), the
    SentencePiece model(s), our config (``seq2seq.json``: decoding settings and limits) and the
    run's dev/test text where the run directory has them.
    """
    from seq2seq.translate import load_model, resolve_checkpoint

    if quantization not in QUANTIZATIONS:
        raise UserError(f"--quantization {quantization!r}: choose one of {', '.join(QUANTIZATIONS)}")
    ct2 = require_ctranslate2()
    checkpoint = resolve_checkpoint(model_path)
    model, tokenizer, cfg = load_model(checkpoint, torch.device("cpu"))
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    try:
        spec = build_spec(model, tokenizer)
        spec.validate()
        spec.optimize(quantization=quantization)
    except (ValueError, TypeError) as err:  # the specification refused a shape: name it
        detail = " ".join(str(err).split())
        raise UserError(f"{checkpoint}: CTranslate2 cannot express this model ({detail})") from None
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    run_dir = checkpoint.parent
    for name in (JOINT, SRC, TGT, *COPIED):
        if (run_dir / name).is_file():
            shutil.copyfile(run_dir / name, out / name)
    settings = {
        "config": cfg.to_dict(),
        "checkpoint": str(checkpoint),
        "step": load_checkpoint(checkpoint).get("step"),
        "quantization": quantization,
        "ctranslate2": ct2.__version__,
    }
    (out / SETTINGS).write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    return out


def require_exported(path: str | Path) -> Path:
    """``path`` if it is a directory written by ``export_ctranslate2``, else a one-line error saying how to make one."""
    path = Path(path)
    if not ((path / SETTINGS).is_file() and (path / "model.bin").is_file()):
        raise UserError(
            f"--engine ctranslate2: {path} is not an exported model; "
            f"create one with: seq2seq export RUN_DIR --to ctranslate2 --out {path}"
        )
    return path


class CTranslate2Translator(Translator):
    """A ``Translator`` whose search runs in CTranslate2 on an exported model directory.

    Encoding, batching order, empty lines and detokenization are ``Translator``'s; only
    ``search`` differs. ``compute_type`` is CTranslate2's: ``default`` keeps the exported
    quantization where the hardware runs it (else CTranslate2 picks the nearest it supports).
    """

    def __init__(
        self, model_dir: str | Path, overrides: list[str] = (), compute_type: str = "default", threads: int = 0
    ) -> None:
        ct2 = require_ctranslate2()
        model_dir = require_exported(model_dir)
        settings = json.loads((model_dir / SETTINGS).read_text(encoding="utf-8"))
        cfg = config_from_dict(settings["config"], f"{model_dir / SETTINGS}", list(overrides))
        try:
            threads = threads or torch.get_num_threads()
            self.engine = ct2.Translator(str(model_dir), "cpu", compute_type=compute_type, intra_threads=threads)
        except ValueError as err:
            supported = ", ".join(sorted(ct2.get_supported_compute_types("cpu")))
            raise UserError(f"CTranslate2 cannot run {model_dir} as {compute_type} here ({supported}): {err}") from None
        tokenizer = Tokenizer.load(model_dir)
        super().__init__(
            None,
            tokenizer,
            cfg.decode,
            torch.device("cpu"),
            max_positions=cfg.model.max_positions,
            normalize_source=source_normalizer(cfg),
            normalize_target=target_normalizer(cfg),
        )
        self.compute_type = self.engine.compute_type
        self._tgt_ids = {piece: i for i, piece in enumerate(_pieces(tokenizer.tgt))}

    def search(self, sources: list[list[int]], beam: int, nbest: int) -> list[list[Hypothesis]]:
        """Translate id sequences with CTranslate2; one call per distinct length limit (see the module doc)."""
        decode = self.decode
        if not sources:
            return []
        limits = length_limits(pad_batch(sources, self.device), decode.max_len_a, decode.max_len_b, self.max_positions)
        groups: dict[int, list[int]] = {}
        for i, limit in enumerate(limits.tolist()):
            groups.setdefault(limit, []).append(i)
        results: list[list[Hypothesis]] = [[] for _ in sources]
        for limit, members in groups.items():
            found = self.engine.translate_batch(
                [self.tokenizer.src_pieces(sources[i]) for i in members],
                max_batch_size=decode.batch_sentences,
                beam_size=beam,
                num_hypotheses=1 if beam == 1 else nbest,
                length_penalty=0.0 if beam == 1 else decode.length_penalty,
                no_repeat_ngram_size=decode.no_repeat_ngram,
                max_input_length=0,
                max_decoding_length=limit,
                min_decoding_length=0,
                return_end_token=False,
                return_scores=True,
            )
            for i, result in zip(members, found, strict=True):
                results[i] = [
                    Hypothesis([self._tgt_ids[p] for p in tokens], score)
                    for tokens, score in zip(result.hypotheses, result.scores, strict=True)
                ]
        return results
