"""The special token ids, fixed in every model this project trains.

    0 <pad>   1 <unk>   2 <start> (BOS)   3 <end> (EOS)

The source is encoded as ``x… <end>``; the decoder reads ``<start> y…`` and predicts ``y… <end>``.
They live here, apart from the SentencePiece code that assigns them (``seq2seq.data.tokenizer``),
so that model, search and loss code can name them without importing a tokenizer.
"""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
