"""Forced decoding: how probable the model finds a given translation, token by token.

The decoder reads ``<start> y…`` (its first id the model's ``cfg.decoder_start_id``) and scores
``y… <end>`` in one pass (teacher forcing), with the same step distribution the searches use
(log-softmax of ``model.logits`` in float32), so the log-probability of the model's own greedy
output equals greedy search's score, and ``normalized`` equals beam search's score for an output
that ended with ``<end>``.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.decode.batched import length_sorted_batches, pad_batch
from seq2seq.decode.search import length_penalty_factor
from seq2seq.model.masks import padding_mask
from seq2seq.special import EOS, PAD


@dataclass
class ForcedScore:
    """One target under the model: the log-probability of every token (its ``<end>`` last)."""

    token_log_probs: list[float]
    log_prob: float  # their sum
    normalized: float  # the sum over the GNMT length penalty, as beam search ranks outputs


@torch.no_grad()
def target_log_probs(model: nn.Module, src: Tensor, tgt: Tensor) -> Tensor:
    """src (B, S) and targets tgt (B, T) = ``y… <end>`` right-padded -> log-probabilities (B, T), 0 at padding."""
    start = torch.full_like(tgt[:, :1], model.cfg.decoder_start_id)
    tgt_in = torch.cat([start, tgt[:, :-1]], dim=1)  # (B, T): <start> y…
    tgt_in = tgt_in.masked_fill(tgt_in == EOS, PAD)  # a shorter row's <end> is not an input
    src_mask = padding_mask(src, PAD)
    states = model.decode(tgt_in, model.encode(src, src_mask), src_mask)  # (B, T, D)
    log_probs = F.log_softmax(model.logits(states).float(), dim=-1)  # (B, T, V)
    picked = log_probs.gather(-1, tgt[:, :, None]).squeeze(-1)  # (B, T)
    return picked.masked_fill(tgt == PAD, 0.0)


def score_ids(
    model: nn.Module,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    device: torch.device,
    batch_sentences: int,
    length_penalty: float,
) -> list[ForcedScore]:
    """Score targets (ids without ``<start>``/``<end>``) against sources, in length-sorted batches; input order."""
    results: list[ForcedScore | None] = [None] * len(sources)
    for chunk in length_sorted_batches([len(s) for s in sources], batch_sentences):
        src = pad_batch([sources[i] for i in chunk], device)
        tgt = pad_batch([[*targets[i], EOS] for i in chunk], device)
        values = target_log_probs(model, src, tgt).tolist()
        for i, row in zip(chunk, values, strict=True):
            tokens = row[: len(targets[i]) + 1]
            total = sum(tokens)
            results[i] = ForcedScore(tokens, total, total / length_penalty_factor(len(tokens), length_penalty))
    return results
