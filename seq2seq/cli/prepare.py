"""``seq2seq prepare``: run the data pipeline only and print its report."""

import argparse
import json

from seq2seq.cli.common import add_config
from seq2seq.cli.parser import VERBS
from seq2seq.config import load_config
from seq2seq.data.batching import BucketSampler, padding_fraction
from seq2seq.data.mixing import CorpusMix
from seq2seq.data.pipeline import prepare_data


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help=VERBS["prepare"])
    add_config(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    cfg = load_config(args.config, args.set)
    data = prepare_data(cfg.data)
    train = data.train
    mix = CorpusMix.from_config(cfg.data, data.corpus_sizes, cfg.train.seed)
    sampler = BucketSampler(
        train.src_lengths,
        train.tgt_lengths,
        cfg.data.batch_tokens,
        cfg.train.seed,
        items_at=mix.epoch_items if mix else None,
    )
    batches = sampler.epoch_batches(0)
    report = dict(
        data.report,
        **({"mix": mix.describe()} if mix else {}),
        batches_per_epoch=len(batches),
        padding_fraction=round(padding_fraction(batches, train.src_lengths, train.tgt_lengths), 4),
    )
    print(json.dumps(report, indent=1))
