"""Stop signals during training: Ctrl-C and SIGTERM both end a run cleanly, never mid-update.

``seq2seq.train.trainer`` turns SIGTERM (``kill``, a job scheduler's stop) into the KeyboardInterrupt
that Ctrl-C raises, so one handler saves ``last.pt`` for both, and holds both back while an
optimizer update runs, so a checkpoint never holds half of one. A signal the process was
started ignoring (``nohup cmd &`` ignores Ctrl-C) stays ignored.
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def heeded_stops() -> tuple[signal.Signals, ...]:
    """Ctrl-C and SIGTERM, less any this process ignores; none outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return ()  # only the main thread may set signal handlers
    return tuple(stop for stop in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(stop) is not signal.SIG_IGN)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does (unless SIGTERM is ignored)."""
    if signal.SIGTERM not in heeded_stops():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def stop_deferred() -> Iterator[None]:
    """Hold back Ctrl-C and SIGTERM until the block ends, then raise KeyboardInterrupt.

    An ignored signal stays ignored: it must not stop training just because it arrived here.
    """
    caught: list[int] = []
    previous = {stop: signal.getsignal(stop) for stop in heeded_stops()}
    try:
        for stop in previous:
            signal.signal(stop, lambda signum, _frame: caught.append(signum))
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    if caught:
        raise KeyboardInterrupt


class StopRequest:
    """Set by Ctrl-C or SIGTERM inside ``stop_requests()``; the loop reads it at a step boundary."""

    def __init__(self) -> None:
        self.requested = False

    def _set(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True


@contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """Within the block Ctrl-C and SIGTERM only raise a flag (unless ignored), nothing is interrupted.

    For data-parallel training: an exception in the middle of a step could leave the other
    ranks waiting in a collective, so the ranks read their flags at the step boundary and stop
    together (``seq2seq.train.distributed``).
    """
    request = StopRequest()
    previous = {stop: signal.getsignal(stop) for stop in heeded_stops()}
    try:
        for stop in previous:
            signal.signal(stop, request._set)
        yield request
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
