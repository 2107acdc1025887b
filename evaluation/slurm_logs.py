"""What a live Slurm run leaves in its folder, read back into a record's jobs: ``jobcomp/filetxt`` lines (job names,
states, whole seconds) and ``slurmctld.log`` (submissions, starts by the main scheduler or by backfill, ends and
requeues, with millisecond timestamps). ``benchmarks/slurm_live.py`` writes the folder; this reads it anywhere."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

from evaluation.slurm_replay import SlurmCase

CASE_JOB_KEYS = ("id", "gpus", "nodes", "time_min", "run_s", "partition", "account", "qos")
"""What a record keeps of each case job (its submit offset becomes Slurm's own submission time)."""


def jobcomp_runs(path: Path) -> dict[int, list[dict[str, str]]]:
    """The ``key=value`` fields of every ``jobcomp/filetxt`` line, by Slurm job id, in the order logged."""
    runs: dict[int, list[dict[str, str]]] = {}
    if not path.exists():
        return runs
    for line in path.read_text().splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "JobId" in fields:
            runs.setdefault(int(fields["JobId"]), []).append(fields)
    return runs


CTLD_EVENTS = (
    (re.compile(r"slurmctld version \S+ started"), "origin"),
    (re.compile(r"priority/multifactor: _read_last_decay_ran"), "decay"),
    (re.compile(r"_slurm_rpc_submit_batch_job: JobId=(\d+) "), "submit"),
    (re.compile(r"sched: Allocate JobId=(\d+) "), "main"),
    (re.compile(r"sched/backfill: _start_job: Started JobId=(\d+) "), "backfill"),
    (re.compile(r"_job_complete: JobId=(\d+) done"), "end"),
    (re.compile(r"preempted JobId=(\d+) has been requeued"), "requeued"),
)
"""What ``slurmctld.log`` says, with millisecond timestamps: its start, the decay thread's start (priority/multifactor:
its first pass), each submission, each start (by the main scheduler or by backfill), each end and each requeue by
preemption (the end of an earlier run)."""


def ctld_events(path: Path) -> tuple[dict[str, float], dict[int, list[tuple[str, float]]]]:
    """({"origin": slurmctld's start, "decay": the decay thread's start, if any}, per Slurm job id its (event, Unix
    time) in log order) from ``slurmctld.log``."""
    marks: dict[str, float] = {}
    events: dict[int, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("["):
            continue
        stamp, _, text = line[1:].partition("] ")
        for pattern, kind in CTLD_EVENTS:
            match = pattern.search(text)
            if match is None:
                continue
            t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f").timestamp()
            if kind in ("origin", "decay"):
                marks.setdefault(kind, t)
            else:
                events.setdefault(int(match.group(1)), []).append((kind, t))
            break
    if "origin" not in marks:
        raise RuntimeError(f"{path}: no 'slurmctld version ... started' line")
    return marks, events


def read_run(case: SlurmCase, folder: Path) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(the Unix times of slurmctld's and its decay thread's start, the case's jobs with what Slurm did) from a run
    folder: the job names (``g<id>``) and states from jobcomp.txt, the times from slurmctld.log (checked against
    jobcomp's seconds)."""
    marks, events = ctld_events(folder / "slurmctld.log")
    origin = marks["origin"]
    by_name = {runs[-1]["Name"]: (slurm_id, runs) for slurm_id, runs in jobcomp_runs(folder / "jobcomp.txt").items()}
    jobs = []
    for job in case.jobs:
        slurm_id, runs = by_name[f"g{job['id']}"]
        seen = events.get(slurm_id, [])
        submits = [t for kind, t in seen if kind == "submit"]
        starts = [(kind, t) for kind, t in seen if kind in ("main", "backfill")]
        ends = [t for kind, t in seen if kind in ("end", "requeued")]
        if not submits or not starts or len(ends) != len(starts):
            raise RuntimeError(f"slurmctld.log lacks the submission, starts or ends of Slurm job {slurm_id}")
        last = runs[-1]
        for t, field in ((starts[-1][1], "StartTime"), (ends[-1], "EndTime")):
            if not 0 <= t - _epoch(last[field]) < 1.5:  # jobcomp truncates; the log line may come a few ms late
                raise RuntimeError(f"Slurm job {slurm_id}: slurmctld.log and jobcomp.txt disagree on its {field}")
        earlier = [{"start_s": round(s - origin, 3), "end_s": round(e - origin, 3), "started_by": kind,
                    "state": "REQUEUED"} for (kind, s), e in zip(starts[:-1], ends[:-1], strict=True)]
        jobs.append({**{k: v for k, v in job.items() if k in CASE_JOB_KEYS}, "slurm_id": slurm_id,
                     "submit_s": round(submits[0] - origin, 3), "start_s": round(starts[-1][1] - origin, 3),
                     "end_s": round(ends[-1] - origin, 3), "started_by": starts[-1][0], "state": last["JobState"],
                     "node_list": last.get("NodeList", ""),
                     **({"earlier_runs": earlier} if earlier else {})})
    return marks, jobs


def _epoch(text: str) -> int:
    return int(datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp())
