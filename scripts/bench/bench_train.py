"""Training throughput: our Transformer with our data pipeline vs ``torch.nn.Transformer``.

Both models have the same shape (the recipe's d_model, layers, heads, ffn, vocabulary, tied
embeddings), the same AdamW, schedule and label-smoothed loss, and train in one process,
alternating in rounds, on the same Tatoeba training split:

* ours      — length-bucketed batches from ``BucketSampler``, the recipe's precision (bf16
              autocast where the CPU has native bf16, ``seq2seq.train.precision``), the recipe's
              attention (``auto``: written out on a CPU, SDPA on CUDA), the loss fused with the
              output projection (``seq2seq.train.loss``);
* baseline  — ``nn.Transformer`` in float32 on random (unbucketed) batches of the same token
              budget, full logits and ``F.cross_entropy``, the way a plain training script does it.

Three more rows separate the effects: ours in the other bf16 mode (bf16 weights with float32
master weights, or autocast), ours in float32, and the baseline on our buckets.
Reported per row: steps/s and non-pad target tokens/s (min/median/max over rounds), useful
GFLOP/s (6 × non-embedding parameters × tokens, plus the output projection) against a measured
matmul peak in the row's precision, and the dev loss after training, to show that speed did not
cost quality at an equal number of target tokens. Peak RSS of the default recipe (and on a GPU
its peak GPU memory) is measured in a separate training process.

    python scripts/bench/bench_train.py                      # the default recipe, 5 rounds
    python scripts/bench/bench_train.py --rounds 3 --round-tokens 10000  # quicker
    python scripts/bench/bench_train.py --device cuda --round-tokens 300000  # on a GPU
"""

import argparse
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from benchlib import add_common_options, machine_info, set_threads, stats, sync, write_report
from torch import Tensor, nn

from seq2seq.config import DEFAULT_CONFIG, Config, load_config
from seq2seq.data.batching import Batch, BucketSampler, EpochBatches, cut_batches
from seq2seq.data.encoded import EncodedSplit
from seq2seq.data.pipeline import prepare_data
from seq2seq.device import autocast, resolve_device, resolve_precision
from seq2seq.model.layers import sinusoids
from seq2seq.model.transformer import Transformer
from seq2seq.special import PAD
from seq2seq.train.loss import label_smoothed_cross_entropy
from seq2seq.train.precision import EVAL_AUTOCAST, TRAIN_AUTOCAST, MasterWeights
from seq2seq.train.trainer import adamw, batch_loss, dev_loss, lr_factor, optimizer_update


class TorchTransformer(nn.Module):
    """``nn.Transformer`` with the same embeddings, positions and tied output as ours."""

    def __init__(self, cfg: Config, vocab: int) -> None:
        super().__init__()
        m = cfg.model
        self.embed = nn.Embedding(vocab, m.d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=m.d_model**-0.5)
        self.register_buffer("positions", sinusoids(m.max_positions, m.d_model), persistent=False)
        self.core = nn.Transformer(
            m.d_model, m.heads, m.encoder_layers, m.decoder_layers, m.ffn_dim, m.dropout, batch_first=True
        )
        self.dropout = nn.Dropout(m.dropout)
        self.scale = math.sqrt(m.d_model)
        self.out_proj = nn.Linear(m.d_model, vocab, bias=False)
        self.out_proj.weight = self.embed.weight

    def _embed(self, ids: Tensor) -> Tensor:
        return self.dropout(self.embed(ids) * self.scale + self.positions[: ids.size(1)])

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src (B, S), tgt_in (B, T) -> logits (B, T, V), as our Transformer's forward."""
        return self.out_proj(self.states(src, tgt_in))

    def states(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src (B, S), tgt_in (B, T) -> decoder states (B, T, D)."""
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        return self.core(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src == PAD,
        )


def plain_loss(model: nn.Module, batch: Batch, label_smoothing: float, autocast_dtype: torch.dtype | None) -> Tensor:
    """The textbook loss: full (N, V) logits, then ``F.cross_entropy`` in float32 (the reference loss)."""
    with autocast(batch.src.device, autocast_dtype):
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    return label_smoothed_cross_entropy(logits, batch.tgt_out, label_smoothing)


def random_batches(train: EncodedSplit, batch_tokens: int, seed: int) -> EpochBatches:
    """Unbucketed batches: a random order cut at the same token budget."""
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))
    return cut_batches(order, train.src_lengths, train.tgt_lengths + 1, batch_tokens)


def matmul_peak(dtype: torch.dtype, device: torch.device, repeats: int = 5) -> float:
    """Best GFLOP/s of a square matmul in ``dtype`` over a few sizes (larger ones on a GPU)."""
    rates = []
    for size in (1024, 2048) if device.type == "cpu" else (4096, 8192):
        a, b = (torch.randn(size, size, dtype=dtype, device=device) for _ in range(2))
        a @ b
        best = float("inf")
        for _ in range(repeats):
            sync(device)
            start = time.perf_counter()
            a @ b
            sync(device)
            best = min(best, time.perf_counter() - start)
        rates.append(2 * size**3 / best / 1e9)
    return max(rates)


@dataclass
class Row:
    """One contender: model, batches, precision, and what it measured."""

    name: str
    model: nn.Module
    batches: EpochBatches
    precision: str  # float32 | bf16-autocast | bf16 (seq2seq.train.precision)
    loss: Callable[[nn.Module, Batch, float, bool], Tensor]
    weights: MasterWeights = field(init=False)
    optimizer: torch.optim.Optimizer = None
    scheduler: torch.optim.lr_scheduler.LRScheduler = None
    position: int = 0
    steps_per_s: list[float] = field(default_factory=list)
    tokens_per_s: list[float] = field(default_factory=list)
    flops: float = 0.0
    seconds: float = 0.0
    tokens: int = 0
    padding: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.weights = MasterWeights(self.model, bf16=self.precision == "bf16")

    @property
    def bf16(self) -> bool:
        return self.precision != "float32"


def flops_per_step(model: nn.Module, src: Tensor, tgt_out: Tensor, vocab: int, d_model: int) -> float:
    """6 × (encoder params × source tokens + decoder params × target tokens) + output projection."""
    enc = sum(p.numel() for n, p in model.named_parameters() if "encoder" in n)
    dec = sum(p.numel() for n, p in model.named_parameters() if "decoder" in n)
    src_tokens, tgt_tokens = int((src != PAD).sum()), int((tgt_out != PAD).sum())
    return 6.0 * (enc * src_tokens + dec * tgt_tokens + d_model * vocab * tgt_tokens)


def run_steps(row: Row, train: EncodedSplit, cfg: Config, target_tokens: int, vocab: int, device: torch.device) -> None:
    """Train one row until it has seen ``target_tokens`` more target tokens; record its rates.

    A token budget (not a step count) per round gives every row the same amount of training
    data, so the dev losses at the end compare quality at equal tokens. Counts are taken on the
    CPU copy of each batch, so that a GPU is not made to wait for them.
    """
    row.model.train()
    flops, tokens, steps = 0.0, 0, 0
    sync(device)
    start = time.perf_counter()
    while tokens < target_tokens:
        batch = train.batch(row.batches[row.position % len(row.batches)])
        row.position += 1
        flops += flops_per_step(row.model, batch.src, batch.tgt_out, vocab, cfg.model.d_model)
        real = int((batch.src != PAD).sum()) + int((batch.tgt_in != PAD).sum())
        row.padding.append(1 - real / (batch.src.numel() + batch.tgt_in.numel()))
        n = batch.tokens
        batch = batch.to(device)
        loss = row.loss(row.weights.work, batch, cfg.train.label_smoothing, TRAIN_AUTOCAST.get(row.precision))
        (loss / n).backward()
        optimizer_update(row.weights, row.optimizer, row.scheduler, cfg.train.clip_norm)
        tokens += n
        steps += 1
    sync(device)
    seconds = time.perf_counter() - start
    row.steps_per_s.append(steps / seconds)
    row.tokens_per_s.append(tokens / seconds)
    row.flops += flops
    row.seconds += seconds
    row.tokens += tokens


def peak_memory_mb(config: str, overrides: list[str], steps: int) -> tuple[float, float | None]:
    """Peak RSS and peak GPU memory (MB; GPU None on a CPU) of a process training ``steps`` steps."""
    with tempfile.TemporaryDirectory() as run_dir:
        code = (
            "import sys, torch; from seq2seq.config import load_config; from seq2seq.train.trainer import Trainer; "
            "t = Trainer(load_config(sys.argv[1], sys.argv[2:])); t.fit(quiet=True); "
            "print(torch.cuda.max_memory_allocated(t.device) if t.device.type == 'cuda' else -1)"
        )
        overrides = [
            *overrides,
            f"train.run_dir={run_dir}",
            f"train.max_steps={steps}",
            f"train.eval_every={steps}",
            "train.eval_sentences=100",
            "train.average_last=0",
        ]
        done = subprocess.run([sys.executable, "-c", code, config, *overrides], check=True, capture_output=True)
    gpu_bytes = int(done.stdout.split()[-1])
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, gpu_bytes / 2**20 if gpu_bytes >= 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="config override")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (each row trains in each)")
    parser.add_argument("--round-tokens", type=int, default=30_000, help="target tokens per row per round")
    parser.add_argument("--rss-steps", type=int, default=30, help="steps of the separate peak-memory run; 0 = skip")
    add_common_options(parser, "bench_train")
    args = parser.parse_args()

    overrides = [*args.set, f"train.device={args.device}"]
    cfg = load_config(args.config, overrides)
    device = resolve_device(cfg.train.device)
    set_threads(args.threads)
    data = prepare_data(cfg.data)
    train, vocab = data.train, data.tokenizer.tgt_vocab_size
    precision = resolve_precision(cfg.train.precision, device)
    bucketed = BucketSampler(train.src_lengths, train.tgt_lengths, cfg.data.batch_tokens, seed=1).epoch_batches(0)
    unbucketed = random_batches(train, cfg.data.batch_tokens, seed=1)

    def ours() -> nn.Module:
        torch.manual_seed(1)
        return Transformer(cfg.model, data.tokenizer.src_vocab_size, vocab, PAD).to(device)

    def baseline() -> nn.Module:
        torch.manual_seed(1)
        return TorchTransformer(cfg, vocab).to(device)

    rows = [
        Row(f"ours, bucketed, {precision}", ours(), bucketed, precision, batch_loss),
        Row("nn.Transformer, random batches, float32", baseline(), unbucketed, "float32", plain_loss),
    ]
    other_bf16 = {"bf16": "bf16-autocast", "bf16-autocast": "bf16"}.get(precision)
    if other_bf16:
        rows.append(Row(f"ours, bucketed, {other_bf16}", ours(), bucketed, other_bf16, batch_loss))
    if precision != "float32":
        rows.append(Row("ours, bucketed, float32", ours(), bucketed, "float32", batch_loss))
    rows.append(Row("nn.Transformer, bucketed, float32", baseline(), bucketed, "float32", plain_loss))
    for row in rows:
        row.optimizer = adamw(row.model.parameters(), cfg.train)
        row.scheduler = torch.optim.lr_scheduler.LambdaLR(row.optimizer, lambda s: lr_factor(s, cfg.train))
        for _ in range(1 if device.type == "cpu" else 5):  # warm-up steps (a GPU picks its kernels), not timed below
            run_steps(row, train, cfg, 1, vocab, device)
        row.steps_per_s.clear(), row.tokens_per_s.clear(), row.padding.clear()
        row.flops = row.seconds = row.tokens = 0
    bf16 = any(row.bf16 for row in rows)
    peaks = {False: 0.0, True: 0.0 if bf16 else float("nan")}
    for _ in range(args.rounds):
        for row in rows:
            run_steps(row, train, cfg, args.round_tokens, vocab, device)
        # The peak is measured in every round, under the same conditions, and the best one kept:
        # noise then lowers the share of peak rather than raising it.
        peaks[False] = max(peaks[False], matmul_peak(torch.float32, device))
        if bf16:
            peaks[True] = max(peaks[True], matmul_peak(torch.bfloat16, device))
    rss, gpu_mb = peak_memory_mb(args.config, overrides, args.rss_steps) if args.rss_steps else (None, None)

    base = statistics.median(rows[1].tokens_per_s)
    results = []
    for row in rows:
        loss = dev_loss(row.model, data.dev, cfg.data.batch_tokens, device, EVAL_AUTOCAST.get(row.precision))
        gflops = row.flops / row.seconds / 1e9
        results.append(
            {
                "name": row.name,
                "steps_per_s": stats(row.steps_per_s),
                "tokens_per_s": stats(row.tokens_per_s),
                "ratio_vs_baseline": statistics.median(row.tokens_per_s) / base,
                "useful_gflops": gflops,
                "matmul_peak_gflops": peaks[row.bf16],
                "share_of_peak": gflops / peaks[row.bf16],
                "padding": statistics.mean(row.padding),
                "target_tokens_trained": row.tokens,
                "dev_loss": loss,
            }
        )
    machine = machine_info(device)
    report = {
        "machine": machine,
        "config": args.config,
        "rounds": args.rounds,
        "target_tokens_per_round": args.round_tokens,
        "batch_tokens": cfg.data.batch_tokens,
        "rows": results,
        "peak_rss_mb_default_recipe": rss,
        "peak_gpu_mb_default_recipe": gpu_mb,
        "command": " ".join(["python", *sys.argv]),
    }
    write_report(report, args.out)

    print(
        f"{machine.get('gpu', machine['cpu'])}, {machine['threads']} CPU threads, torch {machine['torch']}; "
        f"{args.rounds} rounds × {args.round_tokens} target tokens per row, batch_tokens {cfg.data.batch_tokens}"
    )
    print(
        f"{'row':42} {'steps/s':>8} {'tok/s (min/med/max)':>24} {'× base':>7} {'GFLOP/s':>8} {'% peak':>7} "
        f"{'pad':>5} {'dev loss':>9}"
    )
    for r in results:
        t = r["tokens_per_s"]
        print(
            f"{r['name']:42} {r['steps_per_s']['median']:8.2f} {t['min']:7.0f}/{t['median']:7.0f}/{t['max']:7.0f} "
            f"{r['ratio_vs_baseline']:7.2f} {r['useful_gflops']:8.1f} {100 * r['share_of_peak']:6.1f}% "
            f"{100 * r['padding']:4.0f}% {r['dev_loss']:9.3f}"
        )
    memory = "" if rss is None else f"; peak RSS of the default recipe: {rss:.0f} MB"
    memory += "" if gpu_mb is None else f", peak GPU memory {gpu_mb:.0f} MB"
    print(f"matmul peak: float32 {peaks[False]:.0f} GFLOP/s, bf16 {peaks[True]:.0f} GFLOP/s{memory}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
