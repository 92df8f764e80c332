"""seq2seq.decode.threads: the default threads of each engine for the cores available, and what overrides them."""

import pytest

import seq2seq.decode.threads as threads_module
from seq2seq.decode.threads import ThreadPlan, decode_threads, default_plan
from seq2seq.errors import UserError


@pytest.mark.parametrize("cores", [1, 2, 16])
@pytest.mark.parametrize("workload", ["batch", "request"])
def test_ctranslate2_gets_one_thread_per_worker_and_a_worker_per_core(cores, workload):
    assert default_plan("ctranslate2", cores, workload) == ThreadPlan(intra=1, workers=cores)


@pytest.mark.parametrize("cores", [1, 2, 16])
@pytest.mark.parametrize("workload", ["batch", "request"])
def test_our_decoder_gets_one_thread_whatever_the_cores(cores, workload):
    assert default_plan("torch", cores, workload) == ThreadPlan(intra=1, workers=1)


def test_no_cores_counted_still_gives_one_worker():
    assert default_plan("ctranslate2", 0) == ThreadPlan(intra=1, workers=1)


def test_an_unknown_workload_is_refused():
    with pytest.raises(ValueError, match="workload"):
        default_plan("torch", 2, "stream")


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_an_explicit_count_is_that_many_intra_threads_and_one_worker(engine):
    environ = {"OMP_NUM_THREADS": "5"}  # the flag wins over the environment
    assert decode_threads(engine, "batch", threads=3, cores=8, environ=environ) == ThreadPlan(intra=3, workers=1)


def test_omp_num_threads_counts_as_an_explicit_count():
    assert decode_threads("ctranslate2", cores=8, environ={"OMP_NUM_THREADS": "2"}) == ThreadPlan(2, 1)
    assert decode_threads("ctranslate2", cores=8, environ={"OMP_NUM_THREADS": "4,2"}) == ThreadPlan(4, 1)


@pytest.mark.parametrize("value", ["", "0", "many", "-1"])
def test_an_unusable_omp_num_threads_leaves_the_default(value):
    assert decode_threads("ctranslate2", cores=4, environ={"OMP_NUM_THREADS": value}) == ThreadPlan(1, 4)


def test_the_default_counts_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(threads_module, "available_cpus", lambda: 3)
    assert decode_threads("ctranslate2", environ={}) == ThreadPlan(intra=1, workers=3)


def test_a_negative_count_is_a_user_error():
    with pytest.raises(UserError, match="--threads -1"):
        decode_threads("torch", threads=-1, environ={})
