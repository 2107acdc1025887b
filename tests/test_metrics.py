"""Run metrics (SPEC §7) on small hand-built logs, every figure worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs.core.job import Job, JobState, RejectReason
from envs.core.joblog import JobLog, JobRecord
from envs.core.metrics import METRIC_DOCS, bounded_slowdown, jain_index, summarize

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
