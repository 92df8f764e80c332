"""Sampling: translations drawn from the model's distribution instead of searched for.

``TokenSampler`` reshapes each step's distribution (temperature, top-k, top-p) and draws from it;
``sample`` runs greedy search (``seq2seq.decode.search.greedy_search``) with that draw in place of
the most probable token, once per requested sample. ``seq2seq.decode.batched.search_ids`` calls it.
"""

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from seq2seq.decode.search import Hypothesis, LogitsProcessor, greedy_search
from seq2seq.special import BOS, PAD


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


def sample(
    model: nn.Module,
    src: Tensor,
    sampler: TokenSampler,
    samples: int,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    processors: Sequence[LogitsProcessor] = (),
) -> list[list[Hypothesis]]:
    """``samples`` draws for each source of (B, S), best-scoring first; scores as in greedy search.

    The sources are repeated (B·samples rows, a sentence's draws side by side) and decoded in one
    greedy search, so ``processors`` see a sentence's rows as ``samples`` consecutive sentences.
    """
    drawn = greedy_search(
        model,
        src.repeat_interleave(samples, dim=0),  # (B·samples, S)
        max_len_a,
        max_len_b,
        processors=processors,
        sampler=sampler,
    )
    return [sorted(drawn[j : j + samples], key=lambda h: -h.score) for j in range(0, len(drawn), samples)]
