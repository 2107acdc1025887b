"""Run metrics (SPEC §7) on small hand-built logs, every figure worked out by hand; the steady-state window on a
hand-built log and, against independent computations, on random simulator runs with failures and preemptions."""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import any_dynamics, any_runtime, drive, large_cluster, large_workload

from envs.core.errors import ConfigError
from envs.core.job import Job, JobState, RejectReason
from envs.core.joblog import Interruptions, JobLog, JobRecord
from envs.core.metrics import (
    METRIC_DOCS,
    WINDOW_DOCS,
    bounded_slowdown,
    jain_index,
    summarize,
    window_fractions,
    window_records,
)

TIGHT = 1e-12


def _done(job_id: int, user: str, submit: float, start: float, finish: float, runtime: float, n_gpus: int = 1,
          milli: int = 1000, speed: float = 1.0, timed_out: bool = False) -> JobRecord:  # fmt: skip
    job = Job(job_id, submit, runtime, max(runtime, 1.0), n_gpus=n_gpus, gpu_milli=milli, user=user)
    return JobRecord(job, JobState.COMPLETED, start_time_s=start, finish_time_s=finish, speed=speed,
                     timed_out=timed_out)  # fmt: skip


def _rejected(job_id: int, user: str, submit: float, reason: RejectReason) -> JobRecord:
    job = Job(job_id, submit, 10.0, 10.0, n_gpus=16, user=user)
    return JobRecord(job, JobState.REJECTED, reject_reason=reason)


def _log(records: list[JobRecord], total_gpus: int = 8, idle: float = 0.0, fragmented: float = 0.0) -> JobLog:
    return JobLog("test", total_gpus, tuple(records), busy_gpu_s=0.0, idle_gpu_s_while_pending=idle,
                  fragmented_gpu_s=fragmented)  # fmt: skip


# An 8-GPU cluster; users a and b.
#   job  user  submit start finish  run  GPUs  base  speed  ideal run       wait  JCT   bsld
#   1    a     0      0     100     100  2     100   1      min(100,100)=100  0     100   max(1, 100/100)      = 1
#   2    a     10     50    55      5    1     5     1      5                 40    45    (40+5)/max(5,10)     = 4.5
#   3    b     20     100   300     200  4     100   0.625  min(160,200)=160  80    280   (80+200)/200         = 1.4
#   4    b     30     60    160     100  0.5   60    1      min(60,100)=60    30    130   (30+100)/100         = 1.3
#   5    a     40     rejected: too many GPUs
HAND_LOG = _log(
    [
        _done(2, "a", 10, 50, 55, 5, timed_out=True),
        _done(1, "a", 0, 0, 100, 100, n_gpus=2),
        _done(4, "b", 30, 60, 160, 60, milli=500),
        _rejected(5, "a", 40, RejectReason.TOO_MANY_GPUS),
        _done(3, "b", 20, 100, 300, 100, n_gpus=4, speed=0.625),
    ],
    idle=120.0,
    fragmented=30.0,
)


def test_hand_log_counts() -> None:
    m = summarize(HAND_LOG)
    assert (m["n_jobs"], m["n_completed"], m["n_rejected"]) == (5, 4, 1)
    assert m["rejected_too_many_gpus"] == 1 and m["rejected_no_eligible_gpu"] == 0 and m["rejected_cpu_ram"] == 0
    assert m["timed_out"] == 1
    assert (m["quota_violations"], m["preemptions"], m["restarts"], m["lost_gpu_hours"]) == (0, 0, 0, 0.0)


@pytest.mark.parametrize(
    "key, expected",
    [
        # waits sorted 0, 30, 40, 80. Linear percentile at rank (n−1)q: p95 → 2.85, p99 → 2.97.
        ("mean_wait_s", 150 / 4),  # 37.5
        ("median_wait_s", 35.0),  # (30 + 40) / 2
        ("p95_wait_s", 40 + 0.85 * 40),  # 74
        ("p99_wait_s", 40 + 0.97 * 40),  # 78.8
        # JCTs sorted 45, 100, 130, 280
        ("mean_jct_s", 555 / 4),  # 138.75
        ("median_jct_s", 115.0),
        ("p95_jct_s", 130 + 0.85 * 150),  # 257.5
        ("p99_jct_s", 130 + 0.97 * 150),  # 275.5
        # bounded slowdowns sorted 1, 1.3, 1.4, 4.5
        ("mean_bsld", 8.2 / 4),  # 2.05
        ("median_bsld", 1.35),
        ("p95_bsld", 1.4 + 0.85 * 3.1),  # 4.035
        ("p99_bsld", 1.4 + 0.97 * 3.1),  # 4.407
        # makespan: last finish 300 − first submit 0
        ("makespan_s", 300.0),
        # allocated: 2·100 + 1·5 + 4·200 + 0.5·100 = 1055 GPU-s over 8 GPUs × 300 s = 2400
        ("utilization", 1055 / 2400),
        # useful: 2·100 + 1·5 + 4·160 + 0.5·60 = 875 GPU-s
        ("effective_utilization", 875 / 2400),
        # 30 fragmented of 120 idle GPU-seconds while jobs were pending
        ("fragmentation", 0.25),
        # user means: a (1 + 4.5)/2 = 2.75, b (1.4 + 1.3)/2 = 1.35 → 4.1² / (2 (2.75² + 1.35²)) = 16.81 / 18.77
        ("jain_fairness", 16.81 / 18.77),
    ],
)
def test_hand_log_metric(key: str, expected: float) -> None:
    assert summarize(HAND_LOG)[key] == pytest.approx(expected, rel=TIGHT)


def test_bounded_slowdown_floors_short_runs_at_ten_seconds() -> None:
    wait = np.array([8.0, 29.0, 0.0, 30.0])
    run = np.array([2.0, 1.0, 0.5, 20.0])
    # (8+2)/10 = 1; (29+1)/10 = 3; 0.5/10 = 0.05 → 1; (30+20)/20 = 2.5
    np.testing.assert_allclose(bounded_slowdown(wait, run), [1.0, 3.0, 1.0, 2.5], rtol=TIGHT)
    log = _log([_done(1, "a", 0, 29, 30, 1), _done(2, "a", 0, 0, 0.5, 0.5)])
    assert summarize(log)["mean_bsld"] == pytest.approx((3.0 + 1.0) / 2, rel=TIGHT)


def test_jain_index_is_one_for_equal_users() -> None:
    assert jain_index(np.array([2.5, 2.5, 2.5])) == pytest.approx(1.0, rel=TIGHT)
    log = _log([_done(1, "a", 0, 10, 20, 10), _done(2, "b", 0, 10, 20, 10), _done(3, "b", 5, 15, 25, 10)])
    assert summarize(log)["jain_fairness"] == pytest.approx(1.0, rel=TIGHT)


def test_jain_index_of_unequal_users() -> None:
    # (1 + 3)² / (2 (1 + 9)) = 16 / 20
    assert jain_index(np.array([1.0, 3.0])) == pytest.approx(0.8, rel=TIGHT)


def test_fragmentation_is_zero_without_idle_time_while_pending() -> None:
    assert summarize(_log([_done(1, "a", 0, 0, 10, 10)], idle=0.0, fragmented=0.0))["fragmentation"] == 0.0


@pytest.mark.parametrize(
    "records", [[], [_rejected(1, "a", 0, RejectReason.NO_ELIGIBLE_GPU)]], ids=["empty", "only-rejected"]
)
def test_logs_without_completed_jobs_give_zeros(records: list[JobRecord]) -> None:
    m = summarize(_log(records))
    assert m["n_jobs"] == len(records) and m["n_completed"] == 0
    assert m["rejected_no_eligible_gpu"] == len(records)
    for key in METRIC_DOCS:
        if not key.startswith(("n_", "rejected_")):
            assert m[key] == 0, key


def test_summary_has_every_documented_key_in_order_and_finite_values() -> None:
    m = summarize(HAND_LOG)
    assert list(m) == list(METRIC_DOCS)
    assert {f"rejected_{r.name.lower()}" for r in RejectReason} <= set(m)
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in m.values())
    assert all(doc.endswith("]") for doc in METRIC_DOCS.values()), "every doc names a unit in brackets"


# The steady state. A 4-GPU cluster, 10 jobs (speed 1, base runtime = run: ideal = held, so effective utilization
# and goodput equal utilization); window 0.1 drops ⌊0.1 × 10⌋ = 1 job at each end, by (submit, job id).
#   job  submit start finish GPUs  wait
#   1    0      0     40     2     0     dropped: first
#   2    10     10    30     1     0
#   3    10     20    60     1     10
#   4    20     40    70     2     20
#   5    30     rejected
#   6    40     60    100    1     20
#   7    50     70    90     2     20
#   8    60     100   150    4     40
#   9    80     150   160    1     70    kept: ties with job 10 at 80, lower id
#   10   80     160   200    4     80    dropped: last
# Kept: jobs 2-9 (8 jobs, 7 completed), period [T0, T1] = [10, 80] (70 s × 4 GPUs = 280 GPU-s).
# GPU-seconds inside [10, 80]: job 1 [10, 40] × 2 = 60, job 2 20, job 3 40, job 4 30 × 2 = 60, job 6 [60, 80] 20,
# job 7 [70, 80] × 2 = 20, jobs 8-10 none: 220.
WINDOW_LOG = _log(
    [
        _done(1, "a", 0, 0, 40, 40, n_gpus=2),
        _done(2, "a", 10, 10, 30, 20),
        _done(3, "b", 10, 20, 60, 40),
        _rejected(5, "b", 30, RejectReason.TOO_MANY_GPUS),
        _done(4, "a", 20, 40, 70, 30, n_gpus=2),
        _done(7, "b", 50, 70, 90, 20, n_gpus=2),
        _done(6, "a", 40, 60, 100, 40),
        _done(8, "b", 60, 100, 150, 50, n_gpus=4),
        _done(9, "a", 80, 150, 160, 10),
        _done(10, "b", 80, 160, 200, 40, n_gpus=4),
    ],
    total_gpus=4,
)


@pytest.mark.parametrize(
    "key, expected",
    [
        ("n_jobs", 8),
        ("n_completed", 7),
        ("n_rejected", 1),
        ("mean_wait_s", (0 + 10 + 20 + 20 + 20 + 40 + 70) / 7),  # job 10 kept instead of 9 would give 190 / 7
        ("median_wait_s", 20.0),
        ("utilization", 220 / 280),
        ("effective_utilization", 220 / 280),
        ("goodput", 220 / 280),
        ("makespan_s", 200.0),  # the whole run's: last finish 200 − first submit 0
    ],
)
def test_steady_state_window_on_a_hand_log(key: str, expected: float) -> None:
    assert summarize(WINDOW_LOG, window=0.1)[key] == pytest.approx(expected, rel=TIGHT)


def test_steady_state_window_against_the_whole_run_of_the_hand_log() -> None:
    whole = summarize(WINDOW_LOG)
    # 650 GPU-s held: 2·40 + 20 + 40 + 2·30 + 40 + 2·20 + 4·50 + 10 + 4·40, over 4 GPUs × 200 s
    assert whole["utilization"] == pytest.approx(650 / 800, rel=TIGHT) and whole["n_jobs"] == 10
    assert summarize(WINDOW_LOG, window=(0.0, 0.0)) == whole == summarize(WINDOW_LOG, window=0)
    kept, period = window_records(WINDOW_LOG, (0.1, 0.1))
    assert sorted(r.job.job_id for r in kept) == [2, 3, 4, 5, 6, 7, 8, 9] and period == (10.0, 80.0)
    # (0.1, 0.3): drops job 1, and jobs 10, 9 and 8 at the end; the period is [10, 50]
    assert window_records(WINDOW_LOG, (0.1, 0.3))[1] == (10.0, 50.0)


def test_a_window_that_drops_no_job_still_ends_the_period_at_the_last_submit() -> None:
    # ⌊0.01 × 10⌋ = 0 jobs dropped: every job is kept, but GPU time counts over [0, 80] only, not the drain
    m = summarize(WINDOW_LOG, window=0.01)
    assert m["n_jobs"] == 10 and m["mean_wait_s"] == summarize(WINDOW_LOG)["mean_wait_s"]
    inside = 2 * 40 + 20 + 40 + 2 * 30 + 20 + 2 * 10  # 240 GPU-s inside [0, 80]
    assert m["utilization"] == pytest.approx(inside / (4 * 80), rel=TIGHT)


def test_an_interrupted_job_across_the_period_counts_its_held_time_pro_rata() -> None:
    # job 1 held 1 GPU for 60 s of [0, 100] (preempted once, 20 GPU-s of work lost, 5 of restart overhead); the
    # period [50, 90] (jobs 2 and 3 submitted at 50 and 90; window 0.25 drops ⌊0.25 × 4⌋ = 1 job at each end)
    # covers 40 % of its [first start, finish]: 24 GPU-s held, 8 lost and 2 overhead inside it
    hit = Interruptions(failures=0, preemptions=1, held_s=60.0, overhead_gpu_s=5.0, lost_failure_gpu_s=0.0,
                        lost_preemption_gpu_s=20.0)
    interrupted = _done(1, "a", 0, 0, 100, 35)._replace(interruptions=hit)
    log = _log([interrupted, _done(2, "a", 50, 200, 210, 10), _done(3, "a", 90, 210, 220, 10),
                _done(4, "a", 95, 220, 230, 10)], total_gpus=2)
    m = summarize(log, window=0.25)
    assert m["utilization"] == pytest.approx(24 / (2 * 40), rel=TIGHT)
    assert m["lost_preemption_gpu_hours"] == pytest.approx(8 / 3600, rel=TIGHT)
    assert m["restart_overhead_gpu_hours"] == pytest.approx(2 / 3600, rel=TIGHT)
    assert m["goodput"] == pytest.approx((24 - 8 - 2) / (2 * 40), rel=TIGHT)
    assert m["preemptions"] == 0  # job 1 is not kept: counts are the kept jobs'


@pytest.mark.parametrize("window", [-0.1, 0.5, (0.1, 0.5), (0.2, -0.01), float("nan"), float("inf"), "0.1",
                                    (0.1,), (0.1, 0.1, 0.1), (0.1, "x"), True, None])
def test_bad_windows_are_config_errors(window: object) -> None:
    with pytest.raises(ConfigError, match="metrics window"):
        window_fractions(window)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="metrics window"):
        summarize(WINDOW_LOG, window)  # type: ignore[arg-type]


def test_windows_that_keep_no_job_or_an_empty_period_are_config_errors() -> None:
    assert window_fractions(0.25) == (0.25, 0.25) and window_fractions([0, 0.49]) == (0.0, 0.49)
    with pytest.raises(ConfigError, match="no job to keep"):
        summarize(_log([]), window=0.1)
    same_time = _log([_done(i, "a", 5, 5 + i, 10 + i, 5) for i in range(10)])
    with pytest.raises(ConfigError, match="all submitted at 5 s, so the period is empty"):
        summarize(same_time, window=0.1)
    assert summarize(same_time)["n_completed"] == 10  # the whole run has no period to be empty


def test_every_metric_says_what_the_window_does_with_its_unit() -> None:
    assert list(WINDOW_DOCS) == list(METRIC_DOCS)
    for key, doc in WINDOW_DOCS.items():
        unit = METRIC_DOCS[key][METRIC_DOCS[key].rindex("["):]
        assert doc.endswith(unit), key


def _kept_independently(log: JobLog, head: float, tail: float) -> list[JobRecord]:
    """The kept jobs as the docstring defines them, computed apart from the code under test."""
    order = sorted(log.records, key=lambda r: (r.job.submit_time_s, r.job.job_id))
    n = len(order)
    return order[math.floor(Fraction(str(head)) * n) : n - math.floor(Fraction(str(tail)) * n)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), window=st.sampled_from([0.1, 0.25, 0.49, (0.05, 0.2), (0.0, 0.3), (0.3, 0.0)]))
def test_windowed_metrics_match_independent_computations_on_random_runs(seed, window):
    # random clusters, workloads, failures, outages and preemptions: interrupted and FAILED jobs included
    rng = random.Random(seed)
    cluster, jobs, runtime = large_cluster(rng), large_workload(rng), any_runtime(rng)
    log = drive(cluster, jobs, seed, runtime, check=False, dynamics=any_dynamics(rng, cluster))[0]
    assert summarize(log, window=0) == summarize(log) == summarize(log, window=(0.0, 0.0))
    head, tail = window_fractions(window)
    kept = _kept_independently(log, head, tail)
    t0, t1 = kept[0].job.submit_time_s, kept[-1].job.submit_time_s
    if t1 == t0:
        with pytest.raises(ConfigError, match="the period is empty"):
            summarize(log, window)
        return
    m = summarize(log, window)
    done = [r for r in kept if r.state is JobState.COMPLETED]
    assert m["n_jobs"] == len(kept) and m["n_completed"] == len(done)
    assert m["mean_wait_s"] == pytest.approx(statistics.fmean(r.wait_s for r in done) if done else 0.0, rel=1e-12)
    inside = [(r.job.gpu_share, r.run_s * (max(0.0, min(r.finish_time_s, t1) - max(r.start_time_s, t0))
                                           / (r.finish_time_s - r.start_time_s)))
              for r in log.ran() if r.finish_time_s > r.start_time_s]
    held = sum(share * s for share, s in inside)
    assert m["utilization"] == pytest.approx(held / (log.total_gpus * (t1 - t0)), rel=1e-9, abs=1e-12)
    lost = (m["lost_gpu_hours"] + m["restart_overhead_gpu_hours"]) * 3600
    assert m["goodput"] == pytest.approx((held - lost) / (log.total_gpus * (t1 - t0)), rel=1e-9, abs=1e-12)
    assert m["makespan_s"] == summarize(log)["makespan_s"]
