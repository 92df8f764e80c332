"""The cross-attention heat map that ``translate --attention`` draws (matplotlib, the ``plot`` extra).

Chinese labels need a font with CJK glyphs: ``.svg`` keeps labels as text for the viewer's fonts;
other formats are drawn with an installed CJK font, found by family name or, for a font installed
after matplotlib built its cache, by file name.
"""

import warnings
from pathlib import Path

from torch import Tensor

from seq2seq.errors import UserError

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
