"""The simulator's output: one record per submitted job, plus integrals of cluster state over time."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from envs.core.allocation import GpuSet
from envs.core.job import Job, JobState, RejectReason

EMPTY = GpuSet(range(0))


class TopologyLevel(IntEnum):
    """The widest interconnect an allocation's GPUs must talk over."""

    ISLAND = 0  # all GPUs in one NVLink island (or a single GPU)
    NODE = 1  # one node, several islands: PCIe between them
    RACK = 2  # several nodes under one top-of-rack switch
    CROSS_RACK = 3  # several racks


class JobRecord(NamedTuple):
    """How one job ended. Times in seconds; NaN where a rejected job has none.

    A named tuple rather than a dataclass: the simulator builds one per job on its hot path.
    """

    job: Job
    state: JobState  # COMPLETED or REJECTED
    reject_reason: RejectReason | None = None
    start_time_s: float = math.nan  # first (and, without preemption, only) start
    finish_time_s: float = math.nan
    gpus: GpuSet = EMPTY  # global GPU indices of the allocation
    n_nodes: int = 0
    topology: TopologyLevel | None = None
    speed: float = math.nan  # speed factor the job ran at (slowest GPU of the allocation)
    topology_factor: float = math.nan  # >= 1: slowdown from spreading over islands, nodes or racks
    staging_s: float = 0.0  # time spent staging the dataset before computing [s]
    timed_out: bool = False  # killed at its requested wall time

    @property
    def wait_s(self) -> float:
        """start - submit [s]."""
        return self.start_time_s - self.job.submit_time_s

    @property
    def run_s(self) -> float:
        """finish - start: wall-clock time the job held its GPUs [s]."""
        return self.finish_time_s - self.start_time_s

    @property
    def ideal_run_s(self) -> float:
        """The part of ``run_s`` that is useful progress: runtime at the allocation's speed, no placement loss [s]."""
        ideal = self.job.runtime_s / self.speed
        return min(ideal, self.run_s)


@dataclass(frozen=True)
class JobLog:
    """The complete log of one simulation run.

    ``records`` holds every submitted job exactly once, in the order the jobs ended (rejected jobs end at their
    submission). The integrals are taken over simulated time by the simulator [GPU-seconds].
    """

    cluster_name: str
    total_gpus: int
    records: tuple[JobRecord, ...]
    busy_gpu_s: float  # ∫ allocated GPU share dt
    idle_gpu_s_while_pending: float  # ∫ idle GPU share dt over the times at least one job was pending
    fragmented_gpu_s: float  # ∫ idle GPU share that cannot host the smallest pending job dt

    def completed(self) -> list[JobRecord]:
        """Records of the jobs that ran to completion."""
        return [r for r in self.records if r.state is JobState.COMPLETED]

    def rejected(self) -> list[JobRecord]:
        """Records of the jobs rejected at submission."""
        return [r for r in self.records if r.state is JobState.REJECTED]
