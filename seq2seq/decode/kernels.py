"""Speed kernels of the searches: faster forms of steps that ``seq2seq.decode.search`` could write
plainly, kept here so that the search algorithms read as algorithms.

Each gives what its plain form gives (the same values, or the same up to float rounding), and
tests/unit/decode/test_decode_kernels.py compares the two:

* ``encode_by_length``: the encoder run on groups of similar length instead of one batch padded to
  its longest sentence (docs/design.md#grouped-encoding);
* ``LogProbBuffer``: every step's log-probabilities written into the first step's tensor instead of
  a fresh one (docs/design.md#log-prob-buffer);
* ``row_topk``: beam search's best 2N of N·V candidates from group maxima instead of one ``topk``
  over every column (docs/design.md#row-topk).

Each exists because on a CPU its plain form cost a visible share of a search beside the model's own
work: encoding padding, page faults of fresh memory, a ``topk`` as dear as the log-softmax.
"""

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def encode_by_length(model: nn.Module, src: Tensor, src_mask: Tensor) -> Tensor:
    """``model.encode`` of right-padded sources (B, S) with mask (B, 1, 1, S), run on groups of similar
    length -> memory (B, S, D).

    A batch sorted longest first can hold a 68-token sentence beside 13-token ones, and encoding
    them together pads every row to the longest, most of all in bf16's large batches. So the rows,
    longest first, are cut where a length falls below half the longest of its group, and each group
    is encoded at its own width. The memory is zero past a group's width; every attention over it
    masks those padded positions, so the decoder reads what one padded encode gives, up to float
    rounding.
    """
    lengths = src_mask.flatten(1).sum(dim=1)  # (B,)
    order = lengths.argsort(descending=True, stable=True)
    ordered = lengths[order].tolist()
    starts = [0]  # where each group begins in ``order``
    for i, length in enumerate(ordered):
        if 2 * length < ordered[starts[-1]]:
            starts.append(i)
    if len(starts) == 1:
        return model.encode(src, src_mask)
    memory: Tensor | None = None
    for start, end in zip(starts, [*starts[1:], len(ordered)], strict=True):
        rows, width = order[start:end], ordered[start]
        part = model.encode(src[rows, :width], src_mask[rows, ..., :width])  # (G, width, D)
        if memory is None:
            memory = part.new_zeros(src.size(0), src.size(1), part.size(-1))
        memory[rows, :width] = part
    return memory


class LogProbBuffer:
    """Where a search's steps write their float32 log-probabilities: the first step's tensor, reused.

    Rows only leave a search (finished sentences drop out), so every later step fits in the first
    step's rows, and writes memory the last one already touched: a fresh (R, V) tensor at every
    step would be mapped and page-faulted anew. One buffer serves one search at a time.
    """

    def __init__(self) -> None:
        self.rows: Tensor | None = None

    def log_softmax(self, logits: Tensor) -> Tensor:
        """Logits (R, V), in the model's dtype -> float32 log-probabilities (R, V), the buffer's first R rows."""
        if self.rows is None:
            self.rows = F.log_softmax(logits, dim=-1, dtype=torch.float32)
            return self.rows
        rows = self.rows[: logits.size(0)].copy_(logits)
        return torch.log_softmax(rows, dim=-1, out=rows)  # in place: each element is read before it is written


@functools.cache
def _group_size(width: int, k: int) -> int:
    """C, the members of each of ``row_topk``'s groups: the least from 16 to W / 4k dividing W, else 0.

    Cached: a search asks at every step for the same width, and a width with no such divisor scans
    thousands of candidates."""
    return next((c for c in range(16, width // (4 * k) + 1) if width % c == 0), 0)


def row_topk(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k largest of each row of ``scores`` (R, W), best first, with their column indices: (R, k) each.

    The values of ``scores.topk(k, dim=1)``, from two small top-k calls instead of one over every
    column: on a CPU, ``topk`` over beam search's N·V columns costs as much as the log-softmax
    before it. Each row's W entries are dealt into G groups of C = W / G (entry j to group j mod G),
    and a group's maximum is an element-wise maximum over C contiguous slices of the row, the
    cheapest pass over it there is. The k best entries lie in the k groups with the largest maxima:
    a group holding one of them has a maximum at least that large, and fewer than k groups hold an
    entry larger than the k-th. So the top k of those groups' C·k entries is the top k of the row.
    Equal scores may come out in another order than ``topk``'s. Rows too narrow to group (no C from
    16 to W / 4k divides W) take ``topk`` itself.
    """
    width = scores.size(1)
    size = _group_size(width, k)
    if not size:
        return scores.topk(k, dim=1)
    groups = width // size
    members = scores.view(scores.size(0), size, groups)  # [r, m, g] = scores[r, m·G + g]
    best_groups = members.amax(dim=1).topk(k, dim=1).indices  # (R, k)
    candidates = members.gather(2, best_groups[:, None, :].expand(-1, size, k)).flatten(1)  # (R, C·k)
    values, at = candidates.topk(k, dim=1)  # candidate m·k + j is member m of group best_groups[r, j]
    return values, (at // k) * groups + best_groups.gather(1, at % k)
