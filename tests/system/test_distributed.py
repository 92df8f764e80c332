"""Data-parallel training through ``torchrun`` on the CPU (gloo), two ranks on the toy config:
one step on two ranks is one process accumulating both ranks' batches, a run trains and
translates, SIGTERM to the launcher saves last.pt once and a second launch resumes, and two
"machines" (two launchers on 127.0.0.1, c10d rendezvous) train one model.

Each rank runs one thread: on a shared 2-core machine more would only contend.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import torch
from conftest import (
    CLI_ENV,
    REPO,
    TOY,
    free_port,
    metrics_records,
    run_cli,
    run_torchrun,
    sets,
    torchrun,
    toy_train_args,
)

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import load_config
from seq2seq.data.batching import BucketSampler
from seq2seq.data.pipeline import prepare_data
from seq2seq.train.distributed import SINGLE, World
from seq2seq.train.trainer import Trainer

QUICK = ("train.eval_sentences=4",)


def test_a_single_world_shares_nothing_and_changes_nothing():
    assert SINGLE.mine([1, 2, 3]) == [1, 2, 3] and SINGLE.sum([2, 3.5]) == [2, 3.5]
    assert SINGLE.any_of([False, True]) == [False, True] and SINGLE.gather("x") == ["x"]
    assert World(rank=1, size=3).mine(list(range(8))) == [1, 4, 7]


def test_one_step_on_two_ranks_equals_one_process_accumulating_both_shares(tmp_path, toy_cache, monkeypatch):
    # No clipping: it would rescale a wrongly scaled gradient back to the same norm.
    same = ("train.max_steps=1", "model.dropout=0", "train.clip_norm=0", "train.warmup_steps=1", *QUICK)
    two = run_torchrun(*toy_train_args(tmp_path / "two", toy_cache, *same))
    assert two.returncode == 0, two.stderr
    one = run_cli(*toy_train_args(tmp_path / "one", toy_cache, *same, "train.accum_steps=2"))
    assert one.returncode == 0, one.stderr
    ranks, single = (load_checkpoint(tmp_path / d / "last.pt") for d in ("two", "one"))
    assert ranks["sampler"] == single["sampler"]  # the same batches consumed
    monkeypatch.chdir(REPO)
    before = Trainer(load_config(TOY, [f"train.run_dir={tmp_path / 'init'}", f"data.cache_dir={toy_cache}"]))
    moved = 0.0
    for name, weight in single["model"].items():
        torch.testing.assert_close(ranks["model"][name], weight, rtol=1e-5, atol=1e-6, msg=name)
        moved = max(moved, float((weight - before.model.state_dict()[name]).abs().max()))
    assert moved > 1e-3  # the step changed the weights: the comparison is not of two untouched models
    # Adam's first step hardly depends on the gradient's scale; its first moment is the gradient / 10.
    moments = [[s["exp_avg"] for s in run["optimizer"]["state"].values()] for run in (ranks, single)]
    for moment, reference in zip(*moments, strict=True):
        torch.testing.assert_close(moment, reference, rtol=1e-4, atol=1e-9)


def test_two_ranks_train_the_toy_model_and_it_translates(tmp_path, toy_cache):
    run = tmp_path / "run"
    result = run_torchrun(*toy_train_args(run, toy_cache, "train.max_steps=40", "train.eval_every=20", *QUICK))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("x 2 ranks") == 1 and result.stdout.count("done: best model") == 1  # rank 0 speaks
    records = metrics_records(run)
    assert [r["step"] for r in records if "dev_loss" in r] == [20, 40]  # one validation per step count
    assert [r["step"] for r in records if "loss" in r] == [20, 40]
    dev = [r["dev_loss"] for r in records if "dev_loss" in r]
    assert dev[1] < dev[0]
    translated = run_cli("translate", "--model", str(run), "--device", "cpu", "我很好。", "你好。")
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 2
    # Resumed by one process, the run goes on with the batch that follows the two ranks' last ones.
    single = run_cli(*toy_train_args(run, toy_cache, "train.max_steps=43", *QUICK))
    assert single.returncode == 0, single.stderr
    cfg = load_config(REPO / TOY, [f"data.cache_dir={toy_cache}"])
    train = prepare_data(cfg.data).train
    sampler = BucketSampler(train.src_lengths, train.tgt_lengths, cfg.data.batch_tokens, cfg.train.seed)
    batches = iter(sampler)
    for _ in range(40 * 2 + 3):
        next(batches)
    assert load_checkpoint(run / "last.pt")["sampler"] == sampler.state_dict()


def test_one_process_resumed_on_two_ranks_equals_an_uninterrupted_run(tmp_path, toy_cache, monkeypatch):
    """World size 1 -> 2: three steps in one process accumulating two batches, resumed on two ranks to six, end
    where six straight steps of the one process end: the ranks go on with the global batches that follow, and
    the optimizer's moments and the schedule carry over. No dropout: on another world size each rank's random
    stream starts afresh (seq2seq.train.trainer.Trainer.resume), so only then can the two runs agree."""
    monkeypatch.chdir(REPO)

    def settings(run: str, steps: int, *more: str) -> list[str]:
        where = [
            f"train.run_dir={tmp_path / run}",
            f"data.cache_dir={toy_cache}",
            "train.threads=1",
            "train.device=cpu",
        ]
        return [*where, f"train.max_steps={steps}", "train.eval_every=3", "model.dropout=0", *QUICK, *more]

    straight = Trainer(load_config(TOY, settings("straight", 6, "train.accum_steps=2")))
    straight.fit(quiet=True)
    Trainer(load_config(TOY, settings("resumed", 3, "train.accum_steps=2"))).fit(quiet=True)
    two = run_torchrun("train", "--config", TOY, *sets(*settings("resumed", 6)))
    assert two.returncode == 0, two.stderr
    assert "x 2 ranks" in two.stdout and "resumed at step 3" in two.stdout
    resumed, reference = load_checkpoint(tmp_path / "resumed" / "last.pt"), straight.state()
    assert resumed["progress"]["step"] == 6 and resumed["world_size"] == 2
    assert resumed["sampler"] == reference["sampler"]  # the same batches consumed, none twice, none skipped
    assert resumed["scheduler"]["last_epoch"] == reference["scheduler"]["last_epoch"] == 6
    for name, weight in reference["model"].items():
        torch.testing.assert_close(resumed["model"][name], weight, rtol=1e-5, atol=1e-6, msg=name)
    moments = [run["optimizer"]["state"] for run in (resumed, reference)]
    for key, state in moments[1].items():
        for moment in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(moments[0][key][moment], state[moment], rtol=1e-4, atol=1e-9)


def _default_stop_signals() -> None:
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_DFL)


def test_sigterm_to_the_launcher_saves_once_and_a_second_launch_resumes(tmp_path, toy_cache):
    run = tmp_path / "run"
    args = toy_train_args(run, toy_cache, "train.max_steps=5000", "train.eval_every=5000", *QUICK)
    with subprocess.Popen(
        torchrun(*args),
        cwd=REPO,
        env=CLI_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_stop_signals,  # pytest itself may run with the stop signals ignored
    ) as launcher:
        _started(run, launcher)
        launcher.send_signal(signal.SIGTERM)
        out, err = launcher.communicate(timeout=60)
    assert out.count("interrupted at step") == 1, out + err
    saved = load_checkpoint(run / "last.pt")["progress"]["step"]
    assert 20 <= saved < 5000
    resumed = run_torchrun(*toy_train_args(run, toy_cache, f"train.max_steps={saved + 5}", *QUICK))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed at step {saved}" in resumed.stdout
    assert load_checkpoint(run / "last.pt")["progress"]["step"] == saved + 5


def _started(run, launcher: subprocess.Popen) -> None:
    """Wait for the run's first training record (step 20): training is under way on every rank."""
    deadline = time.monotonic() + 120
    while not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text():
        assert launcher.poll() is None and time.monotonic() < deadline, launcher.stderr.read()
        time.sleep(0.2)


def _rank_pid(launcher_pid: int, rank: int) -> int:
    """The pid of the worker process of ``rank``, found by the RANK torchrun put in its environment."""
    pids = [
        int(pid)
        for task in Path(f"/proc/{launcher_pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    chosen = [pid for pid in pids if f"RANK={rank}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")]
    assert len(chosen) == 1, (pids, chosen)
    return chosen[0]


def test_a_killed_rank_ends_the_job_with_a_report_naming_it(tmp_path, toy_cache):
    run = tmp_path / "run"
    args = toy_train_args(run, toy_cache, "train.max_steps=5000", "train.eval_every=5000", *QUICK)
    with subprocess.Popen(
        torchrun(*args), cwd=REPO, env=CLI_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as launcher:
        _started(run, launcher)
        os.kill(_rank_pid(launcher.pid, 1), signal.SIGKILL)
        _, err = launcher.communicate(timeout=60)  # the other rank does not wait for the collective's timeout
    assert launcher.returncode != 0
    root_cause = err.split("Root Cause", 1)[-1]  # torchrun's report: the first failure, then the others
    assert "Root Cause" in err and "rank      : 1" in root_cause and "SIGKILL" in root_cause, err


def test_two_launchers_on_one_host_train_as_two_machines(tmp_path, toy_cache):
    run = tmp_path / "run"
    args = toy_train_args(run, toy_cache, "train.max_steps=20", "train.eval_every=20", *QUICK)
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [
        subprocess.Popen(
            torchrun(
                *args,
                launcher=(
                    "--nnodes=2",
                    "--nproc-per-node=1",
                    f"--node-rank={node}",
                    "--rdzv-backend=c10d",
                    f"--rdzv-endpoint={endpoint}",
                    "--rdzv-id=toy",
                ),
            ),
            cwd=REPO,
            env=CLI_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in (0, 1)
    ]
    outputs = [node.communicate(timeout=240) for node in nodes]
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err
    assert sum(out.count("done: best model") for out, _ in outputs) == 1
    assert "".join(out for out, _ in outputs).count("x 2 ranks") == 1
    assert load_checkpoint(run / "last.pt")["progress"]["step"] == 20
    assert load_checkpoint(run / "last.pt")["world_size"] == 2
