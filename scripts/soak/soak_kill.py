"""Kill -9 soak: train the toy config, SIGKILL the trainer at random moments, resume, and check
that nothing was lost or damaged.

One uninterrupted run is the reference. A second run in another directory is killed ``--kills``
times at seeded random points of its progress (start-up, steps, validation, checkpoint writes, the
final averaging), resumed each time with the same command, then left to finish. A point is a step
the trainer reports (each optimizer update is sent to the harness through a pipe) and a random part
of the way to the next report (as long as that took in the reference run, times the pace the run
keeps now): the kills are spread over the run by its progress, not by the clock, so a slower or
busier machine moves them within a step but never piles them up in start-up. Checked after every
kill: every checkpoint in the run directory loads and verifies, config.yaml and metrics.jsonl parse.
Checked at the end: last.pt and best.pt equal the reference's bit for bit (weights, optimizer, RNG,
sampler, step), metrics.jsonl has the reference's records, step for step, no temporary file is left.

The trainers run in children forked from a server that has imported torch once
(``multiprocessing``'s forkserver), so a kill costs a fraction of a second, not an interpreter
start; each child runs ``seq2seq.cli.main``, the ``seq2seq train`` command itself. The CI test
(tests/system/test_fault_kill.py) runs this script with fewer kills.

    python scripts/soak/soak_kill.py                        # 100 kills, 200 steps
    python scripts/soak/soak_kill.py --kills 30 --steps 60 --seed 7 --out /tmp/soak.json
"""

import argparse
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import torch
import yaml
from torch.optim.optimizer import register_optimizer_step_post_hook

from seq2seq.checkpoint import load_checkpoint

# Fields that differ between two runs of the same training by their nature: the clock.
TIMING = {"minutes", "tokens_per_s", "elapsed"}
# Seconds a trainer may take from one step report to the next before the soak calls it stuck: far above
# a toy step on a loaded machine, far below the CI test's own limit.
STEP_LIMIT = 300.0


def prepare_argv(cache_dir: Path) -> list[str]:
    """``seq2seq prepare`` on the toy config: the data cache that ``train_argv``'s runs read, built once."""
    return ["prepare", "--config", "toy", "--set", f"data.cache_dir={cache_dir}"]


def train_argv(run_dir: Path, cache_dir: Path, steps: int, eval_every: int) -> list[str]:
    """``seq2seq train`` on the toy config: ``steps`` steps (no time budget), one thread, a checkpoint
    (and an averaging snapshot) every ``eval_every`` steps."""
    settings = [
        f"train.run_dir={run_dir}",
        f"data.cache_dir={cache_dir}",
        f"train.max_steps={steps}",
        f"train.eval_every={eval_every}",
        "train.threads=1",
        "train.eval_sentences=2",
        "train.average_last=2",
        "train.best_metric=loss",  # improves at every early validation: best.pt is written each time
    ]
    return ["train", "--config", "toy", "--device", "cpu"] + [arg for setting in settings for arg in ("--set", setting)]


def save_key(state: dict, path: Path) -> str:
    """A checkpoint write named by file and training step, e.g. ``last.pt@8`` (the same in every run)."""
    step = state["progress"]["step"] if "progress" in state else state.get("step", "-")
    return f"{path.name}@{step}"


def _child(argv: list[str], log: str, fault: tuple[str, str] | None, reports: Connection | None) -> None:
    """A forked trainer: output appended to ``log``, exit status as ``seq2seq`` gives it; with ``reports``,
    one message there after each optimizer update (a training step: float32 skips none).

    ``fault`` = (mode, key): ``record`` appends the key of every checkpoint write to the file ``key``;
    ``before``/``during``/``after`` SIGKILL the process before the write ``key`` starts, after its
    temporary file is written but before the rename, or right after it.
    """
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from tqdm import tqdm

    import seq2seq.train.trainer
    from seq2seq.cli import main

    tqdm.set_lock(threading.RLock())  # not tqdm's default multiprocessing lock, which a SIGKILL would leak
    if reports is not None:  # torch's global hook, so the trainer runs unchanged; one short write per message
        register_optimizer_step_post_hook(lambda *_: reports.send_bytes(b"s"))
    if fault is not None:
        mode, target = fault
        save = seq2seq.train.trainer.save_checkpoint

        def faulty_save(state: dict, path: Path) -> None:
            key = save_key(state, path)
            if mode == "record":
                with open(target, "a", encoding="utf-8") as handle:
                    handle.write(key + "\n")
            elif key == target and mode == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            elif key == target and mode == "during":
                os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL)  # the rename that ends the write
            save(state, path)
            if key == target and mode == "after":
                os.kill(os.getpid(), signal.SIGKILL)

        seq2seq.train.trainer.save_checkpoint = faulty_save
    main(argv)


@dataclass
class Session:
    """A started trainer and the pipe end its step reports arrive at."""

    process: multiprocessing.Process
    reports: Connection
    step: int  # the last step it reported (at the start: the step it resumes from)
    marks: list[float]  # perf_counter() at the start, then at each report

    def last_span(self) -> float:
        """Seconds from the report before the last one (or the start) to the last one."""
        return self.marks[-1] - self.marks[-2]

    def wait_for_step(self, step: int) -> bool:
        """Take reports until ``step`` is reached (True) or the trainer has ended (False)."""
        while self.step < step:
            ready = multiprocessing.connection.wait([self.reports, self.process.sentinel], STEP_LIMIT)
            if not ready:
                raise RuntimeError(f"no step reported in {STEP_LIMIT:.0f} s after step {self.step}")
            if self.reports not in ready:
                return False
            try:
                self.reports.recv_bytes()
            except EOFError:  # the trainer ended and closed its end
                return False
            self.step += 1
            self.marks.append(time.perf_counter())
        return True

    def kill(self) -> None:
        """SIGKILL the trainer, then take the reports it sent before it died."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join()
        while self.reports.poll(0):
            try:
                self.reports.recv_bytes()
            except EOFError:
                break
            self.step += 1


class Launcher:
    """Starts trainers as children of a forkserver that has seq2seq (and torch) imported."""

    def __init__(self) -> None:
        self.context = multiprocessing.get_context("forkserver")
        # torch.optim imports torch._dynamo when the first optimizer is built: seconds, paid once here.
        self.context.set_forkserver_preload(["seq2seq.cli.train", "torch._dynamo"])  # the verb the children run
        warm_up = self.context.Process(target=time.sleep, args=(0,))  # start the server (and its imports) now,
        warm_up.start()  # so that no trainer's delay includes them
        warm_up.join()

    def start(self, argv: list[str], log: Path, fault: tuple[str, str] | None = None) -> multiprocessing.Process:
        process = self.context.Process(target=_child, args=(argv, str(log), fault, None), daemon=True)
        process.start()
        return process

    def start_reporting(self, argv: list[str], log: Path, step: int, fault: tuple[str, str] | None = None) -> Session:
        """A trainer that resumes from ``step`` and reports each step it makes (read them: the pipe's buffer
        holds thousands of reports, not a long run's)."""
        receiver, sender = self.context.Pipe(duplex=False)
        process = self.context.Process(target=_child, args=(argv, str(log), fault, sender), daemon=True)
        process.start()
        sender.close()  # the child has its copy: the pipe reads as ended once the child is gone
        return Session(process, receiver, step, [time.perf_counter()])


def check_intact(run_dir: Path) -> int:
    """Every file a trainer leaves is whole: checkpoints load and verify, config.yaml and metrics.jsonl
    parse (a torn last metrics line is the one thing allowed: the next start drops it). Returns
    last.pt's step (0 if there is none yet)."""
    for path in sorted(run_dir.glob("*.pt")):
        load_checkpoint(path)  # raises on a partial or damaged file
    if (run_dir / "config.yaml").is_file():
        assert isinstance(yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")), dict)
    if (run_dir / "metrics.jsonl").is_file():
        for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").split("\n")[:-1]:
            json.loads(line)
    last = run_dir / "last.pt"
    return load_checkpoint(last)["progress"]["step"] if last.is_file() else 0


@dataclass
class SoakReport:
    """What a soak run did and found."""

    kills: int = 0
    boundaries: list[str] = field(default_factory=list)  # checkpoint writes killed around
    killed_mid_training: int = 0  # kills after which the next start resumed past step 0 and before the end
    steps_at_kills: list[int] = field(default_factory=list)  # last.pt's step after each kill
    reached_at_kills: list[int] = field(default_factory=list)  # the last step the trainer reported before each kill
    launches: int = 0
    seconds: float = 0.0
    bit_exact: bool = False
    differences: list[str] = field(default_factory=list)


def kill_points(kills: int, steps: int, rng: random.Random) -> list[tuple[int, float]]:
    """``kills`` seeded points of a run of ``steps`` steps, in order, one in each of ``kills`` equal parts of it.

    A point is (phase, fraction). The run has ``steps + 1`` phases of equal weight: phase 0 from the start to
    the first step's report (start-up and the first step), phase k from step k's report to the next report
    (the next step, and after a step a multiple of eval_every also the validation and checkpoint writes;
    after the last step the final validation and averaging). One point per equal part, rather than
    ``kills`` independent draws, so that every stretch of the run is hit, the stretch between the first and
    the last checkpoint included.
    """
    points = []
    for part in range(kills):
        position = (part + rng.random()) / kills * (steps + 1)
        points.append((int(position), position - int(position)))
    return points


def run_with_kills(
    launcher: Launcher, argv: list[str], run_dir: Path, points: list[tuple[int, float]], phases: list[float]
) -> SoakReport:
    """Kill a run at each of ``points`` in turn (``kill_points``), resuming it each time; check the files after
    each kill; then let a last start finish.

    ``phases``: the seconds each phase took in the reference run. A kill at (k, f) waits for step k's report
    and then f of phase k, its reference seconds times the run's pace: the last span this session took
    (start to first report, or report to report) over the same span of the reference, so that a machine
    busier or idler than during the reference keeps the kill inside phase k. A point at or before the step
    the run resumes from (k no more than last.pt's step) falls in the start-up: f of phase 0 after the start,
    at the pace last seen. A trainer that finishes before its kill (the last phase, the machine got faster)
    trains again from scratch, to be killed at the same point half as far into the phase.
    """
    report, started = SoakReport(), time.perf_counter()
    log = run_dir.parent / f"{run_dir.name}.log"
    step = 0  # last.pt's step: where the next start resumes
    pace = 1.0  # this run's seconds per reference second
    for phase, fraction in points:
        while True:
            session = launcher.start_reporting(argv, log, step)
            report.launches += 1
            in_startup = phase <= step
            if not in_startup and session.wait_for_step(phase):
                # The span that ended at step k's report is phase k-1, or a start-up and a step like phase 0.
                pace = session.last_span() / phases[phase - 1 if phase - 1 > step else 0]
            session.process.join(fraction * phases[0 if in_startup else phase] * pace)
            if session.process.exitcode is None:
                break
            if session.process.exitcode != 0:
                raise RuntimeError(f"trainer exited with status {session.process.exitcode}; see {log}")
            _fresh(run_dir)
            step, fraction = 0, fraction / 2
        session.kill()
        report.kills += 1
        report.reached_at_kills.append(session.step)
        step = check_intact(run_dir)
        report.steps_at_kills.append(step)
    process = launcher.start(argv, log)
    report.launches += 1
    process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"the final resume exited with status {process.exitcode}; see {log}")
    steps = len(phases) - 1
    report.killed_mid_training = sum(0 < s < steps for s in report.steps_at_kills)
    report.seconds = round(time.perf_counter() - started, 1)
    return report


def run_through_boundaries(launcher: Launcher, argv: list[str], run_dir: Path, keys: list[str]) -> SoakReport:
    """For each checkpoint write of an uninterrupted run, in order: SIGKILL a resumed trainer just before
    it and in the middle of it (temporary file written, not renamed), and just after each last.pt (after
    any other write comes the next write at once, so "before" that one is the same moment); check the files
    after each kill; then let a last start finish. Deterministic: the kills land exactly between writes."""
    report, started = SoakReport(), time.perf_counter()
    log = run_dir.parent / f"{run_dir.name}.log"
    targets = [
        (mode, key) for key in keys for mode in ("before", "during", "after") if mode != "after" or "last.pt" in key
    ]
    for mode, key in targets:
        process = launcher.start(argv, log, (mode, key))
        report.launches += 1
        process.join()
        if process.exitcode == 0:  # the resumed run skipped a write the uninterrupted run made
            report.differences.append(f"killed until {mode} {key}, the resumed run finished without writing {key}")
            break
        if process.exitcode != -signal.SIGKILL:
            raise RuntimeError(f"{mode} {key}: the trainer failed (status {process.exitcode}); see {log}")
        report.kills += 1
        report.steps_at_kills.append(check_intact(run_dir))
        if mode == "during":
            report.boundaries.append(key)
    process = launcher.start(argv, log)
    report.launches += 1
    process.join()
    if process.exitcode != 0:
        raise RuntimeError(f"the final resume exited with status {process.exitcode}; see {log}")
    report.seconds = round(time.perf_counter() - started, 1)
    return report


def _fresh(run_dir: Path) -> None:
    for path in run_dir.iterdir():
        path.unlink()


def _same(a: object, b: object, where: str, differences: list[str]) -> None:
    """Append to ``differences`` every place where ``a`` and ``b`` differ (tensors bit for bit)."""
    if isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)):
            differences.append(where)
    elif isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            differences.append(f"{where}: keys {sorted(map(str, set(a) ^ set(b)))}")
        for key in a.keys() & b.keys():
            if key not in TIMING:
                _same(a[key], b[key], f"{where}.{key}", differences)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]", differences)
    elif a != b:
        differences.append(f"{where}: {a!r} != {b!r}")


def compare_runs(reference: Path, resumed: Path) -> list[str]:
    """Where two finished runs differ: checkpoints bit for bit, metrics record for record (clock fields aside)."""
    differences: list[str] = []
    for name in ("last.pt", "best.pt"):
        a, b = load_checkpoint(reference / name), load_checkpoint(resumed / name)
        a["config"]["train"].pop("run_dir")
        b["config"]["train"].pop("run_dir")
        _same(a, b, name, differences)
    records = [
        [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        for run in (reference, resumed)
    ]
    _same(records[0], records[1], "metrics.jsonl", differences)
    if len(records[0]) != len(records[1]):
        differences.append(f"metrics.jsonl: {len(records[0])} records != {len(records[1])}")
    leftovers = sorted(p.name for p in resumed.iterdir() if p.name.endswith(".tmp"))
    if leftovers:
        differences.append(f"temporary files left: {leftovers}")
    return differences


@dataclass
class Reference:
    """An uninterrupted run: its directory, its checkpoint writes in order, the seconds of each of its phases
    (``kill_points``)."""

    run_dir: Path
    cache: Path
    steps: int
    eval_every: int
    writes: list[str]
    phases: list[float]


def reference_run(launcher: Launcher, work: Path, cache: Path, steps: int, eval_every: int) -> Reference:
    """Build the data cache, then train without faults, recording the checkpoint writes and when each step
    was reported (the cache is built first so that phase 0 is a start-up like the resumed runs' ones)."""
    run_dir, writes, log = work / "reference", work / "reference.writes", work / "reference.log"
    prepared = launcher.start(prepare_argv(cache), work / "prepare.log")
    prepared.join()
    if prepared.exitcode != 0:
        raise RuntimeError(f"building the data cache failed; see {work / 'prepare.log'}")
    session = launcher.start_reporting(train_argv(run_dir, cache, steps, eval_every), log, 0, ("record", str(writes)))
    marks = [time.perf_counter()]
    for step in range(1, steps + 1):
        if not session.wait_for_step(step):
            raise RuntimeError(f"the reference run ended before step {step}; see {log}")
        marks.append(time.perf_counter())
    session.process.join()
    if session.process.exitcode != 0:
        raise RuntimeError(f"the reference run failed; see {log}")
    marks.append(time.perf_counter())
    keys = writes.read_text(encoding="utf-8").split()
    phases = [after - before for before, after in zip(marks, marks[1:], strict=False)]
    return Reference(run_dir, cache, steps, eval_every, keys, phases)


def soak(launcher: Launcher, reference: Reference, work: Path, kills: int, seed: int) -> SoakReport:
    """A run like ``reference`` (in ``work``) killed at random points, compared with it."""
    resumed = work / "random"
    argv = train_argv(resumed, reference.cache, reference.steps, reference.eval_every)
    points = kill_points(kills, reference.steps, random.Random(seed))
    report = run_with_kills(launcher, argv, resumed, points, reference.phases)
    report.differences = compare_runs(reference.run_dir, resumed)
    report.bit_exact = not report.differences
    return report


def soak_boundaries(launcher: Launcher, reference: Reference, work: Path) -> SoakReport:
    """A run like ``reference`` (in ``work``) killed around each of its checkpoint writes, compared with it."""
    resumed = work / "boundaries"
    argv = train_argv(resumed, reference.cache, reference.steps, reference.eval_every)
    report = run_through_boundaries(launcher, argv, resumed, reference.writes)
    report.differences += compare_runs(reference.run_dir, resumed)
    report.bit_exact = not report.differences
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="random kills (the boundary kills come on top)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cache", type=Path, help="data cache directory (default: a fresh one, built once)")
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-kill-") as tmp:
        work = Path(tmp)
        launcher = Launcher()
        reference = reference_run(launcher, work, args.cache or work / "cache", args.steps, args.eval_every)
        reports = {
            "random": soak(launcher, reference, work, args.kills, args.seed),
            "boundaries": soak_boundaries(launcher, reference, work),
        }
    text = json.dumps({name: asdict(report) for name, report in reports.items()}, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    sys.exit(0 if all(report.bit_exact for report in reports.values()) else 1)


if __name__ == "__main__":
    main()
