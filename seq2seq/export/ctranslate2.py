"""CTranslate2 export: a trained model written in CTranslate2's format.

``export_ctranslate2`` describes our Transformer with CTranslate2's own specification classes
(``ctranslate2.specs``), the way its converters for other toolkits do, and saves a model
directory that CTranslate2 loads directly; ``seq2seq.decode.ctranslate2`` translates with it.

How our model maps onto the specification:

* post-norm or pre-norm layers: ``pre_norm``; pre-norm stacks end with a LayerNorm, which
  the specification has under that architecture too;
* embeddings multiplied by √D, then the sinusoidal table added: ``scale_embeddings`` and our
  own table stored as the position encodings (ours interleaves sin/cos, so it is stored
  rather than left for CTranslate2 to generate);
* self-attention's Q, K, V as one fused projection, cross-attention's K, V as one;
* tied embeddings: the same array in several places, which CTranslate2 stores once;
* the vocabularies are the tokenizer's pieces in id order (``Tokenizer.src_vocabulary``), so ids
  agree: <pad>, <unk>, <start> (BOS), <end> (EOS); the decoder starts from the model's
  ``decoder_start_id`` (<start>, or <pad> for a MarianMT import); the source is given with its
  <end> already appended, as our encoder reads it;
* an output bias (``output_bias``) is the projection's bias;
* LayerNorm epsilon 1e-5 (torch's default; CTranslate2's own differs).

Every ``ModelConfig`` option has a counterpart (full-width heads through ``head_dim``, GELU
and SiLU through ``activation``; ``tests/unit/export/test_ctranslate2.py`` exports each shape); should the specification
refuse a model, ``export_ctranslate2`` says so in one line with CTranslate2's reason.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoint import load_checkpoint, resolve_checkpoint
from seq2seq.data.tokenizer import FILES, Tokenizer
from seq2seq.decode.ctranslate2 import SETTINGS, require_ctranslate2
from seq2seq.decode.loader import load_model
from seq2seq.errors import UserError
from seq2seq.model.layers import MultiHeadAttention
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS, EOS, UNK

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_bfloat16", "bfloat16")
_ACTIVATIONS = {
    "relu": lambda specs: specs.Activation.RELU,
    "gelu": lambda specs: specs.Activation.GELU,
    "silu": lambda specs: specs.Activation.SWISH,
}
# so ``evaluate --model DIR`` finds the run's splits, with their novelty and other-script sources when present
COPIED = ("test.src", "test.tgt", "dev.src", "dev.tgt", "test.novelty", "test.traditional.src", "test.simplified.src")


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


def build_spec(model: Transformer, tokenizer: Tokenizer) -> Any:
    """Our model as a ``ctranslate2.specs.TransformerSpec`` (weights set, vocabularies registered)."""
    ct2 = require_ctranslate2()
    specs = ct2.specs
    cfg = model.cfg
    shape: dict[str, Any] = {
        "num_heads": cfg.heads,
        "pre_norm": cfg.norm == "pre",
        "activation": _ACTIVATIONS[cfg.activation](specs),
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
    _set_linear(decoder.projection, model.out_proj.weight, model.out_proj.bias)

    spec.register_source_vocabulary(tokenizer.src_vocabulary())
    target = tokenizer.tgt_vocabulary()
    spec.register_target_vocabulary(target)
    spec.config.unk_token = target[UNK]
    spec.config.bos_token = target[BOS]
    spec.config.eos_token = target[EOS]
    spec.config.decoder_start_token = target[cfg.decoder_start_id]
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
    for name in (*FILES, *COPIED):
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
