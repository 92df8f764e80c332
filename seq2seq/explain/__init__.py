"""Showing what a trained model does: attention heat maps (matplotlib, the ``plot`` extra).

May import: every package but ``seq2seq.export``, ``seq2seq.serve.app`` and ``seq2seq.cli``.
"""
