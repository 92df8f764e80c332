"""From corpus files to batches: reading and normalization, Chinese scripts, near-duplicates and
the split, corpus mixing, the SentencePiece tokenizer, token files, batches, and the cached pipeline.

May import: the top-level modules; sentencepiece, opencc (the ``zh`` extra).
"""
