"""seq2seq: a small, readable encoder-decoder Transformer for translation.

Shape letters used in every docstring and reshape comment:

    B  batch size              S  source length        T  target length
    D  model width (d_model)   H  attention heads      K  width of one head
    F  feed-forward width      V  vocabulary size      N  beam size
"""

__version__ = "0.1.0"
