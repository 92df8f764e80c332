"""The three attention masks, in one boolean convention.

Convention: ``True`` means "this query may attend to this key". Every mask is
broadcastable to (B, H, T, S) — batch, heads, query length, key length — and
masks are combined with ``&`` only.

* encoder padding mask, (B, 1, 1, S): hides padded *keys*. Query rows are never
  masked as a whole, so every row keeps at least one real key (the source always
  ends with ``<end>``) and softmax never sees a row of -inf, i.e. no NaN.
* decoder self-attention mask, (B, 1, T, T): causal (position t sees 0..t) and
  target key padding. Decoding with a cache, T new positions after ``offset`` cached ones see
  the cache and the causal part of their own block, (1, 1, T, offset + T); one new position
  sees every key and needs no mask. Position 0 is the start token and always a real key, even where that
  token is ``<pad>`` (MarianMT's decoder starts from it), so again no row is empty.
* cross-attention mask, (B, 1, 1, S): the encoder padding mask reused, so decoder
  queries never look at padded encoder positions.
"""

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Key padding mask (B, 1, 1, L) from token ids (B, L): True at real tokens."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(length: int, device: torch.device | None = None, offset: int = 0) -> Tensor:
    """Causal (1, 1, T, offset + T) mask of T queries at positions offset..offset+T-1: query t may attend
    to keys 0..offset+t (offset 0: lower-triangular (1, 1, T, T))."""
    return torch.ones(length, offset + length, dtype=torch.bool, device=device).tril(diagonal=offset)[None, None]


def decoder_self_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Decoder self-attention mask (B, 1, T, T): causal & target key padding, the start position always a key."""
    keys = padding_mask(tgt, pad_id)  # (B, 1, 1, T)
    keys[..., 0] = True
    return causal_mask(tgt.size(1), tgt.device) & keys
