"""Resampled futures (envs/workload/futures.py): arrivals spliced from training streams and runtimes drawn from
the training jobs' runtime/request ratios, checked exactly on small hand-made streams."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.core import Job
from envs.core.errors import ConfigError
from envs.workload.futures import FutureModel
from envs.workload.table import Workload


def stream(name: str, submits: list[float], first_runtime: float, n_gpus: int = 1) -> Workload:
    """Jobs at ``submits``, each with its own runtime (``first_runtime``, +1, +2, ...) so that a drawn job tells
    which training job it came from; estimates twice the runtime."""
    return Workload.from_jobs(name, [Job(i, t, first_runtime + i, 2 * (first_runtime + i), n_gpus=n_gpus)
                                     for i, t in enumerate(submits)])


# A: gaps 1, 2, 4; B: gaps 8, 16 (with a tie: 0). Every gap is unique to one job of one stream.
A = stream("A", [0, 1, 3, 7], first_runtime=100, n_gpus=1)
B = stream("B", [1000, 1008, 1024, 1024], first_runtime=200, n_gpus=2)
SOURCES = {(j.runtime_s): (s, k) for s in (A, B) for k, j in enumerate(s.jobs)}
"""Training job (stream, index) by its unique runtime."""
NOW = 5000.0


def source(job: Job) -> tuple[Workload, int]:
    return SOURCES[job.runtime_s]


def gap_before(w: Workload, k: int) -> float:
    return w.jobs[k].submit_time_s - w.jobs[k - 1].submit_time_s


def draw(count: int, seed: int = 0, until_s: float = math.inf, first_id: int = 500,
         model: FutureModel | None = None) -> tuple[Job, ...]:
    return (model or FutureModel([A, B])).arrivals(NOW, count, until_s, first_id, np.random.default_rng(seed))


# ---- arrivals --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_arrivals_are_training_jobs_retimed_to_start_now_with_training_gaps(seed):
    jobs = draw(30, seed)
    assert len(jobs) == 30
    assert [j.job_id for j in jobs] == list(range(500, 530))
    previous = NOW
    for job in jobs:
        w, k = source(job)
        assert k >= 1  # a stream's first job has no gap to keep: it is never drawn
        # everything but the id and the submit time is the training job's
        assert dataclasses.replace(job, job_id=w.jobs[k].job_id, submit_time_s=w.jobs[k].submit_time_s) == w.jobs[k]
        # the gap to the previous arrival (to now for the first) is the training job's gap to its predecessor
        assert job.submit_time_s - previous == gap_before(w, k)
        previous = job.submit_time_s


@pytest.mark.parametrize("seed", range(8))
def test_arrivals_follow_a_stream_in_order_until_its_end_or_the_count(seed):
    # Within a splice the jobs are the stream's next ones; a new splice starts only at a stream's end.
    jobs = draw(40, seed)
    places = [source(j) for j in jobs]
    for (w, k), (w2, k2) in itertools.pairwise(places):
        if k + 1 < len(w.jobs):
            assert (w2, k2) == (w, k + 1)


def test_arrivals_are_never_before_now_and_never_decrease():
    for seed in range(20):
        submits = [j.submit_time_s for j in draw(25, seed)]
        assert submits[0] >= NOW and submits == sorted(submits)


def test_arrivals_stop_at_until_and_are_then_a_prefix_of_the_unlimited_draw():
    for seed in range(10):
        unlimited = draw(40, seed)
        for until_s in (NOW, NOW + 1, NOW + 20, NOW + 100.5, unlimited[-1].submit_time_s):
            limited = draw(40, seed, until_s=until_s)
            assert limited == tuple(j for j in unlimited if j.submit_time_s <= until_s)
            assert all(j.submit_time_s <= until_s for j in limited)


def test_an_until_before_the_first_arrival_gives_none():
    # A's gaps are 1, 2 and 4: nothing drawn from A alone comes before now + 1; nothing at all before now.
    only_a = FutureModel([A])
    assert all(draw(10, seed, until_s=NOW + 0.5, model=only_a) == () for seed in range(10))
    assert all(draw(10, seed, until_s=NOW - 1) == () for seed in range(10))


def test_a_count_of_zero_gives_no_arrival():
    assert draw(0) == ()


def test_a_count_beyond_all_training_jobs_splices_streams_again_and_again():
    jobs = draw(200, seed=1)
    assert len(jobs) == 200 and [j.job_id for j in jobs] == list(range(500, 700))
    assert {source(j)[0].name for j in jobs} == {"A", "B"}


def test_arrivals_are_deterministic_for_one_seed_and_differ_for_another():
    assert draw(30, seed=7) == draw(30, seed=7)
    assert draw(30, seed=7) != draw(30, seed=8)


def test_arrivals_use_only_the_generator_passed_in():
    model = FutureModel([A, B])
    rng = np.random.default_rng(3)
    first = model.arrivals(NOW, 10, math.inf, 0, rng)
    second = model.arrivals(NOW, 10, math.inf, 0, rng)  # the generator moved on: another draw
    assert first == model.arrivals(NOW, 10, math.inf, 0, np.random.default_rng(3))
    assert second != first


def test_streams_of_fewer_than_two_jobs_are_left_out():
    single = stream("single", [0], first_runtime=900)
    model = FutureModel([single, A])
    jobs = model.arrivals(NOW, 50, math.inf, 0, np.random.default_rng(0))
    assert {source(j)[0].name for j in jobs} == {"A"}


@pytest.mark.parametrize("streams", [[], [stream("one", [0], 1)], [stream("one", [0], 1), stream("two", [5], 10)],
                                     [Workload("empty", ())]])
def test_a_model_without_a_stream_of_two_jobs_is_a_config_error(streams):
    with pytest.raises(ConfigError, match="two jobs"):
        FutureModel(streams)


@settings(max_examples=60, deadline=None)
@given(streams=st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=6), min_size=1, max_size=3),
       count=st.integers(0, 30), now=st.sampled_from([0.0, 17.0, 1e6]), seed=st.integers(0, 2**16),
       until=st.sampled_from([math.inf, 10.0, 1e6 + 40]))
def test_arrivals_on_random_streams(streams, count, now, seed, until):
    # Streams given by their gaps; each job's runtime names its (stream, index).
    workloads, where = [], {}
    for s, gaps in enumerate(streams):
        submits = np.cumsum([0, *gaps]).astype(float).tolist()
        w = Workload.from_jobs(f"s{s}", [Job(i, t, 1000 * s + i, 1000 * s + i + 1) for i, t in enumerate(submits)])
        workloads.append(w)
        where.update({j.runtime_s: (w, k) for k, j in enumerate(w.jobs)})
    jobs = FutureModel(workloads).arrivals(now, count, until, 7, np.random.default_rng(seed))
    if math.isinf(until):
        assert len(jobs) == count
    assert len(jobs) <= count and [j.job_id for j in jobs] == list(range(7, 7 + len(jobs)))
    previous = now
    for job in jobs:
        w, k = where[job.runtime_s]
        assert k >= 1 and job.submit_time_s - previous == gap_before(w, k) and previous <= job.submit_time_s <= until
        previous = job.submit_time_s


# ---- runtimes --------------------------------------------------------------------------------------------------------
def ratio_model(ratios: list[float]) -> FutureModel:
    """Training jobs whose runtime / request are ``ratios`` (requests of 400 s), in one stream."""
    return FutureModel([Workload.from_jobs("r", [Job(i, i, 400 * r, 400) for i, r in enumerate(ratios)])])


def runtimes(model: FutureModel, job: Job, at_least_s: float, draws: int = 200) -> set[float]:
    rng = np.random.default_rng(0)
    return {model.runtime_s(job, at_least_s, rng) for _ in range(draws)}


REQUEST_100 = Job(1, 0, 77, 100)  # its true runtime (77) is never read


def test_a_runtime_is_the_request_times_a_training_ratio():
    model = ratio_model([0.25, 0.5, 1.0])
    assert runtimes(model, REQUEST_100, 0) == {25, 50, 100}


@pytest.mark.parametrize(("at_least_s", "expected"), [
    (60, {100}),  # only ratio 1.0 gives at least 60
    (50, {50, 100}),  # 0.5 gives exactly 50: at least 50
    (25.5, {50, 100}),
    (100, {100}),
    (150, {150}),  # no ratio gives 150: the bound itself
    (1e6, {1e6}),
])
def test_a_runtime_is_drawn_among_the_ratios_that_give_at_least_what_is_known(at_least_s, expected):
    assert runtimes(ratio_model([0.25, 0.5, 1.0]), REQUEST_100, at_least_s) == expected


def test_a_job_without_a_request_runs_what_is_known():
    model = ratio_model([0.25, 0.5, 1.0])
    assert runtimes(model, Job(1, 0, 77, 0), 42) == {42}
    assert runtimes(model, Job(1, 0, 77, 0), 0) == {0}


def test_ratios_above_one_are_kept():
    # A training job that ran past its request (no kill at the wall time): ratio 1.5.
    assert runtimes(ratio_model([0.5, 1.5]), REQUEST_100, 0) == {50, 150}
    assert runtimes(ratio_model([0.5, 1.5]), REQUEST_100, 120) == {150}


def test_training_jobs_without_a_request_give_ratio_one():
    # No training job has a request: the only ratio is 1, a job's runtime is its request.
    model = FutureModel([Workload.from_jobs("no-requests", [Job(0, 0, 50, 0), Job(1, 5, 70, 0)])])
    assert runtimes(model, REQUEST_100, 0) == {100}
    assert runtimes(model, REQUEST_100, 130) == {130}


def test_the_ratios_come_from_every_stream():
    # One stream of ratio 0.5 and one of ratio 2.0 (the second's jobs ran twice their request).
    model = FutureModel([Workload.from_jobs("half", [Job(0, 0, 50, 100), Job(1, 1, 50, 100)]),
                         Workload.from_jobs("double", [Job(0, 0, 200, 100), Job(1, 1, 200, 100)])])
    assert runtimes(model, REQUEST_100, 0) == {50, 200}


def test_runtimes_are_deterministic_for_one_seed():
    model = ratio_model([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    a = [model.runtime_s(REQUEST_100, 0, rng) for rng in [np.random.default_rng(5)] for _ in range(20)]
    b = [model.runtime_s(REQUEST_100, 0, rng) for rng in [np.random.default_rng(5)] for _ in range(20)]
    c = [model.runtime_s(REQUEST_100, 0, rng) for rng in [np.random.default_rng(6)] for _ in range(20)]
    assert a == b != c
