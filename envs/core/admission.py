"""What a job's partition says at submission: whether the job may run at all (SPEC §3 Lifecycle).

Slurm checks a job against its partition when it is submitted; with ``EnforcePartLimits=ALL`` a job that breaks a
partition limit is rejected there, which is what the simulator does (it never waits forever instead).
"""

from __future__ import annotations

from envs.core.governance import Governance
from envs.core.job import Job, RejectReason


def partition_reject_reason(governance: Governance, job: Job) -> RejectReason | None:
    """Why ``job``'s partition refuses it (unknown name, team not allowed, wall time over the limit), or None.

    Without partitions every job passes (its partition label is ignored).
    """
    if not governance.partitions:
        return None
    partition = governance.partition(job.partition)
    if partition is None:
        return RejectReason.UNKNOWN_PARTITION if job.partition else None
    if not partition.allows(job.team):
        return RejectReason.PARTITION_ACCESS
    if job.runtime_estimate_s > partition.max_wall_s:
        return RejectReason.PARTITION_TIME_LIMIT
    return None
