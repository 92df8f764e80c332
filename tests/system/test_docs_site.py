"""The docs site: `mkdocs build --strict` passes on the real docs, and fails on a link it cannot resolve."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strictly_with_the_generated_references(tmp_path):
    done = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "model.d_model" in config and "&lt;start&gt;" in config
    assert "seq2seq translate" in cli and "--beam" in cli
    for page in yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]:
        (path,) = page.values()
        built = Path("index.html") if path == "index.md" else Path(path).with_suffix("") / "index.html"
        assert (tmp_path / "site" / built).is_file(), path


@pytest.mark.parametrize(
    ("link", "complaint"),
    [
        ("[the config code](../seq2seq/config.py)", "../seq2seq/config.py"),
        ("[a heading](index.md#no-such-heading)", "#no-such-heading"),
        ("[a page](no-such-page.md)", "no-such-page.md"),
    ],
)
def test_a_link_the_site_cannot_resolve_fails_the_build(tmp_path, link, complaint):
    settings = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\nSee {link}.\n", encoding="utf-8")
    settings.update(docs_dir=str(docs), nav=[{"Home": "index.md"}], hooks=[], theme={"name": "mkdocs"})  # faster
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    done = _build(config, tmp_path / "site")
    assert done.returncode == 1
    assert complaint in done.stderr
