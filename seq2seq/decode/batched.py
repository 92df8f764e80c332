"""Decoding many sentences: length-sorted batches, padding, and the dispatch to the right search.

``search_ids`` is what training's validation and every translator call: it cuts the sources
into batches of similar length, pads them, and runs greedy search, beam search, sampling
(``seq2seq.decode.sampling``) or lexically constrained beam search (``seq2seq.decode.constrained``)
on each. The searches
themselves are plain functions over one padded batch (``seq2seq.decode.search``).
"""

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import Tensor, nn

from seq2seq.config import DecodeConfig
from seq2seq.decode.sampling import TokenSampler, sample
from seq2seq.decode.search import (
    Hypothesis,
    LogitsProcessor,
    beam_search,
    block_repeats,
    force_prefixes,
    greedy_search,
)
from seq2seq.special import PAD


def beam_options(decode: DecodeConfig, beam: int, nbest: int, processors: Sequence[LogitsProcessor]) -> dict:
    """Keyword arguments of ``beam_search`` (and ``constrained_beam_search``) from decoding settings."""
    return dict(
        beam=beam,
        length_penalty=decode.length_penalty,
        nbest=nbest,
        max_len_a=decode.max_len_a,
        max_len_b=decode.max_len_b,
        no_repeat_ngram=decode.no_repeat_ngram,
        processors=processors,
    )


BATCH_SENTENCES = 64
"""Sentences per decoding batch where ``decode.batch_sentences`` is None (the recipes'), but in bf16 on a CPU."""


def sentences_per_batch(configured: int | None, precision: str, device: torch.device) -> int:
    """``decode.batch_sentences`` as set, or for None ``BATCH_SENTENCES``, three times that on bf16 weights on a CPU.

    A bf16 batch's rows (activations, key/value caches, logits) take half the bytes of float32 ones, and
    its matrix products gain more from more rows, so bf16 takes larger batches than float32
    (docs/design.md#batch-size-by-precision). ``precision`` is the weights' (``bf16``,
    ``float32``, or a training precision).
    """
    if configured is not None:
        return configured
    return 3 * BATCH_SENTENCES if precision == "bf16" and device.type == "cpu" else BATCH_SENTENCES


def length_sorted_batches(lengths: Sequence[int], size: int) -> Iterator[list[int]]:
    """Indices in batches of ``size`` sorted by length (less padding per batch), longest items first.

    Longest first because several search workers take batches in this order: the slowest batches
    start first and the short ones fill the end, where ascending order left one worker alone with
    the longest batch while the other idled (docs/design.md#longest-first). The last batch, the one that may
    be smaller, holds the shortest items.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    for start in range(0, len(order), size):
        yield order[start : start + size]


def pad_batch(sources: list[list[int]], device: torch.device) -> Tensor:
    """Id lists -> (B, S) right-padded with PAD, on ``device``."""
    width = max(len(s) for s in sources)
    src = torch.full((len(sources), width), PAD, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids)
    return src.to(device)


def search_ids(
    model: nn.Module,
    sources: list[list[int]],
    decode: DecodeConfig,
    device: torch.device,
    beam: int,
    nbest: int = 1,
    *,
    sampler: TokenSampler | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
    constraints: Sequence[Sequence[Sequence[int]]] | None = None,
    workers: int = 1,
) -> list[list[Hypothesis]]:
    """Translate id sequences in length-sorted batches of ``decode.batch_sentences`` (set: see
    ``sentences_per_batch``); results in input order.

    ``beam == 1`` runs greedy search (one hypothesis per sentence whatever ``nbest`` says). With
    ``sampler``, each sentence gets ``nbest`` draws (best-scoring first) instead. ``prefixes`` (one
    id list per source) force the start of each output; ``constraints`` (per source, a list of
    target phrases as id lists) run lexically constrained beam search (``seq2seq.decode.constrained``).
    ``workers`` > 1 searches that many batches at once, on threads of their own (batches are
    independent, so the results are the same; sampling keeps one thread, so its draws keep their order).
    """
    results: list[list[Hypothesis]] = [[] for _ in sources]

    def run(chunk: list[int]) -> list[list[Hypothesis]]:
        src = pad_batch([sources[i] for i in chunk], device)
        copies = nbest if sampler is not None else 1  # sampling decodes each sentence nbest times
        processors = [force_prefixes([prefixes[i] for i in chunk for _ in range(copies)])] if prefixes else []
        # Beam search adds the n-gram block itself (beam_options); greedy search and sampling take it here.
        one_row = [*processors, block_repeats(decode.no_repeat_ngram)] if decode.no_repeat_ngram > 0 else processors
        if sampler is not None:
            found = sample(model, src, sampler, nbest, decode.max_len_a, decode.max_len_b, one_row)
        elif constraints is not None and any(constraints[i] for i in chunk):
            from seq2seq.decode.constrained import constrained_beam_search  # it builds on this module

            found = constrained_beam_search(
                model, src, [constraints[i] for i in chunk], **beam_options(decode, beam, nbest, processors)
            )
        elif beam == 1:
            found = [[h] for h in greedy_search(model, src, decode.max_len_a, decode.max_len_b, processors=one_row)]
        else:
            found = beam_search(model, src, **beam_options(decode, beam, nbest, processors))
        return found

    chunks = list(length_sorted_batches([len(s) for s in sources], decode.batch_sentences))
    if workers > 1 and len(chunks) > 1 and sampler is None:  # draws stay in one order: sampling runs alone
        with ThreadPoolExecutor(min(workers, len(chunks)), thread_name_prefix="seq2seq-search") as pool:
            founds = list(pool.map(run, chunks))
    else:
        founds = [run(chunk) for chunk in chunks]
    for chunk, found in zip(chunks, founds, strict=True):
        for i, hyps in zip(chunk, found, strict=True):
            results[i] = hyps
    return results
