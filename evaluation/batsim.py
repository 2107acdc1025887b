"""Batsim's ``_jobs.csv``: the jobs of a run in the columns Batsim writes, so that evalys and the other tools of
the HPC scheduling field read our schedules.

One file per run, ``PREFIX_jobs.csv`` as Batsim names it, with :data:`BATSIM_COLUMNS` in Batsim's order. A resource
is a GPU (global index); ``allocated_resources`` is a Batsim interval set (``0-3 8``: GPUs 0 to 3 and 8). How our
jobs map onto Batsim's:

- a job is a ``delay`` profile (it runs for a time fixed in advance); ``requested_number_of_resources`` is its whole
  GPUs (1 for a fractional share, whose share is in ``metadata``); ``requested_time`` its requested wall time;
- ``final_state``: ``COMPLETED_SUCCESSFULLY`` (``success`` 1), ``COMPLETED_WALLTIME_REACHED`` (killed at its
  requested time, ``success`` 0) or ``COMPLETED_FAILED`` (interrupted by failures more often than the retry limit,
  ``success`` 0);
- a job that ran once is one row; a job that a preemption or a failure interrupted is one row per run, as Batsim
  writes a job that its scheduler killed and resubmitted: the first run keeps the job's id, run k (from 0) is
  ``ID#k``, submitted when the run before it ended; an interrupted run is ``COMPLETED_KILLED`` (``success`` 0), a
  failure that ended the job for good ``COMPLETED_FAILED``; ``metadata`` names the job, the run and what ended it;
- ``stretch`` is turnaround / execution time, as Batsim computes it; ``consumed_energy`` is -1 (Batsim's value when
  energy is not simulated);
- rejected jobs never started: like Batsim, the file holds only the jobs that ran; :func:`write_batsim` says how
  many it left out.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.core.errors import ConfigError
from envs.core.files import write_atomically
from evaluation.jobs import job_rows

BATSIM_COLUMNS = ("job_id", "workload_name", "profile", "submission_time", "requested_number_of_resources",
                  "requested_time", "success", "final_state", "starting_time", "execution_time", "finish_time",
                  "waiting_time", "turnaround_time", "stretch", "consumed_energy", "allocated_resources", "metadata")
"""Batsim's ``_jobs.csv`` columns, in its order."""
FINAL_STATES = {"completed": "COMPLETED_SUCCESSFULLY", "timed out": "COMPLETED_WALLTIME_REACHED",
                "failed": "COMPLETED_FAILED", "preemption": "COMPLETED_KILLED", "failure": "COMPLETED_KILLED"}
"""Batsim's final state of each way a run can end (a run ended by a failure that made its job failed:
``COMPLETED_FAILED``)."""
UNSAFE = re.compile(r"[^A-Za-z0-9._@-]+")
"""Characters a file-name prefix does not keep (policy names hold ``+``, ``/`` and ``:``)."""


def interval_set(indices: Iterable[int]) -> str:
    """Batsim's interval set of ``indices``: sorted, consecutive runs as ``a-b``, separated by spaces."""
    parts: list[str] = []
    values = sorted(set(indices))
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            first, last = values[start], values[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return " ".join(parts)


def _run_rows(job: Mapping[str, Any], workload: str) -> list[dict[str, Any]]:
    """The rows of one job that ran: one per run (module docstring)."""
    rows = []
    runs = job["runs"]
    for k, ((start, end), gpus, ending) in enumerate(zip(runs, job["run_gpus"], job["run_ends"], strict=True)):
        submitted = job["submit_s"] if k == 0 else runs[k - 1][1]
        last = k == len(runs) - 1
        state = FINAL_STATES["failed" if last and job["state"] == "failed" else ending]
        metadata = {key: job[key] for key in ("user", "team", "priority", "gpu_share")}
        rows.append({
            "job_id": job["job_id"] if k == 0 else f"{job['job_id']}#{k}", "workload_name": workload,
            "profile": "delay", "submission_time": submitted, "requested_number_of_resources": job["n_gpus"],
            "requested_time": job["requested_s"], "success": int(state == FINAL_STATES["completed"]),
            "final_state": state, "starting_time": start, "execution_time": end - start, "finish_time": end,
            "waiting_time": start - submitted, "turnaround_time": end - submitted,
            "stretch": (end - submitted) / (end - start) if end > start else 1.0, "consumed_energy": -1,
            "allocated_resources": interval_set(gpus),
            "metadata": json.dumps({**metadata, "job_id": job["job_id"], "run": k + 1, "runs": len(runs),
                                    "ended_by": ending}, separators=(",", ":")),
        })
    return rows


def batsim_rows(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``_jobs.csv`` rows of a run's trace (its ``jobs`` table, :mod:`evaluation.jobs`): a row per run of each
    job that ran, jobs in the table's order."""
    return [row for job in job_rows(trace["jobs"]) if job["state"] != "rejected"
            for row in _run_rows(job, trace["workload"])]


def file_prefix(trace: Mapping[str, Any]) -> str:
    """A run's file-name prefix: policy, case and seed, with unsafe characters as ``-``."""
    return UNSAFE.sub("-", f"{trace['policy']}_{trace['workload']}_seed{trace['seed']}").strip("-")


def prepare_folder(folder: Path) -> None:
    """Create the export's folder, or raise a one-line :class:`ConfigError` saying why it cannot be."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--export batsim: {folder} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--export batsim: cannot create {folder} ({exc.strerror or exc})") from None


def write_batsim(folder: Path, traces: Sequence[Mapping[str, Any]]) -> tuple[list[Path], int]:
    """Write each run's ``PREFIX_jobs.csv`` into ``folder`` (created if need be; a prefix shared by two runs gets
    ``-2``, ``-3``, ...); return the paths, in the order of ``traces``, and how many rejected jobs were left out."""
    prepare_folder(folder)
    paths: list[Path] = []
    left_out = 0
    for trace in traces:
        prefix = file_prefix(trace)
        taken = {path.name for path in paths}
        number = 1
        while f"{prefix}{f'-{number}' if number > 1 else ''}_jobs.csv" in taken:
            number += 1  # ends: each round tries a new name, and only len(paths) names are taken
        path = folder / f"{prefix}{f'-{number}' if number > 1 else ''}_jobs.csv"
        rows = batsim_rows(trace)
        left_out += sum(state == "rejected" for state in trace["jobs"]["state"])
        write_atomically(path, lambda partial, rows=rows: _write_csv(partial, rows))
        paths.append(path)
    return paths, left_out


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """``rows`` as a CSV of :data:`BATSIM_COLUMNS` (floats with repr: exact)."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=BATSIM_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
