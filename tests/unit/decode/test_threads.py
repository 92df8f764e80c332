"""seq2seq.decode.threads: the default threads for the cores available, and what overrides them."""

import pytest

import seq2seq.decode.threads as threads_module
from seq2seq.decode.threads import ThreadPlan, decode_threads, default_plan
from seq2seq.errors import UserError


@pytest.mark.parametrize("cores", [1, 2, 16])
def test_one_thread_per_worker_and_a_worker_per_core(cores):
    assert default_plan(cores) == ThreadPlan(intra=1, workers=cores)
    assert decode_threads(cores=cores, environ={}) == ThreadPlan(intra=1, workers=cores)


def test_no_cores_counted_still_gives_one_worker():
    assert default_plan(0) == ThreadPlan(intra=1, workers=1)


def test_an_explicit_count_is_that_many_intra_threads_and_one_worker():
    environ = {"OMP_NUM_THREADS": "5"}  # the flag wins over the environment
    assert decode_threads(threads=3, cores=8, environ=environ) == ThreadPlan(intra=3, workers=1)


def test_omp_num_threads_counts_as_an_explicit_count():
    assert decode_threads(cores=8, environ={"OMP_NUM_THREADS": "2"}) == ThreadPlan(2, 1)
    assert decode_threads(cores=8, environ={"OMP_NUM_THREADS": "4,2"}) == ThreadPlan(4, 1)


@pytest.mark.parametrize("value", ["", "0", "many", "-1"])
def test_an_unusable_omp_num_threads_leaves_the_default(value):
    assert decode_threads(cores=4, environ={"OMP_NUM_THREADS": value}) == ThreadPlan(1, 4)


def test_the_default_counts_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(threads_module, "available_cpus", lambda: 3)
    assert decode_threads(environ={}) == ThreadPlan(intra=1, workers=3)


def test_a_negative_count_is_a_user_error():
    with pytest.raises(UserError, match="--threads -1"):
        decode_threads(threads=-1, environ={})
