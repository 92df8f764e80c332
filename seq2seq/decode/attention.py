"""Attention weights of one sentence pair (encoder self-, decoder self- and cross-attention, every
layer and head) and the cross-attention heat map that ``translate --attention`` draws.

Weights are recorded while the model runs teacher-forced on ``<start> y…`` (the decoder's input
for a finished translation), so they are the ones the decoder used to predict ``y… <end>``.
"""

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from seq2seq.errors import UserError
from seq2seq.layers import MultiHeadAttention, explicit_attention
from seq2seq.masks import padding_mask
from seq2seq.model import Transformer
from seq2seq.tokenizer import BOS, PAD


@dataclass
class AttentionWeights:
    """All attention weights of one sentence pair, float32 on the CPU.

    S counts the source ids ``x… <end>``; T counts the decoder positions ``<start> y…``, the rows
    that predicted ``y… <end>``. Every row is a distribution over its keys.
    """

    encoder: Tensor  # (L_enc, H, S, S) encoder self-attention
    decoder: Tensor  # (L_dec, H, T, T) decoder self-attention (causal: zero above the diagonal)
    cross: Tensor  # (L_dec, H, T, S) decoder queries over the encoder output


@contextlib.contextmanager
def _recording(modules: list[MultiHeadAttention], into: list[Tensor]) -> Iterator[None]:
    """While active, each ``attend`` call of ``modules`` appends its weights (B, H, T, S) to ``into``.

    ``attend`` is the one method every kind of attention goes through (self-attention calls it
    directly, so forward hooks would miss it); an instance attribute shadows it for the duration.
    """

    def recorder(module: MultiHeadAttention):
        def attend(q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
            into.append(explicit_attention(q, keys, values, mask)[1].float())
            return MultiHeadAttention.attend(module, q, keys, values, mask)

        return attend

    for module in modules:
        module.attend = recorder(module)
    try:
        yield
    finally:
        for module in modules:
            del module.attend


@torch.no_grad()
def attention_weights(model: Transformer, src: list[int], tgt: list[int]) -> AttentionWeights:
    """Every layer's and head's attention for source ids ``x… <end>`` and translation ``tgt`` (no <start>/<end>)."""
    device = next(model.parameters()).device
    src_ids = torch.tensor([src], device=device)
    tgt_in = torch.tensor([[BOS, *tgt]], device=device)
    src_mask = padding_mask(src_ids, PAD)
    encoder: list[Tensor] = []
    decoder_self: list[Tensor] = []
    cross: list[Tensor] = []
    with _recording([layer.self_attn for layer in model.encoder_layers], encoder):
        memory = model.encode(src_ids, src_mask)
    with (
        _recording([layer.self_attn for layer in model.decoder_layers], decoder_self),
        _recording([layer.cross_attn for layer in model.decoder_layers], cross),
    ):
        model.decode(tgt_in, memory, src_mask)
    return AttentionWeights(
        *(torch.cat(kind).cpu() for kind in (encoder, decoder_self, cross))  # L × (1, H, ·, ·) -> (L, H, ·, ·)
    )


def select(weights: Tensor, layer: int = -1, head: int | None = None) -> Tensor:
    """One layer of weights (L, H, T, S) -> (T, S): one head, or the mean over heads for ``head=None``."""
    layers, heads = weights.shape[:2]
    if not -layers <= layer < layers:
        raise UserError(f"--layer {layer}: the model has {layers} decoder layers")
    if head is not None and not 0 <= head < heads:
        raise UserError(f"--head {head}: the model has {heads} heads")
    return weights[layer].mean(0) if head is None else weights[layer, head]


def cross_attention(
    model: Transformer, src: list[int], tgt: list[int], layer: int = -1, head: int | None = None
) -> Tensor:
    """Weights (T, S) of one decoder layer's cross-attention for one sentence pair.

    ``tgt`` is the translation without <start>/<end>; rows are the positions that
    predicted ``tgt… <end>``. ``head=None`` averages over heads.
    """
    return select(attention_weights(model, src, tgt).cross, layer, head)


# Families that cover the CJK ideographs, most common on Linux first (Debian: fonts-noto-cjk,
# fonts-wqy-zenhei), then macOS and Windows.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Serif CJK SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "AR PL UMing CN",
    "PingFang SC",
    "Hiragino Sans GB",
    "Microsoft YaHei",
    "SimHei",
)
CJK_FILE_HINTS = ("notosanscjk", "notoserifcjk", "sourcehan", "wqy", "droidsansfallback", "uming", "ukai")


def find_cjk_font() -> str | None:
    """The family name of an installed font with CJK glyphs, or None.

    matplotlib's font list is cached from when it was first imported, so a font installed since
    then is looked for among the system's font files as well, and registered.
    """
    from matplotlib import font_manager

    def known() -> str | None:
        names = {f.name for f in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in names), None)

    if (name := known()) is None:
        for path in font_manager.findSystemFonts():
            if any(hint in Path(path).name.lower().replace("-", "") for hint in CJK_FILE_HINTS):
                font_manager.fontManager.addfont(path)
        name = known()
    return name


def _needs_cjk(labels: list[str]) -> bool:
    """Whether any label holds a character from the CJK blocks (which DejaVu Sans lacks)."""
    return any(ord(ch) >= 0x2E80 for label in labels for ch in label)


def save_heatmap(weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], path: Path, title: str) -> None:
    """Draw weights (T, S) with source pieces on x and target pieces on y.

    ``.svg`` keeps the labels as text (the viewer's fonts render them); other formats (PNG) are
    drawn with an installed CJK font, and without one it is a user error rather than empty boxes.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--attention needs matplotlib: pip install 'seq2seq[plot]'") from None
    path = Path(path)
    vector_text = path.suffix.lower() == ".svg"
    cjk = find_cjk_font()
    if cjk is None and not vector_text and _needs_cjk(src_pieces + tgt_pieces):
        raise UserError(
            f"--attention {path}: no CJK font to draw the Chinese labels; install one "
            "(Debian/Ubuntu: apt-get install fonts-noto-cjk) or write an .svg instead"
        )
    style = {"font.family": [cjk, "DejaVu Sans"] if cjk else ["DejaVu Sans"], "svg.fonttype": "none"}
    with matplotlib.rc_context(style), warnings.catch_warnings():
        if vector_text:  # text stays text: a font without the glyphs is the viewer's business
            warnings.filterwarnings("ignore", message="Glyph .* missing")
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
