"""Section 6 of the report: training against inference. In training the decoder reads the whole
reference ``<start> y…`` at once (teacher forcing) and predicts ``y… <end>`` at every position; in
inference it starts from ``<start>`` alone and reads back what it chose, one token per step.

The greedy side is ``seq2seq.decode.search.greedy_search`` itself (with its key/value cache),
watched by a logits processor that records each step's input token and next-token
distribution; the teacher-forced side is one decoder pass over the reference, with the same
distribution (log-softmax of the logits in float32). Up to the first step where greedy chooses
a token other than the reference's, both read the same prefix, so their distributions agree;
from there on the decoder's inputs differ.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from seq2seq.config import DecodeConfig
from seq2seq.decode.search import greedy_search
from seq2seq.explain.numbers import number
from seq2seq.model.masks import padding_mask
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS, EOS, PAD

TOP = 5  # next tokens shown per step

Pieces = Callable[[list[int]], list[str]]
Greedy = tuple[list[int], list[tuple[int, Tensor]]]  # the output's ids, and each step's (input id, log-probs (V,))


class StepRecorder:
    """A logits processor that keeps, for sentence 0, each step's input token and log-probabilities (V,)."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, Tensor]] = []

    def __call__(self, step: int, tokens: Tensor, log_probs: Tensor, sentences: list[int]) -> None:
        if 0 in sentences:
            row = sentences.index(0)
            self.steps.append((int(tokens[row, -1]), log_probs[row].detach().float().cpu().clone()))


def top_next(log_probs: Tensor, pieces: Pieces) -> list[dict]:
    """The ``TOP`` most probable next tokens of log_probs (V,): piece, id and probability."""
    values, ids = log_probs.topk(min(TOP, log_probs.numel()))
    labels = pieces(ids.tolist())
    return [
        {"piece": label, "id": token, "p": number(value.exp())}
        for label, token, value in zip(labels, ids.tolist(), values, strict=True)
    ]


@torch.no_grad()
def greedy_steps(model: Transformer, src: list[int], decode: DecodeConfig) -> Greedy:
    """Greedy search of source ids ``src`` as the searches run it: its tokens and each step's (input, log-probs)."""
    device = next(model.parameters()).device
    recorder = StepRecorder()
    (found,) = greedy_search(
        model, torch.tensor([src], device=device), decode.max_len_a, decode.max_len_b, processors=[recorder]
    )
    return found.tokens, recorder.steps


@torch.no_grad()
def teacher_forced(model: Transformer, src: list[int], ref: list[int]) -> Tensor:
    """Next-token log-probabilities (T, V) at every position of ``<start> ref…``, all in one decoder pass."""
    device = next(model.parameters()).device
    src_ids = torch.tensor([src], device=device)
    tgt_in = torch.tensor([[BOS, *ref]], device=device)  # (1, T)
    src_mask = padding_mask(src_ids, PAD)
    states = model.decode(tgt_in, model.encode(src_ids, src_mask), src_mask)  # (1, T, D)
    return F.log_softmax(model.logits(states).float(), dim=-1)[0].cpu()


def forcing_section(
    model: Transformer,
    src: list[int],
    ref: list[int] | None,
    greedy: Greedy,
    pieces: Pieces,
) -> dict:
    """Greedy's steps (from ``greedy_steps``) beside the teacher-forced pass over ``ref`` (ids without
    <start>/<end>; None: greedy alone), and the first step where greedy leaves the reference."""
    tokens, steps = greedy
    chosen = [*tokens, EOS][: len(steps)]  # the token each step chose; a search cut at its limit has no <end>
    greedy_rows = [
        {
            "step": step,
            "input": pieces([given])[0],
            "chosen": pieces([token])[0],
            "chosen_id": token,
            "chosen_p": number(log_probs[token].exp()),
            "top": top_next(log_probs, pieces),
        }
        for step, ((given, log_probs), token) in enumerate(zip(steps, chosen, strict=True))
    ]
    section: dict = {
        "greedy": greedy_rows,
        "greedy_reached_limit": len(steps) == len(tokens),
        "teacher_forced": None,
        "divergence": None,
    }
    if ref is None:
        return section
    targets = [*ref, EOS]
    log_probs = teacher_forced(model, src, ref)  # (T, V)
    section["teacher_forced"] = [
        {
            "position": position,
            "input": pieces([given])[0],
            "target": pieces([target])[0],
            "target_id": target,
            "target_p": number(log_probs[position, target].exp()),
            "top": top_next(log_probs[position], pieces),
        }
        for position, (given, target) in enumerate(zip([BOS, *ref], targets, strict=True))
    ]
    section["divergence"] = next(
        (step for step, (mine, theirs) in enumerate(zip(chosen, targets, strict=False)) if mine != theirs), None
    )
    return section
