"""Section 4 of the report: the three masks on a padded batch of two sentences, and what happens
when padding is masked by query rows instead of by keys.

The grids are the masks of ``seq2seq.model.masks`` broadcast to what each attention sees: the
encoder's key-padding mask over (query, key) = (S, S), the decoder's causal & key-padding mask
over (T, T) and the cross-attention's source key-padding mask over (T, S).

The experiment runs the first encoder layer's self-attention (its own weights, copied, in float32
and in bfloat16) on the batch's real inputs under two masks: the padded *query rows* masked
whole, and the padded *keys* masked (this project's convention). A masked score is filled with
−∞ (what "masked" means to softmax) or with the dtype's most negative value (what
``explicit_attention`` uses). The loss reads the real positions only, as a training loss over
padded targets does. A row masked whole under −∞ is softmax(−∞, …, −∞) = 0/0 = NaN; the output
of a padded row is ignored by the loss, yet its NaN reaches the gradient (softmax's backward
multiplies the NaN weights by the zero gradient they get), and through the keys and values
every parameter's. The dtype's minimum turns such a row into a uniform average instead of NaN;
masking keys keeps a real key in every row, so neither fill can make a NaN.
"""

import copy
import math

import torch
from torch import Tensor

from seq2seq.model.layers import MultiHeadAttention
from seq2seq.model.masks import decoder_self_mask, padding_mask
from seq2seq.model.transformer import Transformer
from seq2seq.special import PAD

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
FILLS = ("-inf", "dtype min")
MASKS = ("query rows", "keys")


def mask_grids(src: Tensor, tgt_in: Tensor) -> dict:
    """The masks of a padded batch, src (B, S) and decoder input tgt_in (B, T), as boolean grids per sentence."""
    b, s = src.shape
    t = tgt_in.size(1)
    grids = {
        "encoder": padding_mask(src, PAD).expand(b, 1, s, s)[:, 0],  # (B, S, S)
        "decoder": decoder_self_mask(tgt_in, PAD).expand(b, 1, t, t)[:, 0],  # (B, T, T)
        "cross": padding_mask(src, PAD).expand(b, 1, t, s)[:, 0],  # (B, T, S)
    }
    return {
        **{name: grid.cpu().tolist() for name, grid in grids.items()},
        "true_counts": {name: grid.flatten(1).sum(1).tolist() for name, grid in grids.items()},
    }


def _mask(kind: str, src: Tensor) -> Tensor:
    real = src != PAD  # (B, S)
    if kind == "query rows":
        return real[:, None, :, None]  # (B, 1, S, 1): a padded query's row masked whole
    return padding_mask(src, PAD)  # (B, 1, 1, S): padded keys masked in every row


def _nan_count(attention: MultiHeadAttention, inputs: Tensor, src: Tensor, mask: Tensor, fill: str) -> dict:
    """NaN in the attention's output (B, S, D) and in the gradient of a loss over the real positions."""
    attention.zero_grad(set_to_none=True)
    x = inputs.detach().clone().requires_grad_()
    q, k, v = attention.queries_keys_values(x)  # (B, H, S, K) each
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, S, S)
    value = -math.inf if fill == "-inf" else torch.finfo(scores.dtype).min
    weights = scores.masked_fill(~mask, value).softmax(dim=-1)
    b, s, _ = x.shape
    out = attention.out_proj((weights @ v).transpose(1, 2).reshape(b, s, -1))  # (B, S, D)
    out[src != PAD].float().square().mean().backward()
    gradients = [x.grad, *(p.grad for p in attention.parameters())]
    return {
        "nan_output": int(out.isnan().sum()),
        "output_size": out.numel(),
        "nan_gradient": sum(int(g.isnan().sum()) for g in gradients),
        "gradient_size": sum(g.numel() for g in gradients),
    }


def nan_experiment(model: Transformer, src: Tensor) -> list[dict]:
    """Query-row vs key masking of a padded batch src (B, S), per dtype and fill, on the first encoder layer."""
    layer = model.encoder_layers[0]
    with torch.no_grad():
        inputs = layer.attn_res.read(model.src_embed(src))  # (B, S, D): what the first self-attention reads
    cases = []
    for dtype_name, dtype in DTYPES.items():
        attention = copy.deepcopy(layer.self_attn).to(dtype).eval().requires_grad_(True)
        for kind in MASKS:
            mask = _mask(kind, src)
            for fill in FILLS:
                with torch.enable_grad():
                    counts = _nan_count(attention, inputs.to(dtype), src, mask, fill)
                cases.append({"mask": kind, "fill": fill, "dtype": dtype_name, **counts})
    return cases


def masks_section(
    model: Transformer, src: Tensor, tgt_in: Tensor, source_pieces: list[list[str]], input_pieces: list[list[str]]
) -> dict:
    """Grids and experiment for a padded batch: src (B, S), tgt_in (B, T), with each sentence's labels."""
    return {
        "source_pieces": source_pieces,  # B lists of S labels (padding shown as <pad>)
        "decoder_input_pieces": input_pieces,  # B lists of T labels
        "lengths": {"source": (src != PAD).sum(1).tolist(), "target": (tgt_in != PAD).sum(1).tolist()},
        **mask_grids(src, tgt_in),
        "experiment": nan_experiment(model, src),
    }
