"""Showing what a trained model does with one sentence: ``seq2seq explain``'s report, one module per
section (positions, scaling, heads, masking, residual, forcing), built by ``report`` from the tensors
``probe`` records, drawn by ``page``, served by ``routes``; and the attention heat maps of
``translate --attention`` (``heatmap``, matplotlib, the ``plot`` extra).

May import: every package but ``seq2seq.export``, ``seq2seq.serve`` and ``seq2seq.cli``.
"""
