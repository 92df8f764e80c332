"""Near-duplicate sentences: one similarity, found at scale by MinHash + LSH, measured exactly.

The similarity of two sentences is the Dice coefficient of their n-gram sets,
``2 |G(a) ∩ G(b)| / (|G(a)| + |G(b)|)``, where ``G(x)`` holds the units of ``x`` and the pairs
of adjacent units. A unit is a run of ASCII letters and digits (a word, lower-cased) or any
other non-space character: in Chinese every character, which carries the words without a
segmenter; in English a word, since letters alone would make every pair of sentences look
alike. Unigrams carry content, bigrams carry order. An empty text has no grams (similarity 0).
It is what ``evaluate`` buckets test sentences by ("novelty": the similarity of a test source
to its closest training source).

The split uses it to keep near-duplicates on one side. Comparing every pair is quadratic, so
candidates come from locality-sensitive hashing: a MinHash signature per sentence (the minimum
of ``NUM_PERM`` random hash functions over its grams; two signatures agree in a position with
probability equal to their Jaccard index J, and Dice = 2J / (1 + J)), cut into bands; sentences
sharing a whole band become candidates, and each candidate pair is verified exactly. With bands
of ``ROWS`` rows a pair of Jaccard index J is missed with probability ``(1 - J**ROWS) ** bands``:
negligible from Dice 0.8 (J = 2/3) up, while dissimilar pairs rarely share a band.

A corpus too large to group in memory is split by hash (``seq2seq.data.hashsplit``), which only asks
whether a training sentence is a near-duplicate of one of a few thousand held-out sentences.
``NearDuplicateIndex`` answers that exactly, without signatures, by prefix filtering (Chaudhuri et
al., 2006; Bayardo et al., 2007): Dice >= t is Jaccard >= j = t / (2 - t), which needs at least
ceil(j |A|) shared grams, so with all grams in one global order two such sets share one of their
first |A| - ceil(j |A|) + 1 grams. The order puts the grams rarest among the indexed sentences
first (grams they do not hold at all before every other), so the prefixes probed are short lists;
where a candidate is first met bounds how many grams it can share (PPJoin's positional filter,
Xiao et al., 2008), which spares most exact comparisons.
"""

import math
import re
import zlib
from collections import Counter

import torch

_UNIT = re.compile(r"[a-z0-9]+|\S")
# From this similarity on, two sentences count as near-duplicates: the default of data.split_similarity,
# the top bucket of evaluate's novelty breakdown, the share the data report gives.
NEAR_DUPLICATE = 0.8
NOVEL = 0.6  # below this similarity to every training source, a test source counts as novel
NUM_PERM = 128  # hash functions per signature
ROWS = 4  # rows per LSH band (NUM_PERM / ROWS bands)
_PRIME = 4_294_967_311  # the smallest prime above 2**32: (a * x + b) mod p permutes 32-bit gram ids
_CHUNK = 1 << 16  # grams hashed (or pairs compared) at once: bounds memory to chunk x NUM_PERM int64
_MARGIN = 0.15  # screening margin below the threshold: several standard errors of a NUM_PERM estimate


def grams(text: str) -> frozenset[str]:
    """Units of ``text`` (ASCII words lower-cased, other non-space characters) and pairs of adjacent units."""
    units = _UNIT.findall(text.lower())
    return frozenset(units) | frozenset(f"{a} {b}" for a, b in zip(units, units[1:], strict=False))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    """Dice coefficient of two gram sets (0 when both are empty)."""
    total = len(a) + len(b)
    return 2 * len(a & b) / total if total else 0.0


def similarity(a: str, b: str) -> float:
    """Character n-gram similarity of two texts (see the module docstring)."""
    return dice(grams(a), grams(b))


def signatures(gram_sets: list[frozenset[str]], seed: int = 0) -> torch.Tensor:
    """MinHash signatures (N, NUM_PERM) int64 of non-empty gram sets.

    Grams get stable 32-bit ids (CRC-32, not Python's per-process ``hash``), so the split
    is the same in every process; the hash functions are ``(a * id + b) mod p`` with a, b
    drawn from ``seed``.
    """
    generator = torch.Generator().manual_seed(seed)
    a = torch.randint(1, 1 << 31, (NUM_PERM,), generator=generator, dtype=torch.int64)  # a * id < 2**63
    b = torch.randint(0, 1 << 31, (NUM_PERM,), generator=generator, dtype=torch.int64)
    ids = torch.tensor([zlib.crc32(g.encode()) for s in gram_sets for g in s], dtype=torch.int64)
    owner = torch.repeat_interleave(torch.tensor([len(s) for s in gram_sets], dtype=torch.int64))
    result = torch.full((len(gram_sets), NUM_PERM), _PRIME, dtype=torch.int64)
    for start in range(0, len(ids), _CHUNK):
        hashed = (ids[start : start + _CHUNK, None] * a + b) % _PRIME  # (chunk, NUM_PERM)
        rows = owner[start : start + _CHUNK, None].expand_as(hashed)
        result.scatter_reduce_(0, rows, hashed, reduce="amin")
    return result


def candidate_pairs(sig: torch.Tensor) -> torch.Tensor:
    """Index pairs (P, 2), i < j, whose signatures agree on every row of at least one band."""
    n = sig.shape[0]
    mixer = torch.tensor([1_000_003**k for k in range(ROWS)], dtype=torch.int64)  # wraps around: only a key
    found = [torch.empty(0, dtype=torch.int64)]
    for start in range(0, sig.shape[1], ROWS):
        keys = (sig[:, start : start + ROWS] * mixer).sum(1)  # (N,) one key per band
        order = torch.argsort(keys, stable=True)
        ranked = keys[order]
        gap = 1  # members of a bucket are adjacent in ``order``: pair each with the one ``gap`` further on
        while gap < n and bool((same := ranked[gap:] == ranked[:-gap]).any()):
            a, b = order[:-gap][same], order[gap:][same]
            found.append(torch.minimum(a, b) * n + torch.maximum(a, b))
            gap += 1
    codes = torch.unique(torch.cat(found))
    return torch.stack([codes // n, codes % n], dim=1)


def near_duplicates(texts: list[str], threshold: float, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs of distinct texts whose similarity is at least ``threshold`` (found by LSH, verified exactly).

    Candidates are first screened by the similarity their signatures estimate, with a margin
    of several standard errors, so that exact set arithmetic runs on few pairs.
    """
    unique = sorted({t for t in texts if grams(t)})
    gram_sets = [grams(t) for t in unique]
    sig = signatures(gram_sets, seed)
    pairs = candidate_pairs(sig)
    agree = torch.cat(
        [(sig[chunk[:, 0]] == sig[chunk[:, 1]]).float().mean(1) for chunk in pairs.split(_CHUNK)]
    )  # (P,) estimated Jaccard
    keep = pairs[2 * agree / (1 + agree) >= threshold - _MARGIN].tolist()
    return [(unique[i], unique[j]) for i, j in keep if dice(gram_sets[i], gram_sets[j]) >= threshold]


class NearDuplicateIndex:
    """The sentences of a small set, indexed to tell whether another sentence is a near-duplicate of one."""

    def __init__(self, texts: list[str], threshold: float) -> None:
        self.threshold = threshold
        self._jaccard = threshold / (2 - threshold)
        self._sets = [g for g in {grams(t) for t in texts} if g]
        frequency: Counter[str] = Counter(gram for s in self._sets for gram in s)
        by_rarity = sorted(frequency, key=lambda gram: (frequency[gram], gram))
        self._rank = {gram: rank for rank, gram in enumerate(by_rarity)}
        self._postings: dict[str, list[tuple[int, int]]] = {}  # gram -> (set, the gram's position in it)
        for index, gram_set in enumerate(self._sets):
            ordered = sorted(gram_set, key=self._rank.__getitem__)
            for position, gram in enumerate(ordered[: self._prefix(len(gram_set))]):
                self._postings.setdefault(gram, []).append((index, position))

    def _prefix(self, size: int) -> int:
        """Prefix length of a set of ``size`` grams (its grams that one of every match must share)."""
        return size - math.ceil(self._jaccard * size - 1e-9) + 1  # the margin only lengthens the prefix

    def matches(self, text: str) -> bool:
        """Whether ``text`` is at least ``threshold`` similar to an indexed sentence."""
        query = grams(text)
        prefix = self._prefix(len(query))
        known = [gram for gram in query if gram in self._rank]
        unknown = len(query) - len(known)  # first in the order, and in no indexed set
        if not query or unknown >= prefix:
            return False
        known.sort(key=self._rank.__getitem__)
        size, threshold, seen = len(query), self.threshold, set()
        for position, gram in enumerate(known[: prefix - unknown], start=unknown):
            for index, other_position in self._postings.get(gram, ()):
                if index in seen:
                    continue
                seen.add(index)
                other = self._sets[index]
                # Met first here, this is the first gram the two ordered sets share: they share at most
                # it and the grams after it in both (PPJoin's positional filter).
                most = min(size - position, len(other) - other_position)
                if 2 * most >= threshold * (size + len(other)) and dice(query, other) >= threshold:
                    return True
        return False


def closest_similarity(queries: list[str], corpus: list[str]) -> list[float]:
    """For each query, its exact similarity to the most similar text of ``corpus`` (0 if none shares a gram).

    An inverted index from gram to corpus texts counts the shared grams of every text that
    shares at least one, so the cost follows the overlap, not ``len(queries) * len(corpus)``.
    """
    unique = sorted(set(corpus))
    sizes = []
    postings: dict[str, list[int]] = {}
    for index, text in enumerate(unique):
        text_grams = grams(text)
        sizes.append(len(text_grams))
        for gram in text_grams:
            postings.setdefault(gram, []).append(index)
    gram_counts = torch.tensor(sizes, dtype=torch.float64)
    best = []
    for query in queries:
        query_grams = grams(query)
        shared: Counter[int] = Counter()
        for gram in query_grams:
            shared.update(postings.get(gram, ()))
        if not shared:
            best.append(0.0)
            continue
        # float64 division of the same integers as Python's: the same values, without a loop over the texts
        overlap = torch.tensor(list(shared.values()), dtype=torch.float64)
        texts = torch.tensor(list(shared), dtype=torch.long)
        best.append(float((2 * overlap / (len(query_grams) + gram_counts[texts])).max()))
    return best
