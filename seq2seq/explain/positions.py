"""Section 1 of the report: the source's pieces, their embeddings × √D and the sinusoidal positions
added to them, taken from the model's own embedding table and position buffer.

The positions are shown as a few dimension pairs (sin on dimension 2i, cos on 2i+1) spread from
the fastest-turning pair to the slowest, each with its wavelength 2π·10000^(2i/D); and as the
cosine similarity of two position vectors against their distance, which for sinusoids depends on
the distance alone (sin a·sin b + cos a·cos b = cos(a − b)), so one row per distance says it all.
"""

import math

import torch
import torch.nn.functional as F

from seq2seq.explain.numbers import number, rounded
from seq2seq.model.transformer import Transformer

PREVIEW_DIMS = 8  # leading dimensions of each vector shown as numbers
SIMILARITY_POSITIONS = 64  # positions p over which similarity(p, p + distance) is averaged


def dimension_pairs(d_model: int) -> list[int]:
    """Pair indices i (dimensions 2i, 2i+1) from the fastest to the slowest: 0, 1, D/8, D/4, D/2 − 1."""
    half = d_model // 2
    return sorted({0, min(1, half - 1), d_model // 8, d_model // 4, half - 1})


def wavelength(pair: int, d_model: int) -> float:
    """Positions per full turn of pair i: 2π·10000^(2i/D)."""
    return 2 * math.pi * 10000.0 ** (2 * pair / d_model)


def distances(max_positions: int) -> list[int]:
    """0, 1, 2, 4, … up to the position table's length."""
    found, distance = [0], 1
    while distance < max_positions:
        found.append(distance)
        distance *= 2
    return found


@torch.no_grad()
def positions_section(model: Transformer, src: list[int], pieces: list[str]) -> dict:
    """Tokens, embeddings × √D, positional encodings and their sum for source ids ``src`` (S,)."""
    embed = model.src_embed
    d_model = embed.tokens.embedding_dim
    ids = torch.tensor(src, device=embed.tokens.weight.device)
    scaled = (embed.tokens(ids) * embed.scale).float().cpu()  # (S, D)
    table = embed.positions.float().cpu()  # (P, D)
    codes = table[: len(src)]  # (S, D)
    summed = scaled + codes
    tokens = [
        {
            "position": position,
            "piece": piece,
            "id": token,
            "embedding_norm": number(scaled[position].norm()),
            "position_norm": number(codes[position].norm()),
            "sum_norm": number(summed[position].norm()),
            "embedding_sum_cosine": number(F.cosine_similarity(scaled[position], summed[position], dim=0)),
            "embedding": rounded(scaled[position, :PREVIEW_DIMS]),
            "encoding": rounded(codes[position, :PREVIEW_DIMS]),
        }
        for position, (piece, token) in enumerate(zip(pieces, src, strict=True))
    ]
    pairs = [
        {
            "pair": i,
            "dimensions": [2 * i, 2 * i + 1],
            "wavelength": number(wavelength(i, d_model), 2),
            "sin": rounded(codes[:, 2 * i]),
            "cos": rounded(codes[:, 2 * i + 1]),
        }
        for i in dimension_pairs(d_model)
    ]
    similarity = []
    for distance in distances(table.size(0)):
        count = min(SIMILARITY_POSITIONS, table.size(0) - distance)
        pairs_at = F.cosine_similarity(table[:count], table[distance : distance + count], dim=1)  # (count,)
        similarity.append({"distance": distance, "cosine": number(pairs_at.mean())})
    normalized = F.normalize(codes, dim=1)
    return {
        "d_model": d_model,
        "scale": number(embed.scale),
        "tokens": tokens,
        "pairs": pairs,
        "similarity_by_distance": similarity,
        "similarity": rounded(normalized @ normalized.T),  # (S, S) between this sentence's positions
    }
