"""Scoring translations with sacrebleu (BLEU and chrF on detokenized text), and BLEU's tokenizer.

BLEU counts word n-grams, so what a word is must suit the target language: sacrebleu's default
``13a`` splits on spaces and punctuation, which leaves an unsegmented Chinese or Japanese line one
"word" and its BLEU meaningless. The tokenizer therefore follows the target language
(``data.tgt_lang``) as sacrebleu itself maps a target language (``zh`` -> ``zh``, ``ja`` ->
``ja-mecab``, ``ko`` -> ``ko-mecab``, anything else ``13a``), unless ``eval.bleu_tokenize`` (or
``evaluate --tokenize``) names one. The signature printed with every score says which it was
(``tok:zh``). chrF counts characters and needs no tokenizer.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from seq2seq.config import Config
from seq2seq.errors import UserError

LANGUAGE_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}  # sacrebleu's BLEU(trg_lang=...) choice
DEFAULT_TOKENIZER = "13a"
_EXTRAS = {"ja-mecab": "ja", "ko-mecab": "ko"}  # tokenizers whose dependencies are an extra of ours


def bleu_tokenizer(tgt_lang: str | None, override: str | None = None) -> str:
    """BLEU's tokenizer: ``override`` when given, else the one for target language ``tgt_lang`` (by its
    primary subtag: ``zh-Hant`` is ``zh``), else ``13a``."""
    if override:
        return override
    primary = (tgt_lang or "").lower().replace("_", "-").split("-")[0]
    return LANGUAGE_TOKENIZERS.get(primary, DEFAULT_TOKENIZER)


def configured_tokenizer(cfg: Config) -> str:
    """The BLEU tokenizer of a run's config (``eval.bleu_tokenize``, else from ``data.tgt_lang``)."""
    return bleu_tokenizer(cfg.data.tgt_lang, cfg.eval.bleu_tokenize)


def bleu_metric(tokenize: str = DEFAULT_TOKENIZER) -> BLEU:
    """sacrebleu's BLEU with ``tokenize``; a tokenizer whose optional dependencies are missing, or whose
    model cannot be fetched, is a one-line UserError."""
    try:
        return BLEU(tokenize=tokenize)
    except RuntimeError:  # sacrebleu's MeCab tokenizers without MeCab and its dictionary
        if tokenize not in _EXTRAS:
            raise
        raise UserError(
            f"BLEU tokenizer {tokenize} needs MeCab and its dictionary: pip install 'seq2seq[{_EXTRAS[tokenize]}]'"
        ) from None
    except OSError as err:  # flores101/flores200 download their SentencePiece model on first use
        raise UserError(
            f"BLEU tokenizer {tokenize} could not fetch its SentencePiece model ({err}); "
            "connect once (sacrebleu keeps it in ~/.sacrebleu) or choose another tokenizer"
        ) from None


@dataclass
class Scores:
    """Corpus-level scores and the sacrebleu signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


References = list[str] | Sequence[list[str]]  # one reference per sentence, or several streams of them


def reference_streams(references: References) -> list[list[str]]:
    """``references`` as streams (``streams[k][i]``: the k-th reference of sentence i): a list of strings is
    the one stream."""
    if references and not isinstance(references[0], str):
        return [list(stream) for stream in references]
    return [list(references)]


def check_aligned(hypotheses: Sequence[str], streams: list[list[str]]) -> None:
    """Every reference stream must have one line per hypothesis."""
    for stream in streams:
        if len(stream) != len(hypotheses):
            raise UserError(f"{len(hypotheses)} translations but {len(stream)} references; they must be line-aligned")


def corpus_scores(hypotheses: list[str], references: References, tokenize: str = DEFAULT_TOKENIZER) -> Scores:
    """Corpus BLEU (cased, tokenized by ``tokenize``) and chrF of hypotheses against one reference each,
    or against several (``references`` a list of streams: sacrebleu counts each n-gram up to its most
    frequent use in any one reference, and the brevity penalty takes the closest reference length)."""
    streams = reference_streams(references)
    check_aligned(hypotheses, streams)
    bleu, chrf = bleu_metric(tokenize), CHRF()
    b = bleu.corpus_score(hypotheses, streams)
    c = chrf.corpus_score(hypotheses, streams)
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()))
