"""Writing a trained model in another toolkit's format (CTranslate2).

May import: every package but ``seq2seq.serve.app``, ``seq2seq.explain`` and ``seq2seq.cli``.
"""
