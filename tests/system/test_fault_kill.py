"""Kill -9 at random moments and around every checkpoint write: the toy run, SIGKILLed again and again and
resumed each time, ends with the same last.pt and best.pt as an uninterrupted run, bit for bit, and the same
metrics records; no file is ever left partial. The harness is scripts/soak_kill.py (run it for a longer soak)."""

import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import soak_kill  # noqa: E402

KILLS = 10


@pytest.fixture(scope="module")
def harness(tmp_path_factory, toy_cache) -> tuple[soak_kill.Launcher, soak_kill.Reference]:
    """The trainer launcher and one uninterrupted reference run (8 steps, a checkpoint every 4)."""
    launcher = soak_kill.Launcher()
    return launcher, soak_kill.reference_run(launcher, tmp_path_factory.mktemp("kill"), toy_cache, 8, 4)


def test_kill_9_at_random_moments_then_resume_equals_an_uninterrupted_run(harness, tmp_path):
    report = soak_kill.soak(*harness, tmp_path, kills=KILLS, seed=0)
    print(report)
    # Some kills left a run part-way (last.pt past step 0, short of the end) that the next start resumed.
    assert report.killed_mid_training >= 1, report.steps_at_kills
    assert report.differences == []


def test_kill_9_around_every_checkpoint_write(harness, tmp_path):
    """Deterministic kills exactly before, in the middle of and after each write of best.pt, the averaging
    snapshots and last.pt: the windows a random kill rarely hits, where write order decides what a resume finds."""
    report = soak_kill.soak_boundaries(*harness, tmp_path)
    print(report)
    names = {key.split("@")[0] for key in report.boundaries}
    assert names >= {"best.pt", "last.pt", "snapshot-4.pt", "snapshot-8.pt"}, report.boundaries
    assert report.differences == []
