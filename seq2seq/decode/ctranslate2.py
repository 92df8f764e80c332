"""CTranslate2 as an engine: a directory written by ``seq2seq export --to ctranslate2`` behind the
``Translator`` interface.

Our normalization, SentencePiece pieces in, pieces out, our detokenization, so outputs compare
line for line with our own decoder; only ``search`` runs in CTranslate2. The ``ctranslate2``
package (the ``ct2`` extra) is imported here and nowhere else: the export
(``seq2seq.export.ctranslate2``) takes it from ``require_ctranslate2``.

Decoding settings are translated per call (``CTranslate2Translator.search``): our length
limit ``a·len(src) + b`` is per sentence, CTranslate2's ``max_decoding_length`` per call, so
sentences are grouped by limit; ``min_decoding_length=0`` (ours allows an immediate <end>);
``length_penalty`` keeps its exponent, but CTranslate2 divides by ``L^α`` (L without <end>)
where we divide by GNMT's ``((5 + L) / 6)^α`` (L with <end>): the two rank alike only at α = 0.

Threads: ``threads`` intra-op threads per batch and ``workers`` batches at once (CTranslate2's
``intra_threads`` and ``inter_threads``; ``seq2seq.decode.threads`` chooses them). Every group
of a call is submitted before any is waited for, so that several workers have batches to take.
"""

import json
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import config_from_dict
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decode.batched import pad_batch
from seq2seq.decode.search import Hypothesis, length_limits
from seq2seq.decode.translator import (
    PLAIN,
    Capabilities,
    SearchOptions,
    Translator,
    source_normalizer,
    target_normalizer,
)
from seq2seq.errors import UserError

SETTINGS = "seq2seq.json"  # our config (decoding settings, max_positions) next to CTranslate2's files


def require_ctranslate2() -> Any:
    """Import ctranslate2, or a one-line error naming the extra."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError("the ctranslate2 engine needs the ct2 extra: pip install 'seq2seq[ct2]'") from None
    return ctranslate2


def require_exported(path: str | Path) -> Path:
    """``path`` if it is a directory written by ``export_ctranslate2``, else a one-line error saying how to make one."""
    path = Path(path)
    if not ((path / SETTINGS).is_file() and (path / "model.bin").is_file()):
        raise UserError(
            f"--engine ctranslate2: {path} is not an exported model; "
            f"create one with: seq2seq export RUN_DIR --to ctranslate2 --out {path}"
        )
    return path


class CTranslate2Translator(Translator):
    """A ``Translator`` whose search runs in CTranslate2 on an exported model directory.

    Encoding, batching order, empty lines and detokenization are ``Translator``'s; only
    ``search`` differs, greedy and beam search only (``capabilities``). ``compute_type`` is
    CTranslate2's: ``default`` keeps the exported quantization where the hardware runs it (else
    CTranslate2 picks the nearest it supports). ``threads`` (0: torch's count) and ``workers``: see
    the module doc.
    """

    engine = "ctranslate2"
    capabilities = Capabilities()

    def __init__(
        self,
        model_dir: str | Path,
        overrides: list[str] = (),
        compute_type: str = "default",
        threads: int = 0,
        workers: int = 1,
    ) -> None:
        ct2 = require_ctranslate2()
        model_dir = require_exported(model_dir)
        settings = json.loads((model_dir / SETTINGS).read_text(encoding="utf-8"))
        cfg = config_from_dict(settings["config"], f"{model_dir / SETTINGS}", list(overrides))
        try:
            threads = threads or torch.get_num_threads()
            self.engine_model = ct2.Translator(
                str(model_dir), "cpu", compute_type=compute_type, intra_threads=threads, inter_threads=workers
            )
        except ValueError as err:
            supported = ", ".join(sorted(ct2.get_supported_compute_types("cpu")))
            raise UserError(f"CTranslate2 cannot run {model_dir} as {compute_type} here ({supported}): {err}") from None
        tokenizer = Tokenizer.load(model_dir)
        super().__init__(
            tokenizer,
            cfg.decode,
            torch.device("cpu"),
            cfg.model.max_positions,
            normalize_source=source_normalizer(cfg),
            normalize_target=target_normalizer(cfg),
            config=cfg,
        )
        self.compute_type = self.precision = self.engine_model.compute_type
        self.threads, self.workers = threads, workers
        self.step = settings.get("step")  # the training step of the checkpoint it was exported from
        self._tgt_ids = {piece: i for i, piece in enumerate(tokenizer.tgt_vocabulary())}

    def search(
        self, sources: list[list[int]], beam: int, nbest: int, options: SearchOptions = PLAIN
    ) -> list[list[Hypothesis]]:
        """Translate id sequences with CTranslate2; one call per distinct length limit (see the module doc)."""
        self.require(**options.features())
        decode = self.decode
        if not sources:
            return []
        limits = length_limits(pad_batch(sources, self.device), decode.max_len_a, decode.max_len_b, self.max_positions)
        groups: dict[int, list[int]] = {}
        for i, limit in enumerate(limits.tolist()):
            groups.setdefault(limit, []).append(i)
        pending = [
            (
                members,
                self.engine_model.translate_batch(
                    [self.tokenizer.src_pieces(sources[i]) for i in members],
                    max_batch_size=decode.batch_sentences,
                    asynchronous=True,
                    beam_size=beam,
                    num_hypotheses=1 if beam == 1 else nbest,
                    length_penalty=0.0 if beam == 1 else decode.length_penalty,
                    no_repeat_ngram_size=decode.no_repeat_ngram,
                    max_input_length=0,
                    max_decoding_length=limit,
                    min_decoding_length=0,
                    return_end_token=False,
                    return_scores=True,
                ),
            )
            for limit, members in groups.items()
        ]
        results: list[list[Hypothesis]] = [[] for _ in sources]
        for members, found in pending:
            for i, future in zip(members, found, strict=True):
                result = future.result()
                results[i] = [
                    Hypothesis([self._tgt_ids[p] for p in tokens], score)
                    for tokens, score in zip(result.hypotheses, result.scores, strict=True)
                ]
        return results
