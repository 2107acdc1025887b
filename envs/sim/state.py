"""The observable state of one simulation run: what a policy may read through a :class:`~envs.sim.view.View`.

The simulator (:mod:`envs.sim.simulator`) is the only writer. It keeps its own books beside this (the completion
heap, the demand histogram, the time integrals); everything a scheduler could know at a decision point is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from envs.core.allocation import GpuSet
from envs.core.cache import LRUCache
from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.core.joblog import Interruptions, JobRecord


class RunningJob(NamedTuple):
    """A job that holds GPUs, as a real scheduler knows it: its expected end comes from the requested wall time."""

    job: Job
    start_time_s: float
    expected_end_s: float  # start + requested wall time [s]
    gpus: GpuSet


@dataclass(slots=True)
class JobHistory:
    """The runs so far of a job that has been interrupted at least once (kept while it is pending or running).

    Work is the job's base runtime (speed 1, ideal placement) [s]; GPU-seconds count the job's GPU share.
    """

    first_start_s: float  # its first start [s]
    done_work_s: float = 0.0  # work kept by checkpoints: what a restart need not redo [s]
    held_s: float = 0.0  # wall-clock time holding GPUs in the ended runs [s]
    last_run_s: float = 0.0  # length of its last ended run [s]
    last_end_s: float = 0.0  # when its last run ended [s]
    overhead_gpu_s: float = 0.0  # restart overhead paid [GPU-seconds]
    lost_failure_gpu_s: float = 0.0  # computing rolled back by failures [GPU-seconds]
    lost_preemption_gpu_s: float = 0.0  # computing rolled back by preemptions [GPU-seconds]
    failures: int = 0  # runs ended by a failure
    preemptions: int = 0  # runs ended by a preemption
    runs: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each ended run [s]
    run_gpus: list[tuple[int, ...]] = field(default_factory=list)  # GPUs (global indices) of each ended run
    run_ends: list[str] = field(default_factory=list)  # what ended each ended run: "preemption" or "failure"

    def freeze(self, held_s: float, last_run: tuple[float, float] | None = None) -> Interruptions:
        """The record of these runs for the job log, ``held_s`` the time held over all runs [s], ``last_run`` the
        (start, end) of a final run that completed the job [s]."""
        runs = (*self.runs, last_run) if last_run is not None else tuple(self.runs)
        return Interruptions(self.failures, self.preemptions, held_s, self.overhead_gpu_s, self.lost_failure_gpu_s,
                             self.lost_preemption_gpu_s, runs, tuple(self.run_gpus), tuple(self.run_ends))


class SimState:
    """Clock, queue, running jobs, free resources per GPU and per node, health, ended jobs and dataset caches.

    Queues are dicts in queue order (submit time, then job id; a requeued job goes back to its place). Free
    resources: ``gpu_free_milli`` per GPU [milli-GPU], ``gpu_whole_free`` (the GPU is entirely free),
    ``node_free_gpus`` (entirely free GPUs per node), ``node_free_cpu`` [milli-cores] and ``node_free_ram`` [MiB]
    per node, ``free_gpus`` in the cluster; a failed GPU (``gpu_up`` False, or its node's ``node_up``) has no free
    share. GPU memory and MIG: ``gpu_free_mem_mib`` per GPU [MiB] (a whole-GPU job holds all of it, a fractional job
    its ``gpu_mem_mib``, a MIG instance its memory slices' part, ``capacity × size // 8``), ``gpu_mig_used`` the
    8-bit occupancy mask of MIG memory slices per GPU, ``gpu_mig_mode`` True for a GPU in MIG mode, ``mig_slices``
    (GPU, occupancy mask) of every running MIG job. ``history`` holds the earlier runs of every interrupted job
    still pending or running. ``version`` is bumped whenever the holdings change, so that views can memoize arrays
    derived from them.
    """

    __slots__ = ("all_nodes_up", "caches", "cluster", "down_gpus", "free_gpus", "gpu_free_mem_mib", "gpu_free_milli",
                 "gpu_mig_mode", "gpu_mig_used", "gpu_up", "gpu_whole_free", "history", "mig_slices", "n_jobs",
                 "next_arrival", "node_free_cpu", "node_free_gpus", "node_free_ram", "node_up", "pending", "records",
                 "running", "scheduler_up", "time_s", "version")

    def __init__(self, cluster: ClusterSpec, start_time_s: float, n_jobs: int) -> None:
        self.cluster = cluster
        self.time_s = start_time_s  # current simulated time [s]
        self.next_arrival = 0  # index (in submit order) of the next job to arrive
        self.n_jobs = n_jobs  # jobs of the run
        self.pending: dict[int, Job] = {}
        self.running: dict[int, RunningJob] = {}
        self.records: list[JobRecord] = []  # ended jobs, in end order
        self.gpu_free_milli = np.full(cluster.n_gpus, MILLI_PER_GPU, dtype=np.int64)
        self.gpu_whole_free = np.ones(cluster.n_gpus, dtype=bool)
        self.gpu_free_mem_mib = cluster.gpu_memory_mib.copy()
        self.gpu_mig_used = np.zeros(cluster.n_gpus, dtype=np.uint8)
        self.gpu_mig_mode = cluster.gpu_mig_initial.copy()
        self.mig_slices: dict[int, tuple[int, int]] = {}  # job id -> (GPU, occupancy mask) of running MIG jobs
        self.node_free_gpus = cluster.node_n_gpus.copy()
        self.node_free_cpu = cluster.node_cpu_milli.copy()
        self.node_free_ram = cluster.node_ram_mib.copy()
        self.node_up = np.ones(cluster.n_nodes, dtype=bool)
        self.gpu_up = np.ones(cluster.n_gpus, dtype=bool)
        self.down_gpus = 0  # failed GPUs (of failed nodes included)
        self.all_nodes_up = True
        self.scheduler_up = True
        self.free_gpus = cluster.n_gpus
        self.version = 0
        self.caches = [LRUCache(n.cache_gib) for n in cluster.nodes]
        self.history: dict[int, JobHistory] = {}

    @property
    def events_left(self) -> bool:
        """True while some event that can let a pending job start is still to come (an arrival, a completion, a
        repair or the scheduler's recovery); waiting without one would stall."""
        return bool(self.running) or self.next_arrival < self.n_jobs or self.down_gpus > 0 or not self.scheduler_up
