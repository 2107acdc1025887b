"""Microsoft Philly traces (the job-level CSV rework of Jeon et al., ATC'19), into a :class:`Workload`.

Header ``#job id,arrival time (sec),topology,shape,size,duration (sec)``; one job per row. Mapping (times in s):

- ``job_id`` = job id, ``submit_time_s`` = arrival time, ``n_gpus`` = size (whole GPUs).
- ``runtime_s`` = duration, and ``runtime_estimate_s`` = duration too: the trace has no user estimate, so it is
  perfect; add noise with :meth:`Workload.with_estimate_noise`.
- ``comm_sensitivity`` = the loader's argument for multi-GPU jobs, 0 for single-GPU jobs.
- ``shape`` (GPUs per machine, e.g. ``8+8``) is checked, not used: the simulator's placement rules choose the
  machines. ``topology`` (always ``CLOS``) is ignored. No user, team or VC columns: Job defaults (priority 0).
- ``outcome`` = :attr:`~envs.core.job.TraceOutcome.UNKNOWN` for every job: the trace has no status column, so
  whether a job passed, failed or was killed is not recorded (the original Philly logs had a status; this
  job-level rework dropped it).
- ``machine_gpus`` = 0 (the trace does not publish its cluster; use the ``philly-like`` preset).

Malformed input raises :class:`~envs.core.errors.TraceFormatError` naming the file and line: a header without these
columns; a row with another field count; a job id, size or shape part that is not a whole number; a negative
arrival time, duration or size; a non-finite number; a ``shape`` whose parts do not sum to ``size`` (an
inconsistent record, decided to be malformed rather than skipped: the published trace has none); a repeated id.

Skip reasons (checked in this order, each record counted once):

- ``no_gpus``: size == 0.
- ``zero_runtime``: duration == 0 (10 jobs of the published trace).
"""

from __future__ import annotations

from pathlib import Path

from envs.core.errors import TraceFormatError
from envs.workload.reader import JobCollector, check_comm_sensitivity, csv_rows, read_lines, seconds, show, whole
from envs.workload.table import Workload

PHILLY_COLUMNS = ("#job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)")
"""The columns a Philly trace's header must name."""


def load_philly(path: str | Path, comm_sensitivity: float = 0.5) -> Workload:
    """Read a Philly job CSV (plain or gzip); ``comm_sensitivity`` in [0, 1] is given to multi-GPU jobs."""
    comm = check_comm_sensitivity(comm_sensitivity)
    where = str(path)
    collector = JobCollector(path)
    for lineno, (job_text, arrival_text, _topology, shape, size_text, duration_text) in csv_rows(
        path, read_lines(path), PHILLY_COLUMNS
    ):
        job_id = whole(job_text, where, lineno, "job id")
        submit_s = seconds(arrival_text, where, lineno, "arrival time")
        n_gpus = whole(size_text, where, lineno, "size", minimum=0)
        runtime_s = seconds(duration_text, where, lineno, "duration")
        _check_shape(shape, n_gpus, where, lineno)
        collector.add_gpu_job(lineno, job_id, submit_s, runtime_s, n_gpus, comm)
    return collector.workload()


def _check_shape(shape: str, n_gpus: int, where: str, lineno: int) -> None:
    """``shape`` must be ``+``-separated whole GPU counts summing to ``size`` (``"0"`` for a size-0 job)."""
    if shape == str(n_gpus):  # the single-machine case, nine jobs in ten
        return
    total = sum(whole(part, where, lineno, f"shape part of {show(shape)}", minimum=0) for part in shape.split("+"))
    if total != n_gpus:
        raise TraceFormatError(where, lineno, f"shape {show(shape)} sums to {total} GPUs, but size is {n_gpus}")
