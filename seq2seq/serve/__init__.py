"""``seq2seq serve``: the HTTP app (FastAPI, the ``serve`` extra), its request batcher and its page.

May import: every package but ``seq2seq.cli``.
"""
