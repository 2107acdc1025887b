"""Whether a submitted job may ever run on a cluster (SPEC §3 Lifecycle): a job that could not run even on the empty
cluster is rejected at submission, with a reason, rather than left waiting forever.

Slurm checks a job against its partition when it is submitted; with ``EnforcePartLimits=ALL`` a job that breaks a
partition limit is rejected there, which is what the simulator does.
"""

from __future__ import annotations

import numpy as np

from envs.core.cluster import ClusterSpec
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


def capacity_reject_reason(c: ClusterSpec, job: Job) -> RejectReason | None:
    """Why ``job`` could not run even on the empty cluster ``c`` (no eligible GPU type, memory or MIG profile; too
    many GPUs; not enough CPU or RAM for them), or None."""
    eligible = c.eligible_nodes(job.gpu_types, job.gpu_mem_gib, job.partition, job.mig_profile)
    if not eligible.any():
        if job.mig_profile and c.eligible_nodes(job.gpu_types, job.gpu_mem_gib, job.partition).any():
            return RejectReason.MIG_PROFILE
        return RejectReason.NO_ELIGIBLE_GPU
    per_node = np.where(eligible, c.node_n_gpus, 0)
    if job.cpu_milli_per_gpu:
        per_node = np.where(c.cpu_modelled, np.minimum(per_node, c.node_cpu_milli // job.cpu_milli_per_gpu),
                            per_node)
    if job.ram_mib_per_gpu:
        per_node = np.where(c.ram_modelled, np.minimum(per_node, c.node_ram_mib // job.ram_mib_per_gpu),
                            per_node)
    if per_node.sum() >= job.n_gpus:
        return None
    if np.where(eligible, c.node_n_gpus, 0).sum() >= job.n_gpus:  # enough GPUs, but not their CPU or RAM
        return RejectReason.CPU_RAM
    return RejectReason.TOO_MANY_GPUS
