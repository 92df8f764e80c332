"""Lexically constrained beam search with dynamic beam allocation (Post & Vilar, 2018).

Each sentence brings target phrases (id lists) that its output must contain (see
``seq2seq.decode.glossary``). Hypotheses are grouped into *banks* by how many constraint tokens they
have met so far; every step the beam's N slots are shared out among the banks, so a hypothesis
that has met more of the constraints survives next to better-scoring ones that have met fewer.
The candidates for the next beam are those of plain beam search (the best 2N extensions), the
best extension of every beam, and every beam extended by each constraint token it may take next.
``<end>`` is allowed only once every phrase is complete. A phrase is met token by token; leaving
it half-way throws its progress away.

With no constraints there is one bank holding all N slots and the search is exactly
``seq2seq.decode.search.beam_search`` (a test checks it), so unconstrained sentences in a batch
translate as they would without a glossary.
"""

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from seq2seq.decode.search import (
    BeamStep,
    Hypothesis,
    LogitsProcessor,
    block_repeats,
    extend_beams,
    length_limits,
    length_penalty_factor,
    start_beams,
    step_log_probs,
)
from seq2seq.special import EOS, PAD

Phrases = Sequence[Sequence[int]]
PhraseProgress = tuple[int, ...]  # tokens matched of each phrase: 0 … len(phrase)


def advance(phrases: Phrases, progress: PhraseProgress, token: int) -> PhraseProgress:
    """The progress after emitting ``token``: continue the phrase in progress, or start an unmet one."""
    matched = list(progress)
    for j, phrase in enumerate(phrases):
        if 0 < matched[j] < len(phrase):  # at most one phrase is ever half-way
            if token == phrase[matched[j]]:
                matched[j] += 1
                return tuple(matched)
            matched[j] = 0  # left the phrase: its progress is lost
            break
    for j, phrase in enumerate(phrases):
        if matched[j] == 0 and phrase[0] == token:
            matched[j] = 1
            break
    return tuple(matched)


def allowed_next(phrases: Phrases, progress: PhraseProgress) -> set[int]:
    """Tokens that make progress: the next token of the phrase in progress, else any unmet phrase's first."""
    for j, phrase in enumerate(phrases):
        if 0 < progress[j] < len(phrase):
            return {phrase[progress[j]]}
    return {phrase[0] for j, phrase in enumerate(phrases) if progress[j] == 0}


def is_complete(phrases: Phrases, progress: PhraseProgress) -> bool:
    return all(m == len(p) for m, p in zip(progress, phrases, strict=True))


def bank_sizes(beam: int, banks: int) -> list[int]:
    """Beam slots per bank (index = constraint tokens met): an even share, the remainder to the fullest banks."""
    sizes = [beam // banks] * banks
    for k in range(beam % banks):
        sizes[banks - 1 - k] += 1
    return sizes


@torch.no_grad()
def constrained_beam_search(
    model: nn.Module,
    src: Tensor,
    constraints: Sequence[Phrases],
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
    """Beam search for sources (B, S) whose outputs must contain ``constraints[i]`` (phrases of ids).

    Returns the ``nbest`` best hypotheses per sentence, those meeting every constraint first (a
    sentence whose length limit came before its constraints were met still gets its best attempts).
    Scores and ``on_step`` are as in ``beam_search``, but that a sentence keeps its rows once done.
    """
    n, b, device = beam, src.size(0), src.device
    memory, src_mask, tokens, cache = start_beams(model, src, n, use_cache)
    limits = length_limits(src, max_len_a, max_len_b, model.cfg.max_positions).tolist()
    scores = [[0.0] + [float("-inf")] * (n - 1) for _ in range(b)]  # all beams start equal: expand one
    progress = [[tuple(0 for _ in constraints[i])] * n for i in range(b)]
    banks = [sum(len(p) for p in constraints[i]) + 1 for i in range(b)]
    finished: list[list[tuple[bool, Hypothesis]]] = [[] for _ in range(b)]
    done = [False] * b
    processors = [*processors, block_repeats(no_repeat_ngram)] if no_repeat_ngram > 0 else processors
    sentence_of_row = [r // n for r in range(b * n)]  # rows never move between sentences here
    for step in range(max(limits)):
        log_probs = step_log_probs(model, tokens, memory, src_mask, cache)  # (B*N, V)
        for process in processors:
            process(step, tokens, log_probs, sentence_of_row)
        for i in range(b):
            for j in range(n):
                if not is_complete(constraints[i], progress[i][j]):
                    log_probs[i * n + j, EOS] = float("-inf")
        vocab = log_probs.size(-1)
        totals = torch.tensor(scores, device=device).view(-1, 1) + log_probs  # (B*N, V)
        top_scores, top_index = totals.view(b, n * vocab).topk(2 * n, dim=1)  # (B, 2N)
        row_best = totals.argmax(dim=-1).tolist()  # (B*N,)
        prefixes = tokens[:, 1:].tolist()
        rows: list[int] = []
        next_tokens: list[int] = []
        for i in range(b):
            keep: list[tuple[int, int, float, PhraseProgress]] = []
            if not done[i]:
                candidates = _candidates(
                    i,
                    n,
                    vocab,
                    top_scores[i].tolist(),
                    top_index[i].tolist(),
                    row_best,
                    totals,
                    constraints[i],
                    progress,
                )
                keep = _allocate(candidates, n, banks[i], prefixes, step, length_penalty, finished[i])
                if step + 1 >= limits[i]:  # out of room: the live beams end here
                    finished[i].extend(
                        (
                            is_complete(constraints[i], p),
                            Hypothesis(prefixes[r] + [t], s / length_penalty_factor(step + 1, length_penalty)),
                        )
                        for r, t, s, p in keep
                    )
                ended = sum(complete for complete, _ in finished[i])
                done[i] = ended >= n or step + 1 >= limits[i] or not keep
            if done[i]:
                keep = []
            keep += [(i * n, PAD, float("-inf"), progress[i][0])] * (n - len(keep))  # filler rows
            scores[i] = [s for _, _, s, _ in keep]
            progress[i] = [p for _, _, _, p in keep]
            rows += [r for r, _, _, _ in keep]
            next_tokens += [t for _, t, _, _ in keep]
        order, appended = torch.tensor(rows, device=device), torch.tensor(next_tokens, device=device)
        tokens = extend_beams(tokens, order, appended, cache)
        if on_step is not None:
            hypotheses = [[h for _, h in f] for f in finished]
            on_step(step, list(range(b)), tokens, torch.tensor(scores, device=device), hypotheses)
        if all(done):
            break
    ranked = [sorted(f, key=lambda item: (item[0], item[1].score), reverse=True) for f in finished]
    return [[h for _, h in f[:nbest]] for f in ranked]


def _candidates(
    i: int,
    n: int,
    vocab: int,
    top_scores: list[float],
    top_index: list[int],
    row_best: list[int],
    totals: Tensor,
    phrases: Phrases,
    progress: list[list[PhraseProgress]],
) -> list[tuple[int, int, float, PhraseProgress]]:
    """Sentence i's candidates (row, token, score, progress), best first; ties keep plain beam search's order."""
    found: dict[tuple[int, int], float] = {}
    for score, flat in zip(top_scores, top_index, strict=True):
        if score != float("-inf"):
            found[(i * n + flat // vocab, flat % vocab)] = score
    if phrases:
        extra = [
            (i * n + j, token)
            for j in range(n)
            for token in {row_best[i * n + j], *allowed_next(phrases, progress[i][j])}
            if (i * n + j, token) not in found
        ]
        if extra:
            values = totals[[r for r, _ in extra], [t for _, t in extra]].tolist()
            found.update((key, v) for key, v in zip(extra, values, strict=True) if v != float("-inf"))
    ranked = sorted(found.items(), key=lambda item: -item[1])
    return [(row, token, score, advance(phrases, progress[i][row - i * n], token)) for (row, token), score in ranked]


def _allocate(
    candidates: list[tuple[int, int, float, PhraseProgress]],
    n: int,
    banks: int,
    prefixes: list[list[int]],
    step: int,
    alpha: float,
    finished: list[tuple[bool, Hypothesis]],
) -> list[tuple[int, int, float, PhraseProgress]]:
    """Choose the next N beams from ranked candidates, bank by bank; an ``<end>`` within its bank's
    share finishes a hypothesis (appended to ``finished``). Slots a bank cannot fill go to the
    unchosen candidates of the fullest banks."""
    sizes = bank_sizes(n, banks)
    seen, kept_in = [0] * banks, [0] * banks
    keep, spare = [], []
    for candidate in candidates:
        row, token, score, matched = candidate
        bank = sum(matched)
        rank = seen[bank]
        seen[bank] += 1
        if token == EOS:  # only complete hypotheses may end (see the mask above): bank = banks - 1
            if rank < sizes[bank]:
                finished.append((True, Hypothesis(prefixes[row], score / length_penalty_factor(step + 1, alpha))))
        elif kept_in[bank] < sizes[bank]:
            kept_in[bank] += 1
            keep.append(candidate)
        else:
            spare.append(candidate)
    spare.sort(key=lambda c: -sum(c[3]))  # stable: best score first within a bank
    keep += spare[: n - len(keep)]
    return sorted(keep, key=lambda c: -c[2])
