"""What several verbs share: the options declared once, finding and loading a model, and reading the
sentence files a verb works on (the parser class is ``seq2seq.cli.parser``)."""

import argparse
from pathlib import Path

from seq2seq.config import DEFAULT_CONFIG, load_config
from seq2seq.data.corpus import read_lines, split_lines
from seq2seq.decode.loader import ENGINES, engine_class, engine_device, load_translator
from seq2seq.decode.translator import Translator
from seq2seq.device import DECODE_PRECISIONS
from seq2seq.errors import UserError


def _int_from(text: str, least: int) -> int:
    """``text`` as an integer of at least ``least``, else argparse's error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be >= {least}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_from(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_from(text, 0)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError("must be a finite number > 0")
    return value


def default_run_dir() -> str:
    """The run directory of the default recipe, for translate/evaluate."""
    return load_config(DEFAULT_CONFIG).train.run_dir


def add_config(p: argparse.ArgumentParser) -> None:
    """--config and --set SECTION.KEY=VALUE: the run a verb works on (train, prepare)."""
    p.add_argument(
        "--config", default=DEFAULT_CONFIG, help="a YAML file, or a packaged recipe's name (seq2seq recipes lists them)"
    )
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override one config key")


def add_device(p: argparse.ArgumentParser, default: str | None = "auto") -> None:
    p.add_argument(
        "--device",
        default=default,
        help="auto (CUDA when present, else an Apple GPU, else the CPU), cpu, cuda, cuda:N or mps"
        + ("" if default else "; default: train.device of the config"),
    )


def add_models(p: argparse.ArgumentParser, several: bool = True) -> None:
    if several:
        p.add_argument(
            "--model",
            action="append",
            help="run directory, checkpoint file or local MarianMT directory (default: the zh-en recipe's run "
            "directory); several: an ensemble averaging their log-probabilities",
        )
    else:
        p.add_argument(
            "--model",
            help="run directory, checkpoint file or local MarianMT directory (default: the zh-en recipe's run "
            "directory)",
        )


def add_engine(p: argparse.ArgumentParser) -> None:
    """--engine, --precision, --device and --set decode.KEY=VALUE: how a trained model is run."""
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="torch",
        help="torch: our decoder on a run directory; ctranslate2: a directory from `seq2seq export`",
    )
    p.add_argument(
        "--precision",
        choices=DECODE_PRECISIONS,
        default="auto",
        help="decoding precision; auto: bf16 where the CPU/GPU computes it natively, else float32",
    )
    add_device(p)
    p.add_argument(
        "--threads",
        type=non_negative_int,
        default=0,
        help="CPU threads per batch, one batch at a time; default 0: one thread per batch and one batch per core "
        "this process may use (docs/performance.md#threads)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="decode.KEY=VALUE",
        help="override a decoding setting of the model's config, e.g. decode.length_penalty=0.6",
    )


def require_features(args: argparse.Namespace, **flags: tuple[bool, str]) -> None:
    """Before loading anything: each option given (flag name -> (given, capability)) that the --engine
    cannot do is a one-line error naming the option and the engine."""
    engine = engine_class(args.engine)
    for flag, (given, feature) in flags.items():
        if given and feature in engine.capabilities.missing(**{feature: True}):
            option = "--" + flag.replace("_", "-")
            raise UserError(f"{option} needs {feature}, which the {engine.engine} engine lacks; use --engine torch")


def model_paths(args: argparse.Namespace) -> list[str]:
    """The --model paths given, or the default recipe's run directory."""
    return args.model or [default_run_dir()]


def load_for(args: argparse.Namespace, paths: list[str]) -> Translator:
    """The translator of ``--engine`` in ``--precision`` on ``--device`` (CTranslate2 runs on the CPU:
    ``auto`` means cpu there) with ``--threads`` (``seq2seq.decode.threads``) for ``paths`` (several: an ensemble)."""
    device = engine_device(args.engine, args.device)
    return load_translator(paths, device, args.set, args.precision, args.engine, args.threads)


def read_inputs(args: argparse.Namespace) -> list[str] | None:
    """The sentences of the arguments or of ``-i FILE``; None when they are to come from stdin."""
    if args.sentences:
        return args.sentences
    if args.input:
        path = Path(args.input)
        if not path.is_file():
            raise UserError(f"-i {path}: file not found")
        return split_lines(path.read_bytes(), f"-i {path}")
    return None


def run_directory(run: str | None) -> Path:
    """The run directory of a --model (a run directory, or a checkpoint file in one); None: the recipe's."""
    run_dir = Path(run or default_run_dir())
    return run_dir if run_dir.is_dir() else run_dir.parent


def run_files(args: argparse.Namespace, run: str | None) -> tuple[Path, Path]:
    """The source and reference files: --src/--ref, else the run directory's test split."""
    run_dir = run_directory(run)
    src = Path(args.src) if args.src else run_dir / "test.src"
    ref = Path(args.ref) if args.ref else run_dir / "test.tgt"
    return src, ref


def read_aligned(src_path: Path, ref_path: Path) -> tuple[list[str], list[str]]:
    """Sources and references, which must have as many lines."""
    sources, references = read_lines(src_path, "--src"), read_lines(ref_path, "--ref")
    if len(sources) != len(references):
        raise UserError(f"{src_path} has {len(sources)} lines but {ref_path} has {len(references)}")
    return sources, references
