"""``seq2seq serve``: a trained model behind an HTTP API (FastAPI on uvicorn) and a web page.

``POST /translate`` translates one sentence or a list, ``GET /health`` describes the model and
``GET /`` serves the attention explorer (``seq2seq/serve/static/index.html``). Requests are decoded by
a ``Batcher``: its worker thread owns the model, so the event loop only waits on futures. Every
error is a JSON body ``{"error": "…"}`` (plus ``limit`` when a configurable cap was exceeded);
no endpoint reads or writes a file named by a request.
"""

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seq2seq.decode.translator import Translator
from seq2seq.serve.batcher import Batcher, BatchLimits, Result

MAX_BEAM = 32  # the search keeps 2·beam candidates per sentence and step: beyond this it is a mistake


@dataclass(frozen=True)
class RequestLimits:
    """Caps on one request; over a cap is a 413 naming it (the flags of ``seq2seq serve``)."""

    max_body_bytes: int = 64 * 1024
    max_sentences: int = 64
    max_chars: int = 500


class TranslateRequest(BaseModel):
    """What to translate and how."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(min_length=1, description="a sentence, or a non-empty list of sentences")
    beam: int | None = Field(None, ge=1, le=MAX_BEAM, description="beam size; 1 = greedy; default: the model's")
    nbest: int = Field(1, ge=1, le=MAX_BEAM, description="how many translations per sentence (at most beam)")
    attention: bool = Field(False, description="include every layer's and head's attention weights")


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
    attention: Attention | None = Field(None, description="when the request asked for it")


class TranslateResponse(BaseModel):
    results: list[SentenceResult]


class Vocabulary(BaseModel):
    source: int
    target: int


class Health(BaseModel):
    status: str
    model: str
    step: int | None
    vocabulary: Vocabulary
    device: str
    precision: str


class Error(BaseModel):
    error: str = Field(description="what was wrong, in one line")
    limit: str | None = Field(None, description="the cap that was exceeded (its serve flag without --)")


def _error(status: int, message: str, limit: str | None = None) -> JSONResponse:
    return JSONResponse(Error(error=message, limit=limit).model_dump(exclude_none=True), status_code=status)


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 before the app parses it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_big = _error(413, f"request body over {self.max_bytes} bytes", "max-body-bytes")
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            return await too_big(scope, receive, send)
        body, more = b"", True
        while more:  # read it all (chunked bodies declare no length) while counting
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                return await too_big(scope, receive, send)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


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
    record = SentenceResult(
        source=result.translation.source, translation=best.text, score=round(best.score, 4), tokens=best.pieces
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
    step: int,
    limits: RequestLimits = RequestLimits(),
    batch_limits: BatchLimits | None = None,
) -> FastAPI:
    """The application; its batcher starts with the app's lifespan and drains when it ends."""
    page = resources.files("seq2seq.serve").joinpath("static/index.html").read_text(encoding="utf-8")
    state: dict[str, Batcher] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        state["batcher"] = Batcher(translator, batch_limits or BatchLimits())
        try:
            yield
        finally:
            await asyncio.to_thread(state["batcher"].close)

    errors: dict[int | str, dict[str, Any]] = {
        413: {"model": Error, "description": "a cap exceeded (body size, sentences, characters)"},
        422: {"model": Error, "description": "malformed JSON, a wrong type, an unknown field, a value out of range"},
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
            return _error(422, f"malformed JSON at character {first['loc'][-1]}: {first['ctx']['error']}")
        where = ".".join(str(part) for part in first["loc"][1:]) or "body"
        return _error(422, f"{where}: {first['msg']}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal(_request: Request, _exc: Exception) -> JSONResponse:
        return _error(500, "internal error while translating (see the server's log)")

    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True, responses=errors)
    async def translate(request: TranslateRequest) -> TranslateResponse | JSONResponse:
        sentences = [request.text] if isinstance(request.text, str) else request.text
        if len(sentences) > limits.max_sentences:
            return _error(413, f"{len(sentences)} sentences; at most {limits.max_sentences}", "max-sentences")
        for index, sentence in enumerate(sentences):
            if not sentence.isascii() and not _is_unicode(sentence):
                return _error(422, f"text: sentence {index} is not valid Unicode (a lone surrogate escape)")
            if len(sentence) > limits.max_chars:
                return _error(
                    413, f"sentence {index}: {len(sentence)} characters; at most {limits.max_chars}", "max-chars"
                )
        if request.attention and not translator.capabilities.attention:
            return _error(
                422, f"attention: the {translator.engine} engine has no attention weights (serve --engine torch)"
            )
        beam = translator.decode.beam if request.beam is None else request.beam
        if request.nbest > beam:
            return _error(422, f"nbest {request.nbest} is more than beam {beam}")
        future = state["batcher"].submit(sentences, beam, request.nbest, request.attention)
        results = await asyncio.wrap_future(future)
        return TranslateResponse(results=[_sentence_result(r, request.nbest) for r in results])

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        tok = translator.tokenizer
        return Health(
            status="ok",
            model=model_name,
            step=step,
            vocabulary=Vocabulary(source=tok.src_vocab_size, target=tok.tgt_vocab_size),
            device=str(translator.device),
            precision=translator.precision,
        )

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    return app


def serve(app: FastAPI, host: str, port: int) -> None:
    """Run until SIGTERM/Ctrl-C: uvicorn then stops accepting, finishes the requests in flight, and
    re-raises the signal, so the process ends with that signal's exit status."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=None)
