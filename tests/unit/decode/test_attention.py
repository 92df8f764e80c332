"""seq2seq.attention_map: ``cross_attention`` returns the (T, S) weights the decoder really
used (rows are distributions, head selection and the head mean agree, bad layer/head
numbers are user errors), ``attention_weights`` holds every layer and head of all three kinds,
``save_heatmap`` writes SVG with text labels and PNG with a CJK font (or says how to get one, or
how to install matplotlib), and ``seq2seq translate --attention`` writes the map end to end.

The model is the session's shared toy run (conftest.toy_run); these invariants hold for any weights.
"""

import os
import sys
from xml.etree import ElementTree

import pytest
import torch
from conftest import build_tiny_model, run_cli

from seq2seq import attention_map
from seq2seq.attention_map import attention_weights, cross_attention, find_cjk_font, save_heatmap
from seq2seq.errors import UserError
from seq2seq.layers import explicit_attention
from seq2seq.masks import padding_mask
from seq2seq.tokenizer import BOS, EOS, PAD
from seq2seq.translate import Translator, load_model

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def translator(toy_run) -> Translator:
    model, tokenizer, cfg = load_model(toy_run, torch.device("cpu"))
    return Translator(model, tokenizer, cfg.decode, torch.device("cpu"))


def _pair(translator: Translator) -> tuple[list[int], list[int]]:
    src = translator.encode("我们明天去公园散步。")  # x… <end>
    tgt = translator.tokenizer.encode_tgt("We will take a walk in the park tomorrow.")
    return src, tgt


def test_rows_are_distributions_over_the_source(translator):
    src, tgt = _pair(translator)
    weights = cross_attention(translator.model, src, tgt)
    assert weights.shape == (len(tgt) + 1, len(src))  # rows: positions predicting tgt… <end>
    assert weights.dtype == torch.float32 and weights.device.type == "cpu"
    assert (weights >= 0).all()
    assert torch.allclose(weights.sum(dim=1), torch.ones(len(tgt) + 1), atol=1e-5)


def test_empty_translation_gives_one_row(translator):
    src, _ = _pair(translator)
    weights = cross_attention(translator.model, src, [])
    assert weights.shape == (1, len(src))  # only <start> -> <end>
    assert weights.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_head_selection_and_mean(translator):
    model = translator.model
    src, tgt = _pair(translator)
    per_head = torch.stack([cross_attention(model, src, tgt, head=h) for h in range(model.cfg.heads)])  # (H, T, S)
    assert torch.allclose(cross_attention(model, src, tgt), per_head.mean(dim=0), atol=1e-6)
    assert not torch.allclose(per_head[0], per_head[1])  # heads differ, so selection is not a no-op
    for h in range(model.cfg.heads):
        assert torch.allclose(per_head[h].sum(dim=1), torch.ones(len(tgt) + 1), atol=1e-5)


def test_layer_selection(translator):
    model = translator.model
    src, tgt = _pair(translator)
    last = len(model.decoder_layers) - 1
    assert torch.equal(cross_attention(model, src, tgt, layer=-1), cross_attention(model, src, tgt, layer=last))
    assert not torch.allclose(cross_attention(model, src, tgt, layer=0), cross_attention(model, src, tgt, layer=last))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_weights_are_the_ones_the_decoder_used(norm):
    """The returned weights, applied to the layer's values, reproduce the cross-attention output."""
    model = build_tiny_model(norm=norm)
    src = [5, 6, 7, 8, 9, EOS]
    tgt = [10, 11, 12, 13]
    layer = model.decoder_layers[-1].cross_attn
    seen = {}
    hook = layer.register_forward_hook(lambda _m, args, out: seen.update(args=args, out=out))
    try:
        src_ids, tgt_in = torch.tensor([src]), torch.tensor([[BOS, *tgt]])
        src_mask = padding_mask(src_ids, PAD)
        with torch.no_grad():
            model.decode(tgt_in, model.encode(src_ids, src_mask), src_mask)
    finally:
        hook.remove()
    query, _keys, values, _mask = seen["args"]
    heads = torch.stack([cross_attention(model, src, tgt, head=h) for h in range(model.cfg.heads)])  # (H, T, S)
    mixed = heads[None] @ values  # (1, H, T, K)
    out = layer.out_proj(mixed.transpose(1, 2).reshape(1, len(tgt) + 1, -1))  # (1, T, H*K) -> (1, T, D)
    assert torch.allclose(out, seen["out"], atol=1e-5)
    # and they are softmax(QKᵀ/√K) of that query, not of some other input
    q = layer._split(layer.q_proj(query))
    assert torch.allclose(heads, explicit_attention(q, _keys, values, None)[1][0], atol=1e-6)


@pytest.mark.parametrize(
    ("layer", "head", "named"),
    [(2, None, "--layer 2"), (-3, None, "--layer -3"), (-1, 4, "--head 4"), (-1, -1, "--head -1")],
)
def test_bad_layer_or_head_is_a_user_error(layer, head, named):
    model = build_tiny_model()  # 2 decoder layers, 4 heads
    with pytest.raises(UserError, match=named):
        cross_attention(model, [5, 6, EOS], [7], layer=layer, head=head)


SRC_PIECES, TGT_PIECES = ["▁我", "们", "喝", "咖啡", "。", "<end>"], ["▁We", "▁drink", "▁coffee", ".", "<end>"]


def _heatmap(path) -> None:
    weights = torch.softmax(torch.randn(len(TGT_PIECES), len(SRC_PIECES)), dim=-1)
    save_heatmap(weights, SRC_PIECES, TGT_PIECES, path, "test")


def _need_cjk_font() -> None:
    """CI installs fonts-noto-cjk (.ci/run): there a missing font fails; elsewhere it skips."""
    if find_cjk_font() is None:
        message = "no CJK font installed (Debian: apt-get install fonts-noto-cjk)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)


@pytest.mark.filterwarnings("error")  # a "Glyph … missing from font" warning means boxes were drawn
def test_png_draws_chinese_labels_with_a_cjk_font(tmp_path):
    _need_cjk_font()
    path = tmp_path / "map.png"
    _heatmap(path)
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_svg_keeps_the_labels_as_text(tmp_path):
    path = tmp_path / "map.svg"
    _heatmap(path)
    texts = [t.text for t in ElementTree.parse(path).iter("{http://www.w3.org/2000/svg}text")]
    assert texts[: len(SRC_PIECES)] == SRC_PIECES  # x tick labels first, as text, not glyph outlines
    assert set(TGT_PIECES) <= set(texts)


def test_png_without_a_cjk_font_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setattr(attention_map, "find_cjk_font", lambda: None)
    path = tmp_path / "map.png"
    with pytest.raises(UserError, match="apt-get install fonts-noto-cjk"):
        _heatmap(path)
    assert not path.exists()
    _heatmap(tmp_path / "map.svg")  # SVG leaves the glyphs to the viewer: still fine
    ascii_only = tmp_path / "ascii.png"  # labels without CJK need no CJK font
    save_heatmap(torch.ones(1, 1), ["<end>"], ["<end>"], ascii_only, "test")
    assert ascii_only.read_bytes()[:8] == PNG_MAGIC


def test_save_heatmap_without_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    path = tmp_path / "map.png"
    with pytest.raises(UserError, match="pip install"):
        save_heatmap(torch.ones(1, 1), ["<end>"], ["<end>"], path, "test")
    assert not path.exists()


def test_translate_attention_writes_a_png(toy_run, tmp_path):
    out = tmp_path / "map.png"
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--beam", "1", "--max-len", "6"]
    result = run_cli(*args, "--attention", str(out), "--head", "0", "我们去散步。", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1  # the translation itself still goes to stdout
    assert f"attention map saved to {out}" in result.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_translate_attention_bad_layer_is_one_line(toy_run, tmp_path):
    out = tmp_path / "map.png"
    args = ["translate", "--model", str(toy_run), "--device", "cpu", "--beam", "1", "--max-len", "3"]
    result = run_cli(*args, "--attention", str(out), "--layer", "9", "你好。", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--layer 9" in lines[0] and "Traceback" not in result.stderr
    assert not out.exists()


def test_all_three_kinds_every_layer_and_head(translator):
    model = translator.model
    src, tgt = _pair(translator)
    weights = attention_weights(model, src, tgt)
    s, t, h = len(src), len(tgt) + 1, model.cfg.heads
    assert weights.encoder.shape == (len(model.encoder_layers), h, s, s)
    assert weights.decoder.shape == (len(model.decoder_layers), h, t, t)
    assert weights.cross.shape == (len(model.decoder_layers), h, t, s)
    for kind in (weights.encoder, weights.decoder, weights.cross):
        assert torch.allclose(kind.sum(-1), torch.ones(kind.shape[:-1]), atol=1e-5)
    assert (weights.decoder.triu(1) == 0).all() and (weights.decoder.diagonal(dim1=-2, dim2=-1) > 0).all()
    assert not torch.allclose(weights.encoder[0], weights.encoder[-1])  # layers are not copies of one another
    assert torch.equal(weights.cross[-1].mean(0), cross_attention(model, src, tgt))
    for layer in [*model.encoder_layers, *model.decoder_layers]:  # the recording left no trace on the modules
        assert "attend" not in vars(layer.self_attn)
