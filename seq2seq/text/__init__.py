"""The text stage: what happens to a user's text before the model reads it and after it writes.

Documents are split into sentences (``segment``), sentences in the wrong language are passed
through or flagged (``language``), non-translatables are masked as placeholders and restored
(``placeholders``), and ``stage`` ties them together for translate, evaluate, serve and the Python
API. The model never sees raw text; this package sees no tensors.
"""
