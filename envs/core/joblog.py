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


class Interruptions(NamedTuple):
    """What interruptions (failures of its GPUs or nodes, preemptions) cost one job over all its runs.

    GPU-seconds count the job's GPU share: held = useful + lost + overhead, where lost is computing rolled back to
    the last checkpoint (for a FAILED job, everything but the overhead) and overhead the restart overhead paid.
    """

    failures: int  # runs ended by a failure [count]
    preemptions: int  # runs ended by a preemption [count]
    held_s: float  # wall-clock time holding GPUs, over all runs [s]
    overhead_gpu_s: float  # restart overhead paid [GPU-seconds]
    lost_failure_gpu_s: float  # progress lost to failures [GPU-seconds]
    lost_preemption_gpu_s: float  # progress lost to preemptions [GPU-seconds]
    runs: tuple[tuple[float, float], ...] = ()  # (start, end) of each run, in order [s]: when it held GPUs
    # of each interrupted run (every run a preemption or failure ended: a COMPLETED job's runs but its last, a FAILED
    # job's all), in order: the GPUs it held (global indices) and what ended it ("preemption" or "failure")
    run_gpus: tuple[tuple[int, ...], ...] = ()
    run_ends: tuple[str, ...] = ()


class JobRecord(NamedTuple):
    """How one job ended. Times in seconds; NaN where a rejected job has none.

    A named tuple rather than a dataclass: the simulator builds one per job on its hot path. The placement fields
    (``gpus`` .. ``staging_s``) describe the job's last run; ``interruptions`` is None for a job that ran once.
    """

    job: Job
    state: JobState  # COMPLETED, FAILED or REJECTED
    reject_reason: RejectReason | None = None
    start_time_s: float = math.nan  # first start
    finish_time_s: float = math.nan  # completion, or the failure that made the job FAILED
    gpus: GpuSet = EMPTY  # global GPU indices of the allocation
    n_nodes: int = 0
    topology: TopologyLevel | None = None
    speed: float = math.nan  # speed factor the job ran at (slowest GPU of the allocation)
    topology_factor: float = math.nan  # >= 1: slowdown from spreading over islands, nodes or racks
    staging_s: float = 0.0  # time spent staging the dataset before computing [s]
    timed_out: bool = False  # killed at its requested wall time
    interruptions: Interruptions | None = None  # None: the job ran once, uninterrupted

    @property
    def wait_s(self) -> float:
        """first start - submit [s]."""
        return self.start_time_s - self.job.submit_time_s

    @property
    def run_s(self) -> float:
        """Wall-clock time the job held GPUs, over all its runs [s] (finish - start for a job that ran once)."""
        if self.interruptions is None:
            return self.finish_time_s - self.start_time_s
        return self.interruptions.held_s

    @property
    def restarts(self) -> int:
        """Starts after the first one [count]."""
        i = self.interruptions
        if i is None:
            return 0
        return i.failures + i.preemptions - (self.state is JobState.FAILED)

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
    down_gpu_s: float = 0.0  # ∫ failed GPUs dt
    scheduler_downtime_s: float = 0.0  # time the scheduler was down, within the run [s]
    outage_waiting_jobs: int = 0  # jobs that were pending at some moment while the scheduler was down [count]
    quota_violations: int = 0  # starts that left a holding above a quota (must stay 0) [count]
    borrowed_gpu_s: float = 0.0  # ∫ Σ over queues of GPUs held above the nominal quota dt [GPU-seconds]
    reclaims: int = 0  # jobs preempted to give borrowed quota back to its lender [count]
    reclaimed_gpus: float = 0.0  # Σ of the reclaimed jobs' GPU shares [GPUs]
    reclaim_lost_gpu_s: float = 0.0  # work rolled back by reclaims (part of the preemptions' lost work) [GPU-seconds]
    team_gpu_s: tuple[tuple[str, float], ...] = ()  # ∫ GPUs held dt per team, with quotas only [GPU-seconds]

    def completed(self) -> list[JobRecord]:
        """Records of the jobs that ran to completion."""
        return [r for r in self.records if r.state is JobState.COMPLETED]

    def ran(self) -> list[JobRecord]:
        """Records of the jobs that held GPUs: completed and FAILED ones."""
        return [r for r in self.records if r.state is not JobState.REJECTED]

    def rejected(self) -> list[JobRecord]:
        """Records of the jobs rejected at submission."""
        return [r for r in self.records if r.state is JobState.REJECTED]
