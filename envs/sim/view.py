"""The read-only view of a run's state that a policy decides from (SPEC §4), and the type of a placement rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from envs.core.cluster import ClusterSpec
from envs.core.errors import ConfigError
from envs.core.job import Job, RefusalReason
from envs.core.joblog import JobRecord
from envs.sim.fork import Forking, Future
from envs.sim.quota import QuotaLedger, TeamQuota
from envs.sim.state import JobHistory, RunningJob, SimState


class View:
    """Live, read-only window on one run's :class:`~envs.sim.state.SimState`: every attribute reflects the current
    state, nothing can change it.

    Arrays are numpy views with the write flag off; mappings are read-only proxies, iterated in queue order.
    """

    __slots__ = ("_fork", "_kept", "_memo", "_memo_version", "_quota", "_state", "_tiers", "cluster",
                 "gpu_free_mem_mib", "gpu_free_milli", "gpu_mig_mode", "gpu_mig_used", "gpu_up", "gpu_whole_free",
                 "history", "mig_slices", "node_free_cpu_milli", "node_free_gpus", "node_free_ram_mib", "node_up",
                 "pending", "running")

    def __init__(self, state: SimState, quota: QuotaLedger | None = None,
                 fork: Callable[[Future | None], Forking] | None = None) -> None:
        self._state = state
        self._fork = fork
        self._quota = quota
        self._memo: dict[object, np.ndarray] = {}
        self._memo_version = -1
        self._kept: dict[object, Any] = {}
        self.cluster: ClusterSpec = state.cluster
        self._tiers = any(p.priority_tier for p in state.cluster.governance.partitions)  # partition priority tiers
        self.pending: Mapping[int, Job] = MappingProxyType(state.pending)
        self.running: Mapping[int, RunningJob] = MappingProxyType(state.running)
        self.gpu_free_milli: np.ndarray = _read_only(state.gpu_free_milli)  # free share per GPU [milli-GPU]
        self.gpu_whole_free: np.ndarray = _read_only(state.gpu_whole_free)  # GPU is entirely free
        self.gpu_free_mem_mib: np.ndarray = _read_only(state.gpu_free_mem_mib)  # free memory per GPU [MiB]
        self.gpu_mig_used: np.ndarray = _read_only(state.gpu_mig_used)  # MIG memory slices held (8-bit mask)
        self.gpu_mig_mode: np.ndarray = _read_only(state.gpu_mig_mode)  # GPU is in MIG mode (else full mode)
        self.mig_slices: Mapping[int, tuple[int, int]] = MappingProxyType(state.mig_slices)  # job -> (GPU, mask)
        self.node_free_gpus: np.ndarray = _read_only(state.node_free_gpus)  # fully free GPUs per node
        self.node_free_cpu_milli: np.ndarray = _read_only(state.node_free_cpu)  # [milli-cores]
        self.node_free_ram_mib: np.ndarray = _read_only(state.node_free_ram)  # [MiB]
        self.node_up: np.ndarray = _read_only(state.node_up)  # health per node
        self.gpu_up: np.ndarray = _read_only(state.gpu_up)  # health per GPU (False also on a failed node)
        self.history: Mapping[int, JobHistory] = MappingProxyType(state.history)  # earlier runs of interrupted jobs

    def fork(self, future: Future | None) -> Forking:
        """An independent simulator at this instant whose unknown future is ``future`` (arrivals and the runtimes
        of the jobs known now, :class:`~envs.sim.fork.Future`); None keeps the run's true future, which only a
        hindsight bound may use. The run itself is left as it was. Raises :class:`ConfigError` on a view of no
        simulator."""
        if self._fork is None:
            raise ConfigError("this view belongs to no simulator: it cannot fork")
        return self._fork(future)

    @property
    def time_s(self) -> float:
        """Current simulated time [s]."""
        return self._state.time_s

    @property
    def arrivals_left(self) -> int:
        """How many jobs of the run are still to arrive (the run's job count is part of its definition)."""
        return self._state.n_jobs - self._state.next_arrival

    @property
    def free_gpus(self) -> int:
        """Number of fully free GPUs in the cluster."""
        return self._state.free_gpus

    @property
    def events_left(self) -> bool:
        """False when waiting now would stall the simulation (nothing running, no future arrival)."""
        return self._state.events_left

    @property
    def all_nodes_up(self) -> bool:
        """True when every node is healthy."""
        return self._state.all_nodes_up

    @property
    def scheduler_up(self) -> bool:
        """False while the scheduler is down (no job may start)."""
        return self._state.scheduler_up

    @property
    def down_gpus(self) -> int:
        """Failed GPUs (those of failed nodes included)."""
        return self._state.down_gpus

    def preempt_refusal(self, job_id: int) -> RefusalReason | None:
        """Why preempting job ``job_id`` now would be refused (not running, scheduler down, not preemptible), or
        None when it may be preempted: the simulator's rule, which action masks read too."""
        running = self._state.running.get(job_id)
        if running is None:
            return RefusalReason.NOT_RUNNING
        if not self._state.scheduler_up:
            return RefusalReason.SCHEDULER_DOWN
        if not running.job.preemptible:
            return RefusalReason.NOT_PREEMPTIBLE
        return None

    def admits(self, job: Job) -> bool:
        """True when starting ``job`` now would exceed no quota (the simulator's check; always True without
        quotas). Schedulers skip jobs it refuses, as Slurm skips jobs held by an association limit."""
        return self._quota is None or self._quota.refusal(job) is None

    def schedulable(self, ranked: list[Job]) -> list[Job]:
        """``ranked`` (a priority order's ranking) as a scheduler should consider it: jobs of higher partition
        priority tiers first (Slurm PriorityTier; the ranking kept within a tier), without the jobs a quota refuses
        now. Returns ``ranked`` itself when the cluster has neither tiers nor quotas."""
        if self._tiers:
            governance = self.cluster.governance
            ranked = sorted(ranked, key=lambda j: -governance.tier(j.partition))
        if self._quota is not None:
            ranked = [j for j in ranked if self._quota.refusal(j) is None]
        return ranked

    def first_schedulable(self, ranked: Iterable[Job]) -> Job | None:
        """The first job of :meth:`schedulable` (``ranked``) or None, reading ``ranked`` only up to it when the
        cluster has no priority tiers."""
        if self._tiers:
            queue = self.schedulable(list(ranked))
            return queue[0] if queue else None
        return next((j for j in ranked if self._quota is None or self._quota.refusal(j) is None), None)

    @property
    def has_quotas(self) -> bool:
        """True when the cluster has quotas (hard limits or queues)."""
        return self._quota is not None

    def quota(self, team: str) -> TeamQuota:
        """What ``team`` holds, may hold and may still take now [GPUs]; unlimited (inf) without quotas."""
        if self._quota is None:
            held = sum(r.job.gpu_share for r in self._state.running.values() if r.job.team == team)
            return TeamQuota(held, float("inf"), float("inf"), float("inf"))
        return self._quota.team_quota(team)

    def executed_s(self, job_id: int) -> float:
        """Wall-clock time job ``job_id`` has held GPUs so far, over all its runs [s] (0 for a job never started)."""
        history = self._state.history.get(job_id)
        running = self._state.running.get(job_id)
        return (history.held_s if history else 0.0) + (self._state.time_s - running.start_time_s if running else 0.0)

    def attained_gpu_s(self, job: Job) -> float:
        """Attained service of ``job`` (Tiresias): its GPU share × the time it has held GPUs so far [GPU-seconds]."""
        return job.gpu_share * self.executed_s(job.job_id)

    @property
    def version(self) -> int:
        """A number that changes whenever the holdings change (a start, an end, a failure or repair): answers
        derived from the holdings alone stay valid while it stays the same."""
        return self._state.version

    def kept(self, key: object, make: Callable[[], Any]) -> Any:
        """An object kept for this view's whole run (made by ``make`` the first time), for derived data that is
        updated from one state to the next rather than recomputed (unlike :meth:`memoized`)."""
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    def memoized(self, key: object, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` once per state of the holdings: placement rules share derived arrays through this.

        The returned array is read-only; it is recomputed after any start or completion.
        """
        version = self._state.version
        if self._memo_version != version:
            self._memo.clear()
            self._memo_version = version
        value = self._memo.get(key)
        if value is None:
            value = compute()
            value.setflags(write=False)
            self._memo[key] = value
        return value

    @property
    def n_ended(self) -> int:
        """Jobs ended so far (completed or rejected)."""
        return len(self._state.records)

    def ended_since(self, index: int) -> tuple[JobRecord, ...]:
        """Records of the jobs that ended after the first ``index`` (in end order): what a tracker has not seen."""
        return tuple(self._state.records[index:])

    def has_dataset(self, node: int, dataset_id: str) -> bool:
        """True when ``dataset_id`` is in the cache of node ``node``."""
        return dataset_id in self._state.caches[node]


PlacementRule = Callable[[View, Job], "np.ndarray | None"]
"""A placement rule: the ascending global GPU indices to start a job on now, or None when it does not fit.

Rules read only the attributes a :class:`View` has, so they also accept the projected states of
:mod:`envs.sim.profile`; :mod:`envs.placement` holds them.
"""


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v
