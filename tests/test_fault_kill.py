"""Kill -9 at random moments: the toy run, SIGKILLed again and again and resumed each time, ends with the
same last.pt and best.pt as an uninterrupted run, bit for bit, and the same metrics records; no file is ever
left partial. The harness is scripts/soak_kill.py (run it for a longer soak)."""

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import soak_kill  # noqa: E402

KILLS = 10


def test_kill_9_at_random_moments_then_resume_equals_an_uninterrupted_run(tmp_path, toy_cache):
    report = soak_kill.soak(tmp_path, toy_cache, kills=KILLS, steps=16, eval_every=4, seed=0)
    print(report)
    assert report.kills == KILLS
    assert report.killed_mid_training >= 2, report.steps_at_kills  # the kills did land during training
    assert report.differences == []
    assert report.bit_exact


def test_kill_9_before_during_and_after_every_checkpoint_write(tmp_path, toy_cache):
    """Deterministic kills exactly around each write of best.pt, the averaging snapshots and last.pt, in
    turn: the windows a random kill rarely hits, where write order decides what a resume finds."""
    report = soak_kill.soak_boundaries(tmp_path, toy_cache, steps=8, eval_every=4)
    print(report)
    assert {key.split("@")[0] for key in report.boundaries} >= {"best.pt", "last.pt", "snapshot-4.pt"}
    assert report.kills == 3 * len(report.boundaries)
    assert report.differences == []
