"""Scoring translations: corpus BLEU and chrF, BLEU by novelty and length, paired comparisons of
systems with bootstrap intervals.

May import: the top-level modules, ``seq2seq.model.transformer``, ``seq2seq.data``, ``seq2seq.decode``; sacrebleu.
"""
