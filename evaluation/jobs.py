"""The per-job table of a run: one record per submitted job, what the HTML report's Gantt chart and drill-down and
the Batsim export read.

A *job table* is a dict of equal-length columns (JSON-ready: a missing time is ``None``, never NaN, so that a
browser's ``JSON.parse`` reads it), one entry per job of the run's :class:`~envs.core.JobLog`, in the log's order.
:data:`JOB_COLUMNS` documents each column and its unit. :func:`job_rows` turns a table back into one dict per job.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envs.core import JobLog, JobState
from envs.core.joblog import JobRecord

JOB_COLUMNS: dict[str, str] = {
    "job_id": "the job's id in its workload",
    "user": "user name ('-': not given)",
    "team": "team name ('-': not given)",
    "priority": "priority class; higher is more important",
    "partition": "partition or node pool ('' : the cluster's default)",
    "submit_s": "submit time [s]",
    "requested_s": "requested wall time: the user's estimate and limit [s]",
    "n_gpus": "whole GPUs asked for; 1 for a fractional job [count]",
    "gpu_share": "GPUs held, a fractional share counted as a fraction of one GPU [GPUs]",
    "state": "how the job ended: completed, failed (interrupted by failures more often than the retry limit) or "
             "rejected (at submission)",
    "reason": "why a rejected job was rejected; 'timed out' for a job killed at its requested wall time; '' else",
    "start_s": "first start [s]; None for a rejected job",
    "finish_s": "completion, or the failure that made the job failed [s]; None for a rejected job",
    "wait_s": "first start − submit [s]; None for a rejected job",
    "gpus": "global GPU indices of the (last) allocation; [] for a rejected job",
    "runs": "[start_s, end_s] of each run, in order [s]: more than one after a preemption or a failure",
    "run_gpus": "global GPU indices each run held, in the order of runs",
    "run_ends": "what ended each run, in the order of runs: preemption, failure, completed or timed out",
    "preemptions": "runs ended by a preemption [count]",
    "failures": "runs ended by a failure of a GPU or node the job held [count]",
}
"""Each column of a job table, with its meaning and unit."""


def _time(value: float) -> float | None:
    """A time for the table: None for NaN (a job that never started)."""
    return None if math.isnan(value) else float(value)


def _runs(record: JobRecord) -> tuple[list[list[float]], list[list[int]], list[str]]:
    """A job's ``runs``, ``run_gpus`` and ``run_ends`` (:data:`JOB_COLUMNS`): its interrupted runs as the log
    recorded them, then, for a completed job, the run that ended it (a failed job's last run is an interrupted one;
    a rejected job has none)."""
    if record.state is JobState.REJECTED:
        return [], [], []
    interrupted = record.interruptions
    if interrupted is None or not interrupted.runs:  # it ran once
        return ([[float(record.start_time_s), float(record.finish_time_s)]], [[int(g) for g in record.gpus]],
                ["timed out" if record.timed_out else "completed"])
    runs = [[float(start), float(end)] for start, end in interrupted.runs]
    gpus = [list(held) for held in interrupted.run_gpus]
    ends = list(interrupted.run_ends)
    if record.state is JobState.COMPLETED:  # its last run is already in runs: give its GPUs and end
        gpus.append([int(gpu) for gpu in record.gpus])
        ends.append("timed out" if record.timed_out else "completed")
    return runs, gpus, ends


def _reason(record: JobRecord) -> str:
    """The table's ``reason`` of a record (:data:`JOB_COLUMNS`)."""
    if record.reject_reason is not None:
        return record.reject_reason.name.lower()
    return "timed out" if record.timed_out else ""


def job_table(log: JobLog) -> dict[str, list[Any]]:
    """The job table of ``log`` (module docstring): a column per key of :data:`JOB_COLUMNS`."""
    table: dict[str, list[Any]] = {key: [] for key in JOB_COLUMNS}
    for record in log.records:
        job, interruptions = record.job, record.interruptions
        started = record.state is not JobState.REJECTED
        values = {
            "job_id": job.job_id, "user": job.user, "team": job.team, "priority": job.priority,
            "partition": job.partition, "submit_s": float(job.submit_time_s),
            "requested_s": float(job.runtime_estimate_s), "n_gpus": job.n_gpus, "gpu_share": job.gpu_share,
            "state": record.state.name.lower(), "reason": _reason(record),
            "start_s": _time(record.start_time_s) if started else None,
            "finish_s": _time(record.finish_time_s) if started else None,
            "wait_s": _time(record.wait_s) if started else None,
            "gpus": [int(gpu) for gpu in record.gpus],
            **dict(zip(("runs", "run_gpus", "run_ends"), _runs(record), strict=True)),
            "preemptions": interruptions.preemptions if interruptions is not None else 0,
            "failures": interruptions.failures if interruptions is not None else 0,
        }
        for key, value in values.items():
            table[key].append(value)
    return table


def job_rows(table: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """One dict per job of a job table, keys in :data:`JOB_COLUMNS` order. Raises ``ValueError`` when a column is
    missing or the columns differ in length."""
    missing = [key for key in JOB_COLUMNS if key not in table]
    if missing:
        raise ValueError(f"job table lacks the column(s) {', '.join(missing)}")
    lengths = {len(table[key]) for key in JOB_COLUMNS}
    if len(lengths) > 1:
        raise ValueError(f"job table columns differ in length ({sorted(lengths)})")
    for i in range(lengths.pop() if lengths else 0):
        yield {key: table[key][i] for key in JOB_COLUMNS}


def run_spans(table: Mapping[str, Sequence[Any]]) -> list[tuple[int, float, float, list[int]]]:
    """Every run of the jobs that ran, as (job id, start [s], end [s], GPUs it held), by start, then job id."""
    spans = [(job["job_id"], start, end, gpus) for job in job_rows(table) if job["state"] != "rejected"
             for (start, end), gpus in zip(job["runs"], job["run_gpus"], strict=True)]
    return sorted(spans, key=lambda span: (span[1], span[0]))
