"""The report over HTTP, for ``seq2seq serve`` (FastAPI, the ``serve`` extra): ``GET /explain``
(the page, with a form; ``?text=&ref=&layer=&head=`` fill it) and ``GET /explain.json`` (the
report itself), both from ``seq2seq.explain.report``.

Building a report records tensors by changing the model's attention and Add & Norm modules for
the duration (``seq2seq.explain.probe``), while the server's batcher may be translating with the
same model in its own thread; so reports are built on a private copy of the model, made at the
first request, one report at a time, in a worker thread that leaves the event loop free. Errors
are JSON bodies ``{"error": "…"}`` like every error of the server: a one-line ``UserError`` (a
layer out of range, an engine without tensors) is a 422, a sentence over ``max_chars`` a 413.
"""

import asyncio
import copy
import threading

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from seq2seq.decode.translator import Translator
from seq2seq.errors import UserError
from seq2seq.explain.page import render_page
from seq2seq.explain.report import explain


def add_explain_routes(app: FastAPI, translator: Translator, max_chars: int) -> None:
    """Register ``GET /explain`` and ``GET /explain.json`` on ``app``; sentences of at most ``max_chars``."""
    lock = threading.Lock()
    private: list[Translator] = []  # the translator with its own copy of the model, once made

    def build(text: str, ref: str | None, layer: int, head: int) -> dict:
        translator.require(explain=True)
        with lock:
            if not private:
                own = copy.copy(translator)
                own.model = copy.deepcopy(translator.model)
                private.append(own)
            return explain(private[0], text, ref, layer, head)

    async def report_or_error(text: str, ref: str | None, layer: int, head: int) -> dict | JSONResponse:
        if len(text) > max_chars:
            message = f"text: {len(text)} characters; at most {max_chars}"
            return JSONResponse({"error": message, "limit": "max-chars"}, status_code=413)
        try:
            return await asyncio.to_thread(build, text, ref or None, layer, head)
        except UserError as err:
            return JSONResponse({"error": str(err)}, status_code=422)

    @app.get("/explain", response_class=HTMLResponse, response_model=None, include_in_schema=False)
    async def explain_page(
        text: str | None = None, ref: str | None = None, layer: int = 0, head: int = 0
    ) -> HTMLResponse | JSONResponse:
        if not text:
            return HTMLResponse(render_page(None, served=True))
        report = await report_or_error(text, ref, layer, head)
        return report if isinstance(report, JSONResponse) else HTMLResponse(render_page(report, served=True))

    # Out of the OpenAPI schema, like the page: the schema describes the translation API.
    @app.get("/explain.json", response_model=None, include_in_schema=False)
    async def explain_json(text: str, ref: str | None = None, layer: int = 0, head: int = 0) -> JSONResponse:
        """The report of one sentence: what the page at /explain draws."""
        report = await report_or_error(text, ref, layer, head)
        return report if isinstance(report, JSONResponse) else JSONResponse(report)
