"""Run metrics (SPEC §7): one flat dict of numbers per simulation run, computed from its job log.

Definitions, over the jobs that completed (rejected jobs never ran; they are counted by reason; FAILED jobs, which
ran but were interrupted by failures more often than the retry limit, are counted and their GPU time is used):

- wait = first start − submit; JCT = finish − submit; run = the time the job held GPUs over all its runs
  (finish − start for a job that ran once) [s];
- bounded slowdown = max(1, (queued + run) / max(run, 10 s)), queued = JCT − run (the wait, plus for an
  interrupted job the time it waited again after each interruption) [dimensionless];
- makespan = last finish − first submit, over completed and FAILED jobs [s];
- utilization = Σ gpu_share × run / (total GPUs × makespan), over completed and FAILED jobs: GPU time held,
  including time lost to slow GPU types, spread placements, data staging, rolled-back work and restart overhead;
- goodput = (GPU time held − lost − restart overhead) / (total GPUs × makespan): held time whose work was kept;
- lost GPU-hours: computing rolled back to the last checkpoint by a failure or a preemption (the whole held time,
  overhead excepted, of a FAILED job); restart overhead GPU-hours: the overhead paid by restarts;
- effective utilization = Σ gpu_share × ideal run / (total GPUs × makespan), where the ideal run is the job's base
  runtime at its allocation's speed (``JobRecord.ideal_run_s``): only useful progress counts;
- fragmentation = ∫ idle GPU share that cannot host the smallest pending job dt / ∫ idle GPU share dt, both over
  the times some job was pending (the simulator's time averages); 0 when nothing ever waited on idle GPUs;
- Jain's fairness = (Σx)² / (n Σx²) over the users' mean bounded slowdowns x (1 = all users equally served);
- per priority class: mean and p95 wait of the completed jobs of the highest and of the lowest priority class among
  them (the same jobs when there is one class).

Percentiles (median, p95, p99) use numpy's default method (linear interpolation between order statistics).
Empty input never raises: with no completed job every statistic, the makespan, both utilizations and the fairness
index are 0.0 (check ``n_completed``). Counts are ints, everything else floats; :data:`METRIC_DOCS` lists every key
in the order :func:`summarize` returns them, with its meaning and unit.
"""

from __future__ import annotations

import numpy as np

from envs.core.job import JobState, RejectReason
from envs.core.joblog import JobLog

HOUR_S = 3600.0
"""Seconds per hour (GPU-hours = GPU-seconds / HOUR_S)."""

BSLD_FLOOR_S = 10.0
"""Runtimes shorter than this count as this long in the bounded slowdown [s]."""

_STATS = (("mean", "mean"), ("median", "median"), ("p95", "95th percentile"), ("p99", "99th percentile"))
_SERIES = (
    ("wait", "_s", "wait (start − submit) of completed jobs [s]"),
    ("jct", "_s", "job completion time (finish − submit) of completed jobs [s]"),
    ("bsld", "", "bounded slowdown max(1, (wait + run) / max(run, 10 s)) of completed jobs [dimensionless]"),
)


def _build_docs() -> dict[str, str]:
    docs = {
        "n_jobs": "jobs submitted [count]",
        "n_completed": "jobs that ran to completion [count]",
        "n_rejected": "jobs rejected at submission, all reasons [count]",
    }
    for reason in RejectReason:
        docs[f"rejected_{reason.name.lower()}"] = f"jobs rejected because {reason.value} [count]"
    for series, unit, meaning in _SERIES:
        for key, word in _STATS:
            docs[f"{key}_{series}{unit}"] = f"{word} of the {meaning}"
    docs.update(
        {
            "makespan_s": "last finish − first submit, over completed jobs [s]",
            "utilization": "allocated GPU-seconds (Σ gpu_share × run) / (total GPUs × makespan) [fraction]",
            "effective_utilization": "useful GPU-seconds (Σ gpu_share × ideal run at the allocation's speed) / "
            "(total GPUs × makespan) [fraction]",
            "fragmentation": "idle GPU-seconds that could not host the smallest pending job / idle GPU-seconds, "
            "while jobs were pending [fraction]",
            "jain_fairness": "Jain's index (Σx)² / (n Σx²) over users' mean bounded slowdowns [1/n .. 1]",
            "timed_out": "completed jobs killed at their requested wall time [count]",
            "quota_violations": "starts that left a team, user, queue or cohort above its quota; must be 0 [count]",
            "borrowed_gpu_hours": "∫ GPUs held above their queue's nominal quota dt, all queues [GPU-hours]",
            "reclaims": "jobs preempted to give borrowed quota back to its lender [count]",
            "reclaimed_gpus": "Σ GPU shares of the reclaimed jobs [GPUs]",
            "reclaimed_gpu_hours": "work rolled back by reclaims, part of lost_preemption_gpu_hours [GPU-hours]",
            "preemptions": "runs ended by a preemption [count]",
            "restarts": "starts after a job's first one, after a preemption or a failure [count]",
            "lost_gpu_hours": "GPU time of rolled-back work, to failures and preemptions [GPU-hours]",
            "n_failed": "jobs that ended FAILED: interrupted by failures more often than the retry limit [count]",
            "failure_interruptions": "runs ended by a failure of a GPU or node they held [count]",
            "lost_failure_gpu_hours": "GPU time lost to failures (rolled back, or all of a FAILED job's) [GPU-hours]",
            "lost_preemption_gpu_hours": "GPU time of work rolled back by preemptions [GPU-hours]",
            "restart_overhead_gpu_hours": "GPU time spent on restart overhead [GPU-hours]",
            "goodput": "(GPU time held − lost − restart overhead) / (total GPUs × makespan) [fraction]",
            "failed_gpu_hours": "∫ failed GPUs dt: capacity out of the pool [GPU-hours]",
            "scheduler_downtime_s": "time the scheduler was down during the run [s]",
            "outage_waiting_jobs": "jobs pending at some moment while the scheduler was down [count]",
        }
    )
    for end in ("top", "bottom"):
        for key, word in (("mean", "mean"), ("p95", "95th percentile")):
            which = "highest" if end == "top" else "lowest"
            docs[f"{key}_wait_s_{end}_class"] = f"{word} wait of the completed jobs of the {which} priority class [s]"
    return docs


METRIC_DOCS: dict[str, str] = _build_docs()
"""Every key of :func:`summarize`'s result, in order, with its meaning and unit."""


def _describe(prefix: str, values: np.ndarray) -> dict[str, float]:
    """mean, median, p95, p99 of ``values`` as ``{"mean_<prefix>": ...}``; all 0.0 when ``values`` is empty."""
    if values.size == 0:
        return {f"{key}_{prefix}": 0.0 for key, _ in _STATS}
    median, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        f"mean_{prefix}": float(values.mean()),
        f"median_{prefix}": float(median),
        f"p95_{prefix}": float(p95),
        f"p99_{prefix}": float(p99),
    }


def bounded_slowdown(wait_s: np.ndarray, run_s: np.ndarray) -> np.ndarray:
    """max(1, (wait + run) / max(run, 10 s)), elementwise [dimensionless]."""
    return np.maximum(1.0, (wait_s + run_s) / np.maximum(run_s, BSLD_FLOOR_S))


def jain_index(values: np.ndarray) -> float:
    """Jain's fairness index (Σx)² / (n Σx²) of non-negative ``values``; 0.0 when empty or all zero."""
    square_sum = float(np.square(values).sum())
    return float(values.sum() ** 2 / (values.size * square_sum)) if square_sum > 0 else 0.0


def _group_means(keys: list[str], values: np.ndarray) -> np.ndarray:
    """Mean of ``values`` per distinct key (in sorted key order); empty when there are no values."""
    if not keys:
        return np.zeros(0)
    _, group = np.unique(keys, return_inverse=True)
    return np.bincount(group, weights=values) / np.bincount(group)


def summarize(log: JobLog) -> dict[str, float]:
    """The metrics of one run as a flat dict, keys in :data:`METRIC_DOCS` order (see the module docstring)."""
    records = log.records
    done = [r for r in records if r.state is JobState.COMPLETED]
    failed = [r for r in records if r.state is JobState.FAILED]
    n = len(done)
    submit = np.fromiter((r.job.submit_time_s for r in done), dtype=np.float64, count=n)
    start = np.fromiter((r.start_time_s for r in done), dtype=np.float64, count=n)
    finish = np.fromiter((r.finish_time_s for r in done), dtype=np.float64, count=n)
    share = np.fromiter((r.job.gpu_share for r in done), dtype=np.float64, count=n)
    base_s = np.fromiter((r.job.runtime_s for r in done), dtype=np.float64, count=n)
    speed = np.fromiter((r.speed for r in done), dtype=np.float64, count=n)
    wait, jct = start - submit, finish - submit
    interrupted = [i for i, r in enumerate(done) if r.interruptions is not None]
    if interrupted:
        run = np.fromiter((r.run_s for r in done), dtype=np.float64, count=n)
        queued = wait.copy()
        queued[interrupted] = jct[interrupted] - run[interrupted]
    else:
        run, queued = finish - start, wait
    bsld = bounded_slowdown(queued, run)
    ideal = np.minimum(base_s / speed, run)  # the vector form of JobRecord.ideal_run_s

    out: dict[str, float] = {"n_jobs": len(records), "n_completed": n,
                             "n_rejected": len(records) - n - len(failed)}
    reasons = [r.reject_reason for r in records if r.state is JobState.REJECTED]
    for reason in RejectReason:
        out[f"rejected_{reason.name.lower()}"] = reasons.count(reason)
    out |= _describe("wait_s", wait) | _describe("jct_s", jct) | _describe("bsld", bsld)

    held = float(share @ run) + sum(r.job.gpu_share * r.run_s for r in failed)
    ends, submits = [r.finish_time_s for r in failed], [r.job.submit_time_s for r in failed]
    if n:
        ends.append(float(finish.max()))
        submits.append(float(submit.min()))
    makespan = max(ends) - min(submits) if ends else 0.0
    capacity_gpu_s = log.total_gpus * makespan
    out["makespan_s"] = makespan
    out["utilization"] = held / capacity_gpu_s if capacity_gpu_s > 0 else 0.0
    out["effective_utilization"] = float(share @ ideal) / capacity_gpu_s if capacity_gpu_s > 0 else 0.0
    idle = log.idle_gpu_s_while_pending
    out["fragmentation"] = log.fragmented_gpu_s / idle if idle > 0 else 0.0

    out["jain_fairness"] = jain_index(_group_means([r.job.user for r in done], bsld))
    out["timed_out"] = sum(r.timed_out for r in done)
    hit = [r.interruptions for r in records if r.interruptions is not None]
    lost_failure = sum(i.lost_failure_gpu_s for i in hit)
    lost_preemption = sum(i.lost_preemption_gpu_s for i in hit)
    overhead = sum(i.overhead_gpu_s for i in hit)
    out |= {
        "quota_violations": log.quota_violations,
        "borrowed_gpu_hours": log.borrowed_gpu_s / HOUR_S,
        "reclaims": log.reclaims,
        "reclaimed_gpus": log.reclaimed_gpus,
        "reclaimed_gpu_hours": log.reclaim_lost_gpu_s / HOUR_S,
        "preemptions": sum(i.preemptions for i in hit),
        "restarts": sum(r.restarts for r in records),
        "lost_gpu_hours": (lost_failure + lost_preemption) / HOUR_S,
        "n_failed": len(failed),
        "failure_interruptions": sum(i.failures for i in hit),
        "lost_failure_gpu_hours": lost_failure / HOUR_S,
        "lost_preemption_gpu_hours": lost_preemption / HOUR_S,
        "restart_overhead_gpu_hours": overhead / HOUR_S,
        "goodput": (held - lost_failure - lost_preemption - overhead) / capacity_gpu_s if capacity_gpu_s > 0 else 0.0,
        "failed_gpu_hours": log.down_gpu_s / HOUR_S,
        "scheduler_downtime_s": log.scheduler_downtime_s,
        "outage_waiting_jobs": log.outage_waiting_jobs,
    }
    priority = np.fromiter((r.job.priority for r in done), dtype=np.int64, count=n)
    for end, pick in (("top", np.max), ("bottom", np.min)):
        waits = wait[priority == pick(priority)] if n else wait
        out[f"mean_wait_s_{end}_class"] = float(waits.mean()) if waits.size else 0.0
        out[f"p95_wait_s_{end}_class"] = float(np.percentile(waits, 95)) if waits.size else 0.0
    return out
