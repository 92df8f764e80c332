"""``seq2seq export``: a trained model in another inference engine's format (CTranslate2, Hugging Face transformers)."""

import argparse

from seq2seq.cli.parser import VERBS
from seq2seq.errors import UserError
from seq2seq.export.ctranslate2 import QUANTIZATIONS, export_ctranslate2
from seq2seq.export.transformers import export_transformers


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help=VERBS["export"])
    p.add_argument("--model", help="run directory or checkpoint file")
    p.add_argument("path", nargs="?", metavar="MODEL", help="an alias of --model (seq2seq export RUN_DIR --out DIR)")
    p.add_argument(
        "--to",
        choices=["ctranslate2", "transformers"],
        default="ctranslate2",
        help="target format: a CTranslate2 model, or a MarianMT directory for Hugging Face transformers "
        "(the hf extra; default: %(default)s)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="float32",
        help="CTranslate2 weight type stored (int8 variants: int8 matmuls; the suffix is the type of everything "
        "else; default: %(default)s)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    if args.path and args.model and args.path != args.model:
        raise UserError(f"export: two models given ({args.path} and --model {args.model}); give one")
    model = args.model or args.path
    if not model:
        raise UserError("export: which model? give --model RUN_DIR (a run directory or checkpoint file)")
    if args.to == "transformers":
        if args.quantization != "float32":
            raise UserError("export --to transformers writes float32 weights; --quantization is CTranslate2's")
        out = export_transformers(model, args.out)
        print(f"exported {model} to {out} (MarianMT for transformers)")
        print(f"load it: MarianMTModel.from_pretrained('{out}'), MarianTokenizer.from_pretrained('{out}')")
        return
    out = export_ctranslate2(model, args.out, args.quantization)
    print(f"exported {model} to {out} ({args.quantization})")
    print(f'try: seq2seq translate --engine ctranslate2 --model {out} "今天天气很好"')
