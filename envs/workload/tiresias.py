"""The job lists of the Tiresias simulator (Gu et al., NSDI'19), e.g. its illustrative ``60_job.csv``.

Header ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``. Mapping (times in s):

- ``job_id`` = job_id, ``submit_time_s`` = submit_time, ``n_gpus`` = num_gpu.
- ``runtime_s`` = ``runtime_estimate_s`` = duration (no estimate in the file: a perfect one).
- ``comm_sensitivity`` = the loader's argument for multi-GPU jobs, 0 otherwise.
- ``iterations``, ``model_name`` and ``interval`` (the gap to the next submission) are not used; the job table has
  no model field. ``machine_gpus`` = 0.
- ``outcome`` = :attr:`~envs.core.job.TraceOutcome.UNKNOWN` for every job: the file has no status or outcome
  column; ``priority`` = 0 (no priority or queue column either).

Malformed input raises :class:`~envs.core.errors.TraceFormatError`: a header without these columns, another field
count, a job id or num_gpu that is not a whole number, a negative or non-finite time, a repeated job id.

Skip reasons (in this order): ``no_gpus`` (num_gpu == 0), ``zero_runtime`` (duration == 0).
"""

from __future__ import annotations

from pathlib import Path

from envs.workload.reader import JobCollector, check_comm_sensitivity, csv_rows, read_lines, seconds, whole
from envs.workload.table import Workload

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
"""The columns a Tiresias job list's header must name."""


def load_tiresias(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read a Tiresias job CSV (plain or gzip); ``comm_sensitivity`` in [0, 1] is given to multi-GPU jobs."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    collector = JobCollector(path)
    for lineno, row in csv_rows(path, read_lines(path), TIRESIAS_COLUMNS):
        job_text, gpus_text, submit_text, _iterations, _model, duration_text, _interval = row
        job_id = whole(job_text, where, lineno, "job_id")
        n_gpus = whole(gpus_text, where, lineno, "num_gpu", minimum=0)
        submit_s = seconds(submit_text, where, lineno, "submit_time")
        runtime_s = seconds(duration_text, where, lineno, "duration")
        collector.add_gpu_job(lineno, job_id, submit_s, runtime_s, n_gpus, comm)
    return collector.workload()
