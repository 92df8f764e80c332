"""The ASGI layers a request passes before the app, outermost first: ``CountResponses`` (every answer by
status, for /metrics), CORS when ``--cors-origin`` is given (Starlette's), ``RequestBody`` (the body's
size cap and read deadline) and ``ApiKey`` when a key is set; and ``json_error``, the one shape of
every error the server sends.

The body is read whole before anything answers, also an error. A server that answers before the
body is in and then closes the connection leaves the rest of the body unread in the kernel's
buffer; closing a socket with unread data makes the kernel send a reset, and a client still
sending (urllib sends ``Connection: close``, so uvicorn closes right after the answer) gets a
broken pipe instead of the answer. So an over-cap body is read on and dropped, up to
``DRAIN_BYTES`` and the request's deadline, before the 413, which then closes the connection
(nothing is left to read on it, and a body past the drain is not read further). Clients that send
``Expect: 100-continue`` (curl, for large bodies) get the 413 before sending any of it.
"""

import asyncio
import hmac
import time
from collections.abc import Mapping

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seq2seq.serve.metrics import ServeMetrics

DRAIN_BYTES = 4 * 1024 * 1024  # reading this much to drop it costs less than a client that never sees its 413
OPEN_PATHS = frozenset({"/", "/health"})  # no key needed: the static page and the load balancer's probe
CLIENT_GONE = 499  # the status counted for a request whose client left first (nginx's code); never sent


def json_error(
    status: int, message: str, limit: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """``{"error": message}`` (plus ``limit``, the serve flag of the cap exceeded) with ``status``."""
    body = {"error": message} if limit is None else {"error": message, "limit": limit}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


class CountResponses:
    """Counts every request by the status it was answered with (``CLIENT_GONE`` if none)."""

    def __init__(self, app: ASGIApp, metrics: ServeMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status: int | None = None

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        unanswered = CLIENT_GONE
        self.metrics.started()
        try:
            await self.app(scope, receive, counted)
        except Exception:
            unanswered = 500  # Starlette's error middleware, outside this one, answers it
            raise
        finally:
            self.metrics.finished(unanswered if status is None else status)


class RequestBody:
    """Reads the whole body before the app: over ``max_bytes`` is a 413, not in within ``timeout_s`` of the
    request's arrival a 408. Puts the arrival (``time.monotonic()``) in ``scope["state"]["arrived"]``: the
    request's deadline counts from it."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        arrived = time.monotonic()
        scope.setdefault("state", {})["arrived"] = arrived
        deadline = arrived + self.timeout_s
        too_big = json_error(
            413, f"request body over {self.max_bytes} bytes", "max-body-bytes", headers={"Connection": "close"}
        )
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            waiting = b"100-continue" in headers.get(b"expect", b"").lower()  # it sends nothing until told to
            if declared.isdigit() and int(declared) <= DRAIN_BYTES and not waiting:
                await _drain(receive, deadline, int(declared))
            return await too_big(scope, receive, send)
        body, more = bytearray(), True
        while more:  # chunked bodies declare no length: count as they come
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                text = f"request body not received within {self.timeout_s:g} s"
                late = json_error(408, text, "request-timeout-s", headers={"Connection": "close"})
                return await late(scope, receive, send)
            if message["type"] != "http.request":
                return  # the client left
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                if more:
                    await _drain(receive, deadline, DRAIN_BYTES - len(body))
                return await too_big(scope, receive, send)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


async def _drain(receive: Receive, deadline: float, budget: int) -> None:
    """Read and drop the rest of a body: until its end, ``budget`` bytes, or ``deadline``, whichever is first."""
    while budget > 0:
        try:
            message = await asyncio.wait_for(receive(), deadline - time.monotonic())
        except asyncio.TimeoutError:
            return
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        budget -= len(message.get("body", b""))


class ApiKey:
    """Every path but ``OPEN_PATHS`` needs ``Authorization: Bearer KEY``; otherwise 401.

    Compared with ``hmac.compare_digest``, whose time does not depend on where the strings differ, so
    the key cannot be found a byte at a time by timing the answers.
    """

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app, self.key = app, key.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key):
            return await self.app(scope, receive, send)
        denied = json_error(
            401,
            "missing or wrong API key: send the header Authorization: Bearer KEY",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await denied(scope, receive, send)
