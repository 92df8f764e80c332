"""seq2seq: a small, readable encoder-decoder Transformer for translation.

The packages form layers; each imports only from the layers before it in this list:

    top level   config and the packaged recipes, errors, atomic, checkpoint, special ids, device and precision
    text        the text stage: sentences, the language check, non-translatables masked and restored (strings only)
    model       masks, layers, the Transformer, ensembles (tensors in, tensors out)
    data        corpora, scripts, near-duplicates, splits, mixing, tokenizer, token files, batches
    interop     converters between other toolkits' models (MarianMT) and ours, for loading, warm starts, export
    decode      searches, forced scoring, traces, glossaries, attention, translators and engines
    evaluate    BLEU/chrF, breakdowns, comparisons
    train       the training loop and everything a run needs
    export      CTranslate2 export
    explain     what a trained model does, shown
    serve       the HTTP app
    cli         the ``seq2seq`` command, one module per verb
    api         the Python API (``seq2seq/api.py``): ``load`` and ``train``

``model`` and ``data`` do not import each other; ``export`` and ``explain`` neither.
``tests/unit/test_import_layers.py`` checks all of it. This package exports the API's names lazily
(PEP 562): ``seq2seq.load`` imports ``seq2seq.api`` on first use, and ``import seq2seq.config`` loads
none of the layers below the top.

Shape letters used in every docstring and reshape comment:

    B  batch size              S  source length        T  target length
    D  model width (d_model)   H  attention heads      K  width of one head
    F  feed-forward width      V  vocabulary size      N  beam size
"""

__version__ = "0.1.0"

__all__ = ["Model", "load", "train"]


def __getattr__(name: str) -> object:
    """``seq2seq.load``, ``seq2seq.train`` and ``seq2seq.Model``, from ``seq2seq.api`` on first use."""
    if name not in __all__:
        raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")
    from seq2seq import api

    return getattr(api, name)
