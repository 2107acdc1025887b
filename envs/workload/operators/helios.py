"""SenseTime Helios traces (Hu et al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale
GPU Datacenters", SC'21): a cluster's ``cluster_log.csv``, into a :class:`Workload`.

The columns, as the README of S-Lab-System-Group/HeliosData documents them (one row per Slurm job of the cluster,
April to September 2020; only the Venus cluster is published so far):
``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue``. ``job_id`` is
Slurm's (it follows the submission order), ``user`` and ``vc`` (virtual cluster) are hashed ids, times are
``2020-06-09 18:41:01`` strings (the cluster's local time), ``duration`` = end − start and ``queue`` = start − submit,
both in seconds. The loader needs every column but ``queue`` (which it does not use); extra columns are ignored.
Mapping (times in s):

- ``job_id`` = job_id; ``user`` = user; ``team`` = vc; ``n_gpus`` = gpu_num.
- ``submit_time_s`` = submit_time − the earliest submit_time of the loaded jobs (the first job submits at 0).
- ``runtime_s`` = duration; ``runtime_estimate_s`` = duration too: the trace has no time limit or estimate, so it is
  perfect (add noise with :meth:`Workload.with_estimate_noise`).
- ``cpu_milli_per_gpu`` = ceil(1000 × cpu_num / gpu_num). node_num is checked, not used (the simulator's placement
  rules choose the nodes); start_time and end_time are checked (end >= start >= submit), not used.
- ``outcome`` = state by the Slurm table of :data:`~envs.workload.operators.sacct.SLURM_STATE_OUTCOME`, shared
  with the sacct loader: COMPLETED → PASS; FAILED, NODE_FAIL → FAILED; CANCELLED, TIMEOUT → KILLED. (The Helios
  paper counts TIMEOUT and NODE_FAIL, both very rare, as failed; here TIMEOUT is KILLED, a job the system stopped at its
  limit, as for sacct.)
- ``comm_sensitivity`` = the loader's argument for multi-GPU jobs, 0 otherwise; no partition, QoS or priority
  (``vc`` is a quota group, not a partition the trace's nodes are named for). ``machine_gpus`` = 0: the trace does
  not list its nodes (``cluster_gpu_number.csv`` beside it gives GPUs per VC per day), so give a cluster.

Skip reasons (in this order): ``not_finished`` (a state that is not final, such as the one SUSPENDED job of
Uranus that the README mentions; REQUEUED and REVOKED count as ``requeued_run`` and ``revoked``, as for sacct),
``never_started`` (empty start_time), ``no_gpus`` (gpu_num == 0: CPU jobs, 1.78 M of the 3.36 M jobs the README
counts over the four clusters), ``zero_runtime`` (duration == 0).

Malformed (:class:`~envs.core.errors.TraceFormatError` naming the file and line): a header without these columns,
another field count, a count that is not a whole number >= 0, a time that is not ``YYYY-MM-DD HH:MM:SS``, a negative
or non-finite duration, a state that is not a Slurm state, start before submit or end before start, a repeated
job id.
"""

from __future__ import annotations

from pathlib import Path

from envs.core.errors import TraceFormatError
from envs.workload.operators.sacct import required_time, slurm_state, slurm_time
from envs.workload.reader import (
    JobCollector,
    PendingJob,
    add_from_first_submit,
    check_comm_sensitivity,
    csv_rows,
    read_lines,
    seconds,
    whole,
)
from envs.workload.table import Workload

HELIOS_COLUMNS = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "cpu_num",
    "node_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
)
"""The columns a Helios ``cluster_log.csv`` header must name (its ``queue`` column is not used)."""


def load_helios(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read a Helios ``cluster_log.csv`` (plain or gzip); ``comm_sensitivity`` in [0, 1] is given to multi-GPU
    jobs."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    collector = JobCollector(path)
    jobs: list[PendingJob] = []
    for lineno, row in csv_rows(path, read_lines(path), HELIOS_COLUMNS):
        job_text, user, vc, gpus_text, cpus_text, nodes_text, state, submit, start, end, duration = row
        job_id = whole(job_text, where, lineno, "job_id")
        collector.claim(lineno, job_id)
        n_gpus = whole(gpus_text, where, lineno, "gpu_num", minimum=0)
        n_cpus = whole(cpus_text, where, lineno, "cpu_num", minimum=0)
        whole(nodes_text, where, lineno, "node_num", minimum=0)
        outcome = slurm_state(state, where, lineno)
        submit_s = required_time(submit, where, lineno, "submit_time")
        start_s = slurm_time(start, where, lineno, "start_time") if start else None
        end_s = slurm_time(end, where, lineno, "end_time") if end else None
        runtime_s = seconds(duration, where, lineno, "duration")
        if start_s is not None and start_s < submit_s:
            raise TraceFormatError(where, lineno, "start_time is before submit_time")
        if start_s is not None and end_s is not None and end_s < start_s:
            raise TraceFormatError(where, lineno, "end_time is before start_time")
        if isinstance(outcome, str):
            collector.skip(lineno, job_id, outcome)
        elif start_s is None:
            collector.skip(lineno, job_id, "never_started")
        elif not collector.skipped_as_empty(lineno, job_id, n_gpus, runtime_s):
            jobs.append(
                PendingJob(
                    lineno,
                    submit_s,
                    {
                        "job_id": job_id,
                        "runtime_s": runtime_s,
                        "runtime_estimate_s": runtime_s,
                        "n_gpus": n_gpus,
                        "cpu_milli_per_gpu": -(-1000 * n_cpus // n_gpus),
                        "user": user or "-",
                        "team": vc or "-",
                        "outcome": outcome,
                    },
                )
            )
    add_from_first_submit(collector, jobs, comm)
    return collector.workload()
