"""Cross-attention heat map: which source pieces each target piece looked at."""

from pathlib import Path

import torch
from torch import Tensor

from seq2seq.errors import UserError
from seq2seq.masks import padding_mask
from seq2seq.model import Transformer
from seq2seq.tokenizer import BOS, PAD


@torch.no_grad()
def cross_attention(
    model: Transformer, src: list[int], tgt: list[int], layer: int = -1, head: int | None = None
) -> Tensor:
    """Weights (T, S) of one decoder layer's cross-attention for one sentence pair.

    ``tgt`` is the translation without <start>/<end>; rows are the positions that
    predicted ``tgt… <end>``. ``head=None`` averages over heads.
    """
    if not -len(model.decoder_layers) <= layer < len(model.decoder_layers):
        raise UserError(f"--layer {layer}: the model has {len(model.decoder_layers)} decoder layers")
    if head is not None and not 0 <= head < model.cfg.heads:
        raise UserError(f"--head {head}: the model has {model.cfg.heads} heads")
    device = next(model.parameters()).device
    src_ids = torch.tensor([src], device=device)
    tgt_in = torch.tensor([[BOS, *tgt]], device=device)
    captured: dict[str, tuple] = {}
    attention = model.decoder_layers[layer].cross_attn
    # The hook must return None (a returned value would replace the layer's output).
    hook = attention.register_forward_hook(lambda _m, args, _out: captured.update(args=args))
    try:
        model.decode(tgt_in, model.encode(src_ids, padding_mask(src_ids, PAD)), padding_mask(src_ids, PAD))
    finally:
        hook.remove()
    query, keys, _values, mask = captured["args"]
    weights = attention.weights(query, keys, mask)[0].float()  # (H, T, S)
    return (weights.mean(0) if head is None else weights[head]).cpu()


def save_heatmap(weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], path: Path, title: str) -> None:
    """Draw weights (T, S) with source pieces on x and target pieces on y; write a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import font_manager
    except ImportError:
        raise UserError("--attention needs matplotlib: pip install 'seq2seq[plot]'") from None
    cjk = [
        f.name
        for f in font_manager.fontManager.ttflist
        if any(k in f.name for k in ("CJK", "Hei", "Ming", "Song", "WenQuanYi"))
    ]
    if cjk:
        plt.rcParams["font.family"] = [cjk[0], "DejaVu Sans"]
    fig, ax = plt.subplots(figsize=(max(4, 0.5 * len(src_pieces) + 2), max(3, 0.4 * len(tgt_pieces) + 1.5)))
    ax.imshow(weights.numpy(), cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(src_pieces)), src_pieces, rotation=60, ha="right")
    ax.set_yticks(range(len(tgt_pieces)), tgt_pieces)
    ax.set_xlabel("source pieces (keys)")
    ax.set_ylabel("target pieces (queries)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
