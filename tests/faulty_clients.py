"""Clients of ``seq2seq serve`` that misbehave on purpose, over raw sockets: malformed and oversized bodies,
slow trickles, clients that leave mid-body or right after sending; and the check of what each saw.

Shared by tests/system/test_serve_faults.py (a burst in CI) and scripts/soak/soak_serve.py (minutes of it,
outside CI). Every request goes on its own connection with ``Connection: close``, so the reply is read to the
connection's end: exactly one response, nothing after it.
"""

import json
import random
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

SENTENCES = ["我们去散步。", "他昨天去了北京。", "今天天气很好。", "我想喝一杯咖啡。", "你好。", "这本书是我的。"]
OVERSIZED = 600 * 1024  # the probe's body that once ended in a broken pipe


@dataclass
class Reply:
    """One HTTP response read to the end of its connection."""

    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Outcome:
    """What one client saw: a reply, nothing (it left on purpose), or an error."""

    kind: str
    sentence: str | None
    reply: Reply | None
    error: str | None = None


class ProtocolError(Exception):
    """Not exactly one well-framed HTTP response on the connection."""


def head(length: int | None, extra: str = "") -> bytes:
    """The request line and headers of ``POST /translate``: a ``Content-Length`` or (None) chunked."""
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    lines = ["POST /translate HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", "Connection: close"]
    return ("\r\n".join([*lines, framing, *([extra] if extra else [])]) + "\r\n\r\n").encode()


def chunked(body: bytes, size: int = 16384) -> bytes:
    """``body`` in chunked transfer coding."""
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def parse_reply(raw: bytes, seconds: float) -> Reply:
    """The one response in ``raw`` (all a connection carried); ProtocolError if there is not exactly one."""
    header_block, found, rest = raw.partition(b"\r\n\r\n")
    if not found:
        raise ProtocolError(f"no complete response ({len(raw)} bytes)")
    status_line, *lines = header_block.decode("latin-1").split("\r\n")
    version, status, *_ = status_line.split(" ", 2)
    if version != "HTTP/1.1":
        raise ProtocolError(f"not a response: {status_line!r}")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    if "content-length" in headers and len(rest) != int(headers["content-length"]):
        raise ProtocolError(f"{len(rest) - int(headers['content-length'])} bytes more than the response's length")
    return Reply(int(status), headers, rest, seconds)


def exchange(
    port: int, request: bytes, body: bytes, trickle_s: float = 0.0, leave_after: int | None = None, timeout: float = 60
) -> Reply | None:
    """Send ``request`` (the head) and ``body`` on a new loopback connection and read the reply.

    ``trickle_s``: spread the body over that many seconds in 20 pieces, stopping once the server has
    answered (as a client should). ``leave_after``: close after that many body bytes, reading nothing.
    """
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        if leave_after is not None:
            sock.sendall(body[:leave_after])
            return None
        if trickle_s > 0:
            step = max(1, len(body) // 20)
            for offset in range(0, len(body), step):
                if select.select([sock], [], [], 0)[0]:
                    break
                sock.sendall(body[offset : offset + step])
                time.sleep(trickle_s / 20)
        else:
            sock.sendall(body)
        raw = bytearray()
        while chunk := sock.recv(65536):
            raw += chunk
    return parse_reply(bytes(raw), time.perf_counter() - start)


def translate_body(sentence: str, **fields) -> bytes:
    return json.dumps({"text": sentence, "beam": 4, **fields}, ensure_ascii=False).encode()


# What each kind of client sends, and the statuses it may get (None: it leaves, so no reply is read).
ALLOWED: dict[str, set[int] | None] = {
    "translate": {200, 503, 504},
    "translate-deadline": {200, 503, 504},
    "malformed-json": {422},
    "wrong-type": {422},
    "oversized-declared": {413},
    "oversized-chunked": {413},
    "trickle": {200, 503, 504},
    "trickle-past-deadline": {408},
    "leave-mid-body": None,
    "leave-after-request": None,
}


def client(kind: str, port: int, sentence: str, rng: random.Random, timeout_s: float) -> Outcome:
    """One request of ``kind`` about ``sentence``; ``timeout_s``: the server's request timeout."""
    body = translate_body(sentence)
    calls: dict[str, Callable[[], Reply | None]] = {
        "translate": lambda: exchange(port, head(len(body)), body),
        "translate-deadline": lambda: exchange(
            port, *_framed(translate_body(sentence, timeout_ms=rng.randint(20, 200)))
        ),
        "malformed-json": lambda: exchange(port, head(len(body) - 2), body[:-2]),
        "wrong-type": lambda: exchange(port, *_framed(b'{"text": 5}')),
        "oversized-declared": lambda: exchange(port, *_framed(_oversized())),
        "oversized-chunked": lambda: exchange(port, head(None), chunked(_oversized())),
        "trickle": lambda: exchange(port, head(len(body)), body, trickle_s=rng.uniform(0.5, 1.5)),
        "trickle-past-deadline": lambda: exchange(port, head(len(body)), body, trickle_s=timeout_s + 2),
        "leave-mid-body": lambda: exchange(port, head(len(body)), body, leave_after=len(body) // 2),
        "leave-after-request": lambda: exchange(port, head(len(body)), body, leave_after=len(body)),
    }
    try:
        return Outcome(kind, sentence, calls[kind]())
    except (OSError, ProtocolError) as err:
        return Outcome(kind, sentence, None, f"{type(err).__name__}: {err}")


def _framed(body: bytes) -> tuple[bytes, bytes]:
    return head(len(body)), body


def _oversized() -> bytes:
    return b'{"text": "' + b"a" * OVERSIZED + b'"}'


def problems(outcome: Outcome) -> list[str]:
    """What is wrong with one client's outcome (nothing, for a good server).

    A client still trickling when its 408 comes may see a reset instead: the server closes after the
    408, and a byte the client sends after that close (it checks for an answer before each piece, but
    the answer can come between the check and the send) makes the kernel answer with a reset, which
    discards the 408 unread. That is TCP's, not the server's; only this kind may see it.
    """
    allowed = ALLOWED[outcome.kind]
    if outcome.kind == "trickle-past-deadline" and outcome.error and outcome.error.startswith("ConnectionResetError"):
        return []
    if outcome.error is not None:
        return [f"{outcome.kind}: {outcome.error}"]
    if allowed is None:
        return []
    reply = outcome.reply
    if reply is None or reply.status not in allowed:
        return [f"{outcome.kind}: status {reply and reply.status}, expected one of {sorted(allowed)}"]
    found = []
    if reply.status != 200 and not isinstance(reply.json().get("error"), str):
        found.append(f"{outcome.kind}: a {reply.status} without a JSON error")
    if reply.status == 503 and not reply.headers.get("retry-after", "").isdigit():
        found.append(f"{outcome.kind}: a 503 without Retry-After")
    if reply.status == 200 and [r["source"] for r in reply.json()["results"]] != [outcome.sentence]:
        found.append(f"{outcome.kind}: a 200 that answers another request")
    return found


WEIGHTS = {
    "translate": 60,
    "translate-deadline": 10,
    "malformed-json": 4,
    "wrong-type": 4,
    "oversized-declared": 2,
    "oversized-chunked": 2,
    "trickle": 6,
    "trickle-past-deadline": 1,
    "leave-mid-body": 5,
    "leave-after-request": 6,
}
