"""Input lines for ``seq2seq translate`` as they arrive: in chunks from a pipe (so it works as a
filter on an endless stream) or one at a time after a prompt on a terminal.

A line is one sentence: only its line ending is removed, so a line in gives exactly one line out.
"""

import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import BinaryIO, TextIO

from seq2seq.data.corpus import decode_line
from seq2seq.errors import UserError

_EOF = object()


def _read_into(stream: BinaryIO, lines: queue.Queue) -> None:
    """Reader thread: every line of ``stream`` into ``lines``, then _EOF (or a UserError).

    Lines are decoded one by one, so a bad byte is reported at its own line, after the good ones.
    """
    for number, raw in enumerate(stream, start=1):
        try:
            lines.put(decode_line(raw, "stdin", number))
        except UserError as error:
            lines.put(error)
            return
    lines.put(_EOF)


def stream_chunks(stream: BinaryIO, max_lines: int, max_wait_s: float) -> Iterator[list[str]]:
    """Lines of ``stream`` in order, as chunks of at most ``max_lines``.

    A chunk starts with the next line to arrive and is handed over once it is full or
    ``max_wait_s`` after that first line, whichever comes first: a steady stream is batched,
    a slow one is not kept waiting.
    """
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_into, args=(stream, lines), daemon=True).start()
    done = False
    while not done:
        item = lines.get()
        chunk: list[str] = []
        deadline = time.monotonic() + max_wait_s
        while True:
            if item is _EOF:
                done = True
                break
            if isinstance(item, UserError):
                if chunk:
                    yield chunk
                raise item
            chunk.append(item)
            remaining = deadline - time.monotonic()
            if len(chunk) >= max_lines or remaining <= 0:
                break
            try:
                item = lines.get(timeout=remaining)
            except queue.Empty:
                break
        if chunk:
            yield chunk


def prompted_lines(stream: TextIO = sys.stdin, prompt: str = "> ") -> Iterator[list[str]]:
    """Interactive use: prompt on stderr (stdout holds only translations), one line per chunk, until EOF."""
    while True:
        print(prompt, end="", file=sys.stderr, flush=True)
        line = stream.readline()
        if not line:
            print(file=sys.stderr)
            return
        yield [line.rstrip("\r\n")]
