"""The data cache: one directory per corpus content and settings, built once, shared by runs.

An entry's name hashes everything that decides its content (the corpus files' bytes, the data
settings that change the encoding, ``PIPELINE_VERSION``, a given tokenizer); an entry counts only
when every file the build writes is there; builders on one machine take turns under the lock of
the cache directory's ``.lock`` file (``seq2seq.filelock``); and a run directory receives a copy of
what translation needs (tokenizer, dev/test text).
"""

import hashlib
import json
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path

from seq2seq.atomic import write_bytes_atomically
from seq2seq.config import DataConfig
from seq2seq.data.corpus import Split, corpus_key
from seq2seq.data.shards import shard_files
from seq2seq.data.tokenizer import FILES as TOKENIZER_FILES
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError
from seq2seq.filelock import locked as file_locked

PIPELINE_VERSION = 6
LOCK_NAME = ".lock"  # in the cache directory, beside the entries
# Settings that do not change the encoded data, so they stay out of the cache key.
_NOT_IN_KEY = {"batch_tokens", "cache_dir", "subword_alpha", "tgt_lang", "src_lang"}


def _file_digest(path: str | None, digest: "hashlib._Hash", key: str) -> None:
    """Add a file's size and bytes (or a marker for an absent one) to ``digest``; ``key`` names the setting."""
    if path is None:
        digest.update(b"none;")
        return
    try:
        digest.update(f"{Path(path).stat().st_size};".encode())  # delimits files: no two corpora hash alike
        with Path(path).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        raise UserError(
            f"{key}: file {path} not found or unreadable; fetch it with seq2seq fetch or fix the path"
        ) from None


def cache_key(cfg: DataConfig, tokenizer: Tokenizer | None = None) -> str:
    """Hash of the corpus files' bytes, the data settings, the pipeline version and a given tokenizer."""
    digest = hashlib.sha256()
    settings = {k: v for k, v in asdict(cfg).items() if k not in _NOT_IN_KEY}
    digest.update(json.dumps([PIPELINE_VERSION, settings], sort_keys=True).encode())
    if tokenizer is not None:
        digest.update(b"tokenizer;" + tokenizer.serialized())
    files = [
        (getattr(corpus, name), f"{corpus_key(cfg, i)}{name}")
        for i, corpus in enumerate(cfg.corpus_list())
        for name in ("tsv", "src", "tgt")
    ]
    files += [(getattr(cfg, name), f"data.{name}") for name in ("dev_src", "dev_tgt", "test_src", "test_tgt")]
    for path, key in files:
        _file_digest(path, digest, key)
    return digest.hexdigest()[:16]


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_split(directory: Path, name: str) -> Split:
    read = lambda side: (directory / f"{name}.{side}").read_text(encoding="utf-8").splitlines()  # noqa: E731
    return Split(read("src"), read("tgt"))


def is_complete(directory: Path) -> bool:
    """Whether a cache entry holds every file ``_build`` writes (report.json, written last, among them)."""
    names = ["report.json", *shard_files("train"), *shard_files("dev")] + [
        f"{split}.{side}" for split in ("train", "dev", "test") for side in "src tgt".split()
    ]
    return all((directory / name).is_file() for name in names) and any(directory.glob("spm*.model"))


def locked(directory: Path) -> AbstractContextManager[None]:
    """An exclusive lock on cache ``directory`` for a ``with`` block (released when the process dies, too)."""
    return file_locked(directory / LOCK_NAME)


def install_into_run(cache: Path, run_dir: Path) -> None:
    """Copy tokenizer and dev/test text into the run directory (refusing a different tokenizer)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    wanted = {name: (cache / name).read_bytes() for name in TOKENIZER_FILES if (cache / name).is_file()}
    present = {name: (run_dir / name).read_bytes() for name in TOKENIZER_FILES if (run_dir / name).is_file()}
    if present and present != wanted:
        raise UserError(
            f"{run_dir} holds a model trained with another tokenizer or corpus; "
            "choose a new train.run_dir (or delete the old run)"
        )
    # Atomic: a run killed mid-copy must not leave a half tokenizer that the next start takes for another one.
    for name, model in wanted.items():
        write_bytes_atomically(run_dir / name, model)
    others = [path.name for path in cache.glob("test.*.src")]  # the test sources in the other script
    for name in ["dev.src", "dev.tgt", "test.src", "test.tgt", "test.novelty", *others]:
        write_bytes_atomically(run_dir / name, (cache / name).read_bytes())
