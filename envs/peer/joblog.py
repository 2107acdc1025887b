"""A peer-engine schedule as a :class:`~envs.core.joblog.JobLog`, so that the SPEC §7 metrics and the evaluation
harness treat it like a simulator run (one processor counts as one GPU)."""

from __future__ import annotations

from collections.abc import Sequence

from envs.core.job import Job, JobState
from envs.core.joblog import JobLog, JobRecord
from envs.peer.engine import PeerResult
from envs.peer.swf import PeerJob, PeerMachine


def peer_log(jobs: Sequence[PeerJob], result: PeerResult, machine: PeerMachine) -> JobLog:
    """The job log of ``jobs`` (a sequence, in trace order) scheduled as ``result`` on ``machine``.

    Every job completes at its start plus its run time, at speed 1 and without placement loss. The peer allows
    requests and processor counts below 1, which a :class:`~envs.core.job.Job` does not: they are logged as 1.
    The peer has no notion of fragmentation or of idle time while jobs wait, so both integrals are 0.
    """
    records = []
    for job, start_s in zip(jobs, result.start_times, strict=True):
        spec = Job(job.job_id, float(job.submit), float(job.run), float(max(job.request, 1)), n_gpus=max(job.procs, 1))
        records.append(JobRecord(job=spec, state=JobState.COMPLETED, start_time_s=float(start_s),
                                 finish_time_s=float(start_s + job.run), speed=1.0, topology_factor=1.0))
    busy = sum(r.job.gpu_share * r.run_s for r in records)
    return JobLog(cluster_name=f"peer:{machine.nodes}x{machine.procs_per_node:g}",
                  total_gpus=round(machine.nodes * machine.procs_per_node), records=tuple(records), busy_gpu_s=busy,
                  idle_gpu_s_while_pending=0.0, fragmented_gpu_s=0.0)
