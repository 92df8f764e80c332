"""Our own decoder behind the ``Translator`` interface: every capability, on one model or an ensemble.

Decoding in ``bf16`` runs on a bf16 copy of the weights rather than under autocast: autocast
would cast every weight again at every decoding step. On a CPU it first sizes oneDNN's caches of
compiled kernels (``seq2seq.device.size_onednn_caches``).

A translator given ``threads`` sets torch's intra-op threads to that number on the thread that
searches, at every search: torch keeps the count per process and OpenMP per calling thread, so
setting it where the work runs is what holds when a server's worker thread searches, or when
translators with different counts share one process (a benchmark).
"""

import copy
from collections.abc import Callable

import torch

from seq2seq.config import Config, DecodeConfig
from seq2seq.data.corpus import normalize
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.attention import attention_weights
from seq2seq.decode.batched import search_ids
from seq2seq.decode.forced import ForcedScore, score_ids
from seq2seq.decode.search import Hypothesis
from seq2seq.decode.translator import PLAIN, Capabilities, SearchOptions, SentenceAttention, Translator
from seq2seq.device import size_onednn_caches
from seq2seq.errors import UserError
from seq2seq.model.ensemble import Ensemble
from seq2seq.model.transformer import Transformer


class TorchTranslator(Translator):
    """A loaded model (or ``Ensemble``) decoded by ``seq2seq.decode.batched.search_ids``."""

    engine = "torch"
    capabilities = Capabilities(
        sampling=True,
        prefixes=True,
        constraints=True,
        attention=True,
        scoring=True,
        ensembles=True,
        trace=True,
        explain=True,
    )

    def __init__(
        self,
        model: Transformer | Ensemble,
        tokenizer: Tokenizer,
        decode: DecodeConfig,
        device: torch.device,
        precision: str = "float32",
        normalize_source: Callable[[str], str] = normalize,
        normalize_target: Callable[[str], str] = normalize,
        config: Config | None = None,
        threads: int = 0,
        workers: int = 1,
    ) -> None:
        super().__init__(
            tokenizer, decode, device, model.cfg.max_positions, normalize_source, normalize_target, precision, config
        )
        self.model = model
        if precision == "bf16" and device.type == "cpu":
            size_onednn_caches()
        self.search_model = copy.deepcopy(model).to(torch.bfloat16) if precision == "bf16" else model
        """The weights searches run on: ``model`` itself, or its bf16 copy."""
        self.threads, self.workers = threads, workers
        """torch intra-op threads of every search on the CPU (0: torch's as they are) and the batches searched
        at once (``seq2seq.decode.threads``)."""

    def _use_threads(self) -> None:
        if self.threads and self.device.type == "cpu" and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def search(
        self, sources: list[list[int]], beam: int, nbest: int, options: SearchOptions = PLAIN
    ) -> list[list[Hypothesis]]:
        self._use_threads()
        return search_ids(
            self.search_model,
            sources,
            self.decode,
            self.device,
            beam,
            nbest,
            sampler=options.sampler,
            prefixes=options.prefixes,
            constraints=options.constraints,
            workers=self.workers,
        )

    def score(self, sentences: list[str], references: list[str]) -> list[ForcedScore]:
        """Forced decoding: each reference's log-probability given its sentence (``seq2seq.decode.forced``)."""
        self._use_threads()
        return score_ids(
            self.search_model,
            [self.encode(s) for s in sentences],
            [self.target_ids(r) for r in references],
            self.device,
            self.decode.batch_sentences,
            self.decode.length_penalty,
        )

    def attention(self, source: str, tokens: list[int]) -> SentenceAttention:
        """All attention weights for ``source`` and its translation ``tokens`` (ids without <start>/<end>)."""
        if isinstance(self.model, Ensemble):
            raise UserError("attention weights show one model's attention: give one --model")
        src = self.encode(source)
        return SentenceAttention(
            attention_weights(self.model, src, tokens),
            [*self.tokenizer.src_pieces(src[:-1]), "<end>"],
            [*self.tokenizer.tgt_pieces(tokens), "<end>"],
        )
