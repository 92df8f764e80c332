"""seq2seq.cli.streaming and ``translate`` without sentences: on a pipe each chunk of lines is translated
and flushed as it arrives (a line's translation can be read before stdin is closed; one line out
per line in, in order); on a terminal it prompts and translates every entered line until EOF.
"""

import os
import pty
import queue
import subprocess
import sys
import threading
import time

import pytest
from conftest import CLI_ENV, REPO, one_line_error, run_cli

from seq2seq.cli.streaming import stream_chunks
from seq2seq.errors import UserError

LINES = ["我们去散步。", "", "今天天气很好。"]


def _line_reader(stream) -> queue.Queue:
    """A queue receiving the lines of ``stream`` as they come (so a test can wait with a timeout)."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, ""):
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _translate(*args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "seq2seq", "translate", "--device", "cpu", "--beam", "2", *args],
        cwd=REPO,
        env=CLI_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


@pytest.fixture(scope="module")
def expected(toy_run) -> list[str]:
    """The translations of LINES given as arguments, for comparison."""
    result = run_cli("translate", "--model", str(toy_run), "--device", "cpu", "--beam", "2", *LINES)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0]  # a non-empty translation: the comparisons below say something
    return result.stdout.splitlines()


def test_a_pipe_is_translated_line_by_line_before_it_is_closed(toy_run, expected):
    process = _translate("--model", str(toy_run), stdin=subprocess.PIPE)
    out = _line_reader(process.stdout)
    try:
        process.stdin.write(LINES[0] + "\n")
        process.stdin.flush()
        assert out.get(timeout=120) == expected[0] + "\n"  # stdin is still open
        process.stdin.write("".join(line + "\n" for line in LINES[1:]))
        process.stdin.close()
        rest = [out.get(timeout=120) for _ in LINES[1:]]
        assert out.get(timeout=120) is None
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    assert [line.rstrip("\n") for line in rest] == expected[1:]
    assert process.returncode == 0, process.stderr.read()


def test_a_terminal_gets_a_prompt_and_each_line_translated_until_eof(toy_run, expected):
    controller, terminal = pty.openpty()
    process = _translate("--model", str(toy_run), stdin=terminal)
    os.close(terminal)
    out = _line_reader(process.stdout)
    try:
        os.write(controller, (LINES[0] + "\n").encode())
        assert out.get(timeout=120) == expected[0] + "\n"
        os.write(controller, (LINES[2] + "\n").encode())
        assert out.get(timeout=120) == expected[2] + "\n"
        os.write(controller, b"\x04")  # Ctrl-D at the start of a line: end of input
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        os.close(controller)
    assert out.get(timeout=10) is None
    assert process.stderr.read().count("> ") == 3  # a prompt before each line and before Ctrl-D


def test_bad_chunk_size_is_a_user_error(toy_run):
    one_line_error(run_cli("translate", "--model", str(toy_run), "--chunk-lines", "0", stdin="你好\n"))


def _pipe_with(lines: list[bytes]):
    read, write = os.pipe()
    for line in lines:
        os.write(write, line)
    return os.fdopen(read, "rb"), write


def test_chunks_are_full_or_timed_out_and_keep_order():
    stream, write = _pipe_with([b"a\n", b"b\r\n", b"c\n"])
    chunks = stream_chunks(stream, max_lines=2, max_wait_s=1.0)
    assert next(chunks) == ["a", "b"]  # full: handed over without waiting
    start = time.monotonic()
    assert next(chunks) == ["c"]  # nothing follows: handed over max_wait_s after its first line
    assert 0.5 < time.monotonic() - start < 30
    os.write(write, b"d\n")
    os.close(write)
    assert list(chunks) == [["d"]]
    stream.close()


def test_a_bad_line_ends_the_stream_after_the_good_ones():
    stream, write = _pipe_with([b"ok\n", b"\xff\n", b"never\n"])
    os.close(write)
    chunks = stream_chunks(stream, max_lines=10, max_wait_s=0.5)
    assert next(chunks) == ["ok"]
    with pytest.raises(UserError, match="stdin line 2: not valid UTF-8"):
        next(chunks)
    stream.close()
