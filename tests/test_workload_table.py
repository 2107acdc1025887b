"""The job table's utilities: windows, time splits, load scaling, estimate noise, offered load."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.workload import Workload


def make_workload(submits: list[float], runtime_s: float = 100.0, n_gpus: int = 1) -> Workload:
    """Jobs 0..n-1 submitted at ``submits`` (any order), each ``runtime_s`` long on ``n_gpus`` GPUs."""
    jobs = [Job(i, float(t), runtime_s, runtime_s, n_gpus=n_gpus) for i, t in enumerate(submits)]
    return Workload.from_jobs("w", jobs, source="test.swf", skipped={"zero_runtime": 2}, machine_gpus=8)


submit_lists = st.lists(st.floats(0, 1e7, allow_nan=False), min_size=1, max_size=40)


def test_workload_rejects_unsorted_jobs_and_repeated_ids() -> None:
    a, b = Job(1, 10.0, 1, 1), Job(2, 5.0, 1, 1)
    with pytest.raises(ConfigError, match="sorted"):
        Workload("w", (a, b))
    with pytest.raises(ConfigError, match="unique"):
        Workload("w", (Job(1, 0.0, 1, 1), Job(1, 1.0, 1, 1)))
    assert [j.job_id for j in Workload.from_jobs("w", [a, b]).jobs] == [2, 1]


def test_window_slices_in_table_order_and_rebases_to_zero() -> None:
    w = make_workload([100, 110, 130, 160, 200])
    part = w.window(1, 3)
    assert [j.job_id for j in part.jobs] == [1, 2, 3]
    assert [j.submit_time_s for j in part.jobs] == [0, 20, 50]
    assert part.name == "w[1:4]"
    assert (part.source, part.skipped, part.machine_gpus) == ("test.swf", {"zero_runtime": 2}, 8)
    assert [j.submit_time_s for j in w.window(1, 3, rebase=False).jobs] == [110, 130, 160]


@pytest.mark.parametrize(("start", "n_jobs"), [(-1, 2), (0, 0), (4, 2), (0, 6)])
def test_window_outside_the_table_is_refused(start: int, n_jobs: int) -> None:
    with pytest.raises(ConfigError, match="window"):
        make_workload([0, 1, 2, 3, 4]).window(start, n_jobs)


@settings(max_examples=60, deadline=None)
@given(submits=submit_lists, fraction=st.floats(0.01, 0.99))
def test_split_by_time_never_overlaps_and_loses_nothing(submits: list[float], fraction: float) -> None:
    w = make_workload(submits)
    train, test = w.split_by_time(fraction)
    assert sorted(j.job_id for j in train.jobs + test.jobs) == list(range(len(submits)))
    if train.jobs and test.jobs:
        assert train.jobs[-1].submit_time_s < test.jobs[0].submit_time_s
    assert (train.name, test.name) == ("w:train", "w:test")


def test_split_by_time_cuts_at_the_fraction_of_the_submit_span() -> None:
    train, test = make_workload([0, 10, 49, 50, 51, 100]).split_by_time(0.5)
    assert [j.job_id for j in train.jobs] == [0, 1, 2]
    assert [j.job_id for j in test.jobs] == [3, 4, 5]
    with pytest.raises(ConfigError, match="train_fraction"):
        make_workload([0, 1]).split_by_time(1.0)


def test_scale_load_divides_inter_arrival_times_keeping_the_first_submit() -> None:
    w = make_workload([100, 110, 130])
    assert [j.submit_time_s for j in w.scale_load(2).jobs] == [100, 105, 115]
    assert [j.submit_time_s for j in w.scale_load(0.5).jobs] == [100, 120, 160]
    assert w.scale_load(2).name == "w@load2"
    with pytest.raises(ConfigError, match="load factor"):
        w.scale_load(0)


def test_scale_load_orders_jobs_whose_submits_round_together_by_id() -> None:
    # 1e9 + 1 and the next float up become one float after x3: the tie must go to the lower id.
    t = 1e9 + 1
    jobs = [Job(0, 1e9, 1, 1), Job(9, t, 1, 1), Job(2, math.nextafter(t, math.inf), 1, 1)]
    scaled = Workload("w", tuple(jobs)).scale_load(3)
    assert [j.job_id for j in scaled.jobs] == [0, 2, 9]


@settings(max_examples=60, deadline=None)
@given(submits=submit_lists, factor=st.floats(0.01, 100))
def test_scale_load_keeps_every_job_and_the_order(submits: list[float], factor: float) -> None:
    w = make_workload(submits)
    scaled = w.scale_load(factor)
    assert sorted(j.job_id for j in scaled.jobs) == sorted(j.job_id for j in w.jobs)
    assert scaled.jobs[0].submit_time_s == w.jobs[0].submit_time_s


def test_estimate_noise_is_reproducible_and_never_below_the_runtime() -> None:
    w = make_workload(list(range(50)), runtime_s=30.0)
    a = w.with_estimate_noise(np.random.default_rng(7), 3.0)
    b = w.with_estimate_noise(np.random.default_rng(7), 3.0)
    c = w.with_estimate_noise(np.random.default_rng(8), 3.0)
    assert a.jobs == b.jobs
    assert a.jobs != c.jobs
    assert all(30.0 <= j.runtime_estimate_s <= 90.0 for j in a.jobs)
    assert len({j.runtime_estimate_s for j in a.jobs}) > 1
    assert [j.runtime_estimate_s for j in w.with_estimate_noise(np.random.default_rng(0), 1.0).jobs] == [30.0] * 50
    with pytest.raises(ConfigError, match="max_overestimate"):
        w.with_estimate_noise(np.random.default_rng(0), 0.5)


def test_offered_load_is_gpu_seconds_over_capacity_times_span() -> None:
    jobs = [Job(0, 0.0, 100.0, 100.0, n_gpus=2), Job(1, 100.0, 50.0, 50.0, gpu_milli=500)]
    w = Workload("w", tuple(jobs))
    assert w.offered_load(4) == pytest.approx((2 * 100 + 0.5 * 50) / (4 * 100))
    assert w.offered_load(0) == 0.0
    assert make_workload([5, 5]).offered_load(4) == 0.0  # zero span
    assert Workload("empty", ()).offered_load(4) == 0.0
