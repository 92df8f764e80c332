"""``seq2seq serve``: a trained model behind an HTTP API (FastAPI on uvicorn) and a web page.

``POST /translate`` translates one sentence or a list, ``GET /health`` describes the model and the
queue, ``GET /metrics`` gives the counters in the Prometheus text format and ``GET /`` serves the
attention explorer (``seq2seq/serve/static/index.html``). Requests are decoded by a ``Batcher``: its
worker thread owns the model, so the event loop only waits on futures. Every error is a JSON body
``{"error": "…"}`` (plus ``limit`` when a configurable cap was exceeded); no endpoint reads or
writes a file named by a request.

Every request has a deadline, ``--request-timeout-s`` after its headers arrived (a client may ask
for less with ``timeout_ms``): reading its body, waiting in the queue and decoding all count. At
the deadline the answer is a 504 and a request still waiting leaves the queue; a client that
disconnects while its request waits takes it out of the queue too. The queue is bounded
(``QueueLimits``): past it a 503 with ``Retry-After`` at once, and ``/health`` says ``ready: false``
(status 503) for a load balancer to route around. So every request ends within its deadline, and
a stopped server (SIGTERM) exits within the deadline plus the batch it was decoding.
"""

import asyncio
import math
import time
from collections.abc import Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive

from seq2seq.decode.translator import Translator
from seq2seq.explain.routes import add_explain_routes
from seq2seq.serve.batcher import Batcher, BatchLimits, DeadlineExceeded, QueueFull, QueueLimits, Result
from seq2seq.serve.metrics import ServeMetrics
from seq2seq.serve.middleware import CLIENT_GONE, ApiKey, CountResponses, RequestBody, json_error
from seq2seq.text.stage import TextOptions

MAX_BEAM = 32  # the search keeps 2·beam candidates per sentence and step: beyond this it is a mistake


@dataclass(frozen=True)
class RequestLimits:
    """Caps on one request (the flags of ``seq2seq serve``): over a size cap is a 413 naming it; past
    ``timeout_s`` after it arrived, a 504 (408 while its body is still coming)."""

    max_body_bytes: int = 64 * 1024
    max_sentences: int = 64
    max_chars: int = 500
    timeout_s: float = 30.0


class TranslateRequest(BaseModel):
    """What to translate and how."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(min_length=1, description="a sentence, or a non-empty list of sentences")
    beam: int | None = Field(None, ge=1, le=MAX_BEAM, description="beam size; 1 = greedy; default: the model's")
    nbest: int = Field(1, ge=1, le=MAX_BEAM, description="how many translations per sentence (at most beam)")
    attention: bool = Field(False, description="include every layer's and head's attention weights")
    split: bool = Field(True, description="translate a text of several sentences sentence by sentence")
    force: bool = Field(False, description="translate text that looks like another language than the source")
    timeout_ms: int | None = Field(
        None, ge=1, description="answer within this many ms or give up with a 504 (at most the server's timeout)"
    )


class NBestEntry(BaseModel):
    translation: str
    score: float = Field(description="log-probability, divided by the length penalty under beam search")
    tokens: list[str] = Field(description="target pieces, without <start>/<end>")


class Attention(BaseModel):
    """Weights indexed [layer][head][query][key]; every query row sums to 1."""

    source_pieces: list[str] = Field(description="S labels: the source pieces and <end>")
    target_pieces: list[str] = Field(description="T labels: what each decoder position predicted (… <end>)")
    decoder_input_pieces: list[str] = Field(description="T labels of the decoder's input (<start> …)")
    encoder: list[list[list[list[float]]]] = Field(description="encoder self-attention [L][H][S][S]")
    decoder: list[list[list[list[float]]]] = Field(description="decoder self-attention [L][H][T][T], causal")
    cross: list[list[list[list[float]]]] = Field(description="cross-attention [L][H][T][S]")


class SentenceResult(BaseModel):
    source: str
    translation: str
    score: float = Field(description="log-probability, divided by the length penalty under beam search")
    tokens: list[str] = Field(description="target pieces, without <start>/<end>")
    nbest: list[NBestEntry] | None = Field(None, description="the n best, best first (when nbest > 1)")
    confidence: float | None = Field(None, description="mean log-probability per token (none: passed through)")
    warnings: list[str] = Field(description="what to check: a dropped number or name, a text passed through, …")
    attention: Attention | None = Field(None, description="when the request asked for it")


class TranslateResponse(BaseModel):
    results: list[SentenceResult]


class Vocabulary(BaseModel):
    source: int
    target: int


class Queue(BaseModel):
    """What waits for a batch, the caps past which a request is refused with a 503, and the sentences of
    the batch being gathered or decoded."""

    sentences: int
    tokens: int
    max_sentences: int
    max_tokens: int
    in_batch: int


class Health(BaseModel):
    status: str
    ready: bool = Field(description="false while the queue is full (the answer's status is then 503)")
    queue: Queue
    model: str
    step: int | None
    vocabulary: Vocabulary
    device: str
    precision: str


class Error(BaseModel):
    error: str = Field(description="what was wrong, in one line")
    limit: str | None = Field(None, description="the cap that was exceeded (its serve flag without --)")


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has closed its connection (the body was read before: only that can come)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _outcome(future: Future, receive: Receive, deadline: float) -> list[Result] | None:
    """The request's results; None if its client disconnected first; ``DeadlineExceeded`` at ``deadline``.

    Either way a request still waiting is cancelled, which takes it out of the queue; one already in a
    batch runs to the batch's end and its results are dropped.
    """
    answer = asyncio.wrap_future(future)
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        done, _ = await asyncio.wait(
            {answer, gone}, timeout=max(0.0, deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED
        )
    finally:  # also when this coroutine is cancelled (the server's shutdown grace ran out)
        gone.cancel()
        if not answer.done():
            future.cancel()  # out of the queue now, if it still waits there
            answer.cancel()
    if answer in done:
        return answer.result()
    if gone in done:
        return None
    raise DeadlineExceeded


def _is_unicode(text: str) -> bool:
    """False for strings JSON allows but UTF-8 cannot encode (lone surrogates such as "\\ud800")."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _rounded(weights: Any) -> list:
    """A tensor as nested lists of floats with 4 decimals: enough for a picture, and a much smaller response."""
    return weights.double().mul(1e4).round().div(1e4).tolist()


def _sentence_result(result: Result, nbest: int) -> SentenceResult:
    best = result.translation.best
    confidence = result.translation.confidence
    record = SentenceResult(
        source=result.translation.source,
        translation=best.text,
        score=round(best.score, 4),
        tokens=best.pieces,
        confidence=None if confidence is None else round(confidence, 4),
        warnings=result.translation.warnings,
    )
    if nbest > 1:
        record.nbest = [
            NBestEntry(translation=o.text, score=round(o.score, 4), tokens=o.pieces) for o in result.translation.outputs
        ]
    if result.attention is not None:
        att = result.attention
        record.attention = Attention(
            source_pieces=att.source_pieces,
            target_pieces=att.target_pieces,
            decoder_input_pieces=["<start>", *att.target_pieces[:-1]],
            encoder=_rounded(att.weights.encoder),
            decoder=_rounded(att.weights.decoder),
            cross=_rounded(att.weights.cross),
        )
    return record


def create_app(
    translator: Translator,
    model_name: str,
    step: int | None,
    limits: RequestLimits = RequestLimits(),
    batch_limits: BatchLimits | None = None,
    queue_limits: QueueLimits | None = None,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
) -> FastAPI:
    """The application; its batcher starts with the app's lifespan and drains when it ends.

    ``api_key``: required (``Authorization: Bearer KEY``) on every path but the page and /health.
    ``cors_origins``: the origins whose pages may call the API from a browser (none by default).
    """
    queue_limits = queue_limits or QueueLimits()
    page = resources.files("seq2seq.serve").joinpath("static/index.html").read_text(encoding="utf-8")
    metrics = ServeMetrics()
    state: dict[str, Batcher] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        state["batcher"] = Batcher(translator, batch_limits or BatchLimits(), queue_limits, metrics)
        try:
            yield
        finally:
            await asyncio.to_thread(state["batcher"].close)

    errors: dict[int | str, dict[str, Any]] = {
        401: {"model": Error, "description": "no or a wrong API key (when the server has one)"},
        408: {"model": Error, "description": "the body did not arrive within the request's deadline"},
        413: {"model": Error, "description": "a cap exceeded (body size, sentences, characters)"},
        422: {"model": Error, "description": "malformed JSON, a wrong type, an unknown field, a value out of range"},
        503: {"model": Error, "description": "the queue is full: retry after the Retry-After header's seconds"},
        504: {"model": Error, "description": "no translation within the request's deadline"},
    }
    # No /docs or /redoc: FastAPI's pages load their scripts from a CDN; /openapi.json stays.
    app = FastAPI(
        title="seq2seq",
        summary="Translate with a trained seq2seq model",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            return json_error(422, f"malformed JSON at character {first['loc'][-1]}: {first['ctx']['error']}")
        where = ".".join(str(part) for part in first["loc"][1:]) or "body"
        return json_error(422, f"{where}: {first['msg']}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return json_error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal(_request: Request, _exc: Exception) -> JSONResponse:
        return json_error(500, "internal error while translating (see the server's log)")

    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True, responses=errors)
    async def translate(body: TranslateRequest, request: Request) -> TranslateResponse | Response:
        sentences = [body.text] if isinstance(body.text, str) else body.text
        if len(sentences) > limits.max_sentences:
            return json_error(413, f"{len(sentences)} sentences; at most {limits.max_sentences}", "max-sentences")
        for index, sentence in enumerate(sentences):
            if not sentence.isascii() and not _is_unicode(sentence):
                return json_error(422, f"text: sentence {index} is not valid Unicode (a lone surrogate escape)")
            if len(sentence) > limits.max_chars:
                return json_error(
                    413, f"sentence {index}: {len(sentence)} characters; at most {limits.max_chars}", "max-chars"
                )
        if body.attention and not translator.capabilities.attention:
            return json_error(
                422, f"attention: the {translator.engine} engine has no attention weights (serve --engine torch)"
            )
        beam = translator.decode.beam if body.beam is None else body.beam
        if body.nbest > beam:
            return json_error(422, f"nbest {body.nbest} is more than beam {beam}")
        timeout_s, which = limits.timeout_s, "request-timeout-s"
        if body.timeout_ms is not None and body.timeout_ms / 1000 < timeout_s:
            timeout_s, which = body.timeout_ms / 1000, "timeout_ms"
        late = json_error(504, f"no translation within {timeout_s:g} s", which)
        deadline = request.state.arrived + timeout_s
        if time.monotonic() >= deadline:
            return late
        try:
            text = TextOptions(split=body.split, check_language=not body.force)
            future = state["batcher"].submit(sentences, beam, body.nbest, body.attention, deadline, text)
        except QueueFull as full:
            message = f"the server is busy ({full.limit} reached); retry in {full.retry_after_s} s"
            return json_error(503, message, full.limit, headers={"Retry-After": str(full.retry_after_s)})
        try:
            results = await _outcome(future, request.receive, deadline)
        except DeadlineExceeded:
            return late
        if results is None:
            return Response(status_code=CLIENT_GONE)  # nobody to send it to: only counted
        return TranslateResponse(results=[_sentence_result(r, body.nbest) for r in results])

    @app.get("/health", response_model=Health, responses={503: {"model": Health, "description": "the queue is full"}})
    async def health(response: Response) -> Health:
        tok = translator.tokenizer
        depth = state["batcher"].depth()
        response.status_code = 503 if depth.full else 200
        return Health(
            status="ok",
            ready=not depth.full,
            queue=Queue(
                sentences=depth.sentences,
                tokens=depth.tokens,
                max_sentences=queue_limits.max_sentences,
                max_tokens=queue_limits.max_tokens,
                in_batch=depth.in_batch,
            ),
            model=model_name,
            step=step,
            vocabulary=Vocabulary(source=tok.src_vocab_size, target=tok.tgt_vocab_size),
            device=str(translator.device),
            precision=translator.precision,
        )

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        """The server's counters in the Prometheus text format."""
        depth = state["batcher"].depth()
        text = metrics.render(
            queued_sentences=depth.sentences,
            queued_tokens=depth.tokens,
            in_batch=depth.in_batch,
            max_sentences=queue_limits.max_sentences,
            max_tokens=queue_limits.max_tokens,
        )
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    add_explain_routes(app, translator, limits.max_chars)
    # add_middleware wraps what was added before: the last one added is the outermost.
    if api_key is not None:
        app.add_middleware(ApiKey, key=api_key)
    app.add_middleware(RequestBody, max_bytes=limits.max_body_bytes, timeout_s=limits.timeout_s)
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(CountResponses, metrics=metrics)
    return app


def serve(app: FastAPI, host: str, port: int, timeout_s: float) -> None:
    """Run until SIGTERM/Ctrl-C: uvicorn then stops accepting, finishes the requests in flight, and
    re-raises the signal, so the process ends with that signal's exit status (Ctrl-C: KeyboardInterrupt
    out of here; ``uvicorn.run`` would swallow it and exit 0, hence its Server).

    Each request ends by its deadline (``timeout_s``), so the shutdown's grace is that plus a second;
    past it uvicorn cancels what is left, which only a request stuck past its own deadline could be.
    """
    import uvicorn

    grace = math.ceil(timeout_s) + 1
    config = uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=grace)
    uvicorn.Server(config).run()
