"""Greedy and beam search: plain, batched functions over any encoder-decoder
with ``encode``, ``decode`` and ``logits`` (see ``seq2seq.model.transformer.Transformer``).
``seq2seq.decode.batched.search_ids`` is the entry point that training and translation call;
the building blocks public here (``step_log_probs``, ``length_penalty_factor``, ``start_beams``,
``extend_beams``) are shared with constrained search, sampling and forced scoring. What makes a
step fast rather than what it computes (grouped encoding, the reused log-probability buffer, the
grouped top-k) lives in ``seq2seq.decode.kernels``.

Both take per-step *logits processors* (``LogitsProcessor``): functions that
mask the next-token log-probabilities (forced prefixes, n-gram blocking) so one
loop serves every variant. Greedy search also takes a sampler (``seq2seq.decode.sampling``), which
draws the next token instead of taking the most probable; beam search takes an ``on_step``
callback, which sees the beams after every step (``seq2seq.decode.trace`` records them so).

Both start every hypothesis from the model's start token (``cfg.decoder_start_id``: ``<start>``, or
``<pad>`` for a model that starts as MarianMT does; "<start>" below means that token), feed one new position per step
through a ``DecoderCache`` (``use_cache=False`` re-runs the decoder on the whole
prefix instead: slower, same result, kept for tests and benchmarks), stop a
sentence at ``<end>`` or at ``max_len_a · len(src) + max_len_b`` tokens, and stop
the batch when every sentence is done.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.decode.kernels import LogProbBuffer, encode_by_length, row_topk
from seq2seq.model.layers import DecoderCache
from seq2seq.model.masks import padding_mask
from seq2seq.special import EOS, PAD


@dataclass
class Hypothesis:
    """One output: ids without <start>/<end>, and its score.

    Greedy scores are the summed log-probability; beam scores are divided by the
    GNMT length penalty ((5 + L) / 6)^α, L counting the <end> token.
    """

    tokens: list[int]
    score: float


LogitsProcessor = Callable[[int, Tensor, Tensor, list[int]], None]
"""``processor(step, tokens, log_probs, sentences)``: tokens (R, 1+step) are the rows' prefixes
(``<start> y…``), log_probs (R, V) their next-token log-probabilities, changed in place, and
``sentences[r]`` the sentence (index in the batch given to the search) of row r: the searches
drop finished sentences, so rows move. Processors only set entries to -inf: the tokens they
allow keep the model's log-probability, so scores stay log-probabilities."""


def block_repeats(n: int) -> LogitsProcessor:
    """A processor that forbids any token completing an n-gram the row already holds."""

    def process(step: int, tokens: Tensor, log_probs: Tensor, sentences: list[int]) -> None:
        for row, prefix in enumerate(tokens[:, 1:].tolist()):
            banned = _banned_tokens(prefix, n)
            if banned:
                log_probs[row, list(banned)] = float("-inf")

    return process


def force_prefixes(prefixes: Sequence[Sequence[int]]) -> LogitsProcessor:
    """A processor that makes every row of sentence i start with ``prefixes[i]``; once a row is
    past its prefix the model continues freely."""
    longest = max((len(p) for p in prefixes), default=0)

    def process(step: int, tokens: Tensor, log_probs: Tensor, sentences: list[int]) -> None:
        if step >= longest:
            return
        for row, sentence in enumerate(sentences):
            prefix = prefixes[sentence]
            if step < len(prefix):
                keep = log_probs[row, prefix[step]].clone()
                log_probs[row] = float("-inf")
                log_probs[row, prefix[step]] = keep

    return process


def length_limits(src: Tensor, max_len_a: float, max_len_b: int, max_positions: int) -> Tensor:
    """Per-sentence output limit (B,) = a·len(src) + b, within the position table."""
    src_len = (src != PAD).sum(dim=1)
    return (max_len_a * src_len + max_len_b).long().clamp(1, max_positions - 1)


def step_log_probs(
    model: nn.Module,
    tokens: Tensor,
    memory: Tensor,
    src_mask: Tensor,
    cache: DecoderCache | None,
    buffer: LogProbBuffer | None = None,
) -> Tensor:
    """Log-probabilities (B, V), in float32, of the next token after the prefixes ``tokens`` (B, t).

    With a ``buffer`` (one per search) they are written into it rather than into a fresh tensor.
    """
    new = tokens[:, -1:] if cache is not None else tokens
    states = model.decode(new, memory, src_mask, cache)  # (B, 1 or t, D)
    logits = model.logits(states[:, -1])  # (B, V), in the model's dtype
    if buffer is None:
        return F.log_softmax(logits, dim=-1, dtype=torch.float32)
    return buffer.log_softmax(logits)


@torch.no_grad()
def greedy_search(
    model: nn.Module,
    src: Tensor,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    use_cache: bool = True,
    processors: Sequence[LogitsProcessor] = (),
    sampler: Callable[[Tensor], Tensor] | None = None,
) -> list[Hypothesis]:
    """Most probable token at every step (or one drawn by ``sampler``), for a batch of sources (B, S).

    ``sampler`` maps the step's (R, V) log-probabilities to (R,) token ids
    (``seq2seq.decode.sampling.TokenSampler``). The score is the summed log-probability of the
    chosen tokens under the model (not under the sampler's reshaped distribution).

    A sentence leaves the batch when it is done: its rows of the encoder output, masks and
    cache are dropped, so later steps compute only the sentences still being decoded.
    """
    src_mask = padding_mask(src, PAD)
    memory = encode_by_length(model, src, src_mask)
    limits = length_limits(src, max_len_a, max_len_b, model.cfg.max_positions).tolist()
    b = src.size(0)
    tokens = torch.full((b, 1), model.cfg.decoder_start_id, dtype=torch.long, device=src.device)
    cache = DecoderCache() if use_cache else None
    outputs: list[list[int]] = [[] for _ in range(b)]
    scores = [0.0] * b
    live = list(range(b))  # the sentence of each batch row
    buffer = LogProbBuffer()
    for step in range(max(limits)):
        log_probs = step_log_probs(model, tokens, memory, src_mask, cache, buffer)  # (L, V)
        for process in processors:
            process(step, tokens, log_probs, live)
        if sampler is None:
            best_score, best = log_probs.max(dim=-1)  # (L,)
        else:
            best = sampler(log_probs)  # (L,)
            best_score = log_probs.gather(1, best[:, None]).squeeze(1)
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


def length_penalty_factor(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + L) / 6)^α: α = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


def start_beams(
    model: nn.Module, src: Tensor, n: int, use_cache: bool
) -> tuple[Tensor, Tensor, Tensor, DecoderCache | None]:
    """What a beam search over sources (B, S) starts from: the encoder output once per sentence
    (B, S, D), shared by its N beams (``Transformer.decode`` reads one row of it for N rows of
    tokens), the mask (B, 1, 1, S), ``<start>`` (B*N, 1) and an empty cache."""
    src_mask = padding_mask(src, PAD)
    memory = encode_by_length(model, src, src_mask)  # (B, S, D)
    tokens = torch.full((src.size(0) * n, 1), model.cfg.decoder_start_id, dtype=torch.long, device=src.device)
    return memory, src_mask, tokens, DecoderCache() if use_cache else None


def extend_beams(tokens: Tensor, rows: Tensor, next_tokens: Tensor, cache: DecoderCache | None) -> Tensor:
    """The beams' prefixes (R, t) -> (R', t+1): row r continues row ``rows[r]`` with ``next_tokens[r]``
    (both (R',)); the self-attention cache follows the same reordering."""
    if cache is not None:
        cache.reorder(rows)
    return torch.cat([tokens.index_select(0, rows), next_tokens[:, None]], dim=1)


BeamStep = Callable[[int, list[int], Tensor, Tensor, list[list[Hypothesis]]], None]
"""``on_step(step, live, tokens, scores, finished)``, called after every step of a beam search with the
beams that go on: ``tokens`` (L*N, 2+step) are their prefixes ``<start> y…``, ``scores`` (L, N) their
summed log-probabilities (-inf: an empty slot), ``live[g]`` the sentence of rows g·N … g·N+N-1, and
``finished[i]`` sentence i's hypotheses so far. ``beam_search`` drops a sentence from ``live`` at the
step it is done (the last call has none left); constrained search keeps every sentence's rows, a
done one's slots empty."""


@dataclass
class Extensions:
    """One step's best 2N extensions of each live sentence's beams, best first: each (L, 2N)."""

    scores: Tensor  # summed log-probabilities
    tokens: Tensor  # the token appended
    rows: Tensor  # the row of the batch's L*N that is extended
    ends: Tensor  # True: an <end> among the sentence's top N, a hypothesis that finishes
    keep: Tensor  # True: one of the best N that do not end, the beams that live on


def best_extensions(log_probs: Tensor, beam_scores: Tensor) -> Extensions:
    """The best 2N extensions of beams with summed log-probabilities ``beam_scores`` (L, N), from their
    next-token ``log_probs`` (L*N, V), which this overwrites."""
    live, n = beam_scores.shape
    vocab = log_probs.size(-1)
    # In place: a fresh (L*N, V) sum would be one more large allocation per step.
    candidates = log_probs.add_(beam_scores.view(-1, 1)).view(live, n * vocab)  # (L, N*V)
    scores, index = row_topk(candidates, 2 * n)  # (L, 2N), best first
    tokens = index % vocab
    rows = index // vocab + torch.arange(live, device=index.device)[:, None] * n
    real = scores > float("-inf")
    is_end = tokens == EOS
    ends = is_end & real & (torch.arange(2 * n, device=index.device) < n)
    extend = ~is_end & real
    return Extensions(scores, tokens, rows, ends, extend & (extend.cumsum(dim=1) <= n))


def _finish(
    found: Extensions,
    tokens: Tensor,
    live: list[int],
    at_limit: list[int],
    penalty: float,
    finished: list[list[Hypothesis]],
) -> None:
    """Append to ``finished`` the hypotheses that end at this step: every ``<end>`` among a sentence's top
    N and, for the groups ``at_limit`` (out of room), the beams that would have lived on."""
    if found.ends.any():
        where = found.ends.nonzero().tolist()  # (group, rank) pairs in rank order
        prefixes = tokens[found.rows[found.ends], 1:].tolist()
        for (group, _), prefix, score in zip(where, prefixes, found.scores[found.ends].tolist(), strict=True):
            finished[live[group]].append(Hypothesis(prefix, score / penalty))
    for group in at_limit:
        mask = found.keep[group]
        prefixes = tokens[found.rows[group][mask], 1:].tolist()
        ends = zip(prefixes, found.tokens[group][mask].tolist(), found.scores[group][mask].tolist(), strict=True)
        finished[live[group]].extend(Hypothesis(prefix + [token], score / penalty) for prefix, token, score in ends)


def _survivors(found: Extensions, groups: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """The N kept extensions of each sentence of ``groups`` (L',), in rank order: the rows they extend
    (L'*N,), their tokens (L'*N,) and their scores (L', N). A sentence with fewer than N fills its
    slots with copies of its first row at -inf (never chosen)."""
    rank = torch.arange(2 * n, device=groups.device)
    slots = torch.where(found.keep, rank, rank + 2 * n).argsort(dim=1)[groups, :n]  # (L', N)
    valid = found.keep[groups].gather(1, slots)
    rows = torch.where(valid, found.rows[groups].gather(1, slots), groups[:, None] * n).view(-1)
    tokens = torch.where(valid, found.tokens[groups].gather(1, slots), PAD).view(-1)
    return rows, tokens, torch.where(valid, found.scores[groups].gather(1, slots), float("-inf"))


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
    processors: Sequence[LogitsProcessor] = (),
    on_step: BeamStep | None = None,
) -> list[list[Hypothesis]]:
    """Beam search for sources (B, S); returns the ``nbest`` best hypotheses per sentence.

    Every step scores the N·V extensions of each sentence's N live beams and looks at the best 2N:
    an ``<end>`` among the top N finishes a hypothesis, the best N others live on. A sentence is
    done once it holds N finished hypotheses (or reaches its length limit, which finishes the live
    beams). The encoder output and the cross-attention keys/values are kept once per sentence and
    read by all its beams; only the self-attention cache is reordered. The choice of candidates runs
    on tensors for the whole batch; Python sees only the hypotheses that finish. A done sentence
    leaves the batch, so later steps compute only live sentences. ``on_step`` sees every step's beams.
    """
    n, b = beam, src.size(0)
    memory, src_mask, tokens, cache = start_beams(model, src, n, use_cache)
    limits = length_limits(src, max_len_a, max_len_b, model.cfg.max_positions).tolist()
    beam_scores = torch.zeros(b, n, device=src.device)
    beam_scores[:, 1:] = float("-inf")  # all beams start equal: expand only the first
    processors = [*processors, block_repeats(no_repeat_ngram)] if no_repeat_ngram > 0 else processors
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    live = list(range(b))  # the sentence of each group of N batch rows
    buffer = LogProbBuffer()
    for step in range(max(limits)):
        log_probs = step_log_probs(model, tokens, memory, src_mask, cache, buffer)  # (L*N, V)
        for process in processors:
            process(step, tokens, log_probs, [i for i in live for _ in range(n)])
        found = best_extensions(log_probs, beam_scores)
        at_limit = [group for group, i in enumerate(live) if step + 1 >= limits[i]]
        _finish(found, tokens, live, at_limit, length_penalty_factor(step + 1, length_penalty), finished)
        kept = found.keep.sum(dim=1).tolist()
        still = [g for g, i in enumerate(live) if len(finished[i]) < n and step + 1 < limits[i] and kept[g] > 0]
        groups = torch.tensor(still, dtype=torch.long, device=src.device)
        rows, next_tokens, beam_scores = _survivors(found, groups, n)
        tokens = extend_beams(tokens, rows, next_tokens, cache)  # (L'*N, t+1)
        if len(still) < len(live):  # memory, mask and cross-attention: one row per sentence
            memory, src_mask = memory.index_select(0, groups), src_mask.index_select(0, groups)
            if cache is not None:
                cache.keep_cross_rows(groups)
            live = [live[group] for group in still]
        if on_step is not None:
            on_step(step, live, tokens, beam_scores, finished)
        if not live:
            break
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]
