"""The Python API: a trained model behind two methods, and a training run in one call.

    import seq2seq
    model = seq2seq.load("runs/zh-en")
    print(model.translate(["今天天气很好。"]))

``load`` builds the translator that ``seq2seq translate`` uses (``seq2seq.decode.loader``), so
``Model.translate`` prints what the verb prints and ``Model.score`` is ``seq2seq score``'s forced
decoding; ``train`` is the ``seq2seq.train`` package, callable, which starts a run as ``seq2seq
train`` does (``seq2seq.train.launch``). This module is the top of the layers: it imports the
packages below it and nothing imports it but ``seq2seq/__init__.py``, lazily, so that ``import
seq2seq.config`` stays free of torch. docs/python-api.md describes every argument.
"""

from collections.abc import Sequence
from pathlib import Path

from seq2seq import train
from seq2seq.config import Overrides, override_texts
from seq2seq.decode.loader import engine_device, load_translator
from seq2seq.decode.translator import Translation, Translator
from seq2seq.errors import UserError
from seq2seq.text.stage import TextOptions

__all__ = ["Model", "load", "train"]


def _sentences(texts: Sequence[str], name: str) -> list[str]:
    """``texts`` as a list of strings; one string alone is a one-line error (it would be read as its characters)."""
    if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
        raise UserError(f"{name}: give a list of strings, one per sentence (one sentence: [text])")
    return list(texts)


class Model:
    """A trained model: ``translate`` sentences, ``score`` references.

    ``translator`` is the engine's ``seq2seq.decode.translator.Translator``, for what these two leave
    out: n-best lists, sampling, forced prefixes, glossaries, attention weights, per-token scores.
    """

    def __init__(self, translator: Translator) -> None:
        self.translator = translator

    def translate(
        self, sentences: Sequence[str], beam: int | None = None, split: bool = True, force: bool = False
    ) -> list[str]:
        """The best translation of each text, in order (an empty one gives an empty one); ``beam``: the
        width of the search (1: greedy; None: the model's ``decode.beam``). A text of several sentences is
        translated sentence by sentence (``split=False``: whole); one already in the target language comes
        back unchanged (``force=True`` translates it). ``translate_detailed`` says what to check."""
        return [result.best.text for result in self.translate_detailed(sentences, beam, split, force)]

    def translate_detailed(
        self, sentences: Sequence[str], beam: int | None = None, split: bool = True, force: bool = False
    ) -> list[Translation]:
        """``translate``'s results in full: each one's ``best.text``, ``warnings`` (a dropped number, a line
        passed through, a repetition), ``confidence`` and its ``sentences`` one by one."""
        if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int) or beam < 1):
            raise UserError(f"beam={beam!r}: give an integer >= 1 (1 is greedy search)")
        text = TextOptions(split=split, check_language=not force)
        return self.translator.translate(_sentences(sentences, "sentences"), beam, text=text)

    def score(self, sources: Sequence[str], references: Sequence[str]) -> list[float]:
        """Forced decoding: each reference's log-probability given its source (natural log, summed over its
        tokens and <end>), the first column of ``seq2seq score``."""
        sources, references = _sentences(sources, "sources"), _sentences(references, "references")
        if len(sources) != len(references):
            raise UserError(f"{len(sources)} sources but {len(references)} references: give one reference each")
        return [forced.log_prob for forced in self.translator.score(sources, references)]


def load(
    model: str | Path | Sequence[str | Path],
    device: str = "auto",
    engine: str = "torch",
    precision: str = "auto",
    overrides: Overrides = (),
) -> Model:
    """The model of a run directory, checkpoint file, local MarianMT directory or (engine ``ctranslate2``)
    export directory; several paths: an ensemble. ``device``, ``engine``, ``precision`` and ``overrides``
    (``decode.*`` settings, as a list of ``"decode.key=value"`` or a mapping) are those of ``seq2seq
    translate``'s ``--device``, ``--engine``, ``--precision`` and ``--set``."""
    paths = [model] if isinstance(model, str | Path) else list(model)
    if not paths:
        raise UserError("load: give a run directory or checkpoint (several: an ensemble)")
    translator = load_translator(paths, engine_device(engine, device), override_texts(overrides), precision, engine)
    return Model(translator)
