"""Where a training step's time goes: matmuls against everything else, in each precision.

Trains the recipe's model on its bucketed batches (a few warm-up steps, then ``--steps``
profiled steps per precision: float32, bf16 autocast, bf16 weights with float32 master
weights) under ``torch.profiler`` and groups the operators' own CPU time
into a few kinds. The matmul row also shows the rate the matmuls themselves reach (from the
profiler's FLOP counts), which bounds the useful GFLOP/s of a whole step: a step cannot beat its
matmuls, and the rest of the step only adds time.

    python scripts/profile_step.py                  # the default recipe
    python scripts/profile_step.py --set model.d_model=512 --set model.ffn_dim=2048
"""

import argparse
from collections import defaultdict

import torch
from benchlib import add_common_options, set_threads, write_report
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from seq2seq.config import DEFAULT_CONFIG, TrainConfig, load_config
from seq2seq.data.batching import BucketSampler
from seq2seq.data.pipeline import prepare_data
from seq2seq.model.transformer import Transformer
from seq2seq.special import PAD
from seq2seq.train.precision import TRAIN_AUTOCAST, MasterWeights
from seq2seq.train.trainer import adamw, batch_loss, optimizer_update

PHASES = ("forward + loss", "backward", "clip + optimizer")
# Operator name fragments -> kind; the first match wins (checked in this order).
KINDS = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention (fused SDPA)": ("scaled_dot_product", "_flash_attention", "_efficient_attention"),
    "dropout masks": ("bernoulli", "dropout", "random_"),  # random_: the draws of seq2seq.model.layers.keep_scale
    "layer norm": ("layer_norm",),
    "loss, softmax": ("cross_entropy", "log_softmax", "softmax", "nll_loss", "amax", "ProjectedCrossEntropy"),
    "dtype casts, copies": ("aten::to", "_to_copy", "copy_", "clone"),
    "element-wise, other": ("",),
}


def kind_of(name: str) -> str:
    return next(kind for kind, parts in KINDS.items() if any(part in name for part in parts))


def profile_steps(model: nn.Module, batches: list, precision: str, steps: int, tc: TrainConfig) -> dict:
    """Own CPU time per operator kind and total time per phase (seconds), and the matmul FLOPs."""
    optimizer = adamw(model.parameters(), tc)
    weights = MasterWeights(model, bf16=precision == "bf16")

    def step(batch) -> None:
        with record_function(PHASES[0]):
            loss = batch_loss(weights.work, batch, tc.label_smoothing, TRAIN_AUTOCAST.get(precision))
        with record_function(PHASES[1]):
            (loss / batch.tokens).backward()
        with record_function(PHASES[2]):
            optimizer_update(weights, optimizer, None, tc.clip_norm)

    for batch in batches[:3]:  # warm-up: allocator, kernels
        step(batch)
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        for batch in batches[3 : 3 + steps]:
            step(batch)
    seconds: dict[str, float] = defaultdict(float)
    phases: dict[str, float] = {}
    matmul_flops = 0.0
    for event in prof.key_averages():
        if event.key in PHASES:
            phases[event.key] = event.cpu_time_total / 1e6
            continue
        kind = kind_of(event.key)
        seconds[kind] += event.self_cpu_time_total / 1e6
        if kind == "matmul":
            matmul_flops += event.flops
    return {"seconds": dict(seconds), "phases": phases, "matmul_flops": matmul_flops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="config override")
    parser.add_argument("--steps", type=int, default=10, help="profiled steps per precision")
    add_common_options(parser, "profile_step", device="cpu")
    args = parser.parse_args()
    set_threads(args.threads)
    cfg = load_config(args.config, args.set)
    data = prepare_data(cfg.data)
    train = data.train
    sampler = BucketSampler(train.src_lengths, train.tgt_lengths, cfg.data.batch_tokens, seed=0)
    batches = [train.batch(idx) for idx in sampler.epoch_batches(0)[: 3 + args.steps]]
    tok = data.tokenizer
    results = {}
    for precision in ("float32", "bf16-autocast", "bf16"):
        torch.manual_seed(0)
        model = Transformer(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, PAD)
        results[precision] = profile_steps(model, batches, precision, args.steps, cfg.train)
    print(f"{args.steps} training steps of {args.config}, {torch.get_num_threads()} threads; own CPU time by kind")
    print(f"{'kind':<24}" + "".join(f"{name:>20}" for name in results))
    for group, names in (("seconds", KINDS), ("phases", PHASES)):
        for name in names:
            cells = []
            for r in results.values():
                part, total = r[group].get(name, 0.0), sum(r[group].values())
                cells.append(f"{part:8.2f} s {100 * part / total:5.1f}%")
            print(f"{name:<24}" + "".join(f"{cell:>20}" for cell in cells))
        print()
    rates = [r["matmul_flops"] / max(r["seconds"].get("matmul", 0.0), 1e-9) / 1e9 for r in results.values()]
    print(f"{'matmul GFLOP/s':<24}" + "".join(f"{rate:>20.0f}" for rate in rates))
    write_report({"config": args.config, "overrides": args.set, "steps": args.steps, **results}, args.out)


if __name__ == "__main__":
    main()
