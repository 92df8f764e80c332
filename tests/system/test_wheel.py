"""The built wheel works where a pip user has it: outside the checkout, with the recipes inside the package.

The wheel is built from a copy of what the sdist would hold (pyproject.toml, README.md, seq2seq/), so a file the
package needs but does not ship fails here. It is installed into a fresh virtual environment in a temporary
directory; that environment's only other packages are those of the environment running the tests, seen through
a ``.pth`` line rather than installed again (a real install of torch and the rest takes over a minute from a
local disk). So this verifies the wheel's own contents, its entry point, its declared dependencies (pip checks
them against what it sees, and may not download: ``--no-index``) and that nothing reaches the checkout — not
that PyPI's copies of the dependencies install. A ``.pth`` line adds a path without running the ``.pth`` files
in it, so the editable install of the checkout that the test environment may hold stays out.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from conftest import REPO, TOY_SRC, TOY_TGT

from seq2seq import __version__
from seq2seq.recipe import recipe_names

# The zh-en recipe cut to a few steps on the toy corpus: what a user's first try looks like, in seconds.
SHORT_RUN = (
    "train.max_steps=2",
    "train.eval_every=2",
    "train.eval_sentences=8",
    "train.average_last=0",
    "train.threads=1",
    "data.dev_size=20",
    "data.test_size=20",
    "data.batch_tokens=512",
)


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment holding the wheel (its bin directory) and the environment to run it with."""
    root = tmp_path_factory.mktemp("wheel")
    assert REPO not in root.parents
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "seq2seq", source / "seq2seq", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["OMP_NUM_THREADS"] = "1"
    wheels = root / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, source], root, env)
    (wheel,) = wheels.glob("seq2seq-*.whl")

    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], root, env)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root, env).strip())
    deps = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))  # torch, pip and the rest
    (site / "test_environment.pth").write_text("".join(f"{path}\n" for path in deps), encoding="utf-8")
    _run([python, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-index", wheel], root, env)
    return venv / "bin", {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def test_the_wheel_lists_fetches_inits_trains_and_translates_outside_the_checkout(installed, tmp_path):
    bin_dir, env = installed
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(TOY_SRC, work / "toy.zh")
    shutil.copy(TOY_TGT, work / "toy.en")
    seq2seq = bin_dir / "seq2seq"

    where = _run([bin_dir / "python", "-c", "import seq2seq.recipe as r; print(r.RECIPES)"], work, env).strip()
    assert Path(where).is_relative_to(bin_dir.parent), f"seq2seq imported from {where}, not the wheel"
    assert _run([seq2seq, "--version"], work, env).strip() == f"seq2seq {__version__}"

    listed = _run([seq2seq, "recipes"], work, env).splitlines()
    assert [line.split()[0] for line in listed] == recipe_names() and "zh-en" in recipe_names()

    built = work / "corpus"  # a built corpus as a local copy: the fetcher runs from the package, offline
    built.mkdir()
    shutil.copy(TOY_SRC, built / "all.zh")
    shutil.copy(TOY_TGT, built / "all.en")
    _run([seq2seq, "fetch", "--local", built], work, env)
    fetched = work / "data" / "tatoeba-cmn-eng"
    assert (fetched / "all.en").read_bytes() == TOY_TGT.read_bytes()

    text = _run([seq2seq, "init", "--src", "toy.zh", "--tgt", "toy.en"], work, env)
    (work / "my.yaml").write_text(text, encoding="utf-8")
    data = yaml.safe_load(text)["data"]
    assert (data["src"], data["tgt"], data["corpora"]) == ("toy.zh", "toy.en", [])

    sets = [arg for setting in SHORT_RUN for arg in ("--set", setting)]
    _run([seq2seq, "train", "--config", "my.yaml", "--device", "cpu", *sets], work, env)
    assert (work / "runs" / "zh-en" / "best.pt").is_file()  # the recipe's run_dir, relative to where it ran

    out = _run([seq2seq, "translate", "--model", "runs/zh-en", "--beam", "1", "我们走吧。", "谢谢。"], work, env)
    assert len(out.splitlines()) == 2  # one line per sentence (what a model two steps old says is no matter)
