"""Overlap with evaluation sets: the training pairs ``seq2seq fetch --exclude`` drops because one of their
sides is a sentence of a public test set, compared after the normalization the project's shared corpora
were filtered with. Exact matches after normalization; ``seq2seq.data.neardup`` measures similarity.
"""

import re
from collections.abc import Mapping

from seq2seq.data.corpus import normalize
from seq2seq.data.zh_script import converter


class Overlap:
    """The sentences of evaluation sets that no training pair may share a side with.

    Compared as the shared corpora were filtered: Chinese after NFKC, traditional-to-simplified
    conversion (OpenCC) and removal of everything but letters and digits; English after NFKC,
    lower-casing and the same removal. A sentence that keeps nothing (only punctuation) matches nothing.
    """

    def __init__(self, texts: Mapping[str, str]) -> None:
        """``texts``: each evaluation file's text by its name (one sentence a line, or tab-separated ones)."""
        self._simplified = converter("simplified", key="--exclude")
        self.files = tuple(texts)
        self.zh: set[str] = set()
        self.en: set[str] = set()
        for text in texts.values():
            for line in text.splitlines():
                for sentence in line.split("\t"):
                    if HAN.search(sentence):
                        self.zh.add(self._zh_key(sentence))
                    else:
                        self.en.add(self._en_key(sentence))
        self.zh.discard("")
        self.en.discard("")

    def _zh_key(self, text: str) -> str:
        return _letters_and_digits(self._simplified(normalize(text)))

    def _en_key(self, text: str) -> str:
        return _letters_and_digits(normalize(text).lower())

    def shares_a_side(self, zh: str, en: str) -> bool:
        """Whether the pair's Chinese or English side is one of the excluded sentences."""
        return self._zh_key(zh) in self.zh or self._en_key(en) in self.en

    def describe(self) -> str:
        """The files and how many sentences of each language they hold."""
        return f"{len(self.zh)} Chinese and {len(self.en)} English sentences from {', '.join(self.files)}"


HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _letters_and_digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())
