"""Training: the loop and its update, the fused loss, precision, validation, checkpoints of a run,
distributed ranks, signals, the run lock, the run log, warm starts.

May import: the top-level modules, ``seq2seq.model.transformer``, ``seq2seq.data``, ``seq2seq.decode`` (validation
decodes the dev split), ``seq2seq.evaluate.metrics`` (its BLEU and chrF).
"""
