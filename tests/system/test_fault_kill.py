"""Kill -9 at random moments and around every checkpoint write: the toy run, SIGKILLed again and again and
resumed each time, ends with the same last.pt and best.pt as an uninterrupted run, bit for bit, and the same
metrics records; no file is ever left partial. The random moments are drawn over the run's progress (the
steps the trainer reports), so a busy machine slows the kills down with the training instead of moving them
all into start-up. The harness is scripts/soak/soak_kill.py, run here as a process with few kills (run it
with more for a longer soak)."""

import json
import subprocess
import sys

import pytest
from conftest import CLI_ENV, REPO

KILLS = 10
STEPS = 8


@pytest.fixture(scope="module")
def report(tmp_path_factory, toy_cache) -> dict:
    """The harness's report: 10 kills at random points of the run's progress and the kills around each
    checkpoint write (8 steps, a checkpoint every 4), against one uninterrupted reference run."""
    out = tmp_path_factory.mktemp("kill") / "soak.json"
    args = ["--kills", str(KILLS), "--steps", str(STEPS), "--eval-every", "4", "--seed", "0", "--cache", str(toy_cache)]
    done = subprocess.run(
        [sys.executable, "scripts/soak/soak_kill.py", *args, "--out", str(out)],
        cwd=REPO,
        env=CLI_ENV,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.is_file(), done.stderr[-3000:]
    return json.loads(out.read_text())


def test_kill_9_at_random_moments_then_resume_equals_an_uninterrupted_run(report):
    random = report["random"]
    where = random["steps_at_kills"], random["reached_at_kills"]
    # The kills spread over the run: one before the first checkpoint, one after the last step (final
    # validation and averaging), and some that left a run part-way (last.pt past step 0, short of the end)
    # that the next start resumed.
    assert 0 in random["steps_at_kills"] and max(random["reached_at_kills"]) == STEPS, where
    assert random["killed_mid_training"] >= 1, where
    assert random["kills"] == KILLS and random["differences"] == []


def test_kill_9_around_every_checkpoint_write(report):
    """Deterministic kills exactly before, in the middle of and after each write of best.pt, the averaging
    snapshots and last.pt: the windows a random kill rarely hits, where write order decides what a resume finds."""
    boundaries = report["boundaries"]
    names = {key.split("@")[0] for key in boundaries["boundaries"]}
    assert names >= {"best.pt", "last.pt", "snapshot-4.pt", "snapshot-8.pt"}, boundaries["boundaries"]
    assert boundaries["differences"] == []
