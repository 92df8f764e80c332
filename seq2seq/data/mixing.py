"""Several training corpora mixed by weight: which pairs each epoch holds.

The training pairs are stored corpus after corpus. An epoch holds every training pair of the
reference corpus (the one dev/test come from) once, and from every other corpus i
``round(n_ref * weight_i / weight_ref)`` pairs, so the weights set each corpus's share of an
epoch whatever the corpus sizes (as OpenNMT-py's corpus weights do). A corpus's pairs are
drawn without replacement from an endless chain of seeded permutations of it: a small corpus
with a large weight repeats, a large one with a small weight is seen a slice per epoch, and
every pair is used before any is used again. Epoch e's pairs are a pure function of
(seed, e), so a resumed run sees the same data (the sampler only saves epoch and position).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.config import DataConfig


@dataclass(frozen=True)
class CorpusMix:
    """Per-corpus training sizes (in storage order), weights, the reference corpus and the seed."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    weights: tuple[float, ...]
    reference: int
    seed: int

    @classmethod
    def from_config(cls, cfg: DataConfig, sizes: list[int], seed: int) -> "CorpusMix | None":
        """The mix of the configured corpora with their training ``sizes``; None for a single corpus."""
        corpora = cfg.corpus_list()
        if len(corpora) < 2:
            return None
        names, weights = tuple(c.name for c in corpora), tuple(c.weight for c in corpora)
        return cls(names, tuple(sizes), weights, cfg.eval_corpus(), seed)

    def per_epoch(self) -> list[int]:
        """Pairs each corpus contributes to one epoch."""
        n_ref, w_ref = self.sizes[self.reference], self.weights[self.reference]
        return [
            n if i == self.reference else round(n_ref * w / w_ref)
            for i, (n, w) in enumerate(zip(self.sizes, self.weights, strict=True))
        ]

    def _permutation(self, corpus: int, cycle: int) -> Tensor:
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + corpus) * 1_000_003 + cycle)
        return torch.randperm(self.sizes[corpus], generator=generator)

    def epoch_items(self, epoch: int) -> Tensor:
        """Indices (into the stored training pairs) of the pairs of ``epoch``, grouped by corpus."""
        items, offset = [], 0
        for corpus, (size, count) in enumerate(zip(self.sizes, self.per_epoch(), strict=True)):
            if size and count:
                first, last = epoch * count, (epoch + 1) * count  # positions in the chain of permutations
                cycles = range(first // size, (last - 1) // size + 1)
                chain = torch.cat([self._permutation(corpus, cycle) for cycle in cycles])
                start = first - cycles[0] * size
                items.append(chain[start : start + count] + offset)
            offset += size
        return torch.cat(items) if items else torch.empty(0, dtype=torch.long)

    def describe(self) -> str:
        """One line: pairs, weight and share of an epoch per corpus."""
        counts = self.per_epoch()
        total = max(sum(counts), 1)
        return "; ".join(
            f"{name} {size} pairs, weight {weight:g} -> {count} per epoch ({100 * count / total:.1f}%)"
            for name, size, weight, count in zip(self.names, self.sizes, self.weights, counts, strict=True)
        )
