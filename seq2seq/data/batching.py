"""Token-based, length-bucketed batches with a resumable, seeded order.

Each epoch: sentences are shuffled, then sorted by length (``length_key``), cut
into batches of at most ``batch_tokens`` padded positions, and the batches are
shuffled. Only the length arrays and the epoch's order are held, in the narrowest
integers that hold them (a few bytes per sentence: at 10^7 sentences every
byte per sentence is 10 MB), and a batch is a slice of that order made when it is
served (``EpochBatches``); the order of epoch e is a pure function of
(seed, e), so the state to resume is just (epoch, position).
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.special import BOS, EOS, PAD, UNK


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


def drop_words(batch: Batch, rate: float) -> Batch:
    """Word dropout: each piece of the source and of the decoder's input becomes <unk> with probability
    ``rate``, so the model cannot lean on any one of them; <start>, <end>, <pad> stay, and so do the
    targets the loss scores. Draws from torch's global generator, which a checkpoint saves: a resumed
    run drops the same pieces."""
    if rate == 0:
        return batch

    def drop(ids: Tensor) -> Tensor:  # (B, L) -> (B, L)
        words = (ids != PAD) & (ids != BOS) & (ids != EOS)
        return ids.masked_fill(words & (torch.rand(ids.shape) < rate), UNK)

    return Batch(drop(batch.src), drop(batch.tgt_in), batch.tgt_out)


@dataclass
class EpochBatches(Sequence[Tensor]):
    """An epoch's batches: item i is the index tensor of the i-th batch served.

    One order of all sentences and the cut points in it, not a tensor per batch: a tensor object
    costs hundreds of bytes, tens of MB for the batches of a 10^7-pair epoch.
    """

    order: Tensor  # (N,) sentence indices in length order
    bounds: Tensor  # (batches + 1,) int64: batch k is order[bounds[k] : bounds[k + 1]]
    served: Tensor  # (batches,) int64: the batch served i-th is batch served[i]

    def __len__(self) -> int:
        return len(self.served)

    def __getitem__(self, i: int | slice) -> Tensor | list[Tensor]:  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        k = int(self.served[i])  # IndexError past the end, as a Sequence must
        return self.order[int(self.bounds[k]) : int(self.bounds[k + 1])]


def cut_batches(order: Tensor, src_len: Tensor, tgt_len: Tensor, batch_tokens: int) -> EpochBatches:
    """Cut ``order`` into consecutive batches whose padded size B·max(S, T) ≤ batch_tokens (served in that order).

    ``tgt_len`` counts decoder positions (target + 1 for <start>/<end>).
    """
    longest = torch.maximum(src_len, tgt_len)
    starts, start, widest = [], 0, 0
    for i, length in enumerate(_chunked_list(longest, order)):
        widest_if_added = max(widest, length)
        if (i - start + 1) * widest_if_added > batch_tokens and i > start:
            starts.append(start)
            start, widest_if_added = i, length
        widest = widest_if_added
    if start < len(order):
        starts.append(start)
    bounds = torch.tensor([*starts, len(order)], dtype=torch.int64)
    return EpochBatches(order, bounds, torch.arange(len(starts)))


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
        allowed; several corpora mixed by weight, ``seq2seq.data.mixing``); default: each sentence once."""
        self.src_len, self.tgt_len = src_len, tgt_len + 1
        self.batch_tokens, self.seed, self.shuffle = batch_tokens, seed, shuffle
        self.lengths_at, self.items_at = lengths_at, items_at
        self.epoch, self.position = 0, 0

    def epoch_batches(self, epoch: int) -> EpochBatches:
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
        batches.served = torch.randperm(len(batches), generator=generator)
        return batches

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


def padding_fraction(batches: Sequence[Tensor], src_len: Tensor, tgt_len: Tensor) -> float:
    """Share of padded positions over source and decoder-side tensors of all batches."""
    padded = real = 0
    for idx in batches:
        s, t = src_len[idx], tgt_len[idx] + 1
        padded += len(idx) * (int(s.max()) + int(t.max()))
        real += int(s.sum()) + int(t.sum())
    return 1.0 - real / max(padded, 1)


def gather_rows(tokens: Tensor, offsets: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    """Sequences ``indices`` of flat storage -> (their ids one after another, lengths (B,)).

    ``tokens[offsets[i]:offsets[i+1]]`` is sequence i; one gather, no Python loop.
    """
    starts = offsets[indices]
    lengths = offsets[indices + 1] - starts
    within = torch.arange(int(lengths.sum())) - (lengths.cumsum(0) - lengths).repeat_interleave(lengths)
    return tokens[starts.repeat_interleave(lengths) + within], lengths


def pad_rows(flat: Tensor, lengths: Tensor, extra: int = 0) -> Tensor:
    """Sequences stored one after another -> (B, max length + extra) int64 ids padded with PAD."""
    real = torch.arange(int(lengths.max()) + extra)[None, :] < lengths[:, None]  # (B, L + extra)
    padded = torch.full(real.shape, PAD, dtype=torch.long)
    padded[real] = flat.long()  # row by row, in the order the sequences are stored
    return padded


def make_batch(src: tuple[Tensor, Tensor], tgt: tuple[Tensor, Tensor], start: int = BOS) -> Batch:
    """Padded Batch from each side's (ids one after another, lengths).

    src as stored; tgt wrapped as <start> y… (decoder input; ``start`` is the model's start token,
    ``ModelConfig.decoder_start_id``) and y… <end> (what it must predict).
    """
    y = pad_rows(*tgt, extra=1)  # (B, T): room for <end>
    tgt_out = y.clone()
    tgt_out[torch.arange(len(y)), tgt[1]] = EOS
    tgt_in = torch.cat([torch.full((len(y), 1), start, dtype=torch.long), y[:, :-1]], dim=1)
    return Batch(pad_rows(*src), tgt_in, tgt_out)
