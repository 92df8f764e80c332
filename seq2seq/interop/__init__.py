"""Other toolkits' formats and ours: converters between a foreign model and our model, tokenizer and
config (MarianMT, ``seq2seq.interop.marian``). Loading for translation, warm starts and export use them,
so they sit below all three; a converter is neither decoding nor training.

May import: the top-level modules, ``seq2seq.model``, ``seq2seq.data``; transformers (the ``hf`` extra,
imported where it is used).
"""
