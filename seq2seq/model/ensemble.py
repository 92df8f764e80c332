"""An ensemble of models that decodes as one model: the same ``encode``/``decode``/``logits``
interface as ``seq2seq.model.transformer.Transformer``, so greedy search, beam search, sampling and forced
scoring run on it unchanged.

Every step the members' log-probabilities are averaged (a product of experts: tokens every
member finds likely win; the searches renormalise with their own log-softmax). The members must
share one target vocabulary; their widths and depths may differ, because their encoder outputs
and decoder states travel side by side, concatenated on the last axis. The search's one
``DecoderCache`` holds the members' layer entries one after the other (member 0's layers, then
member 1's, …), so reordering it for beam search reorders every member's cache.
"""

import dataclasses
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.model.layers import DecoderCache


class Ensemble(nn.Module):
    """Members decoded in lockstep; ``logits`` returns the mean of their log-probabilities (..., V)."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if len({m.cfg.decoder_start for m in members}) > 1:
            raise ValueError("ensemble members must start their decoders from the same token (model.decoder_start)")
        self.members = nn.ModuleList(members)
        self.cfg = dataclasses.replace(members[0].cfg, max_positions=min(m.cfg.max_positions for m in members))
        self.widths = [m.cfg.d_model for m in members]
        self.depths = [m.cfg.decoder_layers for m in members]

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S), src_mask (B, 1, 1, S) -> the members' memories side by side (B, S, ΣD)."""
        return torch.cat([m.encode(src, src_mask) for m in self.members], dim=-1)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        """Target ids (B, T) -> the members' decoder states side by side (B, T, ΣD)."""
        states, first = [], 0
        for member, part, depth in zip(self.members, memory.split(self.widths, dim=-1), self.depths, strict=True):
            view = None
            if cache is not None:  # this member's slice of the shared cache, written back after the step
                view = DecoderCache(cache.self_kv[first : first + depth], cache.cross_kv[first : first + depth])
            states.append(member.decode(tgt, part, src_mask, view))
            if cache is not None:
                cache.self_kv[first : first + depth] = view.self_kv
                cache.cross_kv[first : first + depth] = view.cross_kv
            first += depth
        return torch.cat(states, dim=-1)

    def logits(self, states: Tensor) -> Tensor:
        """States (..., ΣD) -> the mean of the members' log-probabilities (..., V)."""
        parts = states.split(self.widths, dim=-1)
        return torch.stack(
            [F.log_softmax(m.logits(s).float(), dim=-1) for m, s in zip(self.members, parts, strict=True)]
        ).mean(dim=0)
