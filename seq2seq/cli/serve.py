"""``seq2seq serve``: a model behind the HTTP API and its page (the ``serve`` extra).

Bound to an address other machines can reach, the server needs an API key (``--api-key`` or, kept
out of the process list, the environment variable ``SEQ2SEQ_API_KEY``) and refuses to start
without one unless ``--insecure`` says that an open API is meant.
"""

import argparse
import ipaddress
import os
import sys

from seq2seq.cli.common import add_engine, add_models, default_run_dir, load_for, positive_float, positive_int
from seq2seq.cli.parser import VERBS
from seq2seq.decode.ctranslate2 import CTranslate2Translator
from seq2seq.decode.loader import model_step
from seq2seq.decode.translator import Translator
from seq2seq.errors import UserError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help=VERBS["serve"])
    add_models(p, several=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    add_engine(p)
    p.add_argument("--max-body-bytes", type=positive_int, default=64 * 1024, help="largest request body")
    p.add_argument("--max-sentences", type=positive_int, default=64, help="most sentences in one request")
    p.add_argument("--max-chars", type=positive_int, default=500, help="longest sentence, in characters")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long a batch waits for more requests")
    p.add_argument(
        "--batch-sentences", type=positive_int, help="most sentences per batch (default: decode.batch_sentences)"
    )
    p.add_argument("--batch-tokens", type=positive_int, default=4096, help="most source tokens per batch")
    p.add_argument(
        "--max-queue-sentences", type=positive_int, default=256, help="most sentences waiting; past it a 503"
    )
    p.add_argument("--max-queue-tokens", type=positive_int, default=16384, help="most source tokens waiting")
    p.add_argument(
        "--request-timeout-s",
        type=positive_float,
        default=30.0,
        help="a request's deadline from its arrival (body, queue, decoding); past it a 504 (default: %(default)s)",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get(API_KEY_ENV),
        help=f"require Authorization: Bearer KEY (default: ${API_KEY_ENV}, which ps does not show)",
    )
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback --host without an API key")
    p.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages from ORIGIN (e.g. https://example.org) call the API; repeatable (default: none)",
    )
    p.set_defaults(func=run)


API_KEY_ENV = "SEQ2SEQ_API_KEY"


def is_loopback(host: str) -> bool:
    """Whether ``host`` can be reached from this machine only (a loopback address, or localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _model_step(translator: Translator, model_path: str) -> int | None:
    """The training step of the model served (an exported model records the one it came from)."""
    if isinstance(translator, CTranslate2Translator):
        return translator.step
    return model_step(model_path)


def run(args: argparse.Namespace) -> None:
    try:
        from seq2seq.serve.app import RequestLimits, create_app, serve
        from seq2seq.serve.batcher import BatchLimits, QueueLimits
    except ImportError as err:
        raise UserError(f"serve needs {err.name}: pip install 'seq2seq[serve]'") from None
    if not args.api_key and not is_loopback(args.host) and not args.insecure:
        raise UserError(
            f"--host {args.host} is reachable from other machines: set {API_KEY_ENV} (or --api-key), "
            "or pass --insecure to serve without a key"
        )
    model_path = args.model or default_run_dir()
    translator = load_for(args, [model_path])
    app = create_app(
        translator,
        str(model_path),
        _model_step(translator, model_path),
        RequestLimits(args.max_body_bytes, args.max_sentences, args.max_chars, args.request_timeout_s),
        BatchLimits(args.batch_wait_ms, args.batch_sentences or translator.decode.batch_sentences, args.batch_tokens),
        QueueLimits(args.max_queue_sentences, args.max_queue_tokens),
        api_key=args.api_key or None,
        cors_origins=args.cors_origin,
    )
    try:
        serve(app, args.host, args.port, args.request_timeout_s)
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has finished the requests in flight
        sys.exit(130)
