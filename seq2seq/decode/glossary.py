"""Glossaries: a UTF-8 TSV of ``source term<TAB>target term`` lines. Every source term found in a
sentence makes its target term a constraint of that sentence's translation (constrained beam
search, ``seq2seq.decode.constrained``). Terms are normalized like the text they are matched against."""

from dataclasses import dataclass
from pathlib import Path

from seq2seq.data.corpus import normalize
from seq2seq.errors import UserError


@dataclass(frozen=True)
class Glossary:
    """Source term -> target term pairs, in file order."""

    terms: tuple[tuple[str, str], ...]

    @classmethod
    def read(cls, path: str | Path) -> "Glossary":
        """Read a TSV glossary; a malformed line is a one-line error naming the file and line."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"--glossary {path}: file not found")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise UserError(f"--glossary {path}: not valid UTF-8") from None
        terms = []
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            source, target = (normalize(f) for f in fields) if len(fields) == 2 else ("", "")
            if not source or not target:
                raise UserError(
                    f"--glossary {path}:{number}: expected 'source term<TAB>target term', got {line[:60]!r}"
                )
            terms.append((source, target))
        return cls(tuple(terms))

    def targets_for(self, sentence: str) -> list[str]:
        """Target terms whose source term occurs in ``sentence`` (each once, in glossary order)."""
        text = normalize(sentence)
        found: list[str] = []
        for source, target in self.terms:
            if source in text and target not in found:
                found.append(target)
        return found
