"""From a trained model to translations: greedy, beam, sampled and constrained search, forced
scoring, beam traces, glossaries, attention weights, and the translator with its engines
(our own decoder, CTranslate2) and their loader.

May import: the top-level modules, ``seq2seq.model.transformer``, ``seq2seq.data``, ``seq2seq.interop`` (the loader
reads MarianMT directories); ctranslate2 (the ``ct2`` extra, in ``seq2seq.decode.ctranslate2`` only).
"""
