"""The observable state of one simulation run: what a policy may read through a :class:`~envs.sim.view.View`.

The simulator (:mod:`envs.sim.simulator`) is the only writer. It keeps its own books beside this (the completion
heap, the demand histogram, the time integrals); everything a scheduler could know at a decision point is here.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from envs.core.allocation import GpuSet
from envs.core.cache import LRUCache
from envs.core.cluster import MILLI_PER_GPU, ClusterSpec
from envs.core.job import Job
from envs.core.joblog import JobRecord


class RunningJob(NamedTuple):
    """A job that holds GPUs, as a real scheduler knows it: its expected end comes from the requested wall time."""

    job: Job
    start_time_s: float
    expected_end_s: float  # start + requested wall time [s]
    gpus: GpuSet


class SimState:
    """Clock, queue, running jobs, free resources per GPU and per node, health, ended jobs and dataset caches.

    Queues are dicts in queue order (submit time, then job id). Free resources: ``gpu_free_milli`` per GPU
    [milli-GPU], ``gpu_whole_free`` (the GPU is entirely free), ``node_free_gpus`` (entirely free GPUs per node),
    ``node_free_cpu`` [milli-cores] and ``node_free_ram`` [MiB] per node, ``free_gpus`` in the cluster.
    ``version`` is bumped whenever the holdings change, so that views can memoize arrays derived from them.
    """

    __slots__ = ("all_nodes_up", "caches", "cluster", "free_gpus", "gpu_free_milli", "gpu_whole_free", "n_jobs",
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
        self.node_free_gpus = cluster.node_n_gpus.copy()
        self.node_free_cpu = cluster.node_cpu_milli.copy()
        self.node_free_ram = cluster.node_ram_mib.copy()
        self.node_up = np.ones(cluster.n_nodes, dtype=bool)
        self.all_nodes_up = True
        self.scheduler_up = True
        self.free_gpus = cluster.n_gpus
        self.version = 0
        self.caches = [LRUCache(n.cache_gib) for n in cluster.nodes]

    @property
    def events_left(self) -> bool:
        """True while some event (an arrival or a completion) is still to come; waiting without one would stall."""
        return bool(self.running) or self.next_arrival < self.n_jobs
