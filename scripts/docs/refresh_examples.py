"""Regenerate the example outputs of the README and the docs from one model, so that no two disagree.

    python scripts/docs/refresh_examples.py --model runs/zh-en-b2048 README.md docs/*.md
    python scripts/docs/refresh_examples.py --model runs/zh-en-b2048 --check README.md docs/*.md

An example is a fenced block right after the marker ``<!-- example -->``. Its ``$ `` lines are the
commands (a line ending in ``\\`` continues on the next); everything else in it is output, and is
replaced by what the commands print. The commands of one block run in order, as one bash script, in
a fresh directory where ``runs/zh-en`` is ``--model`` (and ``runs/NAME`` each ``--run NAME=PATH``),
so what the block shows is what ran: the default ``--model`` of ``translate``/``evaluate`` is that
directory, and files one command writes (``terms.tsv``) are there for the next. ``python`` is this
interpreter and ``seq2seq`` its ``python -m seq2seq``; ``serve`` gets a free loopback port, and ``curl`` reaches it at
``localhost:8000`` (retrying while the server loads), so a block may start a server with ``&``.
Only stdout is shown: a command that means to show stderr says ``2>&1``. A command that fails is an
error naming the file and line, not an example.

The file is rewritten atomically, once, after all of its blocks ran. ``--check`` rewrites nothing and
exits 1 when a block's output differs; timings (``in 5.8s (172.7 sentences/s)``) are not compared,
since they differ on every run.
"""

import argparse
import contextlib
import difflib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from seq2seq.atomic import write_text_atomically
from seq2seq.errors import UserError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # benchlib: what the scripts share
from benchlib import free_port  # noqa: E402

MARKER = "<!-- example -->"
FENCE = re.compile(r"^(```+|~~~+)(\S*)\s*$")
PROMPT = "$ "
SEPARATOR = "<<<refresh-examples {index} {status}>>>"
VOLATILE = re.compile(r"in \d+(\.\d+)?s \(\d+(\.\d+)? sentences/s\)")
BLOCK_TIMEOUT_S = 900  # one block: the longest translates the test split twice on one core
PRELUDE = """\
python() {{ {python} "$@"; }}
seq2seq() {{
    if [ "$1" = serve ]; then {python} -m seq2seq "$@" --port {port}; else {python} -m seq2seq "$@"; fi
}}
curl() {{ command curl --retry-connrefused --retry 300 --retry-delay 1 "${{@//localhost:8000/127.0.0.1:{port}}}"; }}
"""


@dataclass
class Block:
    """One marked example: where its fence opens (0-based line), its closing line, and its commands."""

    start: int
    end: int
    fence: str
    commands: list[str]


def find_blocks(lines: list[str], path: Path) -> list[Block]:
    """The marked examples of a markdown file, each checked for a fence and at least one command."""
    blocks = []
    for number, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        opening = number + 1
        match = FENCE.match(lines[opening]) if opening < len(lines) else None
        if match is None:
            raise UserError(f"{path}:{number + 1}: {MARKER} must be followed by a fenced block")
        end = next((i for i in range(opening + 1, len(lines)) if lines[i].strip() == match.group(1)), None)
        if end is None:
            raise UserError(f"{path}:{opening + 1}: the example's fence is never closed")
        commands = _commands(lines[opening + 1 : end])
        if not commands:
            raise UserError(f"{path}:{opening + 1}: the example has no '$ ' command line")
        blocks.append(Block(opening, end, lines[opening], commands))
    return blocks


def _commands(body: list[str]) -> list[str]:
    """The ``$ `` lines of a block, continuation lines joined to theirs (kept as written)."""
    commands: list[str] = []
    continuing = False
    for line in body:
        if continuing:
            commands[-1] += "\n" + line
        elif line.startswith(PROMPT):
            commands.append(line[len(PROMPT) :])
        else:
            continue
        continuing = line.endswith("\\")
    return commands


def run_block(block: Block, runs: dict[str, Path], where: str) -> list[str]:
    """Each command's stdout, from one bash script run in a fresh directory holding ``runs/``.

    The script's output goes to files, not pipes, and its process group is killed when it ends: a
    server a block started with ``&`` holds no pipe open and does not outlive its block.
    """
    with tempfile.TemporaryDirectory(prefix="refresh-examples-") as work:
        (Path(work) / "runs").mkdir()
        for name, target in runs.items():
            (Path(work) / "runs" / name).symlink_to(target.resolve())
        script = PRELUDE.format(python=shlex.quote(sys.executable), port=free_port())
        for index, command in enumerate(block.commands):
            script += f"printf '\\n%s\\n' {shlex.quote(SEPARATOR.format(index=index, status='start'))}\n"
            script += f"{command}\n"
            script += f"printf '\\n%s\\n' \"{SEPARATOR.format(index=index, status='rc')} $?\"\n"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "COLUMNS": "100"}
        with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
            shell = subprocess.Popen(
                ["bash", "-c", script], cwd=work, env=env, stdout=stdout, stderr=stderr, start_new_session=True
            )
            try:
                shell.wait(timeout=BLOCK_TIMEOUT_S)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(shell.pid, signal.SIGTERM)
                shell.wait()
            stdout.seek(0)
            stderr.seek(0)
            return _split_outputs(stdout.read(), stderr.read(), block.commands, where)


def _split_outputs(stdout: str, stderr: str, commands: list[str], where: str) -> list[str]:
    outputs = []
    for index, command in enumerate(commands):
        start = f"\n{SEPARATOR.format(index=index, status='start')}\n"
        rc = re.search(rf"\n{re.escape(SEPARATOR.format(index=index, status='rc'))} (\d+)\n", stdout)
        if start not in stdout or rc is None:
            raise UserError(f"{where}: `{command}` did not run to its end; stderr: {stderr.strip()[-500:]}")
        text = stdout[stdout.index(start) + len(start) : rc.start()]
        if rc.group(1) != "0":
            raise UserError(f"{where}: `{command}` exited {rc.group(1)}; stderr: {stderr.strip()[-500:]}")
        outputs.append(text.rstrip("\n"))
    return outputs


def render(block: Block, outputs: list[str]) -> list[str]:
    """The block's new lines, fences included: each command as written, then what it printed."""
    lines = [block.fence]
    for command, output in zip(block.commands, outputs, strict=True):
        lines += (PROMPT + command).split("\n")
        if output:
            lines += output.split("\n")
    return [*lines, FENCE.match(block.fence).group(1)]


def comparable(lines: list[str]) -> list[str]:
    """The lines with their timings blanked: what ``--check`` compares."""
    return [VOLATILE.sub("in …s (… sentences/s)", line) for line in lines]


def refresh_file(path: Path, runs: dict[str, Path], check: bool) -> bool:
    """Run every example of ``path``; rewrite it (or, with ``check``, only report). True when it was current."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = find_blocks(lines, path)
    current = True
    for block in reversed(blocks):  # from the end, so that earlier line numbers stay valid
        where = f"{path}:{block.start + 1}"
        new = render(block, run_block(block, runs, where))
        old = lines[block.start : block.end + 1]
        if comparable(new) != comparable(old):
            current = False
            if check:
                diff = difflib.unified_diff(old, new, "as written", "as run", lineterm="", n=1)
                print(f"{where}: example differs\n" + "\n".join(diff))
        lines[block.start : block.end + 1] = new
    if not check and not current:
        write_text_atomically(path, "\n".join(lines))
    print(f"{path}: {len(blocks)} examples, {'current' if current else 'differ' if check else 'rewritten'}")
    return current


def _run_entry(text: str) -> tuple[str, Path]:
    name, sep, target = text.partition("=")
    if not sep or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"--run takes NAME=PATH, got {text!r}")
    return name, Path(target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="markdown files with marked examples")
    parser.add_argument("--model", type=Path, required=True, help="run directory the examples call runs/zh-en")
    parser.add_argument(
        "--run", type=_run_entry, action="append", default=[], help="NAME=PATH: another run, as runs/NAME"
    )
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when an example differs")
    args = parser.parse_args()
    runs = {"zh-en": args.model, **dict(args.run)}
    try:
        for name, target in runs.items():
            if not target.is_dir():
                raise UserError(f"runs/{name}: {target} is not a run directory")
        current = [refresh_file(path, runs, args.check) for path in args.files]
    except (UserError, subprocess.TimeoutExpired) as err:
        print(f"refresh_examples: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as err:
        print(f"refresh_examples: error: {err.filename}: {err.strerror}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(1 if args.check and not all(current) else 0)


if __name__ == "__main__":
    main()
