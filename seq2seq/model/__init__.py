"""The Transformer: masks, layers, the encoder-decoder, ensembles. Tensors in, tensors out, no I/O.

May import: the top-level modules (``seq2seq.config``, ``seq2seq.special``, …) and torch.
"""
