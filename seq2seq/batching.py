"""Token-based, length-bucketed batches with a resumable, seeded order.

Each epoch: sentences are shuffled, then sorted by length (``length_key``), cut
into batches of at most ``batch_tokens`` padded positions, and the batches are
shuffled. Only the length arrays and index lists are held, in the narrowest
integers that hold them (a few bytes per sentence: at 10^7 sentences every
byte per sentence is 10 MB); the order of epoch e is a pure function of
(seed, e), so the state to resume is just (epoch, position).
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.tokenizer import BOS, EOS, PAD


@dataclass
class Batch:
    """Padded id tensors of one batch."""

    src: Tensor  # (B, S): x… <end>
    tgt_in: Tensor  # (B, T): <start> y…
    tgt_out: Tensor  # (B, T): y… <end>

    @property
    def tokens(self) -> int:
        """Non-pad target tokens (what the loss is averaged over)."""
        return int((self.tgt_out != PAD).sum())

    def to(self, device: torch.device) -> "Batch":
        return Batch(
            self.src.to(device, non_blocking=True),
            self.tgt_in.to(device, non_blocking=True),
            self.tgt_out.to(device, non_blocking=True),
        )


def cut_batches(order: Tensor, src_len: Tensor, tgt_len: Tensor, batch_tokens: int) -> list[Tensor]:
    """Cut ``order`` into consecutive batches whose padded size B·max(S, T) ≤ batch_tokens.

    ``tgt_len`` counts decoder positions (target + 1 for <start>/<end>).
    """
    longest = torch.maximum(src_len, tgt_len)
    batches, start, widest = [], 0, 0
    for i, length in enumerate(_chunked_list(longest, order)):
        widest_if_added = max(widest, length)
        if (i - start + 1) * widest_if_added > batch_tokens and i > start:
            batches.append(order[start:i])
            start, widest_if_added = i, length
        widest = widest_if_added
    if start < len(order):
        batches.append(order[start:])
    return batches


def _chunked_list(values: Tensor, order: Tensor, chunk: int = 1 << 20) -> Iterator[int]:
    """``values[order]`` as Python ints, converted a chunk at a time (a list of all would cost 8 bytes each)."""
    for start in range(0, len(order), chunk):
        yield from values[order[start : start + chunk]].tolist()


def length_key(src_len: Tensor, tgt_len: Tensor) -> Tensor:
    """Sort key grouping sentences of similar shape.

    Primary: the longer side (it sets the batch width). Within it, by source then
    target length, alternating direction ("snake") between consecutive widths
    so that neighbouring groups join smoothly: consecutive batches then share
    their widths more often than in plain (S, T) order, so they pad less
    (``seq2seq prepare`` reports the padding fraction).
    """
    scale = int(torch.maximum(src_len, tgt_len).max()) + 1
    # the narrowest integer that holds every key (the same values, so the same order)
    dtype = torch.int32 if scale**3 < 2**31 else torch.int64
    longest = torch.maximum(src_len, tgt_len).to(dtype)
    inner = src_len.to(dtype, copy=True).mul_(scale).add_(tgt_len)  # in place: one N-sized temporary fewer
    snake = torch.where(longest % 2 == 0, inner, scale * scale - 1 - inner)
    return snake.add_(longest.mul_(scale * scale))


class BucketSampler:
    """Yields index tensors of length-bucketed batches, epoch after epoch."""

    def __init__(
        self,
        src_len: Tensor,
        tgt_len: Tensor,
        batch_tokens: int,
        seed: int,
        shuffle: bool = True,
        lengths_at: Callable[[int], tuple[Tensor, Tensor]] | None = None,
        items_at: Callable[[int], Tensor] | None = None,
    ) -> None:
        """``lengths_at(epoch)``, if given, supplies each epoch's (source, target) lengths: the
        sentences stay the same but their segmentation changes (subword regularization).
        ``items_at(epoch)``, if given, supplies the sentence indices an epoch holds (repeats
        allowed; several corpora mixed by weight, ``seq2seq.mixing``); default: each sentence once."""
        self.src_len, self.tgt_len = src_len, tgt_len + 1
        self.batch_tokens, self.seed, self.shuffle = batch_tokens, seed, shuffle
        self.lengths_at, self.items_at = lengths_at, items_at
        self.epoch, self.position = 0, 0

    def epoch_batches(self, epoch: int) -> list[Tensor]:
        """The batches of ``epoch``, in the order they are served."""
        if self.lengths_at is not None:
            src_len, tgt_len = self.lengths_at(epoch)
            self.src_len, self.tgt_len = src_len, tgt_len + 1
        index = torch.int32 if len(self.src_len) < 2**31 else torch.int64  # sentence indices
        # every sentence once (the default) is arange(n), and arange(n)[p] is p: no arange is made
        items = self.items_at(epoch) if self.items_at is not None else None
        if not self.shuffle:
            key = length_key(self.src_len, self.tgt_len)
            if items is None:
                order = torch.argsort(key, stable=True).to(index)
            else:
                order = items[torch.argsort(key[items], stable=True)]
            return cut_batches(order, self.src_len, self.tgt_len, self.batch_tokens)
        generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
        size = len(self.src_len) if items is None else len(items)
        shuffled = torch.randperm(size, generator=generator, dtype=index)
        perm = shuffled if items is None else items[shuffled]
        # Stable sort of a random permutation: equal lengths come in a new order each epoch.
        # (The keys of all sentences live only until they are gathered in ``perm``'s order.)
        order = perm[torch.argsort(length_key(self.src_len, self.tgt_len)[perm], stable=True)]
        del shuffled, perm
        batches = cut_batches(order, self.src_len, self.tgt_len, self.batch_tokens)
        return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]

    def __iter__(self) -> Iterator[Tensor]:
        """Endless, from the saved (epoch, position).

        The state moves past a batch before it is yielded (to the next epoch
        after its last batch), so ``state_dict()`` always names the next batch
        and ``epoch`` counts the epochs completed.
        """
        batches = None
        while True:
            if batches is None:  # built on demand: an epoch starts when its first batch is asked for
                batches = self.epoch_batches(self.epoch)
            batch = batches[self.position]
            self.position += 1
            if self.position == len(batches):
                self.epoch, self.position, batches = self.epoch + 1, 0, None
            yield batch.long()

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def padding_fraction(batches: list[Tensor], src_len: Tensor, tgt_len: Tensor) -> float:
    """Share of padded positions over source and decoder-side tensors of all batches."""
    padded = real = 0
    for idx in batches:
        s, t = src_len[idx], tgt_len[idx] + 1
        padded += len(idx) * (int(s.max()) + int(t.max()))
        real += int(s.sum()) + int(t.sum())
    return 1.0 - real / max(padded, 1)


def gather_padded(tokens: Tensor, offsets: Tensor, indices: Tensor, extra: int = 0) -> tuple[Tensor, Tensor]:
    """Sequences ``indices`` of flat storage -> (ids (B, L + extra) padded with PAD, lengths (B,)).

    ``tokens[offsets[i]:offsets[i+1]]`` is sequence i; one gather, no Python loop.
    """
    starts = offsets[indices]
    lengths = offsets[indices + 1] - starts
    positions = torch.arange(int(lengths.max()) + extra)
    real = positions[None, :] < lengths[:, None]  # (B, L)
    source = tokens if len(tokens) else torch.zeros(1, dtype=tokens.dtype)
    flat = (starts[:, None] + positions[None, :]).clamp(max=len(source) - 1)
    return torch.where(real, source[flat].long(), PAD), lengths


def make_batch(
    src_tokens: Tensor, src_offsets: Tensor, tgt_tokens: Tensor, tgt_offsets: Tensor, indices: Tensor
) -> Batch:
    """Padded Batch of sentences ``indices``: src as stored, tgt wrapped as <start> y… / y… <end>."""
    src, _ = gather_padded(src_tokens, src_offsets, indices)
    y, tgt_len = gather_padded(tgt_tokens, tgt_offsets, indices, extra=1)  # (B, T): room for <end>
    tgt_out = y.clone()
    tgt_out[torch.arange(len(indices)), tgt_len] = EOS
    tgt_in = torch.cat([torch.full((len(indices), 1), BOS, dtype=torch.long), y[:, :-1]], dim=1)
    return Batch(src, tgt_in, tgt_out)
