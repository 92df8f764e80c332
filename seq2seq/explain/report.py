"""The report of ``seq2seq explain``: one sentence through a trained model, as a JSON-ready dict
with one entry per section (``seq2seq.explain.page`` draws it; ``seq2seq serve`` sends it).

One greedy search gives the translation and its steps; one instrumented pass (the encoder on the
sentence, the decoder teacher-forced on that translation) records every attention and every Add &
Norm; a padded batch of the sentence and a longer one (the sentence twice over, longer in any
language) shows the masks. Everything runs on the model's own float32 weights, whatever precision
the translator searches in, so the numbers are the ones training optimised; the mask experiment
adds bfloat16 itself.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from seq2seq.config import DecodeConfig
from seq2seq.data.corpus import normalize
from seq2seq.decode.batched import pad_batch
from seq2seq.decode.search import greedy_search
from seq2seq.decode.torch_engine import TorchTranslator
from seq2seq.decode.translator import Translator
from seq2seq.errors import UserError
from seq2seq.explain.forcing import forcing_section, greedy_steps
from seq2seq.explain.heads import heads_section
from seq2seq.explain.masking import masks_section
from seq2seq.explain.positions import positions_section
from seq2seq.explain.probe import recording
from seq2seq.explain.residual import residual_section
from seq2seq.explain.scaling import check_choice, head_section
from seq2seq.model.ensemble import Ensemble
from seq2seq.model.masks import padding_mask
from seq2seq.model.transformer import Transformer
from seq2seq.special import BOS, EOS, PAD

SECTIONS = ("tokens", "attention_head", "multi_head", "masks", "add_norm", "training_vs_inference")


@dataclass(frozen=True)
class Labels:
    """How ids are shown: as source pieces, as target pieces, and target ids as text."""

    source: Callable[[list[int]], list[str]]
    target: Callable[[list[int]], list[str]]
    text: Callable[[list[int]], str]


def _model_facts(model: Transformer) -> dict:
    cfg = model.cfg
    return {
        "d_model": cfg.d_model,
        "heads": cfg.heads,
        "head_dim": cfg.resolved_head_dim,
        "encoder_layers": cfg.encoder_layers,
        "decoder_layers": cfg.decoder_layers,
        "ffn_dim": cfg.ffn_dim,
        "norm": cfg.norm,
        "source_vocabulary": model.src_embed.tokens.num_embeddings,
        "target_vocabulary": model.tgt_embed.tokens.num_embeddings,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


@torch.no_grad()
def build_report(
    model: Transformer,
    src: list[int],
    companion: list[int],
    ref: list[int] | None,
    labels: Labels,
    decode: DecodeConfig,
    layer: int = 0,
    head: int = 0,
) -> dict:
    """The report for source ids ``src`` (``x… <end>``) of a model in eval mode.

    ``companion`` is a longer source for the padded batch of the masks section; ``ref`` the
    reference's ids without <start>/<end> (None: no teacher-forced side); ``layer`` and ``head``
    pick the encoder head shown step by step (negative layers count from the end).
    """
    layer, head = check_choice(layer, head, model.cfg.encoder_layers, model.cfg.heads)
    device = next(model.parameters()).device
    greedy = greedy_steps(model, src, decode)
    tokens = greedy[0]
    src_ids = torch.tensor([src], device=device)
    src_mask = padding_mask(src_ids, PAD)
    with recording(model) as found:
        model.decode(torch.tensor([[BOS, *tokens]], device=device), model.encode(src_ids, src_mask), src_mask)
    source_pieces = labels.source(src)

    batch = pad_batch([src, companion], device)  # (2, S'): the first sentence padded
    outputs = greedy_search(model, batch, decode.max_len_a, decode.max_len_b)
    tgt_in = pad_batch([[BOS, *h.tokens] for h in outputs], device)  # (2, T')
    return {
        "model": _model_facts(model),
        "translation": {"text": labels.text(tokens), "pieces": labels.target(tokens)},
        "source_pieces": source_pieces,
        "decoder_input_pieces": labels.target([BOS, *tokens]),
        "predicted_pieces": labels.target([*tokens, EOS]),
        "tokens": positions_section(model, src, source_pieces),
        "attention_head": head_section([calls[0] for calls in found.encoder], layer, head),
        "multi_head": heads_section(model, found, layer, len(src)),
        "masks": masks_section(
            model,
            batch,
            tgt_in,
            [labels.source(row) for row in batch.tolist()],
            [labels.target(row) for row in tgt_in.tolist()],
        ),
        "add_norm": residual_section(found.residual, model.cfg.norm == "pre"),
        "training_vs_inference": forcing_section(model, src, ref, greedy, labels.target),
    }


def explain(translator: Translator, text: str, ref: str | None = None, layer: int = 0, head: int = 0) -> dict:
    """The report for one sentence (and optionally its reference translation) through ``translator``'s model."""
    translator.require(explain=True)
    assert isinstance(translator, TorchTranslator)  # the one engine with explain=True
    if isinstance(translator.model, Ensemble):
        raise UserError("explain shows one model's tensors: give one --model")
    if not normalize(text):
        raise UserError("explain needs a sentence; the text is empty")
    tokenizer = translator.tokenizer
    labels = Labels(tokenizer.src_pieces, tokenizer.tgt_pieces, tokenizer.decode_tgt)
    report = build_report(
        translator.model,
        translator.encode(text),
        translator.encode(f"{text} {text}"),
        None if ref is None else translator.target_ids(ref),
        labels,
        translator.decode,
        layer,
        head,
    )
    return {"sentence": text, "reference": ref, **report}
