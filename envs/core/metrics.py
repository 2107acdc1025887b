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
Over the whole run empty input never raises: with no completed job every statistic, the makespan, both utilizations
and the fairness index are 0.0 (check ``n_completed``). Counts are ints, everything else floats; :data:`METRIC_DOCS`
lists every key in the order :func:`summarize` returns them, with its meaning and unit.

**The steady state** (``summarize(log, window=(head, tail))``, ``evaluate.py --metrics-window``). The window leaves
the warm-up and the drain out. Order the n submitted jobs (rejected ones included) by submit time, ties by job id;
the window drops the first ⌊head × n⌋ and the last ⌊tail × n⌋ of them and *keeps* the rest (0 ≤ head, tail < 0.5,
so at least one job is kept). The *period* runs from the first kept job's submit time T0 to the last kept job's
T1 (even with tail = 0 it ends at the last arrival: the drain after it is left out). Then, per metric
(:data:`WINDOW_DOCS` says it key by key):

- job metrics (counts, wait, JCT and bounded-slowdown statistics, fairness, per-class waits, timed-out jobs,
  preemptions, restarts and failure interruptions suffered) are those of the kept jobs only;
- time metrics (utilization, effective utilization, goodput, the lost and restart-overhead GPU-hours) count the GPU
  time of every job, kept or not, that falls inside the period, over total GPUs × (T1 − T0): a job that ran once
  held its GPUs over [start, finish], which is clipped to the period exactly; the log keeps only the total held time
  of an interrupted job (preempted or hit by failures), so its held, useful, lost and overhead time are spread
  evenly over [first start, finish] and the part inside the period counted (exact when it ran wholly inside or
  wholly outside);
- the makespan stays the whole run's (T1 − T0 would be the same for every policy: submit times are the workload's);
- what the simulator integrates over the whole run without a time series (fragmentation, borrowed and failed
  GPU-hours, reclaims, quota violations, scheduler downtime and the jobs waiting through it) stays the whole run's.

The window (0, 0) is the whole run: exactly the definitions above. A window that keeps no job (an empty log) or an
empty period (every kept job submitted at one instant) raises :class:`~envs.core.errors.ConfigError`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from envs.core.errors import ConfigError
from envs.core.job import JobState, RejectReason
from envs.core.joblog import JobLog, JobRecord

HOUR_S = 3600.0
"""Seconds per hour (GPU-hours = GPU-seconds / HOUR_S)."""

BSLD_FLOOR_S = 10.0
"""Runtimes shorter than this count as this long in the bounded slowdown [s]."""

WHOLE_RUN = (0.0, 0.0)
"""The metrics window that drops nothing: (head, tail) fractions of the jobs [fraction]."""

Window = float | Sequence[float]
"""A metrics window as given: F (the same fraction at both ends) or (head, tail) [fraction of the jobs]."""

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

_PERIOD_FRACTION = "inside the period / (total GPUs × (T1 − T0)) [fraction]"
_WHOLE_RUN_INTEGRAL = "not windowed: the simulator's whole-run figure (the log has no time series of it)"
_WINDOWED: dict[str, str] = {
    "makespan_s": "not windowed: the whole run's last finish − first submit [s]",
    "utilization": f"GPU-seconds held (every job's, clipped) {_PERIOD_FRACTION}",
    "effective_utilization": f"useful GPU-seconds (every job's, clipped) {_PERIOD_FRACTION}",
    "goodput": f"GPU-seconds held − lost − restart overhead (every job's, clipped) {_PERIOD_FRACTION}",
    **{key: "the part inside the period, every job's [GPU-hours]" for key in (
        "lost_gpu_hours", "lost_failure_gpu_hours", "lost_preemption_gpu_hours", "restart_overhead_gpu_hours")},
    **{key: f"{_WHOLE_RUN_INTEGRAL} {METRIC_DOCS[key][METRIC_DOCS[key].rindex('['):]}" for key in (
        "fragmentation", "quota_violations", "borrowed_gpu_hours", "reclaims", "reclaimed_gpus",
        "reclaimed_gpu_hours", "failed_gpu_hours", "scheduler_downtime_s", "outage_waiting_jobs")},
}
WINDOW_DOCS: dict[str, str] = {
    key: _WINDOWED.get(key, f"the kept jobs only {doc[doc.rindex('['):]}") for key, doc in METRIC_DOCS.items()
}
"""What a metrics window does to each key of :func:`summarize`'s result, with its unit (module docstring): kept jobs
only, GPU time inside the period [T0, T1], or not windowed."""


def window_fractions(window: Window) -> tuple[float, float]:
    """``window`` as (head, tail): the fractions of the jobs, by submit time, left out at the start and at the end.

    A number F means (F, F). Raises :class:`ConfigError` unless each fraction is a number in [0, 0.5).
    """
    parts = (window, window) if isinstance(window, numbers.Real) else window
    if isinstance(parts, str) or not isinstance(parts, Sequence) or len(parts) != 2:
        raise ConfigError(f"metrics window {window!r}: give a fraction F or a pair (head, tail) of fractions")
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, numbers.Real):
            raise ConfigError(f"metrics window {window!r}: {part!r} is not a number")
        if not 0 <= part < 0.5:
            raise ConfigError(f"metrics window {window!r}: each fraction must be >= 0 and < 0.5, got {part!r}")
    return float(parts[0]), float(parts[1])


def window_records(log: JobLog, window: Window = WHOLE_RUN) -> tuple[list[JobRecord], tuple[float, float] | None]:
    """(the records of the jobs ``window`` keeps, in log order; its period (T0, T1) [s]), as the module docstring
    defines them; every record and None for the whole run (0, 0).

    Raises :class:`ConfigError` for a bad window, one that keeps no job, or an empty period.
    """
    head, tail = window_fractions(window)
    records = log.records
    if (head, tail) == WHOLE_RUN:
        return list(records), None
    n = len(records)
    order = sorted(range(n), key=lambda i: (records[i].job.submit_time_s, records[i].job.job_id))
    # rounded first: 0.29 × 100 is 28.999999999999996 in floating point, and drops 29 jobs, not 28
    first, last = (math.floor(round(fraction * n, 9)) for fraction in (head, tail))
    kept = sorted(order[first : n - last])
    where = f"metrics window {head:g},{tail:g}"
    if not kept:
        raise ConfigError(f"{where}: the run has no job to keep")
    period = (records[order[first]].job.submit_time_s, records[order[n - last - 1]].job.submit_time_s)
    if period[1] <= period[0]:
        raise ConfigError(f"{where}: the {len(kept)} kept jobs of {n} were all submitted at {period[0]:g} s, "
                          "so the period is empty")
    return [records[i] for i in kept], period


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


def _held_s(records: Sequence[JobRecord]) -> np.ndarray:
    """Time each job held GPUs over all its runs [s] (``JobRecord.run_s``)."""
    return np.fromiter((r.run_s for r in records), dtype=np.float64, count=len(records))


def _inside_fractions(records: Sequence[JobRecord], period: tuple[float, float]) -> np.ndarray:
    """The fraction of each job's [first start, finish] that lies inside ``period`` [fraction]: of a job that ran
    once, the part of its GPU time inside the period; of an interrupted one, the same share of its held time."""
    n = len(records)
    start = np.fromiter((r.start_time_s for r in records), dtype=np.float64, count=n)
    finish = np.fromiter((r.finish_time_s for r in records), dtype=np.float64, count=n)
    span = finish - start
    inside = np.clip(np.minimum(finish, period[1]) - np.maximum(start, period[0]), 0.0, None)
    return np.divide(inside, span, out=np.zeros(n), where=span > 0)


def summarize(log: JobLog, window: Window = WHOLE_RUN) -> dict[str, float]:
    """The metrics of one run as a flat dict, keys in :data:`METRIC_DOCS` order (see the module docstring).

    ``window``: the fraction of the jobs (by submit time) to leave out at each end, F or (head, tail); (0, 0), the
    default, is the whole run. With a window, job metrics are the kept jobs' and time metrics those of the period
    from the first to the last kept job's submit time (:data:`WINDOW_DOCS`); a bad window, one that keeps no job
    or an empty period raise :class:`ConfigError`.
    """
    records, period = window_records(log, window)
    done = [r for r in records if r.state is JobState.COMPLETED]
    failed = [r for r in records if r.state is JobState.FAILED]
    n = len(done)
    submit = np.fromiter((r.job.submit_time_s for r in done), dtype=np.float64, count=n)
    start = np.fromiter((r.start_time_s for r in done), dtype=np.float64, count=n)
    finish = np.fromiter((r.finish_time_s for r in done), dtype=np.float64, count=n)
    wait, jct = start - submit, finish - submit
    run = _held_s(done)
    interrupted = [i for i, r in enumerate(done) if r.interruptions is not None]
    queued = wait.copy()
    queued[interrupted] = jct[interrupted] - run[interrupted]
    bsld = bounded_slowdown(queued, run)

    out: dict[str, float] = {"n_jobs": len(records), "n_completed": n,
                             "n_rejected": len(records) - n - len(failed)}
    reasons = [r.reject_reason for r in records if r.state is JobState.REJECTED]
    for reason in RejectReason:
        out[f"rejected_{reason.name.lower()}"] = reasons.count(reason)
    out |= _describe("wait_s", wait) | _describe("jct_s", jct) | _describe("bsld", bsld)

    # GPU time: every job that held GPUs, weighted by the part of its time inside the period (1 for the whole run)
    ran = log.ran()
    m = len(ran)
    ran_submit = np.fromiter((r.job.submit_time_s for r in ran), dtype=np.float64, count=m)
    ran_finish = np.fromiter((r.finish_time_s for r in ran), dtype=np.float64, count=m)
    makespan = float(ran_finish.max() - ran_submit.min()) if m else 0.0
    weight = np.ones(m) if period is None else _inside_fractions(ran, period)
    share = np.fromiter((r.job.gpu_share for r in ran), dtype=np.float64, count=m)
    held_s = _held_s(ran)
    ideal_s = np.fromiter((r.ideal_run_s if r.state is JobState.COMPLETED else 0.0 for r in ran), dtype=np.float64,
                          count=m)
    held = float(share @ (held_s * weight))
    hit = [(w, r.interruptions) for w, r in zip(weight.tolist(), ran, strict=True) if r.interruptions is not None]
    lost_failure = sum(w * i.lost_failure_gpu_s for w, i in hit)
    lost_preemption = sum(w * i.lost_preemption_gpu_s for w, i in hit)
    overhead = sum(w * i.overhead_gpu_s for w, i in hit)
    capacity_gpu_s = log.total_gpus * (makespan if period is None else period[1] - period[0])
    out["makespan_s"] = makespan
    out["utilization"] = held / capacity_gpu_s if capacity_gpu_s > 0 else 0.0
    out["effective_utilization"] = float(share @ (ideal_s * weight)) / capacity_gpu_s if capacity_gpu_s > 0 else 0.0
    idle = log.idle_gpu_s_while_pending
    out["fragmentation"] = log.fragmented_gpu_s / idle if idle > 0 else 0.0

    out["jain_fairness"] = jain_index(_group_means([r.job.user for r in done], bsld))
    out["timed_out"] = sum(r.timed_out for r in done)
    kept_hit = [r.interruptions for r in records if r.interruptions is not None]
    out |= {
        "quota_violations": log.quota_violations,
        "borrowed_gpu_hours": log.borrowed_gpu_s / HOUR_S,
        "reclaims": log.reclaims,
        "reclaimed_gpus": log.reclaimed_gpus,
        "reclaimed_gpu_hours": log.reclaim_lost_gpu_s / HOUR_S,
        "preemptions": sum(i.preemptions for i in kept_hit),
        "restarts": sum(r.restarts for r in records),
        "lost_gpu_hours": (lost_failure + lost_preemption) / HOUR_S,
        "n_failed": len(failed),
        "failure_interruptions": sum(i.failures for i in kept_hit),
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
