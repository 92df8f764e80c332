"""Greedy and beam search: plain, batched functions over any encoder-decoder
with ``encode``, ``decode`` and ``logits`` (see ``seq2seq.model.transformer.Transformer``).
``seq2seq.decode.batched.search_ids`` is the entry point that training and translation call;
the building blocks public here (``step_log_probs``, ``length_penalty_factor``, ``start_beams``,
``extend_beams``, ``trace_step``) are shared with constrained search and forced scoring.

Both take per-step *logits processors* (``LogitsProcessor``): functions that
mask the next-token log-probabilities (forced prefixes, n-gram blocking) so one
loop serves every variant. Greedy search also takes a ``TokenSampler``, which draws
the next token (temperature, top-k, top-p) instead of taking the most probable.

Both start every hypothesis from the model's start token (``cfg.decoder_start_id``: ``<start>``, or
``<pad>`` for a model that starts as MarianMT does; "<start>" below means that token), feed one new position per step
through a ``DecoderCache`` (``use_cache=False`` re-runs the decoder on the whole
prefix instead: slower, same result, kept for tests and benchmarks), stop a
sentence at ``<end>`` or at ``max_len_a · len(src) + max_len_b`` tokens, and stop
the batch when every sentence is done.
"""

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.model.layers import DecoderCache
from seq2seq.model.masks import padding_mask
from seq2seq.special import BOS, EOS, PAD


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


class TokenSampler:
    """Draws next tokens from the model's distribution, reshaped by temperature, top-k and top-p.

    Temperature divides the log-probabilities (0 takes the most probable token: greedy); top-k keeps
    the k most probable tokens (0: all); top-p keeps the smallest set of most probable tokens whose
    probability reaches p (1: all); ``<pad>`` and ``<start>`` are never drawn. What is kept is
    renormalised and drawn from with one seeded generator, so the same inputs, seed and batch size
    give the same draws.
    """

    def __init__(
        self,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def truncated(self, log_probs: Tensor) -> Tensor:
        """(R, V) log-probabilities -> (R, V) log-probabilities of the distribution drawn from."""
        logits = log_probs / self.temperature
        logits[:, [PAD, BOS]] = float("-inf")  # not output tokens: a draw must never produce them
        if 0 < self.top_k < logits.size(-1):
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (R, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, order = logits.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            mass_before = probs.cumsum(dim=-1) - probs  # (R, V): mass of the more probable tokens
            drop_sorted = mass_before >= self.top_p
            drop_sorted[:, 0] = False  # the most probable token always stays (top_p = 0 is greedy)
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
            logits = logits.masked_fill(drop, float("-inf"))
        return logits.log_softmax(dim=-1)

    def __call__(self, log_probs: Tensor) -> Tensor:
        """(R, V) log-probabilities -> (R,) drawn token ids."""
        if self.temperature <= 0:
            return log_probs.argmax(dim=-1)
        probs = self.truncated(log_probs).exp()
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)


def length_limits(src: Tensor, max_len_a: float, max_len_b: int, max_positions: int) -> Tensor:
    """Per-sentence output limit (B,) = a·len(src) + b, within the position table."""
    src_len = (src != PAD).sum(dim=1)
    return (max_len_a * src_len + max_len_b).long().clamp(1, max_positions - 1)


def encode_by_length(model: nn.Module, src: Tensor, src_mask: Tensor) -> Tensor:
    """``model.encode`` of right-padded sources (B, S) with mask (B, 1, 1, S), run on groups of similar
    length -> memory (B, S, D).

    A batch sorted longest first can hold a 68-token sentence beside 13-token ones, and encoding
    them together pads every row to the longest, most of all in bf16's large batches
    (docs/design.md#grouped-encoding). So the rows, longest first, are cut where a length
    falls below half the longest of its group, and each group is encoded at its own width. The
    memory is zero past a group's width; every attention over it masks those padded positions, so
    the decoder reads what one padded encode gives, up to float rounding.
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


def step_log_probs(
    model: nn.Module,
    tokens: Tensor,
    memory: Tensor,
    src_mask: Tensor,
    cache: DecoderCache | None,
    out: Tensor | None = None,
) -> Tensor:
    """Log-probabilities (B, V), in float32, of the next token after the prefixes ``tokens`` (B, t).

    ``out`` (B' >= B, V), when given, receives them in its first B rows, which are returned: the
    searches pass the first step's result back in, so every later step writes memory the last one
    already touched: a fresh (B, V) tensor at every step would be mapped and page-faulted anew
    (docs/design.md#log-prob-buffer).
    """
    new = tokens[:, -1:] if cache is not None else tokens
    states = model.decode(new, memory, src_mask, cache)  # (B, 1 or t, D)
    logits = model.logits(states[:, -1])  # (B, V), in the model's dtype
    if out is None:
        return F.log_softmax(logits, dim=-1, dtype=torch.float32)
    rows = out[: logits.size(0)].copy_(logits)
    return torch.log_softmax(rows, dim=-1, out=rows)  # in place: each element is read before it is written


@torch.no_grad()
def greedy_search(
    model: nn.Module,
    src: Tensor,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    use_cache: bool = True,
    processors: Sequence[LogitsProcessor] = (),
    sampler: TokenSampler | None = None,
) -> list[Hypothesis]:
    """Most probable token at every step (or one drawn by ``sampler``), for a batch of sources (B, S).

    The score is the summed log-probability of the chosen tokens under the model (not under the
    sampler's reshaped distribution).

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
    scratch: Tensor | None = None  # the first step's log-probabilities, rewritten by every later step
    for step in range(max(limits)):
        log_probs = scratch = step_log_probs(model, tokens, memory, src_mask, cache, scratch)  # (L, V)
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
    before it (docs/design.md#row-topk). Each row's W entries are dealt into G groups of C = W / G
    (entry j to group j mod G), and a group's maximum is an element-wise maximum over C contiguous
    slices of the row, the cheapest pass over it there is. The k best entries lie in the k groups
    with the largest maxima: a group holding one of them has a maximum at least that large, and
    fewer than k groups hold an entry larger than the k-th. So the top k of those groups' C·k
    entries is the top k of the row. Equal scores may come out in another order than ``topk``'s.
    Rows too narrow to group (no C from 16 to W / 4k divides W) take ``topk`` itself.
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


def extend_beams(tokens: Tensor, rows: list[int], next_tokens: list[int], cache: DecoderCache | None) -> Tensor:
    """The beams' prefixes (B*N, t) -> (B*N, t+1): row r continues row ``rows[r]`` with ``next_tokens[r]``;
    the self-attention cache follows the same reordering."""
    order = torch.tensor(rows, device=tokens.device)
    if cache is not None:
        cache.reorder(order)
    return torch.cat([tokens.index_select(0, order), torch.tensor(next_tokens, device=tokens.device)[:, None]], dim=1)


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
    trace: list[dict] | None = None,
) -> list[list[Hypothesis]]:
    """Beam search for sources (B, S); returns the ``nbest`` best hypotheses per sentence.

    Every step scores the N·V extensions of each sentence's N live beams and
    looks at the best 2N: an ``<end>`` among the top N finishes a hypothesis,
    the best N others live on. A sentence is done once it holds N finished
    hypotheses (or reaches its length limit, which finishes the live beams).
    The encoder output and the cross-attention keys/values are computed and kept once per
    sentence and read by all its beams; only the self-attention cache is reordered.

    The choice of candidates runs on tensors for the whole batch; Python sees only the
    hypotheses that finish. A done sentence leaves the batch (its rows of the encoder
    output, masks and cache are dropped), so later steps compute only live sentences.
    ``trace``, when given, receives one ``trace_step`` record per step for the first sentence.
    """
    n, b, device = beam, src.size(0), src.device
    memory, src_mask, tokens, cache = start_beams(model, src, n, use_cache)
    limit_of = length_limits(src, max_len_a, max_len_b, model.cfg.max_positions).tolist()
    beam_scores = torch.zeros(b, n, device=device)
    beam_scores[:, 1:] = float("-inf")  # all beams start equal: expand only the first
    processors = [*processors, block_repeats(no_repeat_ngram)] if no_repeat_ngram > 0 else processors
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    live = list(range(b))  # the sentence of each group of N batch rows
    rank = torch.arange(2 * n, device=device)  # (2N,)
    scratch: Tensor | None = None  # the first step's log-probabilities, rewritten by every later step
    for step in range(max(limit_of)):
        log_probs = scratch = step_log_probs(model, tokens, memory, src_mask, cache, scratch)  # (L*N, V)
        vocab = log_probs.size(-1)
        for process in processors:
            process(step, tokens, log_probs, [i for i in live for _ in range(n)])
        ended_before = len(finished[0])
        # In place: a fresh (L*N, V) sum would be one more large allocation per step.
        candidates = log_probs.add_(beam_scores.view(-1, 1)).view(len(live), n * vocab)  # (L, N*V)
        top_scores, top_index = row_topk(candidates, 2 * n)  # (L, 2N), best first
        top_tokens = top_index % vocab
        top_rows = top_index // vocab + torch.arange(len(live), device=device)[:, None] * n  # batch row extended
        real = top_scores > float("-inf")
        is_end = top_tokens == EOS
        ends = is_end & real & (rank < n)  # (L, 2N): hypotheses finishing at this step
        extend = ~is_end & real
        keep = extend & (extend.cumsum(dim=1) <= n)  # (L, 2N): the best N others live on
        penalty = length_penalty_factor(step + 1, length_penalty)
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
        if trace is not None and live[0] == 0:  # the first sentence is still in the batch, as group 0
            beams = keep[0] if still[:1] == [0] else torch.zeros_like(keep[0])
            prefixes = tokens[top_rows[0][beams], 1:].tolist()
            kept_beams = zip(prefixes, top_tokens[0][beams].tolist(), top_scores[0][beams].tolist(), strict=True)
            ended = finished[0][ended_before:]
            trace.append(trace_step(step, [(p + [t], sc) for p, t, sc in kept_beams], ended, length_penalty))
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
        if len(still) < len(live):  # memory, mask and cross-attention: one row per sentence
            memory, src_mask = memory.index_select(0, groups), src_mask.index_select(0, groups)
            if cache is not None:
                cache.keep_cross_rows(groups)
            live = [live[group] for group in still]
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]


def trace_step(step: int, live: list[tuple[list[int], float]], ended: list[Hypothesis], alpha: float) -> dict:
    """One step of a beam trace as plain data (ids, not text): the live beams (prefix, summed
    log-probability, length-penalised score) and the hypotheses that ended at this step."""
    penalty = length_penalty_factor(step + 1, alpha)
    return {
        "step": step + 1,
        "live": [
            {"tokens": tokens, "score": score, "normalized": score / penalty}
            for tokens, score in live
            if score != float("-inf")
        ],
        "ended": [{"tokens": h.tokens, "score": h.score * penalty, "normalized": h.score} for h in ended],
    }
