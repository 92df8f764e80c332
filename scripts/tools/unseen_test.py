"""A test set that none of several trained recipes saw: a run's test split minus every pair whose source
occurs among another recipe's training sources, for comparing recipes on sentences neither trained on.

    python scripts/tools/unseen_test.py --run runs/zh-en --trained zh-en zh-en-24k \\
        --out runs/unseen

Sources are compared as the pipeline stores them (normalized, in the script ``data.src_script`` asks
for), so a traditional-script copy of a training sentence counts as seen. Writes into ``--out``:
``test.src``/``test.tgt`` (the unseen pairs), ``test.novelty`` (each source's similarity to its
closest training source of any of the recipes, ``seq2seq.data.neardup``), and the two buckets the
recipe comparison reports as their own files: ``novel.*`` (novelty < ``NOVEL``) and ``long.*``
(13 or more characters). Each pair of files is what ``seq2seq evaluate --compare RUN… --src --ref``
reads.
"""

import argparse
import json
import sys
from pathlib import Path

from seq2seq.config import load_config
from seq2seq.data.corpus import normalize, read_lines
from seq2seq.data.neardup import NOVEL, closest_similarity
from seq2seq.data.pipeline import prepare_data
from seq2seq.errors import UserError

LONG = 13  # characters: the longest bucket of evaluate's length breakdown


def training_sources(config: str) -> list[str]:
    """The training sources of a recipe, as its (cached) pipeline stores them."""
    data = prepare_data(load_config(config).data)
    return read_lines(data.directory / "train.src", f"{config}: train.src")


def write(out: Path, name: str, src: list[str], tgt: list[str]) -> None:
    for side, lines in (("src", src), ("tgt", tgt)):
        (out / f"{name}.{side}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="run directory whose test split is filtered")
    parser.add_argument(
        "--trained", nargs="+", required=True, help="configs (files or recipe names) of every recipe compared"
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for the filtered test files")
    args = parser.parse_args()
    try:
        run = Path(args.run)
        src, tgt = read_lines(run / "test.src", "--run test.src"), read_lines(run / "test.tgt", "--run test.tgt")
        seen = [training_sources(config) for config in args.trained]
    except UserError as err:
        print(f"unseen_test: error: {err}", file=sys.stderr)
        return 2
    union = {normalize(s) for sources in seen for s in sources}
    keep = [i for i, s in enumerate(src) if normalize(s) not in union]
    src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
    novelty = closest_similarity(src, sorted(union))
    args.out.mkdir(parents=True, exist_ok=True)
    write(args.out, "test", src, tgt)
    (args.out / "test.novelty").write_text("".join(f"{x:.4f}\n" for x in novelty), encoding="utf-8")
    novel = [i for i, x in enumerate(novelty) if x < NOVEL]
    long = [i for i, s in enumerate(src) if len(normalize(s)) >= LONG]
    for name, rows in (("novel", novel), ("long", long)):
        write(args.out, name, [src[i] for i in rows], [tgt[i] for i in rows])
    counts = {"test": len(read_lines(run / "test.src", "test.src")), "unseen": len(src)}
    counts.update(novel=len(novel), long=len(long), seen_by=dict(zip(args.trained, map(len, seen), strict=True)))
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
