"""seq2seq.explain.heatmap: ``save_heatmap`` writes SVG with text labels and PNG with a CJK font (or
says how to get one, or how to install matplotlib), and ``seq2seq translate --attention`` writes
the map end to end (on the session's shared toy run, conftest.toy_run)."""

import os
import sys
from xml.etree import ElementTree

import pytest
import torch
from conftest import run_cli

from seq2seq.errors import UserError
from seq2seq.explain import heatmap
from seq2seq.explain.heatmap import find_cjk_font, save_heatmap

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    monkeypatch.setattr(heatmap, "find_cjk_font", lambda: None)
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
