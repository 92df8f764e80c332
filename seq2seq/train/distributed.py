"""Data-parallel training over the processes that ``torchrun`` starts: one per GPU (NCCL) or
several on a CPU machine (gloo), on one machine or several.

``join_world`` is the only entry point: under ``torchrun`` (it sets ``RANK``/``WORLD_SIZE``) it
joins the process group; a plain ``seq2seq train`` gets ``SINGLE``, whose methods touch no
collective and change nothing, so the trainer is written once for both.

How the work is shared, and why:

* **Batches.** Every rank builds the same ``BucketSampler`` order (same seed) and walks it in
  step; of the ``world × accum_steps`` batches of one optimizer step, rank r takes the r-th,
  (r + world)-th, … (``World.mine``). Each batch is cut to ``data.batch_tokens`` padded
  positions, so the shares are token-balanced, and N ranks with ``accum_steps`` a see exactly
  the batches one process sees with ``accum_steps`` N·a. ``data.batch_tokens`` is therefore
  per rank and per accumulation step; the global batch is ``world × accum_steps ×
  batch_tokens``, and ``train.lr`` is the rate for that global batch. The sampler's position
  counts global batches, so a checkpoint resumes on any world size: the batches that follow
  are dealt anew.
* **Gradients.** Each rank divides its losses by the *global* target-token count (one
  all-reduce of the count before the backward passes), so the sum of the ranks' gradients is
  the gradient one process gets from the union of their batches. After the local batches are
  accumulated into the float32 master weights (``MasterWeights.collect_grads``), one
  all-reduce of the flat float32 gradient sums them. Not DDP: DDP hooks ``forward()``, and
  our loss fuses ``states()`` with the output projection outside it; reducing once per
  optimizer step also keeps accumulation free of communication and reduces in float32 when
  the passes run on a bf16 copy. The price is no overlap of communication with the backward
  pass, which matters only for models far larger than ours on many GPUs.
* **Decisions.** Everything that ends or branches the loop (step and time budgets, early
  stopping, a stop signal) is agreed by an all-reduce at each step boundary
  (``World.any_of``), so no rank waits in a collective that another rank skipped: the clock
  differs per rank, and ``torchrun`` forwards SIGTERM to every rank, each at its own moment.
  The time trained is agreed as well (the slowest rank's), since a cosine schedule under
  ``max_minutes`` reads it: ranks with different learning rates would drift apart.
* **Writing.** Only rank 0 writes the run directory (checkpoints, metrics.jsonl, the bar and
  log lines); the others only compute. Validation runs on every rank, each on its share of
  the dev batches and of the sentences to decode, and the figures are combined, so every
  rank holds the same result.
* **Failures.** ``torchrun`` stops all ranks when one exits with an error; a rank that hangs
  instead makes the others' next collective fail after ``train.collective_timeout_minutes``.
"""

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from seq2seq.errors import UserError

T = TypeVar("T")


def launched_by_torchrun() -> bool:
    """True inside a process that ``torchrun`` started (it sets these variables for every rank)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "LOCAL_RANK" in os.environ


@dataclass(frozen=True)
class World:
    """This process's place among the training processes; ``SINGLE`` is a plain one-process run."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0  # rank among the processes on this machine (the GPU it uses)
    local_size: int = 1  # processes on this machine (they share its CPU cores)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes the run directory and talks to the user."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def mine(self, items: Sequence[T]) -> list[T]:
        """This rank's share of ``items``: the rank-th, (rank + size)-th, … of them."""
        return list(items[self.rank :: self.size])

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum of ``values`` over the ranks (float64)."""
        if not self.distributed:
            return list(values)
        total = torch.tensor(values, dtype=torch.float64, device=self._comm_device)
        dist.all_reduce(total)
        return total.tolist()

    def max(self, value: float) -> float:
        """The largest ``value`` over the ranks (float64)."""
        if not self.distributed:
            return value
        largest = torch.tensor([value], dtype=torch.float64, device=self._comm_device)
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
        return float(largest)

    def any_of(self, flags: Sequence[bool]) -> list[bool]:
        """Element-wise OR of ``flags`` over the ranks: every rank gets the same decisions."""
        if not self.distributed:
            return list(flags)
        raised = torch.tensor([int(f) for f in flags], dtype=torch.int32, device=self._comm_device)
        dist.all_reduce(raised, op=dist.ReduceOp.MAX)
        return [bool(f) for f in raised.tolist()]

    @torch.no_grad()
    def sum_grads(self, model: nn.Module) -> None:
        """Sum the parameters' ``.grad`` over the ranks with one all-reduce of one flat buffer.

        A parameter without a gradient contributes zeros, so every rank's buffer has one layout.
        """
        if not self.distributed:
            return
        params = list(model.parameters())
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        dist.all_reduce(flat)
        start = 0
        for p in params:
            grad = flat[start : start + p.numel()].view_as(p)  # (numel,) -> the parameter's shape
            p.grad = grad if p.grad is None else p.grad.copy_(grad)
            start += p.numel()

    def gather(self, value: T) -> list[T]:
        """Every rank's ``value`` (picklable), in rank order, on every rank."""
        if not self.distributed:
            return [value]
        gathered: list[Any] = [None] * self.size
        dist.all_gather_object(gathered, value)
        return gathered

    def from_main(self, make: Callable[[], T]) -> T:
        """``make()`` run on rank 0 and its result (picklable) sent to every rank.

        Rank 0 reads the run directory (a checkpoint to resume, the kept snapshots), which the
        other machines of a multi-node job need not see.
        """
        if not self.distributed:
            return make()
        box = [make() if self.main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    @property
    def _comm_device(self) -> torch.device:
        """Where the small tensors of a collective live: NCCL only reduces GPU tensors."""
        return self.device if self.device.type == "cuda" else torch.device("cpu")


SINGLE = World()


@contextmanager
def join_world(device_name: str, timeout_minutes: float) -> Iterator[World]:
    """The process group for the block when started by ``torchrun``, else ``SINGLE``.

    NCCL with one GPU per process (``cuda:LOCAL_RANK``) on CUDA, gloo on a CPU. Collectives
    that wait longer than ``timeout_minutes`` fail instead of hanging.
    """
    if not launched_by_torchrun():
        yield SINGLE
        return
    if device_name == "mps":
        raise UserError("train.device=mps: a torchrun job runs on CUDA GPUs or CPUs; train on MPS as one process")
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank, local_size = int(os.environ["LOCAL_RANK"]), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda = device_name.startswith("cuda") or (device_name == "auto" and torch.cuda.is_available())
    if cuda:
        if not torch.cuda.is_available():
            raise UserError(f"device {device_name!r} asked for, but no CUDA GPU is available; use --device cpu")
        if local_rank >= torch.cuda.device_count():
            raise UserError(
                f"rank {rank}: local rank {local_rank} but only {torch.cuda.device_count()} GPUs on this machine; "
                "give torchrun --nproc-per-node at most the number of GPUs"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(
        "nccl" if cuda else "gloo", rank=rank, world_size=size, timeout=timedelta(minutes=timeout_minutes)
    )
    try:
        yield World(rank, size, local_rank, local_size, device)
        # On a normal exit only (a rank that failed would leave the others waiting here): no rank closes its
        # gloo connections while another is still in a collective on them, which aborted that rank under load.
        dist.barrier()
    finally:
        dist.destroy_process_group()
