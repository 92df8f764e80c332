"""Chinese script normalization: simplified or traditional characters, converted by OpenCC.

A model trained on one script reads the other poorly (its vocabulary never saw the other
characters). ``data.src_script`` / ``data.tgt_script`` convert every sentence of that side to
one script, with the same function for the training corpus and for every input of translate
and evaluate; the setting is part of the run's config, so a model always normalizes its input
as it was trained. OpenCC is an optional extra (``seq2seq[zh]``), needed only when a setting
asks for a conversion.
"""

from collections.abc import Callable
from functools import cache

from seq2seq.errors import UserError

# OpenCC's phrase-aware conversions: traditional -> simplified and simplified -> traditional.
_OPENCC_CONFIG = {"simplified": "t2s", "traditional": "s2t"}
OTHER_SCRIPT = {"simplified": "traditional", "traditional": "simplified"}


@cache
def converter(script: str, key: str = "data.src_script") -> Callable[[str], str]:
    """Text -> text in ``script`` (``keep``: unchanged); ``key`` names the setting in the error."""
    if script == "keep":
        return lambda text: text
    try:
        import opencc
    except ImportError:
        raise UserError(f"{key}={script} needs OpenCC: pip install 'seq2seq[zh]' (or set {key}=keep)") from None
    return opencc.OpenCC(_OPENCC_CONFIG[script]).convert
