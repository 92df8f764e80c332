"""The encoder-decoder Transformer: ``encode`` reads the source once, ``decode``
runs the decoder (whole target in training, one new position per step with a
``DecoderCache`` at inference), ``logits`` projects to the vocabulary (plus a bias where
``output_bias`` asks for one). Training takes ``states`` (teacher forcing) and lets
``seq2seq.train.loss`` project them fused with the loss. The decoder's first input is
``cfg.decoder_start_id`` (<start>, or <pad> for models that start as MarianMT does); the callers
build the decoder input with it.

The model does no I/O: tensors in, tensors out.
"""

from torch import Tensor, nn

from seq2seq.config import ModelConfig
from seq2seq.model.layers import DecoderCache, DecoderLayer, Embedding, EncoderLayer
from seq2seq.model.masks import causal_mask, decoder_self_mask, padding_mask


class Transformer(nn.Module):
    """Encoder and decoder stacks, embeddings (optionally tied) and output projection."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int) -> None:
        super().__init__()
        self.cfg, self.pad_id = cfg, pad_id
        if cfg.tie_embeddings == "all" and src_vocab != tgt_vocab:
            raise ValueError("tie_embeddings='all' needs one joint vocabulary")
        tgt_tokens = nn.Embedding(tgt_vocab, cfg.d_model, padding_idx=pad_id)
        src_tokens = (
            tgt_tokens if cfg.tie_embeddings == "all" else nn.Embedding(src_vocab, cfg.d_model, padding_idx=pad_id)
        )
        self.src_embed = Embedding(src_tokens, cfg.dropout, cfg.max_positions)
        self.tgt_embed = Embedding(tgt_tokens, cfg.dropout, cfg.max_positions)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        # Pre-norm leaves the residual stream unnormalised, so each stack ends with a LayerNorm.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.out_proj = nn.Linear(cfg.d_model, tgt_vocab, bias=cfg.output_bias)
        self._init_parameters()
        if cfg.tie_embeddings != "none":
            self.out_proj.weight = tgt_tokens.weight

    def _init_parameters(self) -> None:
        """Xavier for projections, N(0, D^-1/2) for embeddings (unit scale after ×√D)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=self.cfg.d_model**-0.5)
                nn.init.zeros_(module.weight[self.pad_id])

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S) ids, src_mask (B, 1, 1, S) -> memory (B, S, D)."""
        x = self.src_embed(src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None) -> Tensor:
        """Decoder states (B·G, T, D) for target ids tgt (B·G, T) and memory (B, S, D), src_mask (B, 1, 1, S).

        G consecutive target rows share one source (a sentence's beams; G = 1 otherwise): the
        cross-attention reads each source once for all G (``MultiHeadAttention.forward``).

        Without a cache, tgt is the whole input ``<start> y…`` (its first id is
        ``cfg.decoder_start_id``) and the causal &
        padding mask applies. With a cache, tgt holds only the new positions
        following ``cache.length`` earlier ones, which the cache supplies.
        """
        offset = cache.length if cache is not None else 0
        if cache is None:
            self_mask = decoder_self_mask(tgt, self.pad_id)
        elif tgt.size(1) == 1:
            self_mask = None  # one new position may see every earlier one
        else:  # several new positions: causal, shifted by the cached prefix
            self_mask = causal_mask(tgt.size(1), tgt.device, offset)
        x = self.tgt_embed(tgt, offset)
        for index, layer in enumerate(self.decoder_layers):
            x = layer(x, memory, self_mask, src_mask, cache, index)
        return self.decoder_norm(x)

    def logits(self, states: Tensor) -> Tensor:
        """Decoder states (..., D) -> vocabulary logits (..., V)."""
        return self.out_proj(states)

    def states(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) = ``<start> y…`` -> decoder states (B, T, D)."""
        src_mask = padding_mask(src, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, V)."""
        return self.logits(self.states(src, tgt_in))
