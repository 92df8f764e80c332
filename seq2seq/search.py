"""Greedy and beam search: plain, batched functions over any encoder-decoder
with ``encode``, ``decode`` and ``logits`` (see ``seq2seq.model.Transformer``),
and ``search_ids``, the batched entry point that training and translation call.

Both start every hypothesis from ``<start>``, feed one new position per step
through a ``DecoderCache`` (``use_cache=False`` re-runs the decoder on the whole
prefix instead: slower, same result, kept for tests and benchmarks), stop a
sentence at ``<end>`` or at ``max_len_a · len(src) + max_len_b`` tokens, and stop
the batch when every sentence is done.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.config import DecodeConfig
from seq2seq.layers import DecoderCache
from seq2seq.masks import padding_mask
from seq2seq.tokenizer import BOS, EOS, PAD


@dataclass
class Hypothesis:
    """One output: ids without <start>/<end>, and its score.

    Greedy scores are the summed log-probability; beam scores are divided by the
    GNMT length penalty ((5 + L) / 6)^α, L counting the <end> token.
    """

    tokens: list[int]
    score: float


def length_limits(src: Tensor, max_len_a: float, max_len_b: int, max_positions: int) -> Tensor:
    """Per-sentence output limit (B,) = a·len(src) + b, within the position table."""
    src_len = (src != PAD).sum(dim=1)
    return (max_len_a * src_len + max_len_b).long().clamp(1, max_positions - 1)


def _step_log_probs(
    model: nn.Module, tokens: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None
) -> Tensor:
    """Log-probabilities (B, V) of the next token after the prefixes ``tokens`` (B, t)."""
    new = tokens[:, -1:] if cache is not None else tokens
    states = model.decode(new, memory, src_mask, cache)  # (B, 1 or t, D)
    return F.log_softmax(model.logits(states[:, -1]).float(), dim=-1)


@torch.no_grad()
def greedy_search(
    model: nn.Module, src: Tensor, max_len_a: float = 1.5, max_len_b: int = 10, use_cache: bool = True
) -> list[Hypothesis]:
    """Most probable token at every step, for a batch of sources (B, S).

    A sentence leaves the batch when it is done: its rows of the encoder output, masks and
    cache are dropped, so later steps compute only the sentences still being decoded.
    """
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    limits = length_limits(src, max_len_a, max_len_b, model.cfg.max_positions).tolist()
    b = src.size(0)
    tokens = torch.full((b, 1), BOS, dtype=torch.long, device=src.device)
    cache = DecoderCache() if use_cache else None
    outputs: list[list[int]] = [[] for _ in range(b)]
    scores = [0.0] * b
    live = list(range(b))  # the sentence of each batch row
    for step in range(max(limits)):
        log_probs = _step_log_probs(model, tokens, memory, src_mask, cache)  # (L, V)
        best_score, best = log_probs.max(dim=-1)  # (L,)
        still = []  # batch rows that go on
        for row, (i, token, score) in enumerate(zip(live, best.tolist(), best_score.tolist(), strict=True)):
            scores[i] += score
            if token != EOS:
                outputs[i].append(token)
                if step + 1 < limits[i]:
                    still.append(row)
        if not still:
            break
        tokens = torch.cat([tokens, best[:, None]], dim=1)  # (L, t+1)
        if len(still) < len(live):
            rows = torch.tensor(still, device=src.device)
            tokens, memory, src_mask = tokens[rows], memory[rows], src_mask[rows]
            if cache is not None:
                cache.reorder(rows)
                cache.keep_cross_rows(rows)
            live = [live[row] for row in still]
    return [Hypothesis(out, score) for out, score in zip(outputs, scores, strict=True)]


def _banned_tokens(prefix: list[int], n: int) -> set[int]:
    """Tokens that would repeat an n-gram already present in ``prefix``."""
    if n <= 0 or len(prefix) < n:
        return set()
    tail = tuple(prefix[len(prefix) - n + 1 :])
    return {prefix[i + n - 1] for i in range(len(prefix) - n + 1) if tuple(prefix[i : i + n - 1]) == tail}


def _length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + L) / 6)^α: α = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: nn.Module,
    src: Tensor,
    beam: int = 5,
    length_penalty: float = 1.0,
    nbest: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    no_repeat_ngram: int = 0,
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """Beam search for sources (B, S); returns the ``nbest`` best hypotheses per sentence.

    Every step scores the N·V extensions of each sentence's N live beams and
    looks at the best 2N: an ``<end>`` among the top N finishes a hypothesis,
    the best N others live on. A sentence is done once it holds N finished
    hypotheses (or reaches its length limit, which finishes the live beams).
    The encoder output and the cross-attention keys/values are computed once and
    shared by a sentence's beams; only the self-attention cache is reordered.

    The choice of candidates runs on tensors for the whole batch; Python sees only the
    hypotheses that finish. A done sentence leaves the batch (its rows of the encoder
    output, masks and cache are dropped), so later steps compute only live sentences.
    """
    n, b, device = beam, src.size(0), src.device
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask).repeat_interleave(n, dim=0)  # (B*N, S, D)
    src_mask = src_mask.repeat_interleave(n, dim=0)  # (B*N, 1, 1, S)
    limit_of = length_limits(src, max_len_a, max_len_b, model.cfg.max_positions).tolist()
    tokens = torch.full((b * n, 1), BOS, dtype=torch.long, device=device)
    beam_scores = torch.zeros(b, n, device=device)
    beam_scores[:, 1:] = float("-inf")  # all beams start equal: expand only the first
    cache = DecoderCache() if use_cache else None
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    live = list(range(b))  # the sentence of each group of N batch rows
    rank = torch.arange(2 * n, device=device)  # (2N,)
    for step in range(max(limit_of)):
        log_probs = _step_log_probs(model, tokens, memory, src_mask, cache)  # (L*N, V)
        vocab = log_probs.size(-1)
        if no_repeat_ngram > 0:
            for row, prefix in enumerate(tokens[:, 1:].tolist()):
                banned = _banned_tokens(prefix, no_repeat_ngram)
                if banned:
                    log_probs[row, list(banned)] = float("-inf")
        candidates = (beam_scores.view(-1, 1) + log_probs).view(len(live), n * vocab)  # (L, N*V)
        top_scores, top_index = candidates.topk(2 * n, dim=1)  # (L, 2N), best first
        top_tokens = top_index % vocab
        top_rows = top_index // vocab + torch.arange(len(live), device=device)[:, None] * n  # batch row extended
        real = top_scores > float("-inf")
        is_end = top_tokens == EOS
        ends = is_end & real & (rank < n)  # (L, 2N): hypotheses finishing at this step
        extend = ~is_end & real
        keep = extend & (extend.cumsum(dim=1) <= n)  # (L, 2N): the best N others live on
        penalty = _length_penalty(step + 1, length_penalty)
        if ends.any():
            where = ends.nonzero().tolist()  # (sentence, rank) pairs in rank order
            prefixes = tokens[top_rows[ends], 1:].tolist()
            for (group, _), prefix, score in zip(where, prefixes, top_scores[ends].tolist(), strict=True):
                finished[live[group]].append(Hypothesis(prefix, score / penalty))
        at_limit = [group for group, i in enumerate(live) if step + 1 >= limit_of[i]]
        for group in at_limit:  # out of room: the live beams end here
            mask = keep[group]
            prefixes = tokens[top_rows[group][mask], 1:].tolist()
            for prefix, token, score in zip(
                prefixes, top_tokens[group][mask].tolist(), top_scores[group][mask].tolist(), strict=True
            ):
                finished[live[group]].append(Hypothesis(prefix + [token], score / penalty))
        kept = keep.sum(dim=1).tolist()
        still = [
            group for group, i in enumerate(live) if len(finished[i]) < n and step + 1 < limit_of[i] and kept[group] > 0
        ]
        if not still:
            break
        # The N kept candidates of each remaining sentence, in rank order; a sentence with fewer
        # real candidates fills its slots with copies of its first row at -inf (never chosen).
        groups = torch.tensor(still, device=device)
        slots = torch.where(keep, rank, rank + 2 * n).argsort(dim=1)[groups, :n]  # (L', N)
        valid = keep[groups].gather(1, slots)
        rows = torch.where(valid, top_rows[groups].gather(1, slots), groups[:, None] * n).view(-1)  # (L'*N,)
        next_tokens = torch.where(valid, top_tokens[groups].gather(1, slots), PAD).view(-1, 1)
        beam_scores = torch.where(valid, top_scores[groups].gather(1, slots), float("-inf"))  # (L', N)
        tokens = torch.cat([tokens.index_select(0, rows), next_tokens], dim=1)  # (L'*N, t+1)
        if cache is not None:
            cache.reorder(rows)
        if len(still) < len(live):
            group_rows = (groups[:, None] * n + torch.arange(n, device=device)).view(-1)  # (L'*N,)
            memory, src_mask = memory.index_select(0, group_rows), src_mask.index_select(0, group_rows)
            if cache is not None:
                cache.keep_cross_rows(group_rows)
            live = [live[group] for group in still]
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]


def pad_batch(sources: list[list[int]], device: torch.device) -> Tensor:
    """Id lists -> (B, S) right-padded with PAD, on ``device``."""
    width = max(len(s) for s in sources)
    src = torch.full((len(sources), width), PAD, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids)
    return src.to(device)


def search_ids(
    model: nn.Module, sources: list[list[int]], decode: DecodeConfig, device: torch.device, beam: int, nbest: int = 1
) -> list[list[Hypothesis]]:
    """Translate id sequences in length-sorted batches of ``decode.batch_sentences``; results in input order.

    ``beam == 1`` runs greedy search (one hypothesis per sentence whatever ``nbest`` says).
    """
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for start in range(0, len(order), decode.batch_sentences):
        chunk = order[start : start + decode.batch_sentences]
        src = pad_batch([sources[i] for i in chunk], device)
        if beam == 1:
            found = [[h] for h in greedy_search(model, src, decode.max_len_a, decode.max_len_b)]
        else:
            found = beam_search(
                model,
                src,
                beam=beam,
                length_penalty=decode.length_penalty,
                nbest=nbest,
                max_len_a=decode.max_len_a,
                max_len_b=decode.max_len_b,
                no_repeat_ngram=decode.no_repeat_ngram,
            )
        for i, hyps in zip(chunk, found, strict=True):
            results[i] = hyps
    return results
