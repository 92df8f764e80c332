"""Section 3 of the report: multi-head attention. Every head's weights for the sentence (the
encoder's self-attention in the chosen layer, and the last decoder layer's cross-attention over the
translation, the layer the output reads), and what this model's shape costs in each of the two
ways to build the heads: split the width (K = D/H, the paper's choice) or give every head the
full width (K = D).

Costs are counted for one attention block (the Q, K, V and output projections with their biases)
and, as multiply-adds, for one self-attention over the sentence's n tokens: the four projections
(4·n·D·HK) and the two products QKᵀ and weights·V (2·n²·HK). Softmax, bias and scaling
additions are left out: they grow with n² or n·D, not with the products' n²·K or n·D·HK.
"""

from seq2seq.explain.numbers import rounded
from seq2seq.explain.probe import Recording
from seq2seq.model.transformer import Transformer


def attention_costs(d_model: int, heads: int, head_dim: int, length: int) -> dict:
    """Parameters of one attention block and multiply-adds of one self-attention over ``length`` tokens."""
    width = heads * head_dim  # H·K, the concatenated heads
    params = 3 * (d_model * width + width) + width * d_model + d_model
    macs = 4 * length * d_model * width + 2 * length * length * width
    return {"head_dim": head_dim, "params": params, "macs": macs}


def heads_section(model: Transformer, found: Recording, layer: int, length: int) -> dict:
    """Every head's maps (from a one-sentence ``Recording``) and the split/full-width costs for ``length`` tokens."""
    cfg = model.cfg
    encoder = found.encoder[layer][0].weights()[0]  # (H, S, S)
    cross = found.cross[-1][0].weights()[0]  # (H, T, S)
    blocks = cfg.encoder_layers + 2 * cfg.decoder_layers  # self-attention in both stacks, cross in the decoder
    forms = {
        "split": attention_costs(cfg.d_model, cfg.heads, cfg.d_model // cfg.heads, length),
        "full": attention_costs(cfg.d_model, cfg.heads, cfg.d_model, length),
        "this_model": attention_costs(cfg.d_model, cfg.heads, cfg.resolved_head_dim, length),
    }
    return {
        "layer": layer,
        "cross_layer": len(found.cross) - 1,
        "encoder": rounded(encoder.float()),
        "cross": rounded(cross.float()),
        "costs": {
            "d_model": cfg.d_model,
            "heads": cfg.heads,
            "head_dim": cfg.resolved_head_dim,
            "length": length,
            "blocks": blocks,
            "forms": forms,
        },
    }
